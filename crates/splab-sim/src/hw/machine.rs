//! A machine: page sizes, TLB hierarchy, walk model, memory size and the cost model.
//!
//! A machine is data. The presets are the TOML machine files in `crates/splab-sim/machines/`,
//! built into the binary (`machine_file.rs` parses and checks them), where every value has its
//! source note. Where a value is not published (page-walk cache sizes, the bookkeeping part of a
//! page fault), the note says so and gives where the value came from; `docs/constants.md`
//! collects them in one table.

use serde::Serialize;

use super::cache::CachesConfig;
use super::core::CoreConfig;
use super::host_frames::HostPlacement;
use super::machine_file;
use super::prefetch::PrefetchConfig;
use super::tlb::TlbConfig;
use super::walk::{NestedConfig, WalkConfig};
use crate::error::{Result, SimError};
use crate::spec::Spec;

/// The storage device behind file-backed memory (and, later, swap).
#[derive(Clone, Debug, Serialize)]
pub struct StorageConfig {
    pub name: String,
    /// Latency of one random read request, in nanoseconds.
    pub read_latency_ns: u64,
    /// Sustained transfer rate, bytes per second.
    pub bytes_per_sec: u64,
    /// Size of the swap area on it: the machine file's `swap` (the presets' is `"2x"`, twice
    /// the memory, the old BSD installers' rule of thumb), or the option `swap=` (the same
    /// forms: `swap=64G`, `swap=3x`); 0 = no swap.
    pub swap_bytes: u64,
}

/// Cycle costs of the OS operations the model charges.
#[derive(Clone, Debug, Serialize)]
pub struct CostConfig {
    /// Base cycles of one memory access that hits the L1 TLB (the workload's own work).
    pub access_cycles: u64,
    /// Trap into the kernel and return, plus the fault handler's bookkeeping, for one fault.
    pub fault_cycles: u64,
    /// Zeroing one base page, one page at a time (temporal stores).
    pub zero_page_cycles: u64,
    /// Zeroing a whole superpage in bulk, per base page (non-temporal bulk zeroing).
    pub zero_bulk_page_cycles: u64,
    /// Zeroing one base page of a superpage that a fault allocates whole, per base page: Linux's
    /// `clear_huge_page` (`folio_zero_user` since 6.x) at a THP fault. A kernel's choice as much
    /// as the hardware's: Linux 4.3 cleared 4KB at a time (seed 003 Table 5: 84 us a 2MB page),
    /// the 6.18 guest `splab calibrate` ran on clears at its bulk rate. A machine file without
    /// the key gets `zero_page_cycles`.
    pub huge_zero_page_cycles: u64,
    /// Copying one base page (COW, migration, collapse).
    pub copy_page_cycles: u64,
    /// Nanoseconds of a 4KB anonymous page's migration beyond its copy and its mappings' PTE
    /// writes and TLB invalidations (`migrate_pages` as compaction calls it: LRU isolation,
    /// the page lock, the rmap walks of `try_to_unmap` and `remove_migration_ptes`, the target
    /// page, putback and freeing), converted at the machine's clock (`ns_to_cycles`) by
    /// vm/compact.rs. A time, not cycles, because its sources are times. A machine file
    /// without the key gets `DEFAULT_MIGRATE_PAGE_KERNEL_NS`.
    pub migrate_page_kernel_ns: u64,
    /// Writing one page-table entry (promotion / demotion / protection change).
    pub pte_write_cycles: u64,
    /// Invalidating one TLB entry (invlpg or the PALcode equivalent).
    pub tlb_invalidate_cycles: u64,
    /// The superpage bookkeeping (seed 000 4.8, 4.9), per operation. All measured as x86-64
    /// instructions of the operation written as FreeBSD writes it (`scripts/kernel-ops.c`,
    /// gcc 12 -O2, valgrind callgrind), charged at one instruction per cycle (an assumption;
    /// docs/constants.md 7), the same on every machine.
    /// One population-map level looked up or updated: a hash lookup of (object, index) and its
    /// somepop / fullpop counters (27.2 instructions).
    pub popmap_level_cycles: u64,
    /// A page marked populated in its reservation: bit, popcnt, free-extent counts of the sizes
    /// below, move to the list's tail (FreeBSD vm_reserv_populate; 146.3 instructions).
    pub reserv_populate_cycles: u64,
    /// A page marked unpopulated (vm_reserv_depopulate; 119.6 instructions).
    pub reserv_depopulate_cycles: u64,
    /// A new reservation: from the pool, its fields, a cleared 4MB popmap, its array slot
    /// (59.0 instructions).
    pub reserv_create_cycles: u64,
    /// One piece of a preempted or broken reservation: its population from the bitmap, then
    /// freed to a buddy list or re-reserved at a list head (seed 000 4.8; 58.0 instructions).
    pub reserv_piece_cycles: u64,
    /// SHA-1 over one 64-byte block, scalar integer code (a kernel does not use the vector
    /// registers), for seed 000 4.7's hash digests of base pages (`policy dirty=hash`). From
    /// OpenSSL's per-CPU cycles/byte of its hand-tuned SHA-1 (docs/constants.md 11).
    pub sha1_block_cycles: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    pub name: String,
    /// How reports name the machine: `name`, then `:` and the options when options were given
    /// (`skylake:mem=1G`). Set by `from_spec`.
    pub label: String,
    pub description: String,
    /// Byte shifts of the page sizes: `[base, superpages...]`, increasing.
    pub page_shifts: Vec<u8>,
    pub freq_hz: u64,
    pub mem_bytes: u64,
    /// Bits of user virtual address space (the 21264 implements 43; 32-bit paging 32).
    pub va_bits: u8,
    pub tlb: TlbConfig,
    pub walk: WalkConfig,
    /// Data caches (shared with page-table lines) and DRAM latency.
    pub caches: CachesConfig,
    /// Per cache level, the line lifetime in cycles (the machine file's
    /// `caches.levels[i].lifetime_ns`; `Caches::set_lifetime`): a line untouched there for
    /// longer is evicted by other tenants. Empty (no level has one): lines never expire.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cache_lifetimes: Vec<Option<u64>>,
    /// Per cache level, the measured eviction curve, (age in cycles, share of lines gone)
    /// points (the machine file's `caches.levels[i].lifetime_curve_ns`;
    /// `Caches::set_lifetime_curve`), empty for a level without one: it replaces the level's
    /// lifetime threshold. Empty (no level has one): the lifetimes alone.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cache_lifetime_curves: Vec<Vec<(u64, f64)>>,
    /// The out-of-order core that overlaps misses.
    pub core: CoreConfig,
    /// The hardware data prefetcher for individual accesses (hw/prefetch.rs).
    pub prefetch: PrefetchConfig,
    /// L2's spatial (adjacent-line) prefetcher: every line fetched into L2 from beyond it brings
    /// the other line of its 128-byte aligned pair, inserted as its set's next victim
    /// (`Caches::set_pair_fill`; the machine file's `prefetch.pair_lines`). False: no pair.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub pair_lines: bool,
    /// The share of those pair lines filled as most recently used instead
    /// (`Caches::set_pair_recent`; the machine file's `prefetch.pair_recent`). 0: none.
    #[serde(skip_serializing_if = "is_zero_f64")]
    pub pair_recent: f64,
    /// Superpages are represented by replicating the PTE once per base page (Alpha, PA-RISC):
    /// promoting or demoting rewrites every base PTE (seed 000 6.1; seed 002 4).
    pub replicated_ptes: bool,
    /// A guest under nested (two-dimensional) paging: the host's translation (`nested=SIZE`, or
    /// the machine file's `[nested]` table). None: a native machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nested: Option<NestedConfig>,
    pub cost: CostConfig,
    pub storage: StorageConfig,
}

/// `migrate_page_kernel_ns` of a machine file without the key (the files `splab calibrate`
/// wrote before the key existed). Measured on this project's host then (Linux 6.18 under KVM
/// on an AMD EPYC family 26, Zen 5; not seed 003's 4.3) with scripts/compact-cost.c: `echo 1 >
/// /proc/sys/vm/compact_memory` after fragmenting 8GB as seed 003's tool does (16, 64 or 128 4KB
/// pages kept a 2MB block), eight runs migrating 135,832-639,596 pages: 1,965-3,340 ns of
/// system time a migrated page, median 2,300 (the scanning, 3.2 ns a pfn in the runs that
/// migrate nothing, taken off), of which the copy of a cold 4KB page is 602-1,341 ns (same
/// tool, `copy`; lowest and median about 600 and 860). The rest, about 1,400 ns (lowest 1,965 -
/// 602 = 1,363; medians 2,300 - 860 = 1,440). It includes the free page's isolation (the fit
/// cannot separate it from the migrations: one free page is isolated per page migrated), so
/// the free scanner's visit charge counts it twice, by about 30 cycles a page. A VM's figure:
/// the presets' own values and their sources are in their `[cost]` tables (docs/constants.md
/// section 7).
pub const DEFAULT_MIGRATE_PAGE_KERNEL_NS: u64 = 1_400;

/// The built-in presets (`machine_file::BUILT_IN`), in `splab list machines` order.
pub const MACHINES: &[&str] = &["alpha21264", "pa8000", "core2", "core2-64", "skylake"];

/// The prefix of a machine file in a machine spec: `file:PATH.toml[:key=value,...]`.
pub const FILE_PREFIX: &str = "file:";

/// A machine spec resolved to its TOML text: a built-in preset's, or a file's.
struct Source {
    text: String,
    /// Names the text in errors ("built-in machine skylake", "machine file s.toml").
    origin: String,
    /// The options, parsed against `origin`'s name.
    spec: Spec,
    /// The options as given (after the name or the path), if any.
    options: Option<String>,
}

impl Source {
    /// `NAME[:options]` or `file:PATH.toml[:options]`. The path is everything up to and
    /// including `.toml`; options follow its `:`. So a path may hold `:` but must end in `.toml`.
    fn resolve(text: &str) -> Result<Source> {
        let text = text.trim();
        if let Some(rest) = text.strip_prefix(FILE_PREFIX) {
            let (path, options) = match rest.find(".toml:") {
                Some(i) => (&rest[..i + 5], Some(&rest[i + 6..])),
                None => (rest, None),
            };
            if !path.ends_with(".toml") {
                return Err(SimError::BadInput(format!(
                    "machine '{text}': a machine file is given as file:PATH.toml[:mem=SIZE,swap=SIZE,nested=SIZE] \
                     (the path must end in .toml)"
                )));
            }
            let origin = format!("machine file {path}");
            let body = std::fs::read_to_string(path)
                .map_err(|e| SimError::BadInput(format!("{origin}: cannot read it: {e}")))?;
            return Ok(Source {
                text: body,
                spec: Spec::with_params("machine", path, options.unwrap_or(""))?,
                origin,
                options: options.map(str::to_string),
            });
        }
        let spec = Spec::parse("machine", text)?;
        let Some(body) = machine_file::built_in(&spec.name) else {
            return Err(spec.unknown_name(MACHINES));
        };
        Ok(Source {
            text: body.to_string(),
            origin: format!("built-in machine {}", spec.name),
            options: text.split_once(':').map(|(_, o)| o.to_string()),
            spec,
        })
    }
}

/// A machine spec loaded: the machine with its options applied, and what `show` needs.
struct Loaded {
    machine: Machine,
    source: Source,
    /// The file's own memory size and swap rule, before the options.
    file_mem: u64,
    file_swap: machine_file::Swap,
    /// The `swap=` option's rule, if given.
    swap_opt: Option<machine_file::Swap>,
    /// The `nested=` option's value, and whether the file had a `[nested]` table.
    nested_opt: Option<String>,
    file_nested: bool,
}

fn load(text: &str) -> Result<Loaded> {
    let mut source = Source::resolve(text)?;
    let parsed = machine_file::parse(&source.text, &source.origin)?;
    let mut m = parsed.machine;
    let spec = &mut source.spec;
    // The options: `mem=` (at least one page of the largest size, a multiple of it, at most
    // 1TB) and `swap=` (default: the file's `swap`, e.g. twice the memory).
    let largest = 1u64 << m.page_shifts[m.page_shifts.len() - 1];
    let mem = spec.take_size("mem", m.mem_bytes, largest, machine_file::MAX_MEM)?;
    if !mem.is_multiple_of(largest) {
        return Err(SimError::BadInput(format!(
            "machine '{}': mem={} is not a multiple of the largest page size ({})",
            spec.name,
            crate::units::fmt_size(mem),
            crate::units::fmt_size(largest)
        )));
    }
    // `swap=` takes the forms of the file's `storage.swap` (a size, or a multiple of the
    // memory: `3x`), with its bounds and checks.
    let base = 1u64 << m.page_shifts[0];
    let swap_opt = match spec.take_str("swap") {
        None => None,
        Some(v) => Some(machine_file::Swap::parse(&v).ok_or_else(|| {
            SimError::BadInput(format!(
                "machine '{}': bad value '{v}' for 'swap': expected {}",
                spec.name,
                machine_file::SWAP_FORMS
            ))
        })?),
    };
    let swap = match swap_opt {
        None => machine_file::check_swap("swap", parsed.swap, mem, base).map_err(|(_, msg)| {
            SimError::BadInput(format!(
                "machine '{}': mem={} gives {msg}",
                spec.name,
                crate::units::fmt_size(mem)
            ))
        })?,
        Some(rule) => machine_file::check_swap("swap", rule, mem, base).map_err(|(_, msg)| {
            SimError::BadInput(format!("machine '{}': swap={rule}: {msg}", spec.name))
        })?,
    };
    // `nested=SIZE`: the machine becomes a guest whose memory the host backs with pages of
    // SIZE (the file's `[nested]` table with its page size changed, else `default_nested`).
    let nested_opt = spec.take_str("nested");
    spec.clone().finish()?;
    let file_nested = m.nested.is_some();
    if let Some(v) = &nested_opt {
        if let WalkConfig::Software { .. } = m.walk {
            return Err(SimError::BadInput(format!(
                "machine '{}': nested={v}: nested paging needs a hardware radix walker, and {}'s TLB is refilled by software",
                spec.name, m.name
            )));
        }
        let sizes = m
            .page_shifts
            .iter()
            .map(|&x| crate::units::fmt_size(1 << x))
            .collect::<Vec<_>>()
            .join(", ");
        let shift = crate::spec::parse_size(v)
            .filter(|n| n.is_power_of_two() && m.page_shifts.contains(&(n.trailing_zeros() as u8)))
            .map(|n| n.trailing_zeros() as u8)
            .ok_or_else(|| {
                SimError::BadInput(format!(
                    "machine '{}': bad value '{v}' for 'nested': expected one of the machine's page sizes ({sizes})",
                    spec.name
                ))
            })?;
        let mut cfg = m.nested.clone().unwrap_or_else(|| default_nested(&m));
        cfg.page_shift = shift;
        m.nested = Some(cfg);
    }
    if let Some(cfg) = &m.nested {
        machine_file::check_nested(cfg, &m.walk, &m.page_shifts, mem).map_err(|(_, msg)| {
            SimError::BadInput(match &nested_opt {
                Some(v) => format!("machine '{}': nested={v}: {msg}", spec.name),
                None => format!(
                    "machine '{}': mem={}: {msg}",
                    spec.name,
                    crate::units::fmt_size(mem)
                ),
            })
        })?;
    }
    let (file_mem, file_swap) = (m.mem_bytes, parsed.swap);
    m.mem_bytes = mem;
    m.storage.swap_bytes = swap;
    m.label = match &source.options {
        Some(o) => format!("{}:{o}", m.name),
        None => m.name.clone(),
    };
    Ok(Loaded {
        machine: m,
        source,
        file_mem,
        file_swap,
        swap_opt,
        nested_opt,
        file_nested,
    })
}

/// Nested TLB entries `nested=` gives a machine whose file has no `[nested]` table. AMD does not
/// publish the size of its nested TLB (Bhargava et al. ASPLOS'08 describe it), nor Intel
/// its EPT paging-structure caches: an assumption, as the guest's page-walk-cache sizes are.
pub const DEFAULT_NTLB_ENTRIES: u32 = 16;

/// The host translation `nested=SIZE` gives a machine whose file has no `[nested]` table: the
/// host's tables have the guest's levels (EPT has x86-64's four levels of 8-byte entries, Intel
/// SDM vol. 3 ch. 29; AMD's nested tables are the host's own long-mode tables, APM vol. 2
/// 15.25), its paging-structure caches the guest's sizes (`walk.pwc_entries`) and the
/// nested TLB `DEFAULT_NTLB_ENTRIES`. The page size is the option's. A software-refilled
/// machine gets a table that `check_nested` refuses.
fn default_nested(m: &Machine) -> NestedConfig {
    let pwc_entries = match &m.walk {
        WalkConfig::Radix { pwc_entries, .. } => pwc_entries.clone(),
        WalkConfig::Software { .. } => Vec::new(),
    };
    NestedConfig {
        page_shift: m.page_shifts[0],
        level_shifts: m.walk.level_shifts().to_vec(),
        pwc_entries,
        ntlb_entries: DEFAULT_NTLB_ENTRIES,
        placement: HostPlacement::default(),
    }
}

/// The `host_placement` line `show` adds to a file's `[nested]` table that has none: the
/// default, and why.
const HOST_PLACEMENT_DEFAULT: &str =
    "host_placement = \"scattered\" # the default (absent from the file): \
     each host page of guest memory at a host frame unrelated to its guest address, as a host that \
     allocates its backing on demand places it (hw/host_frames.rs)\n";

/// `cfg` as a machine file's `[nested]` table (for `show`).
fn nested_table(cfg: &NestedConfig, option: &str) -> String {
    let sizes = |v: &[u8]| {
        v.iter()
            .map(|&x| format!("\"{}\"", crate::units::fmt_size(1 << x)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "\n[nested] # from the option nested={option}\n\
         source = \"\"\"\n\
         Added by the option nested={option}: a guest machine under nested paging (Intel SDM vol. 3 ch. 29 EPT; \\\n\
         AMD APM vol. 2 15.25). The host backs all guest memory with {page} pages, present. \\\n\
         level_sizes: the guest's (EPT's four levels, SDM vol. 3 ch. 29). pwc_entries: the guest's page-walk-cache \\\n\
         sizes (Intel's EPT paging-structure caches are unpublished: an assumption). ntlb_entries: the nested TLB \\\n\
         (AMD's, Bhargava et al. ASPLOS'08), size unpublished: an assumption. host_placement: {placement}: \\\n\
         {placement_why}\"\"\"\n\
         page_size = \"{page}\"\n\
         host_placement = \"{placement}\"\n\
         level_sizes = [{levels}]\n\
         pwc_entries = [{pwc}]\n\
         ntlb_entries = {ntlb}\n",
        page = crate::units::fmt_size(1 << cfg.page_shift),
        levels = sizes(&cfg.level_shifts),
        pwc = cfg
            .pwc_entries
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        ntlb = cfg.ntlb_entries,
        placement = cfg.placement.name(),
        placement_why = match cfg.placement {
            HostPlacement::Scattered => "each host page of guest memory lies at a host frame unrelated to its guest \\\n\
                address, as a host that allocates its backing on demand (KVM: EPT violation -> get_user_pages) from \\\n\
                its buddy allocator's free lists places it; the caches are indexed by host-physical address \\\n\
                (hw/host_frames.rs).",
            HostPlacement::Identity => "guest-physical g at host-physical g.",
        },
    )
}

impl Machine {
    pub fn base_shift(&self) -> u8 {
        self.page_shifts[0]
    }
    pub fn base_size(&self) -> u64 {
        1 << self.page_shifts[0]
    }
    /// Page-table entries written to map a superpage of `pages` base pages as one: every
    /// base PTE where PTEs are replicated (seed 000 6.1), else the one entry of its level.
    pub fn superpage_entry_writes(&self, pages: u64) -> u64 {
        if self.replicated_ptes {
            pages
        } else {
            1
        }
    }
    /// Buddy order of size class `c`.
    pub fn order_of(&self, c: usize) -> u8 {
        self.page_shifts[c] - self.page_shifts[0]
    }
    pub fn max_order(&self) -> u8 {
        self.order_of(self.page_shifts.len() - 1)
    }
    pub fn page_sizes(&self) -> Vec<u64> {
        self.page_shifts.iter().map(|&s| 1u64 << s).collect()
    }
    pub fn frames(&self) -> u64 {
        self.mem_bytes >> self.base_shift()
    }
    pub fn ns_to_cycles(&self, ns: u64) -> u64 {
        u64::try_from(ns as u128 * self.freq_hz as u128 / 1_000_000_000).unwrap_or(u64::MAX)
    }
    /// Cycles of `ms` milliseconds at the clock, saturating: a policy's sleep may be up to
    /// 2^32 ms (khugepaged's `scan_sleep_millisecs`), which at more than 4.29 GHz is beyond
    /// 64 bits (it overflowed: a panic in a debug build, and in a release build a wrapped
    /// sleep of a millisecond where 43 days were asked).
    pub fn ms_to_cycles(&self, ms: u64) -> u64 {
        u64::try_from(ms as u128 * self.freq_hz as u128 / 1000).unwrap_or(u64::MAX)
    }
    /// Cycles to read `bytes` from the storage device in one request.
    pub fn io_cycles(&self, bytes: u64) -> u64 {
        let ns = self.storage.read_latency_ns
            + (bytes as u128 * 1_000_000_000 / self.storage.bytes_per_sec.max(1) as u128) as u64;
        self.ns_to_cycles(ns)
    }

    /// Parses `NAME[:mem=SIZE,swap=SIZE,nested=SIZE]` (a built-in preset) or
    /// `file:PATH.toml[:mem=SIZE,swap=SIZE,nested=SIZE]` (a machine file).
    pub fn from_spec(text: &str) -> Result<Machine> {
        Ok(load(text)?.machine)
    }

    /// The machine file of a spec, as TOML: the preset's or the file's own text, with the
    /// values its options changed rewritten in place (`splab machine show`). Loading the text
    /// gives the same machine as the spec.
    pub fn show(text: &str) -> Result<String> {
        let l = load(text)?;
        let m = &l.machine;
        let mut out = l.source.text.clone();
        // Edits from the end of the text back, so that earlier spans stay valid.
        let mut edits: Vec<(std::ops::Range<usize>, String)> = Vec::new();
        if m.mem_bytes != l.file_mem {
            let span = machine_file::value_span(&out, "mem").ok_or_else(|| {
                SimError::Invariant(format!("{}: no `mem` after parsing", l.source.origin))
            })?;
            edits.push((
                span,
                format!(
                    "\"{0}\" # from the option mem={0}",
                    crate::units::fmt_size(m.mem_bytes)
                ),
            ));
        }
        if l.file_swap.bytes(m.mem_bytes) != Some(m.storage.swap_bytes) {
            let span = machine_file::value_span(&out, "storage.swap").ok_or_else(|| {
                SimError::Invariant(format!(
                    "{}: no `storage.swap` after parsing",
                    l.source.origin
                ))
            })?;
            // The option's own form: `3x` stays a multiple of the memory.
            let rule = l.swap_opt.map_or_else(
                || crate::units::fmt_size(m.storage.swap_bytes),
                |r| r.to_string(),
            );
            edits.push((span, format!("\"{rule}\" # from the option swap={rule}")));
        }
        if let (Some(v), Some(cfg)) = (&l.nested_opt, &m.nested) {
            if l.file_nested {
                let span = machine_file::value_span(&out, "nested.page_size").ok_or_else(|| {
                    SimError::Invariant(format!(
                        "{}: no `nested.page_size` after parsing",
                        l.source.origin
                    ))
                })?;
                edits.push((
                    span,
                    format!(
                        "\"{}\" # from the option nested={v}",
                        crate::units::fmt_size(1 << cfg.page_shift)
                    ),
                ));
            }
        }
        if l.file_nested && machine_file::value_span(&out, "nested.host_placement").is_none() {
            // The file's [nested] table leaves the placement to its default: say which.
            let span = machine_file::value_span(&out, "nested.page_size").ok_or_else(|| {
                SimError::Invariant(format!(
                    "{}: no `nested.page_size` after parsing",
                    l.source.origin
                ))
            })?;
            let eol = out[span.end..]
                .find('\n')
                .map_or(out.len(), |i| span.end + i + 1);
            let text = if eol == out.len() && !out.ends_with('\n') {
                format!("\n{HOST_PLACEMENT_DEFAULT}")
            } else {
                HOST_PLACEMENT_DEFAULT.to_string()
            };
            edits.push((eol..eol, text));
        }
        edits.sort_by_key(|(span, _)| std::cmp::Reverse(span.start));
        for (span, text) in edits {
            out.replace_range(span, &text);
        }
        if let (Some(v), Some(cfg), false) = (&l.nested_opt, &m.nested, l.file_nested) {
            if !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&nested_table(cfg, v));
        }
        Ok(out)
    }
}

/// serde's `skip_serializing_if` for a share that is 0 (`pair_recent`: none).
fn is_zero_f64(x: &f64) -> bool {
    *x == 0.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_consistent() {
        for name in MACHINES {
            let m = Machine::from_spec(name).unwrap();
            assert!(
                m.page_shifts.windows(2).all(|w| w[0] < w[1]),
                "{name}: page sizes increase"
            );
            assert_eq!(
                m.mem_bytes % (1 << m.page_shifts.last().unwrap()),
                0,
                "{name}"
            );
            for level in std::iter::once(&m.tlb.l1d).chain(m.tlb.lower.iter()) {
                for a in &level.arrays {
                    assert_eq!(a.entries % a.ways, 0, "{name} {}", level.name);
                    assert!(a.sizes.iter().all(|&s| (s as usize) < m.page_shifts.len()));
                }
            }
        }
    }

    #[test]
    fn presets_are_the_built_in_files() {
        let names: Vec<&str> = machine_file::BUILT_IN.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, MACHINES);
        for name in MACHINES {
            let m = Machine::from_spec(name).unwrap();
            assert_eq!(m.name, *name, "the file's name is the preset's");
            assert_eq!(m.label, *name);
            // The file's swap rule: twice the memory.
            assert_eq!(m.storage.swap_bytes, 2 * m.mem_bytes, "{name}");
            // `show` of a preset without options is its file, byte for byte.
            assert_eq!(
                Machine::show(name).unwrap(),
                machine_file::built_in(name).unwrap()
            );
        }
    }

    /// A scratch directory of this test process (removed by the caller).
    fn scratch(tag: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("splab-machine-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn options_apply_on_top_of_a_preset_and_a_file() {
        let m = Machine::from_spec("skylake:mem=4G").unwrap();
        assert_eq!((m.mem_bytes, m.storage.swap_bytes), (4 << 30, 8 << 30));
        assert_eq!(m.label, "skylake:mem=4G");
        let m = Machine::from_spec("skylake:mem=4G,swap=0").unwrap();
        assert_eq!((m.mem_bytes, m.storage.swap_bytes), (4 << 30, 0));

        let dir = scratch("opts");
        let path = dir.join("a.toml");
        // An absolute swap in the file stays when mem= changes the memory.
        let text = machine_file::built_in("core2")
            .unwrap()
            .replace("swap = \"2x\"", "swap = \"1G\"");
        std::fs::write(&path, text).unwrap();
        let p = path.display();
        let m = Machine::from_spec(&format!("file:{p}")).unwrap();
        assert_eq!((m.mem_bytes, m.storage.swap_bytes), (2 << 30, 1 << 30));
        assert_eq!(m.label, "core2", "a file's machine is named by the file");
        let m = Machine::from_spec(&format!("file:{p}:mem=64M")).unwrap();
        assert_eq!((m.mem_bytes, m.storage.swap_bytes), (64 << 20, 1 << 30));
        assert_eq!(m.label, "core2:mem=64M");
        let m = Machine::from_spec(&format!("file:{p}:swap=3G")).unwrap();
        assert_eq!(m.storage.swap_bytes, 3 << 30);
        let e = Machine::from_spec(&format!("file:{p}:mem=5M"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mem") && e.contains("5M") && e.contains("4M"),
            "{e}"
        );
        let e = Machine::from_spec(&format!("file:{p}:size=1G"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("'size'") && e.contains("mem, swap"), "{e}");
        // A swap area is whole base pages: an option or a file key that is not is refused,
        // naming it (alpha21264's base page is 8KB, so 4K is not one either).
        for (spec, key) in [
            ("skylake:swap=1".to_string(), "swap=1: 1 bytes"),
            ("skylake:swap=6K".to_string(), "swap=6K"),
            ("alpha21264:swap=4K".to_string(), "swap=4K"),
        ] {
            let e = Machine::from_spec(&spec).unwrap_err().to_string();
            assert!(e.contains(key) && e.contains("base pages"), "{spec}: {e}");
        }
        assert_eq!(
            Machine::from_spec("alpha21264:swap=16K")
                .unwrap()
                .storage
                .swap_bytes,
            16 << 10
        );
        // swap= takes the file's forms: a multiple of the memory too, following mem=.
        let m = Machine::from_spec("skylake:swap=3x").unwrap();
        assert_eq!(m.storage.swap_bytes, 96 << 30);
        let m = Machine::from_spec("skylake:mem=4G,swap=3x").unwrap();
        assert_eq!(m.storage.swap_bytes, 12 << 30);
        assert_eq!(
            Machine::from_spec("skylake:swap=0x")
                .unwrap()
                .storage
                .swap_bytes,
            0
        );
        let m = Machine::from_spec(&format!("file:{p}:mem=64M,swap=2X")).unwrap();
        assert_eq!(m.storage.swap_bytes, 128 << 20);
        // Bad forms and the file's bound (4T), with the file's words.
        for (spec, needles) in [
            (
                "skylake:swap=3y",
                &[
                    "machine 'skylake'",
                    "bad value '3y' for 'swap'",
                    "multiple of the memory such as \"2x\"",
                ][..],
            ),
            ("skylake:swap=1.5x", &["'1.5x' for 'swap'"][..]),
            ("skylake:swap=x", &["'x' for 'swap'"][..]),
            (
                "skylake:mem=1T,swap=5x",
                &["swap=5x: more than 4T of swap"][..],
            ),
            ("skylake:swap=5T", &["swap=5T: more than 4T of swap"][..]),
            ("skylake:swap=99999999999x", &["more than 4T of swap"][..]),
        ] {
            let e = Machine::from_spec(spec).unwrap_err().to_string();
            for n in needles {
                assert!(e.contains(n), "{spec}: {e}");
            }
        }
        // A preset's file with its swap (and memory) replaced, written as `name`: its path.
        let file = |name: &str, preset: &str, swap: &str, mem: Option<&str>| {
            let mut text = machine_file::built_in(preset)
                .unwrap()
                .replace("swap = \"2x\"", &format!("swap = \"{swap}\""));
            if let Some(mem) = mem {
                text = text.replace("mem = \"32G\"", &format!("mem = \"{mem}\""));
            }
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path.display().to_string()
        };
        let err = |spec: String| Machine::from_spec(&spec).unwrap_err().to_string();
        // The same bound in a file at the same memory.
        let e = err(format!(
            "file:{}",
            file("five.toml", "skylake", "5x", Some("1T"))
        ));
        assert!(
            e.contains("storage.swap") && e.contains("more than 4T of swap"),
            "{e}"
        );
        // An option replaces the file's rule: it is the one checked. (A file of 32G with
        // "5x": mem=1T makes its rule 5T, refused, unless swap= replaces it.)
        let five = file("five32.toml", "skylake", "5x", None);
        let e = err(format!("file:{five}:mem=1T"));
        assert!(e.contains("mem=1T gives more than 4T of swap"), "{e}");
        let m = Machine::from_spec(&format!("file:{five}:mem=1T,swap=0")).unwrap();
        assert_eq!((m.mem_bytes, m.storage.swap_bytes), (1 << 40, 0));
        let e = err(format!("file:{}", file("odd.toml", "core2", "1000", None)));
        assert!(
            e.contains("storage.swap") && e.contains("base pages"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn show_writes_the_options_into_the_file() {
        let dir = scratch("show");
        for spec in [
            "skylake:mem=1G",
            "skylake:swap=0",
            "alpha21264:mem=64M,swap=1G",
            "pa8000:mem=128M",
            "skylake:nested=2M",
            "skylake:mem=1G,nested=4K",
            "skylake:mem=4G,swap=3x",
        ] {
            let text = Machine::show(spec).unwrap();
            let path = dir.join("m.toml");
            std::fs::write(&path, &text).unwrap();
            let mut from_file = Machine::from_spec(&format!("file:{}", path.display())).unwrap();
            let mut direct = Machine::from_spec(spec).unwrap();
            from_file.label.clear();
            direct.label.clear();
            assert_eq!(format!("{from_file:?}"), format!("{direct:?}"), "{spec}");
            assert!(text.contains("# from the option"), "{spec}: {text}");
        }
        // Options on a file are written into its text the same way.
        let path = dir.join("s.toml");
        std::fs::write(&path, Machine::show("skylake").unwrap()).unwrap();
        let text = Machine::show(&format!("file:{}:mem=2G", path.display())).unwrap();
        assert!(
            text.contains("mem = \"2G\" # from the option mem=2G"),
            "{text}"
        );
        assert!(text.contains("swap = \"2x\""), "{text}");
        // A multiple of the memory stays one, so that a later mem= moves it too.
        let text = Machine::show("skylake:mem=4G,swap=3x").unwrap();
        assert!(
            text.contains("swap = \"3x\" # from the option swap=3x"),
            "{text}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_files_cache_lifetime_round_trips() {
        let dir = scratch("lifetime");
        let path = dir.join("l.toml");
        let text = Machine::show("skylake").unwrap().replacen(
            "replacement = \"nru\"",
            "replacement = \"nru\"\nlifetime_ns = 2_500_000 # measured",
            1,
        );
        std::fs::write(&path, &text).unwrap();
        let spec = format!("file:{}", path.display());
        assert_eq!(Machine::show(&spec).unwrap(), text);
        let m = Machine::from_spec(&spec).unwrap();
        // 2.5 ms at skylake's 3.7 GHz (the LLC, the third level).
        assert_eq!(m.freq_hz, 3_700_000_000);
        assert_eq!(m.cache_lifetimes, vec![None, None, Some(9_250_000)]);
        let m = Machine::from_spec(&format!("{spec}:mem=1G")).unwrap();
        assert_eq!(m.cache_lifetimes[2], Some(9_250_000));
        assert!(Machine::from_spec("skylake")
            .unwrap()
            .cache_lifetimes
            .is_empty());
        // And a lifetime curve, as `splab calibrate` writes it.
        let text = text.replacen(
            "lifetime_ns = 2_500_000 # measured",
            "lifetime_ns = 2_500_000 # measured\n\
             lifetime_curve_ns = [[220000, 0.024], [6580000, 0.482], [25150000, 1.0]]",
            1,
        );
        std::fs::write(&path, &text).unwrap();
        assert_eq!(Machine::show(&spec).unwrap(), text);
        let m = Machine::from_spec(&format!("{spec}:mem=1G")).unwrap();
        assert_eq!(
            m.cache_lifetime_curves[2],
            vec![(814_000, 0.024), (24_346_000, 0.482), (93_055_000, 1.0)]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_path_ends_at_toml_and_may_hold_colons() {
        let dir = scratch("colon").join("a:b");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.toml");
        std::fs::write(&path, machine_file::built_in("pa8000").unwrap()).unwrap();
        let m = Machine::from_spec(&format!("file:{}:mem=256M", path.display())).unwrap();
        assert_eq!((m.name.as_str(), m.mem_bytes), ("pa8000", 256 << 20));
        let e = Machine::from_spec(&format!("file:{}", dir.join("m.txt").display()))
            .unwrap_err()
            .to_string();
        // Every option a file takes, nested= too (the message left it out).
        assert!(
            e.contains("must end in .toml") && e.contains("[:mem=SIZE,swap=SIZE,nested=SIZE]"),
            "{e}"
        );
        let e = Machine::from_spec(&format!("file:{}", dir.join("none.toml").display()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("none.toml") && e.contains("cannot read"), "{e}");
        std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
    }

    #[test]
    fn bad_machine_specs() {
        let e = Machine::from_spec("vax").unwrap_err().to_string();
        assert!(e.contains("'vax'") && e.contains("skylake"), "{e}");
        assert!(Machine::from_spec("skylake:mem=3M").is_err());
        assert!(Machine::from_spec("skylake:memory=1G").is_err());
        assert_eq!(
            Machine::from_spec("skylake:mem=4G").unwrap().mem_bytes,
            4 << 30
        );
    }
}
