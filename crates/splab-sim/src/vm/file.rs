//! Files and I/O (issue 10): open / close / read / write / fsync on the page cache, and the
//! clustered read-ahead of file page-in, for read() and for faults on file mappings.
//!
//! The page cache is one object per file (vm/object.rs); read(), write() and file mappings
//! share its pages. A page is read from storage when it is not resident and has contents there:
//! it was evicted by the page daemon, or the cache started cold (`--page-cache cold`) and the
//! page is part of the file as it existed when the run first saw it. Pages a program wrote stay
//! cached until the page daemon evicts them, so reading a file back after writing it costs no
//! I/O.
//!
//! Reads from storage are clustered as FreeBSD clusters them; every cluster is one request to
//! the device: its latency once, then its bytes at the device's bandwidth
//! (`Machine::io_cycles`), counted in `io_read_requests` and `io_read_bytes`. Files are assumed
//! laid out contiguously on the device (FFS's `VOP_BMAP` finds every run contiguous), and the
//! file system's block is one base page.
//!
//! - **Faults on file mappings** (`fault_readahead`): FreeBSD `vm_fault` asks the pager for up
//!   to `VM_FAULT_READ_BEHIND` pages before the faulting one and `VM_FAULT_READ_AHEAD` after it,
//!   clipped to the map entry; `vm_fault_additional_pages` clips them further at the nearest
//!   cached page on each side and at the object's end; `vnode_pager_getpages` reads the run in
//!   one request and deactivates the pages not asked for (`vnode_pager_generic_getpages`).
//!   Not modelled: the map entry's `lastr` heuristic that turns read-behind into read-ahead for
//!   sequential faults (and caches the pages behind).
//! - **read()** (`file_read`): `vn_read`'s `sequential_heuristic` gives each open file a
//!   `seqcount` (1 at open; + one per 16KB read at the offset where the previous read ended, at
//!   most `IO_SEQMAX`; else back to 1, then 0); `ffs_read` reads block by block through
//!   `cluster_read`, which for a block not cached reads a cluster of up to the rest of the
//!   request (at most `MAXPHYS`) in one request, then read-ahead clusters up to `seqcount`
//!   blocks (at most `read_max`) past the block, and for a cached block carrying a read-ahead
//!   mark (`B_RAM`) starts the read-ahead at the first block not cached (marks go on the
//!   second and the last block of each cluster, or on a block read alone). The file's last
//!   block is read alone (`ffs_read` uses `bread` for it). Read-ahead is charged as if the
//!   process waited for it: the device time of asynchronous reads is not overlapped.
//! - **write()** (`file_write`): the pages become dirty in the cache (`bdwrite`, delayed
//!   write). A page written in part that has contents on storage is read first (`ffs_balloc`
//!   with `BA_CLRBUF` reads the block: one request); a write past the end grows the file.
//! - **Write-back**: dirty cache pages are written by the page daemon's laundering
//!   (vm/pageout.rs, one page a request) and by `fsync` (contiguous dirty pages clustered up to
//!   `MAXPHYS` a request, as `cluster_wbuild`), never at close (FreeBSD's `ffs` close writes
//!   nothing). FreeBSD's syncer, which writes delayed writes after 30 s (`syncdelay`), is not
//!   modelled. Pages dirtied through mappings are not written by `fsync` (that is msync's).
//! - **The copy** between the cache and the user buffer is charged as kernel work at the
//!   machine's page-copy cost (`copy_page_cycles`, the cost of a COW copy) per base page of data;
//!   the engine then touches the user buffer once per cache line (stores for read(), loads for
//!   write()), on the process's behalf, so its TLB misses, faults and cache misses count.
//! - **seed 000 5.1 (3)** (`close_deactivate`): "all clean pages backed by a file are moved to
//!   the inactive list as soon as the file is closed by all processes", here when no process
//!   has it open and no mapping of it remains.

use rustc_hash::FxHashMap;
use serde::Serialize;

use super::object::PageCache;
use super::pageq::{Queue, ACT_INIT, F_BUSY, F_DIRTY};
use super::{MapFlags, ObjId, ObjKind, Os, Vma};
use crate::error::{Result, SimError};
use crate::hw::core::cause;
use crate::units::{Pfn, Pid, Prot};

/// FreeBSD vm_fault.c: pages read after a faulting page (`VM_FAULT_READ_AHEAD`, 8 from 4.x to
/// 7.x).
pub const VM_FAULT_READ_AHEAD: u64 = 8;
/// FreeBSD vm_fault.c: pages read before it (`VM_FAULT_READ_BEHIND`, 7).
pub const VM_FAULT_READ_BEHIND: u64 = 7;
/// FreeBSD sys/param.h `MAXPHYS` (128KB): the largest I/O request; FFS's `mnt_iosize_max`,
/// which bounds a read cluster (`racluster`) and a write cluster.
pub const MAXPHYS: u64 = 128 << 10;
/// FreeBSD vfs_cluster.c `read_max` (sysctl vfs.read_max, 8 blocks): the read-ahead window.
pub const READ_MAX: u64 = 8;
/// FreeBSD sys/param.h `BKVASIZE` (16KB): the unit of `sequential_heuristic`'s count.
pub const BKVASIZE: u64 = 16 << 10;
/// FreeBSD sys/vnode.h `IO_SEQMAX` (0x7F): the cap of `f_seqcount`.
pub const IO_SEQMAX: u64 = 127;

/// An open file of a process (FreeBSD `struct file`): opens of the same file by the same
/// process share it (one offset history).
#[derive(Clone, Copy, Debug)]
struct OpenFile {
    count: u32,
    /// `f_nextoff`: where the last read ended.
    nextoff: u64,
    /// `f_seqcount`.
    seqcount: u64,
}

/// Counters of file events (the report's `memory.files`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct FileStats {
    pub opens: u64,
    pub closes: u64,
    pub reads: u64,
    pub writes: u64,
    pub fsyncs: u64,
    /// Bytes copied to user buffers by read() and from them by write().
    pub read_bytes: u64,
    pub written_bytes: u64,
    /// Pages read from storage beyond those asked for (read-behind and read-ahead).
    pub readahead_pages: u64,
    /// Clean pages moved to the inactive queue when their file was no longer in use (seed 000
    /// 5.1 (3)).
    pub deactivated_pages: u64,
}

/// The file table's I/O state.
#[derive(Clone, Debug, Default)]
pub struct FileIo {
    /// Open files by (pid, file id).
    opens: FxHashMap<(u32, u32), OpenFile>,
    /// Opens of each file over all processes.
    open_count: FxHashMap<u32, u32>,
    /// For files created by `open`: the pages that have contents on storage (the file's size
    /// at creation). Files known otherwise (trace `FileOpen`, mmap) have all their pages there.
    stored_pages: FxHashMap<u32, u64>,
    /// Read-ahead marks (`B_RAM`) by (object, page), with the frame that held the page when it
    /// was marked (a mark dies with its buffer: a page evicted and read again has none).
    ram: FxHashMap<(u32, u64), Pfn>,
    pub stats: FileStats,
}

impl FileIo {
    /// Opens of `file` by all processes.
    pub fn open_count(&self, file: u32) -> u32 {
        self.open_count.get(&file).copied().unwrap_or(0)
    }

    /// Whether `pid` has `file` open.
    pub fn is_open(&self, pid: Pid, file: u32) -> bool {
        self.opens.contains_key(&(pid.0, file))
    }

    fn stored(&self, file: u32, pindex: u64) -> bool {
        self.stored_pages.get(&file).is_none_or(|&n| pindex < n)
    }
}

impl Os {
    /// The page-cache object of `file` (for tests and workloads).
    pub fn file_object(&self, file: u32) -> Option<ObjId> {
        self.files.get(&file).map(|f| f.obj)
    }

    /// Whether page `pindex` of object `obj` must be read from storage: not resident, and with
    /// contents there (evicted, or cold-cache data of the file).
    pub fn page_needs_io(&self, obj: ObjId, pindex: u64) -> bool {
        let o = self.obj(obj);
        if o.pages.get(pindex).is_some() || self.is_free_cached(obj, pindex) {
            return false;
        }
        if self.backing.evicted(obj, pindex) {
            return true;
        }
        match o.kind {
            ObjKind::File { file } => {
                self.page_cache == PageCache::Cold && self.fileio.stored(file, pindex)
            }
            ObjKind::Anon => false,
        }
    }

    /// open(): `pid` opens `file`; a file not known yet is created with `size` bytes on
    /// storage (cached or not as `--page-cache` says). A known file keeps its size (a larger
    /// `size` grows it, as a trace's `FileOpen` does).
    pub fn file_open(&mut self, pid: Pid, file: u32, size: u64) -> Result<()> {
        self.proc(pid)?;
        // Its vnode and inode (vm/kmem.rs): wired kernel memory.
        self.vnode_for(file)?;
        if !self.files.contains_key(&file) {
            let pages = size.div_ceil(self.machine.base_size());
            self.fileio.stored_pages.insert(file, pages);
        }
        self.open_file(file, size);
        // FreeBSD kern_open: `fp->f_seqcount = 1`.
        let of = self.fileio.opens.entry((pid.0, file)).or_insert(OpenFile {
            count: 0,
            nextoff: 0,
            seqcount: 1,
        });
        of.count += 1;
        *self.fileio.open_count.entry(file).or_default() += 1;
        self.fileio.stats.opens += 1;
        Ok(())
    }

    /// close(): one open of `file` by `pid` ends. Writes nothing back (FreeBSD's `ffs` close
    /// does not); the last close of an unmapped file may deactivate its pages (5.1 (3)).
    pub fn file_close(&mut self, pid: Pid, file: u32) -> Result<()> {
        let Some(of) = self.fileio.opens.get_mut(&(pid.0, file)) else {
            return Err(self.not_open("close", pid, file));
        };
        of.count -= 1;
        if of.count == 0 {
            self.fileio.opens.remove(&(pid.0, file));
        }
        let n = self
            .fileio
            .open_count
            .get_mut(&file)
            .expect("file_close: open count");
        *n -= 1;
        if *n == 0 {
            self.fileio.open_count.remove(&file);
        }
        self.fileio.stats.closes += 1;
        self.file_unused(file);
        Ok(())
    }

    /// Closes every file `pid` has open (exit).
    pub fn files_exit(&mut self, pid: Pid) {
        let mine: Vec<(u32, u32)> = self
            .fileio
            .opens
            .iter()
            .filter(|(k, _)| k.0 == pid.0)
            .map(|(&k, o)| (k.1, o.count))
            .collect();
        for (file, count) in mine {
            for _ in 0..count {
                let _ = self.file_close(pid, file);
            }
        }
    }

    /// A forked child shares its parent's open files.
    pub fn files_fork(&mut self, parent: Pid, child: Pid) {
        let theirs: Vec<(u32, OpenFile)> = self
            .fileio
            .opens
            .iter()
            .filter(|(k, _)| k.0 == parent.0)
            .map(|(&k, &o)| (k.1, o))
            .collect();
        for (file, o) in theirs {
            self.fileio.opens.insert((child.0, file), o);
            *self.fileio.open_count.entry(file).or_default() += o.count;
        }
    }

    /// seed 000 5.1 (3): if `file` is neither open nor mapped, its clean pages on the active
    /// queue move to the inactive queue (when the policy says `close_deactivate`).
    pub(crate) fn file_unused(&mut self, file: u32) {
        if !self.policy.close_deactivate || self.fileio.open_count(file) > 0 {
            return;
        }
        let Some(obj) = self.file_object(file) else {
            return;
        };
        // The file table holds one reference; any other is a map entry.
        if self.obj(obj).refs > 1 {
            return;
        }
        for (_, pfn) in self.obj(obj).pages.all() {
            if self.pageq.queue_of(pfn) == Queue::Active
                && !self.pageq.flag(pfn, F_DIRTY)
                && !self.pageq.flag(pfn, F_BUSY)
                && !self.pageq.shared(pfn)
            {
                self.pageq.move_to(pfn, Queue::Inactive);
                self.fileio.stats.deactivated_pages += 1;
            }
        }
    }

    fn not_open(&self, what: &str, pid: Pid, file: u32) -> SimError {
        if self.files.contains_key(&file) {
            SimError::InvalidEvent(format!(
                "{what}: pid {} has no open file {file} (never opened, or closed)",
                pid.0
            ))
        } else {
            SimError::InvalidEvent(format!(
                "{what}: unknown file {file} (no open or mapping introduced it)"
            ))
        }
    }

    /// The checks common to read and write; returns the file's object.
    fn io_args(&self, what: &str, pid: Pid, file: u32, len: u64) -> Result<ObjId> {
        self.proc(pid)?;
        if !self.fileio.is_open(pid, file) {
            return Err(self.not_open(what, pid, file));
        }
        if len == 0 {
            return Err(SimError::InvalidEvent(format!(
                "{what}: zero length on file {file} by pid {}",
                pid.0
            )));
        }
        Ok(self.files[&file].obj)
    }

    /// A map entry standing for the kernel's view of a whole file, for allocation.
    fn file_vma(&self, obj: ObjId) -> Vma {
        Vma {
            start: 0,
            end: self.obj(obj).size << self.base_shift(),
            prot: Prot::READ,
            flags: MapFlags::FILE.with(MapFlags::SHARED),
            obj,
            pgoff: 0,
            shadow: None,
            needs_copy: false,
            hugepage_advice: None,
        }
    }

    /// Brings page `pindex` of `obj` into the cache in a fresh frame (its contents read by the
    /// caller's request, or none needed). A page the page daemon evicted counts as paged in.
    /// A cache page whose frame went back to the allocator (vm/contig.rs) is taken back
    /// instead, its contents intact.
    fn cache_insert(&mut self, pid: Pid, obj: ObjId, pindex: u64, v: &Vma) -> Result<Pfn> {
        if self.reactivate_cached(obj, pindex)? {
            return Ok(self.obj(obj).pages.get(pindex).expect("reactivated page"));
        }
        let pfn = self.alloc_frame(pid, obj, pindex, v)?;
        self.obj_insert(obj, pindex, pfn);
        // It arrives clean: its digest under dirty=hash (seed 000 4.7; vm/dirty.rs).
        let c = self.digest_clean(pfn);
        self.stats.cycles_kernel += c;
        if self.backing.evicted(obj, pindex) {
            self.backing.set_evicted(obj, pindex, false);
            self.backing.stats.pageins_file += 1;
        }
        Ok(pfn)
    }

    /// One read request of `pages` base pages: counted; returns its device cycles.
    fn read_request(&mut self, pages: u64) -> u64 {
        let bytes = pages << self.base_shift();
        self.stats.io_read_bytes += bytes;
        self.stats.io_read_requests += 1;
        self.machine.io_cycles(bytes)
    }

    /// A synchronous wait for the device outside a fault (read(), write(), fsync()).
    fn wait_io(&mut self, cycles: u64) {
        self.stats.cycles_io += cycles;
        self.hw.core.serial(cycles, cause::IO);
    }

    /// Kernel copy of `bytes` between the cache and a user buffer.
    fn charge_copy(&mut self, bytes: u64) {
        let pages = bytes.div_ceil(self.machine.base_size());
        self.stats.cycles_kernel += pages * self.machine.cost.copy_page_cycles;
    }

    /// The kernel copies `len` bytes out of a user buffer into a socket (or pipe): the copy's
    /// cost; the engine touches the buffer.
    pub fn socket_send(&mut self, len: u64) {
        self.charge_copy(len);
    }

    /// A fault on page `pindex` of file object `obj` through map entry `v` that needs I/O:
    /// reads the page with its read-behind and read-ahead in one request (FreeBSD `vm_fault`,
    /// `vm_fault_additional_pages`, `vnode_pager_getpages`). Returns the device cycles.
    pub(crate) fn fault_readahead(
        &mut self,
        pid: Pid,
        obj: ObjId,
        pindex: u64,
        va: u64,
        v: &Vma,
    ) -> Result<u64> {
        let bs = self.base_shift();
        let (mut behind, mut ahead) = (0, 0);
        if self.policy.readahead {
            behind = ((va - v.start) >> bs).min(VM_FAULT_READ_BEHIND);
            ahead = (((v.end - va) >> bs) - 1).min(VM_FAULT_READ_AHEAD);
        }
        // vm_fault_additional_pages: stop at the nearest cached page and the object's end.
        let size = self.obj(obj).size;
        let mut lo = pindex;
        while lo > 0 && pindex - (lo - 1) <= behind && self.page_needs_io(obj, lo - 1) {
            lo -= 1;
        }
        let mut hi = pindex + 1;
        while hi < size && hi - pindex <= ahead && self.page_needs_io(obj, hi) {
            hi += 1;
        }
        self.cache_insert(pid, obj, pindex, v)?;
        // The other pages are extras: an allocation that fails ends the run on its side
        // (FreeBSD allocates them with VM_ALLOC_IFNOTCACHED and stops at a failure).
        let mut top = pindex + 1;
        while top < hi && self.cache_insert(pid, obj, top, v).is_ok() {
            top += 1;
        }
        let mut bottom = pindex;
        while bottom > lo && self.cache_insert(pid, obj, bottom - 1, v).is_ok() {
            bottom -= 1;
        }
        // vnode_pager_generic_getpages: the pages not asked for go to the inactive queue.
        for p in (bottom..top).filter(|&p| p != pindex) {
            if let Some(pfn) = self.obj(obj).pages.get(p) {
                self.pageq.move_to(pfn, Queue::Inactive);
            }
        }
        self.fileio.stats.readahead_pages += top - bottom - 1;
        Ok(self.read_request(top - bottom))
    }

    /// `cluster_rbuild`: reads up to `run` pages from `start` that need I/O (stopping at the
    /// first cached page), in one request; sets the read-ahead marks. `sync`: the cluster holds
    /// the block the read asked for (`fbp`). Returns (pages read, device cycles).
    fn read_cluster(
        &mut self,
        pid: Pid,
        obj: ObjId,
        start: u64,
        run: u64,
        sync: bool,
        v: &Vma,
    ) -> Result<(u64, u64)> {
        let mut k = 0;
        while k < run && (k == 0 || self.page_needs_io(obj, start + k)) {
            let r = self.cache_insert(pid, obj, start + k, v);
            if k == 0 {
                r?;
            } else if r.is_err() {
                break;
            }
            let pfn = self
                .obj(obj)
                .pages
                .get(start + k)
                .expect("read_cluster: page");
            if !sync {
                // Read-ahead pages wait on the inactive queue until used (a synchronous
                // cluster holds only pages the read asked for).
                self.pageq.move_to(pfn, Queue::Inactive);
                self.fileio.stats.readahead_pages += 1;
            }
            if self.policy.readahead && (run == 1 || (k > 0 && ((sync && k == 1) || k == run - 1)))
            {
                self.fileio.ram.insert((obj.0, start + k), pfn);
            }
            k += 1;
        }
        Ok((k, self.read_request(k)))
    }

    /// Takes the read-ahead mark of page `pindex` of `obj`: whether it had one.
    fn take_mark(&mut self, obj: ObjId, pindex: u64) -> bool {
        let held = self.obj(obj).pages.get(pindex);
        self.fileio
            .ram
            .remove(&(obj.0, pindex))
            .is_some_and(|pfn| Some(pfn) == held)
    }

    /// `cluster_read` of block `lbn` (a base page) with `totread` bytes of the request left
    /// from its start, for an open file with sequential count `seq`. Returns device cycles.
    fn cluster_read(
        &mut self,
        pid: Pid,
        obj: ObjId,
        lbn: u64,
        totread: u64,
        seq: u64,
        v: &Vma,
    ) -> Result<u64> {
        let base = self.machine.base_size();
        // The file's object is as large as the file, in pages.
        let file_pages = self.obj(obj).size;
        let racluster = (MAXPHYS / base).max(1);
        let mut maxra = seq.min(READ_MAX);
        if lbn + maxra + 1 > file_pages {
            maxra = file_pages.saturating_sub(lbn);
        }
        let mut io = 0;
        let mut l = lbn;
        if !self.page_needs_io(obj, lbn) {
            // Cached: read ahead only at a read-ahead mark of a sequential reader.
            if seq == 0 || !self.take_mark(obj, lbn) {
                return Ok(0);
            }
            let mut i = 1;
            while i < maxra && !self.page_needs_io(obj, lbn + i) {
                if i % racluster == racluster - 1 || i == maxra - 1 {
                    if let Some(pfn) = self.obj(obj).pages.get(lbn + i) {
                        self.fileio.ram.insert((obj.0, lbn + i), pfn);
                    }
                }
                i += 1;
            }
            if i >= maxra {
                return Ok(0);
            }
            l += i;
        } else if lbn + 1 >= file_pages {
            // ffs_read: the file's last block is read alone (bread), without read-ahead.
            let (_, c) = self.read_cluster(pid, obj, lbn, 1, true, v)?;
            self.take_mark(obj, lbn);
            return Ok(c);
        } else {
            let nblks = totread.div_ceil(base).min(racluster).min(file_pages - lbn);
            let (k, c) = self.read_cluster(pid, obj, lbn, nblks, true, v)?;
            io += c;
            l += k;
        }
        // The read-ahead: clusters up to `maxra` blocks past the requested one.
        while l < lbn + maxra && l < file_pages {
            if !self.page_needs_io(obj, l) {
                l += 1;
                continue;
            }
            let run = racluster.min(file_pages - l);
            let (k, c) = self.read_cluster(pid, obj, l, run, false, v)?;
            io += c;
            l += k;
        }
        Ok(io)
    }

    /// A cached page used by read() or write(): reactivated if it was waiting on the cache or
    /// inactive queue (the buffer's use references it).
    fn cache_used(&mut self, pfn: Pfn) {
        match self.pageq.queue_of(pfn) {
            Queue::Cache => self.page_reused(pfn),
            Queue::Inactive => {
                self.pageq.set_act(pfn, ACT_INIT);
                self.pageq.move_to(pfn, Queue::Active);
            }
            _ => {}
        }
    }

    /// read(): `len` bytes of `file` from `offset` into the cache (reading what is missing,
    /// with read-ahead) and copied out. Returns the bytes read (less than `len` at the end of
    /// the file). The caller touches the user buffer.
    pub fn file_read(&mut self, pid: Pid, file: u32, offset: u64, len: u64) -> Result<u64> {
        let obj = self.io_args("read", pid, file, len)?;
        let size = self.files[&file].size;
        if offset >= size {
            return Err(SimError::InvalidEvent(format!(
                "read: offset {offset} is at or past the end of file {file} ({size} bytes) by pid {}",
                pid.0
            )));
        }
        let n = len.min(size - offset);
        // vn_read: sequential_heuristic.
        let of = self
            .fileio
            .opens
            .get_mut(&(pid.0, file))
            .expect("read: open file");
        let seq = if (offset == 0 && of.seqcount > 0) || offset == of.nextoff {
            of.seqcount = (of.seqcount + n.div_ceil(BKVASIZE)).min(IO_SEQMAX);
            of.seqcount
        } else {
            of.seqcount = if of.seqcount > 1 { 1 } else { 0 };
            0
        };
        of.nextoff = offset + n;
        let bs = self.base_shift();
        let v = self.file_vma(obj);
        let (first, last) = (offset >> bs, (offset + n - 1) >> bs);
        let mut io = 0;
        for lbn in first..=last {
            if self.policy.readahead {
                let totread = offset + n - (lbn << bs);
                io += self.cluster_read(pid, obj, lbn, totread, seq, &v)?;
            } else if self.page_needs_io(obj, lbn) {
                io += self.read_cluster(pid, obj, lbn, 1, true, &v)?.1;
            }
            // The block is cached now (or was cached without a frame: a warm cache).
            match self.obj(obj).pages.get(lbn) {
                Some(pfn) => self.cache_used(pfn),
                None => {
                    self.cache_insert(pid, obj, lbn, &v)?;
                }
            }
        }
        self.wait_io(io);
        self.charge_copy(n);
        self.fileio.stats.reads += 1;
        self.fileio.stats.read_bytes += n;
        Ok(n)
    }

    /// write(): `len` bytes at `offset` of `file` copied in from the user buffer; the pages
    /// become dirty in the cache, the file grows if written past its end. A page written in
    /// part with contents on storage is read first. The caller touches the user buffer.
    pub fn file_write(&mut self, pid: Pid, file: u32, offset: u64, len: u64) -> Result<()> {
        let obj = self.io_args("write", pid, file, len)?;
        let end = offset.checked_add(len).ok_or_else(|| {
            SimError::InvalidEvent(format!(
                "write: offset {offset} + length {len} overflows on file {file}"
            ))
        })?;
        if end > self.files[&file].size {
            self.open_file(file, end);
        }
        let bs = self.base_shift();
        let v = self.file_vma(obj);
        let mut io = 0;
        for p in (offset >> bs)..=((end - 1) >> bs) {
            let whole = offset <= p << bs && end >= (p + 1) << bs;
            if !whole && self.page_needs_io(obj, p) {
                // ffs_balloc with BA_CLRBUF: the block is read before it is partly written.
                io += self.read_cluster(pid, obj, p, 1, true, &v)?.1;
                self.take_mark(obj, p);
            }
            let pfn = match self.obj(obj).pages.get(p) {
                Some(pfn) => {
                    self.cache_used(pfn);
                    pfn
                }
                None => self.cache_insert(pid, obj, p, &v)?,
            };
            self.pageq.set_flag(pfn, F_DIRTY, true);
            // Its contents change (dirty=hash compares them at write-out).
            if self.dirty.track {
                self.track_access(true, pfn.0 << bs);
            }
        }
        self.wait_io(io);
        self.charge_copy(len);
        self.fileio.stats.writes += 1;
        self.fileio.stats.written_bytes += len;
        Ok(())
    }

    /// fsync(): writes the file's dirty cache pages, contiguous ones clustered up to `MAXPHYS`
    /// a request (`cluster_wbuild`), and waits for them. Returns the pages written.
    pub fn file_fsync(&mut self, pid: Pid, file: u32) -> Result<u64> {
        self.proc(pid)?;
        if !self.fileio.is_open(pid, file) {
            return Err(self.not_open("fsync", pid, file));
        }
        let obj = self.files[&file].obj;
        let base = self.machine.base_size();
        let racluster = (MAXPHYS / base).max(1);
        let dirty: Vec<(u64, Pfn)> = self
            .obj(obj)
            .pages
            .all()
            .into_iter()
            .filter(|&(_, pfn)| self.pageq.flag(pfn, F_DIRTY))
            .collect();
        let mut io = 0;
        let mut i = 0;
        while i < dirty.len() {
            let mut k = 1;
            while i + k < dirty.len()
                && k < racluster as usize
                && dirty[i + k].0 == dirty[i].0 + k as u64
            {
                k += 1;
            }
            let bytes = k as u64 * base;
            self.stats.io_write_bytes += bytes;
            self.stats.io_write_requests += 1;
            io += self.machine.io_cycles(bytes);
            i += k;
        }
        for &(_, pfn) in &dirty {
            self.pageq.set_flag(pfn, F_DIRTY, false);
        }
        self.wait_io(io);
        self.fileio.stats.fsyncs += 1;
        Ok(dirty.len() as u64)
    }
}
