//! Scenario tests of `Os::promote_if_uniform`, the mapping conditions of a promotion (seed 000
//! 4.9: "uniform protection attributes and dirty bits") and what a promotion that passes or
//! fails them does: FreeBSD pmap_promote_pde's write-protect-clean trick (policy `freebsd`),
//! prefaulted read-only neighbours made writable, seed 000 6.6's overhead mode
//! (`promote=overhead`), the PTE writes and the TLB invalidation. Each test is one question,
//! answered with the counts the mechanism makes exact, on the Alpha 21264 (8KB base pages, 64KB
//! superpages of 8 pages, replicated PTEs: a promotion to 64KB writes 8 PTEs).

mod common;

use splab_sim::engine::Engine;
use splab_sim::units::{AccessKind, Pid, Prot};
use splab_sim::vm::{MapFlags, MmapReq};

const PAGE: u64 = 8192;
const EXT: u64 = 64 << 10;

/// (protection, size class, dirty bit) of the entry mapping `va`.
fn pte(e: &Engine, pid: Pid, va: u64) -> (Prot, u8, bool) {
    let p = e.os.proc(pid).unwrap().pmap.lookup(va / PAGE).unwrap();
    (p.prot(), p.size().0, p.dirty())
}

/// The protections of the 8 entries of the 64KB extent at `va`.
fn prots(e: &Engine, pid: Pid, va: u64) -> Vec<Prot> {
    (0..8).map(|i| pte(e, pid, va + i * PAGE).0).collect()
}

fn touch(e: &mut Engine, pid: Pid, va: u64, pages: std::ops::Range<u64>, kind: AccessKind) {
    for i in pages {
        e.access(pid, va + i * PAGE, kind).unwrap();
    }
}

/// Kernel cycles that are not reservation bookkeeping (FreeBSD's write-protection of clean
/// pages is charged there; a zero-fill fault charges the rest to `cycles_fault`).
fn kernel_not_resv(e: &Engine) -> u64 {
    e.os.stats.cycles_kernel - e.os.stats.cycles_reservation
}

/// The TLB entries of `pid` as (virtual address, size class).
fn tlb(e: &Engine, pid: Pid) -> Vec<(u64, u8)> {
    let mut v: Vec<(u64, u8)> =
        e.os.hw
            .tlb
            .entries()
            .into_iter()
            .filter(|&(asid, _, _)| asid == pid.0)
            .map(|(_, va, t)| (va, t.size.0))
            .collect();
    v.sort_unstable();
    v
}

/// Three 64KB extents A, B, C of a private anonymous mapping, 64KB-aligned; A is written in
/// full (a 64KB superpage unless `promote=overhead`) and C's first page is written, so that
/// both have TLB entries and C a writable dirty page, before B is touched.
fn three_extents(policy: &str) -> (Engine, Pid, [u64; 3]) {
    let (mut e, pid) = common::engine("alpha21264", policy, None);
    let a = e.mmap(pid, common::anon(3 * EXT)).unwrap();
    assert_eq!(a % EXT, 0);
    touch(&mut e, pid, a, 0..8, AccessKind::Write);
    touch(&mut e, pid, a + 2 * EXT, 0..1, AccessKind::Write);
    (e, pid, [a, a + EXT, a + 2 * EXT])
}

/// FreeBSD pmap_promote_pde on a mixed extent (seed 000 4.9: dirty bits not uniform): no
/// promotion, but the 4 clean pages (and only they) are write-protected, one PTE write each
/// (4 x 29 cycles), and their TLB entries (and only theirs, uncharged: the model's stand-in for
/// x86's re-read of a PTE on a write through a clean entry) are invalidated; writing the 4
/// clean pages then faults on each and the last fault promotes. Kills, in
/// `Os::promote_if_uniform`: `stop_at_mix` `!=` -> `==`; the write-protect condition's
/// `clean_write == WriteProtect` -> `!=` and `!overhead` -> `overhead`; the read-only
/// protection `prot & !WRITE` -> `|`, `^`, `& WRITE`; the clean-page loop's range
/// `head + n` -> `head - n` / `head * n` (the latter reaches C's clean page), its test `!is_dirty` -> `is_dirty` and `&&` -> `||`;
/// `changed += 1` -> `*=`; the charge `+=` -> `-=` / `*=` and `changed * pte` -> `+` / `/`;
/// each invalidated page's range `vpn << bs` -> `>>` and `(vpn + 1)` -> `-` / `*`.
#[test]
fn freebsd_write_protects_the_clean_pages_of_a_mixed_extent() {
    let (mut e, pid, [a, b, c]) = three_extents("freebsd");
    assert_eq!(e.os.stats.promotions[1], 1, "A");
    touch(&mut e, pid, b, 0..4, AccessKind::Read);
    touch(&mut e, pid, b, 4..7, AccessKind::Write);
    // A clean writable page beyond B, in C, which B's write-protection must not reach.
    touch(&mut e, pid, c, 1..2, AccessKind::Read);
    let k0 = kernel_not_resv(&e);
    // The last page completes B: 4 clean pages, 4 dirty.
    touch(&mut e, pid, b, 7..8, AccessKind::Write);
    assert_eq!(e.os.stats.promotions[1], 1, "B is not uniformly dirty");
    let (r, rw) = (Prot::READ, Prot::RW);
    assert_eq!(prots(&e, pid, b), [r, r, r, r, rw, rw, rw, rw]);
    assert_eq!(
        kernel_not_resv(&e) - k0,
        4 * e.os.machine.cost.pte_write_cycles,
        "one PTE write per clean page write-protected"
    );
    assert_eq!(pte(&e, pid, c), (rw, 0, true), "C untouched");
    assert_eq!(
        pte(&e, pid, c + PAGE),
        (rw, 0, false),
        "C's clean page untouched"
    );
    // B's clean pages' entries are gone; its dirty pages' (4..7, 7 the retried write's), A's
    // superpage and C's pages stay.
    let b_dirty = (4..8).map(|i| (b + i * PAGE, 0));
    let want: Vec<(u64, u8)> = [(a, 1)]
        .into_iter()
        .chain(b_dirty)
        .chain([(c, 0), (c + PAGE, 0)])
        .collect();
    assert_eq!(tlb(&e, pid), want);
    // Each clean page's next write faults, makes it dirty and writable; the last promotes.
    let prot_faults = e.os.stats.faults.protection;
    touch(&mut e, pid, b, 0..4, AccessKind::Write);
    assert_eq!(e.os.stats.faults.protection, prot_faults + 4);
    assert_eq!(e.os.stats.promotions[1], 2, "B once every page is dirty");
    assert_eq!(pte(&e, pid, b), (rw, 1, true));
}

/// seed 000 6.6's overhead mode under FreeBSD's rule: the mappings are left alone, so a mixed
/// extent's clean pages stay writable, nothing is charged for them and no TLB entry goes.
/// Kills the write-protect condition's `&&` -> `||` (either one), which write-protected them
/// in overhead mode.
#[test]
fn freebsd_overhead_mode_leaves_a_mixed_extent_alone() {
    let (mut e, pid, [_, b, _]) = three_extents("freebsd:promote=overhead");
    assert_eq!(e.os.stats.promotions[1], 0);
    touch(&mut e, pid, b, 0..4, AccessKind::Read);
    touch(&mut e, pid, b, 4..7, AccessKind::Write);
    let k0 = kernel_not_resv(&e);
    let promo = e.os.stats.cycles_promotion;
    touch(&mut e, pid, b, 7..8, AccessKind::Write);
    assert_eq!(prots(&e, pid, b), [Prot::RW; 8]);
    assert_eq!(kernel_not_resv(&e), k0);
    assert_eq!(
        e.os.stats.cycles_promotion, promo,
        "no promotion to pay for"
    );
    let in_b = tlb(&e, pid)
        .into_iter()
        .filter(|&(va, _)| (b..b + EXT).contains(&va))
        .count();
    assert_eq!(in_b, 8, "every page of B still in the TLB");
}

/// FreeBSD pmap_promote_pde: an all-clean extent is promoted read-only: the 8 replicated PTEs
/// written (seed 000 6.1) with the read-only protection in them (no separate write-protect
/// pass on the Alpha), and one TLB invalidation: 8 x 29 + 20 = 252 cycles; nothing outside it
/// changes (C's dirty page stays writable). Kills the write-protection's `!replicated_ptes`
/// with `!` deleted (8 more writes) and the protected range `head + n` -> `head - n`.
#[test]
fn freebsd_promotes_an_all_clean_extent_read_only_at_exact_cost() {
    let (mut e, pid, [_, b, c]) = three_extents("freebsd");
    let promo = e.os.stats.cycles_promotion;
    touch(&mut e, pid, b, 0..8, AccessKind::Read);
    assert_eq!(e.os.stats.promotions[1], 2, "A and B");
    assert_eq!(prots(&e, pid, b), [Prot::READ; 8]);
    assert_eq!(pte(&e, pid, b), (Prot::READ, 1, false));
    let m = &e.os.machine.cost;
    assert_eq!(
        e.os.stats.cycles_promotion - promo,
        8 * m.pte_write_cycles + m.tlb_invalidate_cycles
    );
    assert_eq!(pte(&e, pid, c), (Prot::RW, 0, true), "C untouched");
}

/// seed 000 6.6's overhead mode on an all-clean extent under FreeBSD's rule: the promotion's
/// PTE writes are paid (the 8 replicated PTEs, 8 x 29 = 232 cycles; the write protection would
/// ride in them) but nothing is mapped differently: the pages stay writable base pages. Kills
/// `if !overhead` -> `if overhead` around the write-protection.
#[test]
fn freebsd_overhead_mode_pays_for_a_clean_promotion_and_maps_nothing() {
    let (mut e, pid, [_, b, _]) = three_extents("freebsd:promote=overhead");
    let promo = e.os.stats.cycles_promotion;
    touch(&mut e, pid, b, 0..8, AccessKind::Read);
    assert_eq!(e.os.stats.promotions[1], 0);
    assert_eq!(prots(&e, pid, b), [Prot::RW; 8]);
    assert_eq!(pte(&e, pid, b).1, 0);
    assert_eq!(
        e.os.stats.cycles_promotion - promo,
        8 * e.os.machine.cost.pte_write_cycles
    );
}

/// A 64KB file mapped shared and writable: the first read fault reads the file ahead into the
/// page cache, enters the faulting page writable and prefaults the resident neighbours
/// read-only (pmap_prefault, 4 + 4, entered by pmap_enter_quick). Reading pages 0 and 5 maps
/// all 8 (0 and 5 writable); the extent is clean and its
/// protections agree but for the write permission of clean pages (FreeBSD pmap_promote_pde),
/// so it is promoted (seed 000 4.9) writable: the 8 replicated PTEs written with the writable
/// protection in them, one TLB invalidation.
fn read_prefaulted_file(policy: &str) -> (Engine, Pid, u64, u64) {
    let (mut e, pid) = common::engine("alpha21264", policy, None);
    e.open_file(9, EXT).unwrap();
    let req = MmapReq {
        addr: 0,
        len: EXT,
        prot: Prot::RW,
        flags: MapFlags::FILE.with(MapFlags::SHARED),
        file: 9,
        offset: 0,
    };
    let f = e.mmap(pid, req).unwrap();
    let promo = e.os.stats.cycles_promotion;
    e.access(pid, f, AccessKind::Read).unwrap();
    assert_eq!(
        e.os.proc(pid)
            .unwrap()
            .pmap
            .count_valid(f / PAGE, f / PAGE + 8),
        5,
        "0 and 4 ahead"
    );
    e.access(pid, f + 5 * PAGE, AccessKind::Read).unwrap();
    let promo = e.os.stats.cycles_promotion - promo;
    (e, pid, f, promo)
}

/// Kills `all_w && w` -> `||`, the set-writable branch's `!all_w` and `!overhead` deleted, and
/// `dirty > 0` -> `dirty == 0` in the dirty-read-only check.
#[test]
fn prefaulted_read_only_neighbours_join_a_writable_superpage() {
    let (e, pid, f, promo) = read_prefaulted_file("navarro");
    assert_eq!(e.os.stats.promotions[1], 1);
    assert_eq!(prots(&e, pid, f), [Prot::RW; 8]);
    assert_eq!(pte(&e, pid, f), (Prot::RW, 1, false));
    // 8 x 29 + 20 = 252 cycles: no write for the protection beyond the promotion's 8.
    let m = &e.os.machine.cost;
    assert_eq!(promo, 8 * m.pte_write_cycles + m.tlb_invalidate_cycles);
}

/// The same in seed 000 6.6's overhead mode: only the 8 replicated PTE writes are paid; the
/// prefaulted entries keep their read-only protection. Kills `any_w && !all_w && !overhead`
/// with `!overhead` deleted (the protections rewritten in overhead mode).
#[test]
fn overhead_mode_leaves_prefaulted_neighbours_read_only() {
    let (e, pid, f, promo) = read_prefaulted_file("navarro:promote=overhead");
    assert_eq!(e.os.stats.promotions[1], 0);
    let (r, rw) = (Prot::READ, Prot::RW);
    assert_eq!(prots(&e, pid, f), [rw, r, r, r, r, rw, r, r]);
    assert_eq!(promo, 8 * e.os.machine.cost.pte_write_cycles);
}

/// seed 000 4.9, uniform protection: a dirty page mapped read-only (mprotect took the write
/// permission; mprotect back to read-write grants it lazily, on the next write fault) beside
/// a writable one is not promoted, while a clean read-only page would be. Once every page has
/// been written again the extent is promoted. Kills `!all_w && dirty > 0` -> `dirty < 0`.
#[test]
fn a_dirty_read_only_page_beside_writable_ones_is_not_promoted() {
    let (mut e, pid) = common::engine("alpha21264", "navarro", None);
    let a = e.mmap(pid, common::anon(EXT)).unwrap();
    assert_eq!(a % EXT, 0);
    touch(&mut e, pid, a, 0..7, AccessKind::Write);
    e.mprotect(pid, a, EXT, Prot::READ).unwrap();
    e.mprotect(pid, a, EXT, Prot::RW).unwrap();
    assert_eq!(pte(&e, pid, a), (Prot::READ, 0, true));
    touch(&mut e, pid, a, 7..8, AccessKind::Write);
    assert_eq!(
        e.os.stats.promotions[1], 0,
        "7 dirty read-only pages, 1 writable"
    );
    touch(&mut e, pid, a, 0..7, AccessKind::Write);
    assert_eq!(e.os.stats.promotions[1], 1);
    assert_eq!(pte(&e, pid, a), (Prot::RW, 1, true));
}

/// A promotion invalidates the TLB entries of its extent and only them (seed 000 4.9; the
/// split's counterpart is tests/superpages.rs a_split_demotes_one_size_at_a_time...): after B
/// is promoted, A's 64KB entry and C's base-page entry are still there, B's base entries gone.
/// Kills the invalidated range's `head << bs` -> `>>` and `(head + n)` -> `(head * n)`.
#[test]
fn a_promotion_invalidates_its_own_extent_only() {
    let (mut e, pid, [a, b, c]) = three_extents("navarro");
    assert_eq!(e.os.stats.promotions[1], 1, "A");
    touch(&mut e, pid, b, 0..7, AccessKind::Write);
    assert_eq!(tlb(&e, pid).len(), 2 + 7);
    touch(&mut e, pid, b, 7..8, AccessKind::Write);
    assert_eq!(e.os.stats.promotions[1], 2, "B");
    assert_eq!(
        tlb(&e, pid),
        [(a, 1), (b, 1), (c, 0)],
        "the retried write fills B's 64KB entry"
    );
    assert_eq!(
        pte(&e, pid, b + 3 * PAGE).1,
        1,
        "B's entries are of the 64KB size"
    );
}

const X86_PAGE: u64 = 4096;
const X86_EXT: u64 = 2 << 20;

/// A 2MB file mapped shared and writable on Skylake (4KB base pages, 2MB superpages in one PDE:
/// a radix table), every page read in order by a read fault on each page not yet mapped: each
/// fault enters its page writable and prefaults the 4 resident pages ahead read-only
/// (pmap_prefault), so 512 = 102 x 5 + 2 pages take 103 faults and 103 writable PTEs; the last
/// fault completes the extent. Returns the promotion cycles of the run.
fn read_prefaulted_2mb_file(policy: &str) -> (Engine, Pid, u64, u64) {
    let (mut e, pid) = common::engine("skylake:mem=1G", policy, None);
    e.open_file(9, X86_EXT).unwrap();
    let req = MmapReq {
        addr: 0,
        len: X86_EXT,
        prot: Prot::RW,
        flags: MapFlags::FILE.with(MapFlags::SHARED),
        file: 9,
        offset: 0,
    };
    let f = e.mmap(pid, req).unwrap();
    assert_eq!(f % X86_EXT, 0);
    let promo = e.os.stats.cycles_promotion;
    let mut faults = 0;
    for i in 0..512 {
        let va = f + i * X86_PAGE;
        if e.os.proc(pid).unwrap().pmap.lookup(va / X86_PAGE).is_none() {
            e.access(pid, va, AccessKind::Read).unwrap();
            faults += 1;
        }
    }
    assert_eq!(faults, 103, "one fault per 5 pages");
    let promo = e.os.stats.cycles_promotion - promo;
    (e, pid, f, promo)
}

/// The (protection, size class) of the 512 entries of the 2MB extent at `f`, deduplicated.
fn x86_prots(e: &Engine, pid: Pid, f: u64) -> Vec<(Prot, u8)> {
    let pm = &e.os.proc(pid).unwrap().pmap;
    let mut v: Vec<(Prot, u8)> = (0..512)
        .map(|i| pm.lookup(f / X86_PAGE + i).unwrap())
        .map(|p| (p.prot(), p.size().0))
        .collect();
    v.dedup();
    v
}

/// FreeBSD pmap_promote_pde on a radix table: the 103 writable clean PTEs are write-protected
/// (one write each), the 409 prefaulted read-only ones are not written, then the one PDE and
/// one TLB invalidation: (103 + 1) x 5 + 200 = 720 cycles, a read-only 2MB page.
#[test]
fn radix_freebsd_write_protects_only_the_writable_ptes() {
    let (e, pid, f, promo) = read_prefaulted_2mb_file("freebsd");
    assert_eq!(e.os.stats.promotions[1], 1);
    assert_eq!(x86_prots(&e, pid, f), [(Prot::READ, 1)]);
    let m = &e.os.machine.cost;
    assert_eq!(
        promo,
        (103 + 1) * m.pte_write_cycles + m.tlb_invalidate_cycles
    );
}

/// The same under seed 000 6.6's overhead mode: the writes a promotion would make are paid,
/// (103 + 1) x 5 = 520 cycles, and nothing is mapped differently.
#[test]
fn radix_freebsd_overhead_mode_pays_the_write_protection_and_the_pde() {
    let (e, pid, f, promo) = read_prefaulted_2mb_file("freebsd:promote=overhead");
    assert_eq!(e.os.stats.promotions[1], 0);
    assert_eq!(x86_prots(&e, pid, f)[0], (Prot::RW, 0), "the first page's");
    assert_eq!(promo, (103 + 1) * e.os.machine.cost.pte_write_cycles);
}

/// Under navarro on a radix table, prefaulted read-only neighbours join a writable 2MB page
/// whose protection is the PDE's: one PDE write and one TLB invalidation, 5 + 200 = 205
/// cycles, no write of the 409 read-only PTEs (FreeBSD keeps them in the page-table page for a
/// demotion, which refills them from the PDE: pmap_demote_pde).
#[test]
fn radix_prefaulted_neighbours_join_with_one_pde_write() {
    let (e, pid, f, promo) = read_prefaulted_2mb_file("navarro");
    assert_eq!(e.os.stats.promotions[1], 1);
    assert_eq!(x86_prots(&e, pid, f), [(Prot::RW, 1)]);
    let m = &e.os.machine.cost;
    assert_eq!(promo, m.pte_write_cycles + m.tlb_invalidate_cycles);
}

/// FreeBSD pmap_promote_pde on an all-clean anonymous 2MB extent whose 512 pages were entered
/// writable by read faults: 512 write-protections, the PDE and the invalidation,
/// (512 + 1) x 5 + 200 = 2765 cycles.
#[test]
fn radix_freebsd_write_protects_every_writable_clean_pte() {
    let (mut e, pid) = common::engine("skylake:mem=1G", "freebsd", None);
    let a = e.mmap(pid, common::anon(2 * X86_EXT)).unwrap();
    let a = a.next_multiple_of(X86_EXT);
    let promo = e.os.stats.cycles_promotion;
    for i in 0..512 {
        e.access(pid, a + i * X86_PAGE, AccessKind::Read).unwrap();
    }
    assert_eq!(e.os.stats.promotions[1], 1);
    assert_eq!(x86_prots(&e, pid, a), [(Prot::READ, 1)]);
    let m = &e.os.machine.cost;
    assert_eq!(
        e.os.stats.cycles_promotion - promo,
        (512 + 1) * m.pte_write_cycles + m.tlb_invalidate_cycles
    );
}
