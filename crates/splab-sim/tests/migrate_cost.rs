//! The migration cost is the machine's (`[cost]` `migrate_page_kernel_ns`, hw/machine.rs):
//! what each preset carries, the default of a file without the key, and that a direct
//! compaction's migrations are charged the machine's value (vm/compact.rs `migrate_page`).

mod common;

use common::{anon, engine, pfn_of, write};
use splab_sim::engine::Engine;
use splab_sim::hw::machine::{Machine, DEFAULT_MIGRATE_PAGE_KERNEL_NS};
use splab_sim::units::Pid;
use splab_sim::vm::Advice;

const FREE: u64 = 16 << 20;
const MB2: u64 = 2 << 20;
const PAGE: u64 = 4096;
const PB: u64 = 512;
/// Movable pages left in each pageblock.
const K: u64 = 4;

#[test]
fn presets_carry_their_migration_cost_and_a_file_without_it_gets_the_default() {
    // docs/constants.md 7: the x86 presets take the native server's 765 ns, the others the
    // default (a KVM guest's 1,400 ns).
    for (name, ns) in [
        ("skylake", 765),
        ("core2", 765),
        ("core2-64", 765),
        ("alpha21264", DEFAULT_MIGRATE_PAGE_KERNEL_NS),
        ("pa8000", DEFAULT_MIGRATE_PAGE_KERNEL_NS),
    ] {
        let m = Machine::from_spec(name).unwrap();
        assert_eq!(m.cost.migrate_page_kernel_ns, ns, "{name}");
    }
    assert_eq!(DEFAULT_MIGRATE_PAGE_KERNEL_NS, 1_400);
    // `splab machine show skylake`, less the key, as a calibrated file written before it.
    let text = Machine::show("skylake").unwrap();
    let without = text.replacen("migrate_page_kernel_ns = 765\n", "", 1);
    assert_ne!(text, without);
    let path = std::env::temp_dir().join(format!("splab-migcost-{}.toml", std::process::id()));
    std::fs::write(&path, &without).unwrap();
    let m = Machine::from_spec(&format!("file:{}", path.display()));
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        m.unwrap().cost.migrate_page_kernel_ns,
        DEFAULT_MIGRATE_PAGE_KERNEL_NS
    );
}

/// 16MB of free memory filled with base pages, their page tables first (in the first
/// pageblock), then freed but for the first `K` frames of every pageblock after the first: no
/// 2MB block is free.
fn fragmented() -> (Engine, Pid) {
    let (mut e, pid) = engine(
        "skylake:mem=1G",
        "linux:khugepaged=off,kcompactd=off,pagedaemon=off,mobility=off",
        Some(FREE),
    );
    let a = e.mmap(pid, anon(FREE)).unwrap();
    e.madvise(pid, a, FREE, Advice::NoHugePage).unwrap();
    // The page tables first, in the first pageblock (tests/compact.rs `setup`'s layout).
    for c in 0..FREE / MB2 {
        write(&mut e, pid, a + c * MB2);
    }
    let mut va = a;
    while e.os.phys.buddy.free_frames > 0 {
        if pfn_of(&e, pid, va).is_none() {
            write(&mut e, pid, va);
        }
        va += PAGE;
    }
    for p in (a..va).step_by(PAGE as usize) {
        let f = pfn_of(&e, pid, p).unwrap().0;
        if f >= PB && f % PB >= K {
            e.madvise(pid, p, PAGE, Advice::DontNeed).unwrap();
        }
    }
    // Three frames of the first pageblock for the fault's page tables.
    for c in 1..4 {
        e.madvise(pid, a + c * MB2, PAGE, Advice::DontNeed).unwrap();
    }
    assert!(e.os.phys.buddy.largest_free_order() < Some(9));
    (e, pid)
}

/// The THP fault's direct compaction on the fragmented memory with the machine's migration
/// cost set to `ns`: (pages migrated, its cycles, `ns` in cycles).
fn stall(ns: u64) -> (u64, u64, u64) {
    stall_with(|c| c.migrate_page_kernel_ns = ns)
}

/// The same stall with the machine's costs changed by `set`.
fn stall_with(set: impl Fn(&mut splab_sim::hw::machine::CostConfig)) -> (u64, u64, u64) {
    stall_forked(false, set)
}

/// The stall, with the fragmented pages shared by a forked child first if `fork` (each then
/// has two mappings).
fn stall_forked(
    fork: bool,
    set: impl Fn(&mut splab_sim::hw::machine::CostConfig),
) -> (u64, u64, u64) {
    let (mut e, pid) = fragmented();
    if fork {
        e.fork(pid).unwrap();
    }
    set(&mut e.os.machine.cost);
    let ns = e.os.machine.cost.migrate_page_kernel_ns;
    let b = e.mmap(pid, anon(MB2)).unwrap();
    write(&mut e, pid, b);
    let c = &e.os.compact.stats;
    assert_eq!((c.compact_stall, c.compact_success), (1, 1));
    (
        c.pgmigrate_success,
        c.direct_cycles,
        e.os.machine.ns_to_cycles(ns),
    )
}

#[test]
fn a_stall_pays_the_machines_migration_cost_per_page() {
    let (n_lo, lo, per_lo) = stall(765);
    let (n_hi, hi, per_hi) = stall(2_765);
    assert!(n_lo > 0);
    assert_eq!(n_lo, n_hi, "the same migrations");
    assert_eq!(hi - lo, n_lo * (per_hi - per_lo));
}

/// Beside the kernel's work, a migrated page costs one copy, and its one mapping (a private
/// anonymous page of one process) a PTE write and a TLB invalidation: each cost moved alone
/// moves the stall by exactly the pages migrated times its change.
#[test]
fn a_migrated_page_pays_one_copy_and_a_pte_write_and_invalidation_per_mapping() {
    let (n, base, _) = stall_with(|_| {});
    assert!(n > 0);
    let (n1, copy, _) = stall_with(|c| c.copy_page_cycles += 1_000);
    let (n2, pte, _) = stall_with(|c| c.pte_write_cycles += 100);
    let (n3, inv, _) = stall_with(|c| c.tlb_invalidate_cycles += 10);
    assert_eq!((n1, n2, n3), (n, n, n), "the same migrations");
    assert_eq!(copy - base, n * 1_000);
    assert_eq!(pte - base, n * 100);
    assert_eq!(inv - base, n * 10);
}

/// A page mapped by two processes (a parent and its forked child) has two mappings to move:
/// two PTE writes and two invalidations, one copy.
#[test]
fn a_page_mapped_twice_pays_two_pte_writes_and_invalidations() {
    let (n, base, _) = stall_forked(true, |_| {});
    assert!(n > 0);
    let (n1, pte, _) = stall_forked(true, |c| c.pte_write_cycles += 100);
    let (n2, inv, _) = stall_forked(true, |c| c.tlb_invalidate_cycles += 10);
    let (n3, copy, _) = stall_forked(true, |c| c.copy_page_cycles += 1_000);
    assert_eq!((n1, n2, n3), (n, n, n), "the same migrations");
    assert_eq!(pte - base, n * 2 * 100);
    assert_eq!(inv - base, n * 2 * 10);
    assert_eq!(copy - base, n * 1_000);
}
