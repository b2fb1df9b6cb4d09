//! Is docs/report.schema.json the contract real reports keep? Real `run --json` and
//! `compare --json` output of several machines, workloads and policies must validate against
//! it; the schema forbids fields it does not describe, so a field added to the report without
//! its description fails here.

use serde_json::Value;

mod common;

fn schema() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/report.schema.json");
    let text = std::fs::read_to_string(path).expect("docs/report.schema.json");
    serde_json::from_str(&text).expect("the schema is JSON")
}

/// The JSON `splab ARGS --json -` prints.
fn json_of(args: &[&str]) -> Value {
    let out = common::splab()
        .args(args)
        .args(["-q", "--json", "-"])
        .output()
        .unwrap();
    common::assert_success(&out, args);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: not JSON: {e}"))
}

fn errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    v.iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

#[test]
fn real_reports_validate_against_the_schema() {
    let v = jsonschema::draft202012::new(&schema()).expect("a valid draft 2020-12 schema");
    let cases: &[&[&str]] = &[
        &["run", "-m", "alpha21264", "-w", "matrix:n=200"],
        &[
            "run",
            "-m",
            "skylake:mem=1G",
            "-p",
            "freebsd",
            "-w",
            "gups:size=64M,updates=20K",
        ],
        // Direct compaction: the report's `memory.compaction.memmap` section.
        &[
            "run",
            "-m",
            "skylake:mem=1G",
            "-p",
            "linux-4.3",
            "-w",
            "kv:phase=cold",
            "--frag",
            "50",
            "--frag-mem",
            "64M",
        ],
        // A guest machine: the report's `tlb.nested` section.
        &[
            "run",
            "-m",
            "skylake:mem=1G,nested=4K",
            "-p",
            "linux",
            "-w",
            "gups:size=64M,updates=20K",
        ],
        // HP-UX's page sizes: the report's `memory.pagesize` section.
        &[
            "run",
            "-m",
            "pa8000:mem=256M",
            "-p",
            "hpux:hint=1M",
            "-w",
            "seq:size=8M,op=rw",
        ],
        &[
            "run",
            "-m",
            "pa8000:mem=256M",
            "-p",
            "navarro",
            "-w",
            "seq:size=8M,op=rw",
        ],
        &[
            "run",
            "-m",
            "core2:mem=512M",
            "-p",
            "navarro",
            "-w",
            "chase:size=16M,chains=4",
            "--free",
            "64M",
        ],
        &[
            "compare",
            "-m",
            "alpha21264",
            "-p",
            "base,navarro,freebsd",
            "-w",
            "tree:ops=100",
        ],
        &[
            "compare",
            "-m",
            "skylake:mem=1G",
            "-p",
            "base,navarro:sizes=2M",
            "-w",
            "stride:size=64M,stride=2M",
        ],
        // --frag: the report's `frag` section; --baseline.
        &[
            "compare",
            "-m",
            "skylake:mem=1G",
            "-p",
            "base,linux",
            "-w",
            "gups:size=8M,updates=10K",
            "--frag",
            "50",
            "--baseline",
            "linux",
        ],
    ];
    let mut memmap = 0;
    for args in cases {
        let doc = json_of(args);
        let errs = errors(&v, &doc);
        assert!(errs.is_empty(), "{args:?}:\n{}", errs.join("\n"));
        memmap += doc["memory"]["compaction"]["memmap"].is_object() as u32;
    }
    assert!(memmap > 0, "no case exercised memory.compaction.memmap");
    // A trace replay, whose report carries `workload_stats`.
    let trace = format!(
        "trace:path={}/../splab-trace/tests/fixtures/v1-synthetic.spt",
        env!("CARGO_MANIFEST_DIR")
    );
    let doc = json_of(&["run", "-m", "skylake:mem=1G", "-w", &trace]);
    assert!(doc["workload_stats"]["events"].as_u64() > Some(0), "{doc}");
    let errs = errors(&v, &doc);
    assert!(errs.is_empty(), "trace replay:\n{}", errs.join("\n"));
    // Compositions, whose reports carry their components (and seeker's chunk counts, idle time).
    for w in [
        "seq(fftw:n=8,seeker:count=2)",
        "par(seq(fftw:n=8,seeker:count=2),gups:size=1M,updates=1K)",
        // The web server's warm-up and measured phase, and a seeker waiting for its marks.
        "par(web:warmup=20,requests=20,files=50,seeker:after=warm,until=served)",
    ] {
        let doc = json_of(&["run", "-m", "alpha21264", "-p", "navarro", "-w", w]);
        assert!(doc["workload_stats"]["components"].is_array(), "{doc}");
        let errs = errors(&v, &doc);
        assert!(errs.is_empty(), "{w}:\n{}", errs.join("\n"));
    }
    // The key-value server's stats and its request latency.
    let doc = json_of(&[
        "run",
        "-m",
        "skylake:mem=1G",
        "-p",
        "linux",
        "-w",
        "kv:phase=del:70,objects=300,idle=20",
    ]);
    assert!(
        doc["time"]["request_latency"]["count"].as_u64() == Some(510),
        "{doc}"
    );
    let errs = errors(&v, &doc);
    assert!(errs.is_empty(), "kv:\n{}", errs.join("\n"));
}

/// The schema is strict: an undescribed field, a missing one, or a wrong unit type fails.
#[test]
fn the_schema_rejects_what_it_does_not_describe() {
    let v = jsonschema::draft202012::new(&schema()).unwrap();
    let good = json_of(&[
        "compare",
        "-m",
        "alpha21264",
        "-p",
        "base,navarro",
        "-w",
        "matrix:n=100",
    ]);
    assert!(errors(&v, &good).is_empty());
    let mut extra = good.clone();
    extra["reports"][1]["memory"]["bloat_bytes"] = Value::from(1);
    assert!(
        !errors(&v, &extra).is_empty(),
        "an undescribed field passed"
    );
    let mut missing = good.clone();
    missing["rows"][0]
        .as_object_mut()
        .unwrap()
        .remove("walk_reduction_pct");
    assert!(!errors(&v, &missing).is_empty(), "a missing field passed");
    let mut wrong = good;
    wrong["reports"][0]["time"]["cycles_total"] = Value::from(-1);
    assert!(
        !errors(&v, &wrong).is_empty(),
        "a negative cycle count passed"
    );
}

/// `walk_reduction_pct` is what the rows count; the old name is its alias until v3.
#[test]
fn walk_reduction_keeps_its_v2_alias() {
    let c = json_of(&[
        "compare",
        "-m",
        "alpha21264",
        "-p",
        "base,navarro",
        "-w",
        "matrix:n=200",
    ]);
    let row = &c["rows"][1];
    let walks = |i: usize| c["reports"][i]["tlb"]["walks"].as_f64().unwrap();
    let want = 100.0 * (1.0 - walks(1) / walks(0));
    assert!((row["walk_reduction_pct"].as_f64().unwrap() - want).abs() < 1e-9);
    assert_eq!(row["walk_reduction_pct"], row["tlb_miss_reduction_pct"]);
    assert_eq!(c["schema"], "splab.compare.v2");
}
