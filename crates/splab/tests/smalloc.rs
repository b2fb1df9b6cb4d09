//! runtime/smalloc (seed 004 section 3's superpage-aware allocator, for Linux) and
//! runtime/thpreport: built with `cc` into a temporary directory and run through the C
//! programs in runtime/smalloc/tests. Whether a block sits in the superpage or the base heap is
//! read from /proc/self/smaps (VmFlags hg/nh, THPeligible) by those programs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

struct Built {
    dir: PathBuf,
}

impl Built {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn cc(args: &[&str]) {
    let out = Command::new("cc")
        .args(["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror"])
        .args(args)
        .output()
        .expect("running cc (the smalloc tests need a C compiler)");
    assert!(
        out.status.success(),
        "cc {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Build libsmalloc.a, libsmalloc.so, thpreport.so and the test programs once.
fn built() -> &'static Built {
    static B: OnceLock<Built> = OnceLock::new();
    B.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("smalloc-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = repo().join("runtime/smalloc");
        let s = |p: &str| src.join(p).to_str().unwrap().to_string();
        let d = |p: &str| dir.join(p).to_str().unwrap().to_string();
        cc(&["-c", &s("smalloc.c"), "-o", &d("smalloc.o")]);
        let ar = Command::new("ar")
            .args(["rcs", &d("libsmalloc.a"), &d("smalloc.o")])
            .status()
            .expect("running ar");
        assert!(ar.success(), "ar failed");
        cc(&[
            "-fPIC",
            "-shared",
            "-DSMALLOC_PRELOAD",
            &s("smalloc.c"),
            "-o",
            &d("libsmalloc.so"),
            "-pthread",
        ]);
        let thp = repo().join("runtime/thpreport/thpreport.c");
        cc(&[
            "-fPIC",
            "-shared",
            thp.to_str().unwrap(),
            "-o",
            &d("thpreport.so"),
        ]);
        let inc = format!("-I{}", src.display());
        cc(&[
            &inc,
            &s("tests/t_direct.c"),
            &d("libsmalloc.a"),
            "-pthread",
            "-o",
            &d("t_direct"),
        ]);
        cc(&[&s("tests/t_preload.c"), "-o", &d("t_preload")]);
        cc(&[&s("tests/t_freeze.c"), "-o", &d("t_freeze")]);
        Built { dir }
    })
}

/// A command with none of the environment variables smalloc or thpreport read.
fn clean(prog: &Path) -> Command {
    let mut c = Command::new(prog);
    for v in [
        "SMALLOC_MODE",
        "SMALLOC_HINTS",
        "SMALLOC_REPORT",
        "SMALLOC_HUGETLB",
        "SMALLOC_FREEZE_BASE",
        "SPLAB_THP_REPORT",
        "LD_PRELOAD",
    ] {
        c.env_remove(v);
    }
    c
}

fn run(c: &mut Command) -> Output {
    c.output().expect("running a smalloc test program")
}

fn assert_ok(out: &Output, what: &str, needle: &str) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(needle),
        "{what}: status {:?}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

fn write(name: &str, text: &str) -> PathBuf {
    let p = built().path(name);
    std::fs::write(&p, text).unwrap();
    p
}

const HINTS: &str = "# hints for t_preload\n\nsuperpages size=300000..300000\n\
                     superpages size=5000..5000 nth=2   # only the second\n";

/// Linked directly: the superpage heap by default, the base heap under SMALLOC_MODE=base
/// (alignment, zeroing, reuse, srealloc, libc pointers and threads are checked in the C).
#[test]
fn direct_both_modes() {
    let b = built();
    let out = run(clean(&b.path("t_direct")).arg("super"));
    assert_ok(&out, "t_direct super", "t_direct: ok");
    let out = run(clean(&b.path("t_direct"))
        .arg("base")
        .env("SMALLOC_MODE", "base"));
    assert_ok(&out, "t_direct base", "t_direct: ok");
    // the program does notice a wrong heap
    let out = run(clean(&b.path("t_direct")).arg("base"));
    assert!(
        !out.status.success(),
        "t_direct base passed without SMALLOC_MODE=base"
    );
}

/// SMALLOC_HUGETLB=1 either maps hugetlb pages or says it falls back, and works either way.
#[test]
fn hugetlb_or_clean_fallback() {
    let b = built();
    let out = run(clean(&b.path("t_direct"))
        .arg("super")
        .env("SMALLOC_HUGETLB", "1")
        .env("SMALLOC_REPORT", "1"));
    assert_ok(
        &out,
        "t_direct super with SMALLOC_HUGETLB=1",
        "t_direct: ok",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let fell_back =
        err.contains("SMALLOC_HUGETLB=1: mmap(MAP_HUGETLB)") && err.contains("falls back to THP");
    // no fall-back: the superpage heap's regions were MAP_HUGETLB ones
    let sp = err
        .lines()
        .find(|l| l.starts_with("smalloc: superpage heap:"))
        .unwrap_or_else(|| panic!("no report line: {err}"));
    let got_hugetlb = !sp.contains(" in 0 MAP_HUGETLB regions");
    assert!(fell_back || got_hugetlb, "stderr: {err}");
}

/// Preload mode: without hints everything goes to the superpage heap; SMALLOC_MODE=base sends
/// everything to the base heap; with a hints file only the matching requests (and only the
/// nth one) go to the superpage heap, and realloc migrates blocks between the heaps.
#[test]
fn preload_routing() {
    let b = built();
    let so = b.path("libsmalloc.so");
    let hints = write("hints-good.txt", HINTS);
    let out = run(clean(&b.path("t_preload"))
        .arg("all")
        .env("LD_PRELOAD", &so));
    assert_ok(&out, "t_preload all", "t_preload: ok");
    let out = run(clean(&b.path("t_preload"))
        .arg("base")
        .env("LD_PRELOAD", &so)
        .env("SMALLOC_MODE", "base"));
    assert_ok(&out, "t_preload base", "t_preload: ok");
    let out = run(clean(&b.path("t_preload"))
        .arg("hints")
        .env("LD_PRELOAD", &so)
        .env("SMALLOC_HINTS", &hints));
    assert_ok(&out, "t_preload hints", "t_preload: ok");
    // without smalloc, or with a hint too many, the routing checks fail
    let out = run(clean(&b.path("t_preload")).arg("hints"));
    assert!(
        !out.status.success(),
        "t_preload hints passed on glibc malloc"
    );
    let loose = write(
        "hints-loose.txt",
        "superpages size=300000..300000\nsuperpages size=5000..5000\n",
    );
    let out = run(clean(&b.path("t_preload"))
        .arg("hints")
        .env("LD_PRELOAD", &so)
        .env("SMALLOC_HINTS", &loose));
    assert!(
        !out.status.success(),
        "t_preload hints passed with nth= dropped"
    );
}

/// Base heap freezing: after the first superpage-heap allocation the base heap maps no new
/// region, and what it cannot serve migrates to the superpage heap (counted in the report);
/// without SMALLOC_FREEZE_BASE the same program fails its check.
#[test]
fn base_heap_freezing() {
    let b = built();
    let so = b.path("libsmalloc.so");
    let hints = write("hints-freeze.txt", "superpages size=300000..300000\n");
    let out = run(clean(&b.path("t_freeze"))
        .env("LD_PRELOAD", &so)
        .env("SMALLOC_HINTS", &hints)
        .env("SMALLOC_FREEZE_BASE", "1")
        .env("SMALLOC_REPORT", "1"));
    assert_ok(&out, "t_freeze", "t_freeze: ok");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.lines()
            .any(|l| l.starts_with("smalloc: superpage heap:") && l.contains("(1 migrated in)")),
        "{err}"
    );
    let out = run(clean(&b.path("t_freeze"))
        .env("LD_PRELOAD", &so)
        .env("SMALLOC_HINTS", &hints));
    assert!(!out.status.success(), "t_freeze passed without freezing");
}

/// Under Valgrind (which puts its own preload library first), if Valgrind is installed.
#[test]
fn preload_under_valgrind() {
    let b = built();
    if Command::new("valgrind").arg("--version").output().is_err() {
        eprintln!("valgrind not installed: skipping");
        return;
    }
    let hints = write("hints-vg.txt", HINTS);
    let out = run(Command::new("valgrind")
        .args(["-q", "--trace-children=yes", "--tool=none", "env"])
        .arg(format!("LD_PRELOAD={}", b.path("libsmalloc.so").display()))
        .arg(format!("SMALLOC_HINTS={}", hints.display()))
        .arg(b.path("t_preload"))
        .arg("hints"));
    assert_ok(&out, "t_preload hints under valgrind", "t_preload: ok");
}

/// A malformed hints file stops the process at start-up with status 2 and one line naming the
/// file and line; so does a missing file and a bad SMALLOC_MODE.
#[test]
fn malformed_hints_exit_2() {
    let b = built();
    let so = b.path("libsmalloc.so");
    let cases: &[(&str, &str)] = &[
        ("superpages size=10..5", "MIN > MAX"),
        ("superpages size=abc", "bad size"),
        ("superpages size=1..2x", "bad size"),
        ("superpages size=-1..2", "bad size"),
        ("superpage size=1..2", "unknown directive 'superpage'"),
        ("superpages nth=2", "missing size=MIN..MAX"),
        ("superpages size=1..2 nth=0", "bad nth"),
        ("superpages size=1..2 nth=", "bad nth"),
        ("superpages size=1..2 foo=3", "unknown key"),
        ("superpages size=1..2 size=3..4", "size= given twice"),
        ("superpages size=1..2 big", "expected key=value"),
        ("superpages size=1..99999999999999999999999", "bad size"),
    ];
    for (i, (line, needle)) in cases.iter().enumerate() {
        let name = format!("hints-bad-{i}.txt");
        let path = write(
            &name,
            &format!("# comment\n\n{line}\nsuperpages size=1..2\n"),
        );
        let out = run(clean(&b.path("t_preload"))
            .arg("all")
            .env("LD_PRELOAD", &so)
            .env("SMALLOC_HINTS", &path));
        let err = String::from_utf8_lossy(&out.stderr);
        let want = format!("smalloc: {}:3: ", path.display());
        assert_eq!(out.status.code(), Some(2), "{line:?}: stderr {err}");
        assert!(
            err.starts_with(&want) && err.contains(needle) && err.lines().count() == 1,
            "{line:?}: want one line starting {want:?} containing {needle:?}, got {err:?}"
        );
        assert!(out.stdout.is_empty(), "{line:?}: the program ran");
    }
    let out = run(clean(&b.path("t_preload"))
        .arg("all")
        .env("LD_PRELOAD", &so)
        .env("SMALLOC_HINTS", b.path("no-such-hints.txt")));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-hints.txt"));
    let out = run(clean(&b.path("t_direct"))
        .arg("super")
        .env("SMALLOC_MODE", "huge"));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("SMALLOC_MODE=huge"));
}

/// (mapped bytes, regions, AnonHugePages kB) of a report line for `heap`.
fn report_line(text: &str, heap: &str) -> (u64, u64, u64) {
    let prefix = format!("smalloc: {heap} heap: mapped ");
    let line = text
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in {text:?}"));
    let words: Vec<&str> = line[prefix.len()..].split_whitespace().collect();
    // N bytes in R regions, AnonHugePages K kB (from /proc/self/smaps); ...
    assert_eq!((words[1], words[2]), ("bytes", "in"), "{line}");
    assert_eq!(words[4], "regions,", "{line}");
    assert_eq!(words[5], "AnonHugePages", "{line}");
    assert_eq!(words[7], "kB", "{line}");
    let n = |w: &str| {
        w.parse::<u64>()
            .unwrap_or_else(|_| panic!("{w:?} in {line}"))
    };
    (n(words[0]), n(words[3]), n(words[6]))
}

/// SMALLOC_REPORT=1 prints one parsable line per heap; SMALLOC_REPORT=PATH writes them there.
#[test]
fn report_lines() {
    let b = built();
    let so = b.path("libsmalloc.so");
    let hints = write("hints-report.txt", HINTS);
    let out = run(clean(&b.path("t_preload"))
        .arg("hints")
        .env("LD_PRELOAD", &so)
        .env("SMALLOC_HINTS", &hints)
        .env("SMALLOC_REPORT", "1"));
    assert_ok(&out, "t_preload hints with a report", "t_preload: ok");
    let err = String::from_utf8_lossy(&out.stderr);
    let (sm, sr, sk) = report_line(&err, "superpage");
    let (bm, br, bk) = report_line(&err, "base");
    assert!(sm >= 2 << 20 && sm % (2 << 20) == 0 && sr >= 1, "{err}");
    assert!(bm > 0 && br >= 1, "{err}");
    assert_eq!(bk, 0, "the base heap got huge pages: {err}");
    assert!(sk <= sm / 1024, "{err}");
    let path = b.path("report.txt");
    let out = run(clean(&b.path("t_direct"))
        .arg("base")
        .env("SMALLOC_MODE", "base")
        .env("SMALLOC_REPORT", &path));
    assert_ok(&out, "t_direct base with a report file", "t_direct: ok");
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    let (_, _, _) = report_line(&text, "superpage");
    let (bm, _, _) = report_line(&text, "base");
    assert!(bm > 0, "{text}");
}

/// thpreport prints AnonHugePages and Rss for a program on the C library's malloc.
#[test]
fn thpreport_line() {
    let b = built();
    let out = run(clean(&b.path("t_direct"))
        .arg("super")
        .env("LD_PRELOAD", b.path("thpreport.so"))
        .env("SPLAB_THP_REPORT", "1"));
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err
        .lines()
        .find(|l| l.starts_with("thpreport: "))
        .unwrap_or_else(|| panic!("no thpreport line in {err:?}"));
    let w: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(w[1], "AnonHugePages", "{line}");
    assert_eq!(w[3], "kB,", "{line}");
    assert_eq!(w[4], "Rss", "{line}");
    let rss: u64 = w[5].parse().unwrap();
    let ahp: u64 = w[2].parse().unwrap();
    assert!(rss > 0 && ahp <= rss, "{line}");
    let hwm: u64 = err
        .lines()
        .find_map(|l| l.strip_prefix("thpreport: VmHWM "))
        .and_then(|r| r.strip_suffix(" kB"))
        .unwrap_or_else(|| panic!("no VmHWM line in {err:?}"))
        .parse()
        .unwrap();
    assert!(hwm >= rss, "{err}");
    // and nothing without SPLAB_THP_REPORT=1
    assert_ok(&out, "t_direct super with thpreport", "t_direct: ok");
    let out = run(clean(&b.path("t_direct"))
        .arg("super")
        .env("LD_PRELOAD", b.path("thpreport.so")));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("thpreport:"));
}
