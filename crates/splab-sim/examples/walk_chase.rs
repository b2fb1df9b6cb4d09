//! Experiment: validate's "1 line per 4KB page" chase on the model, with the per-hop time
//! breakdown. `cargo run --release -p splab-sim --example walk_chase -- MACHINE PAGES [4k|4ks|huge|packed]
//! [CHAINS] [pair|nopair]` (CHAINS interleaved chains, each over its share of the pages, as
//! validate's "walks: 8 chases" row; default 1; `pair`/`nopair`: L2's pair fill on or off).
mod common;

use splab_sim::engine::{CheckMode, Engine};
use splab_sim::hw::Machine;
use splab_sim::policy::Policy;
use splab_sim::units::{Access, MemOp};
use splab_sim::vm::{Advice, MmapReq};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let machine = a.get(1).map(|s| s.as_str()).unwrap_or("skylake");
    let pages: usize = a.get(2).map(|s| s.parse().unwrap()).unwrap_or(16384);
    let mode = a.get(3).cloned().unwrap_or("4k".into());
    // `4ks`: 4KB pages on scattered frames, each in its own 2MB guest-physical range (as a
    // long-running guest's free lists scatter a fresh region: docs/validation.md, "Walks").
    let scattered = mode == "4ks";
    // `frames=FILE`: 4KB pages on the frames listed in FILE (one pfn a line, in the region's
    // address order), as scripts/walk-ranges.c writes them for its native region.
    let listed: Option<Vec<u64>> = mode.strip_prefix("frames=").map(|f| {
        std::fs::read_to_string(f)
            .expect("frames file")
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    });
    let huge = mode != "4k" && !scattered && listed.is_none();
    let packed = mode == "packed";
    let k: usize = a.get(4).map(|s| s.parse().unwrap()).unwrap_or(1).max(1);
    const PAGE: usize = 4096;
    const HUGE: usize = 2 << 20;
    let mut m = Machine::from_spec(machine).unwrap();
    // `pair` after CHAINS: L2's pair fill on (`Machine::pair_lines`), whatever the file says;
    // `nopair`: off.
    match a.get(5).map(|s| s.as_str()) {
        Some("pair") => m.pair_lines = true,
        Some("nopair") => m.pair_lines = false,
        _ => {}
    }
    // `recent=F` after that: the share of pair lines filled as most recent.
    if let Some(f) = a.get(6).and_then(|s| s.strip_prefix("recent=")) {
        m.pair_recent = f.parse().unwrap();
    }
    let ns = 1e9 / m.freq_hz as f64;
    let mut p = Policy::from_spec("linux-madvise").unwrap();
    p.resolve(&m).unwrap();
    let mut e = Engine::new(m, p, CheckMode::Off, None);
    let pid = e.spawn().unwrap();
    let len = (pages * PAGE).div_ceil(HUGE) * HUGE;
    let raw_len = (len + HUGE) as u64;
    let raw = e.mmap(pid, MmapReq::anon(raw_len)).unwrap();
    e.madvise(
        pid,
        raw,
        raw_len,
        if huge {
            Advice::HugePage
        } else {
            Advice::NoHugePage
        },
    )
    .unwrap();
    let base = raw.div_ceil(HUGE as u64) * HUGE as u64;
    if scattered {
        // 8 pages in each of 2,048 2MB guest-physical ranges (as the 1,660-2,466 of the
        // native 16384-page regions), the ranges spread over 16 GiB from 1 GiB on by a
        // bijection on 13 bits, each page at its own 64-frame slot of its range, at a hashed
        // frame in the slot: host-table lines and data lines over all the caches' sets.
        let n = (len / PAGE) as u64;
        let h = |x: u64| x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
        e.place_frames((0..n).map(|i| {
            let mut r = ((i / 8) * 0x9E37) & 8191;
            r ^= r >> 7;
            (1 << 18) + 512 * r + 64 * (i % 8) + h(i) % 64
        }));
    }
    if let Some(f) = &listed {
        e.place_frames(f.iter().copied());
    }
    e.access_run(pid, base, PAGE as i64, (len / PAGE) as u64, MemOp::Store, 1)
        .unwrap();
    // per_page_nodes: pages in random order, a random line in each
    let mut rng = common::Rng::new();
    let mut order: Vec<usize> = (0..pages).collect();
    rng.shuffle(&mut order);
    let nodes: Vec<u64> = if packed {
        order.iter().map(|&p| (p * 128) as u64).collect()
    } else {
        order
            .iter()
            .map(|&p| (p * PAGE) as u64 + (rng.next() % 64) * 64)
            .collect()
    };
    // Chain c walks nodes [c * pages / k, (c + 1) * pages / k) in order; hop i is chain i % k's.
    let go = |e: &mut Engine, hops: usize, first: bool| {
        let mut buf = Vec::new();
        let per = pages / k;
        for i in 0..hops {
            let (c, j) = (i % k, (i / k) % per);
            buf.push(Access::new(
                base + nodes[c * per + j],
                MemOp::Load,
                if first && i < k { 0 } else { k as u16 },
                if k > 1 { 2 } else { 1 },
            ));
            if buf.len() == 4096 {
                e.accesses(pid, &buf).unwrap();
                buf.clear();
            }
        }
        e.accesses(pid, &buf).unwrap();
    };
    let warm = (2 * pages).clamp(1 << 12, 1 << 18);
    let rounds = pages.clamp(1 << 14, 1 << 17);
    go(&mut e, warm, true);
    e.start_measuring();
    let w0 = e.os.hw.walker.refs_by_level();
    let n0 = e.os.hw.walker.nested_stats();
    let pwc0 = e.os.hw.walker.pwc_hits;
    let c0 = e.clock();
    go(&mut e, rounds, false);
    let c1 = e.clock();
    let b = e.os.hw.core.breakdown();
    let w1 = e.os.hw.walker.refs_by_level();
    let n1 = e.os.hw.walker.nested_stats();
    let h = rounds as f64;
    println!(
        "{machine} pages={pages} mode={mode}: {:.2} ns/hop = {:.2} cycles/hop",
        (c1 - c0) as f64 * ns / h,
        (c1 - c0) as f64 / h
    );
    println!("  compute {:.2} tlb_hit {:.2} walk L1/L2/LLC/DRAM {:.2}/{:.2}/{:.2}/{:.2} queue {:.2} data L1/L2/LLC/DRAM {:.2}/{:.2}/{:.2}/{:.2} dq {:.2}",
        b.compute as f64 / h, b.tlb_hit as f64 / h,
        b.walk_by_level[0] as f64 / h, b.walk_by_level[1] as f64 / h, b.walk_by_level[2] as f64 / h, b.walk_by_level[3] as f64 / h, b.walk_queue as f64 / h,
        b.data_by_level[0] as f64 / h, b.data_by_level[1] as f64 / h, b.data_by_level[2] as f64 / h, b.data_by_level[3] as f64 / h, b.data_queue as f64 / h);
    println!(
        "  walk refs per hop by level L1/L2/LLC/DRAM: {:?}",
        (0..4)
            .map(|k| format!("{:.3}", (w1[k] - w0[k]) as f64 / h))
            .collect::<Vec<_>>()
    );
    println!(
        "  host refs per hop by level L1/L2/LLC/DRAM: {:?}",
        (0..4)
            .map(|k| format!(
                "{:.3}",
                (n1.walk_refs_host_by_level[k] - n0.walk_refs_host_by_level[k]) as f64 / h
            ))
            .collect::<Vec<_>>()
    );
    println!("  host refs/hop {:.3} ntlb hits/hop {:.3} host pwc hits/hop {:.3} guest pwc hits/hop {:.3}",
        (n1.walk_refs_host - n0.walk_refs_host) as f64 / h, (n1.ntlb_hits - n0.ntlb_hits) as f64 / h,
        (n1.host_pwc_hits - n0.host_pwc_hits) as f64 / h, (e.os.hw.walker.pwc_hits - pwc0) as f64 / h);
}
