//! Compositions (`seq(...)`, `par(...)`) and the workloads of seed 000 6.5 (`fftw`, `seeker`).

mod common;

use common::{anon, engine, run, try_run};
use serde_json::Value;
use splab_sim::rng::Rng;
use splab_sim::units::{Access, MemOp};

const M: &str = "alpha21264";

fn stats(r: &splab_sim::report::Report) -> Value {
    r.workload_stats.clone().expect("workload_stats")
}

fn comp(s: &Value, i: usize, key: &str) -> u64 {
    s["components"][i][key].as_u64().unwrap()
}

const A: &str = "gups:size=2M,updates=20000";
const B: &str = "tree:nodes=2000,ops=500";
/// Longer than one event, so that it and `A` both wait for each other.
const C: &str = "gups:size=4M,updates=30000";

#[test]
fn seq_runs_each_after_the_other_on_one_machine() {
    let a = run(M, "navarro", A);
    let b = run(M, "navarro", B);
    let r = run(M, "navarro", &format!("seq({A},{B})"));
    assert_eq!(r.accesses.total, a.accesses.total + b.accesses.total);
    let s = stats(&r);
    assert_eq!(s["compose"], "seq");
    assert_eq!(comp(&s, 0, "start_cycles"), 0);
    // The second starts where the first ended (its process exited at that point).
    assert_eq!(comp(&s, 1, "start_cycles"), comp(&s, 0, "end_cycles"));
    assert_eq!(comp(&s, 1, "end_cycles"), r.time.cycles_total);
    assert_eq!(s["phases"].as_array().unwrap().len(), 1);
    assert_eq!(
        s["phases"][0].as_f64().unwrap(),
        s["components"][1]["start_seconds"].as_f64().unwrap()
    );
    // Everything the first left mapped was released when its process exited.
    assert!(comp(&s, 0, "end_cycles") > 0);
    assert_eq!(r.memory.footprint_end_bytes, 0);
    assert_eq!(
        r.config.workload,
        "seq(gups:size=2M,updates=20000,ipa=12,tree:nodes=2000,ops=500)"
    );
}

#[test]
fn par_interleaves_and_shares_the_cpu() {
    let a = run(M, "navarro", A);
    let c = run(M, "navarro", C);
    let r = run(M, "navarro", &format!("par({A},{C})"));
    assert_eq!(r.accesses.total, a.accesses.total + c.accesses.total);
    let s = stats(&r);
    assert_eq!(s["compose"], "par");
    assert!(s.get("phases").is_none());
    // Both make progress before either ends.
    let first_end = comp(&s, 0, "end_cycles").min(comp(&s, 1, "end_cycles"));
    let last_start = comp(&s, 0, "start_cycles").max(comp(&s, 1, "start_cycles"));
    assert!(last_start < first_end, "{s}");
    // Each waited for the other: its CPU time is less than its span.
    for i in 0..2 {
        assert!(
            comp(&s, i, "cpu_cycles") < comp(&s, i, "end_cycles") - comp(&s, i, "start_cycles"),
            "{s}"
        );
    }
    // No idle time: the CPU times add up to the clock exactly.
    assert_eq!(
        comp(&s, 0, "cpu_cycles") + comp(&s, 1, "cpu_cycles"),
        r.time.cycles_total
    );
}

fn without_sim(r: &splab_sim::report::Report) -> Value {
    let mut v = serde_json::to_value(r).unwrap();
    v.as_object_mut().unwrap().remove("sim");
    v
}

#[test]
fn par_is_deterministic() {
    let w = format!("par({A},seeker:count=3,{B})");
    let x = run(M, "navarro", &w);
    let y = run(M, "navarro", &w);
    assert_eq!(without_sim(&x), without_sim(&y));
}

#[test]
fn a_sleeper_is_charged_only_the_time_it_ran() {
    let r = run(M, "navarro", &format!("par({C},seeker:count=2)"));
    let s = stats(&r);
    let ran = comp(&s, 1, "cpu_cycles");
    let alone = run(M, "navarro", "seeker:count=1").time.cycles_total;
    // Two operations, each about what one costs alone; not the other component's time.
    assert!(ran < 4 * alone, "{ran} vs {alone}: {s}");
    assert_eq!(
        comp(&s, 0, "cpu_cycles") + ran + r.time.breakdown.idle,
        r.time.cycles_total
    );
}

#[test]
fn par_with_a_sleeper_idles_only_when_all_sleep() {
    // seeker alone: 3 operations 0.2 s apart, idle in between.
    let r = run(M, "navarro", "par(seeker:count=3)");
    let freq = 500_000_000u64; // alpha21264
    assert!(
        r.time.cycles_total >= 2 * freq / 5,
        "{}",
        r.time.cycles_total
    );
    let s = stats(&r);
    assert!(comp(&s, 0, "cpu_cycles") < freq / 100, "{s}");
}

#[test]
fn composition_errors_name_the_position() {
    let e = try_run(M, "navarro", "seq(gups:size=1M,nope)")
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("'nope'") && e.contains("position 18"), "{e}");
    let e = try_run(M, "navarro", "par(gups").err().unwrap().to_string();
    assert!(e.contains("missing ')'"), "{e}");
    let e = try_run(M, "navarro", "par()").err().unwrap().to_string();
    assert!(e.contains("empty list"), "{e}");
    // A failing component stops the whole composition with its own error.
    let e = try_run(M, "navarro", &format!("par({B},gups:size=1T)"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("memory") || e.contains("1T") || e.contains("size"),
        "{e}"
    );
}

#[test]
fn fftw_access_counts_are_exact() {
    let r = run(M, "base", "fftw:n=8");
    let points = 8 * 8 * 8;
    // Fill: 2 stores a point; three passes of 64 lines: 2 loads and 2 stores a point.
    assert_eq!(r.accesses.reads, 3 * 2 * points);
    assert_eq!(r.accesses.writes, 2 * points + 3 * 2 * points);
    assert_eq!(r.accesses.total, 14 * points);
    // Per line: 5 x 8 x log2 8 = 120 flops + 4 x 8 x 1 radix pass = 152 instructions, 38 cycles
    // at the 21264's width of 4.
    assert_eq!(r.time.cycles_compute, 3 * 64 * 38);
    assert_eq!(r.config.workload, "fftw:n=8,repeat=1,alloc=brk");
}

#[test]
fn seeker_is_satisfied_on_an_unfragmented_machine() {
    let r = run(M, "navarro", "seeker:count=5");
    let s = stats(&r);
    assert_eq!(s["chunk_bytes"], 512 << 10);
    assert_eq!(s["chunks"], 10); // two 512KB chunks per 1MB mapping
    assert_eq!(s["chunks_contiguous"], 10);
    assert_eq!(s["late_operations"], 0);
    // Four sleeps of 0.2 s on the 500MHz clock.
    assert!(r.time.cycles_total >= 4 * 100_000_000);
    assert!(r.time.breakdown.idle > 0);
}

#[test]
fn seeker_is_refused_contiguity_on_a_fragmented_machine() {
    // 16MB free; another process touches 15MB of it and frees every other base page.
    let free = 16 << 20;
    let (mut e, pid) = engine(M, "navarro:pagedaemon=off", Some(free));
    let len = 15 << 20;
    let base = e.mmap(pid, anon(len)).unwrap();
    let page = 8192;
    let mut batch = Vec::new();
    for p in 0..len / page {
        batch.push(Access::new(base + p * page, MemOp::Store, 0, 1));
    }
    for b in batch.chunks(4096) {
        e.accesses(pid, b).unwrap();
    }
    for p in (0..len / page).step_by(2) {
        e.munmap(pid, base + p * page, page).unwrap();
    }
    let mut w = splab_sim::workload::parse("seeker:count=5").unwrap();
    w.run(&mut e, &mut Rng::new(1)).unwrap();
    let s = w.stats().unwrap();
    assert_eq!(s["chunks"], 10);
    assert!(
        s["chunks_contiguous"].as_u64().unwrap() < 10,
        "fragmented memory satisfied every chunk: {s}"
    );
}

/// Seed 000 6.5's concurrent experiment in small: the seeker starts once the web server is
/// warm (`after=warm`) and stops once it has served every request (`until=served`).
#[test]
fn the_seeker_runs_between_the_web_servers_marks() {
    let w = "par(web:warmup=300,requests=300,files=200,seeker:after=warm,until=served)";
    // From a cold page cache, so that requests wait for storage and take simulated seconds.
    let r = splab_sim::run(&splab_sim::RunSpec {
        machine: M.into(),
        policy: "navarro".into(),
        workload: w.into(),
        seed: 1,
        check: false.into(),
        free_bytes: None,
        page_cache: splab_sim::vm::object::PageCache::Cold,
        dump_reservations: false,
    })
    .unwrap();
    let s = stats(&r);
    let (web, seeker) = (&s["components"][0], &s["components"][1]);
    let freq = 500_000_000f64; // alpha21264
    let web_end = web["end_cycles"].as_u64().unwrap() as f64 / freq;
    let measured = web["stats"]["measured_seconds"].as_f64().unwrap();
    let warm = web_end - measured;
    let first = seeker["stats"]["first_operation_seconds"].as_f64().unwrap();
    // It waited for the mark, looking once a period (0.2 s), and began within one of it.
    assert!(
        first >= warm && first < warm + 0.2 + 1e-9,
        "warm {warm}, first {first}"
    );
    let ops = seeker["stats"]["operations"].as_u64().unwrap();
    assert!(ops >= 1, "{seeker}");
    // It stopped at the first period after the server was done: at most one period past it.
    let seeker_end = seeker["end_cycles"].as_u64().unwrap() as f64 / freq;
    assert!(
        seeker_end < web_end + 0.2 + 0.1,
        "{seeker_end} vs {web_end}"
    );
    assert!(
        ops as f64 <= 1.0 + measured * 5.0,
        "{ops} ops in {measured} s"
    );
    assert_eq!(web["stats"]["warmup_requests"], 300);
    assert_eq!(
        r.config.workload,
        "par(web:warmup=300,requests=300,files=200,zipf=0.75,maps=2000,mode=mmap,seeker:size=1M,rate=5,after=warm,until=served)"
    );
}

#[test]
fn a_mark_nobody_can_set_is_an_error_or_the_end() {
    // Alone, nothing can set it.
    let e = try_run(M, "navarro", "seeker:after=warm")
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("after=warm") && e.contains("no other component"),
        "{e}"
    );
    // In par, the other component ends without setting it (no warmup=).
    let e = try_run(
        M,
        "navarro",
        "par(web:requests=20,files=20,seeker:after=warm)",
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("after=warm"), "{e}");
    // until= a mark never set: the seeker stops when nothing else runs.
    let r = run(
        M,
        "navarro",
        "par(web:requests=20,files=20,seeker:until=nope)",
    );
    let ops = stats(&r)["components"][1]["stats"]["operations"]
        .as_u64()
        .unwrap();
    assert!((1..=3).contains(&ops), "{ops}");
    let e = try_run(M, "navarro", "seeker:after=")
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("after= needs the name of a mark"), "{e}");
}
