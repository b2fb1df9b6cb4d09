//! Machine files (issue 8): `splab machine show NAME` prints a preset as TOML, and
//! `-m file:PATH.toml` runs on it. The acceptance: a preset's file round-trips, giving
//! byte-identical reports to the preset (apart from `sim`, the host's wall time), and a bad
//! file is bad input (exit status 2) with one line naming the file, the line and the key.

mod common;

use std::path::{Path, PathBuf};

use common::{assert_error_line, assert_success, splab};

/// A scratch directory for one test (removed by the test).
fn scratch(tag: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("splab-machine-files-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `splab machine show SPEC`, written to `path`.
fn show_to(spec: &str, path: &Path) {
    let out = splab().args(["machine", "show", spec]).output().unwrap();
    assert_success(&out, ("machine show", spec));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(path, &out.stdout).unwrap();
}

/// The JSON report of a run (`--json -`) without its `sim` section, as text.
fn report(machine: &str, policy: &str, workload: &str) -> String {
    let out = splab()
        .args([
            "run", "-q", "-m", machine, "-p", policy, "-w", workload, "--json", "-",
        ])
        .output()
        .unwrap();
    assert_success(&out, (machine, policy, workload));
    let mut v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is the JSON report");
    let sim = v.as_object_mut().unwrap().remove("sim");
    assert!(sim.is_some(), "the report has its sim section");
    serde_json::to_string_pretty(&v).unwrap()
}

#[test]
fn every_preset_round_trips_through_its_file() {
    let dir = scratch("round-trip");
    let out = splab().args(["list", "machines"]).output().unwrap();
    assert_success(&out, "list machines");
    let presets = ["alpha21264", "pa8000", "core2", "skylake"];
    for name in presets {
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(name),
            "list machines names {name}"
        );
        let file = dir.join(format!("{name}.toml"));
        show_to(name, &file);
        let file_spec = format!("file:{}", file.display());
        for (policy, workload) in [
            ("base", "gups:size=16M,updates=100K"),
            ("navarro", "tree:nodes=5000,ops=2000"),
        ] {
            let a = report(name, policy, workload);
            let b = report(&file_spec, policy, workload);
            assert!(
                a.contains(&format!("\"machine\": \"{name}\"")),
                "the config names the machine: {a}"
            );
            assert_eq!(
                a, b,
                "{name} {policy} {workload}: the file's report differs"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn options_on_a_preset_and_on_a_file() {
    let dir = scratch("options");
    let w = "gups:size=16M,updates=50K";
    // show with options writes them into the file: the same machine, under the file's name.
    let file = dir.join("small.toml");
    show_to("skylake:mem=1G,swap=0", &file);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("mem = \"1G\""), "{text}");
    assert!(text.contains("swap = \"0\""), "{text}");
    let a = report("skylake:mem=1G,swap=0", "base", w);
    let b = report(&format!("file:{}", file.display()), "base", w);
    assert_eq!(
        a.replace(
            "\"machine\": \"skylake:mem=1G,swap=0\"",
            "\"machine\": \"skylake\""
        ),
        b
    );
    // Options after a file's path: the same report as the preset with those options, config
    // included.
    let file = dir.join("s.toml");
    show_to("skylake", &file);
    let b = report(&format!("file:{}:mem=1G,swap=0", file.display()), "base", w);
    assert_eq!(a, b);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_machine_files_are_bad_input_naming_line_and_key() {
    let dir = scratch("bad");
    let good = dir.join("good.toml");
    show_to("core2", &good);
    let text = std::fs::read_to_string(&good).unwrap();
    let line_of = |needle: &str| text[..text.find(needle).unwrap()].matches('\n').count() + 1;
    let cases = [
        (
            "mem = \"2G\"",
            "memory = \"2G\"",
            line_of("mem = \"2G\""),
            "key memory",
            "unknown field `memory`",
        ),
        (
            "entries = 32, ways = 4",
            "entries = 32, ways = 0",
            line_of("entries = 32, ways = 4"),
            "key tlb.l1d.arrays[1].ways",
            "at least 1",
        ),
        (
            "page_sizes = [\"4K\", \"4M\"]",
            "page_sizes = [\"4K\", \"3M\"]",
            line_of("page_sizes"),
            "key page_sizes[1]",
            "3M is not a power of two",
        ),
        (
            "window = 96",
            "window = \"96\"",
            line_of("window = 96"),
            "key core.window",
            "invalid type",
        ),
        // [prefetch] (its keys also appear in its source text, hence the newlines): an unknown key,
        // a value of the wrong type, and values out of range.
        (
            "\ndistance = 8",
            "\nlines_ahead = 8",
            line_of("\ndistance = 8") + 1,
            "key prefetch.lines_ahead",
            "unknown field `lines_ahead`",
        ),
        (
            "\ntrigger = 2",
            "\ntrigger = \"2\"",
            line_of("\ntrigger = 2") + 1,
            "key prefetch.trigger",
            "invalid type",
        ),
        (
            "\ndistance = 8",
            "\ndistance = 0",
            line_of("\ndistance = 8") + 1,
            "key prefetch.distance",
            "at least 1 line",
        ),
        (
            "\ntrigger = 2",
            "\ntrigger = 0",
            line_of("\ntrigger = 2") + 1,
            "key prefetch.trigger",
            "at least 1 miss",
        ),
        (
            "\nstreams = 16",
            "\nstreams = 100000",
            line_of("\nstreams = 16") + 1,
            "key prefetch.streams",
            "must be from 0 to",
        ),
        (
            "\nregion = \"4K\"",
            "\nregion = \"32\"",
            line_of("\nregion = \"4K\"") + 1,
            "key prefetch.region",
            "at least a line",
        ),
    ];
    for (from, to, line, key, what) in cases {
        let path = dir.join("bad.toml");
        std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
        let m = format!("file:{}", path.display());
        let line = format!("line {line}");
        for args in [
            vec!["run", "-m", &m, "-w", "seq:size=1M"],
            vec!["machine", "show", &m],
        ] {
            let out = splab().args(&args).output().unwrap();
            assert_error_line(&out, 2, &args, &["bad.toml", &line, key, what]);
            assert!(out.stdout.is_empty(), "{args:?}");
        }
    }
    // A missing file, a path that is not .toml, an unknown option, an unknown preset.
    let missing = format!("file:{}", dir.join("none.toml").display());
    let out = splab()
        .args(["machine", "show", &missing])
        .output()
        .unwrap();
    assert_error_line(&out, 2, &missing, &["none.toml", "cannot read"]);
    let out = splab()
        .args(["run", "-m", "file:core2", "-w", "seq:size=1M"])
        .output()
        .unwrap();
    assert_error_line(&out, 2, "file:core2", &["file:PATH.toml", ".toml"]);
    let opt = format!("file:{}:ram=1G", good.display());
    let out = splab().args(["machine", "show", &opt]).output().unwrap();
    assert_error_line(&out, 2, &opt, &["'ram'", "mem, swap"]);
    let out = splab().args(["machine", "show", "vax"]).output().unwrap();
    assert_error_line(&out, 2, "vax", &["'vax'", "skylake"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Values the model allocates by, loops over, or adds into 64-bit cycle counts have upper
/// bounds: unbounded, a TLB of 4 billion entries or a 1T cache asked the host for terabytes
/// (an abort), a software walk loading its leaf entry 4 billion times hung at the first TLB
/// miss, and a fault of 2^64 - 1 cycles wrapped the run's cycle count into a plausible report
/// faster than the machine's own. Each is now bad input naming the line and the key.
#[test]
fn huge_values_in_machine_files_are_bad_input_naming_line_and_key() {
    let dir = scratch("huge");
    let cases = [
        (
            "skylake",
            "{ sizes = [\"4K\", \"2M\"], entries = 1536, ways = 12",
            "{ sizes = [\"4K\", \"2M\"], entries = 4000000000, ways = 1",
            "key tlb.lower[0].arrays[0].entries",
            "must be from 1 to 65536",
        ),
        (
            "skylake",
            "\nsize = \"8M\"",
            "\nsize = \"1T\"",
            "key caches.levels[2].size",
            "at most 4G",
        ),
        (
            "skylake",
            "\nfault_cycles = 3850",
            "\nfault_cycles = 18446744073709551615",
            "key cost.fault_cycles",
            "at most 100000000 cycles",
        ),
        (
            "skylake",
            "\nread_latency_ns = 71_000",
            "\nread_latency_ns = 18446744073709551615",
            "key storage.read_latency_ns",
            "at most 1000000000 ns",
        ),
        (
            "skylake",
            "\nfreq_hz = 3_700_000_000",
            "\nfreq_hz = 3700",
            "key freq_hz",
            "from 1000000 (1 MHz)",
        ),
        (
            "skylake:nested=4K",
            "\nntlb_entries = 16",
            "\nntlb_entries = 2147483648",
            "key nested.ntlb_entries",
            "at most 65536",
        ),
        (
            "alpha21264",
            "\npte_refs = 1",
            "\npte_refs = 4000000000",
            "key walk.pte_refs",
            "at most 16 loads",
        ),
    ];
    for (i, (preset, from, to, key, what)) in cases.into_iter().enumerate() {
        let good = dir.join(format!("good-{i}.toml"));
        show_to(preset, &good);
        let text = std::fs::read_to_string(&good).unwrap();
        // A key at the start of a line ("\n" in `from`: not in a source note), or in an array.
        let at = text
            .find(from)
            .unwrap_or_else(|| panic!("{from} not in {preset}'s file"))
            + usize::from(from.starts_with('\n'));
        let line = format!("line {}", text[..at].matches('\n').count() + 1);
        let bad = dir.join(format!("bad-{i}.toml"));
        std::fs::write(&bad, text.replacen(from, to, 1)).unwrap();
        let m = format!("file:{}", bad.display());
        let args = ["run", "-q", "-m", &m, "-w", "gups:size=16M,updates=10K"];
        let out = splab()
            .args(args)
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        assert_error_line(&out, 2, (preset, to), &[&line, key, what]);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
