//! `splab advise`: seed 004's superpage heuristic (Figure 1) measured on a recorded trace
//! instead of estimated by a compiler (docs/advise.md).
//!
//! Seed 004 allocates superpages when the *spread* (distinct base pages touched by the working
//! set) is at least the *threshold* `(entries / associativity + 1) x base page` of the data TLB.
//! Here the spread is measured: every data access (not instruction fetches) of the trace is
//! attributed to the mapping it falls in (a region), and the trace's data accesses are cut into
//! windows of W consecutive accesses; a region's spread in a window is the number of distinct
//! base pages of it touched there. The program's spread in a window is the sum over regions
//! (Figure 1's `spread_all`).
//!
//! Layout: [`Analyzer`] is the pure analysis (events in, [`Analysis`] out; tests drive it
//! through the CLI), [`Analysis::text`], [`Analysis::json`] and [`Analysis::hints`] the outputs,
//! [`run`] the command (argument checks, progress, files). Nothing here models the OS: it is
//! trace bookkeeping, hence not in splab-sim's `vm/` or `hw/`.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

use crate::cli::Output;
use anyhow::{anyhow, Result};
use serde_json::{json, Value};
use splab_sim::report::group;
use splab_sim::units::fmt_size;
use splab_sim::{hw, SimError};
use splab_trace::{AccessKind, MmapFlags, TraceError, TraceEvent, TraceReader};

/// The default window is this many data accesses per threshold page (docs/advise.md, "The
/// window"): 64 = the 64-byte lines of a 4KB page. A region visited at one access per line or
/// more per page (any sequential stream) touches fewer than `threshold` pages in such a window;
/// one whose accesses scatter over more pages than that needs more TLB reach than the TLB has.
pub const ACCESSES_PER_THRESHOLD_PAGE: u64 = 64;

/// glibc's default `M_MMAP_THRESHOLD` (`DEFAULT_MMAP_THRESHOLD_MIN`, 128KB): a request whose
/// chunk size `nb` reaches it is served by its own `mmap` (sysmalloc).
pub const GLIBC_MMAP_THRESHOLD: u64 = 128 * 1024;

/// The largest request glibc serves from the heap with the default threshold:
/// `request2size(s) = round_up(s + 8, 16) < 131072` holds up to s = 131048.
pub const GLIBC_HEAP_MAX_REQUEST: u64 = GLIBC_MMAP_THRESHOLD - 24;

/// The request sizes `s` whose glibc mmapped chunk is a mapping of `len` bytes (x86-64 glibc,
/// SIZE_SZ 8, MALLOC_ALIGNMENT 16 == CHUNK_HDR_SZ): `nb = request2size(s) = round_up(s + 8,
/// 16)` and sysmalloc_mmap's `size = ALIGN_UP(nb + SIZE_SZ, pagesize)`, so `len =
/// round_up(round_up(s + 8, 16) + 8, 4096)`, i.e. `s` in `[len - 4119, len - 24]`, and the
/// mmap path needs `nb >= 128K` (s >= 131049). None when no request gives `len`.
pub fn glibc_mmap_request_range(len: u64) -> Option<(u64, u64)> {
    if !len.is_multiple_of(4096) || len < 8192 {
        return None;
    }
    let lo = (len - 4119).max(GLIBC_HEAP_MAX_REQUEST + 1);
    let hi = len - 24;
    (lo <= hi).then_some((lo, hi))
}

/// What a region is, from the event that made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The brk heap of a process (`Brk` events), with the `morecore` mappings glibc made when
    /// Valgrind refused a `brk` (docs/replay.md, "Valgrind's heap cap").
    Heap,
    /// A private anonymous mapping: a malloc'd large block, or the program's own mmap.
    Anon,
    AnonShared,
    /// The main stack or a mapping made with MAP_STACK / MAP_GROWSDOWN.
    Stack,
    File,
    FileShared,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Heap => "heap",
            Kind::Anon => "anon",
            Kind::AnonShared => "anon-shared",
            Kind::Stack => "stack",
            Kind::File => "file",
            Kind::FileShared => "file-shared",
        }
    }
}

/// A cheap hasher for the u64 keys of the page tables (chunk numbers).
#[derive(Default)]
struct Mix(u64);

impl Hasher for Mix {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (v ^ self.0)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29);
    }
}

type MixMap<K, V> = HashMap<K, V, BuildHasherDefault<Mix>>;

/// Pages per chunk of a region's page-stamp table.
const CHUNK_PAGES: u64 = 512;
/// Offsets of the `morecore` mappings of a heap region start here (the brk part uses offsets
/// from 0: the heap cannot reach 1TB).
const MORECORE_OFFSETS: u64 = 1 << 40;

/// One region: a mapping (or the heap) of one process, with its counts.
pub struct Region {
    pub pid: u32,
    pub kind: Kind,
    pub file: Option<u32>,
    /// The address it was made at (the heap: its start).
    pub start: u64,
    /// Its length when made, rounded up to pages (the heap: 0).
    pub len: u64,
    /// The largest extent it had: for the heap, the largest brk extent plus its `morecore`
    /// mappings; for a mapping grown by mremap, the largest length.
    pub max_len: u64,
    /// Heap: bytes of `morecore` mappings, and how many.
    pub morecore_bytes: u64,
    pub morecore: u32,
    /// Moved or resized by mremap (glibc's realloc of a large block).
    pub mremapped: bool,
    /// A copy made by a fork (the parent made the allocation; the child did not).
    pub inherited: bool,
    /// Made with MAP_FIXED.
    pub fixed: bool,
    /// For a private anonymous, non-fixed mapping: its rank (1-based) among the process's
    /// such mappings of the same length, in mmap order (the `nth` of a hint).
    pub nth: u32,
    pub accesses: u64,
    /// Distinct base pages touched over the whole trace.
    pub distinct: u64,
    /// (spread, data accesses of the region) of each window in which it was touched.
    pub windows: Vec<(u64, u64)>,
    win_pages: u64,
    win_acc: u64,
    in_win: bool,
    next_off: u64,
    chunks: MixMap<u64, u32>,
}

impl Region {
    fn new(pid: u32, kind: Kind, start: u64, len: u64) -> Region {
        Region {
            pid,
            kind,
            file: None,
            start,
            len,
            max_len: len,
            morecore_bytes: 0,
            morecore: 0,
            mremapped: false,
            inherited: false,
            fixed: false,
            nth: 0,
            accesses: 0,
            distinct: 0,
            windows: Vec::new(),
            win_pages: 0,
            win_acc: 0,
            in_win: false,
            next_off: if kind == Kind::Heap {
                MORECORE_OFFSETS
            } else {
                len
            },
            chunks: MixMap::default(),
        }
    }
}

/// A live interval of an address space: `[start, end)` is `region` from offset `off`.
#[derive(Clone, Copy)]
struct Iv {
    end: u64,
    region: u32,
    off: u64,
}

#[derive(Clone, Copy)]
struct Heap {
    start: u64,
    end: u64,
    region: u32,
}

/// One process image's address space.
#[derive(Default)]
struct Space {
    map: BTreeMap<u64, Iv>,
    heap: Option<Heap>,
    /// The interval of the last lookup: (start, end, region, off); start > end when empty.
    cache: (u64, u64, u32, u64),
}

const NO_CACHE: (u64, u64, u32, u64) = (u64::MAX, 0, 0, 0);

#[derive(Clone, Copy)]
struct PidState {
    space: usize,
    /// A vfork child running in its parent's space (until its Exec or Exit).
    vforked: bool,
}

/// The analysis parameters.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// log2 of the machine's base page size (the pages counted).
    pub page_shift: u32,
    /// log2 of the trace's page size (mapping lengths round up to it).
    pub trace_page: u64,
    /// Data accesses per window.
    pub window: u64,
}

/// Events in, per-region and per-window counts out.
pub struct Analyzer {
    cfg: Config,
    pub regions: Vec<Region>,
    spaces: Vec<Space>,
    pids: HashMap<u32, PidState>,
    last_pid: (u32, usize),
    pool: Vec<[u32; CHUNK_PAGES as usize]>,
    /// Direct-mapped cache (region, chunk) -> pool index.
    ccache: Vec<(u32, u64, u32)>,
    /// The window being filled, 0-based; page stamps hold `window + 1`.
    window: u32,
    win_count: u64,
    win_list: Vec<u32>,
    /// (spread_all, data accesses) per window.
    pub program_windows: Vec<(u64, u64)>,
    pub data_accesses: u64,
    pub ifetches: u64,
    /// Data accesses outside every mapping (the vDSO, Valgrind's own pages, ...).
    pub unattributed: u64,
    /// A direct-mapped cache of pages: what the last access to a base page found (its region
    /// and its stamp's place), valid while `epoch` is (any change of a mapping bumps it).
    pcache: Vec<PageHit>,
    epoch: u32,
    anon_lens: HashMap<(u32, u64), u32>,
    pub files: HashMap<u32, String>,
}

const CCACHE: usize = 1024;
const PCACHE: usize = 1024;

/// An entry of the page cache.
#[derive(Clone, Copy, Default)]
struct PageHit {
    vpage: u64,
    space: u32,
    /// 0: empty (epochs start at 1).
    epoch: u32,
    region: u32,
    pool: u32,
    slot: u32,
}

impl Analyzer {
    pub fn new(cfg: Config) -> Analyzer {
        Analyzer {
            cfg,
            regions: Vec::new(),
            spaces: Vec::new(),
            pids: HashMap::new(),
            last_pid: (u32::MAX, usize::MAX),
            pool: Vec::new(),
            ccache: vec![(u32::MAX, 0, 0); CCACHE],
            window: 0,
            win_count: 0,
            win_list: Vec::new(),
            program_windows: Vec::new(),
            data_accesses: 0,
            ifetches: 0,
            unattributed: 0,
            pcache: vec![PageHit::default(); PCACHE],
            epoch: 1,
            anon_lens: HashMap::new(),
            files: HashMap::new(),
        }
    }

    fn new_space(&mut self) -> usize {
        self.spaces.push(Space {
            cache: NO_CACHE,
            ..Default::default()
        });
        self.spaces.len() - 1
    }

    fn space(&mut self, pid: u32) -> usize {
        if self.last_pid.0 == pid {
            return self.last_pid.1;
        }
        let s = match self.pids.get(&pid) {
            Some(p) => p.space,
            None => {
                let s = self.new_space();
                self.pids.insert(
                    pid,
                    PidState {
                        space: s,
                        vforked: false,
                    },
                );
                s
            }
        };
        self.last_pid = (pid, s);
        s
    }

    fn round(&self, len: u64) -> u64 {
        let p = self.cfg.trace_page;
        len.div_ceil(p).saturating_mul(p)
    }

    fn add_region(&mut self, r: Region) -> u32 {
        self.regions.push(r);
        (self.regions.len() - 1) as u32
    }

    /// Removes `[a, b)` from space `s`'s intervals, keeping the parts outside it.
    fn unmap(&mut self, s: usize, a: u64, b: u64) {
        self.epoch = self.epoch.wrapping_add(1).max(1);
        let sp = &mut self.spaces[s];
        sp.cache = NO_CACHE;
        if a >= b {
            return;
        }
        let hit: Vec<(u64, Iv)> = sp
            .map
            .range(..b)
            .rev()
            .take_while(|(_, iv)| iv.end > a)
            .map(|(k, iv)| (*k, *iv))
            .collect();
        for (start, iv) in hit {
            sp.map.remove(&start);
            if start < a {
                sp.map.insert(
                    start,
                    Iv {
                        end: a,
                        region: iv.region,
                        off: iv.off,
                    },
                );
            }
            if iv.end > b {
                sp.map.insert(
                    b,
                    Iv {
                        end: iv.end,
                        region: iv.region,
                        off: iv.off + (b - start),
                    },
                );
            }
        }
    }

    fn map(&mut self, s: usize, a: u64, b: u64, region: u32, off: u64) {
        self.unmap(s, a, b);
        if a < b {
            self.spaces[s].map.insert(
                a,
                Iv {
                    end: b,
                    region,
                    off,
                },
            );
        }
    }

    #[inline]
    fn lookup(&mut self, s: usize, va: u64) -> Option<(u32, u64)> {
        let sp = &mut self.spaces[s];
        let c = sp.cache;
        if va >= c.0 && va < c.1 {
            return Some((c.2, c.3 + (va - c.0)));
        }
        let (&start, iv) = sp.map.range(..=va).next_back()?;
        if iv.end <= va {
            return None;
        }
        sp.cache = (start, iv.end, iv.region, iv.off);
        Some((iv.region, iv.off + (va - start)))
    }

    #[inline]
    fn mark(&mut self, rid: u32) {
        let r = &mut self.regions[rid as usize];
        if !r.in_win {
            r.in_win = true;
            self.win_list.push(rid);
        }
    }

    /// Stamps page `page` (a page offset in region `rid`) with the current window; returns
    /// where its stamp is (pool index, slot).
    #[inline]
    fn touch(&mut self, rid: u32, page: u64) -> (u32, u32) {
        let chunk = page / CHUNK_PAGES;
        let slot = (chunk as usize ^ (rid as usize).wrapping_mul(0x9E37)) % CCACHE;
        let c = self.ccache[slot];
        let idx = if c.0 == rid && c.1 == chunk {
            c.2
        } else {
            let pool = &mut self.pool;
            let idx = *self.regions[rid as usize]
                .chunks
                .entry(chunk)
                .or_insert_with(|| {
                    pool.push([0; CHUNK_PAGES as usize]);
                    (pool.len() - 1) as u32
                });
            self.ccache[slot] = (rid, chunk, idx);
            idx
        };
        let slot = (page % CHUNK_PAGES) as u32;
        self.stamp(rid, idx, slot);
        (idx, slot)
    }

    #[inline]
    fn stamp(&mut self, rid: u32, idx: u32, slot: u32) {
        let stamp = &mut self.pool[idx as usize][slot as usize];
        let cur = self.window + 1;
        if *stamp != cur {
            let r = &mut self.regions[rid as usize];
            if *stamp == 0 {
                r.distinct += 1;
            }
            *stamp = cur;
            r.win_pages += 1;
            self.mark(rid);
        }
    }

    fn flush_window(&mut self) {
        let mut total = 0;
        for rid in std::mem::take(&mut self.win_list) {
            let r = &mut self.regions[rid as usize];
            r.windows.push((r.win_pages, r.win_acc));
            total += r.win_pages;
            r.win_pages = 0;
            r.win_acc = 0;
            r.in_win = false;
        }
        self.program_windows.push((total, self.win_count));
        self.window += 1;
        self.win_count = 0;
    }

    /// One data access of `size` bytes at `va` by `pid`.
    #[inline]
    pub fn access(&mut self, pid: u32, va: u64, size: u32) {
        if self.win_count == self.cfg.window {
            self.flush_window();
        }
        self.win_count += 1;
        self.data_accesses += 1;
        let s = self.space(pid);
        let shift = self.cfg.page_shift;
        let p0 = va >> shift;
        let p1 = va.saturating_add(size.max(1) as u64 - 1) >> shift;
        let ci = ((p0 ^ (p0 >> 10) ^ (s as u64).wrapping_mul(0x9E37)) as usize) % PCACHE;
        let e = self.pcache[ci];
        if e.vpage == p0 && e.space == s as u32 && e.epoch == self.epoch {
            let r = &mut self.regions[e.region as usize];
            r.accesses += 1;
            r.win_acc += 1;
            // The region is in this window's list if its page's stamp is current; else
            // `stamp` puts it there.
            self.stamp(e.region, e.pool, e.slot);
            if p1 == p0 {
                return;
            }
        } else {
            match self.lookup(s, va) {
                Some((rid, off)) => {
                    let r = &mut self.regions[rid as usize];
                    r.accesses += 1;
                    r.win_acc += 1;
                    self.mark(rid);
                    let (pool, slot) = self.touch(rid, off >> shift);
                    self.pcache[ci] = PageHit {
                        vpage: p0,
                        space: s as u32,
                        epoch: self.epoch,
                        region: rid,
                        pool,
                        slot,
                    };
                }
                None => self.unattributed += 1,
            }
        }
        // The further pages of an access that crosses page boundaries (at most 64: a split
        // XSAVE area is the largest access a recording has).
        for p in p0 + 1..=p1.min(p0 + 64) {
            if let Some((rid, off)) = self.lookup(s, p << shift) {
                self.touch(rid, off >> shift);
            }
        }
    }

    /// One event of the trace.
    pub fn event(&mut self, ev: &TraceEvent) {
        match *ev {
            TraceEvent::Access {
                pid,
                va,
                kind,
                size,
                ..
            } => {
                if kind == AccessKind::Ifetch {
                    self.ifetches += 1;
                } else {
                    self.access(pid.0, va.0, size);
                }
            }
            TraceEvent::Mmap {
                pid,
                addr,
                len,
                flags,
                file,
                ..
            } => {
                let s = self.space(pid.0);
                let len = self.round(len);
                let (a, b) = (addr.0, addr.0.saturating_add(len));
                if flags.contains(MmapFlags::MORECORE) {
                    if let Some(h) = self.spaces[s].heap {
                        let r = &mut self.regions[h.region as usize];
                        let off = r.next_off;
                        r.next_off += len;
                        r.morecore += 1;
                        r.morecore_bytes += len;
                        r.max_len = r.max_len.max((h.end - h.start) + r.morecore_bytes);
                        self.map(s, a, b, h.region, off);
                        return;
                    }
                }
                let shared = flags.contains(MmapFlags::SHARED);
                let kind =
                    if flags.contains(MmapFlags::STACK) || flags.contains(MmapFlags::GROWABLE) {
                        Kind::Stack
                    } else if file.is_some() || flags.contains(MmapFlags::FILE) {
                        if shared {
                            Kind::FileShared
                        } else {
                            Kind::File
                        }
                    } else if shared {
                        Kind::AnonShared
                    } else {
                        Kind::Anon
                    };
                let mut r = Region::new(pid.0, kind, a, len);
                r.file = file.map(|f| f.0);
                r.fixed = flags.contains(MmapFlags::FIXED);
                if kind == Kind::Anon && !r.fixed {
                    let n = self.anon_lens.entry((pid.0, len)).or_default();
                    *n += 1;
                    r.nth = *n;
                }
                let rid = self.add_region(r);
                self.map(s, a, b, rid, 0);
            }
            TraceEvent::Munmap { pid, addr, len } => {
                let s = self.space(pid.0);
                let len = self.round(len);
                self.unmap(s, addr.0, addr.0.saturating_add(len));
            }
            TraceEvent::Mremap {
                pid,
                old_addr,
                old_len,
                new_addr,
                new_len,
            } => {
                let s = self.space(pid.0);
                let (old_len, new_len) = (self.round(old_len), self.round(new_len));
                let found = self.lookup(s, old_addr.0);
                self.unmap(s, old_addr.0, old_addr.0.saturating_add(old_len));
                let rid = match found {
                    Some((rid, off)) => {
                        let r = &mut self.regions[rid as usize];
                        r.mremapped = true;
                        if r.kind == Kind::Heap {
                            // A morecore piece (offsets from MORECORE_OFFSETS): the heap grows
                            // by what the piece grew.
                            let grown = new_len.saturating_sub(old_len);
                            r.morecore_bytes += grown;
                            r.max_len += grown;
                        } else {
                            r.max_len = r.max_len.max(off.saturating_add(new_len));
                        }
                        r.next_off = r.next_off.max(off.saturating_add(new_len));
                        self.map(s, new_addr.0, new_addr.0.saturating_add(new_len), rid, off);
                        return;
                    }
                    None => self.add_region(Region::new(pid.0, Kind::Anon, new_addr.0, new_len)),
                };
                self.map(s, new_addr.0, new_addr.0.saturating_add(new_len), rid, 0);
            }
            TraceEvent::Brk { pid, new_end } => {
                let s = self.space(pid.0);
                match self.spaces[s].heap {
                    None => {
                        let rid = self.add_region(Region::new(pid.0, Kind::Heap, new_end.0, 0));
                        self.spaces[s].heap = Some(Heap {
                            start: new_end.0,
                            end: new_end.0,
                            region: rid,
                        });
                    }
                    Some(mut h) => {
                        let end = new_end.0.max(h.start);
                        self.unmap(s, h.start, h.end.max(end));
                        if end > h.start {
                            self.map(s, h.start, end, h.region, 0);
                        }
                        h.end = end;
                        self.spaces[s].heap = Some(h);
                        let r = &mut self.regions[h.region as usize];
                        r.max_len = r.max_len.max(end - h.start + r.morecore_bytes);
                    }
                }
            }
            TraceEvent::Fork { parent, child } => {
                let ps = self.space(parent.0);
                let cs = self.new_space();
                let mut copies: HashMap<u32, u32> = HashMap::new();
                let ivs: Vec<(u64, Iv)> =
                    self.spaces[ps].map.iter().map(|(k, v)| (*k, *v)).collect();
                let mut map = BTreeMap::new();
                for (start, iv) in ivs {
                    let nr = *copies
                        .entry(iv.region)
                        .or_insert_with(|| self.clone_region(iv.region, child.0));
                    map.insert(start, Iv { region: nr, ..iv });
                }
                let heap = self.spaces[ps].heap.map(|h| Heap {
                    region: *copies
                        .entry(h.region)
                        .or_insert_with(|| self.clone_region(h.region, child.0)),
                    ..h
                });
                self.spaces[cs].map = map;
                self.spaces[cs].heap = heap;
                self.pids.insert(
                    child.0,
                    PidState {
                        space: cs,
                        vforked: false,
                    },
                );
                self.last_pid = (u32::MAX, usize::MAX);
            }
            TraceEvent::Vfork { parent, child } => {
                let ps = self.space(parent.0);
                self.pids.insert(
                    child.0,
                    PidState {
                        space: ps,
                        vforked: true,
                    },
                );
                self.last_pid = (u32::MAX, usize::MAX);
            }
            TraceEvent::Exec { pid } => {
                let old = self.pids.get(&pid.0).copied();
                if let Some(p) = old {
                    if !p.vforked {
                        self.spaces[p.space] = Space {
                            cache: NO_CACHE,
                            ..Default::default()
                        };
                    }
                }
                let s = self.new_space();
                self.pids.insert(
                    pid.0,
                    PidState {
                        space: s,
                        vforked: false,
                    },
                );
                self.last_pid = (u32::MAX, usize::MAX);
                self.epoch = self.epoch.wrapping_add(1).max(1);
            }
            TraceEvent::Exit { pid } => {
                if let Some(p) = self.pids.remove(&pid.0) {
                    if !p.vforked {
                        self.spaces[p.space] = Space {
                            cache: NO_CACHE,
                            ..Default::default()
                        };
                    }
                }
                self.last_pid = (u32::MAX, usize::MAX);
                self.epoch = self.epoch.wrapping_add(1).max(1);
            }
            TraceEvent::FileOpen { file, ref name, .. } => {
                if let Some(n) = name {
                    self.files.insert(file.0, n.to_string());
                }
            }
            TraceEvent::Mprotect { .. }
            | TraceEvent::Madvise { .. }
            | TraceEvent::Compute { .. } => {}
        }
    }

    fn clone_region(&mut self, rid: u32, pid: u32) -> u32 {
        let o = &self.regions[rid as usize];
        let mut r = Region::new(pid, o.kind, o.start, o.len);
        r.file = o.file;
        r.max_len = o.max_len;
        r.morecore = o.morecore;
        r.morecore_bytes = o.morecore_bytes;
        r.next_off = o.next_off;
        r.fixed = o.fixed;
        r.inherited = true;
        self.add_region(r)
    }

    /// Closes the last (partial) window.
    pub fn finish(&mut self) {
        if self.win_count > 0 {
            self.flush_window();
        }
    }
}

/// The access-weighted quantile `q` (0.5: the median) of windows given as (spread, accesses):
/// the smallest spread such that windows of at most that spread hold at least a fraction `q` of
/// the accesses. 0 when there are no accesses.
pub fn weighted_quantile(windows: &[(u64, u64)], q: f64) -> u64 {
    let total: u64 = windows.iter().map(|w| w.1).sum();
    if total == 0 {
        return 0;
    }
    let mut w: Vec<(u64, u64)> = windows.to_vec();
    w.sort_unstable();
    let target = ((total as f64) * q).ceil().max(1.0) as u64;
    let mut acc = 0;
    for (s, a) in w {
        acc += a;
        if acc >= target {
            return s;
        }
    }
    0
}

/// The TLB array the threshold comes from.
#[derive(Clone, Debug)]
pub struct Threshold {
    pub machine: String,
    pub level: String,
    pub level_name: String,
    pub entries: u64,
    pub ways: u64,
    pub base_page: u64,
    pub pages: u64,
    /// The machine's smallest superpage size (None: it has none).
    pub superpage: Option<u64>,
}

impl Threshold {
    /// From a machine spec and `l1` or `last` (the last level of the data TLB hierarchy: the
    /// last shared level if any, else the L1 DTLB).
    pub fn of(machine: &str, level: &str) -> Result<Threshold> {
        let m = hw::Machine::from_spec(machine)?;
        let lv = match level {
            "l1" => &m.tlb.l1d,
            "last" => m.tlb.lower.last().unwrap_or(&m.tlb.l1d),
            other => {
                return Err(
                    SimError::BadInput(format!("--tlb-level {other}: expected l1 or last")).into(),
                )
            }
        };
        let arr = lv
            .arrays
            .iter()
            .find(|a| a.sizes.contains(&0))
            .ok_or_else(|| {
                SimError::BadInput(format!(
                    "machine {}: its {} TLB level ({}) has no array for the base page size",
                    m.name, level, lv.name
                ))
            })?;
        let (entries, ways) = (arr.entries as u64, arr.ways.max(1) as u64);
        let sizes = m.page_sizes();
        Ok(Threshold {
            machine: m.name.clone(),
            level: level.to_string(),
            level_name: lv.name.clone(),
            entries,
            ways,
            base_page: m.base_size(),
            pages: entries / ways + 1,
            superpage: sizes.get(1).copied(),
        })
    }

    pub fn bytes(&self) -> u64 {
        self.pages * self.base_page
    }

    /// "65 pages (260K) = (256 entries / 4 ways + 1) x 4K".
    pub fn formula(&self) -> String {
        format!(
            "{} pages ({}) = ({} entries / {} ways + 1) x {}",
            self.pages,
            fmt_size(self.bytes()),
            self.entries,
            self.ways,
            fmt_size(self.base_page),
        )
    }
}

/// A region's results.
pub struct RegionResult {
    pub id: usize,
    pub median: u64,
    pub max: u64,
    /// Share of the region's accesses in windows whose spread is at least the threshold.
    pub share: f64,
    pub superpages: bool,
    pub reason: String,
}

/// The analysis of a whole trace.
pub struct Analysis {
    pub trace: PathBuf,
    pub command: String,
    pub threshold: Threshold,
    pub window: u64,
    pub window_default: bool,
    pub a: Analyzer,
    pub results: Vec<RegionResult>,
    pub program_median: u64,
    pub program_max: u64,
    pub program_share: f64,
    pub program_superpages: bool,
}

fn share_at_least(windows: &[(u64, u64)], t: u64) -> f64 {
    let total: u64 = windows.iter().map(|w| w.1).sum();
    if total == 0 {
        return 0.0;
    }
    let above: u64 = windows.iter().filter(|w| w.0 >= t).map(|w| w.1).sum();
    above as f64 / total as f64
}

impl Analysis {
    pub fn new(
        trace: PathBuf,
        command: String,
        threshold: Threshold,
        window: u64,
        window_default: bool,
        mut a: Analyzer,
    ) -> Analysis {
        a.finish();
        let t = threshold.pages;
        let results = a
            .regions
            .iter()
            .enumerate()
            .map(|(id, r)| {
                let median = weighted_quantile(&r.windows, 0.5);
                let max = r.windows.iter().map(|w| w.0).max().unwrap_or(0);
                let (superpages, reason) = if r.accesses == 0 {
                    (false, "no data accesses".to_string())
                } else if median < t {
                    (
                        false,
                        format!("spread median {median} < threshold {t} pages: the TLB covers it"),
                    )
                } else {
                    match threshold.superpage {
                        None => (false, "the machine has no superpage size".to_string()),
                        Some(sp) if r.max_len < sp => (
                            false,
                            format!(
                                "spread median {median} >= {t}, but {} < a {} superpage",
                                fmt_size_round(r.max_len),
                                fmt_size(sp)
                            ),
                        ),
                        Some(sp) => (
                            true,
                            format!(
                                "spread median {median} >= threshold {t} pages, size >= {}",
                                fmt_size(sp)
                            ),
                        ),
                    }
                };
                RegionResult {
                    id,
                    median,
                    max,
                    share: share_at_least(&r.windows, t),
                    superpages,
                    reason,
                }
            })
            .collect();
        let program_median = weighted_quantile(&a.program_windows, 0.5);
        Analysis {
            trace,
            command,
            window,
            window_default,
            program_max: a.program_windows.iter().map(|w| w.0).max().unwrap_or(0),
            program_share: share_at_least(&a.program_windows, t),
            program_superpages: a.data_accesses > 0 && program_median >= t,
            program_median,
            threshold,
            a,
            results,
        }
    }

    fn kind_text(&self, r: &Region) -> String {
        let mut k = r.kind.name().to_string();
        if let Some(f) = r.file {
            k += &format!(" {}", self.a.files.get(&f).map_or("?", |s| s.as_str()));
        }
        if r.morecore > 0 {
            k += &format!(" (+{} morecore)", r.morecore);
        }
        if r.inherited {
            k += " (fork copy)";
        }
        if r.mremapped {
            k += " (mremap)";
        }
        k
    }

    /// The hint lines (and comments) for smalloc's LD_PRELOAD mode.
    pub fn hint_lines(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut push = |out: &mut Vec<String>, comment: String, line: Option<String>| {
            if let Some(l) = &line {
                if !seen.insert(l.clone()) {
                    return;
                }
            }
            out.push(comment);
            if let Some(l) = line {
                out.push(l);
            }
        };
        let regions = &self.a.regions;
        for res in self.results.iter().filter(|r| r.superpages) {
            let r = &regions[res.id];
            let what = format!(
                "# pid {} {:#x} {} {}: spread median {} >= {}",
                r.pid,
                r.start,
                self.kind_text(r),
                fmt_size_round(r.max_len),
                res.median,
                self.threshold.pages
            );
            match r.kind {
                Kind::Heap => push(
                    &mut out,
                    format!(
                        "{what}; the brk heap holds glibc's small allocations: every request below \
                         the mmap threshold (128K: round_up(s + 8, 16) < 131072, s <= {GLIBC_HEAP_MAX_REQUEST})"
                    ),
                    Some(format!("superpages size=0..{GLIBC_HEAP_MAX_REQUEST}")),
                ),
                Kind::Anon if !r.inherited && !r.fixed => {
                    let Some((lo, hi)) = glibc_mmap_request_range(r.len) else {
                        push(
                            &mut out,
                            format!(
                                "{what}; no glibc malloc request makes a mapping of {} bytes: no hint",
                                r.len
                            ),
                            None,
                        );
                        continue;
                    };
                    let same = self.a.anon_lens.get(&(r.pid, r.len)).copied().unwrap_or(1);
                    let all_deserve = same > 1
                        && self.results.iter().all(|o| {
                            let q = &regions[o.id];
                            !(q.kind == Kind::Anon
                                && !q.inherited
                                && !q.fixed
                                && q.pid == r.pid
                                && q.len == r.len)
                                || o.superpages
                        });
                    let remap = if r.mremapped {
                        " (later resized by mremap: realloc; the hint names its first size)"
                    } else {
                        ""
                    };
                    let line = if same == 1 {
                        push(
                            &mut out,
                            format!(
                                "{what}; mapping of {} bytes = a glibc malloc of {lo}..{hi} bytes{remap}",
                                r.len
                            ),
                            Some(format!("superpages size={lo}..{hi}")),
                        );
                        continue;
                    } else if all_deserve {
                        (
                            format!(
                                "{what}; mapping of {} bytes = a glibc malloc of {lo}..{hi} bytes; all {same} \
                                 mappings of this length deserve superpages{remap}",
                                r.len
                            ),
                            format!("superpages size={lo}..{hi}"),
                        )
                    } else {
                        (
                            format!(
                                "{what}; mapping of {} bytes = a glibc malloc of {lo}..{hi} bytes, the {} of \
                                 {same} such mappings{remap}",
                                r.len,
                                ordinal(r.nth)
                            ),
                            format!("superpages size={lo}..{hi} nth={}", r.nth),
                        )
                    };
                    push(&mut out, line.0, Some(line.1));
                }
                _ => push(
                    &mut out,
                    format!(
                        "{what}; not a malloc allocation ({}): no hint",
                        if r.inherited {
                            "a fork's copy of its parent's memory"
                        } else if r.fixed {
                            "mapped at a fixed address"
                        } else {
                            r.kind.name()
                        }
                    ),
                    None,
                ),
            }
        }
        out
    }

    /// The hints file: header comments, then [`Analysis::hint_lines`].
    pub fn hints(&self) -> String {
        let t = &self.threshold;
        let mut s = String::new();
        s += "# splab advise hints for smalloc's LD_PRELOAD mode (docs/advise.md)\n";
        s += &format!(
            "# trace: {} (command: {})\n",
            self.trace.display(),
            self.command
        );
        s += &format!(
            "# machine: {}, {} TLB level {}: threshold {}\n",
            t.machine,
            t.level,
            t.level_name,
            t.formula()
        );
        s += &format!(
            "# window: {} data accesses; a region deserves superpages when its access-weighted median \
             spread is >= the threshold and it is at least one superpage ({})\n",
            self.window,
            t.superpage.map_or("none".into(), fmt_size)
        );
        s += "# sizes: glibc x86-64, mmap length L = round_up(round_up(s + 8, 16) + 8, 4096) for a request s >= 131049\n";
        let lines = self.hint_lines();
        if !lines.iter().any(|l| l.starts_with("superpages")) {
            s += "# no allocation deserves superpages\n";
        }
        for l in lines {
            s += &l;
            s.push('\n');
        }
        s
    }

    fn listed(&self) -> impl Iterator<Item = (&Region, &RegionResult)> {
        self.results
            .iter()
            .map(|res| (&self.a.regions[res.id], res))
            .filter(|(r, _)| r.accesses > 0)
    }

    /// The table for people.
    pub fn text(&self) -> String {
        let t = &self.threshold;
        let a = &self.a;
        let mut s = String::new();
        s += &format!(
            "splab advise: {} ({})\n",
            self.trace.display(),
            self.command
        );
        s += &format!(
            "  data accesses {} (instruction fetches not counted: {}); outside every mapping {}\n",
            group(a.data_accesses),
            group(a.ifetches),
            group(a.unattributed)
        );
        s += &format!(
            "  threshold     {}: (entries / associativity + 1) x base page (seed 004 section 4) \
             of {}'s {} data TLB level ({}), its {} array\n",
            t.formula(),
            t.machine,
            t.level,
            t.level_name,
            fmt_size(t.base_page)
        );
        if t.entries == t.ways {
            s += "                (a fully associative array: the formula gives 2 pages; seed 004 derived it for set-associative TLBs)\n";
        }
        s += &format!(
            "  window        {} data accesses{}; {} windows\n",
            group(self.window),
            if self.window_default {
                format!(" ({ACCESSES_PER_THRESHOLD_PAGE} x threshold, the default; --window N)")
            } else {
                String::new()
            },
            group(a.program_windows.len() as u64)
        );
        s += &format!(
            "  superpage     {} (the machine's smallest); spread = distinct {} pages of a region in a window, \
             med = access-weighted median over windows\n\n",
            t.superpage.map_or("none".into(), fmt_size),
            fmt_size(t.base_page)
        );
        s += &format!(
            "{:>7} {:<33} {:<24} {:>7} {:>13} {:>8} {:>6} {:>6} {:>5}  {:<11} reason\n",
            "pid", "region", "kind", "size", "accesses", "pages", "med", "max", ">=T", "verdict"
        );
        for (r, res) in self.listed() {
            s += &format!(
                "{:>7} {:<33} {:<24} {:>7} {:>13} {:>8} {:>6} {:>6} {:>4.0}%  {:<11} {}\n",
                r.pid,
                format!("{:#x}-{:#x}", r.start, r.start.saturating_add(r.max_len)),
                truncate(&self.kind_text(r), 24),
                fmt_size_round(r.max_len),
                group(r.accesses),
                group(r.distinct),
                res.median,
                res.max,
                100.0 * res.share,
                if res.superpages {
                    "superpages"
                } else {
                    "base pages"
                },
                res.reason
            );
        }
        let silent = a.regions.iter().filter(|r| r.accesses == 0).count();
        if silent > 0 {
            s += &format!(
                "  ({silent} regions without data accesses not listed; --json lists every region)\n"
            );
        }
        s += &format!(
            "\nprogram-wide (seed 004 Figure 1: spread_all = the sum over regions per window): median {}, max {}, \
             {:.0}% of accesses in windows >= {} -> {}\n",
            self.program_median,
            self.program_max,
            100.0 * self.program_share,
            t.pages,
            if self.program_superpages {
                "superpages"
            } else {
                "base pages"
            }
        );
        s += "allocation sites: the trace does not record malloc call sites (only mappings and accesses); \
              regions are mapped back to glibc request sizes (--hints-out)\n";
        s
    }

    pub fn json(&self) -> Value {
        let t = &self.threshold;
        let regions: Vec<Value> = self
            .results
            .iter()
            .map(|res| {
                let r = &self.a.regions[res.id];
                json!({
                    "pid": r.pid,
                    "start": r.start,
                    "end": r.start.saturating_add(r.max_len),
                    "kind": r.kind.name(),
                    "file": r.file.and_then(|f| self.a.files.get(&f).cloned()),
                    "size_bytes": r.max_len,
                    "mapped_bytes": r.len,
                    "morecore_mappings": r.morecore,
                    "mremapped": r.mremapped,
                    "fork_copy": r.inherited,
                    "nth_of_length": r.nth,
                    "accesses": r.accesses,
                    "distinct_pages": r.distinct,
                    "windows_touched": r.windows.len(),
                    "spread_median": res.median,
                    "spread_max": res.max,
                    "share_at_or_above_threshold": res.share,
                    "verdict": if res.superpages { "superpages" } else { "base pages" },
                    "reason": res.reason,
                })
            })
            .collect();
        json!({
            "trace": self.trace.display().to_string(),
            "command": self.command,
            "machine": t.machine,
            "tlb": {
                "level": t.level,
                "name": t.level_name,
                "entries": t.entries,
                "ways": t.ways,
                "base_page_bytes": t.base_page,
            },
            "threshold": {
                "pages": t.pages,
                "bytes": t.bytes(),
                "formula": t.formula(),
            },
            "superpage_bytes": t.superpage,
            "window": {
                "accesses": self.window,
                "default": self.window_default,
                "windows": self.a.program_windows.len(),
            },
            "data_accesses": self.a.data_accesses,
            "ifetches": self.a.ifetches,
            "unattributed_accesses": self.a.unattributed,
            "regions": regions,
            "program": {
                "spread_median": self.program_median,
                "spread_max": self.program_max,
                "share_at_or_above_threshold": self.program_share,
                "verdict": if self.program_superpages { "superpages" } else { "base pages" },
            },
            "allocation_sites": "not recorded: a splab trace has no malloc call sites",
            "hints": self.hint_lines().into_iter().filter(|l| !l.starts_with('#')).collect::<Vec<_>>(),
        })
    }
}

fn ordinal(n: u32) -> String {
    let suf = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suf}")
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let t: String = s.chars().take(n - 1).collect();
        t + "~"
    }
}

/// A size for the table: exact with a suffix when it is a multiple, else KB rounded.
fn fmt_size_round(b: u64) -> String {
    let s = fmt_size(b);
    if s.len() <= 7 {
        s
    } else if b >= 10 << 20 {
        format!("{}M", b >> 20)
    } else {
        format!("{}K", b.div_ceil(1024))
    }
}

// ---------------------------------------------------------------------------------------------
// The command

/// `splab advise`'s flags (the command's help is the doc comment in cli.rs).
#[derive(clap::Args, Clone, Debug)]
pub struct AdviseArgs {
    /// The recorded trace, as a workload: trace:path=FILE.spt.
    #[arg(short, long)]
    pub workload: String,
    /// Machine whose data TLB sets the threshold (a preset or file:PATH.toml; `splab list
    /// machines`).
    #[arg(short, long, default_value = "skylake")]
    pub machine: String,
    /// Which data TLB level the threshold comes from: the last level for data (the shared
    /// STLB where there is one, else the L1 DTLB), or the L1 DTLB.
    #[arg(long, value_name = "l1|last", value_parser = ["l1", "last"], default_value = "last")]
    pub tlb_level: String,
    /// Data accesses per window (counts take K/M/G, decimal). Default: 64 x the threshold in
    /// pages (4,160 on core2, 8,256 on skylake): docs/advise.md "The window".
    #[arg(long, value_name = "N")]
    pub window: Option<String>,
    /// Write a hints file for smalloc's LD_PRELOAD mode: `superpages size=MIN..MAX [nth=K]`
    /// lines for the allocations that deserve superpages.
    #[arg(long, value_name = "FILE")]
    pub hints_out: Option<String>,
    /// Also write the analysis as JSON to PATH ("-" for standard output; the table then goes to
    /// stderr). Fields: docs/advise.md "JSON".
    #[arg(long, value_name = "PATH")]
    pub json: Option<String>,
    /// No progress line.
    #[arg(short, long)]
    pub quiet: bool,
}

fn bad(msg: String) -> anyhow::Error {
    SimError::BadInput(msg).into()
}

fn trace_err(e: TraceError) -> anyhow::Error {
    if e.is_bad_input() {
        bad(format!("advise: {e}"))
    } else {
        anyhow!("advise: {e}")
    }
}

/// The trace path of `-w trace:path=FILE`.
pub fn trace_path(workload: &str) -> Result<PathBuf> {
    let mut spec = splab_sim::spec::Spec::parse("workload", workload)?;
    if spec.name != "trace" {
        return Err(bad(format!(
            "advise: workload '{}': advise reads a recorded trace, -w trace:path=FILE.spt \
             (splab record makes one)",
            spec.name
        )));
    }
    let path = spec.take_str("path").ok_or_else(|| {
        bad("workload 'trace': parameter 'path' is required, e.g. trace:path=ls.spt".into())
    })?;
    // The replay's parameters are valid for `splab run`, so "unknown parameter (valid: path)"
    // would contradict `splab list workloads`: say why advise takes none of them.
    for key in ["skip", "limit", "heap"] {
        if spec.take_str(key).is_some() {
            return Err(bad(format!(
                "advise: workload 'trace': parameter '{key}' is a replay parameter of `splab run`; \
                 advise reads the whole trace and takes only path= (record a part with \
                 splab record --start-after N / --max-accesses N / --roi)"
            )));
        }
    }
    spec.finish()?;
    Ok(PathBuf::from(path))
}

/// `splab advise`.
pub fn run(args: &AdviseArgs) -> Result<()> {
    let path = trace_path(&args.workload)?;
    let threshold = Threshold::of(&args.machine, &args.tlb_level)?;
    let (window, window_default) = match &args.window {
        None => (ACCESSES_PER_THRESHOLD_PAGE * threshold.pages, true),
        Some(w) => match splab_sim::spec::parse_count(w.trim()) {
            Some(0) => {
                return Err(bad(
                    "--window 0: a window holds at least one data access (e.g. --window 4096)"
                        .into(),
                ))
            }
            Some(n) => (n, false),
            None => {
                return Err(bad(format!(
                    "--window {w}: expected a count of data accesses such as 4096, 10K or 1M"
                )))
            }
        },
    };
    let mut reader = TraceReader::open(&path).map_err(trace_err)?;
    if args.json.as_deref() == Some("-") && args.hints_out.as_deref() == Some("-") {
        return Err(bad(
            "--json - and --hints-out -: only one of them can go to standard output".into(),
        ));
    }
    crate::cli::distinct_outputs(&[
        ("--json", args.json.as_deref()),
        ("--hints-out", args.hints_out.as_deref()),
    ])?;
    let json = Output::open("--json", args.json.as_deref())?;
    let hints = Output::open("--hints-out", args.hints_out.as_deref())?;
    let expected = splab_trace::read_header_and_trailer(&path)
        .ok()
        .map(|(_, t)| t.accesses);
    if let Some(e) = expected {
        // Page stamps are 32-bit window numbers.
        if e / window >= u32::MAX as u64 - 1 {
            return Err(bad(format!(
                "--window {window}: {e} accesses would make more than 4G windows; give a larger window"
            )));
        }
    }
    let page = (reader.header().page_size_hint as u64).max(1);
    let command = reader.header().command.clone();
    let mut a = Analyzer::new(Config {
        page_shift: threshold.base_page.trailing_zeros(),
        trace_page: if page.is_power_of_two() { page } else { 4096 },
        window,
    });
    let show = !args.quiet && std::io::stderr().is_terminal();
    let start = Instant::now();
    let mut last = Instant::now();
    // The reader decodes on one thread while the analysis runs on this one (decoding is about
    // half the work: docs/advise.md "Speed"); batches of events go over a channel and their
    // buffers come back for reuse.
    let (full_tx, full_rx) = std::sync::mpsc::sync_channel::<Vec<TraceEvent>>(4);
    let (empty_tx, empty_rx) = std::sync::mpsc::channel::<Vec<TraceEvent>>();
    for _ in 0..6 {
        let _ = empty_tx.send(Vec::with_capacity(1 << 16));
    }
    let read_result = std::thread::scope(|sc| {
        let reading = sc.spawn(move || -> std::result::Result<(), TraceError> {
            while let Ok(mut buf) = empty_rx.recv() {
                buf.clear();
                let res = reader.read_batch(&mut buf, 1 << 16);
                let done = matches!(res, Ok(0));
                if !buf.is_empty() && full_tx.send(buf).is_err() {
                    return Ok(());
                }
                res?;
                if done {
                    return Ok(());
                }
            }
            Ok(())
        });
        for buf in full_rx.iter() {
            for ev in &buf {
                a.event(ev);
            }
            let _ = empty_tx.send(buf);
            if show && last.elapsed().as_millis() >= 250 {
                last = Instant::now();
                let secs = start.elapsed().as_secs_f64();
                let done = a.data_accesses + a.ifetches;
                let pct = expected
                    .filter(|&e| e > 0)
                    .map(|e| format!("{:.0}% ", 100.0 * (done as f64 / e as f64).min(1.0)))
                    .unwrap_or_default();
                eprint!(
                    "\rsplab advise: {pct}{:.0}M accesses, {:.0}M/s, {secs:.0}s\x1b[K",
                    done as f64 / 1e6,
                    done as f64 / secs / 1e6
                );
                let _ = std::io::stderr().flush();
            }
        }
        // The reader never panics (splab-trace's contract); if it did, so do we.
        reading
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    });
    if show {
        eprint!("\r\x1b[K");
    }
    read_result.map_err(|e| trace_err(e.in_file(&path)))?;
    let analysis = Analysis::new(path, command, threshold, window, window_default, a);
    let to_stderr = args.json.as_deref() == Some("-") || args.hints_out.as_deref() == Some("-");
    let text = analysis.text();
    if to_stderr {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    if let Some(o) = hints {
        o.write(&analysis.hints())?;
    }
    if let Some(o) = json {
        o.write(&(serde_json::to_string_pretty(&analysis.json())? + "\n"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glibc_request_range_round_trips() {
        // The relation from glibc malloc.c (request2size, sysmalloc_mmap), checked by brute force.
        let mapped = |s: u64| (((s + 8 + 15) & !15) + 8).div_ceil(4096) * 4096;
        for len in [135_168u64, 1 << 21, (64 << 20) + 4096, 3 << 20] {
            let (lo, hi) = glibc_mmap_request_range(len).unwrap();
            assert_eq!(mapped(lo), len);
            assert_eq!(mapped(hi), len);
            if lo > GLIBC_HEAP_MAX_REQUEST + 1 {
                assert_ne!(mapped(lo - 1), len);
            }
            assert_ne!(mapped(hi + 1), len);
        }
        assert_eq!(
            glibc_mmap_request_range(64 << 20),
            Some(((64 << 20) - 4119, (64 << 20) - 24))
        );
        assert_eq!(glibc_mmap_request_range(4096), None);
        // A 128K mapping is no malloc's: the requests it would fit (up to 131048 bytes) are
        // below the mmap threshold and served from the heap (cargo-mutants: the bound's + 1).
        assert_eq!(glibc_mmap_request_range(128 << 10), None);
        assert_eq!(
            glibc_mmap_request_range(132 << 10),
            Some((GLIBC_HEAP_MAX_REQUEST + 1, (132 << 10) - 24))
        );
    }

    #[test]
    fn weighted_median_follows_the_accesses() {
        assert_eq!(weighted_quantile(&[(10, 1), (100, 3)], 0.5), 100);
        assert_eq!(weighted_quantile(&[(10, 3), (100, 1)], 0.5), 10);
        assert_eq!(weighted_quantile(&[(10, 2), (100, 2)], 0.5), 10);
        assert_eq!(weighted_quantile(&[], 0.5), 0);
    }

    #[test]
    fn core2_threshold_is_65_pages() {
        let t = Threshold::of("core2", "last").unwrap();
        assert_eq!(
            (t.entries, t.ways, t.pages, t.bytes()),
            (256, 4, 65, 65 * 4096)
        );
        assert_eq!(t.superpage, Some(4 << 20));
        let s = Threshold::of("skylake", "last").unwrap();
        assert_eq!(s.pages, 1536 / 12 + 1);
        assert_eq!(Threshold::of("skylake", "l1").unwrap().pages, 64 / 4 + 1);
    }
}
