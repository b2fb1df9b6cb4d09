//! A model of jemalloc 4.x's arena (the allocator Redis 4.0 bundles, `deps/jemalloc`, 4.0.3),
//! for the `kv` workload. Facts are from jemalloc's sources at tag 4.0.3 (github
//! jemalloc/jemalloc); the code is written from them, not copied.
//!
//! - **Size classes** (`include/jemalloc/internal/size_classes.sh`, quantum 16, four classes per
//!   doubling): 8, 16, 32, 48, 64, then `2^k + i 2^(k-2)` (i = 1..4): 80, 96, 112, 128, 160, ...
//!   Small classes are those below `2^(LG_PAGE + 2)` (up to 14 KiB); large up to the class below
//!   the chunk size (1792 KiB, `arena_boot`: `large_maxclass`); above that huge.
//! - **Small runs** (`bin_info_run_size_calc`): a bin's run is the smallest page multiple that
//!   holds a whole number of regions (10 KiB: 5 pages, 2 regions). A region is the run's lowest
//!   free one (`arena_run_reg_alloc`, `bitmap_sfu`); a bin allocates from `runcur`, else its
//!   lowest non-full run (`arena_bin_nonfull_run_get`), else a new run; a freed region in a run
//!   below `runcur` makes that run `runcur` (`arena_bin_lower_run`); an empty run is freed
//!   (`arena_dalloc_bin_run`).
//! - **Large runs** (`arena_malloc_large`): the size class plus `large_pad` (one page, for the
//!   cache-oblivious random offset of `config_cache_oblivious`), at a random cache line of the
//!   first page.
//! - **Runs** come from 2 MiB chunks aligned to 2 MiB (`LG_CHUNK_DEFAULT` 21); a chunk's first
//!   `map_bias` pages are its header (the page map, `arena_boot`), so a chunk has one maximal
//!   free run of `chunk_npages - map_bias` pages. A run is taken by first best fit, the lowest
//!   address among the smallest that fit (`arena_run_first_best_fit`; jemalloc quantizes the
//!   sizes it compares, `run_quantize`: not modelled, exact sizes are compared), and split, the
//!   rest staying free with its dirty state (`arena_run_split_remove`). Freed runs coalesce
//!   with free neighbours of the same dirty state in the same chunk (`arena_run_coalesce`).
//! - **Chunks**: a chunk whose runs are all free becomes the arena's `spare` and the old spare
//!   goes to the chunk cache (`arena_chunk_dalloc`, `chunk_dalloc_cache`); a new chunk is the
//!   spare, else one recycled from the cache, then from the retained chunks, else mmapped
//!   (`arena_chunk_alloc`, `chunk_alloc_cache`, `chunk_alloc_core`: retained before mmap),
//!   first best fit among extents (`chunk_recycle`); mmap tries the exact size and, when not
//!   aligned, maps size + chunk - page and trims (`chunk_alloc_mmap`, `chunk_alloc_mmap_slow`).
//!   Huge allocations are whole chunks the same way (`arena_chunk_alloc_huge`) and go to the
//!   chunk cache when freed (`arena_chunk_dalloc_huge`).
//! - **Purging** (jemalloc 4.x's default `opt.purge = "ratio"`, `PURGE_DEFAULT` in 4.1-4.5's
//!   arena.h; 4.0.x has only this mode): the freed dirty runs and cached chunks form one list
//!   in order of freeing (`runs_dirty`, `chunks_cache`); when the dirty pages exceed
//!   `max(nactive >> lg_dirty_mult, chunk_npages)` (`LG_DIRTY_MULT_DEFAULT` 3: an eighth of the
//!   active pages) the oldest are purged until the count is back to that threshold
//!   (`arena_maybe_purge`, `arena_compute_npurge`, `arena_stash_dirty`): a run's pages with
//!   madvise (`arena_purge_stashed`: `MADV_DONTNEED` on Linux, `JEMALLOC_PURGE_MADVISE_DONTNEED`;
//!   `MADV_FREE` on FreeBSD), after which it is a clean free run; a cached chunk is deallocated
//!   (`chunk_dalloc_arena`): munmapped where jemalloc is built with munmap (FreeBSD), else
//!   purged whole and kept mapped as retained (Linux: configure.ac `default_munmap="0"`).
//!   The decay mode of 4.1+ (`opt.purge = "decay"`, `decay_time` 10 s) is not modelled: it was
//!   not the default before 5.0, and it purges only on allocator activity (`arena_decay_tick`).
//! - Not modelled: thread caches (`tcache`: freed small objects held back per thread; Redis's
//!   main thread has one), several arenas, the chunk header's exact contents (the header pages
//!   are touched where the page map of a run sits: see `Sys::touch`), dss.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::error::Result;
use crate::rng::Rng;

pub const LG_PAGE: u32 = 12;
pub const PAGE: u64 = 1 << LG_PAGE;
/// `LG_CHUNK_DEFAULT` (jemalloc 4.x chunk.h): 2 MiB chunks.
pub const CHUNK: u64 = 1 << 21;
pub const CHUNK_NPAGES: u64 = CHUNK / PAGE;
/// Header pages of a chunk (`map_bias`): `arena_boot`'s fixed point of `offsetof(arena_chunk_t,
/// map_bits) + (sizeof map_bits + sizeof map_misc) x (chunk_npages - map_bias)`, estimated for
/// x86-64 at 104 bytes of extent node and 8 + 96 bytes a page (an `arena_run_t` with a
/// two-level 512-bit bitmap): 13 pages. (Estimated struct sizes, not measured.)
pub const MAP_BIAS: u64 = 13;
/// `arena_maxrun` in pages.
pub const MAXRUN: u64 = CHUNK_NPAGES - MAP_BIAS;
/// Offset of the first page's `arena_chunk_map_misc_t` in the header (`map_misc_offset`), and
/// that element's size: where a run's bitmap sits.
const MISC_OFFSET: u64 = 104 + 8 * MAXRUN;
const MISC_SIZE: u64 = 96;
/// The largest small class: `2^(LG_PAGE + LG_SIZE_CLASS_GROUP)` minus one class step.
pub const SMALL_MAX: u64 = 14 << 10;
/// The largest large class: the class below the chunk size (`large_maxclass`).
pub const LARGE_MAX: u64 = 1792 << 10;
/// `large_pad` with `config_cache_oblivious` (the default since 4.0).
pub const LARGE_PAD: u64 = PAGE;
/// `LG_DIRTY_MULT_DEFAULT`.
pub const LG_DIRTY_MULT: u32 = 3;

/// The size class of a request (`s2u`).
pub fn size_class(size: u64) -> u64 {
    let size = size.max(1);
    if size <= 8 {
        return 8;
    }
    if size <= 64 {
        return size.div_ceil(16) * 16;
    }
    let lg = 64 - (size - 1).leading_zeros(); // 2^lg >= size
    let delta = 1u64 << (lg - 3); // the group 2^(lg-1) has four classes 2^(lg-3) apart
    size.div_ceil(delta) * delta
}

/// Pages and regions of a small class's run (`bin_info_run_size_calc`, no redzones).
pub fn run_geometry(reg: u64) -> (u64, u64) {
    let mut pages = 1;
    while !(pages * PAGE).is_multiple_of(reg) {
        pages += 1;
    }
    let pages = pages.min(MAXRUN);
    (pages, pages * PAGE / reg)
}

/// What the allocator asks of the OS and of memory.
pub trait Sys {
    /// mmap of `len` bytes of anonymous memory, placed by the OS.
    fn mmap(&mut self, len: u64) -> Result<u64>;
    fn munmap(&mut self, addr: u64, len: u64) -> Result<()>;
    /// The purge madvise (DONTNEED or FREE) of whole pages.
    fn purge(&mut self, addr: u64, len: u64) -> Result<()>;
    /// A metadata write at `addr` (one cache line).
    fn touch(&mut self, addr: u64) -> Result<()>;
}

/// Counters for the report.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct JeStats {
    pub chunks_mapped: u64,
    pub chunks_unmapped: u64,
    pub mmap_calls: u64,
    pub munmap_calls: u64,
    pub purge_calls: u64,
    pub bytes_purged: u64,
    /// Bytes handed out (size classes) and live now.
    pub live_bytes: u64,
    pub live_objects: u64,
    pub huge_objects: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dirty {
    Run(u64),
    Chunk(u64),
}

struct FreeRun {
    pages: u64,
    /// Position in the dirty list when dirty.
    dirty: Option<u64>,
}

enum Used {
    Small { bin: usize, free: BTreeSet<u32> },
    Large { pages: u64 },
}

#[derive(Default)]
struct Bin {
    runcur: Option<u64>,
    nonfull: BTreeSet<u64>,
}

/// One jemalloc arena.
pub struct Arena {
    /// Small classes: (region size, run pages, regions).
    classes: Vec<(u64, u64, u64)>,
    bins: Vec<Bin>,
    /// Allocated runs by start address.
    used: BTreeMap<u64, Used>,
    /// Free runs by start address, and the available ones (not the spare's) by (pages, addr).
    free: BTreeMap<u64, FreeRun>,
    avail: BTreeSet<(u64, u64)>,
    spare: Option<u64>,
    /// Cached (dirty) and retained (purged) chunk extents: start -> (bytes, dirty position).
    cached: BTreeMap<u64, (u64, u64)>,
    retained: BTreeMap<u64, u64>,
    /// Huge allocations: start -> size class.
    huge: HashMap<u64, u64>,
    /// The dirty list in order of freeing.
    dirty: BTreeMap<u64, Dirty>,
    next_seq: u64,
    pub nactive: u64,
    pub ndirty: u64,
    purging: bool,
    munmap: bool,
    lg_dirty_mult: u32,
    rng: Rng,
    pub stats: JeStats,
}

impl Arena {
    /// `munmap`: whether deallocated chunks are unmapped (jemalloc's FreeBSD build) or purged
    /// and retained (its Linux build).
    pub fn new(munmap: bool, seed: u64) -> Arena {
        let mut classes = Vec::new();
        let mut c = 8;
        while c <= SMALL_MAX {
            let (pages, nregs) = run_geometry(c);
            classes.push((c, pages, nregs));
            c = size_class(c + 1);
        }
        Arena {
            bins: (0..classes.len()).map(|_| Bin::default()).collect(),
            classes,
            used: BTreeMap::new(),
            free: BTreeMap::new(),
            avail: BTreeSet::new(),
            spare: None,
            cached: BTreeMap::new(),
            retained: BTreeMap::new(),
            huge: HashMap::new(),
            dirty: BTreeMap::new(),
            next_seq: 0,
            nactive: 0,
            ndirty: 0,
            purging: false,
            munmap,
            lg_dirty_mult: LG_DIRTY_MULT,
            rng: Rng::new(seed),
            stats: JeStats::default(),
        }
    }

    /// malloc(size).
    pub fn alloc(&mut self, sys: &mut dyn Sys, size: u64) -> Result<u64> {
        let usize = size_class(size);
        self.stats.live_bytes += usize;
        self.stats.live_objects += 1;
        if usize <= SMALL_MAX {
            let bin = self.classes.partition_point(|c| c.0 < usize);
            let (reg, pages, nregs) = self.classes[bin];
            let run = match self.bins[bin].runcur {
                Some(r) => r,
                None => match self.bins[bin].nonfull.pop_first() {
                    Some(r) => r,
                    None => {
                        let r = self.alloc_run(sys, pages)?;
                        let free = (0..nregs as u32).collect();
                        self.used.insert(r, Used::Small { bin, free });
                        r
                    }
                },
            };
            let Some(Used::Small { free, .. }) = self.used.get_mut(&run) else {
                unreachable!("bin run")
            };
            let idx = free.pop_first().expect("runcur has a free region");
            self.bins[bin].runcur = if free.is_empty() { None } else { Some(run) };
            sys.touch(misc_addr(run))?;
            Ok(run + idx as u64 * reg)
        } else if usize <= LARGE_MAX {
            let pages = (usize + LARGE_PAD) / PAGE;
            let run = self.alloc_run(sys, pages)?;
            self.used.insert(run, Used::Large { pages });
            sys.touch(misc_addr(run))?;
            // A random cache line of the first page (`random_offset`).
            Ok(run + (self.rng.below(PAGE >> 6) << 6))
        } else {
            let csize = usize.div_ceil(CHUNK) * CHUNK;
            let addr = self.chunk_alloc(sys, csize)?;
            self.huge.insert(addr, usize);
            self.nactive += usize / PAGE;
            self.stats.huge_objects += 1;
            Ok(addr)
        }
    }

    /// free(ptr) of a pointer `alloc` returned.
    pub fn free(&mut self, sys: &mut dyn Sys, ptr: u64) -> Result<()> {
        if let Some(usize) = self.huge.remove(&ptr) {
            self.stats.live_bytes -= usize;
            self.stats.live_objects -= 1;
            self.stats.huge_objects -= 1;
            self.nactive -= usize / PAGE;
            self.chunk_dalloc_cache(sys, ptr, usize.div_ceil(CHUNK) * CHUNK)?;
            return self.maybe_purge(sys);
        }
        let (&run, u) = self
            .used
            .range_mut(..=ptr)
            .next_back()
            .expect("free of a pointer the arena never returned");
        sys.touch(misc_addr(run))?;
        match u {
            Used::Large { pages } => {
                let pages = *pages;
                self.stats.live_bytes -= size_class(pages * PAGE - LARGE_PAD);
                self.stats.live_objects -= 1;
                self.used.remove(&run);
                self.dalloc_run(sys, run, pages, true)
            }
            Used::Small { bin, free } => {
                let bin = *bin;
                let (reg, pages, nregs) = self.classes[bin];
                self.stats.live_bytes -= reg;
                self.stats.live_objects -= 1;
                free.insert(((ptr - run) / reg) as u32);
                let nfree = free.len() as u64;
                let b = &mut self.bins[bin];
                if nfree == nregs {
                    // arena_dissociate_bin_run, arena_dalloc_bin_run
                    if b.runcur == Some(run) {
                        b.runcur = None;
                    } else {
                        b.nonfull.remove(&run);
                    }
                    self.used.remove(&run);
                    self.dalloc_run(sys, run, pages, true)
                } else {
                    if nfree == 1 && b.runcur != Some(run) {
                        // arena_bin_lower_run
                        match b.runcur {
                            Some(cur) if run < cur => {
                                b.nonfull.insert(cur);
                                b.runcur = Some(run);
                            }
                            _ => {
                                b.nonfull.insert(run);
                            }
                        }
                    }
                    Ok(())
                }
            }
        }
    }

    fn seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// A run of `pages` (arena_run_alloc_small / _large).
    fn alloc_run(&mut self, sys: &mut dyn Sys, pages: u64) -> Result<u64> {
        let fit = match self.avail.range((pages, 0)..).next() {
            Some(&(_, a)) => a,
            None => {
                let chunk = self.arena_chunk_alloc(sys)?;
                chunk + MAP_BIAS * PAGE
            }
        };
        let f = self.take_free(fit);
        if f.pages > pages {
            let dirty = f.dirty.map(|_| self.seq());
            self.insert_free(fit + pages * PAGE, f.pages - pages, dirty);
        }
        self.nactive += pages;
        Ok(fit)
    }

    fn insert_free(&mut self, addr: u64, pages: u64, dirty: Option<u64>) {
        if let Some(s) = dirty {
            self.dirty.insert(s, Dirty::Run(addr));
            self.ndirty += pages;
        }
        self.free.insert(addr, FreeRun { pages, dirty });
        self.avail.insert((pages, addr));
    }

    /// Removes a free run from every index (keeping `ndirty` in step).
    fn take_free(&mut self, addr: u64) -> FreeRun {
        let f = self.free.remove(&addr).expect("free run");
        self.avail.remove(&(f.pages, addr));
        if let Some(s) = f.dirty {
            self.dirty.remove(&s);
            self.ndirty -= f.pages;
        }
        f
    }

    /// arena_run_dalloc: `dirty` for a run freed by the program, not for a purged one.
    fn dalloc_run(&mut self, sys: &mut dyn Sys, run: u64, pages: u64, dirty: bool) -> Result<()> {
        self.nactive -= pages;
        let chunk = run & !(CHUNK - 1);
        let (mut start, mut n) = (run, pages);
        // arena_run_coalesce: forward, then backward, in the chunk, same dirty state.
        let end = run + pages * PAGE;
        if end < chunk + CHUNK {
            if let Some(f) = self.free.get(&end) {
                if f.dirty.is_some() == dirty {
                    n += self.take_free(end).pages;
                }
            }
        }
        if let Some((&a, f)) = self.free.range(chunk..run).next_back() {
            if a + f.pages * PAGE == run && f.dirty.is_some() == dirty {
                n += self.take_free(a).pages;
                start = a;
            }
        }
        let d = if dirty { Some(self.seq()) } else { None };
        self.insert_free(start, n, d);
        if n == MAXRUN {
            self.arena_chunk_dalloc(sys, chunk)?;
        }
        if dirty {
            self.maybe_purge(sys)?;
        }
        Ok(())
    }

    /// arena_chunk_alloc: the spare, else a new chunk whose one free run is clean.
    fn arena_chunk_alloc(&mut self, sys: &mut dyn Sys) -> Result<u64> {
        if let Some(c) = self.spare.take() {
            let p = self.free[&(c + MAP_BIAS * PAGE)].pages;
            self.avail.insert((p, c + MAP_BIAS * PAGE));
            return Ok(c);
        }
        let c = self.chunk_alloc(sys, CHUNK)?;
        // arena_chunk_init_hard writes the chunk's extent node and page map.
        sys.touch(c)?;
        self.insert_free(c + MAP_BIAS * PAGE, MAXRUN, None);
        Ok(c)
    }

    /// arena_chunk_dalloc: the chunk becomes the spare; the old spare goes to the chunk cache.
    fn arena_chunk_dalloc(&mut self, sys: &mut dyn Sys, chunk: u64) -> Result<()> {
        let run = chunk + MAP_BIAS * PAGE;
        self.avail.remove(&(MAXRUN, run));
        if let Some(old) = self.spare.replace(chunk) {
            let f = self
                .free
                .remove(&(old + MAP_BIAS * PAGE))
                .expect("spare run");
            if let Some(s) = f.dirty {
                self.dirty.remove(&s);
                self.ndirty -= f.pages;
            }
            self.chunk_dalloc_cache(sys, old, CHUNK)?;
        }
        Ok(())
    }

    /// A chunk extent from the cache, the retained extents, or mmap (chunk_alloc_cache,
    /// chunk_alloc_core).
    fn chunk_alloc(&mut self, sys: &mut dyn Sys, size: u64) -> Result<u64> {
        let best = |m: &BTreeMap<u64, u64>| {
            m.iter()
                .filter(|(_, &s)| s >= size)
                .min_by_key(|(&a, &s)| (s, a))
                .map(|(&a, &s)| (a, s))
        };
        let cached: BTreeMap<u64, u64> = self.cached.iter().map(|(&a, &(s, _))| (a, s)).collect();
        if let Some((a, s)) = best(&cached) {
            let (_, seq) = self.cached.remove(&a).expect("cached");
            self.dirty.remove(&seq);
            self.ndirty -= s / PAGE;
            if s > size {
                self.record_cached(a + size, s - size);
            }
            return Ok(a);
        }
        if let Some((a, s)) = best(&self.retained) {
            self.retained.remove(&a);
            if s > size {
                self.retained.insert(a + size, s - size);
            }
            return Ok(a);
        }
        self.stats.chunks_mapped += size / CHUNK;
        self.stats.mmap_calls += 1;
        let a = sys.mmap(size)?;
        if a % CHUNK == 0 {
            return Ok(a);
        }
        // chunk_alloc_mmap_slow: over-allocate and trim to alignment.
        sys.munmap(a, size)?;
        let len = size + CHUNK - PAGE;
        self.stats.mmap_calls += 1;
        let b = sys.mmap(len)?;
        let start = b.div_ceil(CHUNK) * CHUNK;
        if start > b {
            self.stats.munmap_calls += 1;
            sys.munmap(b, start - b)?;
        }
        let trail = b + len - (start + size);
        if trail > 0 {
            self.stats.munmap_calls += 1;
            sys.munmap(start + size, trail)?;
        }
        Ok(start)
    }

    /// chunk_record into the cache, coalescing with cached neighbours; the result is the
    /// newest dirty entry.
    fn record_cached(&mut self, addr: u64, size: u64) {
        let (mut a, mut s) = (addr, size);
        if let Some((ns, nseq)) = self.cached.remove(&(a + s)) {
            self.dirty.remove(&nseq);
            self.ndirty -= ns / PAGE;
            s += ns;
        }
        if let Some((&pa, &(ps, pseq))) = self.cached.range(..a).next_back() {
            if pa + ps == a {
                self.cached.remove(&pa);
                self.dirty.remove(&pseq);
                self.ndirty -= ps / PAGE;
                a = pa;
                s += ps;
            }
        }
        let seq = self.seq();
        self.dirty.insert(seq, Dirty::Chunk(a));
        self.cached.insert(a, (s, seq));
        self.ndirty += s / PAGE;
    }

    /// chunk_dalloc_cache.
    fn chunk_dalloc_cache(&mut self, sys: &mut dyn Sys, addr: u64, size: u64) -> Result<()> {
        self.record_cached(addr, size);
        self.maybe_purge(sys)
    }

    /// arena_maybe_purge (ratio mode).
    fn maybe_purge(&mut self, sys: &mut dyn Sys) -> Result<()> {
        if self.purging {
            return Ok(());
        }
        loop {
            let threshold = (self.nactive >> self.lg_dirty_mult).max(CHUNK_NPAGES);
            if self.ndirty <= threshold {
                return Ok(());
            }
            self.purge(sys, self.ndirty - threshold)?;
        }
    }

    /// arena_purge: stash the oldest dirty entries until `npurge` pages, purge them, put them
    /// back clean.
    fn purge(&mut self, sys: &mut dyn Sys, npurge: u64) -> Result<()> {
        self.purging = true;
        let mut stashed = Vec::new();
        let mut n = 0;
        while n < npurge {
            let Some((_, d)) = self.dirty.pop_first() else {
                break;
            };
            match d {
                Dirty::Run(a) => {
                    let chunk = a & !(CHUNK - 1);
                    if self.spare == Some(chunk) {
                        // "make it available prior to allocation"
                        self.spare = None;
                        self.avail.insert((MAXRUN, a));
                    }
                    let f = self.free.remove(&a).expect("dirty run");
                    self.avail.remove(&(f.pages, a));
                    self.ndirty -= f.pages;
                    self.nactive += f.pages; // temporarily allocated
                    n += f.pages;
                    stashed.push((d, f.pages * PAGE));
                }
                Dirty::Chunk(a) => {
                    let (s, _) = self.cached.remove(&a).expect("cached chunk");
                    self.ndirty -= s / PAGE;
                    n += s / PAGE;
                    stashed.push((d, s));
                }
            }
        }
        for (d, len) in stashed {
            match d {
                Dirty::Run(a) => {
                    self.stats.purge_calls += 1;
                    self.stats.bytes_purged += len;
                    sys.purge(a, len)?;
                    self.dalloc_run(sys, a, len / PAGE, false)?;
                }
                Dirty::Chunk(a) => {
                    // chunk_dalloc_arena: unmap, else purge and retain.
                    if self.munmap {
                        self.stats.munmap_calls += 1;
                        self.stats.chunks_unmapped += len / CHUNK;
                        sys.munmap(a, len)?;
                    } else {
                        self.stats.purge_calls += 1;
                        self.stats.bytes_purged += len;
                        sys.purge(a, len)?;
                        self.record_retained(a, len);
                    }
                }
            }
        }
        self.purging = false;
        Ok(())
    }

    fn record_retained(&mut self, addr: u64, size: u64) {
        let (mut a, mut s) = (addr, size);
        if let Some(ns) = self.retained.remove(&(a + s)) {
            s += ns;
        }
        if let Some((&pa, &ps)) = self.retained.range(..a).next_back() {
            if pa + ps == a {
                self.retained.remove(&pa);
                a = pa;
                s += ps;
            }
        }
        self.retained.insert(a, s);
    }

    /// Bytes of address space the arena holds mapped: chunks in use, the spare, cached and
    /// retained extents.
    pub fn mapped_bytes(&self) -> u64 {
        (self.stats.chunks_mapped - self.stats.chunks_unmapped) * CHUNK
    }

    /// The spare chunk (an empty chunk kept for the next chunk allocation), if any.
    pub fn spare(&self) -> Option<u64> {
        self.spare
    }

    /// The small size classes (bins).
    pub fn small_classes(&self) -> usize {
        self.classes.len()
    }

    /// Retained bytes (purged, mapped, unused).
    pub fn retained_bytes(&self) -> u64 {
        self.retained.values().sum()
    }
}

/// Where the page map element of the run at `run` sits in its chunk's header.
fn misc_addr(run: u64) -> u64 {
    let chunk = run & !(CHUNK - 1);
    let page = (run - chunk) / PAGE;
    chunk + MISC_OFFSET + (page - MAP_BIAS) * MISC_SIZE
}
