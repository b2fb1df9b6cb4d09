//! Version-1 traces (written by the v1 writer, before dep/ipa existed) still read.
//!
//! The fixtures in `tests/fixtures` were written by splab-trace's version-1 code (commit
//! 023bfd6, with `fixtures/make_v1_fixtures.rs.txt`): `v1-synthetic.spt` (two processes, runs,
//! instruction fetches, `Compute`), `v1-champsim.spt` and `v1-champsim-ifetch.spt` (a 12-record
//! ChampSim trace imported without and with instruction fetches). Each `.txt` is the v1
//! `trace cat` of its trace.

use std::path::PathBuf;

use splab_trace::*;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn read(name: &str) -> Vec<TraceEvent> {
    TraceReader::open(&fixture(&format!("{name}.spt")))
        .unwrap()
        .map(|e| e.unwrap())
        .collect()
}

fn expected(name: &str) -> Vec<String> {
    std::fs::read_to_string(fixture(&format!("{name}.txt")))
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn v1_fixtures_read_as_they_were_written() {
    for name in ["v1-synthetic", "v1-champsim", "v1-champsim-ifetch"] {
        let ev = read(name);
        let text: Vec<String> = ev.iter().map(|e| e.to_string()).collect();
        assert_eq!(text, expected(name), "{name}");
    }
}
