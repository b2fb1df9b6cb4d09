//! trace-bench: the trace subsystem's figures (docs/trace-format.md "Measured figures").
//!
//! Dimensions: capture rate (accesses of the traced program recorded per second of wall time,
//! Valgrind startup included), trace density (file bytes per access), reader throughput (events
//! per second through `read_batch`, one core). Workloads: `scan` (a C program summing a 64MB
//! array 4 times after filling it: the sequential-scan case of the budgets) and `gzip` (the
//! system's gzip on a generated 2MB text file: a real program).
//!
//! Usage: `cargo run --release -p splab-trace --example trace-bench [-- scan|gzip|all] [--lackey]
//! [--level=N]` (N: the zstd level).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use splab_trace::{record, Backend, RecordOptions, TraceEvent, TraceReader};

const SCAN_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    long mb = argc > 1 ? atol(argv[1]) : 64;
    int passes = argc > 2 ? atoi(argv[2]) : 4;
    long n = mb * 1024 * 1024 / sizeof(long);
    volatile long *a = malloc(n * sizeof(long));
    long s = 0;
    for (long i = 0; i < n; i++) a[i] = i;
    for (int p = 0; p < passes; p++)
        for (long i = 0; i < n; i++) s += a[i];
    printf("%ld\n", s);
    return 0;
}
"#;

fn compile(dir: &Path, name: &str, src: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).expect("writing the C source");
    let exe = dir.join(name);
    let ok = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&c)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "cc failed on {}", c.display());
    exe
}

/// Text that compresses like real text (words from a small vocabulary, pseudo-random order).
fn make_text(path: &Path, bytes: usize) {
    let words = [
        "the",
        "superpage",
        "reservation",
        "of",
        "a",
        "page",
        "table",
        "walk",
        "memory",
        "is",
        "promoted",
        "when",
        "fully",
        "populated",
        "and",
        "demoted",
        "on",
        "write",
        "TLB",
        "miss",
    ];
    let mut s = String::with_capacity(bytes + 32);
    let mut x: u64 = 0x9e3779b97f4a7c15;
    while s.len() < bytes {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push_str(words[(x % words.len() as u64) as usize]);
        s.push(if x.is_multiple_of(11) { '\n' } else { ' ' });
    }
    std::fs::write(path, s).expect("writing the input text");
}

fn measure(name: &str, cmd: Vec<String>, dir: &Path, backend: Backend, level: i32) {
    let out = dir.join(format!("{name}.spt"));
    let opts = RecordOptions {
        backend,
        zstd_level: level,
        ..Default::default()
    };
    let t0 = Instant::now();
    let s = match record(&opts, &cmd, &out, |_| {}) {
        Ok(s) => s,
        Err(e) => {
            println!("{name}: record failed: {e}");
            return;
        }
    };
    let wall = t0.elapsed().as_secs_f64();
    println!("{name}: {s}");
    println!(
        "{name}: capture {:.1}M accesses/s, {:.3} bytes/access, {} processes",
        s.accesses as f64 / wall / 1e6,
        s.bytes_per_access(),
        s.processes
    );
    // Reader: best of 3.
    let mut best = f64::MAX;
    let mut events = 0u64;
    for _ in 0..3 {
        let t = Instant::now();
        let mut r = TraceReader::open(&out).expect("opening the trace");
        let mut buf: Vec<TraceEvent> = Vec::with_capacity(8192);
        let mut n = 0u64;
        loop {
            buf.clear();
            let k = r.read_batch(&mut buf, 8192).expect("reading the trace");
            if k == 0 {
                break;
            }
            n += k as u64;
        }
        best = best.min(t.elapsed().as_secs_f64());
        events = n;
    }
    println!(
        "{name}: reader {:.1}M events/s ({events} events in {:.3} s)",
        events as f64 / best / 1e6,
        best
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let which = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .cloned()
        .unwrap_or_else(|| "all".into());
    let backend = if args.iter().any(|a| a == "--lackey") {
        Backend::Lackey
    } else {
        Backend::Auto
    };
    let level = args
        .iter()
        .find_map(|a| a.strip_prefix("--level="))
        .and_then(|l| l.parse().ok())
        .unwrap_or(RecordOptions::default().zstd_level);
    let dir = std::env::temp_dir().join(format!("splab-trace-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("creating a temporary folder");
    if which == "scan" || which == "all" {
        let exe = compile(&dir, "scan", SCAN_C);
        let mb = if backend == Backend::Lackey {
            "4"
        } else {
            "64"
        };
        measure(
            "scan",
            vec![exe.display().to_string(), mb.into(), "4".into()],
            &dir,
            backend,
            level,
        );
    }
    if which == "gzip" || which == "all" {
        let input = dir.join("input.txt");
        make_text(
            &input,
            if backend == Backend::Lackey {
                200_000
            } else {
                2_000_000
            },
        );
        measure(
            "gzip",
            vec![
                "gzip".into(),
                "-k".into(),
                "-f".into(),
                input.display().to_string(),
            ],
            &dir,
            backend,
            level,
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
