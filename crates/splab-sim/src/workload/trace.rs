//! `trace:path=FILE`: replays a recorded trace (`splab record`, `splab trace import-champsim`)
//! through the engine, event by event, at the program's own addresses.
//!
//! Who calls it: `workload::parse` (the CLI's `-w trace:path=...`), and tests and tools that
//! want the replay's own counters ([`replay`] returns [`ReplayStats`]).
//!
//! Contract (docs/replay.md has the user's view, docs/trace-format.md "Event semantics" what
//! each event means):
//! - The trace is streamed with `TraceReader::read_batch`, 16K events at a time: memory is
//!   constant whatever the trace's length.
//! - Trace pids map to engine pids: the first process seen is `Engine::spawn`ed, a `Fork` is
//!   `Engine::fork` of the parent's engine pid, the child's trace pid then maps to the new one.
//!   A `Vfork` child's trace pid maps to its parent's engine pid (one address space) until its
//!   `Exec`, which gives it a new, empty engine process, or its `Exit`, which ends nothing.
//!   A pid that appears without a `Fork` (a trace that starts with several processes) is
//!   spawned with an empty address space.
//! - Mappings keep the program's addresses: `Mmap` is a `MAP_FIXED` mmap at the recorded
//!   address; file mappings use the trace's file ids and sizes (`FileOpen`). A mapping marked
//!   `inferred` (reconstructed from addresses by an importer or the lackey recorder, its
//!   protection unknown) is mapped read-write-execute.
//! - The first `Brk` of a process (at its start, and after each `Exec`) sets its heap start.
//! - A heap Valgrind capped at 8 MiB is rebuilt (`heap=native`, the default): when the trace
//!   has `morecore` mappings (glibc's mmap fallback for a refused `brk`, marked by the
//!   recorder), each image's heap starts at `rebuilt_heap_start`, the recorded heap is
//!   relocated there, and each `morecore` mapping is appended to it as brk growth and relocated
//!   too. Every later event inside a relocated range is translated by its offset
//!   (`RelocTable`, per address space; the hot path looks only when some relocation exists).
//!   Growth that cannot be rebuilt is replayed as recorded (`heap_not_rebuilt`).
//! - Accesses go to the engine in batches of up to 4096 (`Engine::accesses`), one batch
//!   per run of consecutive accesses of one process. An access that crosses a page boundary
//!   touches both pages: it is replayed as two accesses.
//! - What a recorded program did but the model cannot see is handled so that the run goes on,
//!   and is counted in [`ReplayStats`]:
//!   - an access where the model has no mapping (a page no event mapped: the vDSO if a
//!     recorder does not report it, memory a recording or an importer missed) maps that base
//!     page lazily as anonymous read-write-execute memory, then the access is retried
//!     (`lazy_pages`); an address beyond the machine's user address space (the legacy vsyscall
//!     page at 0xffffffffff600000) cannot be mapped: the access is skipped (`skipped_outside`);
//!   - an access that the mapping's protection forbids (a guard page, a PROT_NONE reservation,
//!     a write to read-only memory) is what a real program survives only through a SIGSEGV
//!     handler, which then changes the protection (those mprotect events follow in the trace)
//!     and re-executes the access (recorded again): the faulting attempt counts as an access,
//!     with its TLB lookup and walk, and is not retried (`skipped_protection`);
//!   - `mprotect` of a range the model has only partly mapped changes the mapped parts
//!     (`mprotect_gaps`); a `brk` the model refuses because something lies in the way (a page
//!     mapped lazily) unmaps the way first (`brk_forced`); `madvise` advice the model does not
//!     know is ignored (`ignored_advice`).
//! - Each access carries the trace's `dep` and `ipa` (version-1 traces: the reader's defaults,
//!   docs/trace-format.md) to the core model. `Compute` in cycles adds them when the current
//!   access batch is flushed; `Compute` in instructions adds nothing, since those instructions
//!   are already in the next access's `ipa`.
//! - A trace recorded with pages larger than the machine's base page replays; a machine whose
//!   base page is larger than the trace's (the Alpha's 8KB under a 4KB amd64 trace) is refused
//!   up front, as is a mapping beyond the machine's user address space (core2's 32 bits).
//! - `skip=N,limit=N` ([`Window`]): the first N accesses are not replayed (counted in
//!   `skipped_window`; the address-space events among them are replayed, so the window starts
//!   with the program's mappings and heap, but not with the pages those accesses touched), then
//!   at most `limit` accesses are, and the replay stops there.
//! - Errors of the trace reader (a truncated or corrupt file) become `SimError::Trace` with the
//!   reader's message (file, byte offset, what was expected) after the events before the error
//!   have been replayed; errors of the model name the trace event that caused them.

use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;
use splab_trace as st;

use crate::engine::Engine;
use crate::error::{Result, SimError};
use crate::rng::Rng;
use crate::spec::Spec;
use crate::units::{Access, AccessKind, MemOp, Pid, Prot};
use crate::vm::{Advice, MapFlags, MmapReq};

/// Events read from the trace per call of `read_batch`.
const READ_BATCH: usize = 1 << 14;
/// Accesses handed to the engine per event.
const ACCESS_BATCH: usize = 4096;

/// Which accesses of a trace a replay runs (`trace:path=F,skip=N,limit=N`): the first `skip`
/// accesses are not replayed (the address-space events among them are), then at most `limit`
/// accesses are, and the replay ends there. Counts are the trace's accesses (`trace info`), all
/// kinds, across processes in trace order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub skip: u64,
    pub limit: u64,
}

impl Window {
    pub const ALL: Window = Window {
        skip: 0,
        limit: u64::MAX,
    };
}

/// The replay workload.
pub struct TraceReplay {
    path: PathBuf,
    expected: Option<u64>,
    window: Window,
    /// Put `morecore` mappings back on the heap (`heap=native`, the default) or replay them
    /// where Valgrind put them (`heap=recorded`).
    rebuild_heap: bool,
    /// What the last `run` did (zero before).
    pub stats: ReplayStats,
}

/// What a replay did beyond what the report shows: processes, and every place where the model
/// departed from the recorded program (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReplayStats {
    /// Events read from the trace (accesses one each).
    pub events: u64,
    /// Access events read from the trace.
    pub accesses: u64,
    /// Processes replayed (spawned or forked).
    pub processes: u64,
    pub forks: u64,
    /// Vforks (children that ran in their parent's address space until exec or exit).
    pub vforks: u64,
    pub execs: u64,
    pub exits: u64,
    pub mmaps: u64,
    pub munmaps: u64,
    pub mremaps: u64,
    pub mprotects: u64,
    pub madvises: u64,
    pub brks: u64,
    /// Processes that appeared with no `Fork` after the first (spawned empty).
    pub unparented: u64,
    /// Accesses that crossed a page boundary (replayed as two).
    pub split_accesses: u64,
    /// Base pages mapped lazily for accesses where the model had no mapping.
    pub lazy_pages: u64,
    /// Accesses beyond the machine's user address space, skipped.
    pub skipped_outside: u64,
    /// Accesses the mapping's protection forbids, skipped.
    pub skipped_protection: u64,
    /// `mprotect` events whose range was not entirely mapped in the model.
    pub mprotect_gaps: u64,
    /// `brk` events that had to unmap something in the heap's way.
    pub brk_forced: u64,
    /// `madvise` events with advice the model ignores.
    pub ignored_advice: u64,
    /// Cycles added by `Compute` events in cycles.
    pub compute_cycles: u64,
    /// Instructions of `Compute` events in instructions (already counted in the next access's
    /// `ipa`, so they add no time of their own).
    pub compute_instructions: u64,
    /// Accesses left out by the workload's `skip` (not replayed; the address-space events
    /// among them were).
    pub skipped_window: u64,
    /// `brk` calls the recorder saw refused by Valgrind's 8 MiB heap cap (the trailer's
    /// `brk_refused`): when not 0, the replayed heap is not the program's native heap.
    pub recording_brk_refused: u64,
    /// Mappings glibc's malloc made because Valgrind refused a `brk` (marked `morecore` in the
    /// trace) that the replay put back on the heap as brk growth, with every later event in
    /// them translated (docs/replay.md, "Valgrind's heap cap").
    pub heap_regions_relocated: u64,
    /// Heap growth the replay could not rebuild as the native program's: `morecore` mappings
    /// replayed where Valgrind put them (no room after the heap, or `heap=recorded`), and
    /// `brk` moves after the heap was rebuilt. When not 0 the replayed heap is not native.
    pub heap_not_rebuilt: u64,
    /// The largest heap (program break minus heap start) any replayed process had, in bytes:
    /// with a rebuilt heap, the one brk heap a native run would have.
    pub heap_peak: u64,
}

impl ReplayStats {
    /// One line for people, e.g. for a tool printing what a replay departed from.
    pub fn summary(&self) -> String {
        format!(
            "{} events, {} accesses, {} processes ({} forks, {} execs); lazily mapped pages {}, \
             skipped accesses {} (outside the address space) + {} (protection), split accesses {}",
            self.events,
            self.accesses,
            self.processes,
            self.forks,
            self.execs,
            self.lazy_pages,
            self.skipped_outside,
            self.skipped_protection,
            self.split_accesses
        )
    }
}

impl TraceReplay {
    pub fn parse(spec: &mut Spec) -> Result<TraceReplay> {
        let path = spec.take_str("path").ok_or_else(|| {
            SimError::BadInput(
                "workload 'trace': parameter 'path' is required, e.g. trace:path=ls.spt".into(),
            )
        })?;
        if path.trim().is_empty() {
            return Err(SimError::BadInput(
                "workload 'trace': path= is empty: give the trace file, e.g. trace:path=ls.spt"
                    .into(),
            ));
        }
        let skip = spec.take_count("skip", 0, 0, u64::MAX)?;
        let limit = spec.take_count("limit", u64::MAX, 1, u64::MAX)?;
        let mut t = TraceReplay::open(Path::new(&path))?;
        match spec.take_str("heap").as_deref() {
            None | Some("native") => {}
            Some("recorded") => t.rebuild_heap = false,
            Some(other) => {
                return Err(SimError::BadInput(format!(
                    "workload 'trace': heap={other}: expected 'native' (rebuild the heap \
                     Valgrind capped, the default) or 'recorded' (replay it as recorded)"
                )))
            }
        }
        t.set_window(Window { skip, limit })?;
        Ok(t)
    }

    /// Replays only this window of the trace's accesses. A `skip` at or beyond the trace's
    /// accesses (known from its trailer) is bad input: the replay would run nothing.
    pub fn set_window(&mut self, w: Window) -> Result<()> {
        if w.limit == 0 {
            return Err(SimError::BadInput(
                "workload 'trace': limit=0 would replay no access: give at least 1".into(),
            ));
        }
        if let Some(n) = self.expected {
            if w.skip >= n && w.skip > 0 {
                return Err(SimError::BadInput(format!(
                    "workload 'trace': skip={} is beyond the trace's {n} accesses ({}): nothing \
                     would be replayed",
                    w.skip,
                    self.path.display()
                )));
            }
            self.expected = Some((n - w.skip).min(w.limit));
        }
        self.window = w;
        Ok(())
    }

    /// Checks that `path` is a readable trace (its header) and takes the access count from its
    /// trailer when it has one.
    pub fn open(path: &Path) -> Result<TraceReplay> {
        // A file cut short in its header is a truncated trace (exit status 1), as `splab trace
        // info` and a replay say of one cut later; only a file that is not a trace is bad input.
        st::TraceReader::open(path).map_err(|e| {
            if e.is_bad_input() {
                SimError::BadInput(format!("workload 'trace': {e}"))
            } else {
                SimError::Trace(e.to_string())
            }
        })?;
        let expected = st::read_header_and_trailer(path)
            .ok()
            .map(|(_, t)| t.accesses);
        Ok(TraceReplay {
            path: path.to_owned(),
            expected,
            window: Window::ALL,
            rebuild_heap: true,
            stats: ReplayStats::default(),
        })
    }
}

impl super::Workload for TraceReplay {
    fn describe(&self) -> String {
        let mut d = format!("trace:path={}", self.path.display());
        if self.window.skip > 0 {
            d += &format!(",skip={}", self.window.skip);
        }
        if self.window.limit != u64::MAX {
            d += &format!(",limit={}", self.window.limit);
        }
        if !self.rebuild_heap {
            d += ",heap=recorded";
        }
        d
    }

    fn expected_accesses(&self) -> Option<u64> {
        self.expected
    }

    fn run(&mut self, e: &mut Engine, _rng: &mut Rng) -> Result<()> {
        self.stats = replay_with(e, &self.path, self.window, self.rebuild_heap)?;
        Ok(())
    }

    fn stats(&self) -> Option<serde_json::Value> {
        serde_json::to_value(&self.stats).ok()
    }
}

/// Replays the trace at `path` on `e`, rebuilding a heap Valgrind capped; returns what the
/// replay did.
pub fn replay(e: &mut Engine, path: &Path) -> Result<ReplayStats> {
    replay_with(e, path, Window::ALL, true)
}

/// Replays the accesses of `window` (see [`Window`]) of the trace at `path` on `e`;
/// `rebuild_heap` puts `morecore` mappings back on the heap (module documentation). A skip
/// beyond the trace's accesses is an error (found at the trace's end when it has no trailer).
/// Returns what the replay did.
pub fn replay_with(
    e: &mut Engine,
    path: &Path,
    window: Window,
    rebuild_heap: bool,
) -> Result<ReplayStats> {
    let mut reader = st::TraceReader::open(path).map_err(|e| SimError::Trace(e.to_string()))?;
    let bs = e.os.machine.base_size();
    let hint = reader.header().page_size_hint as u64;
    if hint.is_power_of_two() && hint >= 512 && bs > hint {
        return Err(SimError::BadInput(format!(
            "{}: the trace was recorded with {hint}-byte pages; machine '{}' has {bs}-byte base \
             pages, so the program's mappings do not fit its pages: replay it on a machine with \
             {hint}-byte pages or smaller (skylake, core2-64, pa8000)",
            path.display(),
            e.os.machine.name
        )));
    }
    // The heap is moved at each process image's start, before any `morecore` mapping shows, so
    // whether the trace has them is read from its trailer first (a trace without one, cut
    // short, replays its heap as recorded and counts what it could not rebuild).
    let morecore = st::read_header_and_trailer(path).map_or(0, |(_, t)| t.morecore_mmaps);
    let mut r = Replayer {
        rebuild_heap: rebuild_heap && morecore > 0,
        spaces: FxHashMap::default(),
        relocating: false,
        hit: Segment::NONE,
        hit2: Segment::NONE,
        procs: FxHashMap::default(),
        cache: None,
        batch: Vec::with_capacity(ACCESS_BATCH + 1),
        batch_pid: Pid(0),
        compute: 0,
        bs,
        shift: bs.trailing_zeros(),
        stats: ReplayStats::default(),
    };
    let mut buf = Vec::with_capacity(READ_BATCH);
    let (mut skip, mut left) = (window.skip, window.limit);
    'read: loop {
        buf.clear();
        let res = reader.read_batch(&mut buf, READ_BATCH);
        // Events decoded before an error are replayed before it is reported.
        for ev in &buf {
            if let st::TraceEvent::Access { .. } = ev {
                if skip > 0 {
                    skip -= 1;
                    r.stats.events += 1;
                    r.stats.skipped_window += 1;
                    continue;
                }
                if left == 0 {
                    break 'read;
                }
                left -= 1;
            }
            r.event(e, ev)?;
        }
        match res {
            Ok(0) => break,
            Ok(_) => {}
            Err(err) => {
                r.flush(e)?;
                return Err(SimError::Trace(err.in_file(path).to_string()));
            }
        }
    }
    r.flush(e)?;
    if skip > 0 {
        return Err(SimError::BadInput(format!(
            "{}: skip={} is beyond the trace's {} accesses: nothing was replayed",
            path.display(),
            window.skip,
            window.skip - skip
        )));
    }
    r.stats.recording_brk_refused = reader.trailer().map_or(0, |t| t.brk_refused);
    Ok(r.stats)
}

struct ProcState {
    pid: Pid,
    /// The heap start was set by this image's first `Brk`.
    heap_set: bool,
    /// A vfork child before its exec or exit: `pid` is its parent's engine process, whose
    /// address space it runs in (it owns no engine process of its own).
    vfork_shared: bool,
}

/// Where a rebuilt heap goes in a replay: `user_top / 2` (64 TiB on 48-bit machines), far
/// above anything a Valgrind client maps (its mappings grow up from 0x4000000 and its stack
/// sits below 128 GiB), plus the recorded heap start modulo 1 GiB, so that every superpage
/// size up to 1 GiB sees the heap at the alignment the recording had.
fn rebuilt_heap_start(user_top: u64, recorded: u64) -> u64 {
    const GIB: u64 = 1 << 30;
    ((user_top / 2) & !(GIB - 1)) + recorded % GIB
}

/// A recorded address range that the replay holds elsewhere: `[from, end)` is at `to`.
/// Also used for the identity between relocations (`to == from`), so that the last-hit cache
/// answers addresses outside every relocation too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Segment {
    pid: Pid,
    from: u64,
    end: u64,
    to: u64,
}

impl Segment {
    /// Contains nothing (`end - from` is 0).
    const NONE: Segment = Segment {
        pid: Pid(u32::MAX),
        from: 0,
        end: 0,
        to: 0,
    };

    #[inline]
    fn contains(&self, pid: Pid, va: u64) -> bool {
        self.pid == pid && va.wrapping_sub(self.from) < self.end - self.from
    }
}

/// The relocations of one address space: disjoint, sorted by `from`; a new one that continues
/// the last at both ends is merged into it (Valgrind puts consecutive fallback mappings next
/// to each other, and the replay appends them to the heap in order), so the table stays small.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct RelocTable {
    /// (from, end, to)
    v: Vec<(u64, u64, u64)>,
}

impl RelocTable {
    /// Adds `[from, end) -> to`. Precondition: it overlaps no relocation already there.
    fn insert(&mut self, from: u64, end: u64, to: u64) {
        let i = self.v.partition_point(|r| r.0 < from);
        debug_assert!(
            i == self.v.len() || end <= self.v[i].0,
            "RelocTable::insert: overlap"
        );
        debug_assert!(
            i == 0 || self.v[i - 1].1 <= from,
            "RelocTable::insert: overlap"
        );
        if i > 0 {
            let p = &mut self.v[i - 1];
            if p.1 == from && p.2 + (p.1 - p.0) == to {
                p.1 = end;
                return;
            }
        }
        self.v.insert(i, (from, end, to));
    }

    /// The segment holding `va`: a relocation, or the identity between two.
    fn segment(&self, pid: Pid, va: u64) -> Segment {
        let i = self.v.partition_point(|r| r.0 <= va);
        if i > 0 && va < self.v[i - 1].1 {
            let (from, end, to) = self.v[i - 1];
            return Segment { pid, from, end, to };
        }
        let from = if i > 0 { self.v[i - 1].1 } else { 0 };
        let end = self.v.get(i).map_or(u64::MAX, |r| r.0);
        Segment {
            pid,
            from,
            end,
            to: from,
        }
    }

    /// Makes the relocation that starts at `from` end at `end` (none when `end <= from`).
    /// Precondition: `[from, end)` overlaps no other relocation.
    fn set_extent(&mut self, from: u64, end: u64, to: u64) {
        self.v.retain(|r| r.0 != from);
        if end > from {
            self.insert(from, end, to);
        }
    }

    /// `[start, end)` cut where relocations begin and end: (recorded start, replayed start,
    /// length) of each piece, in order.
    fn pieces(&self, start: u64, end: u64) -> Vec<(u64, u64, u64)> {
        let mut out = Vec::new();
        let mut at = start;
        while at < end {
            let s = self.segment(Pid(0), at);
            let t = s.end.min(end);
            out.push((at, s.to + (at - s.from), t - at));
            at = t;
        }
        out
    }
}

/// A heap rebuilt at `rebuilt_heap_start`: the recorded heap `[recorded, recorded + cap)`
/// is relocated there, and `morecore` mappings are appended to it as brk growth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct HeapMove {
    /// The recorded heap start and the replayed one.
    recorded: u64,
    start: u64,
    /// The last break the trace recorded.
    recorded_brk: u64,
    /// A `morecore` mapping has been appended: from then on the recorded break stands still
    /// (Valgrind refuses every growth) and the replayed one is ahead of it.
    appended: bool,
}

/// What an engine address space holds beyond the model's own state: its relocations.
#[derive(Clone, Debug, Default)]
struct Space {
    table: RelocTable,
    heap: Option<HeapMove>,
}

struct Replayer {
    /// The trace has `morecore` mappings and the user did not ask for `heap=recorded`: heaps
    /// are moved to `rebuilt_heap_start` at each image's start.
    rebuild_heap: bool,
    /// Engine pid -> relocations of that address space (absent: none).
    spaces: FxHashMap<u32, Space>,
    /// Some address space has a relocation: accesses are translated. False for traces
    /// without `morecore` mappings, whose hot path then does not look.
    relocating: bool,
    /// The segment of the last translated address, and the one before it (`Segment::NONE`
    /// after any change of the relocations).
    hit: Segment,
    hit2: Segment,
    /// Trace pid -> engine process.
    procs: FxHashMap<u32, ProcState>,
    /// (trace pid, engine pid) of the last access.
    cache: Option<(u32, Pid)>,
    batch: Vec<Access>,
    batch_pid: Pid,
    /// Compute cycles not yet given to the engine.
    compute: u64,
    bs: u64,
    shift: u32,
    stats: ReplayStats,
}

fn op_of(k: st::AccessKind) -> MemOp {
    match k {
        st::AccessKind::Read => MemOp::Load,
        st::AccessKind::Write => MemOp::Store,
        st::AccessKind::Ifetch => MemOp::Ifetch,
        st::AccessKind::Rmw => MemOp::Rmw,
    }
}

/// Names the trace event in a model error (keeps the error's kind).
fn in_event(ev: &st::TraceEvent, n: u64) -> impl FnOnce(SimError) -> SimError + '_ {
    move |err| match err {
        SimError::InvalidEvent(m) => {
            SimError::InvalidEvent(format!("trace event {n} (`{ev}`): {m}"))
        }
        SimError::BadInput(m) => SimError::BadInput(format!("trace event {n} (`{ev}`): {m}")),
        other => other,
    }
}

impl Replayer {
    /// The engine process of trace pid `tp`, spawning one for a pid never seen.
    fn pid(&mut self, e: &mut Engine, tp: st::Pid) -> Result<Pid> {
        if let Some(p) = self.procs.get(&tp.0) {
            return Ok(p.pid);
        }
        let pid = e.spawn()?;
        if self.stats.processes > 0 {
            self.stats.unparented += 1;
        }
        self.stats.processes += 1;
        self.procs.insert(
            tp.0,
            ProcState {
                pid,
                heap_set: false,
                vfork_shared: false,
            },
        );
        Ok(pid)
    }

    #[inline]
    fn event(&mut self, e: &mut Engine, ev: &st::TraceEvent) -> Result<()> {
        self.stats.events += 1;
        if let st::TraceEvent::Access {
            pid,
            va,
            kind,
            size,
            dep,
            ipa,
        } = *ev
        {
            self.stats.accesses += 1;
            let p = match self.cache {
                Some((tp, p)) if tp == pid.0 => p,
                _ => {
                    let p = self.pid(e, pid)?;
                    self.cache = Some((pid.0, p));
                    p
                }
            };
            if p != self.batch_pid && !self.batch.is_empty() {
                self.flush(e)?;
            }
            self.batch_pid = p;
            let op = op_of(kind);
            let mut va = va.0;
            let mut last = va.wrapping_add(size.max(1) as u64 - 1);
            if self.relocating {
                va = self.translate(p, va);
                last = self.translate(p, last);
            }
            self.batch.push(Access::new(va, op, dep, ipa));
            if (last >> self.shift) != (va >> self.shift) {
                // The second page of a split access: the same instruction, so no instructions
                // of its own, and the same address dependence.
                self.batch.push(Access::new(
                    last & !(self.bs - 1),
                    op,
                    if dep > 0 { dep + 1 } else { 0 },
                    0,
                ));
                self.stats.split_accesses += 1;
            }
            if self.batch.len() >= ACCESS_BATCH {
                self.flush(e)?;
            }
            return Ok(());
        }
        if let st::TraceEvent::Compute { amount, unit, .. } = *ev {
            // Instructions are already in the next access's `ipa` (the reader folds a version-1
            // trace's into it, the importers count them), so they add no time of their own;
            // cycles are added at the next flush.
            if unit == st::ComputeUnit::Cycles {
                self.compute = self.compute.saturating_add(amount);
                self.stats.compute_cycles = self.stats.compute_cycles.saturating_add(amount);
            } else {
                self.stats.compute_instructions =
                    self.stats.compute_instructions.saturating_add(amount);
            }
            return Ok(());
        }
        self.flush(e)?;
        let n = self.stats.events - 1;
        self.syscall(e, ev).map_err(in_event(ev, n))
    }

    /// Drops the cached segments (the relocations or the processes changed).
    fn forget_segments(&mut self) {
        self.hit = Segment::NONE;
        self.hit2 = Segment::NONE;
    }

    /// Where the replay holds recorded address `va` of engine process `p` (no caching: for
    /// syscalls).
    fn at(&self, p: Pid, va: u64) -> u64 {
        let s = self.segment(p, va);
        s.to + (va - s.from)
    }

    /// A `morecore` mapping `[addr, addr + len)` of engine process `p`: appends it to the
    /// rebuilt heap as brk growth, as the native program's sbrk would have grown it (glibc
    /// `sysmalloc`: MORECORE first; the mmap fallback only when it fails), and relocates it
    /// there. False when it cannot: no rebuilt heap, the recorded range is already relocated,
    /// or something lies right after the heap.
    fn append_to_heap(&mut self, e: &mut Engine, p: Pid, addr: u64, len: u64) -> Result<bool> {
        if !self.rebuild_heap {
            return Ok(false);
        }
        let len = self.round_up(len);
        let Some(space) = self.spaces.get(&p.0) else {
            return Ok(false);
        };
        if space.heap.is_none() {
            return Ok(false);
        }
        let seg = space.table.segment(p, addr);
        if seg.to != seg.from || seg.end < addr.saturating_add(len) {
            return Ok(false);
        }
        let (start, brk_end) = {
            let pr = e.os.proc(p)?;
            (pr.brk_start, pr.brk_end)
        };
        let top = self.round_up(brk_end);
        let end = top.saturating_add(len);
        // The heap's own entry may end past `top` (HP-UX's heap growth-rate adjustment,
        // vm/pagesize.rs `heap_top`); nothing else may lie in the way.
        let kernel_top = e.os.heap_top(start, brk_end);
        let free =
            e.os.proc(p)?
                .vmas
                .range(..end)
                .next_back()
                .is_none_or(|(_, v)| v.end <= kernel_top);
        if !free || e.brk(p, end)? != end {
            return Ok(false);
        }
        self.note_heap(e, p)?;
        let space = self.spaces.get_mut(&p.0).expect("append_to_heap: space");
        space.table.insert(addr, addr + len, top);
        if let Some(h) = space.heap.as_mut() {
            h.appended = true;
        }
        self.relocating = true;
        self.forget_segments();
        self.stats.heap_regions_relocated += 1;
        Ok(true)
    }

    /// Where the replay holds recorded address `va` of engine process `p`.
    #[inline]
    fn translate(&mut self, p: Pid, va: u64) -> u64 {
        if !self.hit.contains(p, va) {
            self.miss(p, va);
        }
        self.hit.to + (va - self.hit.from)
    }

    /// `translate` left the last segment: the one before it (a program alternates between
    /// its heap and its stack), else a lookup.
    #[inline(never)]
    fn miss(&mut self, p: Pid, va: u64) {
        if self.hit2.contains(p, va) {
            std::mem::swap(&mut self.hit, &mut self.hit2);
        } else {
            self.hit2 = self.hit;
            self.hit = self.segment(p, va);
        }
    }

    /// The segment of `va` in `p`'s relocations (out of line: the hot path calls it only when
    /// an access leaves the last segment it hit).
    #[inline(never)]
    fn segment(&self, p: Pid, va: u64) -> Segment {
        match self.spaces.get(&p.0) {
            Some(s) => s.table.segment(p, va),
            None => Segment {
                pid: p,
                from: 0,
                end: u64::MAX,
                to: 0,
            },
        }
    }

    /// `[addr, addr + len)` of engine process `p` as the replay holds it: (recorded start,
    /// replayed start, length) pieces.
    fn ranges(&self, p: Pid, addr: u64, len: u64) -> Vec<(u64, u64, u64)> {
        match self.spaces.get(&p.0) {
            Some(s) if !s.table.v.is_empty() => s.table.pieces(addr, addr.saturating_add(len)),
            _ => vec![(addr, addr, len)],
        }
    }

    /// Hands the pending compute cycles and accesses to the engine.
    fn flush(&mut self, e: &mut Engine) -> Result<()> {
        if self.compute > 0 {
            let c = std::mem::take(&mut self.compute);
            e.compute(self.batch_pid, c)?;
        }
        let pid = self.batch_pid;
        let mut from = 0;
        let mut retried = usize::MAX;
        while from < self.batch.len() {
            match e.accesses(pid, &self.batch[from..]) {
                Ok(()) => break,
                Err(SimError::Segfault { va, kind, .. }) => {
                    // The batch stopped at its first access of `va` of that kind (the ones
                    // before it went through; nothing between them changes the mappings).
                    let k = match kind {
                        "read" => AccessKind::Read,
                        "write" => AccessKind::Write,
                        _ => AccessKind::Ifetch,
                    };
                    let i = from
                        + self.batch[from..]
                            .iter()
                            .position(|a| a.va == va && a.op.kind() == k)
                            .unwrap_or(0);
                    let retry = i != retried && self.bad_access(e, pid, va)?;
                    retried = i;
                    from = if retry { i } else { i + 1 };
                }
                Err(err) => return Err(err),
            }
        }
        self.batch.clear();
        Ok(())
    }

    /// An access the model refused: maps the page lazily (then true: retry the access) or
    /// skips the access (false). See the module documentation.
    fn bad_access(&mut self, e: &mut Engine, pid: Pid, va: u64) -> Result<bool> {
        if va >= e.os.user_top {
            self.stats.skipped_outside += 1;
            return Ok(false);
        }
        if e.os.proc(pid)?.vma_at(va).is_some() {
            self.stats.skipped_protection += 1;
            return Ok(false);
        }
        let req = MmapReq {
            addr: va & !(self.bs - 1),
            len: self.bs,
            prot: Prot::RWX,
            flags: MapFlags::FIXED,
            file: 0,
            offset: 0,
        };
        e.mmap(pid, req)?;
        self.stats.lazy_pages += 1;
        Ok(true)
    }

    fn round_up(&self, len: u64) -> u64 {
        len.div_ceil(self.bs) * self.bs
    }

    /// Every event but accesses and compute.
    fn syscall(&mut self, e: &mut Engine, ev: &st::TraceEvent) -> Result<()> {
        use st::TraceEvent as T;
        match *ev {
            T::Mmap {
                pid,
                addr,
                len,
                prot,
                flags,
                file,
                offset,
            } => {
                self.stats.mmaps += 1;
                let p = self.pid(e, pid)?;
                if len == 0 {
                    return Ok(());
                }
                let end = addr.0.checked_add(self.round_up(len));
                if end.is_none_or(|end| end > e.os.user_top) {
                    return Err(SimError::BadInput(format!(
                        "the mapping at {:#x} lies beyond the {}-bit user address space of machine \
                         '{}': replay this trace on a machine with 48-bit addresses (skylake, core2-64, pa8000)",
                        addr.0, e.os.machine.va_bits, e.os.machine.name
                    )));
                }
                let mut f = MapFlags::FIXED;
                let file_id = match file {
                    Some(id) if !flags.contains(st::MmapFlags::ANON) => {
                        f = f.with(MapFlags::FILE);
                        id.0
                    }
                    _ => 0,
                };
                if flags.contains(st::MmapFlags::SHARED) {
                    f = f.with(MapFlags::SHARED);
                }
                if flags.contains(st::MmapFlags::STACK) {
                    f = f.with(MapFlags::STACK);
                }
                if flags.contains(st::MmapFlags::GROWABLE) {
                    f = f.with(MapFlags::GROWABLE);
                }
                // A mapping reconstructed from addresses (ChampSim, lackey) has no known
                // protection: it allows everything its accesses do.
                let prot = if flags.contains(st::MmapFlags::INFERRED) {
                    Prot::RWX
                } else {
                    Prot(prot.0 & 7)
                };
                if flags.contains(st::MmapFlags::MORECORE) {
                    // glibc's malloc mapped this because Valgrind refused its brk: a native
                    // run grows the heap instead.
                    if self.append_to_heap(e, p, addr.0, len)? {
                        return Ok(());
                    }
                    self.stats.heap_not_rebuilt += 1;
                }
                let mut req = MmapReq {
                    addr: addr.0,
                    len,
                    prot,
                    flags: f,
                    file: file_id,
                    offset: if file_id != 0 {
                        offset & !(self.bs - 1)
                    } else {
                        0
                    },
                };
                if !self.relocating {
                    e.mmap(p, req)?;
                    return Ok(());
                }
                // A mapping over relocated memory goes where that memory is.
                let base = req.offset;
                for (rec, at, l) in self.ranges(p, addr.0, self.round_up(len)) {
                    req.addr = at;
                    req.len = l.min(len - (rec - addr.0));
                    req.offset = if file_id != 0 {
                        base + (rec - addr.0)
                    } else {
                        0
                    };
                    e.mmap(p, req)?;
                }
                self.forget_segments();
            }
            T::Munmap { pid, addr, len } => {
                self.stats.munmaps += 1;
                let p = self.pid(e, pid)?;
                for (_, at, l) in self.ranges(p, addr.0, len) {
                    if l > 0 {
                        e.munmap(p, at, l)?;
                    }
                }
            }
            T::Mremap {
                pid,
                old_addr,
                old_len,
                new_addr,
                new_len,
            } => {
                self.stats.mremaps += 1;
                let p = self.pid(e, pid)?;
                if new_len == 0 {
                    return Ok(());
                }
                let (old, new) = (self.at(p, old_addr.0), self.at(p, new_addr.0));
                e.mremap(p, old, old_len, new, new_len)?;
            }
            T::Mprotect {
                pid,
                addr,
                len,
                prot,
            } => {
                self.stats.mprotects += 1;
                let p = self.pid(e, pid)?;
                if len == 0 {
                    return Ok(());
                }
                let mut gaps = false;
                for (_, at, l) in self.ranges(p, addr.0, self.round_up(len)) {
                    gaps |= self.mprotect_mapped(e, p, at, at.saturating_add(l), prot)?;
                }
                if gaps {
                    self.stats.mprotect_gaps += 1;
                }
            }
            T::Madvise {
                pid,
                addr,
                len,
                advice,
            } => {
                self.stats.madvises += 1;
                let p = self.pid(e, pid)?;
                let a = match advice {
                    st::Advice::DontNeed => Advice::DontNeed,
                    st::Advice::Free => Advice::Free,
                    st::Advice::HugePage => Advice::HugePage,
                    st::Advice::NoHugePage => Advice::NoHugePage,
                    st::Advice::Collapse => Advice::Collapse,
                    st::Advice::Other(_) => {
                        self.stats.ignored_advice += 1;
                        return Ok(());
                    }
                };
                for (_, at, l) in self.ranges(p, addr.0, len) {
                    if l > 0 {
                        e.madvise(p, at, l, a)?;
                    }
                }
            }
            T::Brk { pid, new_end } => {
                self.stats.brks += 1;
                let p = self.pid(e, pid)?;
                self.brk(e, p, pid, new_end.0)?;
            }
            T::Fork { parent, child } => {
                self.stats.forks += 1;
                let pp = self.pid(e, parent)?;
                if let Some(old) = self.procs.remove(&child.0) {
                    // A recycled pid whose exit the trace did not show.
                    e.exit(old.pid)?;
                    self.spaces.remove(&old.pid.0);
                }
                let c = e.fork(pp)?;
                // The child's address space is a copy: so are its relocations.
                if let Some(space) = self.spaces.get(&pp.0).cloned() {
                    self.spaces.insert(c.0, space);
                }
                let heap_set = self.procs.get(&parent.0).is_some_and(|s| s.heap_set);
                self.procs.insert(
                    child.0,
                    ProcState {
                        pid: c,
                        heap_set,
                        vfork_shared: false,
                    },
                );
                self.stats.processes += 1;
                self.cache = None;
            }
            T::Vfork { parent, child } => {
                // The child runs in the parent's address space (CLONE_VM): its trace pid maps
                // to the parent's engine process until its exec or exit. Nothing is copied or
                // write-protected, so the parent's reservations and superpages are untouched,
                // as under a real vfork (Linux copy_mm with CLONE_VM shares the mm).
                self.stats.vforks += 1;
                let pp = self.pid(e, parent)?;
                if let Some(old) = self.procs.remove(&child.0) {
                    if !old.vfork_shared {
                        e.exit(old.pid)?;
                        self.spaces.remove(&old.pid.0);
                    }
                }
                let heap_set = self.procs.get(&parent.0).is_some_and(|s| s.heap_set);
                self.procs.insert(
                    child.0,
                    ProcState {
                        pid: pp,
                        heap_set,
                        vfork_shared: true,
                    },
                );
                self.stats.processes += 1;
                self.cache = None;
            }
            T::Exec { pid } => {
                self.stats.execs += 1;
                let shared = self.procs.get(&pid.0).is_some_and(|s| s.vfork_shared);
                if shared {
                    // A vfork child's exec leaves the parent's address space to the parent and
                    // gives the child an empty one of its own.
                    let c = e.spawn()?;
                    let s = self.procs.get_mut(&pid.0).expect("exec: vfork child");
                    s.pid = c;
                    s.vfork_shared = false;
                    s.heap_set = false;
                    self.cache = None;
                    return Ok(());
                }
                let p = self.pid(e, pid)?;
                e.exec(p)?;
                self.spaces.remove(&p.0);
                self.forget_segments();
                if let Some(s) = self.procs.get_mut(&pid.0) {
                    s.heap_set = false;
                }
            }
            T::Exit { pid } => {
                if let Some(s) = self.procs.remove(&pid.0) {
                    self.stats.exits += 1;
                    // A vfork child that exits without exec leaves the parent's space alone.
                    if !s.vfork_shared {
                        e.exit(s.pid)?;
                        self.spaces.remove(&s.pid.0);
                        self.forget_segments();
                        // Vfork children still in this space (a trace that shows the parent
                        // ending first) lose it: a later event of theirs spawns them afresh.
                        self.procs
                            .retain(|_, c| !(c.vfork_shared && c.pid == s.pid));
                    }
                }
                self.cache = None;
            }
            T::FileOpen { file, size, .. } => {
                e.open_file(file.0, size)?;
            }
            T::Access { .. } | T::Compute { .. } => unreachable!("handled by Replayer::event"),
        }
        Ok(())
    }

    /// `mprotect` of the mapped parts of `[start, end)`; true when some part was not mapped.
    fn mprotect_mapped(
        &mut self,
        e: &mut Engine,
        p: Pid,
        start: u64,
        end: u64,
        prot: st::Prot,
    ) -> Result<bool> {
        // The mapped parts of [start, end), as contiguous pieces.
        let mut pieces: Vec<(u64, u64)> = Vec::new();
        {
            let proc = e.os.proc(p)?;
            let mut vs: Vec<(u64, u64)> = proc
                .vmas
                .range(..end)
                .rev()
                .take_while(|(_, v)| v.end > start)
                .map(|(_, v)| (v.start.max(start), v.end.min(end)))
                .collect();
            vs.reverse();
            for (s, t) in vs {
                match pieces.last_mut() {
                    Some(last) if last.1 == s => last.1 = t,
                    _ => pieces.push((s, t)),
                }
            }
        }
        for &(s, t) in &pieces {
            e.mprotect(p, s, t - s, Prot(prot.0 & 7))?;
        }
        Ok(pieces != [(start, end)])
    }

    /// `Brk`: the first of an image sets the heap start (an empty heap at the first page
    /// boundary at or above `new_end`); later ones move the break. With `rebuild_heap`, the
    /// heap starts at `rebuilt_heap_start` instead and the recorded heap is relocated there;
    /// once a `morecore` mapping has been appended, the recorded break no longer moves (each
    /// growth Valgrind refused repeats it) and the replayed one stays where the appended
    /// mappings took it: a recorded break that moves then is counted in `heap_not_rebuilt`.
    fn brk(&mut self, e: &mut Engine, p: Pid, tp: st::Pid, new_end: u64) -> Result<()> {
        let state = self.procs.get_mut(&tp.0).expect("brk: process");
        if !state.heap_set {
            state.heap_set = true;
            let recorded = self.round_up(new_end);
            if !self.rebuild_heap {
                e.set_heap_start(p, recorded)?;
                return Ok(());
            }
            let start = rebuilt_heap_start(e.os.user_top, recorded);
            e.set_heap_start(p, start)?;
            let space = self.spaces.entry(p.0).or_default();
            space.table.set_extent(recorded, recorded, start);
            space.heap = Some(HeapMove {
                recorded,
                start,
                recorded_brk: new_end,
                appended: false,
            });
            self.forget_segments();
            return Ok(());
        }
        let heap = self.spaces.get_mut(&p.0).and_then(|s| s.heap.as_mut());
        let new_end = match heap {
            None => new_end,
            Some(h) if h.appended => {
                if new_end != h.recorded_brk {
                    h.recorded_brk = new_end;
                    self.stats.heap_not_rebuilt += 1;
                }
                return Ok(());
            }
            Some(h) => {
                h.recorded_brk = new_end;
                let (recorded, start) = (h.recorded, h.start);
                let top = self.round_up(new_end);
                let space = self.spaces.get_mut(&p.0).expect("brk: space");
                space.table.set_extent(recorded, top, start);
                self.relocating = true;
                self.forget_segments();
                start.wrapping_add(new_end.wrapping_sub(recorded))
            }
        };
        let got = e.brk(p, new_end)?;
        if got == new_end {
            self.note_heap(e, p)?;
            return Ok(());
        }
        let (start, cur) = {
            let pr = e.os.proc(p)?;
            (pr.brk_start, pr.brk_end)
        };
        if new_end < start {
            return Err(SimError::InvalidEvent(format!(
                "brk to {new_end:#x}, below the heap start {start:#x}"
            )));
        }
        // Growth refused: a mapping lies in the heap's way (the traced program had none there).
        let (top, new_top) = (e.os.heap_top(start, cur), e.os.heap_top(start, new_end));
        if new_top > top {
            e.munmap(p, top, new_top - top)?;
            self.stats.brk_forced += 1;
        }
        let got = e.brk(p, new_end)?;
        if got != new_end {
            return Err(SimError::InvalidEvent(format!(
                "brk to {new_end:#x} refused by the model (heap {start:#x}..{cur:#x})"
            )));
        }
        self.note_heap(e, p)
    }

    /// Updates `heap_peak` from `p`'s heap.
    fn note_heap(&mut self, e: &Engine, p: Pid) -> Result<()> {
        let pr = e.os.proc(p)?;
        self.stats.heap_peak = self.stats.heap_peak.max(pr.brk_end - pr.brk_start);
        Ok(())
    }
}

impl Engine {
    /// Sets the heap of `pid` to an empty one starting at `start` (page aligned): what a new
    /// image's kernel does at exec. Not an event of the stream (no clock or bookkeeping).
    pub fn set_heap_start(&mut self, pid: Pid, start: u64) -> Result<()> {
        let p = self
            .os
            .procs
            .get_mut(&pid.0)
            .ok_or_else(|| SimError::InvalidEvent(format!("no process with pid {}", pid.0)))?;
        p.brk_start = start;
        p.brk_end = start;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reloc_table_merges_continuations_and_answers_gaps() {
        let mut t = RelocTable::default();
        t.insert(0x5000, 0x6000, 0x100_0000);
        // Continues the last at both ends: merged.
        t.insert(0x6000, 0x7000, 0x100_1000);
        // Continues it in recorded addresses only: a new entry.
        t.insert(0x7000, 0x8000, 0x200_0000);
        t.insert(0x1000, 0x2000, 0x300_0000);
        assert_eq!(
            t.v,
            [
                (0x1000, 0x2000, 0x300_0000),
                (0x5000, 0x7000, 0x100_0000),
                (0x7000, 0x8000, 0x200_0000)
            ]
        );
        let s = t.segment(Pid(1), 0x6abc);
        assert_eq!((s.from, s.end, s.to), (0x5000, 0x7000, 0x100_0000));
        assert!(s.contains(Pid(1), 0x5000) && !s.contains(Pid(1), 0x7000));
        assert!(!s.contains(Pid(2), 0x6000));
        // Between relocations: the identity, bounded by them.
        let g = t.segment(Pid(1), 0x3000);
        assert_eq!((g.from, g.end, g.to), (0x2000, 0x5000, 0x2000));
        let g = t.segment(Pid(1), 0x9000);
        assert_eq!((g.from, g.end, g.to), (0x8000, u64::MAX, 0x8000));
        assert!(!Segment::NONE.contains(Pid(u32::MAX), 0));
    }

    #[test]
    fn reloc_table_cuts_ranges_where_relocations_begin_and_end() {
        let mut t = RelocTable::default();
        t.insert(0x5000, 0x7000, 0x100_0000);
        assert_eq!(
            t.pieces(0x4000, 0x8000),
            [
                (0x4000, 0x4000, 0x1000),
                (0x5000, 0x100_0000, 0x2000),
                (0x7000, 0x7000, 0x1000)
            ]
        );
        assert_eq!(t.pieces(0x6000, 0x6800), [(0x6000, 0x100_1000, 0x800)]);
        // The heap's relocation grows and shrinks with the recorded break.
        t.set_extent(0x5000, 0x9000, 0x100_0000);
        assert_eq!(t.v, [(0x5000, 0x9000, 0x100_0000)]);
        t.set_extent(0x5000, 0x5000, 0x100_0000);
        assert!(t.v.is_empty());
    }

    #[test]
    fn rebuilt_heap_keeps_the_recorded_alignment_up_to_1g() {
        let top = 1u64 << 47;
        let s = rebuilt_heap_start(top, 0x403_5000);
        assert_eq!(s % (1 << 30), 0x403_5000);
        assert!(s >= top / 2 && s < top - (top >> 4));
    }
}
