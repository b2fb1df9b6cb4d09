//! Scenario tests of seed 003's Quicksilver (vm/prepare.rs, daemon/quicksilver.rs, relaxed
//! mapping in vm/reserve.rs and vm/softfast.rs): hybrid preparation past a threshold t, Sync-t
//! and Async-t, and relaxed mapping creation. Exact counts on skylake (4KB pages, 2MB
//! reservations of 512 pages, prefault 4+4), invariant checks after every event.

mod common;

use splab_sim::engine::Engine;
use splab_sim::hw::Machine;
use splab_sim::policy::{Policy, PrepMode, PrepPolicy};
use splab_sim::reserv::ReservStats;
use splab_sim::units::{AccessKind, Pid};

const EXTENT: u64 = 2 << 20;
const PAGE: u64 = 4096;
const PAGES: u64 = EXTENT / PAGE;

fn rs(e: &Engine) -> &ReservStats {
    &e.os.reserv.as_ref().unwrap().stats
}

fn faults(e: &Engine) -> u64 {
    e.os.stats.faults.total
}

/// A process with one 2MB-aligned anonymous region of `len` bytes.
fn region(policy: &str, len: u64) -> (Engine, Pid, u64) {
    let (mut e, pid) = common::engine("skylake:mem=1G", policy, None);
    let a = e.mmap(pid, common::anon(len)).unwrap();
    assert_eq!(a % EXTENT, 0);
    (e, pid, a)
}

fn touch(e: &mut Engine, pid: Pid, va: u64, kind: AccessKind) {
    e.access(pid, va, kind).unwrap();
}

/// (writable, size class, dirty) of the entry mapping `va`.
fn pte(e: &Engine, pid: Pid, va: u64) -> (bool, u8, bool) {
    let p = e.os.proc(pid).unwrap().pmap.lookup(va / PAGE).unwrap();
    (p.prot().writable(), p.size().0, p.dirty())
}

/// seed 003 5.1, Sync-64 (the `quicksilver` preset): faults 1 to 63 map base pages; the 64th
/// allocates the other 448 pages of the reservation, zeroes them in bulk and maps the 2MB
/// superpage, charged exactly: the handler, its own page's zeroing, 448 bulk-zeroed pages,
/// one PDE write and the invalidation of the 63 base mappings it replaces. No other page of
/// the extent faults.
#[test]
fn sync_64_maps_the_superpage_at_the_64th_fault() {
    let (mut e, pid, a) = region("quicksilver", EXTENT);
    for i in 0..63 {
        common::write(&mut e, pid, a + i * PAGE);
    }
    assert_eq!(faults(&e), 63);
    assert_eq!(common::mapped(&e, pid), (63 * PAGE, 0));
    assert_eq!(rs(&e).prepared_sync, 0);
    let before = e.os.stats.cycles_fault;
    common::write(&mut e, pid, a + 63 * PAGE);
    let c = &e.os.machine.cost;
    assert_eq!(
        e.os.stats.cycles_fault - before,
        c.fault_cycles
            + c.zero_page_cycles
            + (PAGES - 64) * c.zero_bulk_page_cycles
            + c.pte_write_cycles
            + c.tlb_invalidate_cycles
    );
    let r = rs(&e);
    assert_eq!(
        (r.prepared_sync, r.prepared_pages, r.mapped_at_preparation),
        (1, PAGES - 64, 1)
    );
    assert_eq!(common::mapped(&e, pid), (0, EXTENT));
    assert_eq!(pte(&e, pid, a), (true, 1, true));
    assert_eq!(e.os.stats.zeroed_bytes, EXTENT);
    for i in 0..PAGES {
        touch(&mut e, pid, a + i * PAGE, AccessKind::Write);
    }
    assert_eq!(faults(&e), 64, "every other page is in the superpage");
}

/// The paper's Sync-1 (the code's Sync-0): the first fault prepares and maps all 2MB, for
/// t = 1 and t = 0 alike.
#[test]
fn sync_1_maps_on_the_first_fault() {
    for t in [0, 1] {
        let (mut e, pid, a) = region(&format!("quicksilver:t={t}"), EXTENT);
        touch(&mut e, pid, a + 300 * PAGE, AccessKind::Read);
        assert_eq!(faults(&e), 1);
        assert_eq!(common::mapped(&e, pid), (0, EXTENT), "t={t}");
        assert_eq!(
            (rs(&e).prepared_sync, rs(&e).prepared_pages),
            (1, PAGES - 1)
        );
        // Prepared at a read fault: writable and clean (its first write sets the dirty bit).
        assert_eq!(pte(&e, pid, a), (true, 1, false));
        common::write(&mut e, pid, a + 5 * PAGE);
        assert_eq!(faults(&e), 1);
        assert_eq!(pte(&e, pid, a), (true, 1, true));
    }
}

/// A superpage mapped at preparation carries the dirty pages written before it: a read fault
/// reaching the threshold after writes maps a dirty superpage (nothing written is lost).
#[test]
fn a_read_at_the_threshold_keeps_earlier_writes_dirty() {
    let (mut e, pid, a) = region("quicksilver:t=2", EXTENT);
    common::write(&mut e, pid, a);
    touch(&mut e, pid, a + PAGE, AccessKind::Read);
    assert_eq!(common::mapped(&e, pid), (0, EXTENT));
    assert_eq!(pte(&e, pid, a), (true, 1, true));
}

/// Without relaxed mapping Sync-t prepares but maps nothing more: the 64th fault's page and
/// the four resident pages prefault maps ahead of it (4 + 4; those behind are mapped already)
/// are base pages, and a later write fault finds a full reservation whose pages are not all
/// dirty, so FreeBSD's soft fault maps only the base page.
#[test]
fn without_relaxed_mapping_sync_prepares_and_maps_base_pages() {
    let (mut e, pid, a) = region("quicksilver:relaxed_mapping=off", EXTENT);
    for i in 0..64 {
        common::write(&mut e, pid, a + i * PAGE);
    }
    assert_eq!((rs(&e).prepared_sync, rs(&e).mapped_at_preparation), (1, 0));
    assert_eq!(common::mapped(&e, pid), (68 * PAGE, 0));
    common::write(&mut e, pid, a + 200 * PAGE);
    assert_eq!(faults(&e), 65);
    assert_eq!(rs(&e).mapped_at_fault, 0);
    assert_eq!(common::mapped(&e, pid).1, 0);
}

/// seed 003 5.1, relaxed mapping: an extent whose even pages were written and odd pages read
/// is promoted at its last fault, writable and dirty; FreeBSD's uniform rule write-protects
/// the clean pages instead and maps no superpage.
#[test]
fn relaxed_mapping_promotes_a_mixed_extent() {
    for (policy, promoted) in [("freebsd", false), ("freebsd:relaxed_mapping=on", true)] {
        let (mut e, pid, a) = region(policy, EXTENT);
        for i in 0..PAGES {
            let kind = if i % 2 == 0 {
                AccessKind::Write
            } else {
                AccessKind::Read
            };
            touch(&mut e, pid, a + i * PAGE, kind);
        }
        assert_eq!(faults(&e), PAGES, "{policy}");
        let promotions = e.os.stats.promotions[1];
        if promoted {
            assert_eq!(common::mapped(&e, pid), (0, EXTENT), "{policy}");
            assert_eq!((promotions, rs(&e).mapped_relaxed), (1, 1));
            // The superpage's dirty bit is its head entry's.
            assert_eq!(pte(&e, pid, a), (true, 1, true));
        } else {
            assert_eq!(common::mapped(&e, pid), (EXTENT, 0), "{policy}");
            assert_eq!((promotions, rs(&e).mapped_relaxed), (0, 0));
            assert!(!pte(&e, pid, a + PAGE).0, "a clean page write-protected");
        }
    }
}

/// seed 003 5.2, Async-64: nothing is prepared at the faults; the daemon's pass (1 s after
/// boot) prepares a reservation with 64 pages populated, not one with 63; the next soft fault
/// on the extent maps the superpage (relaxed: the prepared pages are clean).
#[test]
fn async_64_prepares_at_the_pass_and_maps_at_the_next_soft_fault() {
    let (mut e, pid, a) = region("quicksilver:prep=async", 2 * EXTENT);
    let b = a + EXTENT;
    for i in 0..64 {
        common::write(&mut e, pid, a + i * PAGE);
    }
    for i in 0..63 {
        common::write(&mut e, pid, b + i * PAGE);
    }
    assert_eq!(rs(&e).prepared_async + rs(&e).prepared_sync, 0);
    let second = e.os.machine.freq_hz;
    e.idle_until(e.clock() + second + 1).unwrap();
    let r = rs(&e);
    assert_eq!(
        (r.prepared_async, r.prepared_pages, r.prepared_sync),
        (1, PAGES - 64, 0)
    );
    assert!(
        e.background_cycles >= (PAGES - 64) * e.os.machine.cost.zero_page_cycles,
        "zeroing is background work"
    );
    assert_eq!(common::mapped(&e, pid), (127 * PAGE, 0));
    let f = faults(&e);
    touch(&mut e, pid, a + 400 * PAGE, AccessKind::Read);
    assert_eq!(faults(&e) - f, 1);
    assert_eq!(
        (rs(&e).mapped_at_fault, rs(&e).mapped_relaxed),
        (1, 1),
        "a soft fault maps the prepared superpage"
    );
    assert_eq!(common::mapped(&e, pid), (63 * PAGE, EXTENT));
    // The 64th page of the second extent: prepared at the next pass.
    common::write(&mut e, pid, b + 63 * PAGE);
    e.idle_until(e.clock() + second + 1).unwrap();
    assert_eq!(rs(&e).prepared_async, 2);
}

/// A reservation reaching past its object's end (FreeBSD reserves 2MB for the last 1MB of a
/// 3MB anonymous object) is not prepared: no page past the end is made. The first 2MB is.
#[test]
fn a_reservation_past_the_object_end_is_not_prepared() {
    let (mut e, pid, a) = region("quicksilver:t=1", EXTENT + EXTENT / 2);
    common::write(&mut e, pid, a + EXTENT);
    assert_eq!(rs(&e).created, 1);
    assert_eq!(rs(&e).prepared_sync, 0);
    assert_eq!(common::mapped(&e, pid), (PAGE, 0));
    common::write(&mut e, pid, a);
    assert_eq!(rs(&e).prepared_sync, 1);
    assert_eq!(common::mapped(&e, pid), (PAGE, EXTENT));
}

/// Bad parameters are refused with the key named, never silently taken.
#[test]
fn bad_parameters_name_the_key() {
    let sky = Machine::from_spec("skylake").unwrap();
    let e = Policy::from_spec("quicksilver:prep=lazy")
        .unwrap_err()
        .to_string();
    assert!(e.contains("prep='lazy'") && e.contains("async"), "{e}");
    let e = Policy::from_spec("freebsd:t=5").unwrap_err().to_string();
    assert!(
        e.contains("t is the threshold") && e.contains("prep=sync"),
        "{e}"
    );
    let e = Policy::from_spec("quicksilver:t=x")
        .unwrap_err()
        .to_string();
    assert!(e.contains("'t'") || e.contains("t="), "{e}");
    assert!(Policy::from_spec("linux:prep=sync").is_err());
    // Bounded by the machine's largest superpage (skylake's 1GB: 262,144 pages; the alpha's
    // 4MB: 512 pages of 8KB), not by the policy's reservations: the preset's t = 64 runs on the
    // alpha's 8-page reservations, which fill up before reaching it.
    let alpha = Machine::from_spec("alpha21264").unwrap();
    for (m, t, ok) in [
        (&sky, 262_145, false),
        (&sky, 262_144, true),
        (&alpha, 513, false),
        (&alpha, 64, true),
    ] {
        let mut p = Policy::from_spec(&format!("quicksilver:t={t}")).unwrap();
        match p.resolve(m) {
            Ok(()) => assert!(ok, "t={t} on {}", m.name),
            Err(e) => {
                let e = e.to_string();
                assert!(
                    !ok && e.contains(&format!("t={t}")) && e.contains(&m.name),
                    "{e}"
                );
            }
        }
    }
    let p = Policy::from_spec("freebsd:prep=async,t=256").unwrap();
    assert_eq!(
        p.prep,
        PrepPolicy::Threshold {
            t: 256,
            mode: PrepMode::Async
        }
    );
    assert_eq!(
        Policy::from_spec("quicksilver:prep=per_page").unwrap().prep,
        PrepPolicy::PerPage
    );
}

/// The preset's file reads back to the same policy, and bad files name the key.
#[test]
fn policy_files_round_trip_and_name_bad_keys() {
    for spec in [
        "quicksilver",
        "quicksilver:prep=async,t=256",
        "quicksilver:t=0,relaxed_mapping=off",
        "navarro:prep=sync,t=8",
    ] {
        let p = Policy::from_spec(spec).unwrap();
        let back = Policy::from_toml(&p.to_toml(), "p.toml").unwrap();
        assert_eq!(back, p, "{spec}");
    }
    let text = Policy::from_spec("quicksilver").unwrap().to_toml();
    assert!(text.contains("kind = \"threshold\"") && text.contains("threshold = 64"));
    let bad = |from: &str, to: &str| {
        assert!(text.contains(from), "{from}");
        Policy::from_toml(&text.replacen(from, to, 1), "p.toml")
            .unwrap_err()
            .to_string()
    };
    let e = bad("mode = \"sync\"", "mode = \"later\"");
    assert!(
        e.contains("preparation.mode = \"later\"") && e.contains("sync, async"),
        "{e}"
    );
    let e = bad("threshold = 64", "threshold = -1");
    assert!(e.contains("preparation.threshold"), "{e}");
    let e = bad("threshold = 64", "");
    assert!(e.contains("missing key 'preparation.threshold'"), "{e}");
    let e = bad("relaxed_mapping = true", "");
    assert!(
        e.contains("missing key 'mapping_creation.relaxed_mapping'"),
        "{e}"
    );
    let e = bad("kind = \"threshold\"", "kind = \"per_page\"");
    assert!(
        e.contains("preparation.threshold is hybrid preparation's"),
        "{e}"
    );
    let base = Policy::from_spec("base").unwrap().to_toml();
    let e = Policy::from_toml(
        &base.replace(
            "kind = \"per_page\"",
            "kind = \"threshold\"\nthreshold = 1\nmode = \"sync\"",
        ),
        "b.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("preparation.kind") && e.contains("reserve"),
        "{e}"
    );
    // Checked against the machine with the file's line named.
    let mut p =
        Policy::from_toml(&text.replace("threshold = 64", "threshold = 600"), "q.toml").unwrap();
    let e = p
        .resolve(&Machine::from_spec("alpha21264").unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("q.toml") && e.contains("preparation.threshold") && e.contains("512"),
        "{e}"
    );
}
