//! CLI tests: run the binary as a user would.

mod common;
use common::splab;

/// Bad input prints one line naming the bad token (and the valid choices where the set is
/// closed) and exits with status 2; never a panic.
#[test]
fn bad_input_exits_2_with_one_line() {
    let cases: &[(&[&str], &[&str])] = &[
        (&["run", "-m", "vax", "-w", "seq"], &["'vax'", "skylake"]),
        (
            &["run", "-p", "solaris", "-w", "seq"],
            &["'solaris'", "base"],
        ),
        (&["run", "-w", "fft"], &["'fft'", "gups"]),
        (&["run", "-w", "seq:size=12Q"], &["'12Q'", "size"]),
        (&["run", "-w", "seq:size=0"], &["'0'", "size"]),
        (
            &["run", "-w", "seq:op=jump"],
            &["'jump'", "read, write, rw"],
        ),
        (&["run", "-w", "gups:sise=1G"], &["'sise'", "size"]),
        (&["run", "-w", "matrix:n"], &["'n'", "key=value"]),
        (&["run", "-m", "skylake:mem=3G7", "-w", "seq"], &["'3G7'"]),
        (
            &["run", "-m", "alpha21264:mem=6M", "-w", "seq"],
            &["mem=6M"],
        ),
        (&["run", "-w", "seq", "--free", "lots"], &["'lots'"]),
        (&["run", "-w", "seq", "--free", "1T"], &["--free"]),
        // Not a whole number of base pages: the run would get less than asked, and the report's
        // config.free_bytes would say the size asked.
        (
            &["run", "-w", "seq", "--free", "5K"],
            &["--free 5K", "base page", "4K"],
        ),
        (
            &["run", "-m", "alpha21264", "-w", "seq", "--free", "12K"],
            &["--free 12K", "base page", "8K"],
        ),
        (
            &["run", "-w", "seq", "--page-cache", "hot"],
            &["--page-cache", "'hot'", "warm or cold"],
        ),
        (
            &["run", "-p", "base:fault_around=3K", "-w", "seq"],
            &["fault_around", "'3K'"],
        ),
        (
            &["compare", "-p", "base,nope", "-w", "seq"],
            &["'nope'", "base"],
        ),
    ];
    for (args, needles) in cases {
        assert_bad_input(args, needles);
    }
    // A usage error (clap) also exits 2.
    assert_eq!(
        splab().args(["run"]).output().unwrap().status.code(),
        Some(2)
    );
    assert_eq!(
        splab()
            .args(["list", "things"])
            .output()
            .unwrap()
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn run_prints_summary_and_json() {
    let out = splab()
        .args([
            "run",
            "-m",
            "alpha21264",
            "-w",
            "matrix:n=200",
            "--json",
            "-",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is the JSON report");
    assert_eq!(v["schema"], "splab.report.v2");
    // The transpose's 2 n^2 accesses and the n^2 stores that fill the source first.
    assert_eq!(v["accesses"]["total"], 120_000);
    for key in [
        "config",
        "accesses",
        "tlb",
        "faults",
        "pages",
        "reservations",
        "memory",
        "time",
        "series",
        "sim",
    ] {
        assert!(v.get(key).is_some(), "report lacks {key}");
    }
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(summary.contains("page walks"), "{summary}");
}

#[test]
fn compare_and_list() {
    let out = splab()
        .args(["compare", "-p", "base,base", "-w", "seq:size=8M"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("speedup") && s.contains("1.000x"), "{s}");
    for what in ["machines", "policies", "workloads"] {
        let out = splab().args(["list", what]).output().unwrap();
        assert!(
            out.status.success() && !out.stdout.is_empty(),
            "list {what}"
        );
    }
}

/// A run that fails (here: modelled memory runs out) exits with status 1, never a panic.
#[test]
fn runtime_failure_exits_1() {
    let out = splab()
        .args([
            "run",
            "-m",
            "alpha21264:mem=4M,swap=0",
            "-w",
            // Random updates (gups): a scan writing more than memory and swap would be refused
            // before it ran (exit 2).
            "gups:size=8M",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("out of memory"));
}

#[test]
fn demo_writes_json_beside_the_tables() {
    let dir = std::env::temp_dir().join(format!("splab-demo-test-{}", std::process::id()));
    let out = splab()
        .args(["demo", "--out", dir.to_str().unwrap()])
        .output()
        .unwrap();
    common::assert_success(&out, "splab");
    let n = std::fs::read_dir(&dir).unwrap().count();
    assert!(n >= 4, "{n} JSON files");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// One line on stderr naming `needles`, exit status 2, no panic.
fn assert_bad_input(args: &[&str], needles: &[&str]) {
    let out = splab().args(args).output().unwrap();
    common::assert_error_line(&out, 2, args, needles);
}

/// Issue 9: `-p ""` and `-p ,` panicked (index out of bounds in report.rs); `-p base,` and
/// `sizes=64K+64K` were accepted silently.
#[test]
fn issue9_empty_policy_lists_and_repeated_sizes_are_bad_input() {
    for p in ["", ",", "base,", ",base", "base,,navarro"] {
        assert_bad_input(
            &["compare", "-p", p, "-w", "seq:size=1M"],
            &["-p", "empty policy name"],
        );
    }
    assert_bad_input(&["run", "-p", "", "-w", "seq:size=1M"], &["empty policy"]);
    assert_bad_input(
        &[
            "run",
            "-m",
            "alpha21264",
            "-p",
            "navarro:sizes=64K+64K",
            "-w",
            "seq:size=1M",
        ],
        &["64K", "twice"],
    );
}

/// `gups:size=16M,,updates=1000` ran as if the empty piece were not there (and `, ,` was an
/// error): an empty parameter is a typo, as an empty policy in `-p base,,navarro` is.
#[test]
fn empty_parameters_are_bad_input() {
    for w in [
        "gups:size=16M,,updates=1000",
        "gups:size=16M,",
        "gups:,size=16M",
    ] {
        assert_bad_input(&["run", "-w", w], &["workload 'gups'", "empty parameter"]);
    }
    assert_bad_input(
        &["run", "-m", "skylake:mem=1G,", "-w", "seq:size=1M"],
        &["machine 'skylake'", "empty parameter"],
    );
    assert_bad_input(
        &[
            "run",
            "-p",
            "navarro:sizes=2M,,promote=no",
            "-w",
            "seq:size=1M",
        ],
        &["empty"],
    );
    // An empty value is not a file name: say so, not "cannot open : No such file".
    assert_bad_input(
        &["run", "-w", "trace:path="],
        &["workload 'trace'", "path= is empty"],
    );
    // A swap area is whole base pages; swap=1 (one byte) used to run as if it were swap.
    assert_bad_input(
        &["run", "-m", "skylake:swap=1", "-w", "seq:size=1M"],
        &["machine 'skylake'", "swap=1", "base pages"],
    );
}

/// Issue 9: `--help` said sizes take K/M/G; the README (and the parser) say K/M/G/T, binary,
/// and counts K/M/G, decimal. Both now say the same, and both list the exit statuses.
#[test]
fn issue9_help_and_readme_agree_on_suffixes_and_exit_statuses() {
    let out = splab().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let readme = include_str!("../../../README.md");
    for needle in ["K/M/G/T", "binary", "K/M/G, decimal"] {
        assert!(help.contains(needle), "--help lacks '{needle}': {help}");
    }
    assert!(readme.contains("sizes accept K/M/G/T (binary)"));
    assert!(
        readme.contains("counts K/M/G\n(decimal)") || readme.contains("counts K/M/G (decimal)")
    );
    assert!(help.contains("Exit status"), "{help}");
    assert!(readme.contains("## Exit status"));
}

/// Issue 9: pa8000's one unified TLB is labelled "TLB", not "TLB TLB".
#[test]
fn issue9_pa8000_tlb_label_is_not_doubled() {
    let out = splab()
        .args(["run", "-m", "pa8000", "-w", "seq:size=1M"])
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{s}");
    assert!(!s.contains("TLB TLB"), "{s}");
    assert!(
        s.lines()
            .any(|l| l.trim_start().starts_with("TLB ") && l.contains("hits")),
        "{s}"
    );
}

/// Issue 9: `--json` and `--csv` paths that cannot be written are bad input, reported before
/// the run (here a run that would take minutes: the error must come at once).
#[test]
fn issue9_output_paths_are_checked_before_the_run() {
    let dir = std::env::temp_dir().join(format!("splab-cli-out-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let long = "gups:size=1G,updates=1G";
    let start = std::time::Instant::now();
    assert_bad_input(
        &["run", "-w", long, "--json", "/no/such/folder/r.json"],
        &["--json", "/no/such/folder/r.json"],
    );
    assert_bad_input(
        &["run", "-w", long, "--json", dir.to_str().unwrap()],
        &["--json", "folder"],
    );
    assert_bad_input(
        &[
            "compare",
            "-p",
            "base",
            "-w",
            long,
            "--csv",
            "/no/such/folder/c.csv",
        ],
        &["--csv"],
    );
    assert!(start.elapsed().as_secs() < 20, "{:?}", start.elapsed());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 9: a run that fails leaves no `--json` file (and no temporary file), and keeps the
/// file that was there; a run that succeeds replaces it whole.
#[test]
fn issue9_json_output_is_atomic() {
    let dir = std::env::temp_dir().join(format!("splab-cli-atomic-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("r.json");
    std::fs::write(&json, "previous").unwrap();
    let out = splab()
        .args([
            "run",
            "-m",
            "alpha21264:mem=4M,swap=0",
            "-w",
            // Random updates (gups): a scan writing more than memory and swap would be refused
            // before it ran (exit 2).
            "gups:size=8M",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&json).unwrap(), "previous");
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        1,
        "a temporary file was left"
    );
    let out = splab()
        .args(["run", "-w", "seq:size=1M", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["accesses"]["total"], 131_072);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 9: `compare --csv`: a header and one row per policy, every field but the policy a
/// number (report.rs's unit test covers the quoting of a spec with a comma).
#[test]
fn issue9_compare_writes_csv() {
    let out = splab()
        .args([
            "compare",
            "-m",
            "alpha21264",
            "-p",
            "base,navarro:sizes=64K+4M",
            "-w",
            "seq:size=8M",
            "--csv",
            "-",
        ])
        .output()
        .unwrap();
    common::assert_success(&out, "splab");
    let csv = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 3, "{csv}");
    assert!(lines[0].starts_with("policy,est_time_s,speedup,"), "{csv}");
    assert!(lines[1].starts_with("base,"), "{csv}");
    assert!(lines[2].starts_with("navarro:sizes=64K+4M,"), "{csv}");
    let ncols = lines[0].split(',').count();
    for l in &lines[1..] {
        let fields: Vec<&str> = l.rsplitn(ncols, ',').collect();
        assert_eq!(fields.len(), ncols, "{l}");
        for f in &fields[..ncols - 1] {
            assert!(f.parse::<f64>().is_ok(), "'{f}' in {l}");
        }
    }
    // The table went to stderr, since stdout has the CSV.
    assert!(String::from_utf8_lossy(&out.stderr).contains("speedup"));
    // Both on stdout is refused.
    assert_bad_input(
        &[
            "compare",
            "-p",
            "base",
            "-w",
            "seq:size=1M",
            "--csv",
            "-",
            "--json",
            "-",
        ],
        &["standard output"],
    );
}

/// `--check` takes an optional mode: incremental (the default) or full; anything else is bad
/// input naming the flag and the valid modes.
#[test]
fn check_modes() {
    for mode in ["--check", "--check=incremental", "--check=full"] {
        let out = splab()
            .args([
                "run",
                "-m",
                "skylake:mem=1G",
                "-w",
                "seq:size=1M,op=rw",
                "-q",
                mode,
            ])
            .output()
            .unwrap();
        common::assert_success(&out, mode);
    }
    let out = splab()
        .args(["run", "-w", "seq:size=1M", "--check=bogus"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    for n in ["--check=bogus", "'bogus'", "incremental", "full"] {
        assert!(err.contains(n), "'{n}' not in: {err}");
    }
}

/// `compare` runs its policies in parallel; the output must not depend on it. Only each
/// report's `sim` section (wall time) may differ, so it is removed before comparing bytes.
#[test]
fn compare_in_parallel_gives_the_sequential_output() {
    let run = |jobs: &str, json: bool| {
        let mut args = vec![
            "compare",
            "-m",
            "alpha21264",
            "-p",
            "base,navarro,freebsd",
            "-w",
            "tree:ops=300",
            "--jobs",
            jobs,
            "-q",
        ];
        if json {
            args.extend(["--json", "-"]);
        }
        let out = splab().args(&args).output().unwrap();
        common::assert_success(&out, "splab");
        out.stdout
    };
    let strip = |bytes: Vec<u8>| {
        let mut v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        for r in v["reports"].as_array_mut().unwrap() {
            r.as_object_mut()
                .unwrap()
                .remove("sim")
                .expect("a sim section");
        }
        serde_json::to_string_pretty(&v).unwrap()
    };
    let seq = strip(run("1", true));
    let par = strip(run("3", true));
    assert!(seq.contains("\"navarro"), "{seq}");
    assert_eq!(seq, par, "--jobs 3 and --jobs 1 differ");
    assert_eq!(run("1", false), run("3", false), "the tables differ");
    let out = splab()
        .args(["compare", "-p", "base", "-w", "seq:size=1M", "--jobs", "0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--jobs 0"), "{err}");
}

/// Issue 9: windows that would record nothing are bad input (status 2) with a message that
/// says why, before anything runs.
#[test]
fn issue9_record_max_accesses_0_is_refused() {
    let out = std::env::temp_dir().join(format!("splab-cli-max0-{}.spt", std::process::id()));
    let a = splab()
        .args(["record", "--max-accesses", "0", "-o"])
        .arg(&out)
        .args(["--", "true"])
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(err.contains("--max-accesses 0"), "{err}");
    assert!(!out.exists(), "no trace written");
}

/// Issue 9: a replay window that skips past the trace's end is bad input (status 2).
#[test]
fn issue9_replay_skip_beyond_the_trace_is_refused() {
    let dir = std::env::temp_dir().join(format!("splab-cli-skip-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.spt");
    let h = splab_trace::TraceHeader {
        page_size_hint: 4096,
        source: "test".into(),
        command: "synthetic".into(),
        processes: Vec::new(),
    };
    let mut w =
        splab_trace::TraceWriter::new(std::fs::File::create(&path).unwrap(), &h, 3).unwrap();
    let p = splab_trace::Pid(1);
    w.write(&splab_trace::TraceEvent::Mmap {
        pid: p,
        addr: splab_trace::Vaddr(0x7000_0000),
        len: 1 << 16,
        prot: splab_trace::Prot::RW,
        flags: splab_trace::MmapFlags::ANON,
        file: None,
        offset: 0,
    })
    .unwrap();
    w.access_run(
        p,
        splab_trace::Vaddr(0x7000_0000),
        splab_trace::AccessKind::Read,
        8,
        8,
        100,
    )
    .unwrap();
    w.finish().unwrap();
    let a = splab()
        .args(["run", "-m", "skylake", "-w"])
        .arg(format!("trace:path={},skip=100", path.display()))
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(
        err.contains("skip=100 is beyond the trace's 100 accesses"),
        "{err}"
    );
    splab()
        .args(["run", "-m", "skylake", "-w"])
        .arg(format!("trace:path={},skip=99,limit=1", path.display()))
        .assert()
        .success();
    let _ = std::fs::remove_dir_all(dir);
}

/// issue 11: `--frag` levels outside 0..=100, a workload memory that is missing, too small or
/// larger than the machine, `--frag-mem` alone, and an unknown `--baseline` are bad input,
/// each naming its option; a good `--frag` compare says its level and baseline.
#[test]
fn issue11_frag_and_baseline_errors_name_the_option() {
    let run = "run -m skylake:mem=1G -w";
    for (extra, needles) in [
        ("--frag 101", &["--frag 101", "0 to 100"][..]),
        ("--frag=-5", &["--frag -5", "0 to 100"]),
        ("--frag half", &["--frag half", "0 to 100"]),
        ("--frag 50 --frag-mem 1M", &["--frag-mem 1M", "2M"]),
        ("--frag 50 --frag-mem 4G", &["--frag-mem 4G", "1G"]),
        ("--frag 50 --frag-mem lots", &["--frag-mem", "'lots'"]),
        ("--frag-mem 8M", &["--frag-mem", "only with --frag"]),
        (
            "-w seq:size=8M --frag 50",
            &["--frag 50", "--frag-mem SIZE"],
        ),
    ] {
        let w = if extra.starts_with("-w") {
            ""
        } else {
            "gups:size=8M,updates=10K "
        };
        let args = format!("{run} {w}{}", extra.trim_start_matches("-w "));
        assert_bad_input(&args.split(' ').collect::<Vec<_>>(), needles);
    }
    let cmp = "compare -q -m skylake:mem=1G -p base,linux -w gups:size=8M,updates=10K";
    let args = format!("{cmp} --baseline freebsd");
    assert_bad_input(
        &args.split(' ').collect::<Vec<_>>(),
        &["--baseline freebsd", "base, linux"],
    );
    let out = splab()
        .args(format!("{cmp} --baseline linux --frag 100").split(' '))
        .output()
        .unwrap();
    common::assert_success(&out, "compare --frag 100");
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("(baseline linux, frag-100)") && s.contains("p95 fault"),
        "{s}"
    );
}

/// `compare --dump-reservations` prints each policy's reservation lists after the table, as
/// `run --dump-reservations` prints its one (it used to be accepted and print nothing).
#[test]
fn compare_dumps_each_policys_reservations() {
    let out = splab()
        .args([
            "compare",
            "-q",
            "-m",
            "alpha21264",
            "-p",
            "base,navarro",
            "-w",
            "matrix:n=100",
            "--dump-reservations",
        ])
        .output()
        .unwrap();
    common::assert_success(&out, "compare --dump-reservations");
    let s = String::from_utf8_lossy(&out.stdout);
    let table = s.find("speedup").expect("the table");
    let base = s.find("reservations of base:").expect(&s);
    let nav = s.find("reservations of navarro:").expect(&s);
    assert!(table < base && base < nav, "{s}");
    assert!(s[base..nav].contains("this policy does not reserve"), "{s}");
    assert!(s[nav..].contains("8K list:"), "{s}");
}

/// `-m`'s help names every machine parameter the parser takes: an unknown one's error lists
/// them (mem, swap, nested), and `run --help` and `compare --help` give the same list.
#[test]
fn machine_help_names_every_machine_parameter() {
    let out = splab()
        .args(["run", "-m", "skylake:bogus=1", "-w", "seq:size=8M"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let valid = err
        .split("valid parameters: ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .unwrap_or_else(|| panic!("no list of valid parameters: {err}"));
    let params: Vec<&str> = valid.split(", ").collect();
    assert!(params.contains(&"nested"), "{err}");
    for cmd in ["run", "compare"] {
        let out = splab().args([cmd, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        let m = help
            .lines()
            .find(|l| l.contains("--machine <MACHINE>"))
            .unwrap_or_else(|| panic!("{cmd} --help has no --machine: {help}"));
        for p in &params {
            assert!(m.contains(&format!("{p}=SIZE")), "{cmd} --help: {p}: {m}");
        }
    }
}

/// `--frag` without `--frag-mem` takes the workload's declared memory; when that is too small
/// the error names where it came from, not a `--frag-mem 1M` the user never gave.
#[test]
fn frag_errors_name_the_workloads_memory_when_no_frag_mem_was_given() {
    let out = splab()
        .args([
            "run",
            "-m",
            "skylake:mem=1G",
            "-w",
            "gups:size=1M,updates=10",
            "--frag",
            "50",
        ])
        .output()
        .unwrap();
    common::assert_error_line(&out, 2, "frag", &["--frag 50", "gups:size=1M", "2M block"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("--frag-mem 1M"), "{err}");
    // With --frag-mem, the error names it.
    let out = splab()
        .args([
            "run",
            "-m",
            "skylake:mem=1G",
            "-w",
            "gups:size=8M,updates=10",
            "--frag",
            "50",
            "--frag-mem",
            "1M",
        ])
        .output()
        .unwrap();
    common::assert_error_line(&out, 2, "frag-mem", &["--frag-mem 1M", "2M block"]);
}

/// Two output flags naming one file (`--json r --csv r`) ran the whole comparison, then failed
/// (exit status 1) renaming the second temporary file, the first output silently replaced; an
/// output naming an existing splab trace (typically the one replayed, `-w trace:path=t.spt
/// --json t.spt`) replaced the recording with the report. Both are bad input, before the run.
#[test]
fn outputs_naming_one_file_or_a_trace_are_bad_input() {
    let dir = std::env::temp_dir().join(format!("splab-cli-same-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let r = dir.join("r.json").display().to_string();
    let r2 = format!("{}/./r.json", dir.display());
    let long = "gups:size=1G,updates=1G";
    let start = std::time::Instant::now();
    assert_bad_input(
        &[
            "compare",
            "-p",
            "base,navarro",
            "-w",
            long,
            "--json",
            &r,
            "--csv",
            &r2,
        ],
        &["--json", "--csv", "the same file"],
    );
    assert!(start.elapsed().as_secs() < 20, "{:?}", start.elapsed());
    assert!(!std::path::Path::new(&r).exists());

    let trace = dir.join("t.spt");
    let bytes = b"SPLTRACE and the rest of a recording".to_vec();
    std::fs::write(&trace, &bytes).unwrap();
    let t = trace.display().to_string();
    assert_bad_input(
        &["run", "-w", "seq:size=1M", "--json", &t],
        &["--json", "t.spt", "is a splab trace"],
    );
    assert_bad_input(
        &["compare", "-p", "base", "-w", "seq:size=1M", "--csv", &t],
        &["--csv", "is a splab trace"],
    );
    assert_eq!(std::fs::read(&trace).unwrap(), bytes);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `demo --out FILE` (a file, not a folder) was exit status 1, "creating FILE: File exists".
#[test]
fn demo_out_naming_a_file_is_bad_input() {
    let f = std::env::temp_dir().join(format!("splab-demo-file-{}", std::process::id()));
    std::fs::write(&f, "x").unwrap();
    assert_bad_input(
        &["demo", "--out", f.to_str().unwrap()],
        &["--out", "is a file, not a folder"],
    );
    std::fs::remove_file(&f).unwrap();
}

/// `record -o F` where the recorded command names F (its input, or the program): the trace
/// was renamed over it when the program ended. Refused before Valgrind runs.
#[test]
fn record_output_named_by_the_command_is_bad_input() {
    let dir = std::env::temp_dir().join(format!("splab-cli-recsame-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("in.txt");
    std::fs::write(&input, "3\n1\n2\n").unwrap();
    let spelt = format!("{}/./in.txt", dir.display());
    assert_bad_input(
        &[
            "record",
            "-o",
            &spelt,
            "--",
            "sort",
            input.to_str().unwrap(),
        ],
        &["-o", "a file argument of the recorded command"],
    );
    assert_eq!(std::fs::read_to_string(&input).unwrap(), "3\n1\n2\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--json /dev/stdout` into a pipe (`| jq`): the report comes out on the pipe and the run
/// ends. The output check opened the path to read a trace's magic, which on a pipe waited for a
/// writer that never came; and the atomic write renamed its temporary file over the path, which
/// as root replaced /dev/stdout (or /dev/null) with a regular file (crates/splab-trace
/// atomic.rs now writes such paths in place).
#[test]
fn json_to_dev_stdout_through_a_pipe_ends_and_writes_the_report() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let mut child = Command::new(env!("CARGO_BIN_EXE_splab"))
        .args([
            "run",
            "-q",
            "-m",
            "skylake",
            "-w",
            "seq:size=1M",
            "--json",
            "/dev/stdout",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("splab starts");
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).unwrap();
        s
    });
    let t = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("splab run --json /dev/stdout did not end in 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    let text = reader.join().unwrap();
    assert!(text.contains("\"schema\": \"splab.report.v2\""), "{text}");
}

/// khugepaged's longest sleep (`scan_sleep_millisecs`, up to 2^32 ms) on a machine faster
/// than 4.29 GHz is more cycles than 64 bits hold: ms x freq_hz overflowed (a panic in a
/// debug build; in a release build the sleep wrapped to about a millisecond, so khugepaged
/// woke every millisecond instead of once in 43 days, and the run took minutes). Now the
/// sleep saturates: khugepaged never wakes in the run.
#[test]
fn a_long_khugepaged_sleep_on_a_fast_clock_does_not_overflow() {
    let dir = std::env::temp_dir().join(format!("splab-cli-sleep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = splab()
        .args(["machine", "show", "skylake"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("\nfreq_hz = 3_700_000_000\n"));
    let file = dir.join("fast.toml");
    std::fs::write(
        &file,
        text.replace("\nfreq_hz = 3_700_000_000\n", "\nfreq_hz = 5_000_000_000\n"),
    )
    .unwrap();
    let m = format!("file:{}", file.display());
    // 3689348815 ms x 5e9 Hz is 2^64 + 1.3e9: wrapped, 1.3 million cycles.
    let out = splab()
        .args([
            "run",
            "-q",
            "-m",
            &m,
            "-p",
            "linux:scan_sleep_millisecs=3689348815",
            "-w",
            "gups:size=16M,updates=20K",
            "--json",
            "-",
        ])
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let thp = &r["memory"]["thp"];
    assert_eq!(thp["full_scans"], 0, "{thp}");
    assert_eq!(thp["pages_scanned"], 0, "{thp}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--frag` on a machine whose address space cannot hold the fragmenter's region (core2: 32
/// bits for 2G of memory) is a configuration that cannot be run, said as such (exit 2); it was
/// "out of memory: mmap: no 0x80000000-byte gap left in the address space of pid 1", exit 1,
/// as if the run had failed.
#[test]
fn frag_on_a_32_bit_machine_is_bad_input() {
    for pct in ["0", "50", "100"] {
        let args = [
            "run",
            "-q",
            "-m",
            "core2",
            "-w",
            "gups:size=16M,updates=1K",
            "--frag",
            pct,
        ];
        let out = splab().args(args).output().unwrap();
        common::assert_error_line(&out, 2, args, &["--frag", "core2", "32-bit address space"]);
    }
}

/// `kv:objects=268435456,size=1` fits skylake's 32GB of modelled memory, but its keys' records
/// (56 bytes a key: workload/kv.rs) need 14 GiB of the host's: over half a host of less than 28
/// GiB, it is refused at once naming `objects`, instead of thrashing or being OOM-killed.
#[test]
fn kv_records_over_half_the_host_memory_are_bad_input() {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            let l = t.lines().find(|l| l.starts_with("MemTotal:"))?.to_string();
            l["MemTotal:".len()..]
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map(|kb| kb << 10);
    match total {
        Some(t) if t / 2 < 56 << 28 => assert_bad_input(
            &[
                "run",
                "-m",
                "skylake",
                "-p",
                "base",
                "-w",
                "kv:objects=268435456,size=1",
            ],
            &[
                "workload 'kv'",
                "'268435456' for 'objects'",
                "14.00 GiB of host memory",
                "half the host's",
            ],
        ),
        _ => eprintln!(
            "note: kv host-memory refusal not tried: this host's memory ({total:?} bytes) would hold the run"
        ),
    }
}

/// `swap=` takes the machine file's forms: `3x` (three times the memory, following `mem=`) as
/// well as a size; a bad form is bad input naming both.
#[test]
fn swap_option_takes_a_multiple_of_the_memory() {
    let out = splab()
        .args([
            "run",
            "-m",
            "skylake:mem=1G,swap=3x",
            "-p",
            "base",
            "-w",
            "seq:size=1M",
            "--json",
            "-",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let json = String::from_utf8_lossy(&out.stdout);
    assert!(json.contains("\"swap_bytes\": 3221225472"), "{json}");
    assert_bad_input(
        &["run", "-m", "skylake:swap=3y", "-w", "seq:size=1M"],
        &["machine 'skylake'", "'3y' for 'swap'", "\"2x\""],
    );
    assert_bad_input(
        &["run", "-m", "skylake:mem=1T,swap=5x", "-w", "seq:size=1M"],
        &["machine 'skylake'", "swap=5x", "more than 4T of swap"],
    );
}

/// A workload that writes more anonymous memory than the machine's memory and swap hold is
/// refused before it runs (it could only run out of memory, minutes later on a large machine),
/// by what it writes, not by its size: a sparse scan or a read-only one far beyond memory runs.
#[test]
fn writes_beyond_memory_and_swap_are_refused_up_front() {
    for (w, size) in [
        ("seq:size=8G,op=write", "8.00 GiB"),
        ("stride:size=16G,stride=2K,op=rw", "16.00 GiB"),
        ("matrix:n=20000", "5.96 GiB"),
    ] {
        assert_bad_input(
            &["run", "-m", "skylake:mem=1G", "-p", "base", "-w", w],
            &[
                &format!("workload '{}", w.split(':').next().unwrap()),
                &format!("writes {size}"),
                "1.00 GiB + 2.00 GiB = 3.00 GiB",
                "-m skylake:mem=SIZE,swap=SIZE",
            ],
        );
    }
    for w in [
        "sparse:size=64G,step=1M",
        "seq:size=8G,elem=4K",
        "gups:size=8G,updates=1000",
    ] {
        let out = splab()
            .args(["run", "-m", "skylake:mem=1G,swap=0", "-p", "base", "-w", w])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{w}: {out:?}");
    }
}
