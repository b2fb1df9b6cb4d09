//! Helpers the integration tests share: run a spec string triple (seed 1), or build an engine
//! with one process to drive event by event.

use splab_sim::engine::Engine;
use splab_sim::hw::Machine;
use splab_sim::policy::Policy;
use splab_sim::report::Report;
use splab_sim::units::{AccessKind, Pfn, Pid};
use splab_sim::vm::MmapReq;
use splab_sim::{RunSpec, SimError};

#[allow(dead_code)]
pub fn try_run(machine: &str, policy: &str, workload: &str) -> Result<Report, SimError> {
    splab_sim::run(&RunSpec {
        machine: machine.into(),
        policy: policy.into(),
        workload: workload.into(),
        seed: 1,
        check: false.into(),
        free_bytes: None,
        page_cache: Default::default(),
        dump_reservations: false,
    })
}

#[allow(dead_code)]
pub fn run(machine: &str, policy: &str, workload: &str) -> Report {
    try_run(machine, policy, workload)
        .unwrap_or_else(|e| panic!("{workload} on {machine} with {policy}: {e}"))
}

/// An engine with invariant checks after every event and one process; `free`: only that much
/// memory starts free (`--free`).
#[allow(dead_code)]
pub fn engine(machine: &str, policy: &str, free: Option<u64>) -> (Engine, Pid) {
    engine_with(machine, policy, true, free)
}

/// An engine and one process; `check`: the invariant checks after every event.
#[allow(dead_code)]
pub fn engine_with(machine: &str, policy: &str, check: bool, free: Option<u64>) -> (Engine, Pid) {
    let m = Machine::from_spec(machine).unwrap();
    let mut p = Policy::from_spec(policy).unwrap();
    p.resolve(&m).unwrap();
    let mut e = Engine::new(m, p, check, free);
    let pid = e.spawn().unwrap();
    (e, pid)
}

/// A private anonymous read-write mapping of `len` bytes, placed by the OS.
#[allow(dead_code)]
pub fn anon(len: u64) -> MmapReq {
    MmapReq::anon(len)
}

/// The frame `pid`'s page table maps the 4KB page at `va` to, if any.
#[allow(dead_code)]
pub fn pfn_of(e: &Engine, pid: Pid, va: u64) -> Option<Pfn> {
    e.os.proc(pid)
        .unwrap()
        .pmap
        .lookup(va / 4096)
        .map(|p| p.pfn())
}

/// A store to `va` by `pid` that must succeed.
#[allow(dead_code)]
pub fn write(e: &mut Engine, pid: Pid, va: u64) {
    e.access(pid, va, AccessKind::Write).unwrap();
}

/// Bytes of `pid`'s address space mapped by base-page and by superpage entries right now (each
/// entry of the page table covers one base page, whatever page it belongs to).
#[allow(dead_code)]
pub fn mapped(e: &Engine, pid: Pid) -> (u64, u64) {
    let page = e.os.machine.base_size();
    let p = e.os.proc(pid).unwrap();
    let (mut small, mut huge) = (0, 0);
    for (_, pte) in p.pmap.entries() {
        if pte.size().is_base() {
            small += page;
        } else {
            huge += page;
        }
    }
    (small, huge)
}
