//! Free page reporting, held off while calibrate and validate measure.
//!
//! A guest with free page reporting (virtio-balloon, Linux mm/page_reporting.c) hands its free
//! blocks of at least `page_reporting_order` (9 here: 2MB) back to the host about two seconds
//! after they are freed (PAGE_REPORTING_DELAY), and the host drops their backing. The guest's next
//! first touch of such a block then also faults the host's pages in. Measured on this project's
//! AMD EPYC guest (2026-11-27, `scripts/procfs.h`'s procedure, 256 MiB first-touched 6 s after 4 GiB
//! was freed, against the same right after backing): 4KB faults 6.8-9.2 us a page against 2.8-3.9,
//! THP faults 400-470 us against 213-228. Which of the two a benchmark sees depends on how long its
//! memory lay free, which nothing in a benchmark controls: calibrate's fault bursts, ten seconds
//! apart, and validate's native runs each drew from blocks the host had or had not taken back.
//!
//! So while a `Held` lives reporting is off (the order is set past the largest buddy order, so no
//! free block qualifies) and, once, 4 GiB of free memory is written, so that the blocks the
//! measurements will get are backed again (`BACK_AT_MOST`). Dropping it puts the old order back, and so does SIGINT,
//! SIGTERM or SIGHUP meanwhile. Without the knob (not a guest, or no balloon) there is nothing to
//! do; without the right to write it (not root) the measurements go on with reporting on, and say
//! so.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use super::bench::{Region, Thp};
use splab_sim::host::meminfo_kb;

/// The module parameter (Linux mm/page_reporting.c, `page_reporting_order`).
pub const KNOB: &str = "/sys/module/page_reporting/parameters/page_reporting_order";
/// An order no free block has (x86-64's largest buddy order is 10, MAX_PAGE_ORDER): nothing is
/// reported.
const OFF: &str = "11";
/// Free memory left unwritten by the backing pass, so that nothing else runs short meanwhile.
const MARGIN: u64 = 2 << 30;
/// The most the backing pass writes. Linux puts reported blocks back at the tail of their free
/// list (mm/page_reporting.c, `page_reporting_drain` -> `__putback_isolated_page` with
/// FPI_TO_TAIL) and allocates from the head, so once this much is backed and freed again the
/// measurements' allocations (2 GiB at most: calibrate's largest chase) come from backed blocks.
/// Writing all free memory instead cost 72 s here after a long idle (15.5 GiB, nearly all of it
/// reported: about 9 ms a 2MB block).
const BACK_AT_MOST: u64 = 4 << 30;
/// How long blocks being reported stay off the free lists: the reporting worker runs every
/// PAGE_REPORTING_DELAY (2 s) and holds a batch while the host takes it; 3 s covers one round.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(3);

/// What was done about free page reporting.
pub enum Reporting {
    /// No reporting on this machine (no knob).
    Absent,
    /// The knob is there and could not be written; the reason.
    LeftOn(String),
    /// Turned off for the measurements, restored on drop.
    Held(Held),
}

impl Reporting {
    /// One phrase for the files and tables: what the measurements saw.
    pub fn describe(&self) -> String {
        match self {
            Reporting::Absent => "no free page reporting on this machine".into(),
            Reporting::LeftOn(why) => format!(
                "free page reporting left on ({why}): first touches of memory that lay free for \
                 seconds may include the host's faults"
            ),
            Reporting::Held(h) => format!(
                "free page reporting turned off while measuring (page_reporting_order {} -> {OFF}, \
                 restored after) and {:.1} GiB of free memory written first, so no first touch \
                 includes the host's faults",
                h.old,
                h.backed as f64 / (1u64 << 30) as f64
            ),
        }
    }
}

/// Reporting held off; the old order goes back on drop.
pub struct Held {
    old: String,
    /// Bytes written by the backing pass.
    backed: u64,
}

impl Drop for Held {
    fn drop(&mut self) {
        let _ = std::fs::write(KNOB, &self.old);
        OLD_LEN.store(0, Ordering::SeqCst);
    }
}

/// The old order for the signal handler (async-signal-safe: fixed bytes, no allocation).
static OLD: [AtomicU8; 8] = [const { AtomicU8::new(0) }; 8];
static OLD_LEN: AtomicUsize = AtomicUsize::new(0);

extern "C" fn restore_and_exit(sig: libc::c_int) {
    let n = OLD_LEN.load(Ordering::SeqCst);
    if n > 0 {
        let mut buf = [0u8; 8];
        for (b, o) in buf.iter_mut().zip(&OLD) {
            *b = o.load(Ordering::SeqCst);
        }
        let path = b"/sys/module/page_reporting/parameters/page_reporting_order\0";
        // SAFETY: open/write/close are async-signal-safe; the path is NUL-terminated and `buf`
        // holds `n <= 8` bytes.
        unsafe {
            let fd = libc::open(path.as_ptr() as *const libc::c_char, libc::O_WRONLY);
            if fd >= 0 {
                libc::write(fd, buf.as_ptr() as *const libc::c_void, n);
                libc::close(fd);
            }
        }
    }
    // SAFETY: _exit is async-signal-safe; 128 + the signal, as a shell reports it.
    unsafe { libc::_exit(128 + sig) };
}

/// Turns reporting off and backs the free memory (see the module's comment), unless `leave`
/// gives a reason not to (an option: `--leave-reporting`). `say` gets one progress phrase
/// before the few seconds this takes.
pub fn hold(leave: Option<&str>, say: &mut dyn FnMut(&str)) -> Reporting {
    if let Some(why) = leave {
        return Reporting::LeftOn(why.into());
    }
    let old = match std::fs::read_to_string(KNOB) {
        Ok(s) => s.trim().to_string(),
        Err(_) => return Reporting::Absent,
    };
    if old.len() > OLD.len() || old.parse::<i32>().is_err() {
        return Reporting::LeftOn(format!("{KNOB} reads {old:?}, not an order"));
    }
    if let Err(e) = std::fs::write(KNOB, OFF) {
        return Reporting::LeftOn(format!(
            "cannot write {KNOB}: {e}; run as root to hold it off"
        ));
    }
    for (o, b) in OLD.iter().zip(old.bytes()) {
        o.store(b, Ordering::SeqCst);
    }
    OLD_LEN.store(old.len(), Ordering::SeqCst);
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: installing a handler that only makes async-signal-safe calls.
        unsafe { libc::signal(sig, restore_and_exit as *const () as libc::sighandler_t) };
    }
    say("free page reporting off; writing free memory once so the host backs it");
    std::thread::sleep(SETTLE);
    let backed = back_free_memory();
    Reporting::Held(Held { old, backed })
}

/// Writes `BACK_AT_MOST` of free memory, leaving `MARGIN`, once (THP memory: a fault clears the
/// whole 2MB, so the host backs all of it) and frees it again. Returns the bytes written. It stops early when free
/// memory falls to the margin (another process allocating meanwhile, or a second calibrate).
fn back_free_memory() -> u64 {
    const STEP: usize = 256 << 20;
    let free = meminfo_kb("MemFree:").unwrap_or(0) << 10;
    let Some(len) = free
        .checked_sub(MARGIN)
        .map(|l| l.min(BACK_AT_MOST))
        .filter(|&l| l >= STEP as u64)
    else {
        return 0;
    };
    let Ok(r) = Region::map(len as usize, Thp::Huge) else {
        return 0;
    };
    let mut done = 0;
    while done + STEP <= r.len {
        if meminfo_kb("MemFree:").is_none_or(|kb| kb << 10 < MARGIN) {
            break;
        }
        for off in (done..done + STEP).step_by(4096) {
            // SAFETY: within the region.
            unsafe { r.base.add(off).write_volatile(1) };
        }
        done += STEP;
    }
    done as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_names_what_was_done() {
        assert!(Reporting::Absent
            .describe()
            .contains("no free page reporting"));
        let s = Reporting::LeftOn("not root".into()).describe();
        assert!(s.contains("left on (not root)"), "{s}");
        // A Held built by hand restores its (fake) order on drop: write it somewhere harmless
        // is not possible (the path is fixed), so only the phrase is checked, with the drop
        // defused by forgetting it.
        let h = Reporting::Held(Held {
            old: "9".into(),
            backed: 3 << 30,
        });
        let s = h.describe();
        assert!(
            s.contains("page_reporting_order 9 -> 11") && s.contains("3.0 GiB"),
            "{s}"
        );
        std::mem::forget(h);
    }
}
