//! Quicksilver's Async-t thread on the simulated clock (seed 003 5.2; docs/reference-policies.md
//! 3: "an idle-priority thread wakes every 1 s, walks partpopq from the tail"): each wake is
//! one pass of vm/prepare.rs `async_prepare_pass`, whose zeroing is background work. Registered
//! when the policy's preparation is `threshold` with `mode = "async"`. The same thread's
//! evacuation of inactive reservations (5.2, "preemptive deallocation") is not modelled.

use crate::engine::Daemon;
use crate::vm::prepare::ASYNC_PERIOD_MS;
use crate::vm::Os;

#[derive(Debug, Default)]
pub struct AsyncPrepare;

impl Daemon for AsyncPrepare {
    fn name(&self) -> &str {
        "quicksilver-async"
    }

    fn wake(&mut self, os: &mut Os, now: u64) -> (u64, u64) {
        let cycles = os.async_prepare_pass();
        (cycles, now + os.machine.ms_to_cycles(ASYNC_PERIOD_MS))
    }
}
