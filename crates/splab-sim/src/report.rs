//! Reports: the `splab.report.v2` JSON document, the readable text summary, and comparisons.
//!
//! The field names under `schema` are a contract (docs/design.md); fields may be added, never renamed
//! within a version. v2 (the out-of-order time model) changed `time`: `cycles_access` is gone,
//! `cycles_tlb` is now the critical-path cycles of TLB hits and walks, and `breakdown` says what
//! every cycle of `cycles_total` waited for (docs/timing.md).
//! Everything outside `sim` is a deterministic function of machine, policy, workload and seed.
//! docs/report.schema.json describes every field with its unit (crates/splab/tests/schema.rs
//! checks real reports against it): a field added here must be added there.
//! `splab.compare.v2` rows gained `walk_reduction_pct`; `tlb_miss_reduction_pct`, the same value
//! under a misleading name, stays as a deprecated alias until v3.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::engine::Engine;
use crate::units::fmt_size;
use crate::vm::stats::FaultStats;

pub const SCHEMA: &str = "splab.report.v2";

#[derive(Clone, Debug, Serialize)]
pub struct Config {
    pub machine: String,
    pub policy: String,
    pub workload: String,
    pub mem_bytes: u64,
    pub seed: u64,
    /// Bytes free at start (`--free`); the rest wired. Equal to mem_bytes when not restricted.
    pub free_bytes: u64,
    /// "warm" or "cold" (`--page-cache`): whether files' pages start cached.
    pub page_cache: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Accesses {
    pub total: u64,
    pub reads: u64,
    /// Stores and read-modify-writes.
    pub writes: u64,
    pub ifetch: u64,
    /// Read-modify-write accesses (also counted in `writes`).
    pub rmw: u64,
    /// Accesses whose address came from an earlier load (`dep` > 0).
    pub dependent: u64,
    /// Instructions the accesses stand for (their `ipa` summed).
    pub instructions: u64,
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
    /// Walk references by the place that served them (cache levels, DRAM).
    pub walk_refs_by_level: Map<String, Value>,
    pub pwc_hits: u64,
    pub dirty_assists: u64,
    /// A guest machine's host dimension (nested paging, hw/walk.rs); absent on a native machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nested: Option<NestedReport>,
}

/// The host dimension of a guest's two-dimensional walks. `walk_refs` above counts both
/// dimensions; `walk_refs_host` is the host's part of it.
#[derive(Clone, Debug, Serialize)]
pub struct NestedReport {
    /// The host's page size: a TLB entry maps at most this much.
    pub host_page_size: u64,
    /// References to the host's tables (of `walk_refs`).
    pub walk_refs_host: u64,
    /// `walk_refs_host` by the place that served them (of `walk_refs_by_level`).
    pub walk_refs_host_by_level: Map<String, Value>,
    /// References to the guest's tables (`walk_refs` - `walk_refs_host`).
    pub walk_refs_guest: u64,
    /// Guest page-table pages translated by the nested TLB (no host walk).
    pub ntlb_hits: u64,
    /// Host walks started below the root by a host paging-structure-cache hit.
    pub host_pwc_hits: u64,
    /// The most references one walk made.
    pub walk_refs_max: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct CachesReport {
    /// Every reference (data and page-table) by level.
    pub levels: Vec<crate::hw::cache::CacheStats>,
    /// Data references by the place that served them (cache levels, DRAM).
    pub data_by_level: Map<String, Value>,
    /// Lines of sequential runs brought in by the stream prefetcher.
    pub streamed_lines: u64,
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
    /// Requests to the storage device (vm/file.rs clusters reads and fsync's writes).
    pub io_read_requests: u64,
    pub io_write_requests: u64,
    /// File events (vm/file.rs).
    pub files: crate::vm::file::FileStats,
    pub contiguity_end: f64,
    /// Page-table pages (wired frames) at the end and at the peak.
    pub page_table_bytes: u64,
    pub page_table_peak_bytes: u64,
    /// Processes' u-areas (wired kernel memory, vm/kmem.rs) at the end and at the peak.
    pub uarea_bytes: u64,
    pub uarea_peak_bytes: u64,
    /// Vnodes the file system allocated and the wired zone pages holding them (vm/kmem.rs).
    pub vnodes: u64,
    pub vnode_zone_bytes: u64,
    /// Frames reserved for pages not yet touched (held by reservations, used by no page), at
    /// the end and at the peak; 0 without reservations.
    pub reserved_unpopulated_bytes: u64,
    pub reserved_unpopulated_peak_bytes: u64,
    /// Bytes of pages mapped beside a faulting page (fault-around, prefault).
    pub fault_around_bytes: u64,
    /// The page daemon and the backing store (vm/pageout.rs, vm/swap.rs).
    pub paging: Paging,
    /// Contiguity-aware replacement and wired pools (seed 000 5.1, 5.2; vm/contig.rs).
    pub contiguity: crate::vm::contig::ContigStats,
    /// Linux THP at faults and khugepaged's collapses (vm/thp.rs, vm/khugepaged.rs).
    pub thp: crate::vm::thp::ThpStats,
    /// HP-UX's page-size selection at faults (vm/pagesize.rs); only under a hint policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pagesize: Option<crate::vm::pagesize::PagesizeStats>,
    /// Memory compaction and kcompactd (vm/compact.rs), under /proc/vmstat's names; only for
    /// policies that compact (THP, khugepaged or kcompactd).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction: Option<crate::vm::compact::CompactStats>,
}

/// What the page daemon did and the paging I/O it caused. Pages are base pages.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Paging {
    /// The swap area's size and its peak use.
    pub swap_bytes: u64,
    pub swap_peak_bytes: u64,
    /// Pages written to swap / to their file, and read back after an eviction.
    pub pageouts_swap: u64,
    pub pageouts_file: u64,
    pub pageins_swap: u64,
    pub pageins_file: u64,
    /// Shortage scans by the daemon, scans an allocation waited for, periodic active scans.
    pub daemon_scans: u64,
    pub sync_scans: u64,
    pub stats_scans: u64,
    pub pages_visited: u64,
    pub activated: u64,
    pub deactivated: u64,
    /// Pages moved to the cache queue, of which `laundered` were written first; cache pages
    /// freed for allocations; cache pages reused by a fault.
    pub cached: u64,
    pub laundered: u64,
    pub freed: u64,
    pub reactivated: u64,
    /// Dirty anonymous pages kept for want of swap.
    pub swap_full: u64,
    /// seed 000 4.6: demotions to evict, speculative demotions, repromotions after them.
    pub evict_demotions: u64,
    pub speculative_demotions: u64,
    pub repromotions: u64,
    /// The daemon's CPU cycles (part of `time.background_cycles`) and the cycles the
    /// application waited in synchronous scans (CPU and write-out, inside `time`).
    pub daemon_cycles: u64,
    pub stall_cycles: u64,
    /// seed 000 4.7 / 6.7 (vm/dirty.rs): msync calls and the base pages they wrote; under
    /// `dirty=hash`, the CPU cycles of SHA-1 digests (inside `time`) and the base pages a
    /// write-out considered dirty that were written / found clean by their digest.
    pub msyncs: u64,
    pub msync_written: u64,
    pub hash_cycles: u64,
    pub hash_written: u64,
    pub hash_clean: u64,
}

impl Paging {
    fn of(os: &crate::vm::Os) -> Paging {
        let bs = os.base_shift();
        let b = &os.backing.stats;
        let p = &os.pageout.stats;
        let d = &os.dirty.stats;
        Paging {
            swap_bytes: os.backing.swap_limit << bs,
            swap_peak_bytes: b.swap_peak_slots << bs,
            pageouts_swap: b.pageouts_swap,
            pageouts_file: b.pageouts_file,
            pageins_swap: b.pageins_swap,
            pageins_file: b.pageins_file,
            daemon_scans: p.scans,
            sync_scans: p.sync_scans,
            stats_scans: p.stats_scans,
            pages_visited: p.visited,
            activated: p.activated,
            deactivated: p.deactivated,
            cached: p.cached,
            laundered: p.laundered,
            freed: p.freed,
            reactivated: p.reactivated,
            swap_full: p.swap_full,
            evict_demotions: p.evict_demotions,
            speculative_demotions: p.speculative_demotions,
            repromotions: p.repromotions,
            daemon_cycles: p.daemon_cycles,
            stall_cycles: p.stall_cycles,
            msyncs: d.msyncs,
            msync_written: d.msync_written,
            hash_cycles: d.hash_cycles,
            hash_written: d.hash_written,
            hash_clean: d.hash_clean,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Latency {
    pub p50: u64,
    pub p95: u64,
    pub p99: u64,
    pub max: u64,
}

/// Fault latency quantiles in cycles (vm/latency.rs: relative error under 3.125%, max exact),
/// with the number of faults they are over.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyCycles {
    pub count: u64,
    pub p50: u64,
    pub p95: u64,
    pub p99: u64,
    pub max: u64,
}

impl LatencyCycles {
    fn of(h: &crate::vm::latency::LatencyHistogram) -> LatencyCycles {
        LatencyCycles {
            count: h.count,
            p50: h.quantile(0.50),
            p95: h.quantile(0.95),
            p99: h.quantile(0.99),
            max: h.max,
        }
    }

    /// The same quantiles in nanoseconds at `freq_hz`.
    fn ns(&self, freq_hz: u64) -> Latency {
        let ns = |c: u64| (c as u128 * 1_000_000_000 / freq_hz.max(1) as u128) as u64;
        Latency {
            p50: ns(self.p50),
            p95: ns(self.p95),
            p99: ns(self.p99),
            max: ns(self.max),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Time {
    /// The core's clock at the end (hw/core.rs): misses and walks overlap, faults drain.
    pub cycles_total: u64,
    /// Critical-path cycles of second-level TLB hits and walks (breakdown.tlb_hit + walk).
    pub cycles_tlb: u64,
    /// `cycles_tlb / cycles_total`.
    pub walk_share: f64,
    /// What each cycle of `cycles_total` waited for; the parts sum to it.
    pub breakdown: BreakdownReport,
    /// Cost of faults (trap, handler, zeroing, copying, promotion in the fault path), charged
    /// serially.
    pub cycles_fault: u64,
    pub cycles_io: u64,
    pub cycles_kernel: u64,
    /// Cycles of `compute` events.
    pub cycles_compute: u64,
    /// Parts of cycles_fault and cycles_kernel spent promoting and demoting.
    pub cycles_promotion: u64,
    pub cycles_demotion: u64,
    /// Part of cycles_kernel spent on reservations and population maps (seed 000 4.8, 4.9).
    pub cycles_reservation: u64,
    pub seconds: f64,
    pub background_cycles: u64,
    /// Fault latency quantiles in nanoseconds at the machine's frequency.
    pub fault_latency_ns: Latency,
    /// The same in cycles, and the faults counted.
    pub fault_latency_cycles: LatencyCycles,
    /// Requests a server workload served (`Engine::request_begin` .. `request_end`); absent
    /// when it marked none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_latency: Option<RequestLatency>,
}

/// The latency of a server workload's requests, from their start to their end on the clock.
#[derive(Clone, Debug, Serialize)]
pub struct RequestLatency {
    pub count: u64,
    pub ns: Latency,
    pub cycles: Latency,
}

impl RequestLatency {
    fn of(h: &crate::vm::latency::LatencyHistogram, freq_hz: u64) -> Option<RequestLatency> {
        if h.count == 0 {
            return None;
        }
        let c = LatencyCycles::of(h);
        Some(RequestLatency {
            count: c.count,
            ns: c.ns(freq_hz),
            cycles: Latency {
                p50: c.p50,
                p95: c.p95,
                p99: c.p99,
                max: c.max,
            },
        })
    }
}

/// The critical-path attribution of `cycles_total` (hw/core.rs).
#[derive(Clone, Debug, Serialize)]
pub struct BreakdownReport {
    /// Dispatching instructions (nothing else was waited for).
    pub compute: u64,
    /// Second-level TLB lookups: hits, and the lookup a miss in every level makes before its
    /// walk (the last level's `hit_cycles`).
    pub tlb_hit: u64,
    /// Walk references by the place that served them; `handler` is a software refill's trap
    /// and instructions, `queue` waiting for a free hardware walker.
    pub walk: Map<String, Value>,
    /// Data by the place that served it; `queue` is waiting for a free fill buffer, `stream`
    /// sequential runs at the memory bandwidth.
    pub data: Map<String, Value>,
    pub fault: u64,
    pub io: u64,
    pub kernel: u64,
    /// Every process asleep (`Engine::idle_until`, e.g. `seeker` between its operations);
    /// absent when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub idle: u64,
}

fn is_zero(x: &u64) -> bool {
    *x == 0
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
    pub caches: CachesReport,
    pub faults: FaultStats,
    pub pages: Pages,
    pub reservations: Reservations,
    pub memory: Memory,
    pub time: Time,
    pub series: SeriesReport,
    /// What the workload itself counted (a trace replay's skipped or lazily mapped accesses).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload_stats: Option<serde_json::Value>,
    /// `--frag`: what the fragmenter did before the workload (workload/fragment.rs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frag: Option<crate::workload::fragment::FragReport>,
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

/// Names of the places a reference can be served: the machine's cache levels, then DRAM at
/// index 3 (the core's and walker's convention).
fn place_names(levels: &[crate::hw::cache::CacheStats]) -> Vec<(usize, String)> {
    let mut v: Vec<(usize, String)> = levels
        .iter()
        .enumerate()
        .map(|(i, l)| (i, l.name.clone()))
        .collect();
    v.push((3, "DRAM".into()));
    v
}

fn by_place(names: &[(usize, String)], values: &[u64; 4]) -> Map<String, Value> {
    names
        .iter()
        .map(|(i, n)| (n.clone(), Value::from(values[*i])))
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
        let cycles_total = e.elapsed();
        let superpage_orders: Vec<u8> = (1..sizes.len()).map(|c| m.order_of(c)).collect();
        let lat = LatencyCycles::of(&st.fault_latency);
        let cache_stats = os.hw.caches.stats();
        let places = place_names(&cache_stats);
        let b = os.hw.core.breakdown();
        let mut walk = by_place(&places, &b.walk_by_level);
        walk.insert("handler".into(), Value::from(b.walk_handler));
        walk.insert("queue".into(), Value::from(b.walk_queue));
        let mut data = by_place(&places, &b.data_by_level);
        data.insert("queue".into(), Value::from(b.data_queue));
        data.insert("stream".into(), Value::from(b.stream));
        let cycles_tlb = b.tlb_hit + b.walk();
        Report {
            schema: SCHEMA,
            config,
            accesses: Accesses {
                total: acc.total,
                reads: acc.reads,
                writes: acc.writes,
                ifetch: acc.ifetch,
                rmw: acc.rmw,
                dependent: acc.dependent,
                instructions: acc.instructions,
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
                walk_refs_by_level: by_place(&places, &os.hw.walker.refs_by_level()),
                pwc_hits: os.hw.walker.pwc_hits,
                dirty_assists: acc.dirty_assists,
                nested: m.nested.as_ref().map(|n| {
                    let ns = os.hw.walker.nested_stats();
                    NestedReport {
                        host_page_size: 1u64 << n.page_shift,
                        walk_refs_host: ns.walk_refs_host,
                        walk_refs_host_by_level: by_place(&places, &ns.walk_refs_host_by_level),
                        walk_refs_guest: acc.walk_refs - ns.walk_refs_host,
                        ntlb_hits: ns.ntlb_hits,
                        host_pwc_hits: ns.host_pwc_hits,
                        walk_refs_max: ns.walk_refs_max as u64,
                    }
                }),
            },
            caches: CachesReport {
                data_by_level: by_place(&places, &acc.data_by_level),
                streamed_lines: acc.streamed_lines,
                levels: cache_stats,
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
                io_read_requests: st.io_read_requests,
                io_write_requests: st.io_write_requests,
                files: os.fileio.stats.clone(),
                contiguity_end: os.phys.buddy.contiguity(&superpage_orders),
                page_table_bytes: st.pt.pages << m.base_shift(),
                page_table_peak_bytes: st.pt.peak_pages << m.base_shift(),
                uarea_bytes: st.kmem.uarea_pages << m.base_shift(),
                uarea_peak_bytes: st.kmem.uarea_peak_pages << m.base_shift(),
                vnodes: st.kmem.vnodes,
                vnode_zone_bytes: st.kmem.vnode_zone_pages << m.base_shift(),
                reserved_unpopulated_bytes: os
                    .reserv
                    .as_ref()
                    .map_or(0, |r| r.unpopulated_frames << m.base_shift()),
                reserved_unpopulated_peak_bytes: os
                    .reserv
                    .as_ref()
                    .map_or(0, |r| r.unpopulated_peak_frames << m.base_shift()),
                fault_around_bytes: st.around.mapped << m.base_shift(),
                paging: Paging::of(os),
                contiguity: os.contig.stats.clone(),
                thp: os.thp.stats.clone(),
                pagesize: os.policy.hint().map(|_| os.pagesize_stats()),
                compaction: (os.policy.thp().is_some()
                    || os.policy.khugepaged.is_some()
                    || os.policy.kcompactd.is_some())
                .then(|| os.compact.stats.clone()),
            },
            time: Time {
                cycles_total,
                cycles_tlb,
                walk_share: if cycles_total > 0 {
                    cycles_tlb as f64 / cycles_total as f64
                } else {
                    0.0
                },
                breakdown: BreakdownReport {
                    compute: b.compute,
                    tlb_hit: b.tlb_hit,
                    walk,
                    data,
                    fault: b.fault,
                    io: b.io,
                    kernel: b.kernel,
                    idle: b.idle,
                },
                cycles_fault: st.cycles_fault,
                cycles_io: st.cycles_io,
                cycles_kernel: st.cycles_kernel,
                cycles_compute: e.compute_cycles,
                cycles_promotion: st.cycles_promotion,
                cycles_demotion: st.cycles_demotion,
                cycles_reservation: st.cycles_reservation,
                seconds: cycles_total as f64 / m.freq_hz as f64,
                background_cycles: e.background_cycles,
                fault_latency_ns: lat.ns(m.freq_hz),
                fault_latency_cycles: lat,
                request_latency: RequestLatency::of(&e.requests, m.freq_hz),
            },
            series: SeriesReport {
                t: e.series.t.clone(),
                footprint_bytes: e.series.footprint_bytes.clone(),
                superpage_bytes: e.series.superpage_bytes.clone(),
                contiguity: e.series.contiguity.clone(),
            },
            workload_stats: None,
            frag: None,
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

    /// The non-zero counters of `workload_stats` (what a replay could not follow exactly), as
    /// "lazy_pages 3, skipped_protection 1"; None when there are none.
    pub fn workload_stats_line(&self) -> Option<String> {
        let m = self.workload_stats.as_ref()?.as_object()?;
        let parts: Vec<String> = m
            .iter()
            .filter_map(|(k, v)| {
                let n = v.as_u64()?;
                (n > 0).then(|| format!("{k} {}", group(n)))
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
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
        if let Some(f) = &self.frag {
            let _ = writeln!(
                s,
                "  frag-{}        {} of {} free {} blocks left at the start (target {} for {} of memory); \
                 {} blocks pinned by the fragmenter ({} resident), {} s before the workload",
                f.level,
                f.free_blocks_before,
                f.free_blocks_initial,
                fmt_size(f.block_bytes),
                f.target_free_blocks,
                fmt_size(f.mem_bytes),
                f.blocks_fragmented,
                human(f.fragmenter_bytes),
                f.settle_seconds
            );
        }
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
            // A level named "TLB" (pa8000's one unified TLB) is not "TLB TLB".
            let label = if l.name.starts_with("TLB") {
                l.name.clone()
            } else {
                format!("TLB {}", l.name)
            };
            let _ = writeln!(
                s,
                "  {label:<13} {:>16} hits {:>16} misses ({rate:.2}% miss)",
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
        if let Some(n) = &self.tlb.nested {
            let _ = writeln!(
                s,
                "  nested paging {} host pages: refs guest {}, host {} ({:.2} per walk; {}; at most {} in one); nested TLB hits {}, host PWC hits {}",
                fmt_size(n.host_page_size),
                group(n.walk_refs_guest),
                group(n.walk_refs_host),
                n.walk_refs_host as f64 / self.tlb.walks.max(1) as f64,
                n.walk_refs_host_by_level
                    .iter()
                    .map(|(k, v)| format!("{k} {}", group(v.as_u64().unwrap_or(0))))
                    .collect::<Vec<_>>()
                    .join(", "),
                n.walk_refs_max,
                group(n.ntlb_hits),
                group(n.host_pwc_hits)
            );
        }
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
            if r.mapped_at_fault > 0 {
                let _ = writeln!(
                    s,
                    "                superpages mapped whole at a fault {} (full reservations)",
                    group(r.mapped_at_fault)
                );
            }
            if r.prepared_sync + r.prepared_async > 0 {
                let _ = writeln!(
                    s,
                    "                hybrid preparation (seed 003): {} reservations at a fault (Sync-t), {} by the daemon (Async-t), {} pages; {} superpages mapped at preparation",
                    group(r.prepared_sync),
                    group(r.prepared_async),
                    group(r.prepared_pages),
                    group(r.mapped_at_preparation)
                );
            }
            if r.mapped_relaxed > 0 {
                let _ = writeln!(
                    s,
                    "                superpages mapped with mixed dirty state (relaxed mapping) {}",
                    group(r.mapped_relaxed)
                );
            }
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
        let cs = &m.contiguity;
        if cs.cache_freed + cs.preferred_failures + cs.wired_pools > 0 {
            let _ = writeln!(
                s,
                "  contiguity    {} allocations found no free region of their preferred size; {} restorations freed {} of {} regions ({} pages cached); cache pages: {} freed to the allocator, {} taken back ({} preempting a reservation), {} reused; {} wired pools",
                group(cs.preferred_failures),
                group(cs.restore_runs),
                group(cs.regions_restored),
                group(cs.regions_targeted),
                group(cs.pages_cached),
                group(cs.cache_freed),
                group(cs.cache_reactivated),
                group(cs.reactivation_preemptions),
                group(cs.cache_dropped),
                group(cs.wired_pools)
            );
        }
        if let Some(ps) = &m.pagesize {
            let per: Vec<String> = ps
                .sizes
                .iter()
                .map(|z| {
                    format!(
                        "{}: {} ({} failed)",
                        fmt_size(z.size),
                        group(z.allocated),
                        group(z.failed)
                    )
                })
                .collect();
            let _ = writeln!(
                s,
                "  pagesize      large pages at faults {}; hint lowered for free memory {}, to fit {}",
                per.join(", "),
                group(ps.lowered_for_memory),
                group(ps.lowered_to_fit)
            );
        }
        let t = &m.thp;
        if t.fault_alloc + t.fault_fallback + t.pages_scanned > 0 {
            let _ = writeln!(
                s,
                "  thp           faults: {} THPs allocated, {} fell back to base pages; khugepaged: {} regions collapsed ({} pages copied, {} zeroed; {} allocations failed), {} base pages scanned in {} full scans; refused: {} too empty, {} swapped, {} shared, {} unreferenced, {} other",
                group(t.fault_alloc),
                group(t.fault_fallback),
                group(t.pages_collapsed),
                group(t.collapse_copied),
                group(t.collapse_zeroed),
                group(t.collapse_alloc_failed),
                group(t.pages_scanned),
                group(t.full_scans),
                group(t.scan_fail_none),
                group(t.scan_fail_swap),
                group(t.scan_fail_shared),
                group(t.scan_fail_referenced),
                group(t.scan_fail_other)
            );
        }
        if t.zero_page_mapped + t.zero_page_alloc_failed > 0 {
            let _ = writeln!(
                s,
                "  zero page     huge zero page mapped at {} read faults ({} allocated, {} allocations failed); {} writes to it, {} mappings split into 4KB zero-page entries",
                group(t.zero_page_mapped),
                group(t.zero_page_alloc),
                group(t.zero_page_alloc_failed),
                group(t.zero_page_wp),
                group(t.zero_page_split)
            );
        }
        if let Some(c) = m.compaction.as_ref().filter(|c| {
            c.compact_isolated + c.compact_stall + c.compact_daemon_wake + c.proactive_runs > 0
        }) {
            let _ = writeln!(
                s,
                "  compaction    {} stalls ({} succeeded, {} failed, {} deferred), {} pages migrated, {} / {} pages scanned by the migrate / free scanners; kcompactd: {} wakes, {} proactive runs",
                group(c.compact_stall),
                group(c.compact_success),
                group(c.compact_fail),
                group(c.deferred),
                group(c.pgmigrate_success),
                group(c.compact_migrate_scanned),
                group(c.compact_free_scanned),
                group(c.compact_daemon_wake),
                group(c.proactive_runs)
            );
        }
        let f = &m.files;
        if f.opens + m.io_read_requests + m.io_write_requests > 0 {
            let _ = writeln!(
                s,
                "  files         {} opens, {} reads ({}), {} writes ({}), {} fsyncs; storage: read {} in {} requests ({} pages read ahead), written {} in {} requests",
                group(f.opens),
                group(f.reads),
                human(f.read_bytes),
                group(f.writes),
                human(f.written_bytes),
                group(f.fsyncs),
                human(m.io_read_bytes),
                group(m.io_read_requests),
                group(f.readahead_pages),
                human(m.io_write_bytes),
                group(m.io_write_requests)
            );
        }
        let pg = &m.paging;
        if pg.daemon_scans + pg.sync_scans + pg.stats_scans > 0 {
            let _ = writeln!(
                s,
                "  paging        out {} to swap, {} to files; in {} from swap, {} from files; swap peak {} of {}",
                group(pg.pageouts_swap),
                group(pg.pageouts_file),
                group(pg.pageins_swap),
                group(pg.pageins_file),
                human(pg.swap_peak_bytes),
                human(pg.swap_bytes)
            );
            let _ = writeln!(
                s,
                "                page daemon: {} scans ({} waited for, {} periodic), {} pages deactivated, {} cached ({} written first), {} freed, {} reused",
                group(pg.daemon_scans + pg.sync_scans),
                group(pg.sync_scans),
                group(pg.stats_scans),
                group(pg.deactivated),
                group(pg.cached),
                group(pg.laundered),
                group(pg.freed),
                group(pg.reactivated)
            );
        }
        if m.fault_around_bytes > 0 {
            let _ = writeln!(
                s,
                "                mapped around faults (fault-around / prefault): {}; page cache {}",
                human(m.fault_around_bytes),
                self.config.page_cache
            );
        }
        if m.reserved_unpopulated_peak_bytes > 0 {
            let _ = writeln!(
                s,
                "                reserved for untouched pages: peak {}, end {}",
                human(m.reserved_unpopulated_peak_bytes),
                human(m.reserved_unpopulated_bytes)
            );
        }
        if m.paging.msyncs + m.paging.hash_cycles > 0 {
            // seed 000 4.7 / 6.7 (vm/dirty.rs).
            let _ = writeln!(
                s,
                "  dirty pages   msync {} calls, {} pages written ({} written in all); SHA-1 digests {} cycles, {} pages written, {} found clean",
                group(m.paging.msyncs),
                group(m.paging.msync_written),
                human(m.io_write_bytes),
                group(m.paging.hash_cycles),
                group(m.paging.hash_written),
                group(m.paging.hash_clean)
            );
        }
        let t = &self.time;
        let pct = |x: u64| {
            if t.cycles_total > 0 {
                100.0 * x as f64 / t.cycles_total as f64
            } else {
                0.0
            }
        };
        let b = &t.breakdown;
        let sum = |m: &Map<String, Value>| m.values().filter_map(|v| v.as_u64()).sum::<u64>();
        let _ = writeln!(
            s,
            "  time          {:.6} s estimated = {} cycles: compute {:.1}%, data {:.1}%, TLB {:.1}% (walks {:.1}%), faults {:.1}%, I/O {:.1}%, kernel {:.1}%",
            t.seconds,
            group(t.cycles_total),
            pct(b.compute),
            pct(sum(&b.data)),
            pct(t.cycles_tlb),
            pct(sum(&b.walk)),
            pct(b.fault),
            pct(b.io),
            pct(b.kernel)
        );
        let places = |m: &Map<String, Value>| {
            m.iter()
                .filter(|(_, v)| v.as_u64().unwrap_or(0) > 0)
                .map(|(k, v)| format!("{k} {:.1}%", pct(v.as_u64().unwrap_or(0))))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(s, "    data by place:  {}", places(&b.data));
        let _ = writeln!(s, "    walks by place: {}", places(&b.walk));
        let c: Vec<String> = self
            .caches
            .levels
            .iter()
            .map(|l| {
                let tot = l.hits + l.misses;
                let rate = if tot > 0 {
                    100.0 * l.misses as f64 / tot as f64
                } else {
                    0.0
                };
                if l.expired > 0 {
                    // Lines the level's lifetime expired (`Caches::set_lifetime`), of the misses.
                    let exp = 100.0 * l.expired as f64 / tot.max(1) as f64;
                    format!("{} {rate:.1}% miss ({exp:.1}% expired)", l.name)
                } else {
                    format!("{} {rate:.1}% miss", l.name)
                }
            })
            .collect();
        let _ = writeln!(
            s,
            "  caches        {}; page tables {} (peak {})",
            c.join(", "),
            human(self.memory.page_table_bytes),
            human(self.memory.page_table_peak_bytes)
        );
        if let Some(line) = self.workload_stats_line() {
            let _ = writeln!(s, "  workload      {line}");
        }
        let stat = |k: &str| {
            self.workload_stats
                .as_ref()
                .and_then(|w| w.get(k)?.as_u64())
                .unwrap_or(0)
        };
        if stat("heap_not_rebuilt") > 0 {
            let _ = writeln!(
                s,
                "  WARNING       the replayed heap is not the native one: {} heap growths Valgrind \
                 refused (its 8 MiB heap cap) were replayed as recorded (docs/replay.md, \
                 \"Valgrind's heap cap\")",
                group(stat("heap_not_rebuilt"))
            );
        } else if stat("recording_brk_refused") > stat("heap_regions_relocated") {
            let _ = writeln!(
                s,
                "  WARNING       the replayed heap is not the native one: Valgrind refused {} brk \
                 calls (its 8 MiB heap cap) and only {} of the mappings glibc made instead were \
                 marked and rebuilt as heap (docs/replay.md, \"Valgrind's heap cap\")",
                group(stat("recording_brk_refused")),
                group(stat("heap_regions_relocated"))
            );
        }
        let l = &t.fault_latency_ns;
        let _ = writeln!(
            s,
            "  fault latency p50 {} ns, p95 {} ns, p99 {} ns, max {} ns ({} faults)",
            l.p50,
            l.p95,
            l.p99,
            l.max,
            group(t.fault_latency_cycles.count)
        );
        if let Some(r) = &t.request_latency {
            let _ = writeln!(
                s,
                "  requests      {}: latency p50 {} ns, p95 {} ns, p99 {} ns, max {} ns",
                group(r.count),
                r.ns.p50,
                r.ns.p95,
                r.ns.p99,
                r.ns.max
            );
        }
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
    /// Reduction of page walks (accesses that missed every TLB level) against the baseline, in
    /// percent.
    pub walk_reduction_pct: f64,
    /// Deprecated alias of `walk_reduction_pct` (same value), kept so that v2 readers keep
    /// working: despite its name it never counted per-level TLB misses. Remove in v3.
    pub tlb_miss_reduction_pct: f64,
    /// This policy's peak footprint / the baseline's.
    pub footprint_ratio: f64,
    /// Share of this policy's estimated time spent on TLB hits and walks.
    pub walk_share: f64,
    /// 95th-percentile fault latency, nanoseconds (seed 003 Table 9 puts the 95th-percentile
    /// latency beside the speedup).
    pub fault_latency_p95_ns: u64,
    /// Footprint at the end and at its peak (seed 003 Table 10: memory consumption).
    pub footprint_end_bytes: u64,
    pub footprint_peak_bytes: u64,
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
    /// The reports compared with the first.
    pub fn new(reports: Vec<Report>) -> Comparison {
        Comparison::with_baseline(reports, 0)
    }

    /// The reports compared with `reports[baseline]` (`compare --baseline`).
    pub fn with_baseline(reports: Vec<Report>, baseline: usize) -> Comparison {
        let base = &reports[baseline.min(reports.len() - 1)];
        let rows = reports
            .iter()
            .map(|r| {
                let walk_reduction_pct = if base.tlb.walks > 0 {
                    100.0 * (1.0 - r.tlb.walks as f64 / base.tlb.walks as f64)
                } else {
                    0.0
                };
                CompareRow {
                    policy: r.config.policy.clone(),
                    speedup: ratio(base.time.cycles_total, r.time.cycles_total),
                    walk_reduction_pct,
                    tlb_miss_reduction_pct: walk_reduction_pct,
                    footprint_ratio: ratio(
                        r.memory.footprint_peak_bytes,
                        base.memory.footprint_peak_bytes,
                    ),
                    walk_share: r.time.walk_share,
                    fault_latency_p95_ns: r.time.fault_latency_ns.p95,
                    footprint_end_bytes: r.memory.footprint_end_bytes,
                    footprint_peak_bytes: r.memory.footprint_peak_bytes,
                }
            })
            .collect();
        Comparison {
            schema: "splab.compare.v2",
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
        // The fragmentation level, when the runs had one (seed 003 Tables 8-10: one table per
        // level).
        let frag = self
            .reports
            .first()
            .and_then(|r| r.frag.as_ref())
            .map_or(String::new(), |f| format!(", frag-{}", f.level));
        let _ = writeln!(
            s,
            "splab compare: {} on {} (baseline {}{frag})",
            self.workload, self.machine, self.baseline
        );
        let _ = writeln!(
            s,
            "  {:<24} {:>12} {:>9} {:>11} {:>12} {:>10} {:>12} {:>12} {:>11} {:>11} {:>9} {:>11}",
            "policy",
            "est. time s",
            "speedup",
            "walk share",
            "walks",
            "walk red.",
            "faults",
            "p95 fault",
            "fp end",
            "fp peak",
            "fp ratio",
            "superpages"
        );
        for (row, r) in self.rows.iter().zip(&self.reports) {
            let sp = r.memory.superpage_peak_bytes;
            let _ = writeln!(
                s,
                "  {:<24} {:>12.6} {:>8.3}x {:>10.1}% {:>12} {:>9.2}% {:>12} {:>12} {:>11} {:>11} {:>9.3} {:>11}",
                truncate(&row.policy, 24),
                r.time.seconds,
                row.speedup,
                100.0 * row.walk_share,
                group(r.tlb.walks),
                row.walk_reduction_pct,
                group(r.faults.total),
                fmt_ns(row.fault_latency_p95_ns),
                human(row.footprint_end_bytes),
                human(row.footprint_peak_bytes),
                row.footprint_ratio,
                human(sp)
            );
        }
        s
    }
}

impl Comparison {
    /// The table of `to_text` as CSV (RFC 4180; a header line, one row per policy, numbers
    /// unformatted in base units: seconds, bytes, counts, percent).
    pub fn to_csv(&self) -> String {
        use std::fmt::Write;
        let mut s = String::from(
            "policy,est_time_s,speedup,walk_share_pct,walks,walk_reduction_pct,faults,footprint_peak_bytes,footprint_ratio,superpage_peak_bytes,fault_latency_p95_ns,footprint_end_bytes\n",
        );
        for (row, r) in self.rows.iter().zip(&self.reports) {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{},{},{},{},{}",
                csv_field(&row.policy),
                r.time.seconds,
                row.speedup,
                100.0 * row.walk_share,
                r.tlb.walks,
                row.tlb_miss_reduction_pct,
                r.faults.total,
                r.memory.footprint_peak_bytes,
                row.footprint_ratio,
                r.memory.superpage_peak_bytes,
                row.fault_latency_p95_ns,
                row.footprint_end_bytes
            );
        }
        s
    }
}

/// A CSV field, quoted when it holds a comma, a quote or a line break (policy specs have commas).
fn csv_field(v: &str) -> String {
    if v.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v.to_string()
    }
}

/// Nanoseconds in a readable unit: "850 ns", "12.3 us", "4.10 ms".
fn fmt_ns(ns: u64) -> String {
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} us", ns as f64 / 1e3)
    } else {
        format!("{:.2} ms", ns as f64 / 1e6)
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
        if i > 0 && (s.len() - i).is_multiple_of(3) {
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
        assert_eq!(fmt_ns(850), "850 ns");
        assert_eq!(fmt_ns(12_345), "12.3 us");
        assert_eq!(fmt_ns(4_100_000), "4.10 ms");
        assert_eq!(
            csv_field("navarro:sizes=64K,x=1"),
            "\"navarro:sizes=64K,x=1\""
        );
        assert_eq!(csv_field("a\"b"), "\"a\"\"b\"");
        assert_eq!(csv_field("base"), "base");
    }
}
