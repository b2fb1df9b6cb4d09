//! trace-bench: the trace subsystem's figures (docs/trace-format.md "Measured figures").
//!
//! Dimensions: capture rate (accesses of the traced program recorded per second of wall time,
//! Valgrind startup included), trace density (file bytes per access), reader throughput (events
//! per second through `read_batch`, one core). Workloads: `scan` (a C program summing a 64MB
//! array 4 times after filling it: the sequential-scan case of the budgets), `chase` (a C program
//! following a shuffled linked list of 4MB, `p = p->next`: the pointer-chasing case) and `gzip`
//! (the system's gzip on a generated 2MB text file: a real program). The trace-size workloads
//! (docs/trace-format.md, "Trace size"), not in `all`: `gzip4m` (gzip of the 4MB text of
//! mixed compressibility that `scripts/mixed-text.py 4M` writes), `sort` (sort of that text) and
//! `python` (python3 building a dict of 200,000 string keys); `size` runs the three.
//!
//! Usage: `cargo run --release -p splab-trace --example trace-bench [-- scan|chase|gzip|all|
//! gzip4m|sort|python|size] [--lackey] [--level=N] [--runs=N] [--keep=DIR]` (N: the zstd level;
//! runs: recordings per workload, the capture rate printed is their median; keep: write the
//! traces to DIR and keep them). `trace-bench read FILE...` measures only the reader on existing
//! traces; `trace-bench recode FILE` the writer (the converter's encoding and zstd) on the first
//! 50M events of one.

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

const CHASE_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
struct node { struct node *next; long val; };
int main(int argc, char **argv) {
    long n = (argc > 1 ? atol(argv[1]) : 4) * 1024 * 1024 / sizeof(struct node);
    long steps = argc > 2 ? atol(argv[2]) : 20000000;
    struct node *a = malloc(n * sizeof(struct node));
    long *perm = malloc(n * sizeof(long));
    for (long i = 0; i < n; i++) perm[i] = i;
    unsigned long x = 88172645463325252ul;
    for (long i = n - 1; i > 0; i--) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        long j = (long)(x % (unsigned long)(i + 1));
        long t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
    for (long i = 0; i < n; i++) a[perm[i]].next = &a[perm[(i + 1) % n]];
    struct node *p = &a[perm[0]];
    for (long s = 0; s < steps; s++) p = p->next;
    printf("%ld\n", (long)(p - a));
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

fn measure(name: &str, cmd: Vec<String>, dir: &Path, backend: Backend, level: i32, runs: usize) {
    let out = dir.join(format!("{name}.spt"));
    let opts = RecordOptions {
        backend,
        zstd_level: level,
        ..Default::default()
    };
    let mut rates = Vec::new();
    let mut last = None;
    for _ in 0..runs.max(1) {
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
        rates.push(s.accesses as f64 / wall / 1e6);
        last = Some(s);
    }
    let Some(s) = last else { return };
    rates.sort_by(f64::total_cmp);
    println!(
        "{name}: capture {:.1}M accesses/s (median of {}: {}), {:.3} bytes/access, {} processes",
        rates[rates.len() / 2],
        rates.len(),
        rates
            .iter()
            .map(|r| format!("{r:.1}"))
            .collect::<Vec<_>>()
            .join(" "),
        s.bytes_per_access(),
        s.processes
    );
    read_speed(name, &out);
}

/// The converter's share of capture: rewrites a trace's events with this build's writer at
/// `record`'s zstd level, timing only the writer (best of 3).
fn recode(input: &Path) {
    let mut events = Vec::new();
    let mut r = TraceReader::open(input).expect("opening the trace");
    let header = r.header().clone();
    let mut buf: Vec<TraceEvent> = Vec::with_capacity(8192);
    while r.read_batch(&mut buf, 8192).expect("reading the trace") > 0 {
        events.append(&mut buf);
        if events.len() >= 50_000_000 {
            break;
        }
    }
    let level = RecordOptions::default().zstd_level;
    let mut best = f64::MAX;
    let mut bytes = 0;
    for _ in 0..3 {
        let t = Instant::now();
        let mut w = splab_trace::TraceWriter::new(std::io::sink(), &header, level).expect("writer");
        for e in &events {
            w.write(e).expect("writing");
        }
        bytes = w.finish().expect("finishing").file_bytes;
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!(
        "{}: writer {:.1}M events/s ({} events in {best:.3} s), {:.3} bytes/event",
        input.display(),
        events.len() as f64 / best / 1e6,
        events.len(),
        bytes as f64 / events.len() as f64
    );
}

/// Reader throughput of a trace: best of 3 reads.
fn read_speed(name: &str, out: &Path) {
    let mut best = f64::MAX;
    let mut events = 0u64;
    for _ in 0..3 {
        let t = Instant::now();
        let mut r = TraceReader::open(out).expect("opening the trace");
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
    if args.first().map(String::as_str) == Some("recode") {
        recode(Path::new(&args[1]));
        return;
    }
    if args.first().map(String::as_str) == Some("read") {
        for f in &args[1..] {
            read_speed(f, Path::new(f));
        }
        return;
    }
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
    let runs = args
        .iter()
        .find_map(|a| a.strip_prefix("--runs="))
        .and_then(|l| l.parse().ok())
        .unwrap_or(1);
    let keep = args
        .iter()
        .find_map(|a| a.strip_prefix("--keep="))
        .map(PathBuf::from);
    let dir = keep.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("splab-trace-bench-{}", std::process::id()))
    });
    std::fs::create_dir_all(&dir).expect("creating the output folder");
    let size = which == "size";
    if which == "gzip4m" || which == "sort" || size {
        let input = dir.join("mixed4m.txt");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/mixed-text.py");
        let ok = Command::new("python3")
            .arg(&script)
            .arg("4M")
            .arg(&input)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "python3 {} failed", script.display());
        let inp = input.display().to_string();
        if which == "gzip4m" || size {
            let cmd = vec!["gzip".into(), "-k".into(), "-f".into(), inp.clone()];
            measure("gzip4m", cmd, &dir, backend, level, runs);
        }
        if which == "sort" || size {
            let out = dir.join("sorted.txt").display().to_string();
            let cmd = vec!["sort".into(), "-o".into(), out, inp];
            measure("sort", cmd, &dir, backend, level, runs);
        }
    }
    if which == "python" || size {
        let prog = "d = {}\nfor i in range(200000): d[str(i)] = i\nprint(len(d))";
        let cmd = vec!["python3".into(), "-c".into(), prog.into()];
        measure("python", cmd, &dir, backend, level, runs);
    }
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
            runs,
        );
    }
    if which == "chase" || which == "all" {
        let exe = compile(&dir, "chase", CHASE_C);
        let steps = if backend == Backend::Lackey {
            "1000000"
        } else {
            "20000000"
        };
        measure(
            "chase",
            vec![exe.display().to_string(), "4".into(), steps.into()],
            &dir,
            backend,
            level,
            runs,
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
            runs,
        );
    }
    if keep.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
