//! khugepaged as a background activity on the simulated clock (mm/khugepaged.c `khugepaged()`:
//! scan, then sleep `scan_sleep_millisecs`, or `alloc_sleep_millisecs` after a THP allocation
//! failed). The scan and the collapses are the VM's (vm/khugepaged.rs). The first wake is one
//! sleep after boot (Linux wakes it when a process first gets an eligible mapping; the model
//! does not track registration).

use crate::engine::Daemon;
use crate::vm::Os;

#[derive(Debug, Default)]
pub struct Khugepaged;

impl Daemon for Khugepaged {
    fn name(&self) -> &str {
        "khugepaged"
    }

    fn wake(&mut self, os: &mut Os, now: u64) -> (u64, u64) {
        let (cycles, alloc_failed) = os.khugepaged_scan();
        let Some(k) = &os.policy.khugepaged else {
            return (cycles, u64::MAX);
        };
        let ms = if alloc_failed {
            k.alloc_sleep_ms
        } else {
            k.scan_sleep_ms
        };
        // 0 ms: after the next event (the engine runs a daemon at most once per event).
        (cycles, now.saturating_add(os.machine.ms_to_cycles(ms)))
    }
}
