//! kcompactd as a background activity on the simulated clock (mm/compaction.c `kcompactd()`):
//! it sleeps `HPAGE_FRAG_CHECK_INTERVAL_MSEC` (500 ms) at a time. Woken early when a THP
//! allocation asked for it (`wakeup_kcompactd`, under `defrag=defer`), or finding at a timeout
//! that one recorded an order, it compacts for that order (`kcompactd_do_work`); otherwise, with
//! `compaction_proactiveness` above 0 and the fragmentation score over its high mark, it
//! compacts proactively, and if the score did not go down it waits 64 intervals
//! (`default_timeout << COMPACT_MAX_DEFER_SHIFT`) before the next check. With proactiveness 0
//! it sleeps until woken (`MAX_SCHEDULE_TIMEOUT`). The compaction is the VM's
//! (vm/compact.rs); its cycles are background work.

use crate::engine::Daemon;
use crate::vm::compact::{COMPACT_MAX_DEFER_SHIFT, FRAG_CHECK_INTERVAL_MS};
use crate::vm::Os;

#[derive(Debug, Default)]
pub struct Kcompactd;

impl Daemon for Kcompactd {
    fn name(&self) -> &str {
        "kcompactd"
    }

    fn wants(&self, os: &Os) -> bool {
        os.compact.kcompactd_woken
    }

    fn wake(&mut self, os: &mut Os, now: u64) -> (u64, u64) {
        let interval = FRAG_CHECK_INTERVAL_MS * os.machine.freq_hz / 1000;
        let proactive = os
            .policy
            .kcompactd
            .as_ref()
            .is_some_and(|k| k.proactiveness > 0);
        let next = |t: u64| if proactive { now + t } else { u64::MAX };
        // `kcompactd_work_requested`: an order was recorded.
        if os.compact.kcompactd_order > 0 {
            return (os.kcompactd_do_work(), next(interval));
        }
        os.compact.kcompactd_woken = false;
        if !os.should_proactive_compact() {
            return (0, next(interval));
        }
        let (c, progress) = os.proactive_compact();
        let t = if progress {
            interval
        } else {
            interval << COMPACT_MAX_DEFER_SHIFT
        };
        (c, next(t))
    }
}
