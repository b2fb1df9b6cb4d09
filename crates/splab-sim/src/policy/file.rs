//! Policies as files (issue 11): the TOML form of a `Policy`, organised by seed 003's five
//! events of a superpage's life (design.md's table), then the daemons and the choices that are
//! none of the events. `splab policy show NAME` writes it; `-p file:PATH.toml` reads it back to
//! the same value (the `policy_files` tests hold both directions, and
//! `crates/splab/tests/policy_files.rs` holds that the reports are byte-identical).
//!
//! Where each field of `Policy` goes:
//!
//! | table | keys | `Policy` field |
//! |---|---|---|
//! | (top) | `name` | `name`: what reports call the policy |
//! | `[physical_allocation]` | `kind`, `sizes`, `preferred`; `enabled`, `defrag`, `use_zero_page`, `zero_page_wp` (thp) | `alloc`, its `ReservPolicy::sizes`, `preferred`; `ThpPolicy::enabled`, `defrag`, `use_zero_page`, `zero_page_wp` |
//! | `[preparation]` | `kind`; `threshold`, `mode` (kind = "threshold") | `prep` |
//! | `[mapping_creation]` | `promote`, `map_full_reservation`, `relaxed_mapping`, `fault_around` | `ReservPolicy::promote`, `map_full_reservation`, `relaxed_mapping`, `fault_around` |
//! | `[mapping_destruction]` | `clean_write`, `dirty`, `unmap_demotes` | `ReservPolicy::clean_write`, `dirty`, `unmap_demotes` |
//! | `[deallocation]` | `shortage`, `lists`; `shrink_underused` (thp) | `ReservPolicy::shortage`, `lists`; `ThpPolicy::shrink_underused` |
//! | `[daemons.pagedaemon]` | `enabled`, `contiguity` | `pagedaemon`, `contiguity` |
//! | `[daemons.khugepaged]` | `enabled`, sleeps and limits (`"default"`: Linux's for the THP size) | `khugepaged` |
//! | `[daemons.kcompactd]` | `enabled`, `compaction_proactiveness` | `kcompactd` |
//! | `[placement]` | `mmap`, `wired` | `placement`, `wired` |
//! | `[page_cache]` | `readahead`, `close_deactivate` | `readahead`, `close_deactivate` |
//!
//! The reservation options exist only with `physical_allocation.kind = "reserve"`, as in the
//! value. `ReservPolicy::classes` is not in the file: it is derived from `sizes` and the machine
//! (`Policy::resolve`). Every table and key is required (base pages leave out the tables that
//! would be empty), so a file says everything it means; a key that is unknown, missing, of the
//! wrong type or out of range is an error naming the key and its line.

use std::fmt::Write as _;
use std::ops::Range;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::{
    word, word_of, AllocPolicy, CleanWrite, Dirty, FaultAround, HintPolicy, Kcompactd, Khugepaged,
    Origin, Policy, PreferredSize, PrepPolicy, ReservPolicy, ThpPolicy, CLEAN_WRITE, CONTIGUITY,
    DIRTY, LISTS, MAX_THRESHOLD, PAGEBLOCK_SKIP, PLACEMENT, POLICIES, PREFERRED, PREP_MODE,
    PROMOTE, SHORTAGE, THP_DEFRAG, THP_ENABLED, WIRED, ZERO_PAGE_WP,
};
use crate::error::{Result, SimError};
use crate::spec::{parse_size, Spec};
use crate::units::fmt_size;

/// A value in a policy file.
#[derive(Clone, Debug, PartialEq)]
enum Val {
    Word(&'static str),
    Bool(bool),
    Int(u64),
    /// A count, or "default".
    Limit(Option<u64>),
    /// Byte sizes, written as "64K" where that reads back exactly.
    Sizes(Vec<u64>),
    /// One byte size, written as `Sizes`' are.
    Size(u64),
    /// HP-UX's page-size hint: a size (chatr), or None: "transparent".
    Hint(Option<u64>),
    FaultAround(FaultAround),
}

/// One table of the file: its name, what it is, and its keys with a comment each.
struct Table {
    name: &'static str,
    about: &'static str,
    keys: Vec<(&'static str, Val, String)>,
}

/// "a | b | c".
fn choices<T>(t: &[(&'static str, T)]) -> String {
    t.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(" | ")
}

/// `physical_allocation.kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    BasePage,
    Reserve,
    Thp,
    Hint,
}
const ALLOC_KIND: &[(&str, Kind)] = &[
    ("base_page", Kind::BasePage),
    ("reserve", Kind::Reserve),
    ("thp", Kind::Thp),
    ("hint", Kind::Hint),
];
/// HP-UX's tunables of the transparent method, in `physical_allocation` with kind = "hint".
const VPS_KEYS: &[(&str, &str)] = &[
    ("vps_pagesize", "HP-UX vps_pagesize: the least page size transparent selection picks"),
    ("vps_ceiling", "HP-UX vps_ceiling: the largest page size transparent selection picks (a size the machine lacks: the next lower)"),
];
/// khugepaged's sleeps: file key, the field, what it is.
type KhSleep = fn(&mut Khugepaged) -> &mut u64;
const KHUGEPAGED_SLEEPS: &[(&str, KhSleep, &str)] = &[
    (
        "scan_sleep_millisecs",
        |k| &mut k.scan_sleep_ms,
        "sleep between wakes, ms",
    ),
    (
        "alloc_sleep_millisecs",
        |k| &mut k.alloc_sleep_ms,
        "sleep after a failed THP allocation, ms",
    ),
];
/// khugepaged's limits, "default" meaning Linux's for the THP's size (HPAGE_PMD_NR): file key,
/// the field, the least value (as the parameter's, `Policy::from_spec`), what it is.
type KhLimit = fn(&mut Khugepaged) -> &mut Option<u64>;
const KHUGEPAGED_LIMITS: &[(&str, KhLimit, u64, &str)] = &[
    (
        "pages_to_scan",
        |k| &mut k.pages_to_scan,
        1,
        "PTEs scanned per wake (default: HPAGE_PMD_NR x 8 = 4096)",
    ),
    (
        "max_ptes_none",
        |k| &mut k.max_ptes_none,
        0,
        "empty PTEs a collapsed region may have (default: HPAGE_PMD_NR - 1 = 511)",
    ),
    (
        "max_ptes_swap",
        |k| &mut k.max_ptes_swap,
        0,
        "PTEs on swap a collapsed region may have (default: HPAGE_PMD_NR / 8 = 64)",
    ),
    (
        "max_ptes_shared",
        |k| &mut k.max_ptes_shared,
        0,
        "PTEs of shared pages a collapsed region may have (default: HPAGE_PMD_NR / 2 = 256)",
    ),
];
const FAULT_AROUND_KIND: &[(&str, u8)] = &[("off", 0), ("window", 1), ("spiral", 2)];
/// `preparation.kind`: per page, or seed 003's hybrid preparation (`threshold`, `mode`).
const PREP_KIND: &[(&str, bool)] = &[("per_page", false), ("threshold", true)];

/// The policy's tables, in file order. The one description of the file's shape: the writer,
/// `splab list policies` and (by the round-trip tests) the reader follow it.
fn tables(p: &Policy) -> Vec<Table> {
    use Val::*;
    let r = p.reserv();
    let kind = match &p.alloc {
        AllocPolicy::BasePage => Kind::BasePage,
        AllocPolicy::Reserve(_) => Kind::Reserve,
        AllocPolicy::Thp(_) => Kind::Thp,
        AllocPolicy::Hint(_) => Kind::Hint,
    };
    let mut alloc = vec![(
        "kind",
        Word(word_of(ALLOC_KIND, kind)),
        "base_page: one base page per fault | reserve: reservations (seed 000 4.1, FreeBSD vm_reserv) | thp: Linux transparent huge pages at first touch | hint: HP-UX's page-size hints (seed 002)"
            .to_string(),
    )];
    if let Some(h) = p.hint() {
        alloc.push((
            "hint",
            Hint(h.hint),
            "seed 002 6: chatr's data page-size hint, e.g. \"4M\" | \"transparent\": from the region's size between vps_pagesize and vps_ceiling".into(),
        ));
        for ((key, about), v) in VPS_KEYS.iter().zip([h.vps_pagesize, h.vps_ceiling]) {
            alloc.push((key, Size(v), about.to_string()));
        }
        alloc.push((
            "heap_growth",
            Bool(h.heap_growth),
            "seed 002 6's heap growth-rate adjustment: with a chatr hint, brk grows the heap to the hint page's next boundary".into(),
        ));
    }
    if let Some(t) = p.thp() {
        alloc.push((
            "enabled",
            Word(word_of(THP_ENABLED, t.enabled)),
            format!(
                "{}: Linux's transparent_hugepage/enabled",
                choices(THP_ENABLED)
            ),
        ));
        alloc.push((
            "defrag",
            Word(word_of(THP_DEFRAG, t.defrag)),
            format!(
                "{}: Linux's transparent_hugepage/defrag, compaction when no free THP-sized block exists",
                choices(THP_DEFRAG)
            ),
        ));
        alloc.push((
            "use_zero_page",
            Bool(t.use_zero_page),
            "Linux's transparent_hugepage/use_zero_page: a read fault in an empty THP-eligible region maps the shared huge zero page read-only".into(),
        ));
        alloc.push((
            "zero_page_wp",
            Word(word_of(ZERO_PAGE_WP, t.zero_page_wp)),
            format!(
                "{}: a write to the huge zero page maps a new THP (Linux 4.3, 6.13+; split if none is free) | splits it into 4KB zero-page entries (5.8 to 6.12)",
                choices(ZERO_PAGE_WP)
            ),
        ));
        alloc.push((
            "mthp",
            Sizes(t.mthp.clone()),
            "anonymous mTHP sizes enabled as `inherit` (Linux 6.8 hugepages-<size>kB/enabled), tried largest first at a fault; [] for none".into(),
        ));
    }
    let mut kc = vec![(
        "enabled",
        Bool(p.kcompactd.is_some()),
        "background compaction (mm/compaction.c kcompactd; not with kind = \"base_page\")"
            .to_string(),
    )];
    if let Some(k) = &p.kcompactd {
        kc.push((
            "compaction_proactiveness",
            Int(k.proactiveness),
            "vm.compaction_proactiveness, 0 to 100: proactive compaction every 500 ms above fragmentation score 100 - it + 10 (0: off)".to_string(),
        ));
    }
    let mut kh = vec![(
        "enabled",
        Bool(p.khugepaged.is_some()),
        "out-of-place collapse of base pages into THPs (mm/khugepaged.c; with kind = \"thp\", or \"reserve\": the regions no reservation covers)"
            .to_string(),
    )];
    if let Some(k) = &p.khugepaged {
        let mut k = k.clone();
        for (key, f, about) in KHUGEPAGED_SLEEPS {
            kh.push((key, Int(*f(&mut k)), about.to_string()));
        }
        for (key, f, _, about) in KHUGEPAGED_LIMITS {
            kh.push((key, Limit(*f(&mut k)), about.to_string()));
        }
    }
    let mut creation = Vec::new();
    let mut destruction = Vec::new();
    let mut dealloc = Vec::new();
    if let Some(r) = r {
        alloc.push((
            "sizes",
            Sizes(r.sizes.clone()),
            "superpage sizes reservations may use, e.g. [\"64K\", \"4M\"]; [] = all of the machine's (preferred = \"freebsd\": [] only)".into(),
        ));
        alloc.push((
            "preferred",
            Word(word_of(PREFERRED, r.preferred)),
            format!(
                "{}: seed 000 4.2's preferred size | FreeBSD's one level",
                choices(PREFERRED)
            ),
        ));
        creation.push((
            "promote",
            Word(word_of(PROMOTE, r.promote)),
            format!(
                "{}: incremental promotion (4.5) | pay for it, map base pages (6.6) | never",
                choices(PROMOTE)
            ),
        ));
        creation.push((
            "map_full_reservation",
            Bool(r.map_full_reservation),
            "a fault on a resident page of a fully populated reservation maps the whole superpage (FreeBSD vm_fault_soft_fast) | the base page, promoted when all are mapped (seed 000)".into(),
        ));
        creation.push((
            "relaxed_mapping",
            Bool(r.relaxed_mapping),
            "anonymous superpages mapped once fully prepared, whatever their pages' dirty state (seed 003 5.1, Quicksilver) | only with uniform dirty state (FreeBSD)".into(),
        ));
        destruction.push((
            "clean_write",
            Word(word_of(CLEAN_WRITE, r.clean_write)),
            format!(
                "{}: a write to a clean superpage (4.7; mark_dirty with dirty = whole | hash)",
                choices(CLEAN_WRITE)
            ),
        ));
        destruction.push((
            "dirty",
            Word(word_of(DIRTY, r.dirty)),
            format!(
                "{}: what a dirty superpage's write-out writes (4.7, 6.7)",
                choices(DIRTY)
            ),
        ));
        destruction.push((
            "unmap_demotes",
            Bool(r.unmap_demotes),
            "unmapping a superpage demotes it incrementally first (seed 000 6.6) | removes it whole (FreeBSD)".into(),
        ));
        dealloc.push((
            "shortage",
            Word(word_of(SHORTAGE, r.shortage)),
            format!("{}: no free extent: preempt a reservation (4.3, 4.8) | a base page, then break partpopq's head", choices(SHORTAGE)),
        ));
        dealloc.push((
            "lists",
            Word(word_of(LISTS, r.lists)),
            format!(
                "{}: how partially populated reservations wait for preemption (4.8 | FreeBSD)",
                choices(LISTS)
            ),
        ));
    }
    if let Some(t) = p.thp() {
        dealloc.push((
            "shrink_underused",
            Bool(t.shrink_underused),
            "Linux 6.12's transparent_hugepage/shrink_underused: the deferred split shrinker also splits THPs with more zero-filled pages than khugepaged's max_ptes_none (never at 511)".into(),
        ));
    }
    let mut prep = vec![(
        "kind",
        Word(word_of(PREP_KIND, p.prep.threshold().is_some())),
        format!(
            "{}: zero or read each base page at its fault | seed 003 5.1's hybrid preparation (reservations only)",
            choices(PREP_KIND)
        ),
    )];
    if let Some((t, mode)) = p.prep.threshold() {
        prep.push((
            "threshold",
            Int(t as u64),
            "t: populated pages (counting the faulting one) at which the rest of an anonymous reservation is prepared; 0 or 1: at the first fault (Sync-1)".into(),
        ));
        prep.push((
            "mode",
            Word(word_of(PREP_MODE, mode)),
            format!(
                "{}: the fault handler, bulk zeroing, superpage mapped at once (Sync-t) | a daemon every 1 s, 4KB at a time, mapped at the next soft fault (Async-t)",
                choices(PREP_MODE)
            ),
        ));
    }
    creation.push((
        "fault_around",
        FaultAround(p.fault_around),
        "neighbours mapped with a faulting page: { kind = \"off\" } | { kind = \"window\", bytes = \"64K\" } (Linux) | { kind = \"spiral\", behind = 4, ahead = 4 } (FreeBSD prefault)".into(),
    ));
    vec![
        Table {
            name: "physical_allocation",
            about: "Event 1, physical allocation: what a fault asks of physical memory.",
            keys: alloc,
        },
        Table {
            name: "preparation",
            about: "Event 2, preparation: how a new page's contents are made.",
            keys: prep,
        },
        Table {
            name: "mapping_creation",
            about: "Event 3, mapping creation: promotion, and the neighbours a fault maps.",
            keys: creation,
        },
        Table {
            name: "mapping_destruction",
            about: "Event 4, mapping destruction: demotion.",
            keys: destruction,
        },
        Table {
            name: "deallocation",
            about: "Event 5, deallocation: giving reserved memory back.",
            keys: dealloc,
        },
        Table {
            name: "daemons.pagedaemon",
            about: "The page daemon (seed 000 5.1, FreeBSD vm_pageout).",
            keys: vec![
                (
                    "enabled",
                    Bool(p.pagedaemon),
                    "false: memory running out is an error (to study an allocator alone)".into(),
                ),
                (
                    "contiguity",
                    Word(word_of(CONTIGUITY, p.contiguity)),
                    format!("{}: contiguity-aware replacement (5.1)", choices(CONTIGUITY)),
                ),
            ],
        },
        Table {
            name: "daemons.khugepaged",
            about: "khugepaged (Linux), with its sysfs knobs.",
            keys: kh,
        },
        Table {
            name: "daemons.kcompactd",
            about: "kcompactd (Linux): compaction on demand and proactive.",
            keys: kc,
        },
        Table {
            name: "placement",
            about: "Placement, none of the events: where mappings and wired pages go.",
            keys: vec![
                (
                    "mmap",
                    Word(word_of(PLACEMENT, p.placement)),
                    format!("{}: mmap addresses aligned to superpages (5.3) or not", choices(PLACEMENT)),
                ),
                (
                    "wired",
                    Word(word_of(WIRED, p.wired)),
                    format!("{}: the kernel's wired pages (5.2)", choices(WIRED)),
                ),
                (
                    "mobility_grouping",
                    Bool(p.mobility_grouping),
                    "Linux's pageblock migratetypes: kernel frames and user pages in separate pageblocks, async compaction only in MOVABLE ones".into(),
                ),
                (
                    "pageblock_skip",
                    Word(word_of(PAGEBLOCK_SKIP, p.pageblock_skip)),
                    format!("{}: compaction's pageblock skip bits (Linux 3.7-5.0 unisolated, 5.1+ scanned)", choices(PAGEBLOCK_SKIP)),
                ),
                (
                    "skip_on_failure",
                    Bool(p.skip_on_failure),
                    "async direct compaction gives a block up at its first page it cannot isolate (Linux 4.6+)".into(),
                ),
            ],
        },
        Table {
            name: "page_cache",
            about: "The page cache, none of the events.",
            keys: vec![
                (
                    "readahead",
                    Bool(p.readahead),
                    "clustered read-ahead on file page-in and read() (false: one page a request)".into(),
                ),
                (
                    "close_deactivate",
                    Bool(p.close_deactivate),
                    "a file no process has open or mapped has its clean pages deactivated (5.1 (3))".into(),
                ),
            ],
        },
    ]
}

/// A size as the file writes it: "64K" when that reads back as the same bytes, else bytes.
fn size_text(b: u64) -> String {
    let t = fmt_size(b);
    if t.chars().last().is_some_and(|c| c.is_ascii_alphabetic()) && parse_size(&t) == Some(b) {
        toml_str(&t)
    } else {
        b.to_string()
    }
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn toml_value(v: &Val) -> String {
    match v {
        Val::Word(w) => toml_str(w),
        Val::Bool(b) => b.to_string(),
        Val::Int(n) => n.to_string(),
        Val::Limit(Some(n)) => n.to_string(),
        Val::Limit(None) => toml_str("default"),
        Val::Size(b) => size_text(*b),
        Val::Hint(Some(b)) => size_text(*b),
        Val::Hint(None) => toml_str("transparent"),
        Val::Sizes(s) => format!(
            "[{}]",
            s.iter()
                .map(|&b| size_text(b))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Val::FaultAround(FaultAround::Off) => "{ kind = \"off\" }".into(),
        Val::FaultAround(FaultAround::Window { bytes }) => {
            format!("{{ kind = \"window\", bytes = {} }}", size_text(*bytes))
        }
        Val::FaultAround(FaultAround::Spiral { behind, ahead }) => {
            format!("{{ kind = \"spiral\", behind = {behind}, ahead = {ahead} }}")
        }
    }
}

/// The value as `splab list policies` shows it: the words of the policy spec where there is
/// one (`prefault=4+4`), else `key=value`.
fn list_value(k: &str, v: &Val) -> String {
    match v {
        Val::Word(w) => format!("{k}={w}"),
        Val::Bool(b) => format!("{k}={b}"),
        Val::Int(n) | Val::Limit(Some(n)) => format!("{k}={n}"),
        Val::Limit(None) => format!("{k}=default"),
        Val::Size(b) | Val::Hint(Some(b)) => format!("{k}={}", fmt_size(*b)),
        Val::Hint(None) => format!("{k}=transparent"),
        Val::Sizes(s) if s.is_empty() && k == "mthp" => format!("{k}=none"),
        Val::Sizes(s) if s.is_empty() => format!("{k}=all"),
        Val::Sizes(s) => format!(
            "{k}={}",
            s.iter().map(|&b| fmt_size(b)).collect::<Vec<_>>().join("+")
        ),
        Val::FaultAround(FaultAround::Off) => "fault_around=off".into(),
        Val::FaultAround(FaultAround::Window { bytes }) => {
            format!("fault_around={}", fmt_size(*bytes))
        }
        Val::FaultAround(FaultAround::Spiral { behind, ahead }) => {
            format!("prefault={behind}+{ahead}")
        }
    }
}

pub(super) fn to_toml(p: &Policy) -> String {
    let mut out = String::new();
    out.push_str(
        "# A splab policy: `splab run -p file:THIS.toml` (README \"Policies as files\").\n\
         # Every key is required; `name` is what reports call the policy.\n",
    );
    let _ = writeln!(out, "name = {}", toml_str(&p.name));
    let tables = tables(p);
    let kind = match &tables[0].keys[0].1 {
        Val::Word(w) => *w,
        _ => unreachable!("physical_allocation.kind is the first key"),
    };
    for t in tables {
        let _ = writeln!(out, "\n# {}\n[{}]", t.about, t.name);
        if t.keys.is_empty() {
            let _ = writeln!(
                out,
                "# (no options without reservations: physical_allocation.kind = \"{kind}\")"
            );
        }
        for (k, v, c) in &t.keys {
            let line = format!("{k} = {}", toml_value(v));
            if line.len() > 34 {
                let _ = writeln!(out, "# {c}\n{line}");
            } else {
                let _ = writeln!(out, "{line:<34} # {c}");
            }
        }
    }
    out
}

/// `splab list policies`: each preset's choice per event, one column a preset.
pub fn presets_table() -> String {
    let presets: Vec<Policy> = POLICIES
        .iter()
        .map(|(n, _)| Policy::preset(n).expect("presets parse"))
        .collect();
    let cols: Vec<Vec<Table>> = presets.iter().map(tables).collect();
    let names: Vec<&str> = cols[0].iter().map(|t| t.name).collect();
    // Rows: per table, as many lines as the preset with the most keys there.
    let mut rows: Vec<Vec<String>> = vec![std::iter::once(String::new())
        .chain(presets.iter().map(|p| p.name.clone()))
        .collect()];
    for (i, table) in names.iter().enumerate() {
        let cells: Vec<Vec<String>> = cols
            .iter()
            .map(|c| {
                let keys = &c[i].keys;
                if keys.is_empty() {
                    vec!["-".to_string()]
                } else {
                    keys.iter().map(|(k, v, _)| list_value(k, v)).collect()
                }
            })
            .collect();
        let n = cells.iter().map(Vec::len).max().unwrap_or(1);
        for line in 0..n {
            let mut row = vec![if line == 0 {
                table.to_string()
            } else {
                String::new()
            }];
            row.extend(
                cells
                    .iter()
                    .map(|c| c.get(line).cloned().unwrap_or_default()),
            );
            rows.push(row);
        }
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|j| rows.iter().map(|r| r[j].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
    out
}

/// The file's text, for line numbers and the text of bad values.
struct Src<'a> {
    text: &'a str,
    origin: &'a str,
}

impl Src<'_> {
    /// The line (from 1) of byte offset `at`.
    fn line(&self, at: usize) -> usize {
        self.text[..at.min(self.text.len())].matches('\n').count() + 1
    }

    fn err(&self, span: Option<Range<usize>>, msg: impl std::fmt::Display) -> SimError {
        let at = match span {
            Some(s) => format!(", line {}", self.line(s.start)),
            None => String::new(),
        };
        SimError::BadInput(format!("policy file '{}'{at}: {msg}", self.origin))
    }

    fn text_of(&self, span: Range<usize>) -> &str {
        self.text.get(span).unwrap_or("?").trim()
    }
}

/// A table being read: every key read is marked, and `finish` refuses the others.
struct Tbl<'t, 'i> {
    path: String,
    span: Option<Range<usize>>,
    t: &'t DeTable<'i>,
    read: Vec<&'static str>,
}

type Value<'t, 'i> = &'t Spanned<DeValue<'i>>;

impl<'t, 'i> Tbl<'t, 'i> {
    fn key(&self, k: &str) -> String {
        if self.path.is_empty() {
            k.to_string()
        } else {
            format!("{}.{k}", self.path)
        }
    }

    fn get(&mut self, k: &'static str) -> Option<Value<'t, 'i>> {
        self.read.push(k);
        self.t
            .iter()
            .find(|(key, _)| key.get_ref() == k)
            .map(|(_, v)| v)
    }

    fn need(&mut self, s: &Src, k: &'static str, expect: &str) -> Result<Value<'t, 'i>> {
        let key = self.key(k);
        let span = self.span.clone();
        self.get(k)
            .ok_or_else(|| s.err(span, format!("missing key '{key}' ({expect})")))
    }

    fn bad(&self, s: &Src, k: &str, v: Value, expect: &str) -> SimError {
        s.err(
            Some(v.span()),
            format!(
                "{} = {}: expected {expect}",
                self.key(k),
                s.text_of(v.span())
            ),
        )
    }

    fn word<T: Copy>(&mut self, s: &Src, k: &'static str, t: &[(&'static str, T)]) -> Result<T> {
        let expect = format!("one of {}", choices(t).replace(" | ", ", "));
        let v = self.need(s, k, &expect)?;
        v.get_ref()
            .as_str()
            .and_then(|w| word(t, w))
            .ok_or_else(|| self.bad(s, k, v, &expect))
    }

    fn bool(&mut self, s: &Src, k: &'static str) -> Result<bool> {
        let v = self.need(s, k, "true or false")?;
        v.get_ref()
            .as_bool()
            .ok_or_else(|| self.bad(s, k, v, "true or false"))
    }

    fn int(&mut self, s: &Src, k: &'static str, max: u64) -> Result<u64> {
        let expect = format!("an integer from 0 to {max}");
        let v = self.need(s, k, &expect)?;
        int_of(v)
            .filter(|&n| n <= max)
            .ok_or_else(|| self.bad(s, k, v, &expect))
    }

    /// A table under this one; `None` if it is absent and `optional`.
    fn table(&mut self, s: &Src, k: &'static str, optional: bool) -> Result<Option<Tbl<'t, 'i>>> {
        let key = self.key(k);
        let Some(v) = self.get(k) else {
            if optional {
                return Ok(None);
            }
            return Err(s.err(None, format!("missing table [{key}]")));
        };
        match v.get_ref() {
            DeValue::Table(t) => Ok(Some(Tbl {
                path: key,
                span: Some(v.span()),
                t,
                read: Vec::new(),
            })),
            _ => Err(self.bad(s, k, v, "a table")),
        }
    }

    /// Refuses the first key (in the file's order) no one read.
    fn finish(&self, s: &Src) -> Result<()> {
        let unread = self
            .t
            .iter()
            .filter(|(k, _)| !self.read.iter().any(|r| k.get_ref() == r))
            .min_by_key(|(k, _)| k.span().start);
        if let Some((k, _)) = unread {
            let within = if self.path.is_empty() {
                "top-level keys".to_string()
            } else {
                format!("keys of [{}]", self.path)
            };
            let known = if self.read.is_empty() {
                "none".to_string()
            } else {
                self.read.join(", ")
            };
            return Err(s.err(
                Some(k.span()),
                format!(
                    "unknown key '{}' ({within}: {known})",
                    self.key(k.get_ref())
                ),
            ));
        }
        Ok(())
    }
}

fn int_of(v: Value) -> Option<u64> {
    match v.get_ref() {
        DeValue::Integer(i) => u64::from_str_radix(i.as_str(), i.radix()).ok(),
        _ => None,
    }
}

/// A byte size: "64K" or an integer, greater than zero.
fn size_of(v: Value) -> Option<u64> {
    match v.get_ref() {
        DeValue::String(t) => parse_size(t),
        _ => int_of(v),
    }
    .filter(|&b| b > 0)
}

/// `fault_around = { kind = ..., ... }`.
fn read_fault_around(s: &Src, t: &mut Tbl) -> Result<FaultAround> {
    let kinds = "a table: { kind = \"off\" }, { kind = \"window\", bytes = \"64K\" } or { kind = \"spiral\", behind = 4, ahead = 4 }";
    let v = t.need(s, "fault_around", kinds)?;
    let DeValue::Table(ft) = v.get_ref() else {
        return Err(t.bad(s, "fault_around", v, kinds));
    };
    let mut f = Tbl {
        path: t.key("fault_around"),
        span: Some(v.span()),
        t: ft,
        read: Vec::new(),
    };
    let fa = match f.word(s, "kind", FAULT_AROUND_KIND)? {
        0 => FaultAround::Off,
        1 => {
            let expect = "a power-of-two size such as \"64K\" (Linux's fault_around_bytes)";
            let b = f.need(s, "bytes", expect)?;
            match size_of(b) {
                Some(n) if n.is_power_of_two() => FaultAround::Window { bytes: n },
                _ => return Err(f.bad(s, "bytes", b, expect)),
            }
        }
        _ => FaultAround::Spiral {
            behind: f.int(s, "behind", 512)? as u32,
            ahead: f.int(s, "ahead", 512)? as u32,
        },
    };
    f.finish(s)?;
    Ok(fa)
}

/// `physical_allocation.sizes`.
fn read_sizes(s: &Src, t: &mut Tbl, key: &'static str) -> Result<Vec<u64>> {
    let expect = if key == "sizes" {
        "a list of sizes such as [\"64K\", \"4M\"], or [] for all of the machine's"
    } else {
        "a list of sizes such as [\"16K\", \"64K\"], or [] for none"
    };
    let v = t.need(s, key, expect)?;
    let DeValue::Array(items) = v.get_ref() else {
        return Err(t.bad(s, key, v, expect));
    };
    let mut sizes = Vec::new();
    for it in items.iter() {
        let b = size_of(it).ok_or_else(|| {
            s.err(
                Some(it.span()),
                format!(
                    "{}: bad size {}: expected a size greater than zero such as \"64K\" or 65536",
                    t.key(key),
                    s.text_of(it.span())
                ),
            )
        })?;
        if sizes.contains(&b) {
            return Err(s.err(
                Some(it.span()),
                format!(
                    "{}: {} is listed twice; list each size once",
                    t.key(key),
                    fmt_size(b)
                ),
            ));
        }
        sizes.push(b);
    }
    Ok(sizes)
}

pub(super) fn from_toml(text: &str, origin: &str) -> Result<Policy> {
    let (name, mut p) = read(text, origin)?;
    p.name = name.unwrap_or_else(|| origin.to_string());
    Ok(p)
}

/// The file's `name`, if it has one, and its policy (called by its origin).
fn read(text: &str, origin: &str) -> Result<(Option<String>, Policy)> {
    let s = Src { text, origin };
    let doc = DeTable::parse(text).map_err(|e| {
        let msg = e.message().trim().replace('\n', "; ");
        s.err(e.span(), format!("not TOML: {msg}"))
    })?;
    let mut root = Tbl {
        path: String::new(),
        span: None,
        t: doc.get_ref(),
        read: Vec::new(),
    };
    let name = match root.get("name") {
        None => None,
        Some(v) => match v.get_ref().as_str() {
            Some(n) if !n.trim().is_empty() => Some(n.trim().to_string()),
            _ => return Err(root.bad(&s, "name", v, "a non-empty string")),
        },
    };
    let mut alloc_t = root
        .table(&s, "physical_allocation", false)?
        .expect("required");
    let kind = alloc_t.word(&s, "kind", ALLOC_KIND)?;
    let reserve = kind == Kind::Reserve;
    let mut prep_t = root.table(&s, "preparation", false)?.expect("required");
    let mut create_t = root
        .table(&s, "mapping_creation", false)?
        .expect("required");
    let mut destroy_t = root.table(&s, "mapping_destruction", !reserve)?;
    let mut dealloc_t = root.table(&s, "deallocation", !reserve && kind != Kind::Thp)?;
    let alloc = if reserve {
        let (destroy, dealloc) = (
            destroy_t.as_mut().expect("required"),
            dealloc_t.as_mut().expect("required"),
        );
        let sizes = read_sizes(&s, &mut alloc_t, "sizes")?;
        let preferred = alloc_t.word(&s, "preferred", PREFERRED)?;
        if preferred == PreferredSize::FreeBsd && !sizes.is_empty() {
            let v = alloc_t.get("sizes").expect("read above");
            return Err(alloc_t.bad(
                &s,
                "sizes",
                v,
                "[] with preferred = \"freebsd\" (one reservation level: the machine's smallest superpage); or preferred = \"navarro\"",
            ));
        }
        let r = ReservPolicy {
            sizes,
            classes: Vec::new(),
            preferred,
            lists: dealloc.word(&s, "lists", LISTS)?,
            shortage: dealloc.word(&s, "shortage", SHORTAGE)?,
            clean_write: destroy.word(&s, "clean_write", CLEAN_WRITE)?,
            unmap_demotes: destroy.bool(&s, "unmap_demotes")?,
            promote: create_t.word(&s, "promote", PROMOTE)?,
            dirty: destroy.word(&s, "dirty", DIRTY)?,
            map_full_reservation: create_t.bool(&s, "map_full_reservation")?,
            relaxed_mapping: create_t.bool(&s, "relaxed_mapping")?,
        };
        // The clean-write rule and the write-out go together (seed 000 4.7, 6.7).
        if (r.clean_write == CleanWrite::MarkDirty) != (r.dirty != Dirty::Trap) {
            let v = destroy.get("dirty").expect("read above");
            return Err(destroy.bad(
                &s,
                "dirty",
                v,
                &format!(
                    "{} while clean_write = \"{}\" (whole and hash keep the superpage and need clean_write = \"mark_dirty\"; trap needs demote_on_trap or write_protect)",
                    if r.dirty == Dirty::Trap { "whole or hash" } else { "trap" },
                    word_of(CLEAN_WRITE, r.clean_write)
                ),
            ));
        }
        AllocPolicy::Reserve(r)
    } else {
        let thp = (kind == Kind::Thp).then_some(());
        // Options of reservations given without them.
        for (t, keys) in [
            (Some(&mut alloc_t), &["sizes", "preferred"][..]),
            (
                Some(&mut create_t),
                &["promote", "map_full_reservation", "relaxed_mapping"][..],
            ),
            (
                destroy_t.as_mut(),
                &["clean_write", "dirty", "unmap_demotes"][..],
            ),
            (dealloc_t.as_mut(), &["shortage", "lists"][..]),
        ] {
            let Some(t) = t else { continue };
            for &k in keys {
                if let Some(v) = t.get(k) {
                    return Err(s.err(
                        Some(v.span()),
                        format!(
                            "{} is an option of reservations: it needs physical_allocation.kind = \"reserve\"",
                            t.key(k)
                        ),
                    ));
                }
            }
        }
        match thp {
            None if kind == Kind::Hint => {
                let expect = "a page size such as \"4M\" (chatr's hint), or \"transparent\"";
                let v = alloc_t.need(&s, "hint", expect)?;
                let hint = match v.get_ref().as_str() {
                    Some("transparent") => None,
                    _ => Some(size_of(v).ok_or_else(|| alloc_t.bad(&s, "hint", v, expect))?),
                };
                let mut vps = [0u64; 2];
                for ((key, _), out) in VPS_KEYS.iter().zip(vps.iter_mut()) {
                    let expect = "a size such as \"16K\"";
                    let v = alloc_t.need(&s, key, expect)?;
                    *out = size_of(v).ok_or_else(|| alloc_t.bad(&s, key, v, expect))?;
                }
                let h = HintPolicy {
                    hint,
                    vps_pagesize: vps[0],
                    vps_ceiling: vps[1],
                    heap_growth: alloc_t.bool(&s, "heap_growth")?,
                };
                if h.vps_pagesize > h.vps_ceiling {
                    let v = alloc_t.get("vps_pagesize").expect("read above");
                    return Err(alloc_t.bad(
                        &s,
                        "vps_pagesize",
                        v,
                        "a size not above vps_ceiling (the least page size transparent selection picks)",
                    ));
                }
                AllocPolicy::Hint(h)
            }
            Some(()) => AllocPolicy::Thp(ThpPolicy {
                enabled: alloc_t.word(&s, "enabled", THP_ENABLED)?,
                defrag: alloc_t.word(&s, "defrag", THP_DEFRAG)?,
                use_zero_page: alloc_t.bool(&s, "use_zero_page")?,
                zero_page_wp: alloc_t.word(&s, "zero_page_wp", ZERO_PAGE_WP)?,
                mthp: read_sizes(&s, &mut alloc_t, "mthp")?,
                shrink_underused: dealloc_t
                    .as_mut()
                    .expect("required with kind = \"thp\"")
                    .bool(&s, "shrink_underused")?,
                class: 0,
            }),
            None => AllocPolicy::BasePage,
        }
    };
    if kind != Kind::Hint {
        for k in ["hint", "vps_pagesize", "vps_ceiling", "heap_growth"] {
            if let Some(v) = alloc_t.get(k) {
                return Err(s.err(
                    Some(v.span()),
                    format!(
                        "{} is HP-UX's page-size hint: it needs physical_allocation.kind = \"hint\"",
                        alloc_t.key(k)
                    ),
                ));
            }
        }
    }
    if kind != Kind::Thp {
        for k in ["enabled", "defrag", "use_zero_page", "zero_page_wp", "mthp"] {
            if let Some(v) = alloc_t.get(k) {
                return Err(s.err(
                    Some(v.span()),
                    format!(
                        "{} is Linux THP's: it needs physical_allocation.kind = \"thp\"",
                        alloc_t.key(k)
                    ),
                ));
            }
        }
        if let Some(d) = dealloc_t.as_mut() {
            if let Some(v) = d.get("shrink_underused") {
                return Err(s.err(
                    Some(v.span()),
                    format!(
                        "{} is Linux THP's: it needs physical_allocation.kind = \"thp\"",
                        d.key("shrink_underused")
                    ),
                ));
            }
        }
    }
    let prep = if prep_t.word(&s, "kind", PREP_KIND)? {
        if !reserve {
            let v = prep_t.get("kind").expect("read above");
            return Err(prep_t.bad(
                &s,
                "kind",
                v,
                "\"per_page\" with physical_allocation.kind other than \"reserve\" (hybrid preparation prepares the rest of a reservation)",
            ));
        }
        PrepPolicy::Threshold {
            t: prep_t.int(&s, "threshold", MAX_THRESHOLD as u64)? as u32,
            mode: prep_t.word(&s, "mode", PREP_MODE)?,
        }
    } else {
        for k in ["threshold", "mode"] {
            if let Some(v) = prep_t.get(k) {
                return Err(s.err(
                    Some(v.span()),
                    format!(
                        "{} is hybrid preparation's: it needs preparation.kind = \"threshold\"",
                        prep_t.key(k)
                    ),
                ));
            }
        }
        PrepPolicy::PerPage
    };
    let fault_around = read_fault_around(&s, &mut create_t)?;
    let mut daemons = root.table(&s, "daemons", false)?.expect("required");
    let mut pd = daemons.table(&s, "pagedaemon", false)?.expect("required");
    let pagedaemon = pd.bool(&s, "enabled")?;
    let contiguity = pd.word(&s, "contiguity", CONTIGUITY)?;
    let mut kh = daemons.table(&s, "khugepaged", false)?.expect("required");
    let khugepaged = if kh.bool(&s, "enabled")? {
        if matches!(kind, Kind::BasePage | Kind::Hint) {
            let v = kh.get("enabled").expect("read above");
            return Err(kh.bad(
                &s,
                "enabled",
                v,
                &format!("false with physical_allocation.kind = \"{}\" (khugepaged collapses into superpages: kind = \"thp\", or \"reserve\" beside reservations; HP-UX never promotes)", word_of(ALLOC_KIND, kind)),
            ));
        }
        let mut k = Khugepaged::linux();
        for (key, f, _) in KHUGEPAGED_SLEEPS {
            *f(&mut k) = kh.int(&s, key, 1 << 32)?;
        }
        for (key, f, min, _) in KHUGEPAGED_LIMITS {
            let expect = if *min == 0 {
                "an integer, or \"default\" (Linux's, relative to the THP size)".to_string()
            } else {
                format!("an integer from {min}, or \"default\" (Linux's, relative to the THP size)")
            };
            let v = kh.need(&s, key, &expect)?;
            *f(&mut k) = match v.get_ref().as_str() {
                Some("default") => None,
                _ => Some(
                    int_of(v)
                        .filter(|n| (*min..=1 << 32).contains(n))
                        .ok_or_else(|| kh.bad(&s, key, v, &expect))?,
                ),
            };
        }
        Some(k)
    } else {
        None
    };
    let mut kc = daemons.table(&s, "kcompactd", false)?.expect("required");
    let kcompactd = if kc.bool(&s, "enabled")? {
        if matches!(kind, Kind::BasePage | Kind::Hint) {
            let v = kc.get("enabled").expect("read above");
            return Err(kc.bad(
                &s,
                "enabled",
                v,
                &format!("false with physical_allocation.kind = \"{}\" (compaction serves THP and reservation allocations; seed 002's fault path never waits for a large page)", word_of(ALLOC_KIND, kind)),
            ));
        }
        Some(Kcompactd {
            proactiveness: kc.int(&s, "compaction_proactiveness", 100)?,
        })
    } else {
        None
    };
    let mut place = root.table(&s, "placement", false)?.expect("required");
    let placement = place.word(&s, "mmap", PLACEMENT)?;
    let wired = place.word(&s, "wired", WIRED)?;
    let mobility_grouping = place.bool(&s, "mobility_grouping")?;
    let pageblock_skip = place.word(&s, "pageblock_skip", PAGEBLOCK_SKIP)?;
    let skip_on_failure = place.bool(&s, "skip_on_failure")?;
    let mut cache = root.table(&s, "page_cache", false)?.expect("required");
    let readahead = cache.bool(&s, "readahead")?;
    let close_deactivate = cache.bool(&s, "close_deactivate")?;
    for t in [
        &alloc_t, &prep_t, &create_t, &pd, &kh, &kc, &daemons, &place, &cache,
    ]
    .into_iter()
    .chain(destroy_t.as_ref())
    .chain(dealloc_t.as_ref())
    {
        t.finish(&s)?;
    }
    root.finish(&s)?;
    let p = Policy {
        name: origin.to_string(),
        alloc,
        prep,
        placement,
        fault_around,
        pagedaemon,
        contiguity,
        wired,
        mobility_grouping,
        pageblock_skip,
        skip_on_failure,
        readahead,
        close_deactivate,
        khugepaged,
        kcompactd,
        origin: Origin {
            file: Some(origin.to_string()),
            lines: key_lines(&s, doc.get_ref()),
        },
    };
    Ok((name, p))
}

/// The keys `Policy::resolve` checks against the machine (`Origin`).
const RESOLVED_KEYS: &[&str] = &[
    "physical_allocation.kind",
    "physical_allocation.mthp",
    "physical_allocation.sizes",
    "mapping_creation.fault_around",
    "preparation.threshold",
    "daemons.khugepaged.max_ptes_none",
    "daemons.khugepaged.max_ptes_swap",
    "daemons.khugepaged.max_ptes_shared",
];

/// The line of each of `RESOLVED_KEYS` the file sets.
fn key_lines(s: &Src, root: &DeTable) -> Vec<(&'static str, usize)> {
    let mut out = Vec::new();
    'keys: for &key in RESOLVED_KEYS {
        let mut t = root;
        let mut parts = key.split('.').peekable();
        while let Some(part) = parts.next() {
            let Some((_, v)) = t.iter().find(|(k, _)| k.get_ref() == part) else {
                continue 'keys;
            };
            if parts.peek().is_none() {
                out.push((key, s.line(v.span().start)));
            } else if let DeValue::Table(inner) = v.get_ref() {
                t = inner;
            } else {
                continue 'keys;
            }
        }
    }
    out
}

/// `-p file:PATH[:key=value,...]`: `text` is the whole spec, `rest` what follows `file:`.
/// Parameters are told from the path by an '=' after its last ':' (a path holding ':' and '='
/// after it cannot take parameters). The policy is called by the file's `name`, with the
/// parameters joined as a preset's are (`navarro:sizes=64K+4M` and `promote=no` give
/// `navarro:sizes=64K+4M,promote=no`); without a `name`, by `text`.
pub(super) fn load(text: &str, rest: &str) -> Result<Policy> {
    let (path, params) = match rest.rsplit_once(':') {
        Some((p, kv)) if kv.contains('=') => (p, kv),
        _ => (rest, ""),
    };
    if path.is_empty() {
        return Err(SimError::BadInput(format!(
            "policy '{text}': no file named; give -p file:PATH.toml"
        )));
    }
    let body = std::fs::read_to_string(path)
        .map_err(|e| SimError::BadInput(format!("policy file '{path}': cannot read it: {e}")))?;
    let (name, mut p) = read(&body, path)?;
    let label = name.clone().unwrap_or_else(|| text.to_string());
    let mut spec = Spec::with_params("policy", &label, params)?;
    // A key a parameter replaces is no longer the file's: its errors name the policy as given.
    let given: Vec<String> = spec
        .keys()
        .into_iter()
        .map(|k| {
            if k == "prefault" {
                "fault_around".into()
            } else {
                k
            }
        })
        .collect();
    p.set_params(&label, &mut spec)?;
    spec.finish()?;
    p.origin.lines.retain(|(key, _)| {
        !given
            .iter()
            .any(|g| key.rsplit('.').next() == Some(g.as_str()))
    });
    // with_params refused empty pieces, so no comma is left at either end.
    p.name = match (name, params.trim()) {
        (None, _) => text.to_string(),
        (Some(n), "") => n,
        (Some(n), kv) if n.contains(':') => format!("{n},{kv}"),
        (Some(n), kv) => format!("{n}:{kv}"),
    };
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::ThpDefrag;

    /// Every preset, and each option of each (the specs of README and `splab list policies`).
    const SPECS: &[&str] = &[
        "base",
        "navarro",
        "freebsd",
        "navarro:sizes=64K+4M",
        "navarro:sizes=4M+64K",
        "navarro:promote=overhead",
        "navarro:promote=no",
        "freebsd:promote=overhead",
        "navarro:contiguity=cache",
        "navarro:contiguity=off",
        "freebsd:contiguity=daemon",
        "navarro:wired=clustered",
        "navarro:dirty=whole",
        "navarro:dirty=hash",
        "freebsd:dirty=hash",
        "navarro:dirty=trap",
        "base:fault_around=off",
        "base:prefault=4+4",
        "base:fault_around=1M",
        "freebsd:prefault=0",
        "navarro:prefault=2+7",
        "base:pagedaemon=off",
        "navarro:readahead=off",
        "base:close_deactivate=on",
        "navarro:close_deactivate=off",
        "navarro:sizes=64K+4M,promote=no,contiguity=cache,wired=clustered,dirty=hash,prefault=1+2",
        "linux",
        "linux-madvise",
        "linux-4k",
        "linux-4.3",
        "linux:enabled=madvise",
        "linux:khugepaged=off",
        "linux:max_ptes_none=0,pages_to_scan=512,scan_sleep_millisecs=100",
        "linux:max_ptes_swap=0,max_ptes_shared=7,alloc_sleep_millisecs=5",
        "linux-madvise:max_ptes_none=default",
        "freebsd:khugepaged=on",
        "navarro:khugepaged=on,max_ptes_shared=3",
        "linux:defrag=defer+madvise,compaction_proactiveness=0",
        "linux-madvise:defrag=never,kcompactd=off",
        "freebsd:kcompactd=on,compaction_proactiveness=100",
        "hpux",
        "hpux:hint=4M",
        "hpux:hint=transparent,vps_pagesize=64K,vps_ceiling=4M",
        "hpux:hint=4M,heap_growth=off",
        "quicksilver",
        "quicksilver:prep=async,t=256,relaxed_mapping=off",
        "navarro:prep=sync,t=0",
    ];

    #[test]
    fn every_preset_and_option_round_trips_exactly() {
        for (preset, _) in POLICIES {
            assert!(SPECS.contains(preset), "preset {preset} not round-tripped");
        }
        for spec in SPECS {
            let p = Policy::from_spec(spec).unwrap();
            let text = p.to_toml();
            let q = Policy::from_toml(&text, "x.toml")
                .unwrap_or_else(|e| panic!("{spec}: {e}\n{text}"));
            assert_eq!(p, q, "{spec}:\n{text}");
            assert_eq!(q.to_toml(), text, "{spec}");
            // Bound to every machine alike (sizes become the same classes).
            for m in crate::hw::MACHINES {
                let m = crate::hw::Machine::from_spec(m).unwrap();
                let (mut a, mut b) = (p.clone(), q.clone());
                assert_eq!(a.resolve(&m).is_ok(), b.resolve(&m).is_ok(), "{spec}");
                assert_eq!(a, b, "{spec} on {}", m.name);
            }
        }
    }

    #[test]
    fn words_are_complete() {
        // word_of panics on a choice its table lacks: name each enum's every variant.
        use super::super::*;
        for v in [Promote::Yes, Promote::Overhead, Promote::No] {
            assert_eq!(word(PROMOTE, word_of(PROMOTE, v)), Some(v));
        }
        for v in [Dirty::Trap, Dirty::Whole, Dirty::Hash] {
            assert_eq!(word(DIRTY, word_of(DIRTY, v)), Some(v));
        }
        for v in [Contiguity::Off, Contiguity::Cache, Contiguity::Daemon] {
            assert_eq!(word(CONTIGUITY, word_of(CONTIGUITY, v)), Some(v));
        }
        for v in [
            CleanWrite::DemoteOnTrap,
            CleanWrite::WriteProtect,
            CleanWrite::MarkDirty,
        ] {
            assert_eq!(word(CLEAN_WRITE, word_of(CLEAN_WRITE, v)), Some(v));
        }
        for v in [
            PageblockSkip::Off,
            PageblockSkip::Unisolated,
            PageblockSkip::Scanned,
        ] {
            assert_eq!(word(PAGEBLOCK_SKIP, word_of(PAGEBLOCK_SKIP, v)), Some(v));
        }
        for v in [ZeroPageWp::Alloc, ZeroPageWp::Split] {
            assert_eq!(word(ZERO_PAGE_WP, word_of(ZERO_PAGE_WP, v)), Some(v));
        }
        for v in [ThpEnabled::Always, ThpEnabled::Madvise, ThpEnabled::Never] {
            assert_eq!(word(THP_ENABLED, word_of(THP_ENABLED, v)), Some(v));
        }
        for v in [
            ThpDefrag::Always,
            ThpDefrag::Defer,
            ThpDefrag::DeferMadvise,
            ThpDefrag::Madvise,
            ThpDefrag::Never,
        ] {
            assert_eq!(word(THP_DEFRAG, word_of(THP_DEFRAG, v)), Some(v));
        }
        assert_eq!(PREFERRED.len(), 2);
        assert_eq!(LISTS.len(), 2);
        assert_eq!(SHORTAGE.len(), 2);
        assert_eq!(PLACEMENT.len(), 2);
        assert_eq!(WIRED.len(), 2);
    }

    /// The error of `text` after replacing `from` by `to` in navarro's file.
    #[track_caller]
    fn navarro_err(from: &str, to: &str) -> String {
        let text = Policy::from_spec("navarro").unwrap().to_toml();
        assert!(text.contains(from), "{from} not in:\n{text}");
        let bad = text.replacen(from, to, 1);
        Policy::from_toml(&bad, "p.toml").unwrap_err().to_string()
    }

    /// What `Policy::resolve` finds wrong on a machine names the file, the line and the key
    /// (it said "policy 'linux': ..." whatever file it came from); a key a command-line
    /// parameter replaced is the parameter's, and a preset's errors name the preset.
    #[test]
    fn machine_dependent_errors_name_the_file_line_and_key() {
        let m = crate::hw::Machine::from_spec("skylake").unwrap();
        let resolve_err = |preset: &str, from: &str, to: &str| {
            let text = Policy::from_spec(preset).unwrap().to_toml();
            assert!(text.contains(from), "{from} not in:\n{text}");
            let bad = text.replacen(from, to, 1);
            let line = bad.lines().position(|l| l.contains(to)).unwrap() + 1;
            let mut p = Policy::from_toml(&bad, "mine.toml").unwrap();
            (line, p.resolve(&m).unwrap_err().to_string())
        };
        for (preset, from, to, key, what) in [
            (
                "linux",
                "mthp = []",
                "mthp = [\"8K\"]",
                "physical_allocation.mthp",
                "mthp size 8K",
            ),
            (
                "linux",
                "max_ptes_none = \"default\"",
                "max_ptes_none = 600",
                "daemons.khugepaged.max_ptes_none",
                "max_ptes_none=600",
            ),
            (
                "navarro",
                "sizes = []",
                "sizes = [\"64K\"]",
                "physical_allocation.sizes",
                "64K",
            ),
            (
                "navarro",
                "fault_around = { kind = \"spiral\", behind = 4, ahead = 4 }",
                "fault_around = { kind = \"window\", bytes = \"1\" }",
                "mapping_creation.fault_around",
                "fault_around=1",
            ),
        ] {
            let (line, e) = resolve_err(preset, from, to);
            assert!(
                e.starts_with(&format!("policy file 'mine.toml', line {line}: {key}: "))
                    && e.contains(what),
                "{e}"
            );
        }
        // A parameter replaced the file's key: the error is the parameter's.
        let dir = std::env::temp_dir().join(format!("splab-origin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("nav.toml");
        std::fs::write(&f, Policy::from_spec("navarro").unwrap().to_toml()).unwrap();
        let mut p = Policy::from_spec(&format!("file:{}:sizes=64K", f.display())).unwrap();
        let e = p.resolve(&m).unwrap_err().to_string();
        assert!(e.starts_with("policy 'navarro:sizes=64K': size 64K"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
        // A preset's: its name.
        let mut p = Policy::from_spec("linux:mthp=8K").unwrap();
        let e = p.resolve(&m).unwrap_err().to_string();
        assert!(e.starts_with("policy 'linux:mthp=8K': mthp size 8K"), "{e}");
    }

    /// The line of `text` holding `needle`, 1-based.
    fn line_of(needle: &str) -> usize {
        let text = Policy::from_spec("navarro").unwrap().to_toml();
        text.lines().position(|l| l.contains(needle)).unwrap() + 1
    }

    /// The error of the `linux` preset's file with `from` replaced by `to`.
    fn linux_err(from: &str, to: &str) -> String {
        let text = Policy::from_spec("linux").unwrap().to_toml();
        assert!(text.contains(from), "{from} not in:\n{text}");
        let bad = text.replacen(from, to, 1);
        Policy::from_toml(&bad, "l.toml").unwrap_err().to_string()
    }

    #[test]
    fn thp_and_khugepaged_keys_are_checked() {
        let e = linux_err("enabled = \"always\"", "enabled = \"sometimes\"");
        assert!(
            e.contains("physical_allocation.enabled = \"sometimes\": expected one of always, madvise, never"),
            "{e}"
        );
        let e = linux_err("max_ptes_none = \"default\"", "max_ptes_none = \"lots\"");
        assert!(
            e.contains(
                "daemons.khugepaged.max_ptes_none = \"lots\": expected an integer, or \"default\""
            ),
            "{e}"
        );
        let e = linux_err("scan_sleep_millisecs = 10000", "");
        assert!(
            e.contains("missing key 'daemons.khugepaged.scan_sleep_millisecs'"),
            "{e}"
        );
        // THP's and khugepaged's keys under another kind of allocation.
        let e = linux_err("kind = \"thp\"", "kind = \"base_page\"");
        assert!(
            e.contains("physical_allocation.enabled is Linux THP's: it needs physical_allocation.kind = \"thp\""),
            "{e}"
        );
        let text = Policy::from_spec("base").unwrap().to_toml().replacen(
            "[daemons.khugepaged]\nenabled = false",
            "[daemons.khugepaged]\nenabled = true",
            1,
        );
        let e = Policy::from_toml(&text, "b.toml").unwrap_err().to_string();
        assert!(
            e.contains("daemons.khugepaged.enabled = true: expected false with physical_allocation.kind = \"base_page\""),
            "{e}"
        );
        // A parameter on the preset: a count or default.
        let e = Policy::from_spec("linux:max_ptes_shared=half")
            .unwrap_err()
            .to_string();
        assert!(e.contains("bad max_ptes_shared='half'"), "{e}");
        assert!(Policy::from_spec("base:max_ptes_none=0").is_err());
        assert!(
            Policy::from_spec("navarro:max_ptes_none=0").is_err(),
            "khugepaged is off"
        );
        assert!(Policy::from_spec("freebsd:khugepaged=on,max_ptes_none=0").is_ok());
        // A file holds the same limits as the parameters: khugepaged scans at least one PTE a
        // wake (Linux's pages_to_scan refuses 0), while the max_ptes_* may be 0.
        assert!(Policy::from_spec("linux:pages_to_scan=0").is_err());
        let e = linux_err("pages_to_scan = \"default\"", "pages_to_scan = 0");
        assert!(
            e.contains("daemons.khugepaged.pages_to_scan = 0: expected an integer from 1"),
            "{e}"
        );
        let text = Policy::from_spec("linux").unwrap().to_toml().replacen(
            "max_ptes_none = \"default\"",
            "max_ptes_none = 0",
            1,
        );
        assert!(Policy::from_toml(&text, "l.toml").is_ok());
    }

    #[test]
    fn defrag_and_kcompactd_keys_are_checked() {
        let e = linux_err("defrag = \"always\"", "defrag = \"sometimes\"");
        assert!(
            e.contains("expected one of always, defer, defer+madvise, madvise, never"),
            "{e}"
        );
        let e = linux_err(
            "compaction_proactiveness = 20",
            "compaction_proactiveness = 101",
        );
        assert!(
            e.contains("daemons.kcompactd.compaction_proactiveness"),
            "{e}"
        );
        let base = Policy::from_spec("base").unwrap().to_toml();
        let text = base.replacen(
            "kcompactd]\nenabled = false",
            "kcompactd]\nenabled = true",
            1,
        );
        let e = Policy::from_toml(&text, "b.toml").unwrap_err().to_string();
        assert!(
            e.contains("expected false with physical_allocation.kind"),
            "{e}"
        );
        assert!(Policy::from_spec("linux:defrag=sometimes").is_err());
        assert!(
            Policy::from_spec("navarro:defrag=never").is_err(),
            "THP's key"
        );
        assert!(Policy::from_spec("base:kcompactd=on").is_err());
        let p = Policy::from_spec("linux:defrag=defer,compaction_proactiveness=0").unwrap();
        assert_eq!(p.thp().unwrap().defrag, ThpDefrag::Defer);
        assert_eq!(p.kcompactd, Some(Kcompactd { proactiveness: 0 }));
    }

    #[test]
    fn errors_name_the_key_and_line() {
        let promote = line_of("promote = ");
        let e = navarro_err("promote = \"yes\"", "promote = \"never\"");
        assert_eq!(
            e,
            format!("policy file 'p.toml', line {promote}: mapping_creation.promote = \"never\": expected one of yes, overhead, no")
        );
        let e = navarro_err("promote = \"yes\"", "promote = 1");
        assert!(
            e.contains(&format!("line {promote}:")) && e.contains("mapping_creation.promote = 1"),
            "{e}"
        );
        let e = navarro_err("promote = \"yes\"", "promote = \"yes\"\npromot = \"no\"");
        assert!(
            e.contains(&format!("line {}:", promote + 1))
                && e.contains("unknown key 'mapping_creation.promot'")
                && e.contains("promote, map_full_reservation, relaxed_mapping, fault_around"),
            "{e}"
        );
        let e = navarro_err("contiguity = \"daemon\"", "");
        assert!(
            e.contains("missing key 'daemons.pagedaemon.contiguity' (one of off, cache, daemon)"),
            "{e}"
        );
        let e = navarro_err("[deallocation]", "[dealocation]");
        assert!(e.contains("missing table [deallocation]"), "{e}");
        let e = navarro_err("enabled = true", "enabled = \"yes\"");
        assert!(
            e.contains("daemons.pagedaemon.enabled = \"yes\": expected true or false"),
            "{e}"
        );
        let e = navarro_err("sizes = []", "sizes = [\"64K\", \"64K\"]");
        assert!(
            e.contains("physical_allocation.sizes: 64K is listed twice"),
            "{e}"
        );
        let e = navarro_err("sizes = []", "sizes = [\"64Q\"]");
        assert!(
            e.contains(&format!("line {}:", line_of("sizes = "))) && e.contains("bad size \"64Q\""),
            "{e}"
        );
        let e = navarro_err(
            "fault_around = { kind = \"spiral\", behind = 4",
            "fault_around = { kind = \"spiral\", behind = 600",
        );
        assert!(
            e.contains(
                "mapping_creation.fault_around.behind = 600: expected an integer from 0 to 512"
            ),
            "{e}"
        );
        let e = navarro_err(
            "fault_around = { kind = \"spiral\", behind = 4, ahead = 4 }",
            "fault_around = { kind = \"window\", behind = 4 }",
        );
        assert!(
            e.contains("missing key 'mapping_creation.fault_around.bytes'"),
            "{e}"
        );
        let e = navarro_err("dirty = \"trap\"", "dirty = \"hash\"");
        assert_eq!(
            e,
            format!(
                "policy file 'p.toml', line {}: mapping_destruction.dirty = \"hash\": expected trap while clean_write = \"demote_on_trap\" (whole and hash keep the superpage and need clean_write = \"mark_dirty\"; trap needs demote_on_trap or write_protect)",
                line_of("dirty = \"trap\"")
            )
        );
        let e = navarro_err("name = \"navarro\"", "name = \"x\"\nflavour = 1");
        assert!(
            e.contains("line 4:") && e.contains("unknown key 'flavour' (top-level keys:"),
            "{e}"
        );
        let e = navarro_err("[placement]", "[placement");
        assert!(
            e.starts_with("policy file 'p.toml', line ") && e.contains("not TOML"),
            "{e}"
        );
        assert_eq!(e.lines().count(), 1, "{e}");
        // Reservation options without reservations.
        let base = Policy::from_spec("base").unwrap().to_toml();
        let bad = base.replace("[mapping_creation]", "[mapping_creation]\npromote = \"no\"");
        let e = Policy::from_toml(&bad, "b.toml").unwrap_err().to_string();
        assert!(
            e.contains("mapping_creation.promote is an option of reservations")
                && e.contains("kind = \"reserve\""),
            "{e}"
        );
        let bad = base.replace(
            "[mapping_creation]",
            "[mapping_creation]\nmap_full_reservation = true",
        );
        let e = Policy::from_toml(&bad, "b.toml").unwrap_err().to_string();
        assert!(
            e.contains("mapping_creation.map_full_reservation is an option of reservations"),
            "{e}"
        );
        // Required with reservations, a boolean.
        let text = Policy::from_spec("freebsd").unwrap().to_toml();
        let line = text
            .lines()
            .find(|l| l.starts_with("map_full_reservation = true"))
            .expect("freebsd maps full reservations at faults");
        let e = Policy::from_toml(&text.replace(line, ""), "f.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("map_full_reservation"), "{e}");
        let e = Policy::from_toml(
            &text.replace(line, "map_full_reservation = \"sometimes\""),
            "f.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("mapping_creation.map_full_reservation"), "{e}");
    }

    #[test]
    fn freebsd_sizes_and_base_tables() {
        let text = Policy::from_spec("freebsd").unwrap().to_toml();
        let bad = text.replace("sizes = []", "sizes = [\"2M\"]");
        let e = Policy::from_toml(&bad, "f.toml").unwrap_err().to_string();
        assert!(
            e.contains("physical_allocation.sizes = [\"2M\"]")
                && e.contains("preferred = \"navarro\""),
            "{e}"
        );
        // Base pages may leave out the tables they have no options in.
        let base = Policy::from_spec("base").unwrap();
        let text = base.to_toml();
        let cut = text
            .replace("[mapping_destruction]", "")
            .replace("[deallocation]", "");
        assert_eq!(Policy::from_toml(&cut, "b.toml").unwrap(), base);
    }

    #[test]
    fn list_shows_each_preset_per_event() {
        let t = presets_table();
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].contains("base")
                && lines[0].contains("navarro")
                && lines[0].contains("freebsd"),
            "{t}"
        );
        for table in [
            "physical_allocation",
            "preparation",
            "mapping_creation",
            "mapping_destruction",
            "deallocation",
            "daemons.pagedaemon",
            "placement",
            "page_cache",
        ] {
            assert!(
                lines.iter().any(|l| l.starts_with(table)),
                "{table} missing:\n{t}"
            );
        }
        let row = lines
            .iter()
            .find(|l| l.starts_with("deallocation"))
            .unwrap();
        assert!(
            row.contains("shortage=preempt") && row.contains("shortage=fallback_then_reclaim"),
            "{t}"
        );
        let row = lines
            .iter()
            .find(|l| l.starts_with("mapping_creation"))
            .unwrap();
        assert!(row.contains("promote=yes"), "{t}");
        assert!(
            t.contains("fault_around=64K") && t.contains("prefault=4+4"),
            "{t}"
        );
    }
}
