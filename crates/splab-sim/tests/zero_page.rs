//! Linux's huge zero page (vm/thp.rs, `use_zero_page`, `zero_page_wp`): scenarios with exact
//! counts, every invariant checked after every event (`common::engine`).

mod common;

use common::{anon, engine, mapped, write};
use splab_sim::engine::Engine;
use splab_sim::units::{AccessKind, Pid};
use splab_sim::vm::Advice;

const M: &str = "skylake:mem=1G";
const MB2: u64 = 2 << 20;
const PAGE: u64 = 4096;

fn read(e: &mut Engine, pid: Pid, va: u64) {
    e.access(pid, va, AccessKind::Read).unwrap();
}

/// Bytes of base pages mapped to the 4KB zero page.
fn zero_ptes(e: &Engine, pid: Pid) -> u64 {
    let z = e.os.thp.zero.expect("zero pages allocated").base;
    let p = e.os.proc(pid).unwrap();
    p.pmap.entries().filter(|(_, pte)| pte.pfn() == z).count() as u64 * PAGE
}

/// Sleeps the machine `secs` simulated seconds: khugepaged wakes meanwhile.
fn idle(e: &mut Engine, secs: u64) {
    let until = e.clock() + secs * e.os.machine.freq_hz;
    e.idle_until(until).unwrap();
}

#[test]
fn read_faults_map_one_shared_huge_zero_page() {
    let (mut e, pid) = engine(M, "linux", None);
    let n = 4;
    let a = e.mmap(pid, anon(n * MB2)).unwrap();
    assert_eq!(a % MB2, 0);
    let before = e.os.footprint_bytes();
    for k in 0..n {
        read(&mut e, pid, a + k * MB2 + 7 * PAGE);
    }
    let t = &e.os.thp.stats;
    assert_eq!(
        (t.zero_page_alloc, t.zero_page_mapped, t.fault_alloc),
        (1, n, 0)
    );
    assert_eq!(e.os.stats.faults.total, n);
    // Every region is one read-only 2MB entry of the same frames; no object holds a page.
    assert_eq!(mapped(&e, pid), (0, n * MB2));
    let z = e.os.thp.zero.unwrap();
    let p = e.os.proc(pid).unwrap();
    for k in 0..n {
        let pte = p.pmap.lookup((a + k * MB2) >> 12).unwrap();
        assert_eq!(pte.pfn(), z.huge);
        assert!(!pte.prot().writable());
    }
    // The footprint grows by the zero pages once (2MB + the 4KB one), not by n * 2MB; the
    // huge one was zeroed once.
    assert_eq!(e.os.footprint_bytes(), before + MB2 + PAGE);
    assert_eq!(e.os.stats.zeroed_bytes, MB2);
    // Reading all of it faults no more.
    for k in 0..n * 512 {
        read(&mut e, pid, a + k * PAGE);
    }
    assert_eq!(e.os.stats.faults.total, n);
    // A second process shares it: no second allocation, no more footprint.
    let q = e.spawn().unwrap();
    let b = e.mmap(q, anon(MB2)).unwrap();
    read(&mut e, q, b);
    assert_eq!(e.os.thp.stats.zero_page_alloc, 1);
    assert_eq!(e.os.thp.stats.zero_page_mapped, n + 1);
    assert_eq!(e.os.footprint_bytes(), before + MB2 + PAGE);
}

#[test]
fn a_write_to_the_huge_zero_page_maps_a_new_thp_under_alloc() {
    let (mut e, pid) = engine(M, "linux", None);
    let a = e.mmap(pid, anon(2 * MB2)).unwrap();
    read(&mut e, pid, a);
    read(&mut e, pid, a + MB2);
    let before = e.os.footprint_bytes();
    write(&mut e, pid, a + 3 * PAGE);
    let t = &e.os.thp.stats;
    assert_eq!(
        (
            t.zero_page_wp,
            t.fault_alloc,
            t.zero_page_split,
            t.fault_fallback
        ),
        (1, 1, 0, 0)
    );
    assert_eq!(e.os.stats.faults.total, 3);
    // The written region is a THP now (writable, dirty); the other still the zero page.
    assert_eq!(mapped(&e, pid), (0, 2 * MB2));
    let p = e.os.proc(pid).unwrap();
    let pte = p.pmap.lookup(a >> 12).unwrap();
    assert!(pte.prot().writable() && pte.dirty());
    assert_ne!(pte.pfn(), e.os.thp.zero.unwrap().huge);
    assert_eq!(e.os.footprint_bytes(), before + MB2);
    // Zeroed: the huge zero page's 2MB at the first read, the new THP's 2MB at the write
    // (do_huge_pmd_wp_page's alloc path clears the new huge page); the second read none.
    assert_eq!(e.os.stats.zeroed_bytes, 2 * MB2);
    // The rest of the THP is written without a fault.
    write(&mut e, pid, a + MB2 - 8);
    assert_eq!(e.os.stats.faults.total, 3);
}

#[test]
fn a_write_to_the_huge_zero_page_splits_it_under_split() {
    let (mut e, pid) = engine(M, "linux:zero_page_wp=split", None);
    let a = e.mmap(pid, anon(MB2)).unwrap();
    read(&mut e, pid, a);
    let before = e.os.footprint_bytes();
    let zeroed = e.os.stats.zeroed_bytes;
    write(&mut e, pid, a + 3 * PAGE);
    let t = &e.os.thp.stats;
    assert_eq!(
        (t.zero_page_wp, t.zero_page_split, t.fault_alloc),
        (1, 1, 0)
    );
    // 511 base entries of the 4KB zero page and the written page, a new zeroed one.
    assert_eq!(mapped(&e, pid), (MB2, 0));
    assert_eq!(zero_ptes(&e, pid), MB2 - PAGE);
    assert_eq!(e.os.footprint_bytes(), before + PAGE);
    assert_eq!(e.os.stats.zeroed_bytes, zeroed + PAGE);
    assert_eq!(e.os.stats.faults.total, 2);
    // Reads of the others fault no more; a write to another copies it (one fault).
    read(&mut e, pid, a + 9 * PAGE);
    assert_eq!(e.os.stats.faults.total, 2);
    write(&mut e, pid, a + 9 * PAGE);
    assert_eq!(e.os.stats.faults.total, 3);
    assert_eq!(zero_ptes(&e, pid), MB2 - 2 * PAGE);
    assert_eq!(e.os.footprint_bytes(), before + 2 * PAGE);
}

#[test]
fn no_free_block_for_the_thp_splits_the_huge_zero_page() {
    // 4MB free: the page tables' unmovable allocations take one 2MB pageblock (fallback
    // steals the largest free block), the huge zero page the other; none is left for a THP.
    let (mut e, pid) = engine(M, "linux:khugepaged=off,pagedaemon=off", Some(4 << 20));
    let a = e.mmap(pid, anon(MB2)).unwrap();
    read(&mut e, pid, a);
    assert_eq!(e.os.thp.stats.zero_page_alloc, 1);
    write(&mut e, pid, a);
    let t = &e.os.thp.stats;
    assert_eq!(
        (
            t.zero_page_wp,
            t.fault_alloc,
            t.fault_fallback,
            t.zero_page_split
        ),
        (1, 0, 1, 1)
    );
    assert_eq!(mapped(&e, pid), (MB2, 0));
    assert_eq!(zero_ptes(&e, pid), MB2 - PAGE);
    // With no block for the zero page either, a read fault takes a base page.
    let (mut e, pid) = engine(M, "linux:khugepaged=off,pagedaemon=off", Some(1 << 20));
    let a = e.mmap(pid, anon(MB2)).unwrap();
    read(&mut e, pid, a);
    let t = &e.os.thp.stats;
    assert_eq!(
        (
            t.zero_page_alloc,
            t.zero_page_alloc_failed,
            t.fault_fallback
        ),
        (0, 1, 1)
    );
    assert_eq!(mapped(&e, pid), (PAGE, 0));
    assert!(e.os.thp.zero.is_none());
}

#[test]
fn use_zero_page_0_allocates_at_a_read_fault() {
    let (mut e, pid) = engine(M, "linux:use_zero_page=0", None);
    let a = e.mmap(pid, anon(MB2)).unwrap();
    read(&mut e, pid, a);
    let t = &e.os.thp.stats;
    assert_eq!(
        (t.fault_alloc, t.zero_page_alloc, t.zero_page_mapped),
        (1, 0, 0)
    );
    assert!(e.os.thp.zero.is_none());
    assert_eq!(e.os.footprint_bytes(), MB2);
}

#[test]
fn unmapping_a_huge_zero_mapping_frees_nothing() {
    let (mut e, pid) = engine(M, "linux", None);
    let a = e.mmap(pid, anon(2 * MB2)).unwrap();
    read(&mut e, pid, a);
    read(&mut e, pid, a + MB2);
    let footprint = e.os.footprint_bytes();
    // Half a region: the mapping is split into 4KB zero-page entries, then half unmapped.
    e.munmap(pid, a, MB2 / 2).unwrap();
    assert_eq!(e.os.thp.stats.zero_page_split, 1);
    assert_eq!(mapped(&e, pid), (MB2 / 2, MB2));
    assert_eq!(zero_ptes(&e, pid), MB2 / 2);
    // MADV_DONTNEED of a whole one unmaps it.
    e.madvise(pid, a + MB2, MB2, Advice::DontNeed).unwrap();
    assert_eq!(mapped(&e, pid), (MB2 / 2, 0));
    e.munmap(pid, a + MB2 / 2, MB2 / 2).unwrap();
    assert_eq!(mapped(&e, pid), (0, 0));
    // The zero pages stay, unmapped; nothing was freed.
    assert_eq!(e.os.footprint_bytes(), footprint);
    assert_eq!(e.os.thp.stats.zero_page_alloc, 1);
    // A read maps the same one again.
    let b = e.mmap(pid, anon(MB2)).unwrap();
    read(&mut e, pid, b);
    let z = e.os.thp.zero.unwrap().huge;
    assert_eq!(
        e.os.proc(pid).unwrap().pmap.lookup(b >> 12).unwrap().pfn(),
        z
    );
    assert_eq!(e.os.footprint_bytes(), footprint);
}

#[test]
fn khugepaged_counts_zero_page_entries_as_none() {
    // After a split, one written page and 511 entries of the 4KB zero page: at max_ptes_none
    // 511 collapsed (the zero-page entries zeroed), at 510 refused.
    for (policy, collapse) in [
        ("linux:zero_page_wp=split", true),
        ("linux:zero_page_wp=split,max_ptes_none=510", false),
    ] {
        let (mut e, pid) = engine(M, policy, None);
        let a = e.mmap(pid, anon(MB2)).unwrap();
        read(&mut e, pid, a);
        write(&mut e, pid, a);
        assert_eq!(zero_ptes(&e, pid), MB2 - PAGE, "{policy}");
        idle(&mut e, 11);
        let t = &e.os.thp.stats;
        if collapse {
            assert_eq!(
                (t.pages_collapsed, t.collapse_copied, t.collapse_zeroed),
                (1, 1, 511),
                "{policy}"
            );
            assert_eq!(mapped(&e, pid), (0, MB2), "{policy}");
            assert_eq!(zero_ptes(&e, pid), 0, "{policy}");
        } else {
            assert_eq!((t.pages_collapsed, t.scan_fail_none), (0, 1), "{policy}");
            assert_eq!(mapped(&e, pid), (MB2, 0), "{policy}");
        }
    }
}

#[test]
fn the_knobs_parse_and_bad_values_name_the_key() {
    use splab_sim::policy::{Policy, ZeroPageWp};
    let p = Policy::from_spec("linux").unwrap();
    let t = p.thp().unwrap();
    assert!(t.use_zero_page);
    assert_eq!(t.zero_page_wp, ZeroPageWp::Alloc);
    let p = Policy::from_spec("linux-4.3:use_zero_page=0,zero_page_wp=split").unwrap();
    let t = p.thp().unwrap();
    assert!(!t.use_zero_page);
    assert_eq!(t.zero_page_wp, ZeroPageWp::Split);
    let err = Policy::from_spec("linux:zero_page_wp=copy")
        .unwrap_err()
        .to_string();
    assert!(err.contains("zero_page_wp='copy'"), "{err}");
    let err = Policy::from_spec("linux:use_zero_page=maybe")
        .unwrap_err()
        .to_string();
    assert!(err.contains("use_zero_page"), "{err}");
    // And through a file: `policy show`'s TOML reads back to the same value.
    let p = Policy::from_spec("linux:zero_page_wp=split,use_zero_page=0").unwrap();
    let text = p.to_toml();
    assert!(text.contains("use_zero_page = false"), "{text}");
    assert!(text.contains("zero_page_wp = \"split\""), "{text}");
    let mut back = Policy::from_toml(&text, "t.toml").unwrap();
    back.name = p.name.clone();
    assert_eq!(back, p);
}

#[test]
fn a_workload_that_writes_first_is_unchanged_by_use_zero_page() {
    // A write-first scan never meets the zero page: the reports are identical but for the
    // policy's name and the host's wall time. A read-only scan of 16MB never written maps the
    // zero page: 2MB + 4KB of footprint instead of 16MB, still 2MB entries.
    let json = |p: &str, w: &str| {
        let mut v = serde_json::to_value(common::run("skylake", p, w)).unwrap();
        v.as_object_mut().unwrap().remove("sim");
        v["config"]
            .as_object_mut()
            .unwrap()
            .remove("policy")
            .unwrap();
        v
    };
    let w = "seq:size=16M,op=write";
    assert_eq!(json("linux", w), json("linux:use_zero_page=0", w));
    let w = "seq:size=16M,op=read";
    let (on, off) = (json("linux", w), json("linux:use_zero_page=0", w));
    let mem = |v: &serde_json::Value| v["memory"]["footprint_peak_bytes"].as_u64().unwrap();
    assert_eq!(mem(&on), MB2 + PAGE);
    assert_eq!(mem(&off), 16 << 20);
    assert_eq!(on["memory"]["thp"]["zero_page_mapped"], 8);
    assert_eq!(on["memory"]["thp"]["fault_alloc"], 0);
    assert_eq!(off["memory"]["thp"]["fault_alloc"], 8);
}

#[test]
fn mremap_moves_a_huge_zero_mapping_whole_or_splits_it() {
    let (mut e, pid) = engine(M, "linux", None);
    let a = e.mmap(pid, anon(MB2)).unwrap();
    read(&mut e, pid, a);
    // To a 2MB-aligned address: still one 2MB entry of the huge zero page.
    let to = 0x4000_0000;
    let b = e.mremap(pid, a, MB2, to, MB2).unwrap();
    assert_eq!(b, to);
    assert_eq!(mapped(&e, pid), (0, MB2));
    assert_eq!(e.os.thp.stats.zero_page_split, 0);
    // To an address 4KB off alignment: 512 entries of the 4KB zero page.
    let c = e.mremap(pid, b, MB2, to + 8 * MB2 + PAGE, MB2).unwrap();
    assert_eq!(mapped(&e, pid), (MB2, 0));
    assert_eq!(zero_ptes(&e, pid), MB2);
    assert_eq!(e.os.thp.stats.zero_page_split, 1);
    // A write there allocates one zeroed page.
    write(&mut e, pid, c);
    assert_eq!(zero_ptes(&e, pid), MB2 - PAGE);
}

#[test]
fn zero_page_faults_cost_what_their_mechanism_does() {
    // The first read fault zeroes the huge zero page (512 x the machine's huge-page rate) and
    // writes one entry; a later one only writes the entry. A write under alloc clears a new
    // THP, writes its entry and shoots down the zero page's; under split the written page is
    // zeroed at the 4KB rate and its entry shot down.
    let fault = |e: &mut Engine, pid: Pid, va: u64, kind: AccessKind| {
        let before = e.os.stats.cycles_fault;
        e.access(pid, va, kind).unwrap();
        e.os.stats.cycles_fault - before
    };
    let (mut e, pid) = engine(M, "linux", None);
    e.os.machine.cost.huge_zero_page_cycles += 7;
    let c = e.os.machine.cost.clone();
    assert!(!e.os.machine.replicated_ptes);
    let a = e.mmap(pid, anon(2 * MB2)).unwrap();
    assert_eq!(
        fault(&mut e, pid, a, AccessKind::Read),
        c.fault_cycles + 512 * c.huge_zero_page_cycles + c.pte_write_cycles
    );
    assert_eq!(
        fault(&mut e, pid, a + MB2, AccessKind::Read),
        c.fault_cycles + c.pte_write_cycles
    );
    assert_eq!(
        fault(&mut e, pid, a, AccessKind::Write),
        c.fault_cycles
            + 512 * c.huge_zero_page_cycles
            + c.pte_write_cycles
            + c.tlb_invalidate_cycles
    );
    let (mut e, pid) = engine(M, "linux:zero_page_wp=split", None);
    let c = e.os.machine.cost.clone();
    let a = e.mmap(pid, anon(MB2)).unwrap();
    read(&mut e, pid, a);
    assert_eq!(
        fault(&mut e, pid, a + 5 * PAGE, AccessKind::Write),
        c.fault_cycles + c.zero_page_cycles + c.tlb_invalidate_cycles
    );
    // The split itself: one demotion of the 2MB class.
    assert_eq!(e.os.stats.demotions[1], 1);
}
