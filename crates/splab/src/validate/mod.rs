//! `splab validate`: how well the model predicts this machine (issue 8 item 4,
//! docs/validation.md). Part 1 reruns the calibration benchmarks' access patterns natively and
//! replays the same accesses on the model (`patterns.rs`); part 2 builds held-out C programs,
//! runs them natively with 4KB and 2MB pages, records them with `splab record` and replays the
//! traces, comparing the superpage speedups (`heldout.rs`). x86-64 Linux only.

use std::io::IsTerminal;
use std::time::Instant;

use anyhow::Result;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub mod heldout;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub(crate) mod patterns;

#[derive(clap::Args)]
pub struct ValidateArgs {
    /// The machine to validate, normally the file `splab calibrate` wrote: -m file:host.toml.
    #[arg(short, long, value_name = "MACHINE")]
    pub machine: String,
    /// A shorter run: fewer repeats, smaller footprints, two held-out sizes and less work.
    #[arg(long)]
    pub quick: bool,
    /// Also write the tables as JSON to PATH ("-" for standard output).
    #[arg(long, value_name = "PATH")]
    pub json: Option<String>,
    /// Which part to run: all (the default), patterns (the calibration benchmarks only) or
    /// heldout (the held-out programs only).
    #[arg(long, default_value = "all", value_parser = ["all", "patterns", "heldout"])]
    pub only: String,
    /// The smallest run that still goes through every step (for splab's own tests): few
    /// repeats, one held-out size, little work. Its numbers are not a validation.
    #[arg(long, hide = true)]
    pub smoke: bool,
    /// No progress lines on standard error.
    #[arg(short, long)]
    pub quiet: bool,
    /// Leave the guest's free page reporting as it is. By default validate turns it off while
    /// it measures (when it may: root) and writes free memory once, as calibrate does, so that
    /// no native run's first touch includes the host's faults (docs/calibrate.md).
    #[arg(long)]
    pub leave_reporting: bool,
}

/// Sizes and repeats of one run.
pub struct Plan {
    pub reps: usize,
    pub ms: f64,
    pub dram_footprint: usize,
    pub walk_pages: usize,
    pub heldout_sizes: Vec<u64>,
    pub heldout_work: f64,
    pub native_runs: usize,
    /// Between the 2MB fault row's bursts (`patterns.rs`).
    pub fault_gap: std::time::Duration,
}

impl Plan {
    fn new(quick: bool, smoke: bool) -> Plan {
        if smoke {
            Plan {
                reps: 3,
                ms: 1.0,
                dram_footprint: 32 << 20,
                walk_pages: 8192,
                heldout_sizes: vec![1 << 20],
                heldout_work: 0.05,
                native_runs: 2,
                fault_gap: std::time::Duration::from_secs(0),
            }
        } else if quick {
            Plan {
                reps: 7,
                ms: 2.0,
                dram_footprint: 128 << 20,
                walk_pages: 32768,
                heldout_sizes: vec![1 << 20, 32 << 20],
                heldout_work: 0.25,
                native_runs: 3,
                fault_gap: std::time::Duration::from_secs(2),
            }
        } else {
            Plan {
                reps: 15,
                ms: 3.0,
                dram_footprint: 256 << 20,
                walk_pages: 65536,
                heldout_sizes: vec![1 << 20, 16 << 20, 128 << 20],
                heldout_work: 0.5,
                native_runs: 5,
                fault_gap: std::time::Duration::from_secs(5),
            }
        }
    }
}

/// Progress lines on standard error.
pub struct Progress {
    quiet: bool,
    t0: Instant,
    tty: bool,
}

impl Progress {
    fn start(&mut self, what: &str) {
        if !self.quiet && self.tty {
            eprint!(
                "\r\x1b[K[{:5.1}s] {what} ...",
                self.t0.elapsed().as_secs_f64()
            );
        }
    }
    fn line(&mut self, text: &str) {
        if !self.quiet {
            if self.tty {
                eprint!("\r\x1b[K");
            }
            eprintln!("[{:5.1}s] {text}", self.t0.elapsed().as_secs_f64());
        }
    }
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn row(&mut self, r: &patterns::Row) {
        self.line(&format!(
            "{}: measured {:.2} {u}, predicted {:.2} {u} ({:+.1}%)",
            r.benchmark,
            r.measured,
            r.predicted,
            r.error_pct,
            u = r.unit
        ));
    }
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn heldout(&mut self, r: &heldout::Row) {
        self.line(&format!(
            "{} {}: speedup measured {:.3}, predicted {:.3} ({:+.1}%); AnonHugePages {} of {} kB",
            r.program,
            mib(r.size_bytes as usize),
            r.measured_speedup,
            r.predicted_speedup,
            r.speedup_error_pct,
            r.anon_huge_kb_2m,
            r.region_kb
        ));
    }
}

/// (predicted - measured) / measured, percent.
pub fn error_pct(measured: f64, predicted: f64) -> f64 {
    if measured > 0.0 {
        100.0 * (predicted - measured) / measured
    } else {
        f64::NAN
    }
}

pub use crate::calibrate::bench::mib;

/// Tolerances of issue 8's acceptance: time of a calibration pattern, speedup of a held-out
/// program.
pub const PATTERN_TOLERANCE_PCT: f64 = 15.0;
pub const SPEEDUP_TOLERANCE_PCT: f64 = 20.0;

fn verdict(err: f64, tol: f64) -> &'static str {
    if err.abs() <= tol {
        "ok"
    } else {
        "MISS"
    }
}

pub fn run(args: &ValidateArgs) -> Result<()> {
    // Bad input first, before any long work.
    splab_sim::hw::Machine::from_spec(&args.machine)?;
    if let Some(j) = &args.json {
        if j != "-" {
            std::fs::write(j, "").map_err(|e| {
                splab_sim::SimError::BadInput(format!("--json {j}: cannot write: {e}"))
            })?;
        }
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        anyhow::bail!(
            "validate: the native benchmarks are written for x86-64 Linux only; this is {} {}",
            std::env::consts::ARCH,
            std::env::consts::OS
        )
    }
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let want_heldout = args.only != "patterns";
        if want_heldout {
            check_tools()?;
        }
        let plan = Plan::new(args.quick, args.smoke);
        let mut pr = Progress {
            quiet: args.quiet,
            t0: Instant::now(),
            tty: std::io::stderr().is_terminal(),
        };
        // Held until the native runs are over (calibrate/reporting.rs). The smoke run's
        // numbers are not a validation, and it runs beside other tests: it leaves it.
        let leave = if args.smoke {
            Some("--smoke")
        } else {
            args.leave_reporting.then_some("--leave-reporting")
        };
        let reporting = crate::calibrate::reporting::hold(leave, &mut |what| pr.line(what));
        pr.line(&reporting.describe());
        let started = chrono_now();
        let load = loadavg();
        let pats = if args.only != "heldout" {
            patterns::run(&args.machine, &plan, &mut pr)?
        } else {
            Vec::new()
        };
        let held = if want_heldout {
            let dir = tempdir()?;
            let r = heldout::run(&args.machine, &plan, &dir, &mut pr);
            let _ = std::fs::remove_dir_all(&dir);
            r?
        } else {
            Vec::new()
        };
        let load_end = loadavg();
        let reporting = reporting.describe();
        let text = tables(
            &args.machine,
            &pats,
            &held,
            &started,
            &load,
            &load_end,
            &reporting,
        );
        print!("{text}");
        if let Some(j) = &args.json {
            let v = serde_json::json!({
                "schema": "splab.validate.v1",
                "machine": args.machine,
                "quick": args.quick,
                "started": started,
                "loadavg_start": load,
                "loadavg_end": load_end,
                "reporting": reporting,
                "pattern_tolerance_pct": PATTERN_TOLERANCE_PCT,
                "speedup_tolerance_pct": SPEEDUP_TOLERANCE_PCT,
                "patterns": pats,
                "heldout": held,
            });
            let s = serde_json::to_string_pretty(&v)? + "\n";
            if j == "-" {
                print!("{s}");
            } else {
                std::fs::write(j, s)?;
            }
        }
        pr.line(&format!(
            "validate: done in {:.0} s",
            pr.t0.elapsed().as_secs_f64()
        ));
        Ok(())
    }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn check_tools() -> Result<()> {
    let ok = |c: &str| {
        std::process::Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    if !ok(&cc) {
        return Err(splab_sim::SimError::BadInput(format!(
            "validate: the held-out programs need a C compiler ({cc} not found; set CC); --only patterns runs without"
        ))
        .into());
    }
    if !ok("valgrind") || !splab_trace::tool_available() {
        return Err(splab_sim::SimError::BadInput(
            "validate: the held-out programs are recorded with splab record, which needs Valgrind \
             (apt-get install valgrind) and splab's Valgrind tool; --only patterns runs without"
                .into(),
        )
        .into());
    }
    Ok(())
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn tempdir() -> Result<std::path::PathBuf> {
    let d = std::env::temp_dir().join(format!("splab-validate-{}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

/// The load averages (1, 5, 15 minutes) from /proc/loadavg.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// UTC now, "2026-11-26 18:40 UTC" (from the system clock; no time-zone database).
fn chrono_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = (secs / 86400) as i64;
    let (h, m) = ((secs % 86400) / 3600, (secs % 3600) / 60);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{m:02} UTC")
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn tables(
    machine: &str,
    pats: &[patterns::Row],
    held: &[heldout::Row],
    started: &str,
    load: &str,
    load_end: &str,
    reporting: &str,
) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "splab validate -m {machine}: {started}, load average {load} at the start, {load_end} at the end"
    );
    let _ = writeln!(s, "Measured with {reporting}.");
    if !pats.is_empty() {
        let ok = pats
            .iter()
            .filter(|r| r.error_pct.abs() <= PATTERN_TOLERANCE_PCT)
            .count();
        let _ = writeln!(
            s,
            "\nCalibration patterns (native: 10th percentile of clean runs; model: the same accesses)"
        );
        let _ = writeln!(
            s,
            "| benchmark | unit | measured | predicted | error | within {PATTERN_TOLERANCE_PCT:.0}% | THP granted | 2MB phys ranges |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
        for r in pats {
            let _ = writeln!(
                s,
                "| {} | {} | {:.2} | {:.2} | {:+.1}% | {} | {} | {} |",
                r.benchmark,
                r.unit,
                r.measured,
                r.predicted,
                r.error_pct,
                verdict(r.error_pct, PATTERN_TOLERANCE_PCT),
                r.thp_granted_pct
                    .map(|p| format!("{p:.0}%"))
                    .unwrap_or_else(|| "-".into()),
                r.phys_2m_ranges
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "-".into())
            );
        }
        let _ = writeln!(
            s,
            "{ok} of {} within {PATTERN_TOLERANCE_PCT:.0}%",
            pats.len()
        );
    }
    if !held.is_empty() {
        let ok = held
            .iter()
            .filter(|r| r.speedup_error_pct.abs() <= SPEEDUP_TOLERANCE_PCT)
            .count();
        let _ = writeln!(
            s,
            "\nHeld-out programs (whole program; native: 10th percentile of {} runs each, more for a short program (as many pairs as fit in a quarter second, up to five times as many), the speedup the median of the pairs' ratios; model: the recorded trace under linux-madvise)",
            held.iter().map(|r| r.runs).min().unwrap_or(0)
        );
        let _ = writeln!(
            s,
            "| program | size | 4KB measured ms | 4KB predicted ms | 2MB measured ms | 2MB predicted ms | AnonHugePages | speedup measured | speedup predicted | error | within {SPEEDUP_TOLERANCE_PCT:.0}% |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|");
        for r in held {
            let _ = writeln!(
                s,
                "| {} | {} | {:.2} | {:.2} ({:+.0}%) | {:.2} | {:.2} ({:+.0}%) | {} of {} kB{} | {:.3} | {:.3} | {:+.1}% | {} |",
                r.program,
                mib(r.size_bytes as usize),
                r.measured_4k_ns / 1e6,
                r.predicted_4k_ns / 1e6,
                r.error_4k_pct,
                r.measured_2m_ns / 1e6,
                r.predicted_2m_ns / 1e6,
                r.error_2m_pct,
                r.anon_huge_kb_2m,
                r.region_kb,
                if r.thp_granted { "" } else { " (THP NOT granted)" },
                r.measured_speedup,
                r.predicted_speedup,
                r.speedup_error_pct,
                verdict(r.speedup_error_pct, SPEEDUP_TOLERANCE_PCT)
            );
        }
        let _ = writeln!(
            s,
            "{ok} of {} speedups within {SPEEDUP_TOLERANCE_PCT:.0}%",
            held.len()
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_and_verdict() {
        assert_eq!(error_pct(100.0, 115.0), 15.0);
        assert_eq!(error_pct(100.0, 80.0), -20.0);
        assert!(error_pct(0.0, 1.0).is_nan());
        assert_eq!(verdict(-15.0, 15.0), "ok");
        assert_eq!(verdict(15.1, 15.0), "MISS");
        assert_eq!(verdict(f64::NAN, 15.0), "MISS");
    }

    #[test]
    fn sizes_print() {
        assert_eq!(mib(24 << 10), "24 KiB");
        assert_eq!(mib(3 << 19), "1.5 MiB");
        assert_eq!(mib(1 << 30), "1 GiB");
    }

    #[test]
    fn the_date_is_civil() {
        let d = chrono_now();
        assert!(d.ends_with(" UTC") && d.len() == 20, "{d}");
    }
}
