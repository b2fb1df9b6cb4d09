//! Golden reports: small runs over every machine, policy and workload whose full JSON report
//! (minus `sim`, the host's wall time and version) must stay exactly as checked in under
//! `tests/golden/`. Speed work on the hot path must not change a simulated result; this test is
//! what says so.
//!
//! After an intended change of the model, regenerate the files with
//! `SPLAB_BLESS=1 cargo test -p splab-sim --test golden` and commit them with the change.

use std::path::PathBuf;

use serde_json::Value;
use splab_sim::engine::CheckMode;
use splab_sim::RunSpec;

/// (file name, machine, policy, workload, free bytes, check).
type Case = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    Option<u64>,
    CheckMode,
);

const MB: u64 = 1 << 20;

fn fixture(name: &str) -> String {
    format!(
        "{}/../splab-trace/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn cases() -> Vec<(String, String, String, String, Option<u64>, CheckMode)> {
    let fixed: &[Case] = &[
        // Walk-heavy random updates: the path the speed work is about.
        (
            "skylake-base-gups",
            "skylake",
            "base",
            "gups:size=64M,updates=400K",
            None,
            CheckMode::Off,
        ),
        (
            "skylake-navarro-gups",
            "skylake",
            "navarro",
            "gups:size=256M,updates=300K",
            None,
            CheckMode::Off,
        ),
        // Linux THP at first touch (vm/thp.rs).
        (
            "skylake-linux-gups",
            "skylake",
            "linux",
            "gups:size=64M,updates=200K",
            None,
            CheckMode::Off,
        ),
        (
            "skylake-freebsd-gups-dis",
            "skylake",
            "freebsd",
            "gups:size=32M,updates=100K,form=dis",
            None,
            CheckMode::Off,
        ),
        (
            "core2-base-gups",
            "core2",
            "base",
            "gups:size=32M,updates=100K",
            None,
            CheckMode::Off,
        ),
        (
            "pa8000-navarro-gups",
            "pa8000",
            "navarro",
            "gups:size=32M,updates=50K",
            None,
            CheckMode::Off,
        ),
        (
            "alpha21264-base-gups",
            "alpha21264",
            "base",
            "gups:size=16M,updates=50K",
            None,
            CheckMode::Off,
        ),
        // Streams and strides.
        (
            "skylake-base-seq-rw",
            "skylake",
            "base",
            "seq:size=64M,op=rw",
            None,
            CheckMode::Off,
        ),
        (
            "core2-freebsd-seq-write",
            "core2",
            "freebsd",
            "seq:size=32M,op=write",
            None,
            CheckMode::Off,
        ),
        (
            "pa8000-navarro-stride",
            "pa8000",
            "navarro",
            "stride:size=64M,stride=4K",
            None,
            CheckMode::Off,
        ),
        (
            "alpha21264-navarro-sparse",
            "alpha21264",
            "navarro",
            "sparse:size=64M,step=64K,rounds=3",
            None,
            CheckMode::Off,
        ),
        // Dependent chains.
        (
            "skylake-base-chase",
            "skylake",
            "base",
            "chase:size=4M,hops=20K",
            None,
            CheckMode::Off,
        ),
        (
            "skylake-navarro-chase-16",
            "skylake",
            "navarro",
            "chase:size=16M,chains=16,hops=40K",
            None,
            CheckMode::Off,
        ),
        // Seed 000's workloads on the Alpha, one under fragmentation with checks on.
        (
            "alpha21264-navarro-matrix",
            "alpha21264",
            "navarro",
            "matrix:n=300",
            None,
            CheckMode::Off,
        ),
        (
            "alpha21264-base-tree",
            "alpha21264",
            "base",
            "tree:nodes=5000,ops=2000",
            None,
            CheckMode::Off,
        ),
        (
            "alpha21264-navarro-tree-frag",
            "alpha21264",
            "navarro",
            "tree:nodes=5000,ops=2000",
            Some(12 * MB),
            CheckMode::Incremental,
        ),
        (
            "core2-navarro-matrix-mmap",
            "core2",
            "navarro",
            "matrix:n=200,alloc=mmap",
            None,
            CheckMode::Off,
        ),
    ];
    let mut v: Vec<_> = fixed
        .iter()
        .map(|&(n, m, p, w, f, c)| (n.into(), m.into(), p.into(), w.into(), f, c))
        .collect();
    // Trace replay: dependences and instruction counts (v2), instruction fetches (v1).
    for (n, m, p, t) in [
        (
            "skylake-navarro-trace-v2",
            "skylake",
            "navarro",
            "v2-synthetic.spt",
        ),
        (
            "pa8000-base-trace-ifetch",
            "pa8000",
            "base",
            "v1-champsim-ifetch.spt",
        ),
    ] {
        v.push((
            n.into(),
            m.into(),
            p.into(),
            format!("trace:path={}", fixture(t)),
            None,
            CheckMode::Off,
        ));
    }
    v
}

/// The report as JSON, without `sim` (wall time, host) and without the fixture's absolute path.
fn report_json(
    machine: &str,
    policy: &str,
    workload: &str,
    free: Option<u64>,
    check: CheckMode,
) -> Value {
    let r = splab_sim::run(&RunSpec {
        machine: machine.into(),
        policy: policy.into(),
        workload: workload.into(),
        seed: 1,
        check,
        free_bytes: free,
        page_cache: Default::default(),
        dump_reservations: false,
    })
    .unwrap_or_else(|e| panic!("{workload} on {machine} with {policy}: {e}"));
    let mut v = serde_json::to_value(&r).expect("report to JSON");
    let o = v.as_object_mut().expect("report is an object");
    o.remove("sim");
    let dir = fixture("");
    if let Some(Value::String(w)) = o.get_mut("config").and_then(|c| c.get_mut("workload")) {
        *w = w.replace(&dir, "FIXTURES/");
    }
    v
}

/// Paths (`a.b[3]`) where `want` and `got` differ, with both values.
fn diff(path: &str, want: &Value, got: &Value, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, va) in a {
                match b.get(k) {
                    Some(vb) => diff(&format!("{path}.{k}"), va, vb, out),
                    None => out.push(format!("{path}.{k}: expected {va}, missing")),
                }
            }
            for k in b.keys().filter(|k| !a.contains_key(*k)) {
                out.push(format!("{path}.{k}: not expected, got {}", b[k]));
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (va, vb)) in a.iter().zip(b).enumerate() {
                diff(&format!("{path}[{i}]"), va, vb, out);
            }
        }
        _ if want != got => {
            let short = |v: &Value| {
                let s = v.to_string();
                if s.len() > 120 {
                    format!("{}...", &s[..120])
                } else {
                    s
                }
            };
            out.push(format!(
                "{path}: expected {}, got {}",
                short(want),
                short(got)
            ));
        }
        _ => {}
    }
}

#[test]
fn reports_match_the_golden_files() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let bless = std::env::var_os("SPLAB_BLESS").is_some_and(|v| v != "0");
    let mut failures = Vec::new();
    for (name, machine, policy, workload, free, check) in cases() {
        let got = report_json(&machine, &policy, &workload, free, check);
        let file = dir.join(format!("{name}.json"));
        let text = serde_json::to_string_pretty(&got).expect("JSON") + "\n";
        if bless {
            std::fs::create_dir_all(&dir).expect("creating tests/golden");
            std::fs::write(&file, text).expect("writing a golden file");
            continue;
        }
        let want_text = std::fs::read_to_string(&file).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; generate it with SPLAB_BLESS=1 cargo test -p splab-sim --test golden",
                file.display()
            )
        });
        let want: Value = serde_json::from_str(&want_text).expect("golden file is JSON");
        if want_text != text {
            let mut d = Vec::new();
            diff("", &want, &got, &mut d);
            if d.is_empty() {
                d.push("(same values, different text)".into());
            }
            let n = d.len();
            d.truncate(25);
            failures.push(format!(
                "{name} ({machine} {policy} {workload}): {n} field(s) differ\n  {}",
                d.join("\n  ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "simulated results changed (a speed change must not do that; if the model was meant to \
         change, re-bless with SPLAB_BLESS=1 and say why in the commit):\n{}",
        failures.join("\n")
    );
}
