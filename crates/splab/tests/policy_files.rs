//! Policies as data (issue 11): `splab policy show P > p.toml` then `-p file:p.toml` gives the
//! report of `-p P`, byte for byte outside `sim` (the host's wall time), for every preset and
//! option; bad policy files are bad input (exit status 2) with one line naming the key.

mod common;
use common::{assert_error_line, assert_success, splab};

use std::path::PathBuf;

/// A scratch directory of this test process, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("splab-policy-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn path(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Small memory so that the page daemon works; a matrix transpose (promotion), a shared file
/// mapping written and msync'ed (dirty superpages) and a strided write scan twice the memory
/// (paging, contiguity restoration).
const MACHINE: &str = "alpha21264:mem=32M";
const WORKLOAD: &str =
    "seq(matrix:n=300,filedirty:size=8M,every=64,stride:size=40M,stride=8K,op=write,passes=2)";

/// `splab policy show SPEC`, written to `path`.
fn show(spec: &str, path: &str) -> String {
    let out = splab().args(["policy", "show", spec]).output().unwrap();
    assert_success(&out, ("policy show", spec));
    let text = String::from_utf8(out.stdout).unwrap();
    std::fs::write(path, &text).unwrap();
    text
}

/// The JSON report of a run, without `sim`.
fn report(machine: &str, policy: &str, workload: &str) -> serde_json::Value {
    let out = splab()
        .args([
            "run", "-q", "-m", machine, "-p", policy, "-w", workload, "--json", "-",
        ])
        .output()
        .unwrap();
    assert_success(&out, ("run", policy));
    let mut v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    v.as_object_mut()
        .unwrap()
        .remove("sim")
        .expect("a sim section");
    v
}

#[test]
fn every_preset_from_its_file_gives_the_same_report() {
    let dir = Dir::new("roundtrip");
    let specs = [
        "base",
        "navarro",
        "freebsd",
        "navarro:sizes=64K+4M",
        "navarro:promote=overhead",
        "freebsd:promote=no",
        "navarro:contiguity=cache",
        "navarro:wired=clustered",
        "navarro:dirty=whole",
        "navarro:dirty=hash",
        "freebsd:dirty=hash,contiguity=daemon",
        "base:prefault=4+4,readahead=off",
        "navarro:pagedaemon=off,fault_around=off",
        "linux",
        "linux-madvise",
        "linux-4k",
        "linux-4.3",
        "linux:max_ptes_none=0,scan_sleep_millisecs=100,enabled=madvise",
        "hpux",
        "hpux:hint=4M",
        "hpux:vps_ceiling=4M",
        "quicksilver",
        "quicksilver:t=1",
        "quicksilver:prep=async,t=256,relaxed_mapping=off",
        "navarro:prep=sync,t=8",
    ];
    // Every preset is here: the header row of `list policies` names them all.
    let out = splab().args(["list", "policies"]).output().unwrap();
    let list = String::from_utf8_lossy(&out.stdout);
    let header = list
        .lines()
        .find(|l| l.starts_with(' ') && !l.trim().is_empty())
        .expect("the table's header row");
    for preset in header.split_whitespace() {
        assert!(specs.contains(&preset), "preset {preset} not round-tripped");
    }
    for (i, spec) in specs.iter().enumerate() {
        let file = dir.path(&format!("p{i}.toml"));
        show(spec, &file);
        let (machine, workload) = if spec.contains("pagedaemon=off") {
            // Without the daemon memory must suffice.
            ("alpha21264", "matrix:n=300")
        } else {
            (MACHINE, WORKLOAD)
        };
        let want = report(machine, spec, workload);
        let got = report(machine, &format!("file:{file}"), workload);
        assert_eq!(
            got["config"]["policy"], *spec,
            "named after the file's name key"
        );
        // The whole report, the config section included.
        assert!(
            got == want,
            "{spec}: the file's report differs from the preset's"
        );
    }
}

/// Parameters on top of a file work as on a preset, and the report calls the policy as it
/// would the preset with those parameters.
#[test]
fn parameters_on_a_file_and_files_in_compare() {
    let dir = Dir::new("params");
    let file = dir.path("navarro.toml");
    show("navarro", &file);
    let w = "matrix:n=300";
    let want = report("alpha21264", "navarro:promote=no,dirty=hash", w);
    let got = report(
        "alpha21264",
        &format!("file:{file}:promote=no,dirty=hash"),
        w,
    );
    assert_eq!(got["config"]["policy"], "navarro:promote=no,dirty=hash");
    assert!(got == want, "parameters on a file differ from the preset's");
    // A file's shown form keeps its parameters.
    let shown = show(&format!("file:{file}:promote=no"), &dir.path("again.toml"));
    assert!(
        shown.contains("name = \"navarro:promote=no\"") && shown.contains("promote = \"no\""),
        "{shown}"
    );
    // compare: files beside presets, and a parameter after a file's continues it.
    let out = splab()
        .args([
            "compare",
            "-m",
            "alpha21264",
            "-p",
            &format!("base,file:{file}:promote=no,wired=clustered,navarro"),
            "-w",
            w,
            "--csv",
            "-",
        ])
        .output()
        .unwrap();
    assert_success(&out, "compare with a file");
    let csv = String::from_utf8_lossy(&out.stdout);
    let policies: Vec<&str> = csv
        .lines()
        .filter_map(|l| l.strip_prefix('"').and_then(|l| l.split('"').next()))
        .collect();
    assert_eq!(
        policies,
        ["navarro:promote=no,wired=clustered"],
        "the one policy with a comma is quoted: {csv}"
    );
    assert!(csv.lines().any(|l| l.starts_with("base,")), "{csv}");
    assert!(csv.lines().any(|l| l.starts_with("navarro,")), "{csv}");
}

/// A user's own mix: seed 000's multi-size reservations with FreeBSD's partpopq and fallback,
/// and no name (the report then calls it by the -p text). It runs with the invariants checked.
#[test]
fn a_mixed_policy_runs_checked() {
    let dir = Dir::new("mixed");
    let base = show("navarro", &dir.path("n.toml"));
    let mixed = base
        .replace("name = \"navarro\"\n", "")
        .replace("\"preempt\"", "\"fallback_then_reclaim\"")
        .replace("\"multi_list\"", "\"partpopq\"");
    let file = dir.path("mixed.toml");
    std::fs::write(&file, mixed).unwrap();
    let p = format!("file:{file}");
    let out = splab()
        .args([
            "run", "-q", "-m", MACHINE, "-p", &p, "-w", WORKLOAD, "--check", "--json", "-",
        ])
        .output()
        .unwrap();
    assert_success(&out, "mixed policy");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["config"]["policy"], p.as_str());
    let promotions: u64 = v["pages"]["promotions_by_size"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert!(promotions > 0, "the mix still promotes: {}", v["pages"]);
}

#[test]
fn bad_policy_files_are_bad_input_naming_the_key() {
    let dir = Dir::new("bad");
    let good = show("freebsd", &dir.path("good.toml"));
    let line = |needle: &str| good.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let cases: &[(&str, &str, String)] = &[
        (
            "promote = \"yes\"",
            "promote = \"sometimes\"",
            format!("line {}: mapping_creation.promote = \"sometimes\": expected one of yes, overhead, no", line("promote = ")),
        ),
        (
            "wired = \"scattered\"",
            "wired = \"scattered\"\nwird = \"clustered\"",
            format!("line {}: unknown key 'placement.wird' (keys of [placement]: mmap, wired, mobility_grouping, pageblock_skip, skip_on_failure)", line("wired = ") + 1),
        ),
        (
            "lists = \"partpopq\"",
            "",
            "missing key 'deallocation.lists' (one of multi_list, partpopq)".into(),
        ),
        (
            "readahead = true",
            "readahead = 1",
            format!("line {}: page_cache.readahead = 1: expected true or false", line("readahead = ")),
        ),
        (
            "[page_cache]",
            "[page_cache",
            format!("line {}: not TOML", line("[page_cache]")),
        ),
    ];
    for (i, (from, to, needle)) in cases.iter().enumerate() {
        assert!(good.contains(from), "{from}");
        let file = dir.path(&format!("bad{i}.toml"));
        std::fs::write(&file, good.replacen(from, to, 1)).unwrap();
        let p = format!("file:{file}");
        for args in [
            vec!["run", "-p", &p, "-w", "seq:size=1M"],
            vec!["policy", "show", &p],
        ] {
            let out = splab().args(&args).output().unwrap();
            assert_error_line(&out, 2, &args, &[&format!("policy file '{file}'"), needle]);
        }
    }
    // A file that is not there, a parameter the file's policy does not take, a preset that
    // does not exist.
    let missing = dir.path("missing.toml");
    let out = splab()
        .args(["run", "-p", &format!("file:{missing}"), "-w", "seq:size=1M"])
        .output()
        .unwrap();
    assert_error_line(&out, 2, "missing file", &[&missing, "cannot read"]);
    let base = dir.path("base.toml");
    show("base", &base);
    let out = splab()
        .args([
            "run",
            "-p",
            &format!("file:{base}:promote=no"),
            "-w",
            "seq:size=1M",
        ])
        .output()
        .unwrap();
    assert_error_line(&out, 2, "promote on base", &["unknown parameter 'promote'"]);
    let out = splab()
        .args(["policy", "show", "solaris"])
        .output()
        .unwrap();
    assert_error_line(
        &out,
        2,
        "policy show solaris",
        &["'solaris'", "navarro", "linux-madvise", "file:PATH.toml"],
    );
}

/// What only the machine makes wrong (a size it does not have, a THP limit past its THP) is
/// found when the run binds the policy to the machine: the error names the file, the line and
/// the key as the file's other errors do (it named the file's `name` only: "policy 'linux'").
#[test]
fn machine_dependent_policy_file_errors_name_the_file_line_and_key() {
    let dir = Dir::new("machine");
    for (preset, from, to, needle) in [
        (
            "navarro",
            "sizes = []",
            "sizes = [\"64K\"]",
            "physical_allocation.sizes: size 64K is not a superpage size of skylake",
        ),
        (
            "linux",
            "mthp = []",
            "mthp = [\"8K\"]",
            "physical_allocation.mthp: mthp size 8K",
        ),
        (
            "linux",
            "max_ptes_none = \"default\"",
            "max_ptes_none = 600",
            "daemons.khugepaged.max_ptes_none: max_ptes_none=600",
        ),
        (
            "linux",
            "fault_around = { kind = \"window\", bytes = \"64K\" }",
            "fault_around = { kind = \"window\", bytes = \"4M\" }",
            "mapping_creation.fault_around: fault_around=4M",
        ),
    ] {
        let good = show(preset, &dir.path(&format!("{preset}.toml")));
        assert!(good.contains(from), "{from}");
        let bad = good.replacen(from, to, 1);
        let line = bad.lines().position(|l| l.contains(to)).unwrap() + 1;
        let file = dir.path("bad.toml");
        std::fs::write(&file, bad).unwrap();
        let args = [
            "run",
            "-m",
            "skylake",
            "-p",
            &format!("file:{file}"),
            "-w",
            "seq:size=1M",
        ];
        let out = splab().args(args).output().unwrap();
        assert_error_line(
            &out,
            2,
            args,
            &[&format!("policy file '{file}', line {line}: {needle}")],
        );
    }
}

/// README's example policy file is what `policy show navarro:sizes=64K+4M` prints, comments
/// aside.
#[test]
fn the_readme_policy_file_is_a_shown_preset() {
    let dir = Dir::new("readme");
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let start = readme.find("```toml\n").expect("a toml block in README") + "```toml\n".len();
    let len = readme[start..].find("```").unwrap();
    let file = dir.path("readme.toml");
    std::fs::write(&file, &readme[start..start + len]).unwrap();
    let from_readme = show(&format!("file:{file}"), &dir.path("a.toml"));
    let preset = show("navarro:sizes=64K+4M", &dir.path("b.toml"));
    assert_eq!(from_readme, preset);
}

#[test]
fn list_policies_shows_each_preset_per_event() {
    let out = splab().args(["list", "policies"]).output().unwrap();
    assert_success(&out, "list policies");
    let s = String::from_utf8_lossy(&out.stdout);
    for event in [
        "physical_allocation",
        "preparation",
        "mapping_creation",
        "mapping_destruction",
        "deallocation",
        "daemons.pagedaemon",
    ] {
        let row = s
            .lines()
            .find(|l| l.starts_with(event))
            .unwrap_or_else(|| panic!("no {event} row:\n{s}"));
        // One cell per preset: at least the base, navarro and freebsd columns.
        assert!(
            row.split("  ").filter(|c| !c.trim().is_empty()).count() >= 4,
            "{row}"
        );
    }
    assert!(
        s.contains("lists=multi_list") && s.contains("lists=partpopq"),
        "{s}"
    );
}
