//! CLI tests: run the binary as a user would.

use assert_cmd::Command;

fn splab() -> Command {
    Command::cargo_bin("splab").unwrap()
}

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
        (
            &["compare", "-p", "base,nope", "-w", "seq"],
            &["'nope'", "base"],
        ),
    ];
    for (args, needles) in cases {
        let out = splab().args(*args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{args:?}: one line expected, got: {err}"
        );
        for n in *needles {
            assert!(err.contains(n), "{args:?}: '{n}' not in: {err}");
        }
        assert!(!err.contains("panicked"), "{args:?}: {err}");
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
    assert_eq!(v["accesses"]["total"], 80_000);
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
            "alpha21264:mem=4M",
            "-w",
            "seq:size=8M,op=write",
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
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let n = std::fs::read_dir(&dir).unwrap().count();
    assert!(n >= 4, "{n} JSON files");
    std::fs::remove_dir_all(&dir).unwrap();
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
        assert!(
            out.status.success(),
            "{mode}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
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
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
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
