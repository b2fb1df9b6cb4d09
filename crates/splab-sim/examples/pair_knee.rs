//! Experiment: scripts/pair-knee.c on the model. A dependent random chase over THP memory at
//! data footprint F: one line of each 128-byte pair of 2F bytes (which line at random,
//! calibrate's pattern) or every line of F bytes; ns a hop and L2's hits and misses a hop.
//! `cargo run --release -p splab-sim --example pair_knee -- MACHINE KIB... [pair|nopair]`
//! [recent=F]` (`pair`/`nopair`: L2's pair fill on or off, whatever the machine says; F: the
//! share of pair lines filled as most recent, `Machine::pair_recent`).
mod common;

use splab_sim::engine::{CheckMode, Engine};
use splab_sim::hw::Machine;
use splab_sim::policy::Policy;

fn run(machine: &str, kib: usize, every: bool, pair: Option<bool>) -> (f64, f64, f64) {
    let mut m = Machine::from_spec(machine).unwrap();
    if let Some(p) = pair {
        m.pair_lines = p;
    }
    if let Some(f) =
        std::env::args().find_map(|s| s.strip_prefix("recent=").map(|f| f.parse::<f64>().unwrap()))
    {
        m.pair_recent = f;
    }
    let ns = 1e9 / m.freq_hz as f64;
    let mut p = Policy::from_spec("linux-madvise").unwrap();
    p.resolve(&m).unwrap();
    let mut e = Engine::new(m, p, CheckMode::Off, None);
    let pid = e.spawn().unwrap();
    let foot = kib << 10;
    let base = common::thp_region(&mut e, pid, 2 * foot);
    let mut rng = common::Rng::new();
    let nodes: Vec<u64> = if every {
        let mut v: Vec<u64> = (0..foot / 64).map(|i| (i * 64) as u64).collect();
        rng.shuffle(&mut v);
        v
    } else {
        common::random_lines(2 * foot, &mut rng)
    };
    let n = nodes.len();
    let mut chase = common::Chase {
        base,
        nodes: &nodes,
        pos: 0,
    };
    let mut go = |e: &mut Engine, hops: usize, first: bool| chase.go(e, pid, hops, first);
    go(&mut e, 3 * n, true);
    e.start_measuring();
    let s0 = e.os.hw.caches.stats();
    let c0 = e.clock();
    let rounds = (4 * n).max(1 << 16);
    go(&mut e, rounds, false);
    let c1 = e.clock();
    let s1 = e.os.hw.caches.stats();
    let h = rounds as f64;
    (
        (c1 - c0) as f64 * ns / h,
        (s1[1].hits - s0[1].hits) as f64 / h,
        (s1[1].misses - s0[1].misses) as f64 / h,
    )
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let machine = a.get(1).map(|s| s.as_str()).unwrap_or("skylake");
    let pair = a.iter().find_map(|s| match s.as_str() {
        "pair" => Some(true),
        "nopair" => Some(false),
        _ => None,
    });
    for k in a[2..]
        .iter()
        .filter(|s| s.as_str() != "pair" && s.as_str() != "nopair" && !s.starts_with("recent="))
    {
        let kib: usize = k.parse().unwrap();
        let (t1, h1, m1) = run(machine, kib, false, pair);
        let (t2, h2, m2) = run(machine, kib, true, pair);
        println!(
            "{kib:5} KiB of lines: one-of-pair {t1:6.2} ns (L2 hits {h1:.3} misses {m1:.3} a hop)   every-line {t2:6.2} ns (L2 hits {h2:.3} misses {m2:.3})"
        );
    }
}
