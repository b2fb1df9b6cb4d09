//! Does the format round-trip, and does the reader survive any input?
//!
//! Property tests (short: a few seconds in all): random event streams round-trip exactly;
//! random bytes, mutated traces and truncated traces give events or an error, never a panic,
//! and a truncated trace always ends in an error naming a byte offset.

use proptest::prelude::*;
use splab_trace::format::BlockDecoder;
use splab_trace::*;

fn arb_pid() -> impl Strategy<Value = Pid> {
    prop_oneof![
        Just(Pid(100)),
        Just(Pid(101)),
        (0u32..u32::MAX).prop_map(Pid)
    ]
}

fn arb_event() -> impl Strategy<Value = TraceEvent> {
    let kind = prop_oneof![
        Just(AccessKind::Read),
        Just(AccessKind::Write),
        Just(AccessKind::Ifetch),
        Just(AccessKind::Rmw)
    ];
    // Mostly small (the dep/ipa byte), sometimes escaped or at the caps.
    let dep = prop_oneof![4 => 0u16..20, 1 => 0..=DEP_CAP, 1 => Just(DEP_CAP)];
    let ipa = prop_oneof![4 => 0u16..20, 1 => any::<u16>(), 1 => Just(u16::MAX)];
    let size = prop_oneof![Just(1u32), Just(4), Just(8), Just(64), 0u32..100_000];
    let addr = prop_oneof![0x1000u64..0x1100, any::<u64>()];
    let advice = prop_oneof![
        Just(Advice::DontNeed),
        Just(Advice::Free),
        Just(Advice::HugePage),
        Just(Advice::NoHugePage),
        Just(Advice::Collapse),
        any::<u32>().prop_map(Advice::Other)
    ];
    prop_oneof![
        8 => (arb_pid(), addr.clone(), kind, size, dep, ipa).prop_map(|(pid, va, kind, size, dep, ipa)| TraceEvent::Access { pid, va: Vaddr(va), kind, size, dep, ipa }),
        1 => (arb_pid(), any::<u64>(), any::<u64>(), 0u8..8, 0u16..=MmapFlags::ALL, proptest::option::of(1u32..), any::<u64>()).prop_map(
            |(pid, a, len, prot, flags, file, offset)| TraceEvent::Mmap { pid, addr: Vaddr(a), len, prot: Prot(prot), flags: MmapFlags(flags), file: file.map(FileId), offset }
        ),
        1 => (arb_pid(), any::<u64>(), any::<u64>()).prop_map(|(pid, a, len)| TraceEvent::Munmap { pid, addr: Vaddr(a), len }),
        1 => (arb_pid(), any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(pid, a, l, b, m)| TraceEvent::Mremap { pid, old_addr: Vaddr(a), old_len: l, new_addr: Vaddr(b), new_len: m }),
        1 => (arb_pid(), any::<u64>(), any::<u64>(), 0u8..8).prop_map(|(pid, a, len, p)| TraceEvent::Mprotect { pid, addr: Vaddr(a), len, prot: Prot(p) }),
        1 => (arb_pid(), any::<u64>(), any::<u64>(), advice).prop_map(|(pid, a, len, advice)| TraceEvent::Madvise { pid, addr: Vaddr(a), len, advice }),
        1 => (arb_pid(), any::<u64>()).prop_map(|(pid, e)| TraceEvent::Brk { pid, new_end: Vaddr(e) }),
        1 => (arb_pid(), arb_pid()).prop_map(|(parent, child)| TraceEvent::Fork { parent, child }),
        1 => (arb_pid(), arb_pid()).prop_map(|(parent, child)| TraceEvent::Vfork { parent, child }),
        1 => arb_pid().prop_map(|pid| TraceEvent::Exec { pid }),
        1 => arb_pid().prop_map(|pid| TraceEvent::Exit { pid }),
        1 => (1u32.., any::<u64>(), proptest::option::of("[a-z/._é]{0,20}")).prop_map(|(f, size, name)| TraceEvent::FileOpen { file: FileId(f), size, name: name.map(|s| s.into_boxed_str()) }),
        1 => (arb_pid(), any::<u64>(), any::<bool>()).prop_map(|(pid, amount, c)| TraceEvent::Compute { pid, amount, unit: if c { ComputeUnit::Cycles } else { ComputeUnit::Instructions } }),
    ]
}

fn write_trace(events: &[TraceEvent]) -> Vec<u8> {
    let h = TraceHeader {
        page_size_hint: 4096,
        source: "test".into(),
        command: "prop".into(),
        processes: vec![],
    };
    let mut w = TraceWriter::new(Vec::new(), &h, 1).unwrap();
    for e in events {
        w.write(e).unwrap();
    }
    w.finish().unwrap().out
}

/// Reads everything (at most `cap` events); returns the events and the error it ended with.
fn read_all(bytes: &[u8], cap: usize) -> (Vec<TraceEvent>, Option<TraceError>) {
    let mut r = match TraceReader::new(bytes) {
        Ok(r) => r,
        Err(e) => return (vec![], Some(e)),
    };
    let mut out = Vec::new();
    loop {
        if out.len() >= cap {
            return (out, None);
        }
        match r.read_batch(&mut out, 1000) {
            Ok(0) => return (out, None),
            Ok(_) => {}
            Err(e) => return (out, Some(e)),
        }
    }
}

/// A sequence with long runs, several pids and other events: many blocks at a small size.
fn sample_events() -> Vec<TraceEvent> {
    let mut v = vec![TraceEvent::Mmap {
        pid: Pid(7),
        addr: Vaddr(0x10000),
        len: 1 << 20,
        prot: Prot::RW,
        flags: MmapFlags::ANON,
        file: None,
        offset: 0,
    }];
    let mut x: u64 = 12345;
    for i in 0..20_000u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let pid = if i % 1000 < 500 { Pid(7) } else { Pid(8) };
        let va = if i % 3 == 0 {
            0x10000 + (x >> 40)
        } else {
            0x10000 + i * 8
        };
        v.push(TraceEvent::Access {
            pid,
            va: Vaddr(va),
            kind: if i % 7 == 0 {
                AccessKind::Rmw
            } else {
                AccessKind::Read
            },
            size: 8,
            dep: if i % 3 == 0 { 1 } else { 0 },
            ipa: [1, 3, 3, 40][(i % 4) as usize],
        });
        if i % 5000 == 0 {
            v.push(TraceEvent::Brk {
                pid,
                new_end: Vaddr(0x5000_0000 + i),
            });
        }
    }
    v.push(TraceEvent::Exit { pid: Pid(7) });
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn random_streams_round_trip(events in proptest::collection::vec(arb_event(), 0..300)) {
        let bytes = write_trace(&events);
        let (back, err) = read_all(&bytes, usize::MAX);
        prop_assert!(err.is_none(), "{:?}", err);
        prop_assert_eq!(back, events);
    }

    #[test]
    fn random_bytes_never_panic(mut bytes in proptest::collection::vec(any::<u8>(), 0..2000), magic in any::<bool>(), version in 1u8..=3) {
        if magic && bytes.len() > 14 {
            // Get past the magic and version half the time (any version), so the rest gets
            // exercised.
            bytes[..8].copy_from_slice(b"SPLTRACE");
            bytes[8] = version;
            bytes[9] = 0;
        }
        let _ = read_all(&bytes, 100_000);
    }

    #[test]
    fn random_block_payloads_never_panic(payload in proptest::collection::vec(any::<u8>(), 0..600), events in 1u64..2000, version in 1u16..=3, champsim in any::<bool>()) {
        // Below the CRC: the event decoder itself on arbitrary bytes, as version 1, 2 or 3.
        let mut d = BlockDecoder::for_version(version, if champsim { "champsim" } else { "test" });
        d.reset(events);
        let mut out = Vec::new();
        for _ in 0..100 {
            let limit = out.len() + 64;
            match d.decode_into(&payload, &mut out, limit) {
                Ok(true) | Err(_) => break,
                Ok(false) => {}
            }
        }
        prop_assert!(out.len() as u64 <= events);
    }

    #[test]
    fn mutated_traces_never_panic(flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
        let mut bytes = write_trace(&sample_events()[..3000]);
        for (i, b) in flips {
            let i = i.index(bytes.len());
            bytes[i] ^= b | 1;
        }
        let _ = read_all(&bytes, 1_000_000);
    }

    #[test]
    fn truncated_traces_end_in_an_error_with_an_offset(cut in any::<prop::sample::Index>()) {
        let bytes = write_trace(&sample_events()[..3000]);
        let cut = cut.index(bytes.len());
        let (_, err) = read_all(&bytes[..cut], usize::MAX);
        let err = err.expect("a truncated trace must end in an error");
        let msg = err.to_string();
        prop_assert!(msg.contains("offset"), "{}", msg);
    }
}

#[test]
fn many_blocks_and_pids_round_trip() {
    let ev = sample_events();
    let bytes = write_trace(&ev);
    let (back, err) = read_all(&bytes, usize::MAX);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(back, ev);
    // The iterator gives the same as read_batch.
    let it: Vec<TraceEvent> = TraceReader::new(bytes.as_slice())
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    assert_eq!(it, ev);
}

#[test]
fn a_sequential_scan_takes_almost_no_space() {
    let h = TraceHeader::default();
    let mut w = TraceWriter::new(Vec::new(), &h, 3).unwrap();
    for i in 0..1_000_000u64 {
        w.access(Pid(1), Vaddr(0x4000_0000 + 8 * i), AccessKind::Read, 8)
            .unwrap();
    }
    let f = w.finish().unwrap();
    assert!(f.file_bytes < 200, "{} bytes", f.file_bytes);
    assert_eq!(f.trailer.accesses, 1_000_000);
}

#[test]
fn errors_name_the_offset_and_what_was_expected() {
    let bytes = write_trace(&sample_events());
    // Cut inside the first block.
    let (_, err) = read_all(&bytes[..40], usize::MAX);
    let msg = err.unwrap().to_string();
    assert!(
        msg.contains("truncated trace at byte offset 40") && msg.contains("expected"),
        "{msg}"
    );
    // Wrong magic.
    let (_, err) = read_all(b"GARBAGE!xxxxxxxxxx", usize::MAX);
    assert!(err.unwrap().to_string().contains("not a splab trace"));
    // A damaged block.
    let mut b = bytes.clone();
    b[60] ^= 0x55;
    let (_, err) = read_all(&b, usize::MAX);
    let msg = err.unwrap().to_string();
    assert!(msg.contains("corrupt trace at byte offset"), "{msg}");
    // No trailer.
    let trailer_at =
        u64::from_le_bytes(bytes[bytes.len() - 16..bytes.len() - 8].try_into().unwrap()) as usize;
    let (ev, err) = read_all(&bytes[..trailer_at], usize::MAX);
    assert_eq!(
        ev.len(),
        sample_events().len(),
        "every event before the cut is readable"
    );
    let msg = err.unwrap().to_string();
    assert!(
        msg.contains(&format!("offset {trailer_at}")) && msg.contains("without its trailer"),
        "{msg}"
    );
}

#[test]
fn read_batch_returns_at_most_max() {
    let bytes = write_trace(&sample_events());
    let mut r = TraceReader::new(bytes.as_slice()).unwrap();
    let mut buf = Vec::new();
    for max in [1usize, 5, 50, 333, 4096, 1, 7, 9000, 3] {
        buf.clear();
        let n = r.read_batch(&mut buf, max).unwrap();
        assert_eq!((n, buf.len()), (max, max));
    }
}

#[test]
fn a_dep_beyond_the_cap_is_written_as_no_dependence() {
    let mut w = TraceWriter::new(Vec::new(), &TraceHeader::default(), 3).unwrap();
    w.access_with(Pid(1), Vaddr(0x1000), AccessKind::Read, 8, DEP_CAP, 7)
        .unwrap();
    w.access_with(Pid(1), Vaddr(0x2000), AccessKind::Read, 8, DEP_CAP + 1, 7)
        .unwrap();
    let bytes = w.finish().unwrap().out;
    let (ev, err) = read_all(&bytes, usize::MAX);
    assert!(err.is_none(), "{err:?}");
    let deps: Vec<u16> = ev
        .iter()
        .map(|e| match e {
            TraceEvent::Access { dep, .. } => *dep,
            _ => u16::MAX,
        })
        .collect();
    assert_eq!(deps, [DEP_CAP, 0]);
}
