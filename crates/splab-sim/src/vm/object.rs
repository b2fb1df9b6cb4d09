//! Memory objects: anonymous memory (private or shared) and files (the page cache). An object
//! maps page indices (`pindex`) to the frames holding its resident pages.
//!
//! Copy-on-write after fork follows Linux rather than FreeBSD's shadow chains: the child gets
//! its own anonymous objects whose pages are the parent's frames, each frame counting the
//! objects that hold it (`PhysMem::refs`); the first write to a frame held by two objects copies
//! it. A private file mapping keeps its written pages in an anonymous "shadow" object in front
//! of the file's object (one level, as in FreeBSD's `vm_object` shadowing for MAP_PRIVATE).

use rustc_hash::FxHashMap;

use crate::units::Pfn;

const CHUNK_SHIFT: u32 = 9;
const CHUNK: usize = 1 << CHUNK_SHIFT;

pub use crate::units::ObjId;

/// What the page cache holds of the files that exist when a run starts (`--page-cache`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PageCache {
    /// Every page of every file is cached, as for a user re-running a program: a file page
    /// costs no I/O. The model allocates a cached page's frame when the run first uses it, so
    /// the footprint counts the cached pages the run used, not whole files.
    #[default]
    Warm,
    /// Nothing is cached: a file page is read from storage at its first use.
    Cold,
}

impl PageCache {
    pub fn parse(s: &str) -> Option<PageCache> {
        match s {
            "warm" => Some(PageCache::Warm),
            "cold" => Some(PageCache::Cold),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            PageCache::Warm => "warm",
            PageCache::Cold => "cold",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjKind {
    Anon,
    File { file: u32 },
}

/// A sparse map from page index to frame, in chunks of 512 entries.
#[derive(Clone, Debug, Default)]
pub struct PageMap {
    chunks: FxHashMap<u64, Box<[u32; CHUNK]>>,
    pub len: u64,
}

impl PageMap {
    #[inline]
    pub fn get(&self, pindex: u64) -> Option<Pfn> {
        let c = self.chunks.get(&(pindex >> CHUNK_SHIFT))?;
        let v = c[(pindex as usize) & (CHUNK - 1)];
        (v != 0).then(|| Pfn(v as u64 - 1))
    }

    /// Sets the frame of `pindex`; returns the previous one.
    pub fn insert(&mut self, pindex: u64, pfn: Pfn) -> Option<Pfn> {
        let c = self
            .chunks
            .entry(pindex >> CHUNK_SHIFT)
            .or_insert_with(|| Box::new([0; CHUNK]));
        let s = &mut c[(pindex as usize) & (CHUNK - 1)];
        let old = *s;
        *s = (pfn.0 + 1) as u32;
        if old == 0 {
            self.len += 1;
            None
        } else {
            Some(Pfn(old as u64 - 1))
        }
    }

    pub fn remove(&mut self, pindex: u64) -> Option<Pfn> {
        let key = pindex >> CHUNK_SHIFT;
        let c = self.chunks.get_mut(&key)?;
        let s = &mut c[(pindex as usize) & (CHUNK - 1)];
        if *s == 0 {
            return None;
        }
        let old = Pfn(*s as u64 - 1);
        *s = 0;
        self.len -= 1;
        if c.iter().all(|&v| v == 0) {
            self.chunks.remove(&key);
        }
        Some(old)
    }

    /// Resident pages with index in `[start, end)`, in increasing order.
    pub fn range(&self, start: u64, end: u64) -> Vec<(u64, Pfn)> {
        let mut out = Vec::new();
        let mut keys: Vec<u64> = self
            .chunks
            .keys()
            .copied()
            .filter(|&k| k << CHUNK_SHIFT < end && (k + 1) << CHUNK_SHIFT > start)
            .collect();
        keys.sort_unstable();
        for k in keys {
            let c = &self.chunks[&k];
            for (i, &v) in c.iter().enumerate() {
                let p = (k << CHUNK_SHIFT) | i as u64;
                if v != 0 && p >= start && p < end {
                    out.push((p, Pfn(v as u64 - 1)));
                }
            }
        }
        out
    }

    pub fn all(&self) -> Vec<(u64, Pfn)> {
        self.range(0, u64::MAX)
    }
}

#[derive(Clone, Debug)]
pub struct VmObject {
    pub kind: ObjKind,
    /// Size in base pages. For a growable object (heap, stack) the current size.
    pub size: u64,
    /// Heap and stack objects grow; seed 000 4.2 treats them differently from fixed-size ones.
    pub growable: bool,
    pub pages: PageMap,
    /// Map entries referencing this object (a file object also has a reference from the file
    /// table, so the page cache outlives its mappings).
    pub refs: u32,
    /// Added to page indices so that superpage-aligned regions of the object line up with
    /// superpage-aligned virtual addresses (FreeBSD's object colour): `cindex = pindex + colour`.
    pub colour: u64,
    /// The population map (seed 000 4.9), kept when the policy reserves.
    pub popmap: Option<crate::reserv::popmap::PopMap>,
    /// FreeBSD's OBJ_ONEMAPPING: each page is reachable through one map entry at most, so
    /// unmapping an entry frees its range's pages. Fork clears it on an object it shares
    /// between parent and child (vm/fork.rs): their entries map the same pages.
    pub one_mapping: bool,
}

impl VmObject {
    pub fn new(kind: ObjKind, size: u64, growable: bool) -> VmObject {
        VmObject {
            kind,
            size,
            growable,
            pages: PageMap::default(),
            refs: 0,
            colour: 0,
            popmap: None,
            one_mapping: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_map_insert_remove_range() {
        let mut m = PageMap::default();
        assert_eq!(m.insert(5, Pfn(0)), None);
        assert_eq!(m.insert(600, Pfn(9)), None);
        assert_eq!(m.insert(5, Pfn(3)), Some(Pfn(0)));
        assert_eq!(m.get(5), Some(Pfn(3)));
        assert_eq!(m.range(0, 600), vec![(5, Pfn(3))]);
        assert_eq!(m.remove(600), Some(Pfn(9)));
        assert_eq!(m.len, 1);
        assert_eq!(m.get(600), None);
    }
}
