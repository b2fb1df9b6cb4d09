//! The kernel's page descriptors (`struct page`, the `mem_map` / vmemmap array, one per frame)
//! as memory the CPU reads: what a pfn walk by the compaction scanners costs beyond its
//! instructions (vm/compact.rs).
//!
//! Linux's `isolate_migratepages_block` and `isolate_freepages_block` read the `struct page` of
//! every pfn they visit (`PageBuddy` and `buddy_order`, `PageLRU`, `PageCompound`, the counts)
//! and decide from it where to go next. On x86-64 a `struct page` is 64 bytes
//! (include/linux/mm_types.h; `SPLIT_PTLOCK` and the usual configs keep it at 64 so that it is
//! one cache line), so each visit reads one line of the array. The array is indexed by pfn:
//! consecutive visits read consecutive lines (which a stream prefetcher follows), and a visit
//! after a free chunk or a compound page passed over by its order jumps.
//!
//! The model: each struct-page read is a load of its line through the machine's data caches
//! and hardware prefetcher (hw/cache.rs, hw/prefetch.rs), in the same way as a program's load
//! (`Os::data`), so the kernel's lines and the program's compete for the same sets. Its cost
//! beyond an L1 hit (which the scanners' measured instruction counts already include,
//! `MIGRATE_SCAN_VISIT_CYCLES`) is added to the scan's cycles, serially: a visit's branch and
//! the next pfn after a skip depend on the loaded flags and order. That is an upper bound for
//! consecutive visits the prefetcher has not picked up yet, whose loads an out-of-order core may
//! overlap under speculation (at most `trigger` of them per 4KB of descriptors here).
//!
//! The array is boot-time kernel memory outside the frames the model manages; its lines are
//! numbered from the first power of two at or above twice the machine's memory (guest memory
//! and a guest's host tables, hw/walk.rs `set_nested`, both lie below), so they never alias a
//! frame's line. Translation is not modelled: the kernel reaches the array through its direct
//! map, large pages.
//!
//! Measured on this project's host (docs/linux-thp.md, scripts/kernel-ops.c): the same loops
//! over cold struct pages took 566-1,210 (migrate) and 331-660 (free) host TSC cycles a visit
//! under KVM, beside 24 and 15 instructions warm; the model's native machines price a cold
//! visit at their DRAM latency instead.

use serde::Serialize;

use super::Os;
use crate::hw::cache::LINE_SHIFT;

/// Bytes of one `struct page` on x86-64 (include/linux/mm_types.h).
pub const STRUCT_PAGE_BYTES: u64 = 64;
const _: () = assert!(STRUCT_PAGE_BYTES == 1 << LINE_SHIFT);

/// Struct-page reads of the compaction scanners (`memory.compaction.memmap`), by where each was
/// served, and the cycles they added.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct MemmapStats {
    /// Reads served by L1, L2 (a line the prefetcher had brought included), LLC, DRAM.
    pub reads_by_level: [u64; 4],
    /// Of the L2 ones, lines a detected stream had prefetched.
    pub prefetched: u64,
    /// Cycles beyond an L1 hit, added to the compactions' cycles.
    pub stall_cycles: u64,
}

impl MemmapStats {
    pub fn is_empty(&self) -> bool {
        *self == MemmapStats::default()
    }
}

impl Os {
    /// The line of the `struct page` of frame `pfn` (see the module's note on where the array
    /// lies).
    pub(crate) fn memmap_line(&self, pfn: u64) -> u64 {
        let base = (2 * self.machine.mem_bytes).next_power_of_two() >> LINE_SHIFT;
        // One line a struct page (`STRUCT_PAGE_BYTES`, asserted above). On a guest the array
        // is guest-physical memory too: the caches see its host frames (hw/host_frames.rs;
        // scattered placement keeps a line at or above 2^bits host pages in its own block of
        // 2^bits, above guest memory and the host's tables).
        self.host_addr((base + pfn) << LINE_SHIFT) >> LINE_SHIFT
    }

    /// The kernel reads the `struct page` of `pfn`: the load goes through the caches and trains
    /// the prefetcher as a program's would. Returns its cycles beyond an L1 hit.
    pub(crate) fn memmap_read(&mut self, pfn: u64) -> u64 {
        let line = self.memmap_line(pfn);
        let s = self.hw.caches.access(line);
        let levels = self.hw.caches.levels();
        let mut k = if (s as usize) >= levels { 3 } else { s };
        if s >= 1 && self.hw.prefetcher.enabled() {
            // hw/prefetch.rs: the detector watches L1 misses; a line beyond L2 that a stream
            // had prefetched is an L2 hit (as `Os::prefetched` counts it for a program).
            let ahead = self.hw.prefetcher.miss(line);
            if ahead && s >= 2 {
                self.hw.caches.count_prefetched(s);
                self.compact.stats.memmap.prefetched += 1;
                k = 1;
            }
        }
        let caches = &self.hw.caches;
        let extra = caches
            .latency(if k == 3 { levels as u8 } else { k })
            .saturating_sub(caches.latency(0));
        let st = &mut self.compact.stats.memmap;
        st.reads_by_level[k as usize] += 1;
        st.stall_cycles += extra;
        extra
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::Machine;
    use crate::policy::Policy;

    fn os(spec: &str) -> Os {
        let m = Machine::from_spec(spec).unwrap();
        let mut p = Policy::from_spec("linux").unwrap();
        p.resolve(&m).unwrap();
        Os::new(m, p)
    }

    /// Latency beyond L1 of a read served at `k` (0 L1 .. 3 DRAM).
    fn beyond_l1(os: &Os, k: usize) -> u64 {
        let c = &os.hw.caches;
        c.latency(k.min(c.levels()) as u8) - c.latency(0)
    }

    #[test]
    fn a_cold_struct_page_costs_a_dram_miss_then_hits_l1() {
        let mut os = os("skylake:mem=1G");
        assert!(os.compact.stats.memmap.is_empty(), "absent from the report");
        let dram = beyond_l1(&os, 3);
        assert_eq!(dram, 231 - 4, "skylake: DRAM 231 cycles, L1 4");
        assert_eq!(os.memmap_read(1000), dram);
        assert_eq!(os.memmap_read(1000), 0);
        let st = &os.compact.stats.memmap;
        assert_eq!(st.reads_by_level, [1, 0, 0, 1]);
        assert_eq!(st.stall_cycles, dram);
        assert_eq!(st.prefetched, 0);
        assert!(!st.is_empty(), "in the report once read");
    }

    /// Jumps (a free chunk passed over by its order) are misses each; a run of consecutive
    /// struct pages is streamed once the prefetcher has seen `trigger` misses of it in its 4KB
    /// region (hw/prefetch.rs; skylake's trigger is 2), each later line an L2 hit.
    #[test]
    fn consecutive_struct_pages_stream_and_jumps_miss() {
        let mut os = os("skylake:mem=1G");
        let (dram, l2) = (beyond_l1(&os, 3), beyond_l1(&os, 1));
        // Eight jumps of 256 pfns: 16KB of struct pages apart, a new 4KB region each.
        let jumps: u64 = (0..8).map(|i| os.memmap_read(4096 + 256 * i)).sum();
        assert_eq!(jumps, 8 * dram);
        // 16 consecutive pfns in one 4KB region of struct pages (64 of them).
        let run: u64 = (0..16).map(|i| os.memmap_read(20480 + i)).sum();
        assert_eq!(run, 2 * dram + 14 * l2);
        let st = &os.compact.stats.memmap;
        assert_eq!(st.reads_by_level, [0, 14, 0, 10]);
        assert_eq!(st.prefetched, 14);
    }

    /// The detector watches L1 misses only (hw/prefetch.rs): a struct page read again from L1
    /// in the middle of a run neither restarts nor breaks the stream.
    #[test]
    fn an_l1_hit_does_not_train_the_prefetcher() {
        let mut os = os("skylake:mem=1G");
        let (dram, l2) = (beyond_l1(&os, 3), beyond_l1(&os, 1));
        assert_eq!(os.memmap_read(8192), dram);
        assert_eq!(os.memmap_read(8193), dram);
        assert_eq!(os.memmap_read(8192), 0, "an L1 hit");
        assert_eq!(os.memmap_read(8194), l2, "the stream goes on");
    }

    /// The array's lines lie above every frame's line, a guest's host tables included.
    #[test]
    fn struct_page_lines_never_alias_a_frame() {
        for spec in ["skylake:mem=1G", "skylake:mem=3G,nested=4K", "alpha21264"] {
            let os = os(spec);
            let top = os.machine.mem_bytes >> LINE_SHIFT;
            // Host tables (hw/walk.rs `set_nested`) take less than memory's own size.
            assert!(os.memmap_line(0) >= 2 * top, "{spec}");
            // And just above: under four times memory's lines, so its tags fit the caches'
            // 32 bits wherever memory's do (hw/cache.rs).
            let last = os.machine.frames() - 1;
            assert!(os.memmap_line(last) < 4 * top, "{spec}");
            assert_eq!(os.memmap_line(7) - os.memmap_line(0), 7);
        }
    }
}
