//! Machine files: a machine is data, a TOML file with every parameter of the hardware model
//! (page sizes, TLB levels, the walker and its caches, data caches, the core, costs, storage),
//! each table with a `source` note saying where its values come from. The four presets are the
//! files under `crates/splab-sim/machines/`, built into the binary; `-m file:PATH.toml` loads a
//! user's. The keys are described in README.md ("Machine files").
//!
//! Parsing is pure (text in, `Machine` out); `Machine::from_spec` reads the file. Every error
//! names where it is: the file, the line, and the key as a dotted path
//! (`tlb.l1d.arrays[1].ways`). The `toml` crate finds syntax errors, unknown and missing keys
//! and wrong types, with byte spans; the checks here find impossible values (a page size that
//! is not a power of two, page sizes that do not increase, zero ways, a cache whose sets are not
//! a power of two, ...), and the line of the key is found in the document's spanned tree.

use std::ops::Range;

use serde::de::{self, Deserializer, Unexpected, Visitor};
use serde::Deserialize;
use toml::de::{DeTable, DeValue};

use super::cache::{CacheLevelConfig, CachesConfig, Replacement, LINE_SHIFT};
use super::core::CoreConfig;
use super::host_frames::HostPlacement;
use super::machine::{CostConfig, Machine, StorageConfig};
use super::prefetch::{PrefetchConfig, MAX_STREAMS};
use super::tlb::{ArrayConfig, LevelConfig, TlbConfig, TlbReplacement};
use super::walk::{NestedConfig, WalkConfig};
use crate::error::{Result, SimError};
use crate::spec::parse_size;
use crate::units::fmt_size;

/// The built-in machine files, by preset name: the presets are these files.
pub const BUILT_IN: &[(&str, &str)] = &[
    ("alpha21264", include_str!("../../machines/alpha21264.toml")),
    ("pa8000", include_str!("../../machines/pa8000.toml")),
    ("core2", include_str!("../../machines/core2.toml")),
    ("core2-64", include_str!("../../machines/core2-64.toml")),
    ("skylake", include_str!("../../machines/skylake.toml")),
];

/// The text of a built-in machine file.
pub fn built_in(name: &str) -> Option<&'static str> {
    BUILT_IN.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// At most 1TB of modelled memory (2^28 frames of 4KB).
pub const MAX_MEM: u64 = 1 << 40;
/// At most 4TB of swap.
pub const MAX_SWAP: u64 = 1 << 42;

/// The clock, from 1 MHz to 100 GHz: beyond any machine modelled or measured (the PA-8000's
/// 180 MHz to a few GHz), so that a clock in the wrong unit (`freq_hz = 3700`, MHz) is an
/// error and not a report in seconds a million times too long, and the model's conversions of
/// milliseconds and seconds to cycles stay within 64 bits.
pub const MIN_FREQ_HZ: u64 = 1_000_000;
pub const MAX_FREQ_HZ: u64 = 100_000_000_000;
/// The latency of one hit or reference (`hit_cycles`, `latency`, `dram_latency`, a software
/// walk's `handler_cycles`): at most a million cycles, far above any memory (DRAM: a few
/// hundred). The model adds one per access in 64-bit cycle counts, which a larger value
/// silently wrapped around: a machine whose TLB hit cost 2^64 - 1 cycles ran faster.
pub const MAX_LATENCY_CYCLES: u64 = 1_000_000;
/// The cycles of one OS operation (`[cost]`): at most 10^8 (27 ms at 3.7 GHz; a fault is a
/// few thousand), for the same reason.
pub const MAX_COST_CYCLES: u64 = 100_000_000;
/// A time of one operation in nanoseconds (`storage.read_latency_ns`,
/// `cost.migrate_page_kernel_ns`): at most one second (a disk seek is 10 ms).
pub const MAX_OP_NS: u64 = 1_000_000_000;
/// Entries of one TLB array: at most 65,536 (the largest TLBs built hold a few thousand). The
/// model keeps a set of tags per set, so an unbounded count asked for terabytes of memory.
pub const MAX_TLB_ENTRIES: u32 = 1 << 16;
/// The size of one cache level: at most 4G (the largest caches built are about 1G). The model
/// keeps a tag per line: a 1T cache asked for 64G of memory.
pub const MAX_CACHE_BYTES: u64 = 4 << 30;
/// A software walk's loads of the leaf entry (`pte_refs`): at most 16 (the presets load 0 or
/// 1). Each is simulated, so 4 billion hung every TLB miss.
pub const MAX_PTE_REFS: u32 = 16;

/// The swap area as a file gives it: a size, or a multiple of the memory (`"2x"`), which
/// follows the memory when `mem=` changes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swap {
    Bytes(u64),
    TimesMem(u64),
}

/// The forms a swap area is given in, for errors (the file's `storage.swap` and the option
/// `swap=`).
pub const SWAP_FORMS: &str =
    "a size such as \"64G\" or \"0\", or a multiple of the memory such as \"2x\"";

impl Swap {
    pub fn bytes(self, mem: u64) -> Option<u64> {
        match self {
            Swap::Bytes(b) => Some(b),
            Swap::TimesMem(k) => k.checked_mul(mem),
        }
    }

    /// `"64G"`, `"0"` or `"2x"` (a whole multiple of the memory): the text of a file's
    /// `storage.swap` and of the option `swap=`.
    pub fn parse(text: &str) -> Option<Swap> {
        let t = text.trim();
        match t.strip_suffix(['x', 'X']) {
            Some(k) => k.trim().parse().ok().map(Swap::TimesMem),
            None => parse_size(t).map(Swap::Bytes),
        }
    }
}

/// As a file or the option gives it: `64G`, `2x`.
impl std::fmt::Display for Swap {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Swap::Bytes(b) => f.write_str(&fmt_size(*b)),
            Swap::TimesMem(k) => write!(f, "{k}x"),
        }
    }
}

/// A machine parsed from a file, with the swap rule the options are applied against.
#[derive(Debug)]
pub struct Parsed {
    pub machine: Machine,
    pub swap: Swap,
}

/// Parses and checks a machine file. `origin` names it in errors ("machine file s.toml").
pub fn parse(text: &str, origin: &str) -> Result<Parsed> {
    let file: File = match toml::from_str(text) {
        Ok(f) => f,
        Err(e) => {
            let msg = e.message().trim().replace('\n', "; ");
            return Err(match e.span() {
                Some(span) => located(text, origin, span.start, None, &msg),
                None => SimError::BadInput(format!("{origin}: {msg}")),
            });
        }
    };
    build(file).map_err(|(path, msg)| {
        let at = DeTable::parse(text)
            .ok()
            .and_then(|root| locate(root.get_ref(), &path).map(|l| l.at.start))
            .unwrap_or(0);
        located(text, origin, at, Some(&path), &msg)
    })
}

/// Byte span of the value at `path` (`storage.swap`), if the document has it.
pub fn value_span(text: &str, path: &str) -> Option<Range<usize>> {
    let root = DeTable::parse(text).ok()?;
    let l = locate(root.get_ref(), path)?;
    if l.complete {
        l.value
    } else {
        None
    }
}

/// One error line: where (file, line, key) and what.
fn located(text: &str, origin: &str, offset: usize, path: Option<&str>, msg: &str) -> SimError {
    let line = text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1;
    let path = match path {
        Some(p) => Some(p.to_string()),
        None => DeTable::parse(text)
            .ok()
            .and_then(|root| path_at(root.get_ref(), offset)),
    };
    let key = match path {
        Some(p) if !p.is_empty() => format!(", key {p}"),
        _ => ", top level".to_string(),
    };
    SimError::BadInput(format!("{origin}, line {line}{key}: {msg}"))
}

// ---- The file's shape. Every table denies unknown keys; every key is required unless it is
// an `Option` (or `default`) with its meaning said beside it.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: String,
    description: String,
    source: String,
    freq_hz: u64,
    mem: Size,
    va_bits: u8,
    page_sizes: Vec<Size>,
    replicated_ptes: bool,
    tlb: FileTlb,
    walk: FileWalk,
    caches: FileCaches,
    core: FileCore,
    /// Absent: no hardware data prefetcher (as `streams = 0`).
    prefetch: Option<FilePrefetch>,
    cost: FileCost,
    storage: FileStorage,
    /// Absent: a native machine. Present: a guest under nested paging (hw/walk.rs,
    /// `NestedConfig`).
    nested: Option<FileNested>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileNested {
    source: String,
    page_size: Size,
    level_sizes: Vec<Size>,
    pwc_entries: Vec<u32>,
    ntlb_entries: u32,
    /// Where the host's frames backing guest memory lie: "scattered" (absent: the default) or
    /// "identity" (hw/host_frames.rs).
    #[serde(default)]
    host_placement: Option<HostPlacement>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTlb {
    l1d: FileLevel,
    /// Absent: instruction fetches use `l1d`.
    l1i: Option<FileLevel>,
    /// Absent: no shared levels.
    #[serde(default)]
    lower: Vec<FileLevel>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLevel {
    name: String,
    source: String,
    hit_cycles: u64,
    arrays: Vec<FileArray>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileArray {
    sizes: Vec<Size>,
    entries: u32,
    ways: u32,
    replacement: TlbReplacement,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum WalkKind {
    Radix,
    Software,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileWalk {
    kind: WalkKind,
    source: String,
    level_sizes: Vec<Size>,
    pte_bytes: u32,
    /// `radix` only.
    pwc_entries: Option<Vec<u32>>,
    /// `radix` only: core cycles a walk costs beyond its references (absent = 0).
    fixed_cycles: Option<u64>,
    /// `software` only.
    handler_cycles: Option<u64>,
    /// `software` only.
    pte_refs: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileCaches {
    source: String,
    dram_latency: u64,
    levels: Vec<FileCacheLevel>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileCacheLevel {
    name: String,
    source: String,
    size: Size,
    ways: u32,
    latency: u64,
    replacement: Replacement,
    /// Absent: lines never expire. Present: nanoseconds after which a line untouched at this
    /// level (no fill, no hit) is evicted by other tenants (`Caches::set_lifetime`). Signed so
    /// that a negative value gets this file's own error.
    lifetime_ns: Option<i64>,
    /// Absent: `lifetime_ns` alone decides. Present: the measured eviction curve, points
    /// [age in ns, share of lines gone at that age], which replaces `lifetime_ns`'s threshold
    /// (`Caches::set_lifetime_curve`).
    lifetime_curve_ns: Option<Vec<Vec<f64>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileCore {
    source: String,
    window: u32,
    width: u32,
    mshrs: u32,
    walkers: u32,
    stream_bytes_per_cycle: f64,
    /// Store buffer entries. Absent: unbounded, stores never stall dispatch (machine files
    /// written before 2026-11-28 have none).
    store_buffer: Option<u32>,
    /// Cycles a miss served beyond L2 waits per other such miss in flight (loaded latency).
    /// Absent: 0 (the presets, and machine files written before 2026-11-29).
    loaded_cycles_per_miss: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePrefetch {
    source: String,
    /// 0: none (then the other keys may be left out).
    streams: u32,
    #[serde(default)]
    distance: u32,
    #[serde(default)]
    trigger: u32,
    region: Option<Size>,
    /// L2's spatial prefetcher fills each missed line's 128-byte pair (`Machine::pair_lines`).
    /// Absent: false (the presets, and machine files written before 2026-11-29).
    #[serde(default)]
    pair_lines: bool,
    /// The share of pair lines filled as most recently used (`Machine::pair_recent`). Absent: 0.
    #[serde(default)]
    pair_recent: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileCost {
    source: String,
    access_cycles: u64,
    fault_cycles: u64,
    zero_page_cycles: u64,
    zero_bulk_page_cycles: u64,
    #[serde(default)]
    huge_zero_page_cycles: Option<u64>,
    copy_page_cycles: u64,
    #[serde(default)]
    migrate_page_kernel_ns: Option<u64>,
    pte_write_cycles: u64,
    tlb_invalidate_cycles: u64,
    popmap_level_cycles: u64,
    reserv_populate_cycles: u64,
    reserv_depopulate_cycles: u64,
    reserv_create_cycles: u64,
    reserv_piece_cycles: u64,
    sha1_block_cycles: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileStorage {
    name: String,
    source: String,
    read_latency_ns: u64,
    bytes_per_sec: u64,
    swap: Swap,
}

/// A byte size: `"4K"`, `"2M"` (binary suffixes K/M/G/T) or an integer count of bytes.
#[derive(Clone, Copy)]
struct Size(u64);

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Size, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Size;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a size such as \"4K\" or \"2M\", or a byte count")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Size, E> {
                Ok(Size(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Size, E> {
                u64::try_from(v)
                    .map(Size)
                    .map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Size, E> {
                parse_size(v)
                    .map(Size)
                    .ok_or_else(|| E::invalid_value(Unexpected::Str(v), &self))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Swap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Swap, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Swap;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(SWAP_FORMS)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Swap, E> {
                Ok(Swap::Bytes(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Swap, E> {
                u64::try_from(v)
                    .map(Swap::Bytes)
                    .map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Swap, E> {
                Swap::parse(v).ok_or_else(|| E::invalid_value(Unexpected::Str(v), &self))
            }
        }
        d.deserialize_any(V)
    }
}

// ---- Checks and the conversion to the model's configuration.

/// A key (dotted path) and what is wrong with its value.
type Bad = (String, String);

fn bad<T>(path: impl Into<String>, msg: impl Into<String>) -> std::result::Result<T, Bad> {
    Err((path.into(), msg.into()))
}

fn need_text(path: &str, v: &str) -> std::result::Result<(), Bad> {
    if v.trim().is_empty() {
        if path.ends_with("source") {
            return bad(path, "must not be empty (say where the values come from)");
        }
        return bad(path, "must not be empty");
    }
    Ok(())
}

fn build(f: File) -> std::result::Result<Parsed, Bad> {
    need_text("name", &f.name)?;
    need_text("description", &f.description)?;
    need_text("source", &f.source)?;
    if !(MIN_FREQ_HZ..=MAX_FREQ_HZ).contains(&f.freq_hz) {
        return bad(
            "freq_hz",
            format!(
                "{}: the clock in Hz, from {MIN_FREQ_HZ} (1 MHz) to {MAX_FREQ_HZ} (100 GHz), e.g. 3_700_000_000",
                f.freq_hz
            ),
        );
    }

    // Page sizes: powers of two, increasing, base first.
    let n = f.page_sizes.len();
    if !(1..=16).contains(&n) {
        return bad(
            "page_sizes",
            format!("{n} page sizes: give 1 to 16, the base page first"),
        );
    }
    let mut shifts: Vec<u8> = Vec::with_capacity(n);
    for (i, s) in f.page_sizes.iter().enumerate() {
        let path = format!("page_sizes[{i}]");
        if !s.0.is_power_of_two() {
            return bad(path, format!("{} is not a power of two", fmt_size(s.0)));
        }
        if s.0 < 1 << 10 || s.0 > MAX_MEM {
            return bad(path, format!("{} is not between 1K and 1T", fmt_size(s.0)));
        }
        let shift = s.0.trailing_zeros() as u8;
        if let Some(&prev) = shifts.last() {
            if shift <= prev {
                return bad(
                    path,
                    format!(
                        "page sizes must increase: {} after {}",
                        fmt_size(s.0),
                        fmt_size(1 << prev)
                    ),
                );
            }
        }
        shifts.push(shift);
    }
    let largest = 1u64 << shifts[n - 1];
    check_mem("mem", f.mem.0, largest)?;
    if u32::from(f.va_bits) <= u32::from(shifts[n - 1]) || f.va_bits > 64 {
        return bad(
            "va_bits",
            format!(
                "{} bits: must be more than the largest page's {} and at most 64",
                f.va_bits,
                shifts[n - 1]
            ),
        );
    }
    let class_of = |path: &str, s: Size| -> std::result::Result<u8, Bad> {
        shifts
            .iter()
            .position(|&x| s.0.is_power_of_two() && u32::from(x) == s.0.trailing_zeros())
            .map(|c| c as u8)
            .ok_or_else(|| {
                (
                    path.to_string(),
                    format!(
                        "{} is not one of the machine's page_sizes ({})",
                        fmt_size(s.0),
                        shifts
                            .iter()
                            .map(|&x| fmt_size(1 << x))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })
    };

    // TLB levels.
    let level = |path: &str, l: &FileLevel| -> std::result::Result<LevelConfig, Bad> {
        need_text(&format!("{path}.name"), &l.name)?;
        need_text(&format!("{path}.source"), &l.source)?;
        at_most(
            &format!("{path}.hit_cycles"),
            l.hit_cycles,
            MAX_LATENCY_CYCLES,
            "cycles",
        )?;
        if l.arrays.is_empty() {
            return bad(format!("{path}.arrays"), "a level needs at least one array");
        }
        let mut arrays = Vec::new();
        for (i, a) in l.arrays.iter().enumerate() {
            let ap = format!("{path}.arrays[{i}]");
            if a.sizes.is_empty() {
                return bad(
                    format!("{ap}.sizes"),
                    "an array holds at least one page size",
                );
            }
            let mut sizes = Vec::new();
            for (j, &s) in a.sizes.iter().enumerate() {
                let c = class_of(&format!("{ap}.sizes[{j}]"), s)?;
                if sizes.contains(&c) {
                    return bad(
                        format!("{ap}.sizes[{j}]"),
                        format!("{} is listed twice", fmt_size(s.0)),
                    );
                }
                sizes.push(c);
            }
            if a.entries == 0 || a.entries > MAX_TLB_ENTRIES {
                return bad(
                    format!("{ap}.entries"),
                    format!("{}: must be from 1 to {MAX_TLB_ENTRIES}", a.entries),
                );
            }
            if a.ways == 0 {
                return bad(format!("{ap}.ways"), "must be at least 1");
            }
            if !a.entries.is_multiple_of(a.ways) {
                return bad(
                    format!("{ap}.ways"),
                    format!(
                        "{} entries are not a whole number of sets of {} ways",
                        a.entries, a.ways
                    ),
                );
            }
            arrays.push(ArrayConfig {
                sizes,
                entries: a.entries,
                ways: a.ways,
                replacement: a.replacement,
            });
        }
        Ok(LevelConfig {
            name: l.name.clone(),
            arrays,
            hit_cycles: l.hit_cycles,
        })
    };
    let tlb = TlbConfig {
        l1d: level("tlb.l1d", &f.tlb.l1d)?,
        l1i: match &f.tlb.l1i {
            Some(l) => Some(level("tlb.l1i", l)?),
            None => None,
        },
        lower: f
            .tlb
            .lower
            .iter()
            .enumerate()
            .map(|(i, l)| level(&format!("tlb.lower[{i}]"), l))
            .collect::<std::result::Result<_, _>>()?,
    };

    let walk = build_walk(&f.walk, &shifts, f.va_bits)?;
    let caches = build_caches(&f.caches)?;
    let cache_lifetimes = build_lifetimes(&f.caches, f.freq_hz)?;
    let cache_lifetime_curves = build_lifetime_curves(&f.caches, f.freq_hz)?;

    let c = &f.core;
    need_text("core.source", &c.source)?;
    for (key, v, max) in [
        ("window", c.window, 512),
        ("width", c.width, u32::MAX),
        ("mshrs", c.mshrs, 32),
        ("walkers", c.walkers, 8),
    ] {
        if v == 0 || v > max {
            return bad(
                format!("core.{key}"),
                format!("{v}: must be from 1 to {max}"),
            );
        }
    }
    if let Some(n) = c.store_buffer {
        if n == 0 || n > 1024 {
            return bad(
                "core.store_buffer",
                format!("{n}: must be from 1 to 1024 (leave the key out for an unbounded one)"),
            );
        }
    }
    if !(c.stream_bytes_per_cycle.is_finite() && c.stream_bytes_per_cycle > 0.0) {
        return bad(
            "core.stream_bytes_per_cycle",
            format!("{}: must be more than 0", c.stream_bytes_per_cycle),
        );
    }
    let loaded = c.loaded_cycles_per_miss.unwrap_or(0.0);
    if !(loaded.is_finite() && (0.0..=10_000.0).contains(&loaded)) {
        return bad(
            "core.loaded_cycles_per_miss",
            format!("{loaded}: must be from 0 to 10000 cycles (leave the key out for none)"),
        );
    }
    let core = CoreConfig {
        window: c.window,
        width: c.width,
        mshrs: c.mshrs,
        walkers: c.walkers,
        stream_bytes_per_cycle: c.stream_bytes_per_cycle,
        store_buffer: c.store_buffer.unwrap_or(0),
        loaded_cycles_per_miss: loaded,
    };

    let pair_lines = f.prefetch.as_ref().is_some_and(|p| p.pair_lines);
    if pair_lines && caches.levels.len() < 2 {
        return bad(
            "prefetch.pair_lines",
            "the pair is filled into L2: the machine needs at least two cache levels",
        );
    }
    let pair_recent = f.prefetch.as_ref().map_or(0.0, |p| p.pair_recent);
    if !(0.0..=1.0).contains(&pair_recent) {
        return bad(
            "prefetch.pair_recent",
            format!("{pair_recent}: must be from 0 to 1"),
        );
    }
    let prefetch = match &f.prefetch {
        None => PrefetchConfig::default(),
        Some(p) => {
            need_text("prefetch.source", &p.source)?;
            if p.streams as usize > MAX_STREAMS {
                return bad(
                    "prefetch.streams",
                    format!("{}: must be from 0 to {MAX_STREAMS}", p.streams),
                );
            }
            if p.streams == 0 {
                PrefetchConfig::default()
            } else {
                if caches.levels.len() < 2 {
                    return bad(
                        "prefetch.streams",
                        "a prefetcher fills L2: the machine needs at least two cache levels",
                    );
                }
                if p.distance == 0 {
                    return bad("prefetch.distance", "0: must be at least 1 line");
                }
                if p.trigger == 0 {
                    return bad("prefetch.trigger", "0: must be at least 1 miss");
                }
                let region = match p.region {
                    Some(r) => r.0,
                    None => return bad("prefetch.region", "missing: a size such as \"4K\""),
                };
                if !region.is_power_of_two() || region < 1 << LINE_SHIFT {
                    return bad(
                        "prefetch.region",
                        format!("{region}: must be a power of two of at least a line (64)"),
                    );
                }
                PrefetchConfig {
                    streams: p.streams,
                    distance: p.distance,
                    trigger: p.trigger,
                    region_bytes: region,
                }
            }
        }
    };

    let k = &f.cost;
    need_text("cost.source", &k.source)?;
    for (key, v) in [
        ("access_cycles", Some(k.access_cycles)),
        ("fault_cycles", Some(k.fault_cycles)),
        ("zero_page_cycles", Some(k.zero_page_cycles)),
        ("zero_bulk_page_cycles", Some(k.zero_bulk_page_cycles)),
        ("huge_zero_page_cycles", k.huge_zero_page_cycles),
        ("copy_page_cycles", Some(k.copy_page_cycles)),
        ("pte_write_cycles", Some(k.pte_write_cycles)),
        ("tlb_invalidate_cycles", Some(k.tlb_invalidate_cycles)),
        ("popmap_level_cycles", Some(k.popmap_level_cycles)),
        ("reserv_populate_cycles", Some(k.reserv_populate_cycles)),
        ("reserv_depopulate_cycles", Some(k.reserv_depopulate_cycles)),
        ("reserv_create_cycles", Some(k.reserv_create_cycles)),
        ("reserv_piece_cycles", Some(k.reserv_piece_cycles)),
        ("sha1_block_cycles", Some(k.sha1_block_cycles)),
    ] {
        if let Some(v) = v {
            at_most(&format!("cost.{key}"), v, MAX_COST_CYCLES, "cycles")?;
        }
    }
    if let Some(ns) = k.migrate_page_kernel_ns {
        at_most("cost.migrate_page_kernel_ns", ns, MAX_OP_NS, "ns")?;
    }
    let cost = CostConfig {
        access_cycles: k.access_cycles,
        fault_cycles: k.fault_cycles,
        zero_page_cycles: k.zero_page_cycles,
        zero_bulk_page_cycles: k.zero_bulk_page_cycles,
        huge_zero_page_cycles: k.huge_zero_page_cycles.unwrap_or(k.zero_page_cycles),
        copy_page_cycles: k.copy_page_cycles,
        migrate_page_kernel_ns: k
            .migrate_page_kernel_ns
            .unwrap_or(super::machine::DEFAULT_MIGRATE_PAGE_KERNEL_NS),
        pte_write_cycles: k.pte_write_cycles,
        tlb_invalidate_cycles: k.tlb_invalidate_cycles,
        popmap_level_cycles: k.popmap_level_cycles,
        reserv_populate_cycles: k.reserv_populate_cycles,
        reserv_depopulate_cycles: k.reserv_depopulate_cycles,
        reserv_create_cycles: k.reserv_create_cycles,
        reserv_piece_cycles: k.reserv_piece_cycles,
        sha1_block_cycles: k.sha1_block_cycles,
    };

    let s = &f.storage;
    need_text("storage.name", &s.name)?;
    need_text("storage.source", &s.source)?;
    if s.bytes_per_sec == 0 {
        return bad("storage.bytes_per_sec", "must be at least 1");
    }
    at_most(
        "storage.read_latency_ns",
        s.read_latency_ns,
        MAX_OP_NS,
        "ns",
    )?;
    let swap_bytes = check_swap("storage.swap", s.swap, f.mem.0, 1u64 << shifts[0])?;

    let nested = match &f.nested {
        None => None,
        Some(n) => {
            need_text("nested.source", &n.source)?;
            let mut host_levels = Vec::new();
            for (i, s) in n.level_sizes.iter().enumerate() {
                if !s.0.is_power_of_two() {
                    return bad(
                        format!("nested.level_sizes[{i}]"),
                        format!("{} is not a power of two", fmt_size(s.0)),
                    );
                }
                host_levels.push(s.0.trailing_zeros() as u8);
            }
            let cfg = NestedConfig {
                page_shift: if n.page_size.0.is_power_of_two() {
                    n.page_size.0.trailing_zeros() as u8
                } else {
                    return bad(
                        "nested.page_size",
                        format!("{} is not a power of two", fmt_size(n.page_size.0)),
                    );
                },
                level_shifts: host_levels,
                pwc_entries: n.pwc_entries.clone(),
                ntlb_entries: n.ntlb_entries,
                placement: n.host_placement.unwrap_or_default(),
            };
            check_nested(&cfg, &walk, &shifts, f.mem.0)
                .map_err(|(k, m)| (format!("nested.{k}"), m))?;
            Some(cfg)
        }
    };

    Ok(Parsed {
        machine: Machine {
            name: f.name,
            label: String::new(),
            description: f.description,
            page_shifts: shifts,
            freq_hz: f.freq_hz,
            mem_bytes: f.mem.0,
            va_bits: f.va_bits,
            tlb,
            walk,
            caches,
            cache_lifetimes,
            cache_lifetime_curves,
            core,
            prefetch,
            pair_lines,
            pair_recent,
            replicated_ptes: f.replicated_ptes,
            nested,
            cost,
            storage: StorageConfig {
                name: s.name.clone(),
                read_latency_ns: s.read_latency_ns,
                bytes_per_sec: s.bytes_per_sec,
                swap_bytes,
            },
        },
        swap: s.swap,
    })
}

/// `v` at most `max` (of `unit`), named by `path`.
fn at_most(path: &str, v: u64, max: u64, unit: &str) -> std::result::Result<(), Bad> {
    if v > max {
        return bad(path, format!("{v}: at most {max} {unit}"));
    }
    Ok(())
}

/// The memory size's rules, for the file's `mem` and the `mem=` option alike.
fn check_mem(path: &str, mem: u64, largest: u64) -> std::result::Result<(), Bad> {
    if mem < largest || mem > MAX_MEM || !mem.is_multiple_of(largest) {
        return bad(
            path,
            format!(
                "{} is not a multiple of the largest page size ({}) from {} to {}",
                fmt_size(mem),
                fmt_size(largest),
                fmt_size(largest),
                fmt_size(MAX_MEM)
            ),
        );
    }
    Ok(())
}

/// The swap area's bytes under `mem`, at most `MAX_SWAP`.
pub fn check_swap(path: &str, swap: Swap, mem: u64, base: u64) -> std::result::Result<u64, Bad> {
    match swap.bytes(mem) {
        Some(b) if b <= MAX_SWAP => check_swap_pages(path, b, base),
        _ => bad(path, format!("more than {} of swap", fmt_size(MAX_SWAP))),
    }
}

/// A swap area holds whole base pages (a swap slot is one page): a size that is not a multiple
/// of the base page would leave a slot's worth silently unused, and one under a page would be
/// no swap at all under another name, so both are refused (0 is the way to say "no swap").
fn check_swap_pages(path: &str, bytes: u64, base: u64) -> std::result::Result<u64, Bad> {
    if !bytes.is_multiple_of(base) {
        return bad(
            path,
            format!(
                "{bytes} bytes is not a whole number of base pages ({}): a swap slot holds one page; 0 means no swap",
                fmt_size(base)
            ),
        );
    }
    Ok(bytes)
}

/// The largest `walk.fixed_cycles` a file may give: far above any walker's measured part
/// (8-14 cycles on the Intel guest of docs/validation.md), so that a typo (a value in ns x1000,
/// ticks) is an error and not a machine whose every TLB miss costs a millisecond.
const MAX_WALK_FIXED_CYCLES: u64 = 10_000;

fn build_walk(w: &FileWalk, shifts: &[u8], va_bits: u8) -> std::result::Result<WalkConfig, Bad> {
    need_text("walk.source", &w.source)?;
    let base = shifts[0];
    if w.level_sizes.len() > 4 {
        return bad("walk.level_sizes", "at most 4 levels");
    }
    let mut level_shifts = Vec::new();
    for (i, s) in w.level_sizes.iter().enumerate() {
        let path = format!("walk.level_sizes[{i}]");
        if !s.0.is_power_of_two() {
            return bad(path, format!("{} is not a power of two", fmt_size(s.0)));
        }
        let x = s.0.trailing_zeros() as u8;
        if x < base {
            return bad(
                path,
                format!(
                    "an entry maps {}, less than the base page ({})",
                    fmt_size(s.0),
                    fmt_size(1 << base)
                ),
            );
        }
        if let Some(&prev) = level_shifts.last() {
            if x >= prev {
                return bad(
                    path,
                    "level sizes must decrease from the root (the bytes one entry of each level maps)",
                );
            }
        }
        level_shifts.push(x);
    }
    if let Some(&leaf) = level_shifts.last() {
        if leaf != base {
            return bad(
                format!("walk.level_sizes[{}]", level_shifts.len() - 1),
                format!(
                    "the last level's entries must map the base page ({})",
                    fmt_size(1 << base)
                ),
            );
        }
    }
    if !w.pte_bytes.is_power_of_two() || u64::from(w.pte_bytes) > 1 << base {
        return bad(
            "walk.pte_bytes",
            format!(
                "{}: must be a power of two no larger than the base page",
                w.pte_bytes
            ),
        );
    }
    // A table is one base page of entries, so each level's entries map that many of the next
    // level's: the sizes step by base page / pte_bytes (512 on x86-64, 1024 on the Alpha).
    let entry_bits = base - w.pte_bytes.trailing_zeros() as u8;
    for (i, pair) in level_shifts.windows(2).enumerate() {
        if pair[0] - pair[1] != entry_bits {
            return bad(
                format!("walk.level_sizes[{i}]"),
                format!(
                    "an entry maps {}, but a table of {} {}-byte entries below it maps {}",
                    fmt_size(1 << pair[0]),
                    1u64 << entry_bits,
                    w.pte_bytes,
                    fmt_size(1 << (pair[1] + entry_bits))
                ),
            );
        }
    }
    let only = |key: &str, present: bool, kind: &str| -> std::result::Result<(), Bad> {
        if present {
            return bad(format!("walk.{key}"), format!("only for kind = \"{kind}\""));
        }
        Ok(())
    };
    let need = |key: &str, kind: &str| -> Bad {
        (
            "walk".to_string(),
            format!("missing key `{key}` (needed by kind = \"{kind}\")"),
        )
    };
    let config = match w.kind {
        WalkKind::Radix => {
            only("handler_cycles", w.handler_cycles.is_some(), "software")?;
            only("pte_refs", w.pte_refs.is_some(), "software")?;
            if level_shifts.is_empty() {
                return bad("walk.level_sizes", "a radix walker needs its levels");
            }
            for &x in shifts {
                if !level_shifts.contains(&x) {
                    return bad(
                        "walk.level_sizes",
                        format!(
                            "no level maps the {} page: a radix walker maps each page size at the level whose entries map that size",
                            fmt_size(1 << x)
                        ),
                    );
                }
            }
            let pwc = w
                .pwc_entries
                .clone()
                .ok_or_else(|| need("pwc_entries", "radix"))?;
            if pwc.len() + 1 != level_shifts.len() {
                return bad(
                    "walk.pwc_entries",
                    format!(
                        "{} page-walk caches for {} levels: give one per level above the leaf",
                        pwc.len(),
                        level_shifts.len()
                    ),
                );
            }
            for (i, &e) in pwc.iter().enumerate() {
                check_pwc_size(&format!("walk.pwc_entries[{i}]"), e)?;
            }
            let fixed_cycles = w.fixed_cycles.unwrap_or(0);
            if fixed_cycles > MAX_WALK_FIXED_CYCLES {
                return bad(
                    "walk.fixed_cycles",
                    format!(
                        "{fixed_cycles}: at most {MAX_WALK_FIXED_CYCLES} cycles (the walker's own part of a walk, beyond its references)"
                    ),
                );
            }
            WalkConfig::Radix {
                level_shifts,
                pwc_entries: pwc,
                pte_bytes: w.pte_bytes,
                fixed_cycles,
            }
        }
        WalkKind::Software => {
            only("pwc_entries", w.pwc_entries.is_some(), "radix")?;
            only("fixed_cycles", w.fixed_cycles.is_some(), "radix")?;
            let handler_cycles = w
                .handler_cycles
                .ok_or_else(|| need("handler_cycles", "software"))?;
            at_most(
                "walk.handler_cycles",
                handler_cycles,
                MAX_LATENCY_CYCLES,
                "cycles",
            )?;
            let pte_refs = w.pte_refs.ok_or_else(|| need("pte_refs", "software"))?;
            at_most(
                "walk.pte_refs",
                u64::from(pte_refs),
                u64::from(MAX_PTE_REFS),
                "loads",
            )?;
            WalkConfig::Software {
                handler_cycles,
                level_shifts,
                pte_refs,
                pte_bytes: w.pte_bytes,
            }
        }
    };
    // The root table must reach every virtual address: the VM places the stack and mmaps up to
    // half the address space (`Os::new`), so a root that maps less would leave them in no table.
    if let Some(&root) = config.level_shifts().first() {
        let reach = u32::from(root) + u32::from(entry_bits);
        if reach < u32::from(va_bits) {
            return bad(
                "walk.level_sizes[0]",
                format!(
                    "the root table's {} entries map {}, less than the {}-bit virtual address space{}",
                    1u64 << entry_bits,
                    fmt_size(1 << reach),
                    va_bits,
                    match 1u64.checked_shl(u32::from(va_bits)) {
                        Some(b) => format!(" ({})", fmt_size(b)),
                        None => String::new(),
                    },
                ),
            );
        }
    }
    Ok(config)
}

/// A page-walk cache's entries: up to 4 are one fully associative set, more must be a
/// power-of-two number of 4-way sets (hw/walk.rs, `Pwc`), at most `MAX_TLB_ENTRIES` (the
/// model keeps every entry: 2^31 asked for 20G of memory). The error names `path`.
fn check_pwc_size(path: &str, e: u32) -> std::result::Result<(), Bad> {
    if e <= 4 || (e.is_multiple_of(4) && (e / 4).is_power_of_two() && e <= MAX_TLB_ENTRIES) {
        return Ok(());
    }
    bad(
        path,
        format!(
            "{e}: give 0 to 4 entries, or 4 ways times a power of two, at most {MAX_TLB_ENTRIES}"
        ),
    )
}

/// The checks of a guest's host translation, for a file's `[nested]` table and the `nested=`
/// option alike: a hardware radix walker (a software-refilled TLB has no two-dimensional walk),
/// a host page size that is one of the machine's page sizes (a TLB entry holds the smaller of
/// the guest's and the host's), host levels one table apart whose leaf maps the base page and
/// one of which maps the host page, covering guest memory. Errors name the key under `nested`.
pub fn check_nested(
    n: &NestedConfig,
    walk: &WalkConfig,
    shifts: &[u8],
    mem: u64,
) -> std::result::Result<(), Bad> {
    let WalkConfig::Radix { pte_bytes, .. } = walk else {
        return bad(
            "page_size",
            "nested paging needs a hardware radix walker, and this machine's TLB is refilled by software (walk.kind = \"software\")",
        );
    };
    let sizes = || {
        shifts
            .iter()
            .map(|&x| fmt_size(1 << x))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !shifts.contains(&n.page_shift) {
        return bad(
            "page_size",
            format!(
                "{} is not one of the machine's page_sizes ({})",
                fmt_size(1 << n.page_shift),
                sizes()
            ),
        );
    }
    let hl = &n.level_shifts;
    if hl.is_empty() || hl.len() > 4 {
        return bad("level_sizes", "give 1 to 4 host levels, root first");
    }
    let entry_bits = shifts[0] - pte_bytes.trailing_zeros() as u8;
    for (i, pair) in hl.windows(2).enumerate() {
        if pair[0] <= pair[1] || pair[0] - pair[1] != entry_bits {
            return bad(
                format!("level_sizes[{i}]"),
                format!(
                    "host levels must be one table of {} entries apart, root first",
                    1u64 << entry_bits
                ),
            );
        }
    }
    if hl[hl.len() - 1] != shifts[0] {
        return bad(
            format!("level_sizes[{}]", hl.len() - 1),
            format!(
                "the last host level's entries must map the base page ({})",
                fmt_size(1 << shifts[0])
            ),
        );
    }
    if !hl.contains(&n.page_shift) {
        return bad(
            "page_size",
            format!("no host level maps a {} page", fmt_size(1 << n.page_shift)),
        );
    }
    if u32::from(hl[0]) + u32::from(entry_bits) < 64 && mem > 1u64 << (hl[0] + entry_bits) {
        return bad(
            "level_sizes",
            format!(
                "the host's tables map {}, less than the guest's memory ({})",
                fmt_size(1 << (hl[0] + entry_bits)),
                fmt_size(mem)
            ),
        );
    }
    if n.pwc_entries.len() + 1 != hl.len() {
        return bad(
            "pwc_entries",
            format!(
                "{} host paging-structure caches for {} host levels: give one per level above the leaf",
                n.pwc_entries.len(),
                hl.len()
            ),
        );
    }
    for (i, &e) in n.pwc_entries.iter().enumerate() {
        check_pwc_size(&format!("pwc_entries[{i}]"), e)?;
    }
    check_pwc_size("ntlb_entries", n.ntlb_entries)
}

fn build_caches(c: &FileCaches) -> std::result::Result<CachesConfig, Bad> {
    need_text("caches.source", &c.source)?;
    at_most(
        "caches.dram_latency",
        c.dram_latency,
        MAX_LATENCY_CYCLES,
        "cycles",
    )?;
    if !(1..=3).contains(&c.levels.len()) {
        return bad(
            "caches.levels",
            format!("{} cache levels: give 1 to 3", c.levels.len()),
        );
    }
    let mut levels = Vec::new();
    for (i, l) in c.levels.iter().enumerate() {
        let path = format!("caches.levels[{i}]");
        need_text(&format!("{path}.name"), &l.name)?;
        need_text(&format!("{path}.source"), &l.source)?;
        if !(1..=32).contains(&l.ways) {
            return bad(
                format!("{path}.ways"),
                format!("{}: must be from 1 to 32", l.ways),
            );
        }
        if l.size.0 > MAX_CACHE_BYTES {
            return bad(
                format!("{path}.size"),
                format!(
                    "{}: at most {} (a level's size)",
                    fmt_size(l.size.0),
                    fmt_size(MAX_CACHE_BYTES)
                ),
            );
        }
        at_most(
            &format!("{path}.latency"),
            l.latency,
            MAX_LATENCY_CYCLES,
            "cycles",
        )?;
        let line_ways = 64 * u64::from(l.ways);
        let sets = l.size.0 / line_ways;
        if !l.size.0.is_multiple_of(line_ways) || !sets.is_power_of_two() || l.size.0 > MAX_MEM {
            return bad(
                format!("{path}.size"),
                format!(
                    "{} in {} ways of 64-byte lines is not a power-of-two number of sets",
                    fmt_size(l.size.0),
                    l.ways
                ),
            );
        }
        levels.push(CacheLevelConfig {
            name: l.name.clone(),
            size_bytes: l.size.0,
            ways: l.ways,
            latency: l.latency,
            replacement: l.replacement,
        });
    }
    Ok(CachesConfig {
        levels,
        dram_latency: c.dram_latency,
    })
}

/// The levels' `lifetime_ns` in cycles at `freq_hz` (at least one), per level; empty when no
/// level has one.
fn build_lifetimes(c: &FileCaches, freq_hz: u64) -> std::result::Result<Vec<Option<u64>>, Bad> {
    let mut out = Vec::new();
    for (i, l) in c.levels.iter().enumerate() {
        out.push(match l.lifetime_ns {
            None => None,
            Some(ns) if ns <= 0 => {
                return bad(
                    format!("caches.levels[{i}].lifetime_ns"),
                    format!(
                        "{ns}: give a positive number of nanoseconds (leave the key out for \
                         lines that never expire)"
                    ),
                )
            }
            Some(ns) => Some(
                u64::try_from(ns as u128 * freq_hz as u128 / 1_000_000_000)
                    .unwrap_or(u64::MAX)
                    .max(1),
            ),
        });
    }
    if out.iter().all(Option::is_none) {
        out.clear();
    }
    Ok(out)
}

/// The levels' `lifetime_curve_ns` with ages in cycles at `freq_hz`, per level (empty for a
/// level without one); empty when no level has one. Ages must be positive and increase, shares
/// lie in [0, 1] and do not decrease (a line only gets older; `splab calibrate` writes the
/// benchmark's non-decreasing fit).
fn build_lifetime_curves(
    c: &FileCaches,
    freq_hz: u64,
) -> std::result::Result<Vec<Vec<(u64, f64)>>, Bad> {
    let mut out = Vec::new();
    for (i, l) in c.levels.iter().enumerate() {
        let Some(points) = &l.lifetime_curve_ns else {
            out.push(Vec::new());
            continue;
        };
        let key = format!("caches.levels[{i}].lifetime_curve_ns");
        if points.is_empty() {
            return bad(
                key,
                "empty: give [age_ns, share] points (leave the key out for lifetime_ns alone)",
            );
        }
        let mut curve = Vec::with_capacity(points.len());
        for (j, p) in points.iter().enumerate() {
            let at = format!("{key}[{j}]");
            let &[age, share] = &p[..] else {
                return bad(
                    at,
                    format!("{} numbers: give a point as [age_ns, share]", p.len()),
                );
            };
            if !(age.is_finite() && age > 0.0) {
                return bad(
                    at,
                    format!("age {age}: give a positive number of nanoseconds"),
                );
            }
            if !(0.0..=1.0).contains(&share) {
                return bad(
                    at,
                    format!("share {share}: give the share of lines gone, from 0 to 1"),
                );
            }
            if let Some(&[a, f]) = j.checked_sub(1).map(|k| &points[k][..]) {
                if age <= a {
                    return bad(
                        at,
                        format!(
                            "age {age} is not above the point before's {a}: ages must increase"
                        ),
                    );
                }
                if share < f {
                    return bad(
                        at,
                        format!(
                            "share {share} is below the point before's {f}: a line only gets \
                             older, the share gone must not fall"
                        ),
                    );
                }
            }
            curve.push(((age * freq_hz as f64 / 1e9).round() as u64, share));
        }
        out.push(curve);
    }
    if out.iter().all(Vec::is_empty) {
        out.clear();
    }
    Ok(out)
}

// ---- Finding keys in the document: a dotted path's span, and the path at a byte offset.

enum Seg<'p> {
    Key(&'p str),
    Index(usize),
}

fn segs(path: &str) -> Vec<Seg<'_>> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (name, mut rest) = part.split_once('[').map_or((part, ""), |(n, r)| (n, r));
        out.push(Seg::Key(name));
        while let Some((i, r)) = rest.split_once(']') {
            if let Ok(i) = i.parse() {
                out.push(Seg::Index(i));
            }
            rest = r.strip_prefix('[').unwrap_or("");
        }
    }
    out
}

struct Location {
    /// Where to point: the key of the deepest segment found (an array element's value).
    at: Range<usize>,
    /// The value's span.
    value: Option<Range<usize>>,
    /// Whether every segment was found.
    complete: bool,
}

fn locate(root: &DeTable<'_>, path: &str) -> Option<Location> {
    let mut table = Some(root);
    let mut array: Option<&[toml::Spanned<DeValue<'_>>]> = None;
    let mut found: Option<Location> = None;
    let segs = segs(path);
    let n = segs.len();
    for (i, seg) in segs.into_iter().enumerate() {
        let v = match seg {
            Seg::Key(k) => {
                let Some((key, v)) =
                    table.and_then(|t| t.iter().find(|(key, _)| key.get_ref() == k))
                else {
                    break;
                };
                found = Some(Location {
                    at: key.span(),
                    value: Some(v.span()),
                    complete: i + 1 == n,
                });
                v
            }
            Seg::Index(j) => {
                let Some(v) = array.and_then(|a| a.get(j)) else {
                    break;
                };
                found = Some(Location {
                    at: v.span(),
                    value: Some(v.span()),
                    complete: i + 1 == n,
                });
                v
            }
        };
        table = None;
        array = None;
        match v.get_ref() {
            DeValue::Table(t) => table = Some(t),
            DeValue::Array(a) => array = Some(a),
            _ => {}
        }
    }
    found
}

/// The dotted path of the smallest key or value whose span holds `offset`.
fn path_at(root: &DeTable<'_>, offset: usize) -> Option<String> {
    type Best = Option<(usize, String)>;
    fn consider(span: Range<usize>, path: &str, offset: usize, best: &mut Best) {
        if span.contains(&offset) || span.start == offset {
            let len = span.end - span.start;
            if best.as_ref().is_none_or(|(l, _)| len <= *l) {
                *best = Some((len, path.to_string()));
            }
        }
    }
    fn table(t: &DeTable<'_>, path: &str, offset: usize, best: &mut Best) {
        for (k, v) in t.iter() {
            let p = if path.is_empty() {
                k.get_ref().to_string()
            } else {
                format!("{path}.{}", k.get_ref())
            };
            consider(k.span(), &p, offset, best);
            consider(v.span(), &p, offset, best);
            value(v.get_ref(), &p, offset, best);
        }
    }
    fn value(v: &DeValue<'_>, path: &str, offset: usize, best: &mut Best) {
        match v {
            DeValue::Table(t) => table(t, path, offset, best),
            DeValue::Array(a) => {
                for (i, v) in a.iter().enumerate() {
                    let p = format!("{path}[{i}]");
                    consider(v.span(), &p, offset, best);
                    value(v.get_ref(), &p, offset, best);
                }
            }
            _ => {}
        }
    }
    let mut best = None;
    table(root, "", offset, &mut best);
    best.map(|(_, p)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SKYLAKE: &str = include_str!("../../machines/skylake.toml");

    /// The error of skylake's file with `from` (which must occur) replaced by `to`, and the
    /// line `from` starts on.
    fn error_of(from: &str, to: &str) -> (String, usize) {
        let at = SKYLAKE
            .find(from)
            .unwrap_or_else(|| panic!("{from:?} not in the file"));
        let line = SKYLAKE[..at].matches('\n').count() + 1;
        let text = SKYLAKE.replacen(from, to, 1);
        match parse(&text, "machine file t.toml") {
            Ok(_) => panic!("{to:?} was accepted"),
            Err(e) => (e.to_string(), line),
        }
    }

    #[test]
    fn built_in_files_parse() {
        for (name, text) in BUILT_IN {
            let p = parse(text, name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(p.machine.name, *name);
            assert_eq!(p.swap, Swap::TimesMem(2), "{name}");
        }
    }

    #[test]
    fn prefetch_pair_lines_turns_l2s_pair_fill_on() {
        let m = parse(SKYLAKE, "skylake").unwrap().machine;
        assert!(!m.pair_lines, "absent: off");
        let text = SKYLAKE.replacen(
            "region = \"4K\"\n",
            "region = \"4K\"\npair_lines = true\n",
            1,
        );
        assert!(parse(&text, "t.toml").unwrap().machine.pair_lines);
        // Without a streamer too.
        let text = text.replacen("streams = 32", "streams = 0", 1);
        assert!(parse(&text, "t.toml").unwrap().machine.pair_lines);
        assert_eq!(
            parse(&text, "t.toml").unwrap().machine.pair_recent,
            0.0,
            "absent: 0"
        );
        let t = text.replacen(
            "pair_lines = true\n",
            "pair_lines = true\npair_recent = 0.25\n",
            1,
        );
        assert_eq!(parse(&t, "t.toml").unwrap().machine.pair_recent, 0.25);
        let t = text.replacen(
            "pair_lines = true\n",
            "pair_lines = true\npair_recent = 1.5\n",
            1,
        );
        assert!(parse(&t, "t.toml").is_err(), "beyond 1");
    }

    #[test]
    fn a_file_without_huge_zero_page_cycles_clears_thps_at_the_4kb_rate() {
        let text = SKYLAKE
            .replacen("huge_zero_page_cycles = 607\n", "", 1)
            .replacen("zero_page_cycles = 607", "zero_page_cycles = 700", 1);
        assert!(!text.contains("huge_zero_page_cycles ="));
        let c = parse(&text, "t.toml").unwrap().machine.cost;
        assert_eq!((c.zero_page_cycles, c.huge_zero_page_cycles), (700, 700));
        let c = parse(SKYLAKE, "skylake").unwrap().machine.cost;
        assert_eq!(c.huge_zero_page_cycles, 607);
    }

    #[test]
    fn a_file_without_migrate_page_kernel_ns_gets_the_default() {
        let line = format!(
            "migrate_page_kernel_ns = {}\n",
            parse(SKYLAKE, "skylake")
                .unwrap()
                .machine
                .cost
                .migrate_page_kernel_ns
        );
        let text = SKYLAKE.replacen(&line, "", 1);
        assert!(!text.contains("migrate_page_kernel_ns ="));
        let c = parse(&text, "t.toml").unwrap().machine.cost;
        assert_eq!(
            c.migrate_page_kernel_ns,
            super::super::machine::DEFAULT_MIGRATE_PAGE_KERNEL_NS
        );
        let text = SKYLAKE.replacen(&line, "migrate_page_kernel_ns = 2500\n", 1);
        let c = parse(&text, "t.toml").unwrap().machine.cost;
        assert_eq!(c.migrate_page_kernel_ns, 2500);
    }

    #[test]
    fn a_file_without_store_buffer_has_an_unbounded_one() {
        let text = SKYLAKE.replacen("store_buffer = 56\n", "", 1);
        assert!(!text.contains("store_buffer ="));
        let c = parse(&text, "t.toml").unwrap().machine.core;
        assert_eq!(c.store_buffer, 0);
        let c = parse(SKYLAKE, "skylake").unwrap().machine.core;
        assert_eq!(c.store_buffer, 56);
    }

    /// No preset has a loaded latency (none is published for them; calibrate measures it):
    /// the key's absence is 0, and a file's value is read as written.
    #[test]
    fn loaded_latency_is_absent_in_the_presets_and_read_from_a_file() {
        for (name, text) in BUILT_IN {
            assert!(!text.contains("loaded_cycles_per_miss"), "{name}");
            let c = parse(text, name).unwrap().machine.core;
            assert_eq!(c.loaded_cycles_per_miss, 0.0, "{name}");
        }
        let text = SKYLAKE.replacen(
            "store_buffer = 56\n",
            "store_buffer = 56\nloaded_cycles_per_miss = 5.9\n",
            1,
        );
        let c = parse(&text, "t.toml").unwrap().machine.core;
        assert_eq!(c.loaded_cycles_per_miss, 5.9);
    }

    #[test]
    fn a_lifetime_is_per_level_in_cycles() {
        let text = SKYLAKE.replacen(
            "replacement = \"nru\"",
            "replacement = \"nru\"\nlifetime_ns = 1",
            1,
        );
        let m = parse(&text, "t.toml").unwrap().machine;
        // 1 ns at 3.7 GHz is 3.7 cycles: truncated, at least one.
        assert_eq!(m.cache_lifetimes, vec![None, None, Some(3)]);
        let text = SKYLAKE.replacen(
            "replacement = \"plru\"",
            "replacement = \"plru\"\nlifetime_ns = 1_000",
            1,
        );
        let m = parse(&text, "t.toml").unwrap().machine;
        assert_eq!(m.cache_lifetimes, vec![Some(3_700), None, None]);
        assert!(parse(SKYLAKE, "skylake")
            .unwrap()
            .machine
            .cache_lifetimes
            .is_empty());
    }

    #[test]
    fn a_lifetime_curve_is_per_level_in_cycles() {
        let text = SKYLAKE.replacen(
            "replacement = \"nru\"",
            "replacement = \"nru\"\nlifetime_ns = 6_000_000\n\
             lifetime_curve_ns = [[220_000, 0.0], [1e6, 0.0], [4_320_000, 0.256], [2.5e7, 1]]",
            1,
        );
        let m = parse(&text, "t.toml").unwrap().machine;
        // At 3.7 GHz: 0.22 ms is 814,000 cycles.
        assert_eq!(
            m.cache_lifetime_curves,
            vec![
                vec![],
                vec![],
                vec![
                    (814_000, 0.0),
                    (3_700_000, 0.0),
                    (15_984_000, 0.256),
                    (92_500_000, 1.0)
                ]
            ]
        );
        assert_eq!(m.cache_lifetimes, vec![None, None, Some(22_200_000)]);
        assert!(parse(SKYLAKE, "skylake")
            .unwrap()
            .machine
            .cache_lifetime_curves
            .is_empty());
    }

    #[test]
    fn errors_name_the_key_and_its_line() {
        // (replace, by, the key named, what the message says)
        let cases = [
            (
                "mem = \"32G\"",
                "memory = \"32G\"",
                "memory",
                "unknown field `memory`",
            ),
            ("va_bits = 48", "va_bits = \"48\"", "va_bits", "expected u8"),
            (
                "ways = 4\nlatency = 12",
                "ways = \"four\"\nlatency = 12",
                "caches.levels[1].ways",
                "invalid type",
            ),
            (
                "entries = 32, ways = 4",
                "entries = 32, ways = 0",
                "tlb.l1d.arrays[1].ways",
                "at least 1",
            ),
            (
                "entries = 32, ways = 4",
                "entries = 32, wayz = 4",
                "tlb.l1d.arrays[1].wayz",
                "unknown field `wayz`",
            ),
            (
                "entries = 32, ways = 4",
                "entries = 32, ways = 5",
                "tlb.l1d.arrays[1].ways",
                "whole number of sets",
            ),
            (
                "[\"4K\", \"2M\", \"1G\"]",
                "[\"4K\", \"3M\", \"1G\"]",
                "page_sizes[1]",
                "3M is not a power of two",
            ),
            (
                "[\"4K\", \"2M\", \"1G\"]",
                "[\"4K\", \"1G\", \"2M\"]",
                "page_sizes[2]",
                "must increase: 2M after 1G",
            ),
            (
                "[\"4K\", \"2M\", \"1G\"]",
                "[]",
                "page_sizes",
                "give 1 to 16",
            ),
            (
                "mem = \"32G\"",
                "mem = \"33M\"",
                "mem",
                "not a multiple of the largest page size (1G)",
            ),
            (
                "size = \"256K\"",
                "size = \"250K\"",
                "caches.levels[1].size",
                "power-of-two number of sets",
            ),
            ("[tlb.l1i]", "[tlb.l1x]", "tlb.l1x", "unknown field `l1x`"),
            (
                "swap = \"2x\"",
                "swap = \"twice\"",
                "storage.swap",
                "a multiple of the memory",
            ),
            (
                "swap = \"2x\"",
                "swap = \"5000x\"",
                "storage.swap",
                "more than 4T of swap",
            ),
            (
                "kind = \"radix\"",
                "kind = \"hashed\"",
                "walk.kind",
                "unknown variant `hashed`",
            ),
            (
                "pwc_entries = [2, 4, 32]",
                "pwc_entries = [2, 4, 6]",
                "walk.pwc_entries[2]",
                "4 ways times a power of two",
            ),
            (
                "pwc_entries = [2, 4, 32]",
                "pwc_entries = [2, 4]",
                "walk.pwc_entries",
                "2 page-walk caches for 4 levels",
            ),
            (
                "level_sizes = [\"512G\", \"1G\", \"2M\", \"4K\"]",
                "level_sizes = [\"2M\", \"4K\"]",
                "walk.level_sizes",
                "no level maps the 1G page",
            ),
            (
                "level_sizes = [\"512G\", \"1G\", \"2M\", \"4K\"]",
                "level_sizes = [\"512G\", \"2M\", \"4K\"]",
                "walk.level_sizes[0]",
                "an entry maps 512G, but a table of 512 8-byte entries below it maps 1G",
            ),
            (
                "level_sizes = [\"512G\", \"1G\", \"2M\", \"4K\"]\npwc_entries = [2, 4, 32]",
                "level_sizes = [\"1G\", \"2M\", \"4K\"]\npwc_entries = [4, 32]",
                "walk.level_sizes[0]",
                "the root table's 512 entries map 512G, less than the 48-bit virtual address space (256T)",
            ),
            (
                "window = 224",
                "window = 2240",
                "core.window",
                "from 1 to 512",
            ),
            (
                "store_buffer = 56",
                "store_buffer = 0",
                "core.store_buffer",
                "from 1 to 1024",
            ),
            (
                "stream_bytes_per_cycle = 4.9",
                "stream_bytes_per_cycle = -1",
                "core.stream_bytes_per_cycle",
                "more than 0",
            ),
            (
                "store_buffer = 56",
                "loaded_cycles_per_miss = -2.5\nstore_buffer = 56",
                "core.loaded_cycles_per_miss",
                "from 0 to 10000 cycles",
            ),
            (
                "replacement = \"nru\"",
                "replacement = \"lfu\"",
                "caches.levels[2].replacement",
                "unknown variant `lfu`",
            ),
            (
                "latency = 42",
                "lifetime_ns = 0\nlatency = 42",
                "caches.levels[2].lifetime_ns",
                "0: give a positive number of nanoseconds (leave the key out",
            ),
            (
                "latency = 42",
                "lifetime_ns = -3000000\nlatency = 42",
                "caches.levels[2].lifetime_ns",
                "-3000000: give a positive number of nanoseconds",
            ),
            (
                "latency = 42",
                "lifetime_ns = \"3ms\"\nlatency = 42",
                "caches.levels[2].lifetime_ns",
                "expected i64",
            ),
            (
                "latency = 42",
                "lifetime_curve_ns = [[1e6, 0.1], [5e5, 0.2]]\nlatency = 42",
                "caches.levels[2].lifetime_curve_ns[1]",
                "age 500000 is not above the point before's 1000000: ages must increase",
            ),
            (
                "latency = 42",
                "lifetime_curve_ns = [[1e6, 0.1], [2e6, 1.5]]\nlatency = 42",
                "caches.levels[2].lifetime_curve_ns[1]",
                "share 1.5: give the share of lines gone, from 0 to 1",
            ),
            (
                "latency = 42",
                "lifetime_curve_ns = [[1e6, 0.5], [2e6, 0.25]]\nlatency = 42",
                "caches.levels[2].lifetime_curve_ns[1]",
                "share 0.25 is below the point before's 0.5",
            ),
            (
                "latency = 42",
                "lifetime_curve_ns = [[0, 0.0]]\nlatency = 42",
                "caches.levels[2].lifetime_curve_ns[0]",
                "age 0: give a positive number of nanoseconds",
            ),
            (
                "latency = 42",
                "lifetime_curve_ns = []\nlatency = 42",
                "caches.levels[2].lifetime_curve_ns",
                "empty: give [age_ns, share] points",
            ),
            (
                "latency = 42",
                "lifetime_curve_ns = [[1e6, 0.1, 3]]\nlatency = 42",
                "caches.levels[2].lifetime_curve_ns[0]",
                "3 numbers: give a point as [age_ns, share]",
            ),
            (
                "sizes = [\"1G\"], entries = 16",
                "sizes = [\"8K\"], entries = 16",
                "tlb.lower[0].arrays[1].sizes[0]",
                "8K is not one of the machine's page_sizes (4K, 2M, 1G)",
            ),
            (
                "source = \"7-cpu.com Skylake: DRAM is L3 latency + 51ns = 42 + 189 cycles at 3.7 GHz.\"",
                "source = \" \"",
                "caches.source",
                "must not be empty",
            ),
            (
                "bytes_per_sec = 3_200_000_000",
                "bytes_per_sec = 0",
                "storage.bytes_per_sec",
                "at least 1",
            ),
            (
                "va_bits = 48",
                "va_bits = 30",
                "va_bits",
                "more than the largest page's 30",
            ),
            // Values the model adds into 64-bit cycle counts or allocates by: unbounded, a
            // huge one wrapped the counts around (a faster machine) or asked for terabytes.
            (
                "freq_hz = 3_700_000_000",
                "freq_hz = 3700",
                "freq_hz",
                "3700: the clock in Hz, from 1000000 (1 MHz) to 100000000000 (100 GHz)",
            ),
            (
                "freq_hz = 3_700_000_000",
                "freq_hz = 18446744073709551615",
                "freq_hz",
                "the clock in Hz",
            ),
            (
                "hit_cycles = 9",
                "hit_cycles = 18446744073709551615",
                "tlb.lower[0].hit_cycles",
                "18446744073709551615: at most 1000000 cycles",
            ),
            (
                "entries = 1536, ways = 12",
                "entries = 4000000000, ways = 1",
                "tlb.lower[0].arrays[0].entries",
                "4000000000: must be from 1 to 65536",
            ),
            (
                "dram_latency = 231",
                "dram_latency = 1000001",
                "caches.dram_latency",
                "1000001: at most 1000000 cycles",
            ),
            (
                "size = \"8M\"",
                "size = \"1T\"",
                "caches.levels[2].size",
                "1T: at most 4G",
            ),
            (
                "latency = 42",
                "latency = 18446744073709551615",
                "caches.levels[2].latency",
                "at most 1000000 cycles",
            ),
            (
                "fault_cycles = 3850",
                "fault_cycles = 18446744073709551615",
                "cost.fault_cycles",
                "at most 100000000 cycles",
            ),
            (
                "migrate_page_kernel_ns = 765",
                "migrate_page_kernel_ns = 18446744073709551615",
                "cost.migrate_page_kernel_ns",
                "at most 1000000000 ns",
            ),
            (
                "read_latency_ns = 71_000",
                "read_latency_ns = 18446744073709551615",
                "storage.read_latency_ns",
                "at most 1000000000 ns",
            ),
        ];
        for (from, to, key, what) in cases {
            let (e, line) = error_of(from, to);
            assert!(e.starts_with("machine file t.toml, line "), "{to}: {e}");
            assert!(
                e.contains(&format!("line {line}, key {key}: ")),
                "{to}: want line {line}, key {key}: {e}"
            );
            assert!(e.contains(what), "{to}: want {what:?}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }

    #[test]
    fn an_empty_name_is_not_asked_for_a_source() {
        // need_text's hint about sources is for `source` keys; a name or description says
        // what the machine is.
        for (from, to, key) in [
            ("name = \"skylake\"", "name = \"\"", "name"),
            ("name = \"L1D\"", "name = \" \"", "tlb.l1d.name"),
            (
                "source = \"7-cpu.com Skylake: DRAM is L3 latency + 51ns = 42 + 189 cycles at 3.7 GHz.\"",
                "source = \"\"",
                "caches.source",
            ),
        ] {
            let (e, _) = error_of(from, to);
            assert!(e.contains(&format!("key {key}: must not be empty")), "{e}");
            assert_eq!(
                e.contains("where the values come from"),
                key.ends_with("source"),
                "{e}"
            );
        }
    }

    #[test]
    fn walk_keys_follow_the_kind() {
        let text = SKYLAKE.replace("kind = \"radix\"", "kind = \"software\"");
        let line = SKYLAKE[..SKYLAKE.find("pwc_entries").unwrap()]
            .matches('\n')
            .count()
            + 1;
        let e = parse(&text, "t").unwrap_err().to_string();
        assert!(
            e.contains(&format!(
                "line {line}, key walk.pwc_entries: only for kind = \"radix\""
            )),
            "{e}"
        );
        // alpha21264's file with its `from` line replaced by `to`: the error it gives.
        let alpha = built_in("alpha21264").unwrap();
        let alpha_err = |from: &str, to: &str| {
            parse(&alpha.replace(from, to), "t")
                .unwrap_err()
                .to_string()
        };
        for (to, want) in [
            ("", "key walk: missing key `pte_refs`"),
            // Each load is simulated: 4 billion of them hung every TLB miss.
            (
                "pte_refs = 4000000000\n",
                "key walk.pte_refs: 4000000000: at most 16 loads",
            ),
            (
                "pte_refs = 1\npwc_entries = [4, 4]\n",
                "key walk.pwc_entries: only for kind = \"radix\"",
            ),
        ] {
            let e = alpha_err("pte_refs = 1\n", to);
            assert!(e.contains(want), "{e}");
        }
        let e = alpha_err(
            "handler_cycles = 23\n",
            "handler_cycles = 18446744073709551615\n",
        );
        assert!(
            e.contains("key walk.handler_cycles: 18446744073709551615: at most 1000000 cycles"),
            "{e}"
        );
    }

    #[test]
    fn walk_fixed_cycles_parse_default_and_errors() {
        let with = |v: &str| {
            SKYLAKE.replace(
                "pte_bytes = 8\n",
                &format!("pte_bytes = 8\nfixed_cycles = {v}\n"),
            )
        };
        // Absent: 0 (the presets).
        assert_eq!(parse(SKYLAKE, "t").unwrap().machine.walk.fixed_cycles(), 0);
        assert_eq!(
            parse(&with("11"), "t").unwrap().machine.walk.fixed_cycles(),
            11
        );
        for (v, want) in [
            ("-3", "key walk.fixed_cycles"),
            ("\"ten\"", "key walk.fixed_cycles"),
            (
                "10001",
                "key walk.fixed_cycles: 10001: at most 10000 cycles",
            ),
        ] {
            let e = parse(&with(v), "t").unwrap_err().to_string();
            assert!(e.contains(want), "{v}: {e}");
        }
        let alpha = built_in("alpha21264").unwrap();
        let e = parse(
            &alpha.replace("pte_refs = 1\n", "pte_refs = 1\nfixed_cycles = 5\n"),
            "t",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("key walk.fixed_cycles: only for kind = \"radix\""),
            "{e}"
        );
    }

    #[test]
    fn missing_keys_name_their_table() {
        let (e, _) = error_of("mem = \"32G\"\n", "");
        assert!(e.contains("top level: missing field `mem`"), "{e}");
        let (e, _) = error_of("name = \"L2\"\n", "");
        assert!(
            e.contains("key caches.levels[1]: missing field `name`"),
            "{e}"
        );
        let (e, _) = error_of("pwc_entries = [2, 4, 32]\n", "");
        assert!(e.contains("key walk: missing key `pwc_entries`"), "{e}");
        // Every table says where its values come from.
        for table in [
            "[tlb.l1d]",
            "[walk]",
            "[caches]",
            "[core]",
            "[cost]",
            "[storage]",
        ] {
            let start = SKYLAKE.find(table).unwrap();
            let src = start + SKYLAKE[start..].find("\nsource = ").unwrap() + 1;
            let value = src + "source = ".len();
            // The source's end: a multi-line string's closing quotes, or the line's end.
            let end = if SKYLAKE[value..].starts_with("\"\"\"") {
                value + 3 + SKYLAKE[value + 3..].find("\"\"\"").unwrap() + 4
            } else {
                value + SKYLAKE[value..].find('\n').unwrap() + 1
            };
            let text = format!("{}{}", &SKYLAKE[..src], &SKYLAKE[end..]);
            let e = parse(&text, "t").unwrap_err().to_string();
            assert!(e.contains("missing field `source`"), "{table}: {e}");
        }
    }

    #[test]
    fn syntax_errors_give_their_line() {
        let (e, line) = error_of("mem = \"32G\"", "mem = \"32G");
        assert!(e.contains(&format!("line {line}")), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
        let (e, line) = error_of("va_bits = 48", "va_bits = 48\nva_bits = 48");
        assert!(e.contains(&format!("line {}", line + 1)), "{e}");
    }

    #[test]
    fn sizes_and_swap_take_their_forms() {
        // Byte counts as integers, suffixed strings, and swap as a multiple of the memory.
        let text = SKYLAKE
            .replace("size = \"32K\"", "size = 32768")
            .replace("swap = \"2x\"", "swap = \"3X\"");
        let p = parse(&text, "t").unwrap();
        assert_eq!(p.machine.caches.levels[0].size_bytes, 32 << 10);
        assert_eq!(p.swap, Swap::TimesMem(3));
        assert_eq!(p.machine.storage.swap_bytes, 96 << 30);
        let p = parse(&SKYLAKE.replace("swap = \"2x\"", "swap = 0"), "t").unwrap();
        assert_eq!((p.swap, p.machine.storage.swap_bytes), (Swap::Bytes(0), 0));
        let (e, _) = error_of("size = \"32K\"", "size = -1");
        assert!(
            e.contains("key caches.levels[0].size") && e.contains("a size such as"),
            "{e}"
        );
    }
}
