//! Property tests: random sequences of mmap / munmap / mprotect / brk / madvise / access / fork /
//! exit keep every invariant of the buddy allocator, objects, map entries, page tables and TLBs,
//! checked after every event.
//!
//! Events may legitimately fail (an access to memory a previous munmap removed is a segfault,
//! memory may run out); what must never happen is a broken invariant or a panic.

use proptest::prelude::*;
use splab_sim::engine::Engine;
use splab_sim::hw::Machine;
use splab_sim::policy::Policy;
use splab_sim::units::{AccessKind, MemOp, Pid, Prot};
use splab_sim::vm::{Advice, MapFlags, MmapReq};
use splab_sim::SimError;

#[derive(Clone, Debug)]
enum Op {
    Mmap {
        proc: usize,
        pages: u64,
        prot: u8,
        shared: bool,
        file: Option<u32>,
        file_page: u64,
    },
    Munmap {
        proc: usize,
        region: usize,
        off: u64,
        pages: u64,
    },
    Mprotect {
        proc: usize,
        region: usize,
        off: u64,
        pages: u64,
        prot: u8,
    },
    Madvise {
        proc: usize,
        region: usize,
        off: u64,
        pages: u64,
    },
    Brk {
        proc: usize,
        delta: i64,
    },
    Access {
        proc: usize,
        region: usize,
        page: u64,
        write: bool,
    },
    Run {
        proc: usize,
        region: usize,
        page: u64,
        count: u64,
        write: bool,
    },
    Fork {
        proc: usize,
    },
    Exit {
        proc: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let p = 0usize..4;
    let r = 0usize..8;
    prop_oneof![
        3 => (p.clone(), 1u64..80, 0u8..8, any::<bool>(), prop::option::weighted(0.3, 0u32..3), 0u64..16)
            .prop_map(|(proc, pages, prot, shared, file, file_page)| Op::Mmap { proc, pages, prot, shared, file, file_page }),
        1 => (p.clone(), r.clone(), 0u64..64, 1u64..40).prop_map(|(proc, region, off, pages)| Op::Munmap { proc, region, off, pages }),
        1 => (p.clone(), r.clone(), 0u64..64, 1u64..40, 0u8..8).prop_map(|(proc, region, off, pages, prot)| Op::Mprotect { proc, region, off, pages, prot }),
        1 => (p.clone(), r.clone(), 0u64..64, 1u64..40).prop_map(|(proc, region, off, pages)| Op::Madvise { proc, region, off, pages }),
        1 => (p.clone(), -40i64..80).prop_map(|(proc, delta)| Op::Brk { proc, delta }),
        8 => (p.clone(), r.clone(), 0u64..80, any::<bool>()).prop_map(|(proc, region, page, write)| Op::Access { proc, region, page, write }),
        2 => (p.clone(), r.clone(), 0u64..80, 1u64..2000, any::<bool>()).prop_map(|(proc, region, page, count, write)| Op::Run { proc, region, page, count, write }),
        1 => p.clone().prop_map(|proc| Op::Fork { proc }),
        1 => p.prop_map(|proc| Op::Exit { proc }),
    ]
}

/// Outcomes a random event may legitimately have besides success.
fn tolerated(e: &SimError) -> bool {
    matches!(
        e,
        SimError::Segfault { .. } | SimError::OutOfMemory(_) | SimError::InvalidEvent(_)
    )
}

fn run_ops(machine: &str, ops: &[Op]) -> Result<(), TestCaseError> {
    run_policy(machine, "base", None, ops)
}

fn run_policy(
    machine: &str,
    policy: &str,
    free: Option<u64>,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    run_policy_stats(machine, policy, free, ops).map(|_| ())
}

/// (promotions, demotions, preemptions) of one run.
fn run_policy_stats(
    machine: &str,
    policy: &str,
    free: Option<u64>,
    ops: &[Op],
) -> Result<(u64, u64, u64), TestCaseError> {
    let m = Machine::from_spec(machine).unwrap();
    let mut pol = Policy::from_spec(policy).unwrap();
    pol.resolve(&m).unwrap();
    let page = m.base_size();
    let mut e = Engine::new(m, pol, false, free);
    let first = e.spawn();
    // Live processes and, per process, the regions it mapped (start, pages).
    let mut procs: Vec<(Pid, Vec<(u64, u64)>)> = vec![(first, Vec::new())];
    for (i, op) in ops.iter().enumerate() {
        let pick = |procs: &Vec<(Pid, Vec<(u64, u64)>)>, k: usize| k % procs.len();
        // The region a random index names among process k's, if it has any.
        let region_of = |procs: &Vec<(Pid, Vec<(u64, u64)>)>, k: usize, r: usize| {
            procs[k].1.get(r % procs[k].1.len().max(1)).copied()
        };
        let kind_of = |write: bool| {
            if write {
                AccessKind::Write
            } else {
                AccessKind::Read
            }
        };
        let res: Result<(), SimError> = match *op {
            Op::Mmap {
                proc,
                pages,
                prot,
                shared,
                file,
                file_page,
            } => {
                let k = pick(&procs, proc);
                let mut flags = if shared {
                    MapFlags::SHARED
                } else {
                    MapFlags::ANON
                };
                if file.is_some() {
                    flags = flags.with(MapFlags::FILE);
                }
                let req = MmapReq {
                    addr: 0,
                    len: pages * page,
                    prot: Prot(prot),
                    flags,
                    file: file.unwrap_or(0),
                    offset: file_page * page,
                };
                e.mmap(procs[k].0, req).map(|a| procs[k].1.push((a, pages)))
            }
            Op::Munmap {
                proc,
                region,
                off,
                pages,
            } => {
                let k = pick(&procs, proc);
                match region_of(&procs, k, region) {
                    Some((a, _)) => e.munmap(procs[k].0, a + off * page, pages * page),
                    None => Ok(()),
                }
            }
            Op::Mprotect {
                proc,
                region,
                off,
                pages,
                prot,
            } => {
                let k = pick(&procs, proc);
                match region_of(&procs, k, region) {
                    Some((a, n)) => {
                        e.mprotect(procs[k].0, a + (off % n) * page, pages * page, Prot(prot))
                    }
                    None => Ok(()),
                }
            }
            Op::Madvise {
                proc,
                region,
                off,
                pages,
            } => {
                let k = pick(&procs, proc);
                match region_of(&procs, k, region) {
                    Some((a, n)) => e.madvise(
                        procs[k].0,
                        a + (off % n) * page,
                        pages * page,
                        Advice::DontNeed,
                    ),
                    None => Ok(()),
                }
            }
            Op::Brk { proc, delta } => {
                let k = pick(&procs, proc);
                let pid = procs[k].0;
                let cur = e.current_brk(pid).unwrap();
                let new = (cur as i64 + delta * page as i64 - 5) as u64;
                let got = e.brk(pid, new);
                if let Ok(end) = got {
                    // Access the heap's first page if there is a heap.
                    let start = e.os.proc(pid).unwrap().brk_start;
                    if end > start {
                        procs[k].1.push((start, (end - start).div_ceil(page)));
                    }
                }
                got.map(|_| ())
            }
            Op::Access {
                proc,
                region,
                page: pg,
                write,
            } => {
                let k = pick(&procs, proc);
                match region_of(&procs, k, region) {
                    Some((a, n)) => {
                        let kind = kind_of(write);
                        e.access(procs[k].0, a + (pg % n) * page + 8 * (i as u64 % 64), kind)
                    }
                    None => Ok(()),
                }
            }
            Op::Run {
                proc,
                region,
                page: pg,
                count,
                write,
            } => {
                let k = pick(&procs, proc);
                match region_of(&procs, k, region) {
                    Some((a, n)) => {
                        let kind = kind_of(write);
                        let start = a + (pg % n) * page;
                        let room = (a + n * page - start) / 64;
                        e.access_run(
                            procs[k].0,
                            start,
                            64,
                            count.min(room.max(1)),
                            MemOp::of_kind(kind),
                            1,
                        )
                    }
                    None => Ok(()),
                }
            }
            Op::Fork { proc } => {
                let k = pick(&procs, proc);
                if procs.len() < 6 {
                    let regions = procs[k].1.clone();
                    e.fork(procs[k].0).map(|c| procs.push((c, regions)))
                } else {
                    Ok(())
                }
            }
            Op::Exit { proc } => {
                let k = pick(&procs, proc);
                if procs.len() > 1 {
                    let (pid, _) = procs.remove(k);
                    e.exit(pid)
                } else {
                    Ok(())
                }
            }
        };
        if let Err(err) = &res {
            prop_assert!(tolerated(err), "event {i} {op:?} failed: {err}");
        }
        if let Err(err) = e.os.check_invariants() {
            return Err(TestCaseError::fail(format!(
                "after event {i} {op:?}: {err}"
            )));
        }
    }
    // Tearing everything down returns every frame.
    for (pid, _) in procs {
        e.exit(pid).unwrap();
    }
    e.os.check_invariants()
        .map_err(|err| TestCaseError::fail(format!("after teardown: {err}")))?;
    let file_pages: u64 = e.os.files.values().map(|f| e.os.obj(f.obj).pages.len).sum();
    prop_assert_eq!(
        e.os.phys.used_frames,
        file_pages,
        "only the page cache survives its processes"
    );
    // Frames still reserved belong to reservations of the page cache (deferred deallocation).
    let reserved: u64 =
        e.os.reserv
            .as_ref()
            .map(|rs| {
                rs.ids()
                    .map(|id| (1u64 << rs.get(id).order) - rs.get(id).popcnt)
                    .sum()
            })
            .unwrap_or(0);
    let p = &e.os.phys;
    prop_assert_eq!(
        p.buddy.free_frames + file_pages + reserved + p.wired_frames,
        p.frames()
    );
    if file_pages == 0 {
        prop_assert_eq!(reserved, 0, "no reservation outlives its object");
    }
    let st = &e.os.stats;
    let preempted = e.os.reserv.as_ref().map(|r| r.stats.preempted).unwrap_or(0);
    Ok((
        st.promotions.iter().sum(),
        st.demotions.iter().sum(),
        preempted,
    ))
}

/// The random sequences do reach the mechanisms the properties are about: over a fixed sample,
/// promotions, demotions and preemptions all happen (else the properties would hold vacuously).
#[test]
fn random_sequences_exercise_promotion_demotion_and_preemption() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, TestRng, TestRunner};
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::deterministic_rng(proptest::test_runner::RngAlgorithm::ChaCha),
    );
    let strategy = prop::collection::vec(op(), 60..150);
    let (mut pro, mut dem, mut pre) = (0, 0, 0);
    for _ in 0..60 {
        let ops = strategy.new_tree(&mut runner).unwrap().current();
        let (a, b, c) =
            run_policy_stats("alpha21264:mem=8M", "navarro", Some(2 << 20), &ops).unwrap();
        pro += a;
        dem += b;
        pre += c;
    }
    assert!(
        pro > 0 && dem > 0 && pre > 0,
        "promotions {pro}, demotions {dem}, preemptions {pre}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_events_keep_invariants_alpha(ops in prop::collection::vec(op(), 1..120)) {
        run_ops("alpha21264:mem=16M", &ops)?;
    }

    #[test]
    fn random_events_keep_invariants_skylake(ops in prop::collection::vec(op(), 1..120)) {
        run_ops("skylake:mem=1G", &ops)?;
    }

    /// Little memory, so that allocations fail part way through events.
    #[test]
    fn random_events_keep_invariants_when_memory_runs_out(ops in prop::collection::vec(op(), 1..120)) {
        run_ops("alpha21264:mem=4M", &ops)?;
    }

    /// seed 000's system with memory nearly full, so that reservations are preempted, broken
    /// into pieces, promoted and demoted while the events run.
    #[test]
    fn navarro_keeps_invariants_under_pressure(ops in prop::collection::vec(op(), 1..150), free_mb in 1u64..6) {
        run_policy("alpha21264:mem=8M", "navarro", Some(free_mb << 20), &ops)?;
    }

    #[test]
    fn navarro_with_restricted_sizes_keeps_invariants(ops in prop::collection::vec(op(), 1..150)) {
        run_policy("alpha21264:mem=8M", "navarro:sizes=64K+4M", Some(3 << 20), &ops)?;
    }

    #[test]
    fn navarro_on_pa8000_keeps_invariants(ops in prop::collection::vec(op(), 1..150)) {
        run_policy("pa8000:mem=64M", "navarro", Some(2 << 20), &ops)?;
    }

    /// FreeBSD's reservations with reclaim_inactive when memory runs out.
    #[test]
    fn freebsd_keeps_invariants_under_pressure(ops in prop::collection::vec(op(), 1..150), free_mb in 1u64..6) {
        run_policy("alpha21264:mem=8M", "freebsd", Some(free_mb << 20), &ops)?;
    }
}
