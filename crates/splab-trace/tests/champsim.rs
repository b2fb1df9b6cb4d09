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
                // read-modify-write: one Rmw
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
    assert_eq!(count(AccessKind::Write), 2_500, "stores");
    assert_eq!(count(AccessKind::Rmw), 2_500, "read-modify-writes");
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

/// A cut `.xz` file: the error said only "reading the ChampSim trace: io error: failed to fill
/// whole buffer", neither which file nor where nor that it is cut short.
#[test]
fn a_cut_xz_stream_is_reported_with_where() {
    let dir = std::env::temp_dir().join(format!("splab-champsim-cutxz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut raw = Vec::new();
    write_champsim_records(&mut raw, &records()).unwrap();
    let mut c = Vec::new();
    lzma_rs::xz_compress(&mut raw.as_slice(), &mut c).unwrap();
    let cut = c.len() / 2;
    c.truncate(cut);
    let input = dir.join("t.xz");
    std::fs::write(&input, c).unwrap();
    let out = dir.join("t.spt");
    let err = import_champsim(&input, &out, &Default::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&input.display().to_string())
            && err.contains("xz stream is cut short or corrupt at byte offset")
            && err.contains("whole records")
            && err.contains("truncated"),
        "{err}"
    );
    assert!(!out.exists());
    let _ = std::fs::remove_dir_all(dir);
}

/// Imports `recs` (uncompressed) and returns the accesses as (kind, address, dep, ipa).
fn import_records(
    recs: &[ChampSimRecord],
    ifetch: bool,
    name: &str,
) -> Vec<(AccessKind, u64, u16, u16)> {
    let dir = std::env::temp_dir().join(format!("splab-champsim-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut raw = Vec::new();
    write_champsim_records(&mut raw, recs).unwrap();
    std::fs::write(dir.join("in"), raw).unwrap();
    let opts = ChampSimOptions {
        ifetch,
        ..Default::default()
    };
    import_champsim(&dir.join("in"), &dir.join("out.spt"), &opts).unwrap();
    let ev: Vec<(AccessKind, u64, u16, u16)> = TraceReader::open(&dir.join("out.spt"))
        .unwrap()
        .filter_map(|e| match e.unwrap() {
            TraceEvent::Access {
                kind, va, dep, ipa, ..
            } => Some((kind, va.0, dep, ipa)),
            _ => None,
        })
        .collect();
    let _ = std::fs::remove_dir_all(dir);
    ev
}

// ChampSim's (Pin's) register numbers.
const RAX: u8 = 10;
const RBX: u8 = 7;
const RCX: u8 = 9;
const RDX: u8 = 8;
const RSP: u8 = 6;
const RBP: u8 = 5;
const FLAGS: u8 = 25;
const RIP: u8 = 26;

fn insn(ip: u64, dst: &[u8], src: &[u8], dmem: &[u64], smem: &[u64]) -> ChampSimRecord {
    let mut r = ChampSimRecord {
        ip,
        ..Default::default()
    };
    r.destination_registers[..dst.len()].copy_from_slice(dst);
    r.source_registers[..src.len()].copy_from_slice(src);
    r.destination_memory[..dmem.len()].copy_from_slice(dmem);
    r.source_memory[..smem.len()].copy_from_slice(smem);
    r
}

const H: u64 = 0x1000_0000;
const S: u64 = 0x7fff_0000;

/// A hand-made instruction sequence with known dataflow (L<n>: the n-th access).
fn dataflow() -> Vec<ChampSimRecord> {
    vec![
        // 0: mov rax, [rbx]        L1; rax <- L1
        insn(0x400000, &[RAX], &[RBX], &[], &[H]),
        // 1: mov rax, [rax]        L2: dep 1; rax <- L2
        insn(0x400003, &[RAX], &[RAX], &[], &[H + 0x40]),
        // 2: add rcx, 1            no memory
        insn(0x400006, &[RCX, FLAGS], &[RCX], &[], &[]),
        // 3: cmp rax, 0            no memory: flags <- L2
        insn(0x40000a, &[FLAGS], &[RAX], &[], &[]),
        // 4: cmovz rdx, [rbx]      L3: the flags do not form addresses: dep 0; ipa 3 (two
        //                          memory-less instructions before it); rdx <- L3
        insn(0x40000e, &[RDX], &[RBX, FLAGS], &[], &[H + 0x80]),
        // 5: add [rax], rcx        L4, a read-modify-write at rax = L2: dep 2
        insn(0x400011, &[FLAGS], &[RAX, RCX], &[H + 0x100], &[H + 0x100]),
        // 6: push rax              L5 at rsp (never loaded): dep 0, not rax's
        insn(0x400014, &[RSP], &[RSP, RAX], &[S], &[]),
        // 7: pop rbx               L6: dep 0; rbx <- L6, rsp keeps its tag (none)
        insn(0x400015, &[RBX, RSP], &[RSP], &[], &[S]),
        // 8: mov rcx, [rsp]        L7: dep 0; rcx <- L7
        insn(0x400016, &[RCX], &[RSP], &[], &[S + 8]),
        // 9: mov [rbx], rdx        L8 at rbx = L6 (rdx = L3 is older): dep 2
        insn(0x40001a, &[], &[RBX, RDX], &[H + 0x200], &[]),
        // 10: mov rax, [rip + x]   L9: rip-relative, dep 0; rax <- L9
        insn(0x40001d, &[RAX], &[RIP], &[], &[0x60_0000]),
        // 11: lea rbx, [rcx + 8]   no memory: rbx <- rcx's tag, L7
        insn(0x400024, &[RBX], &[RCX], &[], &[]),
        // 12: mov rcx, [rbx]       L10: dep 3 (on L7); ipa 2
        insn(0x400028, &[RCX], &[RBX], &[], &[H + 0x300]),
        // 13: mov [rbx], rax       L11 at rbx = L7, but ChampSim does not say that rax (L9) is
        //                          the data: the most recent source counts, dep 2
        insn(0x40002b, &[], &[RBX, RAX], &[H + 0x400], &[]),
        // 14: leave                L12 at rbp (never loaded): dep 0; rbp <- L12, and rsp <- rbp's
        //                          old tag (none), not the load's
        insn(0x40002e, &[RSP, RBP], &[RBP], &[], &[S + 0x40]),
        // 15: mov rcx, [rsp]       L13: dep 0
        insn(0x40002f, &[RCX], &[RSP], &[], &[S + 0x48]),
        // 16: mov rcx, [rbp]       L14: dep 2 (on L12)
        insn(0x400033, &[RCX], &[RBP], &[], &[S + 0x80]),
    ]
}

#[test]
fn dep_ipa_and_rmw_follow_the_registers() {
    use AccessKind::*;
    let ev = import_records(&dataflow(), false, "dataflow");
    assert_eq!(
        ev,
        vec![
            (Read, H, 0, 1),
            (Read, H + 0x40, 1, 1),
            (Read, H + 0x80, 0, 3),
            (Rmw, H + 0x100, 2, 1),
            (Write, S, 0, 1),
            (Read, S, 0, 1),
            (Read, S + 8, 0, 1),
            (Write, H + 0x200, 2, 1),
            (Read, 0x60_0000, 0, 1),
            (Read, H + 0x300, 3, 2),
            (Write, H + 0x400, 2, 1),
            (Read, S + 0x40, 0, 1),
            (Read, S + 0x48, 0, 1),
            (Read, S + 0x80, 2, 1),
        ]
    );
}

#[test]
fn with_ifetch_the_fetches_count_in_dep_and_carry_ipa() {
    use AccessKind::*;
    let ev = import_records(&dataflow(), true, "dataflow-ifetch");
    // Every instruction is a fetch (ipa 1, dep 0); its data accesses have ipa 0; distances
    // count the fetches too.
    let fetches: Vec<_> = ev.iter().filter(|e| e.0 == Ifetch).collect();
    assert_eq!(fetches.len(), 17);
    assert!(fetches.iter().all(|e| e.2 == 0 && e.3 == 1));
    let data: Vec<(AccessKind, u16, u16)> = ev
        .iter()
        .filter(|e| e.0 != Ifetch)
        .map(|e| (e.0, e.2, e.3))
        .collect();
    assert_eq!(
        data,
        vec![
            (Read, 0, 0),
            (Read, 2, 0), // L1, the fetch of insn 1, L2
            (Read, 0, 0),
            (Rmw, 6, 0),
            (Write, 0, 0),
            (Read, 0, 0),
            (Read, 0, 0),
            (Write, 4, 0),
            (Read, 0, 0),
            (Read, 7, 0),
            (Write, 5, 0),
            (Read, 0, 0),
            (Read, 0, 0),
            (Read, 4, 0), // L12 (leave), fetch, L13, fetch, L14
        ]
    );
}
