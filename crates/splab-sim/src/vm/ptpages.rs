//! Page-table pages: each process's radix page table is made of real frames of modelled memory,
//! wired kernel pages (seed 000 5.2), so that walks load their entries from physical addresses
//! (through the data caches, competing with data) and page tables cost memory.
//!
//! Geometry comes from the machine's walker (`WalkConfig::level_shifts`, one page of
//! `page_size / pte_bytes` entries per table). A table exists while anything below it does: a
//! leaf table while one of the pmap's chunks in its range exists, an upper table while one of its
//! child tables exists (FreeBSD frees a page-table page when its wire count drops to zero,
//! pmap_unwire_ptp; Linux frees them at munmap, free_pgtables). A promoted superpage keeps its
//! leaf table, as both systems keep it for a later demotion (FreeBSD pmap_insert_pt_page, Linux
//! pgtable_trans_huge_deposit).
//!
//! Callers: the VM creates a chunk only through `Os::pmap_enter`, which attaches its path first,
//! and calls `Os::pt_reap` after `Pmap::remove` to release the tables of emptied chunks.

use rustc_hash::FxHashMap;

use super::Os;
use crate::error::Result;
use crate::hw::walk::{PtPath, NO_TABLE};
use crate::units::{Pfn, Pid, Prot};

/// The page-table pages of one process: (level, table index) -> (frame, live children).
#[derive(Clone, Debug, Default)]
pub struct PtDir {
    tables: FxHashMap<(u8, u64), (Pfn, u32)>,
}

impl PtDir {
    /// The frames of the page-table pages.
    pub fn frames(&self) -> Vec<Pfn> {
        self.tables.values().map(|t| t.0).collect()
    }
    pub fn len(&self) -> usize {
        self.tables.len()
    }
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }
}

/// Page-table page counters (the report's `memory.page_table_*`).
#[derive(Clone, Debug, Default)]
pub struct PtStats {
    pub pages: u64,
    pub peak_pages: u64,
}

impl Os {
    /// Index of the table at `level` that maps `va`.
    #[inline]
    fn pt_index(&self, level: usize, va: u64) -> u64 {
        let shifts = self.machine.walk.level_shifts();
        let bits = self.pt_entry_bits();
        let s = shifts[level] as u32 + bits;
        if s >= 64 {
            0
        } else {
            va >> s
        }
    }

    fn pt_entry_bits(&self) -> u32 {
        let entries = self.machine.base_size() / self.machine.walk.pte_bytes().max(1) as u64;
        entries.trailing_zeros()
    }

    /// Enters a base mapping for `pid`, allocating the page-table pages of a new chunk first (so
    /// running out of memory changes nothing).
    pub(crate) fn pmap_enter(&mut self, pid: Pid, vpn: u64, pfn: Pfn, prot: Prot) -> Result<()> {
        self.pmap_prepare(pid, vpn, 1)?;
        self.procs
            .get_mut(&pid.0)
            .expect("pmap_enter: pid")
            .pmap
            .enter(vpn, pfn, prot);
        Ok(())
    }

    /// Attaches the page-table pages of every chunk of `[vpn, vpn + n)` that has none yet, so
    /// that entering pages there allocates nothing (a THP's 512 entries are entered after its
    /// block is taken).
    pub(crate) fn pmap_prepare(&mut self, pid: Pid, vpn: u64, n: u64) -> Result<()> {
        let mut v = vpn;
        while v < vpn + n {
            if !self.proc(pid)?.pmap.has_chunk(v) {
                let path = self.pt_attach(pid, v)?;
                self.procs
                    .get_mut(&pid.0)
                    .expect("pmap_prepare: pid")
                    .pmap
                    .add_chunk(v, path);
            }
            v = ((v >> crate::vm::pmap::CHUNK_SHIFT) + 1) << crate::vm::pmap::CHUNK_SHIFT;
        }
        Ok(())
    }

    /// Takes a reference on every table of the path to `vpn`'s chunk, allocating the missing
    /// ones; returns the path. All or nothing: if memory runs out for one of the missing
    /// tables, the ones already allocated are given back and nothing changes.
    fn pt_attach(&mut self, pid: Pid, vpn: u64) -> Result<PtPath> {
        let mut path = [NO_TABLE; 4];
        let levels = self.machine.walk.level_shifts().len().min(4);
        if levels == 0 {
            return Ok(path);
        }
        // The tables must be allocatable without the page daemon running in between (it may
        // reap tables of this very path).
        self.make_frames_free(levels as u64);
        let va = vpn << self.base_shift();
        // From the leaf up: the tables that are missing, until the first that exists (it takes
        // one more child).
        let keys: Vec<(u8, u64)> = (0..levels)
            .map(|lvl| (lvl as u8, self.pt_index(lvl, va)))
            .collect();
        let mut missing: Vec<(u8, u64)> = Vec::new();
        let mut first_present = None;
        for &key in keys.iter().rev() {
            if self.proc(pid)?.pt.tables.contains_key(&key) {
                first_present = Some(key);
                break;
            }
            missing.push(key);
        }
        let mut frames = Vec::with_capacity(missing.len());
        for _ in &missing {
            match self.alloc_kernel_frame() {
                Ok(pfn) => frames.push(pfn),
                Err(e) => {
                    for pfn in frames {
                        self.free_kernel_frame(pfn);
                    }
                    return Err(e);
                }
            }
        }
        let p = self.procs.get_mut(&pid.0).expect("pt_attach: pid");
        if let Some(key) = first_present {
            p.pt.tables.get_mut(&key).expect("pt_attach: present").1 += 1;
        }
        for (&key, &pfn) in missing.iter().zip(&frames) {
            p.pt.tables.insert(key, (pfn, 1));
        }
        let n = frames.len() as u64;
        self.phys.wired_frames += n;
        let st = &mut self.stats.pt;
        st.pages += n;
        st.peak_pages = st.peak_pages.max(st.pages);
        let p = self.procs.get(&pid.0).expect("pt_attach: pid");
        for (slot, key) in path.iter_mut().zip(&keys) {
            *slot = p.pt.tables[key].0 .0;
        }
        Ok(path)
    }

    /// Releases the page-table pages of the chunks `Pmap::remove` emptied for `pid`.
    pub(crate) fn pt_reap(&mut self, pid: Pid) {
        let Some(p) = self.procs.get_mut(&pid.0) else {
            return;
        };
        if p.pmap.freed.is_empty() {
            return;
        }
        let freed = std::mem::take(&mut p.pmap.freed);
        let levels = self.machine.walk.level_shifts().len().min(4);
        let bs = self.base_shift();
        let mut any = false;
        for key in freed {
            if levels == 0 {
                continue;
            }
            let va = (key << super::pmap::CHUNK_SHIFT) << bs;
            // A leaf table may hold several chunks: it goes when its last one does.
            let mut lvl = levels;
            while lvl > 0 {
                lvl -= 1;
                let tkey = (lvl as u8, self.pt_index(lvl, va));
                let p = self.procs.get_mut(&pid.0).expect("pt_reap: pid");
                let (pfn, children) = *p.pt.tables.get(&tkey).expect("pt_reap: table of a chunk");
                if children > 1 {
                    p.pt.tables.insert(tkey, (pfn, children - 1));
                    break;
                }
                p.pt.tables.remove(&tkey);
                self.phys.wired_frames -= 1;
                self.free_kernel_frame(pfn);
                self.stats.pt.pages -= 1;
                any = true;
            }
        }
        if any {
            // Freed tables must not be reached through stale paging-structure caches (Linux
            // flushes them with the TLB when it frees tables: tlb_remove_table).
            self.hw.walker.invalidate_asid(pid.0);
        }
    }

    /// The walk path for `vpn` when its chunk does not exist: the tables that do.
    pub(crate) fn pt_partial_path(&self, pid: Pid, vpn: u64) -> PtPath {
        let mut path = [NO_TABLE; 4];
        let Some(p) = self.procs.get(&pid.0) else {
            return path;
        };
        let va = vpn << self.base_shift();
        let levels = self.machine.walk.level_shifts().len().min(4);
        for (lvl, slot) in path.iter_mut().enumerate().take(levels) {
            match p.pt.tables.get(&(lvl as u8, self.pt_index(lvl, va))) {
                Some(&(pfn, _)) => *slot = pfn.0,
                None => break,
            }
        }
        path
    }

    /// Checks that every chunk's path names the tables of `PtDir`, child counts match, and the
    /// page count matches the stats.
    pub(crate) fn check_page_tables(&self) -> std::result::Result<(), String> {
        let levels = self.machine.walk.level_shifts().len().min(4);
        let mut total = 0u64;
        let bs = self.base_shift();
        for (&pid, p) in &self.procs {
            total += p.pt.len() as u64;
            if levels == 0 {
                continue;
            }
            let mut children: FxHashMap<(u8, u64), u32> = FxHashMap::default();
            let mut seen = rustc_hash::FxHashSet::default();
            for key in p.pmap.chunk_keys() {
                let vpn = key << super::pmap::CHUNK_SHIFT;
                let va = vpn << bs;
                let path = p.pmap.path(vpn);
                for (lvl, &at) in path.iter().enumerate().take(levels) {
                    let tkey = (lvl as u8, self.pt_index(lvl, va));
                    let Some(&(pfn, _)) = p.pt.tables.get(&tkey) else {
                        return Err(format!(
                            "page tables: pid {pid} chunk {key:#x} has no level-{lvl} table"
                        ));
                    };
                    if at != pfn.0 {
                        return Err(format!(
                            "page tables: pid {pid} chunk {key:#x} names frame {} at level {lvl}, the table is {}",
                            at, pfn.0
                        ));
                    }
                    if lvl + 1 == levels {
                        *children.entry(tkey).or_default() += 1;
                    }
                    if lvl > 0 && seen.insert(tkey) {
                        let parent = (lvl as u8 - 1, self.pt_index(lvl - 1, va));
                        *children.entry(parent).or_default() += 1;
                    }
                }
            }
            for (k, &(pfn, c)) in &p.pt.tables {
                let want = children.get(k).copied().unwrap_or(0);
                if c != want {
                    return Err(format!(
                        "page tables: pid {pid} table {k:?} (frame {}) counts {c} children, {want} exist",
                        pfn.0
                    ));
                }
                if self.phys.refs(pfn) != 0 {
                    return Err(format!(
                        "page tables: frame {} is a table and held by an object",
                        pfn.0
                    ));
                }
            }
        }
        if total != self.stats.pt.pages {
            return Err(format!(
                "page tables: {total} tables exist, stats count {}",
                self.stats.pt.pages
            ));
        }
        Ok(())
    }
}
