//! What the chase experiments share: calibrate's node layouts with the same xorshift stream
//! (seeded as each experiment always was), so that the model runs the patterns validate's rows
//! and the native probes in scripts/ run. Not an example itself.
#![allow(dead_code)]

/// A xorshift64 generator (scripts/chase-common.h's `rnd`).
pub struct Rng(u64);

impl Rng {
    /// The experiments' seed.
    pub fn new() -> Rng {
        Rng(0x9E3779B97F4A7C15)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Fisher-Yates, from the top.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

/// calibrate's `bench::random_lines(span)`: one line of each 128-byte pair of `span` bytes,
/// which of the two at random, all in one random order (byte offsets).
pub fn random_lines(span: usize, rng: &mut Rng) -> Vec<u64> {
    let mut nodes: Vec<u64> = (0..span / 128)
        .map(|i| (i * 128) as u64 + 64 * (rng.next() & 1))
        .collect();
    rng.shuffle(&mut nodes);
    nodes
}

/// A dependent chase over `nodes` (byte offsets from `base`) in the model, as calibrate's and
/// validate's chases: each load depends on the one before (`dep` 1), but the first of the
/// chase's first call; batches of 4096; `pos` carries on where the last call stopped.
pub struct Chase<'a> {
    pub base: u64,
    pub nodes: &'a [u64],
    pub pos: usize,
}

impl Chase<'_> {
    pub fn go(
        &mut self,
        e: &mut splab_sim::engine::Engine,
        pid: splab_sim::units::Pid,
        hops: usize,
        first: bool,
    ) {
        use splab_sim::units::{Access, MemOp};
        let n = self.nodes.len();
        let mut buf = Vec::with_capacity(4096);
        for i in 0..hops {
            buf.push(Access::new(
                self.base + self.nodes[self.pos],
                MemOp::Load,
                if first && i == 0 { 0 } else { 1 },
                1,
            ));
            self.pos = (self.pos + 1) % n;
            if buf.len() == 4096 {
                e.accesses(pid, &buf).unwrap();
                buf.clear();
            }
        }
        e.accesses(pid, &buf).unwrap();
    }
}

/// `bytes` of anonymous memory (rounded up to 2MB), 2MB-aligned, advised MADV_HUGEPAGE and
/// faulted in by one store a page, as calibrate's and validate's chase regions (scripts/
/// chase-common.h's `thp_region`); returns its base address.
pub fn thp_region(
    e: &mut splab_sim::engine::Engine,
    pid: splab_sim::units::Pid,
    bytes: usize,
) -> u64 {
    const PAGE: usize = 4096;
    const HUGE: usize = 2 << 20;
    let len = bytes.div_ceil(HUGE) * HUGE;
    let raw_len = (len + HUGE) as u64;
    let raw = e.mmap(pid, splab_sim::vm::MmapReq::anon(raw_len)).unwrap();
    e.madvise(pid, raw, raw_len, splab_sim::vm::Advice::HugePage)
        .unwrap();
    let base = raw.div_ceil(HUGE as u64) * HUGE as u64;
    e.access_run(
        pid,
        base,
        PAGE as i64,
        (len / PAGE) as u64,
        splab_sim::units::MemOp::Store,
        1,
    )
    .unwrap();
    base
}
