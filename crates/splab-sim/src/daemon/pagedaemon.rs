//! The page daemon as a background activity on the simulated clock (seed 000 5.1; FreeBSD 4.x
//! `vm_pageout()`'s loop). The scans themselves are the VM's (vm/pageout.rs).

use crate::engine::Daemon;
use crate::vm::pageout::STATS_INTERVAL_S;
use crate::vm::Os;

/// The page daemon as a background activity on the simulated clock.
#[derive(Debug, Default)]
pub struct PageDaemon {
    /// Sleeping out `msleep(hz / 2)` between passes of a shortage it could not end.
    napping: bool,
}

impl Daemon for PageDaemon {
    fn name(&self) -> &str {
        "pagedaemon"
    }

    fn wants(&self, os: &Os) -> bool {
        os.pageout.wanted && !self.napping
    }

    fn wake(&mut self, os: &mut Os, now: u64) -> (u64, u64) {
        let hz = os.machine.freq_hz;
        self.napping = false;
        // seed 000 5.1 (2): woken because allocations of the preferred size failed: restore
        // the contiguity they needed (vm/contig.rs), then page out if memory is also short.
        let mut restored = 0;
        if os.contiguity_wanted() {
            let (c, _io) = os.contig_scan();
            os.pageout.stats.daemon_cycles += c;
            restored = c;
            if !os.paging_needed() {
                os.pageout.wanted = false;
                os.pageout.pass = 0;
                return (c, now + STATS_INTERVAL_S * hz);
            }
        }
        if os.pageout.wanted || os.paging_needed() {
            // kswapd's `shrink_slab`: the deferred split shrinker runs with the scan
            // (vm/deferred_split.rs).
            let (_, c) = os.deferred_split_scan();
            restored += c;
            os.pageout.stats.scans += 1;
            let (c, _io) = os.pageout_scan(0);
            os.pageout.stats.daemon_cycles += c;
            let c = c + restored;
            // vm_pageout: the target reached, sleep; else a second pass at once, then every
            // half second (msleep hz/2) while memory stays short.
            if os.paging_target() <= 0 || !os.paging_needed() {
                os.pageout.wanted = false;
                os.pageout.pass = 0;
                return (c, now + STATS_INTERVAL_S * hz);
            }
            os.pageout.pass += 1;
            if os.pageout.pass > 1 {
                self.napping = true;
                return (c, now + hz / 2);
            }
            return (c, now);
        }
        let c = os.page_stats();
        os.pageout.stats.daemon_cycles += c;
        (c, now + STATS_INTERVAL_S * hz)
    }
}
