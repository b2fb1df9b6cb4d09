//! `splab cc`: compiles a C program with seed 004's superpage advisor (the LLVM 19 pass plugin in
//! `llvm/`) and links it with the `smalloc` runtime (`runtime/smalloc/`).
//!
//! The pass's threshold comes from a splab machine: seed 004 section 4's
//! `(entries / associativity + 1) x base page size` (`advise::Threshold`, the same as `splab
//! advise` uses), from the base-page array of the machine's last data-TLB level by default
//! (core2-64's 256-entry 4-way DTLB1: 65 pages), or its first (`--tlb-level l1`). The sources of the pass and of smalloc are built into splab and compiled,
//! on first use, into a cache directory keyed by their hash, so `splab cc` works from any
//! directory; nothing in splab's own build needs LLVM.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use serde_json::Value;
use splab_sim::SimError;

use crate::advise::Threshold;

const PASS_SRC: &str = include_str!("../../../llvm/SuperpageAdvisor.cpp");
const SMALLOC_C: &str = include_str!("../../../runtime/smalloc/smalloc.c");
const SMALLOC_H: &str = include_str!("../../../runtime/smalloc/smalloc.h");

fn bad(msg: String) -> anyhow::Error {
    SimError::BadInput(msg).into()
}

/// A tool of LLVM 19: the environment variable `env` if set, else the first of `names` on PATH
/// or in /usr/lib/llvm-19/bin.
fn tool(env: &str, names: &[&str]) -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(env) {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        return Err(bad(format!(
            "splab cc: {env}={} is not a file",
            p.display()
        )));
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.push(PathBuf::from("/usr/lib/llvm-19/bin"));
    for n in names {
        for d in &dirs {
            let p = d.join(n);
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    Err(bad(format!(
        "splab cc: {} not found: install LLVM 19 (Debian: apt-get install clang-19 llvm-19-dev) or set {env}",
        names[0]
    )))
}

/// The directory of the built pass and runtime.
fn cache_dir() -> Result<PathBuf> {
    cache_dir_for("cc", &[PASS_SRC, SMALLOC_C, SMALLOC_H])
}

/// A directory of splab's cache (SPLAB_CACHE_DIR, else the XDG cache) for what is built from
/// `sources`, named `prefix` and their hash: a new splab with changed sources builds anew.
pub(crate) fn cache_dir_for(prefix: &str, sources: &[&str]) -> Result<PathBuf> {
    let base = if let Some(d) = std::env::var_os("SPLAB_CACHE_DIR") {
        PathBuf::from(d)
    } else if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        PathBuf::from(d).join("splab")
    } else if let Some(h) = std::env::var_os("HOME") {
        PathBuf::from(h).join(".cache").join("splab")
    } else {
        std::env::temp_dir().join("splab-cache")
    };
    // FNV-1a over the sources.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in sources.iter().flat_map(|s| s.bytes()) {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    Ok(base.join(format!("{prefix}-{h:016x}")))
}

pub(crate) fn run(cmd: &mut Command, what: &str) -> Result<()> {
    let out = cmd
        .output()
        .with_context(|| format!("splab cc: cannot run {what} ({:?})", cmd.get_program()))?;
    if !out.status.success() {
        anyhow::bail!(
            "splab cc: {what} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Builds `name` in `dir` with `build` (given a temporary path) unless it is there; the rename
/// makes concurrent builds safe.
pub(crate) fn built(
    dir: &Path,
    name: &str,
    build: impl FnOnce(&Path) -> Result<()>,
) -> Result<PathBuf> {
    let target = dir.join(name);
    if target.is_file() {
        return Ok(target);
    }
    let tmp = dir.join(format!("{name}.tmp{}", unique()));
    build(&tmp)?;
    std::fs::rename(&tmp, &target)
        .with_context(|| format!("splab cc: cannot move {} into place", tmp.display()))?;
    Ok(target)
}

/// A name part no other build of this machine uses at the same time (process and call).
fn unique() -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}-{n}", std::process::id())
}

/// Writes a built-in source into the cache unless it is there; through a temporary file and a
/// rename, so a concurrent `splab cc` never compiles half a file.
pub(crate) fn write_source(path: &Path, text: &str) -> Result<()> {
    if std::fs::read_to_string(path).ok().as_deref() == Some(text) {
        return Ok(());
    }
    let tmp = path.with_extension(format!("tmp{}", unique()));
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .with_context(|| format!("splab cc: cannot write {}", path.display()))
}

/// The built pass plugin and runtime.
pub struct Toolchain {
    pub clang: PathBuf,
    pub plugin: PathBuf,
    pub smalloc_a: PathBuf,
}

/// The runtime alone (no LLVM needed): `libsmalloc.a` and `libsmalloc.so`, built with `cc`
/// (or $CC).
pub fn runtime() -> Result<(PathBuf, PathBuf)> {
    let dir = cache_dir()?;
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("splab cc: cannot create {}", dir.display()))?;
    for (name, text) in [("smalloc.c", SMALLOC_C), ("smalloc.h", SMALLOC_H)] {
        write_source(&dir.join(name), text)?;
    }
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let src = dir.join("smalloc.c");
    let a = built(&dir, "libsmalloc.a", |tmp| {
        let obj = dir.join(format!("smalloc.o.{}", unique()));
        run(
            Command::new(&cc)
                .args(["-std=c11", "-O2", "-fPIC", "-c"])
                .arg(&src)
                .arg("-o")
                .arg(&obj),
            "compiling smalloc",
        )?;
        run(
            Command::new("ar").arg("rcs").arg(tmp).arg(&obj),
            "archiving smalloc",
        )?;
        let _ = std::fs::remove_file(&obj);
        Ok(())
    })?;
    let so = built(&dir, "libsmalloc.so", |tmp| {
        run(
            Command::new(&cc)
                .args(["-std=c11", "-O2", "-fPIC", "-shared", "-DSMALLOC_PRELOAD"])
                .arg(&src)
                .arg("-o")
                .arg(tmp)
                .arg("-lpthread"),
            "building libsmalloc.so",
        )
    })?;
    Ok((a, so))
}

/// Finds LLVM 19 and builds what is not built yet.
pub fn toolchain() -> Result<Toolchain> {
    let clang = tool("SPLAB_CLANG", &["clang-19"])?;
    let clangxx = tool("SPLAB_CLANGXX", &["clang++-19"])?;
    let llvm_config = tool("SPLAB_LLVM_CONFIG", &["llvm-config-19"])?;
    let (smalloc_a, _) = runtime()?;
    let dir = cache_dir()?;
    let flags = |arg: &str| -> Result<Vec<String>> {
        let out = Command::new(&llvm_config)
            .arg(arg)
            .output()
            .with_context(|| format!("splab cc: cannot run {}", llvm_config.display()))?;
        Ok(String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_string)
            .collect())
    };
    let pass_src = dir.join("SuperpageAdvisor.cpp");
    write_source(&pass_src, PASS_SRC)?;
    let plugin = built(&dir, "libSuperpageAdvisor.so", |tmp| {
        eprintln!(
            "splab cc: building the superpage advisor pass (once, into {})",
            dir.display()
        );
        run(
            Command::new(&clangxx)
                .args(flags("--cxxflags")?)
                .args(["-fno-rtti", "-fPIC", "-O2", "-shared"])
                .arg(&pass_src)
                .arg("-o")
                .arg(tmp)
                .args(flags("--ldflags")?),
            "building the pass plugin",
        )
    })?;
    Ok(Toolchain {
        clang,
        plugin,
        smalloc_a,
    })
}

/// What `splab cc` was asked.
pub struct CcArgs {
    pub source: PathBuf,
    pub output: Option<PathBuf>,
    pub threshold: Threshold,
    pub decision: String,
    pub granularity: String,
    pub default_trip: Option<u32>,
    pub report: Option<PathBuf>,
    pub clang_args: Vec<String>,
}

/// Compiles and links; returns the executable and the pass's JSON report.
pub fn compile(a: &CcArgs) -> Result<(PathBuf, Value)> {
    if !a.source.is_file() {
        return Err(bad(format!(
            "splab cc: source '{}' not found",
            a.source.display()
        )));
    }
    let out = match &a.output {
        Some(o) => o.clone(),
        None => a.source.with_extension(""),
    };
    let report = match &a.report {
        Some(r) => r.clone(),
        None => {
            let mut r = out.clone().into_os_string();
            r.push(".superpages.json");
            PathBuf::from(r)
        }
    };
    // Compared as files, not as text: `-o ./prog.c` replaced the source with the executable.
    let source = crate::cli::file_key(&a.source);
    for (what, p) in [("the output", &out), ("the report", &report)] {
        if crate::cli::file_key(p) == source {
            return Err(bad(format!(
                "splab cc: {what} '{}' would overwrite the source '{}': give {}",
                p.display(),
                a.source.display(),
                if what == "the output" {
                    "-o EXE"
                } else {
                    "--report FILE"
                }
            )));
        }
    }
    if crate::cli::file_key(&out) == crate::cli::file_key(&report) {
        return Err(bad(format!(
            "splab cc: -o and --report name one file '{}'",
            out.display()
        )));
    }
    // Paths that cannot be written are bad input before clang runs (they were clang's or the
    // linker's errors, exit status 1).
    for (flag, p) in [("-o", &out), ("--report", &report)] {
        let dir = crate::cli::folder_of(p);
        if p.is_dir() {
            return Err(bad(format!(
                "splab cc: {flag} {}: is a folder, not a file",
                p.display()
            )));
        }
        if !dir.is_dir() {
            return Err(bad(format!(
                "splab cc: {flag} {}: no folder {}",
                p.display(),
                dir.display()
            )));
        }
    }
    let tc = toolchain()?;
    let mut cmd = Command::new(&tc.clang);
    if !a.clang_args.iter().any(|s| s.starts_with("-O")) {
        cmd.arg("-O2");
    }
    // clang 19 parses -mllvm before it loads a -fpass-plugin, so the plugin is loaded with
    // -load too, which registers its options first (llvm/README.md).
    cmd.arg("-gline-tables-only")
        .args(["-Xclang", "-load", "-Xclang"])
        .arg(&tc.plugin)
        .arg(format!("-fpass-plugin={}", tc.plugin.display()));
    let t = &a.threshold;
    let mut opts = vec![
        format!("-superpage-tlb-entries={}", t.entries),
        format!("-superpage-tlb-ways={}", t.ways),
        format!("-superpage-page-size={}", t.base_page),
        format!("-superpage-decision={}", a.decision),
        format!("-superpage-granularity={}", a.granularity),
        format!("-superpage-report={}", report.display()),
    ];
    if let Some(n) = a.default_trip {
        opts.push(format!("-superpage-default-trip={n}"));
    }
    for o in &opts {
        cmd.arg("-mllvm").arg(o);
    }
    cmd.arg(&a.source)
        .args(&a.clang_args)
        .arg("-o")
        .arg(&out)
        .arg(&tc.smalloc_a)
        .arg("-lpthread");
    let status = cmd
        .status()
        .with_context(|| format!("splab cc: cannot run {}", tc.clang.display()))?;
    if !status.success() {
        anyhow::bail!(
            "splab cc: clang failed ({status}) compiling '{}'",
            a.source.display()
        );
    }
    let text = std::fs::read_to_string(&report).with_context(|| {
        format!(
            "splab cc: the pass wrote no report at '{}'",
            report.display()
        )
    })?;
    let v: Value = serde_json::from_str(&text).with_context(|| {
        format!(
            "splab cc: the pass's report '{}' is not JSON",
            report.display()
        )
    })?;
    Ok((out, v))
}

/// The report as a table: each loop nest's spread, the threshold, the decision.
pub fn summary(v: &Value, t: &Threshold) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "threshold {} ({} {}, seed 004 section 4)",
        t.formula(),
        t.machine,
        t.level_name
    );
    let _ = writeln!(
        s,
        "  {:<28} {:>6} {:>14}",
        "loop nest", "line", "spread (pages)"
    );
    if let Some(nests) = v["nests"].as_array() {
        for n in nests {
            let _ = writeln!(
                s,
                "  {:<28} {:>6} {:>14}",
                n["function"].as_str().unwrap_or("?"),
                n["line"]
                    .as_u64()
                    .map(|l| l.to_string())
                    .unwrap_or_else(|| "-".into()),
                fmt_num(&n["spread_pages"]),
            );
        }
    }
    let _ = writeln!(
        s,
        "  spread of the program {} pages {} threshold {} pages: {} (rewrote {} calls)",
        fmt_num(&v["spread_pages_total"]),
        if v["decision"] == "superpages" {
            ">="
        } else {
            "<"
        },
        t.pages,
        v["decision"].as_str().unwrap_or("?"),
        v["rewritten"].as_u64().unwrap_or(0)
    );
    s
}

fn fmt_num(v: &Value) -> String {
    match v.as_f64() {
        Some(x) if x.fract() == 0.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.1}"),
        None => "?".into(),
    }
}
