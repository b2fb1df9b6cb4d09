//! `splab advise` (docs/advise.md): seed 004's threshold against the spread measured per window.
//!
//! - synthetic traces written with `TraceWriter` (always run): exact distinct pages, spreads,
//!   verdicts and hint lines;
//! - a recorded C program, crates/splab/tests/fixtures/hotcold.c (skipped, with a notice, when
//!   `cc`, Valgrind or splab's tool is missing, as the replay tests do);
//! - bad input: one error line, exit status 2.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use splab_trace::{AccessKind, MmapFlags, Pid, Prot, TraceEvent, TraceHeader, TraceWriter, Vaddr};

mod common;
use common::{assert_error_line, assert_success, can_record, splab};

const PAGE: u64 = 4096;
/// A glibc-malloc'd 64MB block's mapping: round_up(round_up(64M + 8, 16) + 8, 4096).
const L64: u64 = (64 << 20) + 4096;

fn workdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("splab-advise-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write_trace(path: &Path, f: impl FnOnce(&mut TraceWriter<std::fs::File>)) {
    let h = TraceHeader {
        page_size_hint: 4096,
        source: "test".into(),
        command: "synthetic".into(),
        processes: Vec::new(),
    };
    let mut w = TraceWriter::new(std::fs::File::create(path).unwrap(), &h, 3).unwrap();
    f(&mut w);
    w.finish().unwrap();
}

fn anon(addr: u64, len: u64) -> TraceEvent {
    TraceEvent::Mmap {
        pid: Pid(1),
        addr: Vaddr(addr),
        len,
        prot: Prot::RW,
        flags: MmapFlags::ANON,
        file: None,
        offset: 0,
    }
}

/// `splab advise ARGS --json -`: the JSON, and the hints file's lines when `--hints-out` is
/// among ARGS (its path is the argument after it).
fn advise(args: &[&str]) -> (Value, Vec<String>) {
    let out = splab()
        .arg("advise")
        .args(args)
        .args(["-q", "--json", "-"])
        .output()
        .unwrap();
    assert_success(&out, args);
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let hints = match args.iter().position(|a| *a == "--hints-out") {
        Some(i) => std::fs::read_to_string(args[i + 1])
            .unwrap()
            .lines()
            .map(String::from)
            .collect(),
        None => Vec::new(),
    };
    (v, hints)
}

fn region(v: &Value, start: u64) -> &Value {
    v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["start"] == start)
        .unwrap_or_else(|| panic!("no region at {start:#x}"))
}

fn superpage_lines(hints: &[String]) -> Vec<&str> {
    hints
        .iter()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.as_str())
        .collect()
}

/// The access-weighted median of equally weighted windows: the lower median.
fn lower_median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len().div_ceil(2) - 1]
}

const HOT: u64 = 0x1000_0000;
const STREAM: u64 = 0x2000_0000;
const SMALL: u64 = 0x3000_0000;

/// Two 64MB blocks as glibc maps them (same length), one read at random (hot), one streamed
/// 8 bytes at a time, and a 3MB+4K block read at random: the hot block deserves superpages,
/// the stream's windows hold exactly 8 pages, the small block is hot but below core2's 4MB
/// superpage. The hint names the first of the two 64MB mappings.
#[test]
fn synthetic_hot_region_gets_superpages_and_the_stream_does_not() {
    let dir = workdir("synthetic");
    let spt = dir.join("s.spt");
    let w = 4096u64;
    let hot_n = 50 * w; // whole windows, so the stream's windows start at a window boundary
    let mut x: u64 = 7;
    let mut lcg = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x >> 33
    };
    let hot_idx: Vec<u64> = (0..hot_n).map(|_| lcg() & ((8 << 20) - 1)).collect();
    let small_idx: Vec<u64> = (0..10 * w).map(|_| lcg() % ((3 << 20) / 8)).collect();
    write_trace(&spt, |t| {
        t.write(&anon(HOT, L64)).unwrap();
        t.write(&anon(STREAM, L64)).unwrap();
        t.write(&anon(SMALL, (3 << 20) + 4096)).unwrap();
        for &i in &hot_idx {
            t.access(Pid(1), Vaddr(HOT + 8 * i), AccessKind::Read, 8)
                .unwrap();
        }
        t.access_run(Pid(1), Vaddr(STREAM), AccessKind::Read, 8, 8, 8 << 20)
            .unwrap();
        for &i in &small_idx {
            t.access(Pid(1), Vaddr(SMALL + 8 * i), AccessKind::Write, 8)
                .unwrap();
        }
    });
    let hints = dir.join("h.txt");
    let (v, lines) = advise(&[
        "-w",
        &format!("trace:path={}", spt.display()),
        "-m",
        "core2",
        "--window",
        "4096",
        "--hints-out",
        hints.to_str().unwrap(),
    ]);
    assert_eq!(v["threshold"]["pages"], 65);
    assert_eq!(v["data_accesses"], hot_n + (8 << 20) + 10 * w);
    assert_eq!(v["window"]["windows"], 50 + 2048 + 10);

    // The hot block: its pages, and per window the pages of that window, counted here.
    let pages = |idx: &[u64]| idx.iter().map(|i| 8 * i / PAGE).collect::<HashSet<_>>();
    let hot = region(&v, HOT);
    assert_eq!(hot["distinct_pages"], pages(&hot_idx).len());
    let spreads: Vec<u64> = hot_idx
        .chunks(w as usize)
        .map(|c| pages(c).len() as u64)
        .collect();
    assert_eq!(hot["spread_median"], lower_median(spreads.clone()));
    assert_eq!(hot["spread_max"], *spreads.iter().max().unwrap());
    assert_eq!(hot["verdict"], "superpages");
    assert_eq!(hot["share_at_or_above_threshold"], 1.0);

    // The stream: 4096 accesses of 8 bytes = 32KB = exactly 8 pages per window.
    let stream = region(&v, STREAM);
    assert_eq!(stream["distinct_pages"], 16384);
    assert_eq!(stream["spread_median"], 8);
    assert_eq!(stream["spread_max"], 8);
    assert_eq!(stream["verdict"], "base pages");
    assert_eq!(
        stream["reason"],
        "spread median 8 < threshold 65 pages: the TLB covers it"
    );

    // The small block: hot, but no 4MB superpage fits in 3MB + 4K.
    let small = region(&v, SMALL);
    assert_eq!(small["distinct_pages"], pages(&small_idx).len());
    let s_med = lower_median(
        small_idx
            .chunks(w as usize)
            .map(|c| pages(c).len() as u64)
            .collect(),
    );
    assert!(s_med >= 65, "{s_med}");
    assert_eq!(small["spread_median"], s_med);
    assert_eq!(small["verdict"], "base pages");
    assert_eq!(
        small["reason"],
        format!("spread median {s_med} >= 65, but 3076K < a 4M superpage")
    );

    // Program-wide: the stream's 2048 windows of 8 pages are most of the windows.
    assert_eq!(v["program"]["spread_median"], 8);
    assert_eq!(v["program"]["verdict"], "base pages");

    // glibc: a request s maps round_up(round_up(s + 8, 16) + 8, 4096) bytes, so L64 holds
    // s in [L64 - 4119, L64 - 24]; the hot block is the first of two such mappings.
    assert_eq!(
        superpage_lines(&lines),
        vec![format!(
            "superpages size={}..{} nth=1",
            L64 - 4119,
            L64 - 24
        )]
    );
    assert!(lines.iter().any(|l| l.starts_with("# machine: core2")));
    assert!(lines
        .iter()
        .any(|l| l.starts_with("# window: 4096 data accesses")));
    assert_eq!(v["hints"][0], superpage_lines(&lines)[0]);

    // The default window is 64 x the threshold (4,160 on core2), and a different length for
    // the stream's block makes the hint a plain size range (no nth).
    let spt2 = dir.join("s2.spt");
    write_trace(&spt2, |t| {
        t.write(&anon(HOT, L64)).unwrap();
        t.write(&anon(STREAM, (32 << 20) + 4096)).unwrap();
        for &i in &hot_idx {
            t.access(Pid(1), Vaddr(HOT + 8 * i), AccessKind::Read, 8)
                .unwrap();
        }
        t.access_run(Pid(1), Vaddr(STREAM), AccessKind::Read, 8, 8, 4 << 20)
            .unwrap();
    });
    let hints2 = dir.join("h2.txt");
    let (v2, lines2) = advise(&[
        "-w",
        &format!("trace:path={}", spt2.display()),
        "-m",
        "core2",
        "--hints-out",
        hints2.to_str().unwrap(),
    ]);
    assert_eq!(v2["window"]["accesses"], 4160);
    assert_eq!(v2["window"]["default"], true);
    assert_eq!(region(&v2, STREAM)["verdict"], "base pages");
    assert_eq!(
        superpage_lines(&lines2),
        vec![format!("superpages size={}..{}", L64 - 4119, L64 - 24)]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A window holding a known set of pages: the spread counts each page once per window (a page
/// crossing counts both pages), instruction fetches are not data accesses, an access outside
/// every mapping counts in its window but in no region, and the median weighs windows by the
/// region's accesses.
#[test]
fn spread_is_the_distinct_pages_of_each_window() {
    let dir = workdir("known");
    let spt = dir.join("k.spt");
    let base = 0x4000_0000u64;
    write_trace(&spt, |t| {
        t.write(&anon(base, 8 * PAGE)).unwrap();
        let a = |t: &mut TraceWriter<_>, page: u64, off: u64| {
            t.access(Pid(1), Vaddr(base + page * PAGE + off), AccessKind::Read, 8)
                .unwrap()
        };
        // Window 1 (6 data accesses): pages 0, 1, 0, 2 and 3 (one access across them), 1, 0.
        a(t, 0, 0);
        a(t, 1, 0);
        t.access(Pid(1), Vaddr(base), AccessKind::Ifetch, 1)
            .unwrap();
        a(t, 0, 64);
        a(t, 2, PAGE - 4);
        a(t, 1, 8);
        a(t, 0, 8);
        // Window 2: five accesses to page 5, one outside every mapping.
        for k in 0..5 {
            a(t, 5, 8 * k);
        }
        t.access(Pid(1), Vaddr(0x10), AccessKind::Read, 8).unwrap();
    });
    let (v, _) = advise(&[
        "-w",
        &format!("trace:path={}", spt.display()),
        "-m",
        "core2",
        "--window",
        "6",
    ]);
    assert_eq!(v["data_accesses"], 12);
    assert_eq!(v["ifetches"], 1);
    assert_eq!(v["unattributed_accesses"], 1);
    assert_eq!(v["window"]["windows"], 2);
    let r = region(&v, base);
    assert_eq!(r["accesses"], 11);
    assert_eq!(r["distinct_pages"], 5);
    assert_eq!(r["windows_touched"], 2);
    assert_eq!(r["spread_max"], 4);
    // (4 pages, 6 accesses) and (1 page, 5 accesses): the median access sees 4 pages.
    assert_eq!(r["spread_median"], 4);
    assert_eq!(r["share_at_or_above_threshold"], 0.0);
    assert_eq!(r["verdict"], "base pages");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// fixtures/hotcold.c compiled with `cc -O2` into `dir`.
fn build_hotcold(dir: &Path) -> PathBuf {
    let exe = dir.join("hotcold");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hotcold.c");
    let out = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap();
    assert_success(&out, "cc");
    exe
}

/// `splab record -o spt -- PRE... exe`.
fn record(spt: &Path, pre: &[String], exe: &Path) {
    let out = splab()
        .args(["record", "-q", "-o"])
        .arg(spt)
        .arg("--")
        .args(pre)
        .arg(exe)
        .output()
        .unwrap();
    assert_success(&out, ("record", pre));
}

/// fixtures/hotcold.c, recorded: the randomly updated 64MB buffer deserves superpages, the
/// streamed one does not, and the hints name the hot buffer's malloc (the first of the two
/// 64MB requests, which glibc maps at 64MB + 4096 bytes each).
#[test]
fn recorded_hot_buffer_gets_the_only_hint() {
    if !can_record("recorded_hot_buffer_gets_the_only_hint") {
        return;
    }
    let dir = workdir("hotcold");
    let exe = build_hotcold(&dir);
    let spt = dir.join("hotcold.spt");
    record(&spt, &[], &exe);
    let hints = dir.join("hotcold.hints");
    let (v, lines) = advise(&[
        "-w",
        &format!("trace:path={}", spt.display()),
        "-m",
        "core2",
        "--hints-out",
        hints.to_str().unwrap(),
    ]);
    let regions = v["regions"].as_array().unwrap();
    let big: Vec<&Value> = regions
        .iter()
        .filter(|r| r["kind"] == "anon" && r["mapped_bytes"] == L64)
        .collect();
    assert_eq!(big.len(), 2, "the two 64MB blocks");
    let (hot, cold) = (big[0], big[1]);
    // The hot buffer's pages: the chunk header (page 0), the LCG's words at +16 + 8 i, and the
    // word printf reads.
    const N: u64 = 8 << 20;
    let mut pages: HashSet<u64> = [0, (16 + 8 * (N / 2)) / PAGE].into();
    let mut x: u64 = 12345;
    for _ in 0..(2u64 << 20) {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        pages.insert((16 + 8 * ((x >> 33) & (N - 1))) / PAGE);
    }
    assert_eq!(hot["distinct_pages"], pages.len());
    assert_eq!(hot["verdict"], "superpages", "{hot}");
    // The cold buffer: every word of [16, 64MB + 16) is written then read.
    assert_eq!(cold["distinct_pages"], 16385);
    assert_eq!(cold["verdict"], "base pages", "{cold}");
    let sp: Vec<&Value> = regions
        .iter()
        .filter(|r| r["verdict"] == "superpages")
        .collect();
    assert_eq!(sp.len(), 1, "only the hot buffer: {sp:?}");
    assert_eq!(
        superpage_lines(&lines),
        vec![format!(
            "superpages size={}..{} nth=1",
            L64 - 4119,
            L64 - 24
        )]
    );
    // 64MB itself is in the range.
    const { assert!(L64 - 4119 <= 64 << 20 && 64 << 20 <= L64 - 24) };
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Bad input: one line naming what is wrong, exit status 2, no panic, and no output file.
#[test]
fn bad_input_exits_2_with_one_line() {
    let dir = workdir("bad");
    let spt = dir.join("ok.spt");
    write_trace(&spt, |t| {
        t.write(&anon(0x1000_0000, 4 * PAGE)).unwrap();
        t.access(Pid(1), Vaddr(0x1000_0000), AccessKind::Read, 8)
            .unwrap();
    });
    let text = dir.join("notes.txt");
    std::fs::write(&text, "these are not the events you are looking for\n").unwrap();
    let w = format!("trace:path={}", spt.display());
    let hints = dir.join("never.hints");
    let cases: Vec<(Vec<String>, Vec<&str>)> = vec![
        (
            vec!["-w".into(), w.clone(), "-m".into(), "nosuch".into()],
            vec!["nosuch"],
        ),
        (
            vec!["-w".into(), format!("trace:path={}", text.display())],
            vec!["not a splab trace"],
        ),
        (
            vec![
                "-w".into(),
                format!("trace:path={}", dir.join("missing.spt").display()),
            ],
            vec!["missing.spt"],
        ),
        (
            vec!["-w".into(), w.clone(), "--window".into(), "0".into()],
            vec!["--window 0"],
        ),
        (
            vec!["-w".into(), w.clone(), "--window".into(), "lots".into()],
            vec!["--window lots"],
        ),
        (
            vec!["-w".into(), "gups:size=1G".into()],
            vec!["advise reads a recorded trace"],
        ),
        (
            vec!["-w".into(), "trace:file=x.spt".into()],
            vec!["'path' is required"],
        ),
        // The replay's own parameters: not "unknown (valid parameters: path)", which
        // contradicts `splab list workloads`, but why advise does not take them.
        (
            vec!["-w".into(), format!("{w},skip=100")],
            vec!["'skip' is a replay parameter", "takes only path="],
        ),
        (
            vec!["-w".into(), format!("{w},limit=100")],
            vec!["'limit' is a replay parameter"],
        ),
        (
            vec!["-w".into(), format!("{w},heap=recorded")],
            vec!["'heap' is a replay parameter"],
        ),
        (
            vec![
                "-w".into(),
                w.clone(),
                "--window".into(),
                "0".into(),
                "--hints-out".into(),
                hints.display().to_string(),
            ],
            vec!["--window 0"],
        ),
        (
            vec![
                "-w".into(),
                w.clone(),
                "--json".into(),
                dir.join("no/such/dir/a.json").display().to_string(),
            ],
            vec!["--json"],
        ),
        // One file for both outputs: the second rename failed after the analysis (exit 1).
        (
            vec![
                "-w".into(),
                w.clone(),
                "--json".into(),
                hints.display().to_string(),
                "--hints-out".into(),
                hints.display().to_string(),
            ],
            vec!["--json", "--hints-out", "the same file"],
        ),
        // The trace itself as an output: the recording was replaced by the report.
        (
            vec![
                "-w".into(),
                w.clone(),
                "--json".into(),
                w.trim_start_matches("trace:path=").to_string(),
            ],
            vec!["--json", "is a splab trace"],
        ),
    ];
    for (args, needles) in cases {
        let out = splab().arg("advise").args(&args).output().unwrap();
        assert_error_line(&out, 2, &args, &needles);
    }
    assert!(!hints.exists());
    // clap's own usage errors are status 2 too.
    let out = splab()
        .args(["advise", "-w", &w, "--tlb-level", "l3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The brk heap is one region with the `morecore` mappings glibc made when Valgrind refused a
/// brk; when it deserves superpages the hint covers every request below glibc's mmap threshold.
/// A fork's copy of a block is the child's region but no allocation of its own (no hint).
#[test]
fn heap_with_morecore_gets_the_small_sizes_hint() {
    let dir = workdir("heap");
    let spt = dir.join("h.spt");
    let heap = 0x50_0000u64;
    let more = 0x7000_0000u64;
    let mut x: u64 = 3;
    let mut lcg = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x >> 33
    };
    let idx: Vec<u64> = (0..100_000).map(|_| lcg() % (12 << 20)).collect();
    write_trace(&spt, |t| {
        let brk = |end: u64| TraceEvent::Brk {
            pid: Pid(1),
            new_end: Vaddr(end),
        };
        t.write(&brk(heap)).unwrap();
        t.write(&brk(heap + (8 << 20))).unwrap();
        t.write(&TraceEvent::Mmap {
            pid: Pid(1),
            addr: Vaddr(more),
            len: 4 << 20,
            prot: Prot::RW,
            flags: MmapFlags::ANON.union(MmapFlags::MORECORE),
            file: None,
            offset: 0,
        })
        .unwrap();
        // Random over the 8MB brk part and the 4MB morecore part.
        for &i in &idx {
            let va = if i < 8 << 20 {
                heap + i
            } else {
                more + i - (8 << 20)
            };
            t.access(Pid(1), Vaddr(va & !7), AccessKind::Write, 8)
                .unwrap();
        }
        t.write(&TraceEvent::Fork {
            parent: Pid(1),
            child: Pid(2),
        })
        .unwrap();
        for &i in &idx[..50_000] {
            t.access(
                Pid(2),
                Vaddr((heap + i % (8 << 20)) & !7),
                AccessKind::Read,
                8,
            )
            .unwrap();
        }
    });
    let hints = dir.join("h.hints");
    let (v, lines) = advise(&[
        "-w",
        &format!("trace:path={}", spt.display()),
        "-m",
        "core2",
        "--hints-out",
        hints.to_str().unwrap(),
    ]);
    let heaps: Vec<&Value> = v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "heap")
        .collect();
    assert_eq!(heaps.len(), 2, "the parent's heap and the child's copy");
    let (h, child) = (heaps[0], heaps[1]);
    assert_eq!(h["pid"], 1);
    assert_eq!(h["morecore_mappings"], 1);
    assert_eq!(h["size_bytes"], 12 << 20);
    assert_eq!(h["accesses"], 100_000);
    let pages: HashSet<u64> = idx
        .iter()
        .map(|&i| {
            if i < 8 << 20 {
                i / PAGE
            } else {
                (1 << 40) + i / PAGE
            }
        })
        .collect();
    assert_eq!(h["distinct_pages"], pages.len());
    assert_eq!(h["verdict"], "superpages");
    assert_eq!(
        (child["pid"].clone(), child["fork_copy"].clone()),
        (2.into(), true.into())
    );
    assert_eq!(child["verdict"], "superpages");
    // The child's heap is a copy: the hint is the parent's, once.
    assert_eq!(superpage_lines(&lines), vec!["superpages size=0..131048"]);
    assert!(lines
        .iter()
        .any(|l| l.starts_with("# pid 1 0x500000 heap (+1 morecore) 12M")));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A trace cut short is a failed analysis (exit status 1, the reader's message with the byte
/// offset), not bad input, and leaves no output file.
#[test]
fn truncated_trace_exits_1_and_writes_nothing() {
    let dir = workdir("cut");
    let spt = dir.join("full.spt");
    write_trace(&spt, |t| {
        t.write(&anon(0x1000_0000, 1 << 20)).unwrap();
        for i in 0..200_000u64 {
            t.access(
                Pid(1),
                Vaddr(0x1000_0000 + (i * 7919 % (1 << 17)) * 8),
                AccessKind::Read,
                8,
            )
            .unwrap();
        }
    });
    let bytes = std::fs::read(&spt).unwrap();
    let cut = dir.join("cut.spt");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let json = dir.join("a.json");
    let out = splab()
        .args(["advise", "-q", "-w"])
        .arg(format!("trace:path={}", cut.display()))
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert_error_line(
        &out,
        1,
        "advise of a cut trace",
        &["truncated trace at byte offset"],
    );
    assert!(!json.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Seed 004's advice checked in the model (the acceptance): the hints `splab advise`
/// writes for fixtures/hotcold.c, applied by smalloc's LD_PRELOAD mode to the unmodified binary
/// and recorded again, give under `linux-madvise` most of the walk reduction that `linux`
/// (THP always) gives the plain program, at a smaller footprint; without the hints
/// `linux-madvise` gives none.
#[test]
fn advised_hints_give_most_of_thp_always_walk_reduction_at_a_smaller_footprint() {
    let test = "advised_hints_give_most_of_thp_always_walk_reduction_at_a_smaller_footprint";
    if !can_record(test) {
        return;
    }
    let dir = workdir("advice");
    let exe = build_hotcold(&dir);
    let plain = dir.join("plain.spt");
    record(&plain, &[], &exe);
    let hints = dir.join("hints.txt");
    let (_, lines) = advise(&[
        "-w",
        &format!("trace:path={}", plain.display()),
        "-m",
        "skylake",
        "--hints-out",
        hints.to_str().unwrap(),
    ]);
    assert_eq!(superpage_lines(&lines).len(), 1, "{lines:?}");
    // smalloc's preload library (built with cc into a cache of this test's own).
    let out = splab()
        .env("SPLAB_CACHE_DIR", dir.join("cache"))
        .args(["cc", "--print-preload"])
        .output()
        .unwrap();
    assert_success(&out, "cc --print-preload");
    let so = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let advised = dir.join("advised.spt");
    record(
        &advised,
        &[
            "env".into(),
            format!("LD_PRELOAD={so}"),
            format!("SMALLOC_HINTS={}", hints.display()),
        ],
        &exe,
    );
    let replay = |spt: &Path, policy: &str| -> Value {
        let json = dir.join(format!(
            "{}-{policy}.json",
            spt.file_stem().unwrap().to_str().unwrap()
        ));
        let out = splab()
            .args(["run", "-q", "-m", "skylake", "-p", policy, "-w"])
            .arg(format!("trace:path={}", spt.display()))
            .arg("--json")
            .arg(&json)
            .output()
            .unwrap();
        assert_success(&out, (spt, policy));
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
    };
    let walks = |r: &Value| r["tlb"]["walks"].as_f64().unwrap();
    let peak = |r: &Value| r["memory"]["footprint_peak_bytes"].as_u64().unwrap();
    let base = replay(&plain, "linux-4k");
    let always = replay(&plain, "linux");
    let unadvised = replay(&plain, "linux-madvise");
    let hinted = replay(&advised, "linux-madvise");
    let full = walks(&base) - walks(&always);
    assert!(
        full > 1e6,
        "THP always removes the hot buffer's walks: {full}"
    );
    // Without hints nothing is advised: no reduction at all.
    assert_eq!(walks(&unadvised), walks(&base));
    let share = (walks(&base) - walks(&hinted)) / full;
    assert!(
        share >= 0.9,
        "the hinted run keeps {:.1}% of linux's walk reduction ({} -> {} walks, linux {})",
        share * 100.0,
        walks(&base),
        walks(&hinted),
        walks(&always)
    );
    assert!(
        peak(&hinted) < peak(&always),
        "footprint: hinted {} vs linux {}",
        peak(&hinted),
        peak(&always)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
