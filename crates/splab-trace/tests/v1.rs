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

/// The text of an event as version 1's `trace cat` printed it (without dep and ipa).
fn v1_text(e: &TraceEvent) -> String {
    let t = e.to_string();
    match t.find(" dep=") {
        Some(i) if matches!(e, TraceEvent::Access { .. }) => t[..i].to_string(),
        _ => t,
    }
}

/// Reads a fixture: its events must be what v1 wrote; returns their (dep, ipa) in order.
fn check(name: &str) -> Vec<(u16, u16)> {
    let r = TraceReader::open(&fixture(&format!("{name}.spt"))).unwrap();
    assert_eq!(r.version(), 1, "{name}");
    let ev: Vec<TraceEvent> = r.map(|e| e.unwrap()).collect();
    let text: Vec<String> = ev.iter().map(v1_text).collect();
    assert_eq!(text, expected(name), "{name}");
    ev.iter()
        .filter_map(|e| match e {
            TraceEvent::Access { dep, ipa, .. } => Some((*dep, *ipa)),
            _ => None,
        })
        .collect()
}

#[test]
fn v1_synthetic_gets_the_documented_defaults() {
    let di = check("v1-synthetic");
    assert!(
        di.iter().all(|&(dep, _)| dep == 0),
        "version 1 has no dependences"
    );
    let ipa: Vec<u16> = di.iter().map(|&(_, i)| i).collect();
    let k = format::V1_IPA;
    let mut want = vec![k, k, k + 5]; // the third after `compute 5 Instructions`
    want.extend([k; 10]); // a run
    want.extend([1, 0, 0, 1, 1, 0, 0]); // fetches (1) and the data accesses after them (0)
    want.extend([k; 5]); // pid 101 has fetched nothing (its `compute` counts cycles)
    want.push(0); // pid 100 again, after its fetches
    assert_eq!(ipa, want);
}

#[test]
fn v1_champsim_imports_count_one_instruction_per_record() {
    // Without fetches: 1, or 1 + the `Compute` instructions before (one idle record).
    let di = check("v1-champsim");
    assert!(di.iter().all(|&(dep, _)| dep == 0));
    let ipa: Vec<u16> = di.iter().map(|&(_, i)| i).collect();
    assert_eq!(ipa, [1, 1, 1, 1, 2, 1, 1, 1, 2, 1, 1, 1]);
    // With fetches: each fetch is an instruction, its data accesses belong to it.
    let di = check("v1-champsim-ifetch");
    let ev = read("v1-champsim-ifetch");
    let kinds: Vec<AccessKind> = ev
        .iter()
        .filter_map(|e| match e {
            TraceEvent::Access { kind, .. } => Some(*kind),
            _ => None,
        })
        .collect();
    for (k, (dep, ipa)) in kinds.iter().zip(&di) {
        assert_eq!(*dep, 0);
        assert_eq!(*ipa, u16::from(*k == AccessKind::Ifetch), "{k:?}");
    }
}

#[test]
fn v1_info_says_what_it_lacks() {
    let mut out = Vec::new();
    info(&fixture("v1-synthetic.spt"), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("splab trace v1"), "{text}");
    assert!(text.contains("none recorded (version 1"), "{text}");
}

#[test]
fn v1_traces_survive_damage() {
    // The version-1 decoding path under flipped and cut bytes: events or an error, no panic.
    let bytes = std::fs::read(fixture("v1-synthetic.spt")).unwrap();
    let mut x: u64 = 0x2545f4914f6cdd1d;
    for _ in 0..2000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut b = bytes.clone();
        let i = 10 + (x as usize) % (b.len() - 10);
        b[i] ^= (x >> 32) as u8 | 1;
        let cut = 10 + (x >> 40) as usize % (b.len() - 10);
        for data in [&b[..], &bytes[..cut]] {
            if let Ok(r) = TraceReader::new(data) {
                for e in r {
                    if e.is_err() {
                        break;
                    }
                }
            }
        }
    }
}
