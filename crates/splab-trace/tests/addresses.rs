//! Version 3's address prediction (docs/trace-format.md, "Addresses (version 3)"): does every
//! access stream come back exactly, whatever the predictors guess, and does a damaged one end
//! in an error rather than a panic or wrong addresses passed off as right?
//!
//! The hard cases are the ones where encoder and decoder could drift apart: two contexts
//! sharing a table entry (collisions), strides that go down or wrap around 2^64, the first
//! access of a context (an empty entry), runs that move the table's state by many accesses at
//! once, pids interleaving, and block boundaries (where the table starts again).

use proptest::prelude::*;
use splab_trace::format::{put_varint, BlockDecoder, ADDR_BITS, OP_SET_PID};
use splab_trace::*;

fn write_trace(events: &[TraceEvent]) -> (Vec<u8>, u64) {
    let h = TraceHeader {
        page_size_hint: 4096,
        source: "test".into(),
        command: "addresses".into(),
        processes: vec![],
    };
    let mut w = TraceWriter::new(Vec::new(), &h, 1).unwrap();
    for e in events {
        w.write(e).unwrap();
    }
    let f = w.finish().unwrap();
    (f.out, f.trailer.blocks)
}

fn read_back(bytes: &[u8]) -> Vec<TraceEvent> {
    let r = TraceReader::new(bytes).unwrap();
    assert_eq!(r.version(), format::VERSION);
    r.map(|e| e.unwrap()).collect()
}

fn acc(pid: u32, va: u64, kind: AccessKind, size: u32, dep: u16, ipa: u16) -> TraceEvent {
    TraceEvent::Access {
        pid: Pid(pid),
        va: Vaddr(va),
        kind,
        size,
        dep,
        ipa,
    }
}

/// A static access site of a synthetic program: its context (dep, ipa, kind, size) and how its
/// address moves from one execution to the next.
#[derive(Clone, Debug)]
struct Site {
    dep: u16,
    ipa: u16,
    kind: AccessKind,
    size: u32,
    start: u64,
    stride: i64,
    /// 0: always the stride; 1: a random address every time (pointer chasing); 2: an offset
    /// from the pid's previous access.
    pattern: u8,
}

fn arb_site() -> impl Strategy<Value = Site> {
    let kind = prop_oneof![
        Just(AccessKind::Read),
        Just(AccessKind::Write),
        Just(AccessKind::Rmw),
        Just(AccessKind::Ifetch)
    ];
    // Few distinct contexts (so sites collide in the table and share entries) or any.
    let dep = prop_oneof![3 => 0u16..3, 1 => 0..=DEP_CAP];
    let ipa = prop_oneof![3 => 0u16..4, 1 => any::<u16>()];
    let size = prop_oneof![Just(1u32), Just(8), Just(64), 0u32..200];
    // Addresses anywhere, near 0 and near 2^64 (wrapping strides and escaped deltas).
    let start = prop_oneof![
        0x1000u64..0x2000,
        any::<u64>(),
        (u64::MAX - 0x1000)..=u64::MAX
    ];
    let stride = prop_oneof![Just(0i64), -64i64..64, any::<i64>(), Just(i64::MIN)];
    (dep, ipa, kind, size, start, stride, 0u8..3).prop_map(
        |(dep, ipa, kind, size, start, stride, pattern)| Site {
            dep,
            ipa,
            kind,
            size,
            start,
            stride,
            pattern,
        },
    )
}

/// Runs the sites as a program: `order` picks the site of each step (and its pid).
fn program(sites: &[Site], order: &[(usize, bool)], seed: u64) -> Vec<TraceEvent> {
    let mut addr: Vec<u64> = sites.iter().map(|s| s.start).collect();
    let mut last = [0u64; 2];
    let mut x = seed | 1;
    let mut out = Vec::new();
    for &(i, other_pid) in order {
        let s = &sites[i % sites.len()];
        let a = &mut addr[i % sites.len()];
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let p = other_pid as usize;
        let va = match s.pattern {
            0 => *a,
            1 => x,
            _ => last[p].wrapping_add(s.stride as u64),
        };
        *a = a.wrapping_add(s.stride as u64);
        last[p] = va;
        out.push(acc(100 + p as u32, va, s.kind, s.size, s.dep, s.ipa));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn synthetic_programs_round_trip(
        sites in proptest::collection::vec(arb_site(), 1..12),
        order in proptest::collection::vec((0usize..12, proptest::bool::weighted(0.1)), 0..400),
        seed in any::<u64>(),
    ) {
        let ev = program(&sites, &order, seed);
        let (bytes, _) = write_trace(&ev);
        prop_assert_eq!(read_back(&bytes), ev);
    }
}

#[test]
fn table_collisions_and_block_boundaries_round_trip() {
    // More contexts than the table has entries (every dep and many ipas: collisions on every
    // entry), mixed with a few hot loops, over enough accesses for several blocks. Each block
    // starts with an empty table: the decoder must start again at the same place.
    let mut ev = Vec::new();
    let mut x: u64 = 0x2545f4914f6cdd1d;
    for i in 0..1_500_000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let e = match i % 4 {
            0 => acc(1, 0x7000_0000 + 8 * i, AccessKind::Read, 8, 0, 3),
            1 => acc(1, 0x9000_0000 - 16 * i, AccessKind::Write, 4, 1, 2),
            2 => acc(
                1,
                x >> (x & 63),
                AccessKind::Read,
                8,
                (x >> 20) as u16 % (DEP_CAP + 1),
                (x >> 40) as u16,
            ),
            _ => acc(2, x, AccessKind::Rmw, 1, 0, 1),
        };
        ev.push(e);
    }
    const _: () = assert!(
        1 << ADDR_BITS < 1024 * 100,
        "the test must overflow the table"
    );
    let (bytes, blocks) = write_trace(&ev);
    assert!(blocks >= 3, "only {blocks} blocks: no boundary tested");
    assert_eq!(read_back(&bytes), ev);
}

#[test]
fn interleaved_strided_streams_cost_almost_nothing() {
    // Three arrays walked in step (a[i] = b[i] + c[i]): version 2 paid a delta per access
    // (their addresses alternate, so no run forms); the stride predictor hits every access
    // after the first of each site.
    let mut ev = Vec::new();
    for i in 0..300_000u64 {
        ev.push(acc(1, 0x10_0000 + 8 * i, AccessKind::Read, 8, 0, 2));
        ev.push(acc(1, 0x90_0000 + 8 * i, AccessKind::Read, 8, 0, 1));
        ev.push(acc(1, 0x190_0000 + 8 * i, AccessKind::Write, 8, 0, 3));
    }
    let (bytes, _) = write_trace(&ev);
    let per_access = bytes.len() as f64 / ev.len() as f64;
    assert!(per_access < 0.01, "{per_access:.4} bytes per access");
    assert_eq!(read_back(&bytes), ev);
}

#[test]
fn a_damaged_address_code_is_an_error_naming_it() {
    // A block whose access says "escaped delta follows" (code 3) and then ends: the decoder must
    // say what it expected and where, not make up an address.
    let mut b = vec![OP_SET_PID, 1, (AccessKind::Read as u8) << 3 | 3];
    put_varint(&mut b, format::ADDR_ESCAPE);
    let mut d = BlockDecoder::default();
    d.reset(1);
    let mut out = Vec::new();
    let err = d.decode_into(&b, &mut out, usize::MAX).unwrap_err();
    assert!(out.is_empty());
    assert_eq!(err.pos, b.len());
    assert!(err.expected.contains("an escaped address delta"), "{err:?}");
    // An address code that is an over-long varint.
    let mut b = vec![OP_SET_PID, 1, (AccessKind::Read as u8) << 3 | 3];
    b.extend([0xff; 11]);
    let mut d = BlockDecoder::default();
    d.reset(1);
    let err = d.decode_into(&b, &mut out, usize::MAX).unwrap_err();
    assert!(err.expected.contains("an address code"), "{err:?}");
}

#[test]
fn flipped_bytes_in_predicted_blocks_never_panic() {
    // A trace whose accesses are nearly all predictor hits, damaged below its CRCs: the
    // decoder sees wrong codes (a hit read as a miss, a table entry left stale) and must give
    // events or an error, never a panic or more events than the block holds.
    let mut ev = Vec::new();
    for i in 0..5000u64 {
        ev.push(acc(1, 0x10_0000 + 8 * i, AccessKind::Read, 8, 0, 2));
        ev.push(acc(
            1,
            0x7fff_0000 - 8 * (i % 7),
            AccessKind::Write,
            8,
            1,
            1,
        ));
    }
    let mut enc = format::BlockEncoder::default();
    for e in &ev {
        enc.other(e);
    }
    let mut x: u64 = 77;
    for _ in 0..2000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut p = enc.buf.clone();
        let i = (x as usize) % p.len();
        p[i] ^= (x >> 32) as u8 | 1;
        let mut d = BlockDecoder::default();
        d.reset(enc.events);
        let mut out = Vec::new();
        let _ = d.decode_into(&p, &mut out, usize::MAX);
        assert!(out.len() as u64 <= enc.events);
    }
}
