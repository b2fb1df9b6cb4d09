//! Experiment: validate's and calibrate's DRAM latency chase on the model (one dependent chase,
//! one line of each 128-byte pair of a 2 x FOOT region, random order, MADV_HUGEPAGE memory
//! faulted in first: `validate::patterns::latency_chase`), with the per-hop time breakdown, the
//! walk's references by the place that served them, the host dimension's counters and the LLC's
//! expired lines.
//!
//! `cargo run --release -p splab-sim --example latency_walk -- MACHINE FOOT_MIB [VARIANT...]`
//! where a VARIANT changes the machine before the run: `nolife` (no LLC lifetime nor curve),
//! `nocurve` (the threshold `lifetime_ns` alone), `hostpwc=N` (the host's PDE cache of N
//! entries), `ntlb=N`, `identity` (host placement), `dram=N` (cycles), `llc=MIB` (the LLC's size).
mod common;

use splab_sim::engine::{CheckMode, Engine};
use splab_sim::hw::host_frames::HostPlacement;
use splab_sim::hw::Machine;
use splab_sim::policy::Policy;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let machine = a.get(1).map(|s| s.as_str()).unwrap_or("skylake");
    let foot_mib: usize = a.get(2).map(|s| s.parse().unwrap()).unwrap_or(256);
    let mut m = Machine::from_spec(machine).unwrap();
    for v in &a[3.min(a.len())..] {
        let (k, val) = v.split_once('=').unwrap_or((v.as_str(), ""));
        match k {
            "nolife" => {
                m.cache_lifetimes.clear();
                m.cache_lifetime_curves.clear();
            }
            "nocurve" => m.cache_lifetime_curves.clear(),
            "hostpwc" => {
                let n = m.nested.as_mut().unwrap();
                let last = n.pwc_entries.len() - 1;
                n.pwc_entries[last] = val.parse().unwrap();
            }
            "ntlb" => m.nested.as_mut().unwrap().ntlb_entries = val.parse().unwrap(),
            "identity" => m.nested.as_mut().unwrap().placement = HostPlacement::Identity,
            "dram" => m.caches.dram_latency = val.parse().unwrap(),
            "llc" => {
                let l = m.caches.levels.last_mut().unwrap();
                l.size_bytes = val.parse::<u64>().unwrap() << 20;
            }
            _ => panic!("unknown variant {v}"),
        }
    }
    let foot = foot_mib << 20;
    let ns = 1e9 / m.freq_hz as f64;
    let mut p = Policy::from_spec("linux-madvise").unwrap();
    p.resolve(&m).unwrap();
    let mut e = Engine::new(m, p, CheckMode::Off, None);
    let pid = e.spawn().unwrap();
    let base = common::thp_region(&mut e, pid, 2 * foot);
    // bench::random_lines(2 * foot): one line of each 128-byte pair, shuffled.
    let nodes = common::random_lines(2 * foot, &mut common::Rng::new());
    let n = nodes.len();
    let mut chase = common::Chase {
        base,
        nodes: &nodes,
        pos: 0,
    };
    let mut go = |e: &mut Engine, hops: usize, first: bool| chase.go(e, pid, hops, first);
    // patterns::model_rounds(n, 1)
    let warm = (2 * n).clamp(1 << 12, 1 << 18);
    let rounds = n.clamp(1 << 14, 1 << 17);
    go(&mut e, warm, true);
    e.start_measuring();
    let b0 = e.os.hw.core.breakdown();
    let w0 = e.os.hw.walker.refs_by_level();
    let n0 = e.os.hw.walker.nested_stats();
    let pwc0 = e.os.hw.walker.pwc_hits;
    let c0s = e.os.hw.caches.stats();
    let t0 = e.os.hw.tlb.stats();
    let c0 = e.clock();
    go(&mut e, rounds, false);
    let c1 = e.clock();
    let b = e.os.hw.core.breakdown();
    let w1 = e.os.hw.walker.refs_by_level();
    let n1 = e.os.hw.walker.nested_stats();
    let c1s = e.os.hw.caches.stats();
    let t1 = e.os.hw.tlb.stats();
    let h = rounds as f64;
    let d = |x: u64, y: u64| (x - y) as f64 / h;
    println!(
        "{machine} foot={foot_mib}MiB {:?}: {:.2} ns/hop = {:.1} cycles/hop",
        &a[3.min(a.len())..],
        (c1 - c0) as f64 * ns / h,
        (c1 - c0) as f64 / h
    );
    println!(
        "  cycles/hop: compute {:.1} tlb_hit {:.1} walk L1/L2/LLC/DRAM {:.1}/{:.1}/{:.1}/{:.1} queue {:.1} data L1/L2/LLC/DRAM {:.1}/{:.1}/{:.1}/{:.1} dq {:.1}",
        d(b.compute, b0.compute),
        d(b.tlb_hit, b0.tlb_hit),
        d(b.walk_by_level[0], b0.walk_by_level[0]),
        d(b.walk_by_level[1], b0.walk_by_level[1]),
        d(b.walk_by_level[2], b0.walk_by_level[2]),
        d(b.walk_by_level[3], b0.walk_by_level[3]),
        d(b.walk_queue, b0.walk_queue),
        d(b.data_by_level[0], b0.data_by_level[0]),
        d(b.data_by_level[1], b0.data_by_level[1]),
        d(b.data_by_level[2], b0.data_by_level[2]),
        d(b.data_by_level[3], b0.data_by_level[3]),
        d(b.data_queue, b0.data_queue)
    );
    println!(
        "  walk refs/hop L1/L2/LLC/DRAM: {}",
        (0..4)
            .map(|k| format!("{:.3}", d(w1[k], w0[k])))
            .collect::<Vec<_>>()
            .join(" / ")
    );
    println!(
        "  host refs/hop {:.3}, ntlb hits/hop {:.3}, host pwc hits/hop {:.3}, guest pwc hits/hop {:.3}",
        d(n1.walk_refs_host, n0.walk_refs_host),
        d(n1.ntlb_hits, n0.ntlb_hits),
        d(n1.host_pwc_hits, n0.host_pwc_hits),
        d(e.os.hw.walker.pwc_hits, pwc0)
    );
    println!(
        "  host refs/hop L1/L2/LLC/DRAM: {}",
        (0..4)
            .map(|k| format!(
                "{:.3}",
                d(n1.walk_refs_host_by_level[k], n0.walk_refs_host_by_level[k])
            ))
            .collect::<Vec<_>>()
            .join(" / ")
    );
    for (x, y) in c1s.iter().zip(&c0s) {
        println!(
            "  {}: hits/hop {:.3} misses/hop {:.3} expired/hop {:.3}",
            x.name,
            d(x.hits, y.hits),
            d(x.misses, y.misses),
            d(x.expired, y.expired)
        );
    }
    for (x, y) in t1.iter().zip(&t0) {
        println!(
            "  tlb {}: hits/hop {:.3} misses/hop {:.3}",
            x.name,
            d(x.hits, y.hits),
            d(x.misses, y.misses)
        );
    }
}
