//! Helpers the CLI-level tests share: the binary, and the two shapes a command's outcome is
//! checked against (success, or one error line with its exit status).

use assert_cmd::Command;

#[allow(dead_code)]
pub fn splab() -> Command {
    Command::cargo_bin("splab").unwrap()
}

/// The command succeeded; otherwise fail showing `what` and its stderr.
#[allow(dead_code)]
pub fn assert_success(out: &std::process::Output, what: impl std::fmt::Debug) {
    assert!(
        out.status.success(),
        "{what:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The command failed with exit status `code` and one line on stderr containing each of
/// `needles`, without a panic. `what` names the command in failure messages.
#[allow(dead_code)]
pub fn assert_error_line(
    out: &std::process::Output,
    code: i32,
    what: impl std::fmt::Debug,
    needles: &[&str],
) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{what:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{what:?}: {err}");
    for n in needles {
        assert!(err.contains(n), "{what:?}: '{n}' not in: {err}");
    }
    assert!(!err.contains("panicked"), "{what:?}: {err}");
}

#[allow(dead_code)]
/// `cc` and Valgrind with splab's tool are there; otherwise prints why the test is skipped.
pub fn can_record(test: &str) -> bool {
    let ok = |c: &str| {
        std::process::Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let why = if !ok("cc") {
        "no C compiler (cc)"
    } else if !ok("valgrind") {
        "Valgrind is not installed (apt-get install valgrind)"
    } else if !splab_trace::tool_available() {
        "splab's Valgrind tool was not built (Valgrind's headers were missing at build time)"
    } else {
        return true;
    };
    eprintln!("NOTICE: {test} skipped: {why}");
    false
}

/// Whether LLVM 19 (clang-19, clang++-19, llvm-config-19) and the `extra` tools are installed.
/// If not, the test is skipped with a notice, or fails when SPLAB_REQUIRE_LLVM=1 (as .ci/run
/// sets, so CI never skips the pass's tests).
#[allow(dead_code)]
pub fn llvm_present(extra: &[&str]) -> bool {
    let ok = |c: &str| {
        std::process::Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let missing: Vec<&str> = ["clang-19", "clang++-19", "llvm-config-19"]
        .iter()
        .chain(extra)
        .copied()
        .filter(|c| !ok(c))
        .collect();
    if missing.is_empty() {
        return true;
    }
    if std::env::var("SPLAB_REQUIRE_LLVM").as_deref() == Ok("1") {
        panic!(
            "SPLAB_REQUIRE_LLVM=1 but LLVM 19 is not installed: missing {missing:?} \
             (apt-get install llvm-19-dev clang-19)"
        );
    }
    eprintln!("skipped: LLVM 19 not installed (missing {missing:?})");
    false
}
