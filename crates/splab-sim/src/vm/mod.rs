//! The VM subsystem: processes, address spaces (map entries), memory objects, page tables, the
//! fault handler and the memory system calls. `Os` owns the hardware model it drives (TLB
//! shootdowns, walks) and physical memory.
//!
//! Architecture invariant: the VM does no I/O and is deterministic. Storage I/O is modelled as a
//! cost, never performed.
//!
//! The policy enters at the five events of a superpage's life (seed 003): `alloc_frame`
//! (physical allocation), the preparation in `populate`, mapping creation after a page is entered
//! (`after_populate`), mapping destruction in `unmap_range` / `protect_range`, and deallocation
//! in `free_frame`.

pub mod object;
pub mod pmap;
pub mod stats;

mod check;
pub mod compact;
pub mod compact_skip;
pub mod contig;
pub mod deferred_split;
pub mod dirty;
mod fault;
pub mod faultaround;
pub mod file;
pub mod fork;
pub mod fragment;
pub mod khugepaged;
pub mod kmem;
pub mod latency;
pub mod memmap;
mod mremap;
pub mod mthp;
pub mod pageout;
pub mod pageq;
pub mod pagesize;
pub mod placement;
pub mod prepare;
pub mod ptpages;
mod reserve;
mod simplify;
mod softfast;
pub mod swap;
pub mod thp;

pub use check::Touched;
pub use fault::AccessStats;

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use crate::error::{Result, SimError};
use crate::hw::{Hw, Machine};
use crate::phys::PhysMem;
use crate::policy::{Placement, Policy};
use crate::units::{Pfn, Pid, Prot};
pub use object::{ObjId, ObjKind, VmObject};
pub use pmap::{Pmap, Pte};
pub use stats::VmStats;

/// mmap flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct MapFlags(pub u8);

impl MapFlags {
    pub const ANON: MapFlags = MapFlags(0);
    pub const SHARED: MapFlags = MapFlags(1);
    pub const FILE: MapFlags = MapFlags(2);
    pub const FIXED: MapFlags = MapFlags(4);
    pub const STACK: MapFlags = MapFlags(8);
    pub const GROWABLE: MapFlags = MapFlags(16);
    pub const fn has(self, f: MapFlags) -> bool {
        self.0 & f.0 == f.0 && f.0 != 0
    }
    pub const fn with(self, f: MapFlags) -> MapFlags {
        MapFlags(self.0 | f.0)
    }
}

/// An mmap request.
#[derive(Clone, Copy, Debug, Default)]
pub struct MmapReq {
    /// Address hint (with FIXED: the exact address).
    pub addr: u64,
    pub len: u64,
    pub prot: Prot,
    pub flags: MapFlags,
    pub file: u32,
    /// Byte offset into the file.
    pub offset: u64,
}

impl MmapReq {
    /// `len` bytes of private anonymous read-write memory, placed by the OS.
    pub fn anon(len: u64) -> MmapReq {
        MmapReq {
            addr: 0,
            len,
            prot: Prot::RW,
            flags: MapFlags::ANON,
            file: 0,
            offset: 0,
        }
    }
}

/// madvise advice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Advice {
    DontNeed,
    Free,
    HugePage,
    NoHugePage,
    Collapse,
}

/// A map entry (VMA): `[start, end)` of one process mapped to an object from page `pgoff`.
#[derive(Clone, Debug)]
pub struct Vma {
    pub start: u64,
    pub end: u64,
    pub prot: Prot,
    pub flags: MapFlags,
    pub obj: ObjId,
    /// Object page index of `start`.
    pub pgoff: u64,
    /// For a private file mapping, or a private anonymous one written after fork under a
    /// policy with reservations (vm/fork.rs): the anonymous object holding its written (copied)
    /// pages, over `obj`.
    pub shadow: Option<ObjId>,
    /// FreeBSD's MAP_ENTRY_NEEDS_COPY: `obj` is shared with another process since fork, and
    /// the entry's first write gives it a shadow object if it still is (vm/fork.rs).
    pub needs_copy: bool,
    /// MADV_HUGEPAGE / MADV_NOHUGEPAGE state, for policies that honour it.
    pub hugepage_advice: Option<bool>,
}

impl Vma {
    #[inline]
    pub fn private(&self) -> bool {
        !self.flags.has(MapFlags::SHARED)
    }
}

#[derive(Clone, Debug)]
pub struct Process {
    pub pid: Pid,
    /// Map entries by start address; disjoint.
    pub vmas: BTreeMap<u64, Vma>,
    pub pmap: Pmap,
    /// The page-table pages of `pmap` (real, wired frames).
    pub pt: ptpages::PtDir,
    pub brk_start: u64,
    pub brk_end: u64,
    /// The process's u-area (wired kernel frames, vm/kmem.rs).
    pub uarea: Vec<Pfn>,
    /// `prctl(PR_SET_THP_DISABLE)` (Linux's MMF_DISABLE_THP): no THP for this process, at a
    /// fault, by khugepaged or MADV_COLLAPSE; inherited by fork (prctl(2)).
    pub thp_disabled: bool,
}

impl Process {
    /// The map entry containing `va`.
    #[inline]
    pub fn vma_at(&self, va: u64) -> Option<&Vma> {
        self.vmas
            .range(..=va)
            .next_back()
            .map(|(_, v)| v)
            .filter(|v| va < v.end)
    }
}

/// The processes by pid, indexed directly (pids are small and handed out in order): the access
/// path looks its process up once per access without hashing. Iteration is in pid order.
#[derive(Clone, Debug, Default)]
pub struct ProcTable {
    by_pid: Vec<Option<Box<Process>>>,
    len: usize,
}

impl ProcTable {
    #[inline(always)]
    pub fn get(&self, pid: &u32) -> Option<&Process> {
        self.by_pid.get(*pid as usize)?.as_deref()
    }
    #[inline(always)]
    pub fn get_mut(&mut self, pid: &u32) -> Option<&mut Process> {
        self.by_pid.get_mut(*pid as usize)?.as_deref_mut()
    }
    pub fn contains_key(&self, pid: &u32) -> bool {
        self.get(pid).is_some()
    }
    /// Inserts `p` as `pid`; returns the process it replaced, if any.
    pub fn insert(&mut self, pid: u32, p: Process) -> Option<Process> {
        let i = pid as usize;
        if i >= self.by_pid.len() {
            self.by_pid.resize_with(i + 1, || None);
        }
        let old = self.by_pid[i].replace(Box::new(p)).map(|b| *b);
        if old.is_none() {
            self.len += 1;
        }
        old
    }
    pub fn remove(&mut self, pid: &u32) -> Option<Process> {
        let old = self.by_pid.get_mut(*pid as usize)?.take().map(|b| *b);
        if old.is_some() {
            self.len -= 1;
        }
        old
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn iter(&self) -> impl Iterator<Item = (&u32, &Process)> + '_ {
        self.by_pid
            .iter()
            .filter_map(|p| p.as_deref())
            .map(|p| (&p.pid.0, p))
    }
    pub fn values(&self) -> impl Iterator<Item = &Process> + '_ {
        self.by_pid.iter().filter_map(|p| p.as_deref())
    }
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Process> + '_ {
        self.by_pid.iter_mut().filter_map(|p| p.as_deref_mut())
    }
    pub fn keys(&self) -> impl Iterator<Item = &u32> + '_ {
        self.values().map(|p| &p.pid.0)
    }
}

impl std::ops::Index<&u32> for ProcTable {
    type Output = Process;
    fn index(&self, pid: &u32) -> &Process {
        self.get(pid).expect("ProcTable: no process with this pid")
    }
}

impl<'a> IntoIterator for &'a ProcTable {
    type Item = (&'a u32, &'a Process);
    type IntoIter = Box<dyn Iterator<Item = (&'a u32, &'a Process)> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

/// A file known to the OS: its size and its page-cache object.
#[derive(Clone, Debug)]
pub struct FileEntry {
    pub size: u64,
    pub obj: ObjId,
}

pub struct Os {
    pub machine: Machine,
    pub policy: Policy,
    pub hw: Hw,
    pub phys: PhysMem,
    pub procs: ProcTable,
    pub objects: Vec<Option<VmObject>>,
    free_objs: Vec<u32>,
    pub files: FxHashMap<u32, FileEntry>,
    pub stats: VmStats,
    pub acc: AccessStats,
    next_pid: u32,
    /// Top of the mmap area and start of the heap (address-space layout).
    pub mmap_top: u64,
    pub heap_base: u64,
    pub user_top: u64,
    /// Orders of the size classes, cached from the machine.
    pub orders: Vec<u8>,
    /// The page shift of each size class (`machine.page_shifts`, 0 past them), in a fixed
    /// array indexed by the class's low four bits: the access path reads it without the
    /// vector's bounds check (the machine does not change after `new`).
    shift_of: [u8; 16],
    /// On a guest machine (nested paging), the size class of the host's page: a TLB entry holds
    /// no larger a page (a larger guest page is splintered, `Os::splinter`). `u8::MAX` on a
    /// native machine.
    pub host_class: u8,
    /// Reservations, when the policy reserves.
    pub reserv: Option<crate::reserv::Reservs>,
    /// On a guest machine with scattered host placement, where the host's frames backing guest
    /// memory lie (hw/host_frames.rs): the data lines and struct-page lines the caches see are
    /// their host frames'. None: native, or identity placement.
    host_frames: Option<crate::hw::host_frames::HostFrames>,
    /// Physical minus virtual address of the page `hw.tlb.last` translates: the host-physical
    /// address on a guest with scattered host placement (a TLB entry's page lies within one
    /// host page: `host_class`), as the caches see it.
    pa_delta: u64,
    /// The access being made is a sequential run's, served by the stream prefetcher.
    streaming: bool,
    /// Whether files' pages start cached (`--page-cache`).
    pub page_cache: object::PageCache,
    /// The page queues and reverse map (vm/pageq.rs), the page daemon's state
    /// (vm/pageout.rs) and the backing store of evicted pages (vm/swap.rs).
    pub pageq: pageq::PageQueues,
    pub pageout: pageout::Pageout,
    pub backing: swap::Backing,
    /// Contiguity-aware replacement and the wired pool (vm/contig.rs).
    pub contig: contig::ContigState,
    /// Linux THP counters and khugepaged's cursor (vm/thp.rs, vm/khugepaged.rs).
    pub thp: thp::ThpState,
    /// HP-UX's page-size selection counters (vm/pagesize.rs).
    pub pagesize: pagesize::PagesizeStats,
    /// Shadow objects made after fork and collapsed (vm/fork.rs).
    pub fork: fork::ForkStats,
    /// Memory compaction and kcompactd's requests (vm/compact.rs).
    pub compact: compact::CompactState,
    /// Open files and their I/O state (vm/file.rs).
    pub fileio: file::FileIo,
    /// Dirty superpages' write-out and msync (vm/dirty.rs; seed 000 4.7, 6.7).
    pub dirty: dirty::DirtyState,
    /// The fragmenter set up before the workload (`--frag`, vm/fragment.rs), if any.
    pub fragmenter: Option<fragment::Fragmenter>,
    /// Frames queued for the next base-page allocations (vm/placement.rs).
    pub placement: placement::Placement,
}

impl Os {
    pub fn new(machine: Machine, policy: Policy) -> Os {
        let frames = machine.frames();
        let phys = PhysMem::new(frames, machine.max_order());
        let machine_swap_pages = machine.storage.swap_bytes >> machine.base_shift();
        let pageout = pageout::Pageout {
            targets: pageout::Targets::freebsd(frames, frames, machine.base_size()),
            ..Default::default()
        };
        let hw = Hw::new(&machine);
        let host_class = machine
            .nested
            .as_ref()
            .and_then(|n| machine.page_shifts.iter().position(|&x| x == n.page_shift))
            .map_or(u8::MAX, |c| c as u8);
        let host_frames = machine
            .nested
            .as_ref()
            .and_then(|n| n.host_frames(machine.mem_bytes));
        let dirty = dirty::DirtyState::new(
            policy
                .reserv()
                .map_or(crate::policy::Dirty::Trap, |r| r.dirty),
            frames,
        );
        let orders: Vec<u8> = (0..machine.page_shifts.len())
            .map(|c| machine.order_of(c))
            .collect();
        // Address-space layout: the heap low, mmaps top-down from below the stack gap, like
        // Linux's legacy-free layout (mm/util.c mmap_base).
        let user_top = if machine.va_bits <= 32 {
            0xC000_0000
        } else {
            1u64 << (machine.va_bits - 1)
        };
        let mmap_top = user_top - (user_top >> 4);
        let heap_base = if machine.va_bits <= 32 {
            0x1000_0000
        } else {
            user_top >> 8
        };
        let n = machine.page_shifts.len();
        assert!(n <= 16, "at most 16 page sizes");
        let mut shift_of = [0u8; 16];
        shift_of[..n].copy_from_slice(&machine.page_shifts);
        let stats = VmStats {
            promotions: vec![0; n],
            demotions: vec![0; n],
            mapped_peak: vec![0; n],
            ..Default::default()
        };
        Os {
            machine,
            policy,
            hw,
            phys,
            procs: ProcTable::default(),
            objects: Vec::new(),
            free_objs: Vec::new(),
            files: FxHashMap::default(),
            stats,
            acc: AccessStats::default(),
            next_pid: 1,
            mmap_top,
            heap_base,
            user_top,
            reserv: None,
            orders,
            shift_of,
            host_class,
            host_frames,
            pa_delta: 0,
            streaming: false,
            page_cache: object::PageCache::Warm,
            pageq: pageq::PageQueues::new(frames),
            pageout,
            backing: swap::Backing::new(machine_swap_pages),
            contig: contig::ContigState::default(),
            thp: thp::ThpState::default(),
            pagesize: pagesize::PagesizeStats::default(),
            fork: fork::ForkStats::default(),
            compact: compact::CompactState::default(),
            fileio: file::FileIo::default(),
            dirty,
            fragmenter: None,
            placement: placement::Placement::default(),
        }
        .with_reservations()
        .with_mobility_grouping()
    }

    /// Turns the buddy allocator's mobility grouping on if the policy asks
    /// (`Policy::mobility_grouping`), with pageblocks of the THP's order (`pageblock_order` is
    /// `HUGETLB_PAGE_ORDER` on x86-64, the PMD's order), and Linux's largest buddy order one
    /// above it (x86-64: `MAX_ORDER` 11, so order 10 = 4MB = `pageblock_order + 1`).
    fn with_mobility_grouping(mut self) -> Os {
        if self.policy.mobility_grouping {
            let pb = self.hpage_order();
            if pb > 0 {
                self.phys.buddy.enable_grouping(pb, pb + 1);
            }
        }
        self
    }

    fn with_reservations(mut self) -> Os {
        if let Some(r) = self.policy.reserv() {
            self.reserv = Some(crate::reserv::Reservs::new(
                r.lists,
                &self.orders,
                self.phys.frames(),
            ));
        }
        self
    }

    #[inline]
    pub fn base_shift(&self) -> u8 {
        self.shift_of[0]
    }

    /// The page shift of size class `c` (`machine.page_shifts[c]`).
    #[inline(always)]
    pub(crate) fn shift_of(&self, c: crate::units::SizeClass) -> u8 {
        debug_assert!((c.0 as usize) < self.machine.page_shifts.len());
        self.shift_of[c.0 as usize & 15]
    }

    fn proc_mut(&mut self, pid: Pid) -> Result<&mut Process> {
        self.procs
            .get_mut(&pid.0)
            .ok_or_else(|| SimError::InvalidEvent(format!("no process with pid {}", pid.0)))
    }

    pub fn proc(&self, pid: Pid) -> Result<&Process> {
        self.procs
            .get(&pid.0)
            .ok_or_else(|| SimError::InvalidEvent(format!("no process with pid {}", pid.0)))
    }

    pub fn obj(&self, id: ObjId) -> &VmObject {
        self.objects[id.0 as usize]
            .as_ref()
            .expect("Os::obj: dangling object id")
    }

    pub fn obj_mut(&mut self, id: ObjId) -> &mut VmObject {
        self.objects[id.0 as usize]
            .as_mut()
            .expect("Os::obj_mut: dangling object id")
    }

    fn new_object(&mut self, mut o: VmObject) -> ObjId {
        if self.reserv.is_some() && o.popmap.is_none() {
            o.popmap = Some(crate::reserv::popmap::PopMap::new(&self.orders));
        }
        if let Some(i) = self.free_objs.pop() {
            self.objects[i as usize] = Some(o);
            ObjId(i)
        } else {
            self.objects.push(Some(o));
            ObjId(self.objects.len() as u32 - 1)
        }
    }

    /// Drops one reference to an object; at zero its pages are released and it is destroyed.
    fn unref_object(&mut self, id: ObjId) {
        let o = self.obj_mut(id);
        o.refs -= 1;
        if o.refs > 0 {
            let shared_anon = o.kind == ObjKind::Anon && !o.one_mapping;
            if let (1, ObjKind::File { file }) = (o.refs, o.kind) {
                // The last mapping of a file went (seed 000 5.1 (3), vm/file.rs).
                self.file_unused(file);
            }
            if shared_anon {
                // Shared since a fork: a shadow left alone in front of it absorbs it.
                self.collapse_shadow(id);
            }
            return;
        }
        let pages = o.pages.all();
        for (pi, _) in pages {
            self.obj_remove(id, pi);
        }
        self.backing.drop_object(id);
        self.forget_cached_range(id, 0, u64::MAX);
        self.objects[id.0 as usize] = None;
        self.free_objs.push(id.0);
    }

    /// Creates a process with an empty address space; returns its pid.
    /// Out of memory only if no frame for its u-area can be had.
    pub fn spawn(&mut self) -> Result<Pid> {
        let uarea = self.alloc_uarea()?;
        let pid = Pid(self.next_pid);
        self.next_pid += 1;
        let p = Process {
            pid,
            vmas: BTreeMap::new(),
            pmap: Pmap::new(),
            pt: ptpages::PtDir::default(),
            brk_start: self.heap_base,
            brk_end: self.heap_base,
            uarea,
            thp_disabled: false,
        };
        self.procs.insert(pid.0, p);
        Ok(pid)
    }

    /// Registers a file (or updates its size).
    pub fn open_file(&mut self, file: u32, size: u64) {
        let pages = size.div_ceil(self.machine.base_size());
        if let Some(f) = self.files.get_mut(&file) {
            f.size = f.size.max(size);
            let obj = f.obj;
            let o = self.obj_mut(obj);
            o.size = o.size.max(pages);
            return;
        }
        let mut o = VmObject::new(ObjKind::File { file }, pages, false);
        o.refs = 1; // the file table's reference: the page cache outlives mappings
        let obj = self.new_object(o);
        self.files.insert(file, FileEntry { size, obj });
    }

    // ---- deallocation and allocation (events 1 and 5) ----

    // ---- mmap / munmap / mprotect / brk / madvise ----

    fn check_range(&self, what: &str, addr: u64, len: u64) -> Result<(u64, u64)> {
        let bs = self.machine.base_size();
        if !addr.is_multiple_of(bs) {
            return Err(SimError::InvalidEvent(format!(
                "{what}: address {addr:#x} is not aligned to the {bs}-byte base page"
            )));
        }
        if len == 0 {
            return Err(SimError::InvalidEvent(format!(
                "{what}: zero length at {addr:#x}"
            )));
        }
        let end = addr
            .checked_add(len.div_ceil(bs) * bs)
            .filter(|&e| e <= self.user_top)
            .ok_or_else(|| {
                SimError::InvalidEvent(format!(
                    "{what}: range {addr:#x}+{len:#x} is beyond the {}-bit user address space",
                    self.machine.va_bits
                ))
            })?;
        Ok((addr, end))
    }

    /// Finds a free range of `len` bytes below `mmap_top` whose address is `phase` modulo
    /// `align` (a power of two; `phase < align`), first fit from the top.
    fn find_gap(&self, p: &Process, len: u64, align: u64, phase: u64) -> Option<u64> {
        // The highest address <= hi - len that is congruent to `phase`.
        let place = |hi: u64| -> Option<u64> {
            let top = hi.checked_sub(len)?;
            let cand = (top & !(align - 1)) | phase;
            if cand <= top {
                Some(cand)
            } else {
                cand.checked_sub(align)
            }
        };
        let mut hi = self.mmap_top;
        for (_, v) in p.vmas.range(..self.mmap_top).rev() {
            if v.end <= hi {
                if let Some(cand) = place(hi) {
                    if cand >= v.end {
                        return Some(cand);
                    }
                }
            }
            hi = hi.min(v.start);
        }
        let cand = place(hi)?;
        (cand >= p.brk_end.max(self.heap_base) + (1 << 30).min(self.mmap_top / 4)).then_some(cand)
    }

    /// mmap: creates a mapping; returns its address.
    pub fn mmap(&mut self, pid: Pid, req: MmapReq) -> Result<u64> {
        let bs = self.machine.base_size();
        if req.len == 0 {
            return Err(SimError::InvalidEvent("mmap: zero length".into()));
        }
        let len = req.len.div_ceil(bs) * bs;
        if req.flags.has(MapFlags::FILE) && !req.offset.is_multiple_of(bs) {
            return Err(SimError::InvalidEvent(format!(
                "mmap: file offset {:#x} is not page aligned",
                req.offset
            )));
        }
        let addr = if req.flags.has(MapFlags::FIXED) {
            let (a, _) = self.check_range("mmap", req.addr, len)?;
            self.munmap(pid, a, len)?;
            a
        } else {
            let align = match self.policy.placement {
                Placement::BasePage => bs,
                // seed 000 5.3: align to the largest superpage not larger than the mapping.
                // Sizes the policy uses, so that a policy restricted to small sizes does not
                // scatter mappings at huge alignments.
                Placement::SuperpageAligned => {
                    let sizes = self.machine.page_sizes();
                    let allowed: Vec<u64> = match self.policy.reserv() {
                        Some(r) => r.classes.iter().map(|&c| sizes[c as usize]).collect(),
                        None => sizes[1..].to_vec(),
                    };
                    // The mapping must hold a whole superpage of the object: for a file mapped
                    // at `offset`, one that starts at a superpage boundary of the file
                    // (pmap_align_superpage skips sizes the mapping cannot hold after it).
                    let off = if req.flags.has(MapFlags::FILE) {
                        req.offset
                    } else {
                        0
                    };
                    allowed
                        .into_iter()
                        .filter(|&s| {
                            let lead = (s - (off & (s - 1))) & (s - 1);
                            len.checked_sub(lead).is_some_and(|rest| rest >= s)
                        })
                        .max()
                        .unwrap_or(bs)
                }
            };
            // A file mapping's pages line up with the object's superpage-aligned page runs only
            // if the address is congruent to the file offset modulo the superpage size
            // (FreeBSD pmap_align_superpage, called by vm_map_find for VMFS_SUPER_SPACE).
            let phase = if req.flags.has(MapFlags::FILE) {
                req.offset & (align - 1)
            } else {
                0
            };
            let p = self.proc(pid)?;
            self.find_gap(p, len, align, phase).ok_or_else(|| {
                SimError::OutOfMemory(format!(
                    "mmap: no {len:#x}-byte gap left in the address space of pid {}",
                    pid.0
                ))
            })?
        };
        let pages = len / bs;
        let (obj, pgoff, shadow) = if req.flags.has(MapFlags::FILE) {
            let need = req.offset + len;
            let known = self.files.get(&req.file).map(|f| f.size);
            if known.is_none_or(|s| s < need) {
                // A file mapped beyond its known size: the trace knows best; grow the file.
                self.open_file(req.file, known.unwrap_or(0).max(need));
            }
            let obj = self.files[&req.file].obj;
            self.obj_mut(obj).refs += 1;
            let shadow = if req.flags.has(MapFlags::SHARED) {
                None
            } else {
                let mut s = VmObject::new(ObjKind::Anon, self.obj(obj).size, false);
                s.refs = 1;
                Some(self.new_object(s))
            };
            (obj, req.offset / bs, shadow)
        } else {
            let growable = req.flags.has(MapFlags::GROWABLE) || req.flags.has(MapFlags::STACK);
            let mut o = VmObject::new(ObjKind::Anon, pages, growable);
            o.refs = 1;
            // FreeBSD: an anonymous object's colour makes its reservation boundaries match
            // superpage boundaries of the address it is mapped at.
            o.colour = (addr >> self.base_shift()) & ((1u64 << self.machine.max_order()) - 1);
            (self.new_object(o), 0, None)
        };
        let vma = Vma {
            start: addr,
            end: addr + len,
            prot: req.prot,
            flags: req.flags,
            obj,
            pgoff,
            shadow,
            needs_copy: false,
            hugepage_advice: None,
        };
        self.proc_mut(pid)?.vmas.insert(addr, vma);
        Ok(addr)
    }

    /// Splits the map entry containing `at` (if any starts before and ends after it) in two.
    fn split_vma(&mut self, pid: Pid, at: u64) -> Result<()> {
        let bs_shift = self.base_shift();
        let p = self.proc_mut(pid)?;
        let Some((&start, v)) = p.vmas.range(..at).next_back() else {
            return Ok(());
        };
        if v.end <= at || start == at {
            return Ok(());
        }
        let mut hi = v.clone();
        hi.start = at;
        hi.pgoff = v.pgoff + ((at - start) >> bs_shift);
        p.vmas.get_mut(&start).expect("split_vma").end = at;
        let (obj, shadow) = (hi.obj, hi.shadow);
        p.vmas.insert(at, hi);
        self.obj_mut(obj).refs += 1;
        if let Some(s) = shadow {
            self.obj_mut(s).refs += 1;
        }
        Ok(())
    }

    /// Start addresses of the map entries overlapping `[start, end)`, after splitting at both ends.
    fn isolate(&mut self, pid: Pid, start: u64, end: u64) -> Result<Vec<u64>> {
        // Event 4: no superpage may straddle a boundary where the entry splits (seed 000 4.6).
        self.demote_edges(pid, start, end);
        self.split_vma(pid, start)?;
        self.split_vma(pid, end)?;
        let p = self.proc(pid)?;
        Ok(p.vmas.range(start..end).map(|(&s, _)| s).collect())
    }

    /// Event 4, mapping destruction, and the release of a private range's pages: unmaps base
    /// pages `[start, end)` of a process from its page table and TLB. Pages of private
    /// anonymous objects (and shadows) in the range are released, since nothing can reach them
    /// again; shared and file pages stay with their objects.
    fn unmap_range(&mut self, pid: Pid, vma_start: u64, release: bool) -> Result<()> {
        let bs = self.base_shift();
        let v = self
            .proc(pid)?
            .vmas
            .get(&vma_start)
            .expect("unmap_range: vma")
            .clone();
        let (s, e) = (v.start >> bs, v.end >> bs);
        if release {
            self.demote_for_unmap(pid, s, e);
        }
        let p = self.procs.get_mut(&pid.0).expect("unmap_range: pid");
        // A superpage's dirty bit is its head entry's: every base page of a dirty superpage
        // leaves dirty (seed 000 4.7).
        let has_super = p.pmap.counts[1..].iter().any(|&n| n > 0);
        let dirty_runs: Vec<(u64, u64)> = if has_super {
            p.pmap
                .superpage_heads(s, e, &self.orders)
                .into_iter()
                .filter_map(|h| {
                    let pte = p.pmap.lookup(h)?;
                    pte.dirty()
                        .then(|| (h, h + (1u64 << self.orders[pte.size().0 as usize])))
                })
                .collect()
        } else {
            Vec::new()
        };
        let mut removed = 0u64;
        let mut dirtied = Vec::new();
        let mut run = 0;
        p.pmap.remove(s, e, |r| {
            removed += 1;
            // Entries come in increasing order, and so do the runs.
            while run < dirty_runs.len() && dirty_runs[run].1 <= r.vpn {
                run += 1;
            }
            let in_run = dirty_runs.get(run).is_some_and(|&(h, _)| r.vpn >= h);
            if r.dirty || in_run {
                dirtied.push(r.pfn);
            }
        });
        self.pt_reap(pid);
        self.hw.tlb.invalidate_range(pid.0, v.start, v.end);
        self.stats.cycles_kernel += removed * self.machine.cost.pte_write_cycles;
        if release {
            let first = v.pgoff;
            let last = v.pgoff + (e - s);
            // An object shared since fork keeps its pages for the other entries mapping them
            // (FreeBSD frees an unmapped range's pages only of an OBJ_ONEMAPPING object).
            let o = self.obj(v.obj);
            let anon_private = v.private() && o.kind == ObjKind::Anon && o.one_mapping;
            let targets: Vec<ObjId> = v
                .shadow
                .into_iter()
                .chain(anon_private.then_some(v.obj))
                .collect();
            // Pages of THPs freed here wait on the deferred split queue (vm/deferred_split.rs).
            self.thp.split.unmapping = true;
            for obj in targets {
                for (pi, _) in self.obj(obj).pages.range(first, last) {
                    self.obj_remove(obj, pi);
                }
                self.backing.free_swap_range(obj, first, last);
                self.forget_cached_range(obj, first, last);
            }
            self.thp.split.unmapping = false;
        }
        // Pages that stay with their object (shared, file) remember they were modified, for
        // the page daemon's write-out.
        for pfn in dirtied {
            if self.phys.refs(pfn) > 0 {
                self.pageq.set_flag(pfn, pageq::F_DIRTY, true);
            }
        }
        Ok(())
    }

    /// munmap: removes every mapping in `[addr, addr+len)`.
    pub fn munmap(&mut self, pid: Pid, addr: u64, len: u64) -> Result<()> {
        let (start, end) = self.check_range("munmap", addr, len)?;
        self.proc(pid)?;
        for vs in self.isolate(pid, start, end)? {
            self.unmap_range(pid, vs, true)?;
            let v = self.proc_mut(pid)?.vmas.remove(&vs).expect("munmap: vma");
            if let Some(s) = v.shadow {
                self.unref_object(s);
            }
            self.unref_object(v.obj);
        }
        Ok(())
    }

    /// mprotect: sets the protection of every mapping in the range. Permissions that are taken
    /// away are removed from the page table and TLB at once; permissions that are added are
    /// granted lazily, at the next fault.
    pub fn mprotect(&mut self, pid: Pid, addr: u64, len: u64, prot: Prot) -> Result<()> {
        let (start, end) = self.check_range("mprotect", addr, len)?;
        let bs = self.base_shift();
        let starts = self.isolate(pid, start, end)?;
        let mut covered = start;
        for &vs in &starts {
            let p = self.proc(pid)?;
            if vs > covered {
                break;
            }
            covered = p.vmas[&vs].end;
        }
        if covered < end {
            // Linux: ENOMEM when part of the range is unmapped; nothing changes in our model
            // beyond the splits, which are undone.
            self.simplify_entries(pid, start, end)?;
            return Err(SimError::InvalidEvent(format!(
                "mprotect: [{start:#x}, {end:#x}) is not entirely mapped in pid {}",
                pid.0
            )));
        }
        for vs in starts {
            let p = self.proc_mut(pid)?;
            let v = p.vmas.get_mut(&vs).expect("mprotect: vma");
            v.prot = prot;
            let (s, e) = (v.start, v.end);
            let changed = p.pmap.protect(s >> bs, e >> bs, prot);
            if changed > 0 {
                self.hw.tlb.invalidate_range(pid.0, s, e);
            }
            self.stats.cycles_kernel += changed * self.machine.cost.pte_write_cycles;
        }
        // FreeBSD vm_map_protect ends with vm_map_simplify_entry on each entry it changed.
        self.simplify_entries(pid, start, end)?;
        Ok(())
    }

    /// madvise. DONTNEED and FREE drop the pages of private anonymous memory (the next touch
    /// zero-fills); HUGEPAGE / NOHUGEPAGE are recorded for policies that honour them.
    pub fn madvise(&mut self, pid: Pid, addr: u64, len: u64, advice: Advice) -> Result<()> {
        let (start, end) = self.check_range("madvise", addr, len)?;
        let starts = self.isolate(pid, start, end)?;
        for vs in starts {
            match advice {
                Advice::DontNeed | Advice::Free => self.unmap_range(pid, vs, true)?,
                Advice::HugePage | Advice::NoHugePage => {
                    self.proc_mut(pid)?
                        .vmas
                        .get_mut(&vs)
                        .expect("madvise")
                        .hugepage_advice = Some(advice == Advice::HugePage);
                }
                Advice::Collapse => {}
            }
        }
        if advice == Advice::Collapse && self.policy.thp().is_some() {
            // Linux's MADV_COLLAPSE (vm/khugepaged.rs); other systems have none.
            let bs = self.base_shift();
            let c = self.madv_collapse(pid, start >> bs, end >> bs);
            self.stats.cycles_kernel += c;
        }
        // The range was split to apply the advice; FreeBSD's vm_map_madvise does not split for
        // DONTNEED / FREE and simplifies the entries whose behaviour it set: the pieces that
        // are alike again become one entry.
        self.simplify_entries(pid, start, end)?;
        Ok(())
    }

    /// brk: moves the end of the heap; returns the new break (the old one if refused, as Linux).
    pub fn brk(&mut self, pid: Pid, new_end: u64) -> Result<u64> {
        let p = self.proc(pid)?;
        let (start, old_end) = (p.brk_start, p.brk_end);
        if new_end < start || new_end > self.mmap_top {
            return Ok(old_end);
        }
        // The heap's map entry ends at the break's next base page, or further under HP-UX's
        // heap growth-rate adjustment (vm/pagesize.rs `heap_top`).
        let (old_top, new_top) = (self.heap_top(start, old_end), self.heap_top(start, new_end));
        if new_top > old_top {
            if p.vmas.range(old_top..new_top).next().is_some() {
                return Ok(old_end); // would run into another mapping
            }
            let heap = p
                .vmas
                .range(..=start)
                .next_back()
                .filter(|(&s, v)| s == start && v.end == old_top)
                .map(|(&s, v)| (s, v.obj));
            // Extend the heap's object in place only if no other map entry uses it (after an
            // mremap of part of the heap, its pages past the end belong to that entry).
            let heap = heap
                .filter(|&(_, obj)| self.obj(obj).refs == 1)
                .map(|(s, _)| s);
            match heap {
                Some(s) => {
                    let shift = self.base_shift();
                    let p = self.proc_mut(pid)?;
                    let v = p.vmas.get_mut(&s).expect("brk: heap");
                    v.end = new_top;
                    let (obj, shadow) = (v.obj, v.shadow);
                    let pages = (new_top - s) >> shift;
                    let o = self.obj_mut(obj);
                    o.size = o.size.max(pages);
                    // A heap written after fork has a shadow in front (vm/fork.rs).
                    if let Some(sh) = shadow {
                        let o = self.obj_mut(sh);
                        o.size = o.size.max(pages);
                    }
                }
                None => {
                    let req = MmapReq {
                        addr: old_top,
                        len: new_top - old_top,
                        prot: Prot::RW,
                        flags: MapFlags::FIXED.with(MapFlags::GROWABLE),
                        ..Default::default()
                    };
                    self.mmap(pid, req)?;
                }
            }
        } else if new_top < old_top {
            self.munmap(pid, new_top, old_top - new_top)?;
            // Keep the heap object's size in step with the heap (seed 000 4.2 caps growable
            // reservations at the object's current size).
            if let Some((&s, v)) = self
                .proc(pid)?
                .vmas
                .range(..=start)
                .next_back()
                .filter(|(&s, _)| s == start)
            {
                let (obj, shadow) = (v.obj, v.shadow);
                let pages = (v.end - s) >> self.base_shift();
                for o in std::iter::once(obj).chain(shadow) {
                    self.obj_mut(o).size = pages;
                }
            }
        }
        self.proc_mut(pid)?.brk_end = new_end;
        Ok(new_end)
    }

    fn teardown(&mut self, pid: Pid) -> Result<()> {
        let starts: Vec<(u64, u64)> = self
            .proc(pid)?
            .vmas
            .values()
            .map(|v| (v.start, v.end))
            .collect();
        for (s, e) in starts {
            self.munmap(pid, s, e - s)?;
        }
        self.hw.tlb.invalidate_asid(pid.0);
        self.hw.walker.invalidate_asid(pid.0);
        Ok(())
    }

    /// exit: tears the address space down and removes the process.
    pub fn exit(&mut self, pid: Pid) -> Result<()> {
        self.teardown(pid)?;
        if let Some(p) = self.procs.remove(&pid.0) {
            self.free_uarea(p.uarea);
        }
        Ok(())
    }

    /// exec: replaces the address space with an empty one (the new image's mappings follow as
    /// mmap events).
    pub fn exec(&mut self, pid: Pid) -> Result<()> {
        self.teardown(pid)?;
        let heap = self.heap_base;
        let p = self.proc_mut(pid)?;
        p.brk_start = heap;
        p.brk_end = heap;
        Ok(())
    }

    /// Footprint: frames held by objects, in bytes; the fragmenter's (`--frag`) not counted.
    pub fn footprint_bytes(&self) -> u64 {
        self.footprint_frames() << self.base_shift()
    }

    /// Frames held by objects (not the fragmenter's, vm/fragment.rs), and frames of THPs that programs unmapped but the deferred
    /// split queue still holds (vm/deferred_split.rs), and the zero pages once allocated
    /// (vm/thp.rs; counted once, whoever maps them): memory that is not free.
    pub fn footprint_frames(&self) -> u64 {
        self.phys.used_frames - self.fragmenter_frames()
            + self.thp.stats.split.queued_pages
            + self.zero_frames()
    }

    /// Bytes currently mapped by superpages, over all processes.
    pub fn superpage_bytes(&self) -> u64 {
        let bs = self.base_shift();
        self.procs
            .values()
            .map(|p| p.pmap.counts[1..].iter().sum::<u64>() << bs)
            .sum()
    }

    /// Updates the per-size mapped peaks and the footprint peak.
    pub fn note_peaks(&mut self) {
        let bs = self.base_shift();
        let n = self.orders.len();
        let mut now = vec![0u64; n];
        // The fragmenter's (`--frag`) pages are set-up, not the workload's.
        let frag = self.fragmenter.map(|f| f.pid);
        for p in self.procs.values().filter(|p| Some(p.pid) != frag) {
            for (c, v) in now.iter_mut().enumerate() {
                *v += p.pmap.counts[c] << bs;
            }
        }
        for (peak, &v) in self.stats.mapped_peak.iter_mut().zip(&now) {
            *peak = (*peak).max(v);
        }
        let sp: u64 = now[1..].iter().sum();
        self.stats.superpage_peak_bytes = self.stats.superpage_peak_bytes.max(sp);
        self.stats.footprint_peak_frames = self
            .stats
            .footprint_peak_frames
            .max(self.footprint_frames());
    }

    /// Every invariant of physical memory, objects, map entries, page tables and the TLB.
    pub fn check_invariants(&self) -> Result<()> {
        let inv = SimError::Invariant;
        self.phys.check_invariants().map_err(inv)?;
        self.hw.tlb.check_invariants().map_err(inv)?;
        self.hw.caches.check_invariants().map_err(inv)?;
        self.check_page_tables().map_err(inv)?;
        self.check_reservations()?;
        // Object reference counts and frame holds.
        let mut refs: FxHashMap<u32, u32> = FxHashMap::default();
        let mut holds: FxHashMap<u64, u32> = FxHashMap::default();
        for f in self.files.values() {
            *refs.entry(f.obj.0).or_default() += 1;
        }
        for p in self.procs.values() {
            self.check_map_entries(p)?;
            for v in p.vmas.values() {
                *refs.entry(v.obj.0).or_default() += 1;
                if let Some(sh) = v.shadow {
                    *refs.entry(sh.0).or_default() += 1;
                }
            }
            p.pmap
                .check_invariants(&self.orders)
                .map_err(|e| SimError::Invariant(format!("pid {}: {e}", p.pid.0)))?;
            // Every mapping is backed by a frame of the object it maps.
            for (vpn, pte) in p.pmap.entries() {
                self.check_mapping(p, vpn, pte)?;
            }
        }
        for (i, o) in self.objects.iter().enumerate() {
            let Some(o) = o else { continue };
            let want = refs.get(&(i as u32)).copied().unwrap_or(0);
            crate::ensure_inv!(
                o.refs == want,
                "object {i}: refs {} but {} references found",
                o.refs,
                want
            );
            for (_, pfn) in o.pages.all() {
                *holds.entry(pfn.0).or_default() += 1;
            }
        }
        for (&pfn, &n) in &holds {
            crate::ensure_inv!(
                self.phys.refs(Pfn(pfn)) == n,
                "frame {pfn}: held by {n} objects but refs = {}",
                self.phys.refs(Pfn(pfn))
            );
        }
        crate::ensure_inv!(
            holds.len() as u64 == self.phys.used_frames,
            "{} frames held by objects but used_frames = {}",
            holds.len(),
            self.phys.used_frames
        );
        // The zero pages (vm/thp.rs), once allocated, stay: wired, held by no object.
        if let Some(z) = self.thp.zero {
            let n = 1u64 << z.order;
            // Each frame of the huge one is looked up in the buddy allocator only if some frame
            // of it is free (`any_free`: one scan, where the lookups of 512 frames are most of
            // this check under the tests' full check).
            let huge_free = self.phys.buddy.any_free(z.huge, n);
            let frames = (z.huge.0..z.huge.0 + n).chain([z.base.0]);
            for f in frames {
                let huge = f >= z.huge.0 && f < z.huge.0 + n;
                let free = (huge_free || !huge) && self.phys.buddy.is_free(Pfn(f));
                crate::ensure_inv!(
                    self.phys.refs(Pfn(f)) == 0 && !free,
                    "zero page frame {f} is free or held by an object"
                );
            }
        }
        self.check_pageq()?;
        self.check_compaction().map_err(inv)?;
        self.check_folios()?;
        // TLB entries never translate what the page table does not.
        self.check_tlb_entries()
    }
}
