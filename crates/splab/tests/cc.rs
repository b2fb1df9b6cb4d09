//! `splab cc`: seed 004's programs compiled with the superpage advisor and linked with smalloc,
//! the threshold from a splab machine, and its errors. Needs LLVM 19 (clang-19, llvm-19-dev):
//! without it the tests say "skipped", unless SPLAB_REQUIRE_LLVM=1 (as .ci/run sets), when
//! they fail.

mod common;
use common::{assert_error_line, assert_success, splab};

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn example(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/seed004")
        .join(name)
        .display()
        .to_string()
}

/// `splab cc` with a cache of its own under the target dir (the pass is built once into it).
fn cc() -> assert_cmd::Command {
    let mut c = splab();
    c.env(
        "SPLAB_CACHE_DIR",
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("splab-cc-cache"),
    );
    c.arg("cc");
    c
}

/// Builds `source` (with `defines`) as `decision`; returns the executable and the pass's report.
fn build(d: &Path, source: &str, tag: &str, decision: &str, defines: &[&str]) -> (PathBuf, Value) {
    let exe = d.join(tag);
    let out = cc()
        .args([
            "-m",
            "core2-64",
            "--superpages",
            decision,
            &example(source),
            "-o",
        ])
        .arg(&exe)
        .arg("--")
        .args(defines)
        .output()
        .unwrap();
    assert_success(&out, (source, decision));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "threshold 65 pages (260K) = (256 entries / 4 ways + 1) x 4K (core2-64 DTLB1"
        ),
        "{stdout}"
    );
    let mut rep = exe.clone().into_os_string();
    rep.push(".superpages.json");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(rep).unwrap()).unwrap();
    (exe, v)
}

/// Runs `exe` with smalloc's exit report; returns (stdout, stderr).
fn run(exe: &Path, args: &[&str]) -> (String, String) {
    let out = Command::new(exe)
        .args(args)
        .env("SMALLOC_REPORT", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{exe:?}: {out:?}");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn transpose_gets_superpages_and_runs_on_smalloc() {
    if !common::llvm_present(&[]) {
        return;
    }
    let d = dir("cc-transpose");
    let (exe, v) = build(&d, "transpose.c", "t150", "auto", &["-DN=150", "-DREPS=2"]);
    assert_eq!(v["decision"], "superpages", "{v}");
    assert_eq!(v["threshold_pages"].as_f64(), Some(65.0), "{v}");
    assert!(v["spread_pages_total"].as_f64().unwrap() >= 65.0, "{v}");
    // The two matrices' mallocs and frees.
    assert_eq!(v["rewritten"].as_u64(), Some(4), "{v}");
    let (stdout, stderr) = run(&exe, &[]);
    assert!(
        stdout.starts_with("transpose N=150 REPS=2 checksum "),
        "{stdout}"
    );
    // Both matrices came from smalloc's superpage heap.
    assert!(
        stderr.contains("smalloc: superpage heap: mapped ") && stderr.contains(" 2 allocations"),
        "{stderr}"
    );

    // Forced base pages: the same program, nothing rewritten, smalloc never linked in, and
    // the same result.
    let (base, v) = build(&d, "transpose.c", "t150b", "base", &["-DN=150", "-DREPS=2"]);
    assert_eq!(v["decision"], "base", "{v}");
    assert_eq!(v["heuristic_decision"], "superpages", "{v}");
    assert_eq!(v["rewritten"].as_u64(), Some(0), "{v}");
    let (stdout_b, stderr_b) = run(&base, &[]);
    assert_eq!(stdout_b, stdout);
    assert!(!stderr_b.contains("smalloc:"), "{stderr_b}");
}

#[test]
fn window_gets_base_pages_and_stride_superpages() {
    if !common::llvm_present(&[]) {
        return;
    }
    let d = dir("cc-window");
    let (exe, v) = build(&d, "window.c", "window", "auto", &[]);
    assert_eq!(v["decision"], "base", "{v}");
    assert_eq!(v["spread_pages_total"].as_f64(), Some(40.0), "{v}");
    let (stdout, stderr) = run(&exe, &["1"]);
    assert!(stdout.starts_with("window MB=1 "), "{stdout}");
    assert!(!stderr.contains("smalloc:"), "{stderr}");
    let (_, v) = build(&d, "stride.c", "stride", "auto", &["-DSIZE_MB=4"]);
    assert_eq!(v["decision"], "superpages", "{v}");
}

#[test]
fn cc_errors_name_what_is_wrong() {
    let d = dir("cc-errors");
    let missing = d.join("nosuch.c").display().to_string();
    let out = cc().arg(&missing).output().unwrap();
    assert_error_line(&out, 2, "missing source", &["nosuch.c", "not found"]);
    let out = cc()
        .args(["-m", "nosuch", &example("window.c")])
        .output()
        .unwrap();
    assert_error_line(&out, 2, "machine", &["nosuch"]);
    let src = d.join("prog.c");
    std::fs::write(&src, "int main(void) { return 0; }\n").unwrap();
    let out = cc().arg(&src).arg("-o").arg(&src).output().unwrap();
    assert_error_line(&out, 2, "overwrite", &["would overwrite the source"]);
    // The same file spelt otherwise: `-o ./prog.c` (compared as text) was compiled, and the
    // executable replaced the source; --report onto the source likewise.
    let dotted = d.join(".").join("prog.c");
    let out = cc().arg(&src).arg("-o").arg(&dotted).output().unwrap();
    assert_error_line(&out, 2, "overwrite ./", &["would overwrite the source"]);
    let out = cc()
        .arg(&src)
        .arg("-o")
        .arg(d.join("prog"))
        .arg("--report")
        .arg(&dotted)
        .output()
        .unwrap();
    assert_error_line(
        &out,
        2,
        "report overwrite",
        &["--report", "would overwrite the source"],
    );
    assert_eq!(
        std::fs::read_to_string(&src).unwrap(),
        "int main(void) { return 0; }\n"
    );
    // Outputs that cannot be written: clang's or the linker's errors, exit status 1, after the
    // compile; bad input now.
    let out = cc()
        .arg(&src)
        .args(["-o", "/no/such/folder/prog"])
        .output()
        .unwrap();
    assert_error_line(
        &out,
        2,
        "no folder",
        &["-o /no/such/folder/prog", "no folder"],
    );
    let out = cc().arg(&src).arg("-o").arg(&d).output().unwrap();
    assert_error_line(&out, 2, "folder", &["-o", "is a folder"]);
    // --default-trip 0 reached the pass, whose error came back through clang: exit status 1
    // ("clang failed") for bad input, after a compile.
    let out = cc()
        .args(["--default-trip", "0"])
        .arg(&src)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--default-trip") && !err.contains("clang"),
        "{err}"
    );
}

/// smalloc's LD_PRELOAD library needs only a C compiler.
#[test]
fn print_preload_builds_libsmalloc() {
    let out = cc().arg("--print-preload").output().unwrap();
    assert_success(&out, "--print-preload");
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(path.ends_with("libsmalloc.so"), "{path}");
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[..4], b"\x7fELF");
}
