//! Reports: the `splab.report.v1` JSON document, the readable text summary, and comparisons.
//!
//! The field names under `schema` are a contract (design.md); fields may be added, never renamed.
//! Everything outside `sim` is a deterministic function of machine, policy, workload and seed.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::engine::Engine;
use crate::units::fmt_size;
use crate::vm::stats::FaultStats;

pub const SCHEMA: &str = "splab.report.v1";

#[derive(Clone, Debug, Serialize)]
pub struct Config {
    pub machine: String,
    pub policy: String,
    pub workload: String,
    pub mem_bytes: u64,
    pub seed: u64,
    /// Bytes free at start (`--free`); the rest wired. Equal to mem_bytes when not restricted.
    pub free_bytes: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Accesses {
    pub total: u64,
    pub reads: u64,
    pub writes: u64,
    pub ifetch: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct TlbLevel {
    pub name: String,
    pub hits: u64,
    pub misses: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct TlbReport {
    pub levels: Vec<TlbLevel>,
    /// Accesses that missed every TLB level.
    pub walks: u64,
    /// Page-table memory references made by walks (fewer with page-walk-cache hits).
    pub walk_refs: u64,
    pub pwc_hits: u64,
    pub walk_cache_hits: u64,
    pub walk_cache_misses: u64,
    pub dirty_assists: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Pages {
    pub sizes: Vec<u64>,
    pub promotions_by_size: Map<String, Value>,
    pub demotions_by_size: Map<String, Value>,
    pub mapped_peak_by_size: Map<String, Value>,
}

pub use crate::reserv::ReservStats as Reservations;

#[derive(Clone, Debug, Serialize)]
pub struct Memory {
    pub footprint_peak_bytes: u64,
    pub footprint_end_bytes: u64,
    /// Peak bytes mapped by superpages (of any size) at one time.
    pub superpage_peak_bytes: u64,
    pub zeroed_bytes: u64,
    pub copied_bytes: u64,
    pub io_read_bytes: u64,
    pub io_write_bytes: u64,
    pub contiguity_end: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Latency {
    pub p50: u64,
    pub p95: u64,
    pub p99: u64,
    pub max: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Time {
    pub cycles_total: u64,
    pub cycles_access: u64,
    pub cycles_tlb: u64,
    pub cycles_fault: u64,
    pub cycles_io: u64,
    pub cycles_kernel: u64,
    pub cycles_compute: u64,
    /// Parts of cycles_fault and cycles_kernel spent promoting and demoting.
    pub cycles_promotion: u64,
    pub cycles_demotion: u64,
    pub seconds: f64,
    pub background_cycles: u64,
    pub fault_latency_ns: Latency,
}

#[derive(Clone, Debug, Serialize)]
pub struct SeriesReport {
    pub t: Vec<f64>,
    pub footprint_bytes: Vec<u64>,
    pub superpage_bytes: Vec<u64>,
    pub contiguity: Vec<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Sim {
    pub wall_seconds: f64,
    pub events: u64,
    pub accesses_per_second: f64,
    pub version: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub config: Config,
    pub accesses: Accesses,
    pub tlb: TlbReport,
    pub faults: FaultStats,
    pub pages: Pages,
    pub reservations: Reservations,
    pub memory: Memory,
    pub time: Time,
    pub series: SeriesReport,
    /// What the workload itself counted (a trace replay's skipped or lazily mapped accesses).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload_stats: Option<serde_json::Value>,
    /// `--dump-reservations`: the reservation lists at the end (text; not in the JSON).
    #[serde(skip)]
    pub dump: Option<String>,
    pub sim: Sim,
}

fn by_size(sizes: &[u64], values: &[u64]) -> Map<String, Value> {
    sizes
        .iter()
        .zip(values)
        .map(|(&s, &v)| (fmt_size(s), Value::from(v)))
        .collect()
}

impl Report {
    /// Builds the report of a finished run.
    pub fn from_engine(e: &Engine, config: Config, wall_seconds: f64) -> Report {
        let os = &e.os;
        let m = &os.machine;
        let acc = &os.acc;
        let st = &os.stats;
        let sizes = m.page_sizes();
        let cycles_total = e.clock();
        let superpage_orders: Vec<u8> = (1..sizes.len()).map(|c| m.order_of(c)).collect();
        let lat = &st.fault_latency;
        Report {
            schema: SCHEMA,
            config,
            accesses: Accesses {
                total: acc.total,
                reads: acc.reads,
                writes: acc.writes,
                ifetch: acc.ifetch,
            },
            tlb: TlbReport {
                levels: os
                    .hw
                    .tlb
                    .stats()
                    .into_iter()
                    .map(|l| TlbLevel {
                        name: l.name,
                        hits: l.hits,
                        misses: l.misses,
                    })
                    .collect(),
                walks: acc.walks,
                walk_refs: acc.walk_refs,
                pwc_hits: os.hw.walker.pwc_hits,
                walk_cache_hits: os.hw.walker.cache.hits,
                walk_cache_misses: os.hw.walker.cache.misses,
                dirty_assists: acc.dirty_assists,
            },
            faults: st.faults.clone(),
            pages: Pages {
                promotions_by_size: by_size(&sizes[1..], &st.promotions[1..]),
                demotions_by_size: by_size(&sizes[1..], &st.demotions[1..]),
                mapped_peak_by_size: by_size(&sizes, &st.mapped_peak),
                sizes,
            },
            reservations: os
                .reserv
                .as_ref()
                .map(|r| r.stats.clone())
                .unwrap_or_default(),
            memory: Memory {
                footprint_peak_bytes: st.footprint_peak_frames << m.base_shift(),
                footprint_end_bytes: os.footprint_bytes(),
                superpage_peak_bytes: st.superpage_peak_bytes,
                zeroed_bytes: st.zeroed_bytes,
                copied_bytes: st.copied_bytes,
                io_read_bytes: st.io_read_bytes,
                io_write_bytes: st.io_write_bytes,
                contiguity_end: os.phys.buddy.contiguity(&superpage_orders),
            },
            time: Time {
                cycles_total,
                cycles_access: acc.cycles_access,
                cycles_tlb: acc.cycles_tlb,
                cycles_fault: st.cycles_fault,
                cycles_io: st.cycles_io,
                cycles_kernel: st.cycles_kernel,
                cycles_compute: e.compute_cycles,
                cycles_promotion: st.cycles_promotion,
                cycles_demotion: st.cycles_demotion,
                seconds: cycles_total as f64 / m.freq_hz as f64,
                background_cycles: e.background_cycles,
                fault_latency_ns: Latency {
                    p50: lat.quantile(0.50),
                    p95: lat.quantile(0.95),
                    p99: lat.quantile(0.99),
                    max: lat.max,
                },
            },
            series: SeriesReport {
                t: e.series.t.clone(),
                footprint_bytes: e.series.footprint_bytes.clone(),
                superpage_bytes: e.series.superpage_bytes.clone(),
                contiguity: e.series.contiguity.clone(),
            },
            workload_stats: None,
            dump: None,
            sim: Sim {
                wall_seconds,
                events: e.events,
                accesses_per_second: if wall_seconds > 0.0 {
                    acc.total as f64 / wall_seconds
                } else {
                    0.0
                },
                version: env!("CARGO_PKG_VERSION").to_string(),
            },
        }
    }

    /// Fraction of accesses that walked.
    pub fn walk_rate(&self) -> f64 {
        if self.accesses.total == 0 {
            0.0
        } else {
            self.tlb.walks as f64 / self.accesses.total as f64
        }
    }

    /// The readable summary printed by `splab run`.
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let c = &self.config;
        let _ = writeln!(
            s,
            "splab run: {} on {} with policy {} (seed {})",
            c.workload, c.machine, c.policy, c.seed
        );
        let a = &self.accesses;
        let _ = writeln!(
            s,
            "  accesses      {:>16}  (reads {}, writes {}, ifetch {})",
            group(a.total),
            group(a.reads),
            group(a.writes),
            group(a.ifetch)
        );
        for l in &self.tlb.levels {
            let tot = l.hits + l.misses;
            let rate = if tot > 0 {
                100.0 * l.misses as f64 / tot as f64
            } else {
                0.0
            };
            let _ = writeln!(
                s,
                "  TLB {:<9} {:>16} hits {:>16} misses ({rate:.2}% miss)",
                l.name,
                group(l.hits),
                group(l.misses)
            );
        }
        let _ = writeln!(
            s,
            "  page walks    {:>16}  ({:.4} per access, {} memory refs)",
            group(self.tlb.walks),
            self.walk_rate(),
            group(self.tlb.walk_refs)
        );
        let f = &self.faults;
        let _ = writeln!(
            s,
            "  faults        {:>16}  (zero-fill {}, cow {}, protection {}, major {})",
            group(f.total),
            group(f.zero_fill),
            group(f.cow),
            group(f.protection),
            group(f.major)
        );
        let mapped: Vec<String> = self
            .pages
            .mapped_peak_by_size
            .iter()
            .map(|(k, v)| format!("{k}: {}", human(v.as_u64().unwrap_or(0))))
            .collect();
        let _ = writeln!(s, "  mapped peak   {}", mapped.join(", "));
        if self.pages.sizes.len() > 1 {
            let pro: Vec<String> = self
                .pages
                .promotions_by_size
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect();
            let dem: Vec<String> = self
                .pages
                .demotions_by_size
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect();
            let _ = writeln!(
                s,
                "  promotions    {}   demotions {}",
                pro.join(", "),
                dem.join(", ")
            );
        }
        let r = &self.reservations;
        if r.created > 0 {
            let _ = writeln!(
                s,
                "  reservations  created {}, fully populated {}, preempted {}, broken {} (preemptions freed {} and kept {} extents)",
                group(r.created),
                group(r.fully_populated),
                group(r.preempted),
                group(r.broken),
                group(r.extents_freed),
                group(r.extents_kept)
            );
        }
        let m = &self.memory;
        let _ = writeln!(
            s,
            "  memory        footprint peak {}, end {}, zeroed {}, copied {}, read {}; contiguity at end {:.3}",
            human(m.footprint_peak_bytes),
            human(m.footprint_end_bytes),
            human(m.zeroed_bytes),
            human(m.copied_bytes),
            human(m.io_read_bytes),
            m.contiguity_end
        );
        let t = &self.time;
        let pct = |x: u64| {
            if t.cycles_total > 0 {
                100.0 * x as f64 / t.cycles_total as f64
            } else {
                0.0
            }
        };
        let _ = writeln!(
            s,
            "  time          {:.6} s estimated = {} cycles: access {:.1}%, TLB {:.1}%, faults {:.1}%, I/O {:.1}%, kernel {:.1}%, compute {:.1}%",
            t.seconds,
            group(t.cycles_total),
            pct(t.cycles_access),
            pct(t.cycles_tlb),
            pct(t.cycles_fault),
            pct(t.cycles_io),
            pct(t.cycles_kernel),
            pct(t.cycles_compute)
        );
        let l = &t.fault_latency_ns;
        let _ = writeln!(
            s,
            "  fault latency p50 {} ns, p95 {} ns, p99 {} ns, max {} ns",
            l.p50, l.p95, l.p99, l.max
        );
        let _ = writeln!(
            s,
            "  simulator     {:.2} s wall, {} events, {:.1}M accesses/s",
            self.sim.wall_seconds,
            group(self.sim.events),
            self.sim.accesses_per_second / 1e6
        );
        s
    }
}

/// One policy's row in a comparison, against the first (the baseline).
#[derive(Clone, Debug, Serialize)]
pub struct CompareRow {
    pub policy: String,
    /// Baseline estimated time / this policy's estimated time.
    pub speedup: f64,
    /// Reduction of page walks (TLB misses of every level) against the baseline, in percent.
    pub tlb_miss_reduction_pct: f64,
    /// This policy's peak footprint / the baseline's.
    pub footprint_ratio: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub schema: &'static str,
    pub machine: String,
    pub workload: String,
    pub baseline: String,
    pub rows: Vec<CompareRow>,
    pub reports: Vec<Report>,
}

impl Comparison {
    pub fn new(reports: Vec<Report>) -> Comparison {
        let base = &reports[0];
        let rows = reports
            .iter()
            .map(|r| CompareRow {
                policy: r.config.policy.clone(),
                speedup: ratio(base.time.cycles_total, r.time.cycles_total),
                tlb_miss_reduction_pct: if base.tlb.walks > 0 {
                    100.0 * (1.0 - r.tlb.walks as f64 / base.tlb.walks as f64)
                } else {
                    0.0
                },
                footprint_ratio: ratio(
                    r.memory.footprint_peak_bytes,
                    base.memory.footprint_peak_bytes,
                ),
            })
            .collect();
        Comparison {
            schema: "splab.compare.v1",
            machine: base.config.machine.clone(),
            workload: base.config.workload.clone(),
            baseline: base.config.policy.clone(),
            rows,
            reports,
        }
    }

    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "splab compare: {} on {} (baseline {})",
            self.workload, self.machine, self.baseline
        );
        let _ = writeln!(
            s,
            "  {:<24} {:>12} {:>9} {:>12} {:>10} {:>12} {:>12} {:>9} {:>10}",
            "policy",
            "est. time s",
            "speedup",
            "walks",
            "walk red.",
            "faults",
            "footprint",
            "fp ratio",
            "superpages"
        );
        for (row, r) in self.rows.iter().zip(&self.reports) {
            let sp = r.memory.superpage_peak_bytes;
            let _ = writeln!(
                s,
                "  {:<24} {:>12.6} {:>8.3}x {:>12} {:>9.2}% {:>12} {:>12} {:>9.3} {:>10}",
                truncate(&row.policy, 24),
                r.time.seconds,
                row.speedup,
                group(r.tlb.walks),
                row.tlb_miss_reduction_pct,
                group(r.faults.total),
                human(r.memory.footprint_peak_bytes),
                row.footprint_ratio,
                human(sp)
            );
        }
        s
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        if a == 0 {
            1.0
        } else {
            f64::INFINITY
        }
    } else {
        a as f64 / b as f64
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).chain(std::iter::once('~')).collect()
    }
}

/// 1234567 -> "1,234,567".
pub fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Bytes in a readable unit: "1.00 GiB".
pub fn human(b: u64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < U.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.2} {}", U[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatting() {
        assert_eq!(group(1234567), "1,234,567");
        assert_eq!(group(12), "12");
        assert_eq!(human(1 << 30), "1.00 GiB");
        assert_eq!(human(100), "100 B");
    }
}
