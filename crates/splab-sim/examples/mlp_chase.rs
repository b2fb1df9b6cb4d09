//! Experiment: validate's "MLP: K chases" rows on the model, for several K, with the per-hop
//! time breakdown: K interleaved dependent chases over one line of each 128-byte pair of a
//! 2 x FOOT region of MADV_HUGEPAGE memory, in random order (calibrate's `random_lines`).
//! `cargo run --release -p splab-sim --example mlp_chase -- MACHINE FOOT_MIB [K,K,...]`
//! Native counterpart: scripts/mlp-load.c (docs/validation.md, "Loaded latency: the MLP rows").
mod common;

use splab_sim::engine::{CheckMode, Engine};
use splab_sim::hw::Machine;
use splab_sim::policy::Policy;
use splab_sim::units::{Access, MemOp};
use splab_sim::vm::{Advice, MmapReq};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let machine = a.get(1).map(|s| s.as_str()).unwrap_or("skylake");
    let foot: usize = a.get(2).map(|s| s.parse().unwrap()).unwrap_or(256) << 20;
    let ks: Vec<usize> = a
        .get(3)
        .map(|s| s.split(',').map(|k| k.parse().unwrap()).collect())
        .unwrap_or(vec![1, 2, 4, 8, 12, 14, 16]);
    const HUGE: usize = 2 << 20;
    let m = Machine::from_spec(machine).unwrap();
    let ns = 1e9 / m.freq_hz as f64;
    let span = 2 * foot;
    let nodes = common::random_lines(span, &mut common::Rng::new());
    let n = nodes.len();
    for &k in &ks {
        let mut p = Policy::from_spec("linux-madvise").unwrap();
        p.resolve(&m).unwrap();
        let mut e = Engine::new(m.clone(), p, CheckMode::Off, None);
        let pid = e.spawn().unwrap();
        let raw_len = (span + HUGE) as u64;
        let raw = e.mmap(pid, MmapReq::anon(raw_len)).unwrap();
        e.madvise(pid, raw, raw_len, Advice::HugePage).unwrap();
        let base = raw.div_ceil(HUGE as u64) * HUGE as u64;
        e.access_run(pid, base, 4096, (span / 4096) as u64, MemOp::Store, 1)
            .unwrap();
        let per = n / k;
        let mut pos = vec![0usize; k];
        let mut go = |e: &mut Engine, rounds: usize, first: bool| {
            let mut buf = Vec::with_capacity(4096);
            for r in 0..rounds {
                for c in 0..k {
                    let dep = if first && r == 0 { 0 } else { k as u16 };
                    buf.push(Access::new(
                        base + nodes[c * per + pos[c]],
                        MemOp::Load,
                        dep,
                        2,
                    ));
                    pos[c] = (pos[c] + 1) % per;
                    if buf.len() == 4096 {
                        e.accesses(pid, &buf).unwrap();
                        buf.clear();
                    }
                }
            }
            e.accesses(pid, &buf).unwrap();
        };
        let rounds = (per.clamp(1 << 14, 1 << 17)).min(1 << 15);
        go(&mut e, rounds, true);
        e.start_measuring();
        let c0 = e.clock();
        go(&mut e, rounds, false);
        let c1 = e.clock();
        let b = e.os.hw.core.breakdown();
        let h = (rounds * k) as f64;
        let hop = (c1 - c0) as f64 / h;
        println!(
            "K={k:2} hop {:.2} ns ({hop:.1} cycles), per miss {:.1} ns; walk L1/L2/LLC/DRAM {:.1}/{:.1}/{:.1}/{:.1} wq {:.1} data LLC/DRAM {:.1}/{:.1} dq {:.1}",
            hop * ns,
            hop * ns * k as f64,
            b.walk_by_level[0] as f64 / h,
            b.walk_by_level[1] as f64 / h,
            b.walk_by_level[2] as f64 / h,
            b.walk_by_level[3] as f64 / h,
            b.walk_queue as f64 / h,
            b.data_by_level[2] as f64 / h,
            b.data_by_level[3] as f64 / h,
            b.data_queue as f64 / h
        );
    }
}
