//! Part 2 of `splab validate`: held-out C programs (`heldout.c`: a binary search tree's lookups,
//! a sequential scan, random updates), built at run time, each run natively with
//! MADV_NOHUGEPAGE and with MADV_HUGEPAGE memory, recorded with `splab record` and replayed
//! under `linux-madvise` (which honours the recorded madvise calls), comparing the measured
//! superpage speedup with the predicted one.
//!
//! What is timed: the whole program from `main`'s entry to the kernel's end natively (setup:
//! mapping, first touch, building the structure; then the kernel), the whole recorded program
//! in the model (its estimated run time, which also holds the dynamic loader's start-up before
//! `main`: a few hundred thousand accesses, well under 1% of every case here).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::{Plan, Progress};

const HELDOUT_C: &str = include_str!("heldout.c");

/// One program at one size: native and predicted times with 4KB and 2MB pages.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub program: String,
    pub size_bytes: u64,
    /// Native whole-program ns (main to the kernel's end): the 10th percentile of the runs.
    pub measured_4k_ns: f64,
    pub measured_2m_ns: f64,
    pub predicted_4k_ns: f64,
    pub predicted_2m_ns: f64,
    pub measured_speedup: f64,
    pub predicted_speedup: f64,
    /// (predicted - measured) / measured speedup, percent.
    pub speedup_error_pct: f64,
    /// Time errors of the two predictions, percent.
    pub error_4k_pct: f64,
    pub error_2m_pct: f64,
    /// AnonHugePages of the region in the MADV_HUGEPAGE runs: the least of the runs, kB.
    pub anon_huge_kb_2m: u64,
    /// ... and in the MADV_NOHUGEPAGE runs (0 expected): the most.
    pub anon_huge_kb_4k: u64,
    pub region_kb: u64,
    /// Whether every MADV_HUGEPAGE run got its whole region in THPs.
    pub thp_granted: bool,
    pub runs: usize,
    /// Runs (of each mode) that were not context-switched; fewer than 2: all runs counted.
    pub clean_runs: usize,
    /// Accesses of the two traces.
    pub accesses_4k: u64,
    pub accesses_2m: u64,
}

/// The cases: (program, size, work).
pub fn cases(plan: &Plan) -> Vec<(&'static str, u64, f64)> {
    let mut v = Vec::new();
    for p in ["tree", "seq", "gups"] {
        for &s in &plan.heldout_sizes {
            v.push((p, s, plan.heldout_work));
        }
    }
    v
}

/// Builds heldout.c into the cache directory (keyed by its hash), with `cc` (or $CC).
pub fn build() -> Result<PathBuf> {
    let dir = crate::cc::cache_dir_for("validate", &[HELDOUT_C])?;
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("validate: cannot create {}", dir.display()))?;
    let src = dir.join("heldout.c");
    crate::cc::write_source(&src, HELDOUT_C)?;
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    crate::cc::built(&dir, "heldout", |tmp| {
        crate::cc::run(
            Command::new(&cc)
                .args(["-O2", "-fno-tree-vectorize", "-o"])
                .arg(tmp)
                .arg(&src),
            "building the held-out programs (validate)",
        )
    })
}

/// One native run's line: `heldout ns=.. setup_ns=.. kernel_ns=.. region_kb=.. anon_huge_kb=..`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Native {
    pub ns: u64,
    /// Context switches during the timed part.
    pub switches: u64,
    pub region_kb: u64,
    pub anon_huge_kb: i64,
}

pub fn parse_line(line: &str) -> Option<Native> {
    let rest = line.trim().strip_prefix("heldout ")?;
    let mut ns = None;
    let mut sw = None;
    let mut region = None;
    let mut huge = None;
    for kv in rest.split_whitespace() {
        let (k, v) = kv.split_once('=')?;
        match k {
            "ns" => ns = v.parse().ok(),
            "switches" => sw = v.parse().ok(),
            "region_kb" => region = v.parse().ok(),
            "anon_huge_kb" => huge = v.parse().ok(),
            _ => {}
        }
    }
    Some(Native {
        ns: ns?,
        switches: sw?,
        region_kb: region?,
        anon_huge_kb: huge?,
    })
}

fn native(prog: &Path, args: &[String]) -> Result<Native> {
    let out = Command::new(prog)
        .args(args)
        .output()
        .with_context(|| format!("validate: cannot run {}", prog.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "validate: {} {} failed ({}): {}",
            prog.display(),
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    text.lines().find_map(parse_line).with_context(|| {
        format!(
            "validate: no result line from heldout {}: {text:?}",
            args.join(" ")
        )
    })
}

/// Records `prog args` with this splab's `record` (the path a user takes) into `trace`.
fn record(prog: &Path, args: &[String], trace: &Path) -> Result<()> {
    let me = std::env::current_exe().context("validate: cannot find splab's own executable")?;
    let out = Command::new(me)
        .arg("record")
        .arg("-o")
        .arg(trace)
        .arg("--")
        .arg(prog)
        .args(args)
        .output()
        .context("validate: cannot run splab record")?;
    if !out.status.success() {
        bail!(
            "validate: splab record of heldout {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Replays `trace` on `machine` under linux-madvise: (estimated ns, accesses).
fn replay(machine: &str, trace: &Path) -> Result<(f64, u64)> {
    let spec = splab_sim::RunSpec {
        machine: machine.into(),
        policy: "linux-madvise".into(),
        workload: format!("trace:path={}", trace.display()),
        seed: 1,
        check: splab_sim::engine::CheckMode::Off,
        free_bytes: None,
        dump_reservations: false,
        page_cache: Default::default(),
    };
    let r = splab_sim::run(&spec)?;
    Ok((r.time.seconds * 1e9, r.accesses.total))
}

pub fn run(machine: &str, plan: &Plan, work_dir: &Path, pr: &mut Progress) -> Result<Vec<Row>> {
    let prog = build()?;
    let mut rows = Vec::new();
    for (name, size, work) in cases(plan) {
        let label = format!("{name} {}", super::mib(size as usize));
        pr.start(&label);
        let args = |m: &str| {
            vec![
                name.to_string(),
                size.to_string(),
                m.to_string(),
                work.to_string(),
            ]
        };
        // Native: the modes interleaved, so that a slow spell of the machine hits both; runs
        // that were context-switched are discarded and retried (calibrate's rule), up to
        // 3 x runs + 2 tries per mode; if fewer than 2 were clean, all of them count.
        let mut t4 = Vec::new();
        let mut t2 = Vec::new();
        let mut all4 = Vec::new();
        let mut all2 = Vec::new();
        let mut huge2 = i64::MAX;
        let mut huge4 = 0i64;
        let mut region_kb = 0;
        native(&prog, &args("4k"))?; // warms the page cache and the allocator
        let want = plan.native_runs;
        let mut tries = 0;
        while (t4.len() < want || t2.len() < want) && tries < 3 * want + 2 {
            tries += 1;
            for (m, clean, all) in [("4k", &mut t4, &mut all4), ("2m", &mut t2, &mut all2)] {
                if clean.len() >= want {
                    continue;
                }
                let r = native(&prog, &args(m))?;
                all.push(r.ns as f64);
                if r.switches == 0 {
                    clean.push(r.ns as f64);
                }
                if m == "4k" {
                    huge4 = huge4.max(r.anon_huge_kb);
                } else {
                    huge2 = huge2.min(r.anon_huge_kb);
                    region_kb = r.region_kb;
                }
            }
        }
        let clean_runs = t4.len().min(t2.len());
        if t4.len() < 2 {
            t4 = all4;
        }
        if t2.len() < 2 {
            t2 = all2;
        }
        let m4 = crate::calibrate::bench::Stat::new(t4).low();
        let m2 = crate::calibrate::bench::Stat::new(t2).low();
        // Recorded and replayed.
        let mut pred = [0.0f64; 2];
        let mut acc = [0u64; 2];
        for (i, m) in ["4k", "2m"].iter().enumerate() {
            let trace = work_dir.join(format!("{name}-{size}-{m}.spt"));
            record(&prog, &args(m), &trace)?;
            let (ns, a) = replay(machine, &trace)?;
            pred[i] = ns;
            acc[i] = a;
            let _ = std::fs::remove_file(&trace);
        }
        let ms = m4 / m2;
        let ps = pred[0] / pred[1];
        // The whole region, rounded up to a 2MB page (a 1 MiB region gets one THP).
        let want_kb = region_kb.max(2048);
        let row = Row {
            program: name.to_string(),
            size_bytes: size,
            measured_4k_ns: m4,
            measured_2m_ns: m2,
            predicted_4k_ns: pred[0],
            predicted_2m_ns: pred[1],
            measured_speedup: ms,
            predicted_speedup: ps,
            speedup_error_pct: super::error_pct(ms, ps),
            error_4k_pct: super::error_pct(m4, pred[0]),
            error_2m_pct: super::error_pct(m2, pred[1]),
            anon_huge_kb_2m: huge2.max(0) as u64,
            anon_huge_kb_4k: huge4.max(0) as u64,
            region_kb,
            thp_granted: huge2 >= want_kb as i64,
            runs: plan.native_runs,
            clean_runs,
            accesses_4k: acc[0],
            accesses_2m: acc[1],
        };
        pr.heldout(&row);
        rows.push(row);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_result_line() {
        let n = parse_line(
            "heldout ns=301344118 setup_ns=1 kernel_ns=2 switches=3 region_kb=131072 anon_huge_kb=0 check=262144",
        )
        .unwrap();
        assert_eq!(
            n,
            Native {
                ns: 301344118,
                switches: 3,
                region_kb: 131072,
                anon_huge_kb: 0
            }
        );
        assert_eq!(
            parse_line("heldout ns=5 switches=0 region_kb=4 anon_huge_kb=-1")
                .unwrap()
                .anon_huge_kb,
            -1
        );
        assert!(parse_line("heldout ns=5 switches=0 region_kb=4").is_none());
        assert!(parse_line("something else").is_none());
    }
}
