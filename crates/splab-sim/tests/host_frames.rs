//! The host's frame placement under nested paging (hw/host_frames.rs): the caches are indexed
//! by host-physical address, and a host that backs guest memory with 4KB pages places each at a
//! frame unrelated to its guest address. Lines that share every cache set by their
//! guest-physical addresses thrash with identity placement and spread over many sets, mostly
//! hitting, with scattered placement (counts, exact where the mechanism makes them exact).

use splab_sim::engine::{CheckMode, Engine};
use splab_sim::hw::host_frames::HostPlacement;
use splab_sim::hw::Machine;
use splab_sim::policy::Policy;
use splab_sim::units::{Access, MemOp};
use splab_sim::vm::{Advice, MmapReq};

const HUGE: u64 = 2 << 20;

fn engine(machine: &str, placement: Option<HostPlacement>) -> Engine {
    let mut m = Machine::from_spec(machine).unwrap();
    if let Some(p) = placement {
        m.nested.as_mut().expect("a guest machine").placement = p;
    }
    let mut p = Policy::from_spec("linux-madvise").unwrap();
    p.resolve(&m).unwrap();
    Engine::new(m, p, CheckMode::Off, None)
}

/// On skylake (LLC 8 MiB 16-way: 8192 sets, a set span of 512 KiB; L2 256 KiB 4-way, a span
/// of 64 KiB; L1 a span of 4 KiB), 32 lines at a stride of the LLC's set span in 8 THPs (4 in
/// each 2MB guest page): by guest-physical address all in one set of every level. Returns the
/// data references of `rounds` rounds after a warm-up one, by the level that served them (L1,
/// L2, LLC, DRAM), and the machine's placement. `host`: the host page size (`nested=`).
fn one_set_rounds(
    host: &str,
    placement: Option<HostPlacement>,
    rounds: usize,
) -> ([u64; 4], HostPlacement) {
    let mut e = engine(&format!("skylake:nested={host},mem=1G"), placement);
    let pid = e.spawn().unwrap();
    let len = 9 * HUGE;
    let raw = e.mmap(pid, MmapReq::anon(len)).unwrap();
    e.madvise(pid, raw, len, Advice::HugePage).unwrap();
    let base = raw.div_ceil(HUGE) * HUGE;
    let span = 512 << 10;
    let lines: Vec<u64> = (0..8 * HUGE / span).map(|i| base + i * span).collect();
    assert_eq!(lines.len(), 32);
    let round: Vec<Access> = lines
        .iter()
        .map(|&va| Access::new(va, MemOp::Load, 0, 1))
        .collect();
    // Written first (a read would map the huge zero page): faults in the 8 THPs, fills the
    // TLBs and caches.
    let writes: Vec<Access> = round
        .iter()
        .map(|a| Access::new(a.va, MemOp::Store, 0, 1))
        .collect();
    e.accesses(pid, &writes).unwrap();
    let thp = e.os.proc(pid).unwrap().pmap.lookup(base / 4096).unwrap();
    assert!(!thp.size().is_base(), "a 2MB guest page");
    let before = e.os.acc.data_by_level;
    for _ in 0..rounds {
        e.accesses(pid, &round).unwrap();
    }
    let after = e.os.acc.data_by_level;
    let placement = e.os.machine.nested.as_ref().unwrap().placement;
    (std::array::from_fn(|k| after[k] - before[k]), placement)
}

#[test]
fn lines_in_one_guest_set_thrash_with_identity_and_spread_when_scattered() {
    let rounds = 20;
    let n = 32 * rounds as u64;
    // Identity: 32 lines in one set of 8, 4 and 16 ways, touched in a cycle: every reference
    // misses every level (the walks' lines do not enter: the 32 splintered 4KB entries stay in
    // the 64-entry L1 DTLB after the warm-up).
    let (id, p) = one_set_rounds("4K", Some(HostPlacement::Identity), rounds);
    assert_eq!(p, HostPlacement::Identity);
    assert_eq!(id, [0, 0, 0, n], "identity: {id:?}");
    // Scattered (a 4KB-host guest's default): the 32 host frames' low bits spread the lines
    // over the LLC's sets (and L2's 16 set groups): after the warm-up none comes from DRAM.
    let (sc, p) = one_set_rounds("4K", None, rounds);
    assert_eq!(p, HostPlacement::Scattered, "the default");
    assert_eq!(sc.iter().sum::<u64>(), n);
    assert_eq!(sc[3], 0, "scattered: {sc:?}");
    assert!(sc[1] > n / 2, "scattered: most from L2: {sc:?}");
}

/// With 2MB host pages the placement moves whole 2MB pieces: lines keep their offsets within
/// 2MB, which is all of the LLC's and L2's set index, so the one-set pattern thrashes as with
/// identity.
#[test]
fn two_megabyte_host_pages_keep_the_sets_of_the_lines() {
    let (r, p) = one_set_rounds("2M", None, 20);
    assert_eq!(p, HostPlacement::Scattered);
    assert_eq!(r, [0, 0, 0, 32 * 20], "every reference from DRAM: {r:?}");
}
