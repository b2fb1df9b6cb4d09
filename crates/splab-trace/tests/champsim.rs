//! Does the ChampSim importer turn 64-byte records into accesses over inferred regions?

use splab_trace::champsim::{write_champsim_records, ChampSimRecord};
use splab_trace::*;

fn records() -> Vec<ChampSimRecord> {
    let mut v = Vec::new();
    for i in 0..10_000u64 {
        let mut r = ChampSimRecord {
            ip: 0x40_0000 + 4 * (i % 64),
            ..Default::default()
        };
        match i % 4 {
            0 => r.source_memory[0] = 0x7f00_0000_0000 + 8 * i, // a load
            1 => r.destination_memory[0] = 0x1000_0000 + 8 * i, // a store
            2 => {
                // read-modify-write: one Write
                r.source_memory[0] = 0x2000_0000;
                r.destination_memory[0] = 0x2000_0000;
            }
            _ => {} // no memory access
        }
        v.push(r);
    }
    v
}

fn import(xz: bool, ifetch: bool) -> (Vec<TraceEvent>, ImportSummary) {
    let dir = std::env::temp_dir().join(format!(
        "splab-champsim-{}-{xz}-{ifetch}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let mut raw = Vec::new();
    write_champsim_records(&mut raw, &records()).unwrap();
    let input = dir.join("t.champsim");
    if xz {
        let mut c = Vec::new();
        lzma_rs::xz_compress(&mut raw.as_slice(), &mut c).unwrap();
        std::fs::write(&input, c).unwrap();
    } else {
        std::fs::write(&input, raw).unwrap();
    }
    let out = dir.join("t.spt");
    let s = import_champsim(
        &input,
        &out,
        &ChampSimOptions {
            ifetch,
            ..Default::default()
        },
    )
    .unwrap();
    let ev: Vec<TraceEvent> = TraceReader::open(&out)
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    let _ = std::fs::remove_dir_all(dir);
    (ev, s)
}

#[test]
fn xz_records_become_accesses_over_inferred_regions() {
    let (ev, s) = import(true, true);
    assert_eq!(s.records, 10_000);
    let count = |k: AccessKind| {
        ev.iter()
            .filter(|e| matches!(e, TraceEvent::Access { kind, .. } if *kind == k))
            .count()
    };
    assert_eq!(count(AccessKind::Ifetch), 10_000);
    assert_eq!(count(AccessKind::Read), 2_500);
    assert_eq!(
        count(AccessKind::Write),
        5_000,
        "stores and read-modify-writes"
    );
    // Every access lies in a mapping emitted before it.
    let mut maps: Vec<(u64, u64)> = Vec::new();
    for e in &ev {
        match e {
            TraceEvent::Mmap {
                addr, len, flags, ..
            } => {
                assert!(flags.contains(MmapFlags::INFERRED));
                maps.push((addr.0, addr.0 + len));
            }
            TraceEvent::Access { va, .. } => assert!(
                maps.iter().any(|&(lo, hi)| lo <= va.0 && va.0 < hi),
                "{va} unmapped"
            ),
            _ => {}
        }
    }
    // code, the load stream, the store stream (one 2MB chunk each at most a few), the RMW word
    assert!(maps.len() >= 4 && maps.len() <= 8, "{maps:?}");
    assert_eq!(s.inferred_regions as usize, maps.len());
}

#[test]
fn without_ifetch_idle_instructions_become_compute() {
    let (ev, _) = import(false, false);
    let insns: u64 = ev
        .iter()
        .filter_map(|e| match e {
            TraceEvent::Compute {
                amount,
                unit: ComputeUnit::Instructions,
                ..
            } => Some(*amount),
            _ => None,
        })
        .sum();
    assert_eq!(insns, 2_500);
    assert!(!ev.iter().any(|e| matches!(
        e,
        TraceEvent::Access {
            kind: AccessKind::Ifetch,
            ..
        }
    )));
}

#[test]
fn a_cut_record_is_reported() {
    let dir = std::env::temp_dir().join(format!("splab-champsim-cut-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut raw = Vec::new();
    write_champsim_records(&mut raw, &records()[..10]).unwrap();
    raw.truncate(64 * 10 - 5);
    std::fs::write(dir.join("c"), raw).unwrap();
    let err = import_champsim(&dir.join("c"), &dir.join("c.spt"), &Default::default()).unwrap_err();
    assert!(err.to_string().contains("after record 9"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}
