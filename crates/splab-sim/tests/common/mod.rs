//! The one helper the scenario and timing tests share: run a spec string triple, seed 1.

use splab_sim::report::Report;
use splab_sim::{RunSpec, SimError};

pub fn try_run(machine: &str, policy: &str, workload: &str) -> Result<Report, SimError> {
    splab_sim::run(&RunSpec {
        machine: machine.into(),
        policy: policy.into(),
        workload: workload.into(),
        seed: 1,
        check: false.into(),
        free_bytes: None,
        dump_reservations: false,
    })
}

pub fn run(machine: &str, policy: &str, workload: &str) -> Report {
    try_run(machine, policy, workload)
        .unwrap_or_else(|e| panic!("{workload} on {machine} with {policy}: {e}"))
}
