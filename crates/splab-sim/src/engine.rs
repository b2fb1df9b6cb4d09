//! The engine: drives the event stream of a workload through the OS model, keeps the simulated
//! clock, wakes daemons, samples time series, and checks invariants when asked.
//!
//! Workloads (synthetic generators and the trace replayer) call the event methods below; every
//! call is one event of docs/design.md's stream (a batch of accesses counts as one event). The clock
//! is derived from the cost counters, so there is one source of truth for time.

use crate::error::Result;
use crate::hw::core::cause;
use crate::hw::Machine;
use crate::policy::Policy;
use crate::units::{Access, AccessKind, MemOp, Pid, Prot};
use crate::vm::{Advice, MmapReq, Os, Touched};

/// How the engine checks the model's invariants (`splab run --check[=MODE]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CheckMode {
    /// No checks.
    #[default]
    Off,
    /// After every event, what it touched (`Os::check_touched`); every invariant
    /// (`Os::check_invariants`) every `FULL_CHECK_EVERY` events, after a fork or a daemon, and
    /// at the end. `--check`.
    Incremental,
    /// Every invariant after every event: O(memory) per event (18ms on a 32GB machine). For
    /// tests and for pinning down which event broke something. `--check=full`.
    Full,
}

/// The stride of full checks under `CheckMode::Incremental`: on skylake (32GB, 18ms a full
/// check) it costs 18us per event, about what the incremental check itself costs.
pub const FULL_CHECK_EVERY: u64 = 1024;

impl CheckMode {
    /// Parses the value of `--check=MODE`: `incremental` or `full`.
    pub fn parse(s: &str) -> Result<CheckMode> {
        match s {
            "incremental" => Ok(CheckMode::Incremental),
            "full" => Ok(CheckMode::Full),
            _ => Err(crate::SimError::BadInput(format!(
                "--check={s}: unknown check mode '{s}'; expected incremental (what each event touched, \
                 everything every {FULL_CHECK_EVERY} events; the default) or full (everything after every event)"
            ))),
        }
    }
}

/// `true` is the full check, as tests have always meant it.
impl From<bool> for CheckMode {
    fn from(full: bool) -> CheckMode {
        if full {
            CheckMode::Full
        } else {
            CheckMode::Off
        }
    }
}

/// A background activity woken on the simulated clock (page daemon, khugepaged, ...).
/// Contract: `wake` does its work on the OS model, charges its cycles to the background account
/// it returns, and says when it wants to run next.
pub trait Daemon: Send {
    fn name(&self) -> &str;
    /// Runs once at simulated time `now` (cycles); returns (cycles of work done, next wake time).
    fn wake(&mut self, os: &mut Os, now: u64) -> (u64, u64);
    /// Whether the daemon asks to run after the current event, before its wake time (the
    /// page daemon when an allocation found memory short).
    fn wants(&self, _os: &Os) -> bool {
        false
    }
}

/// Time series sampled on the simulated clock. The interval doubles (and every other sample is
/// dropped) whenever 512 samples are held, so any run yields 256..512 points.
#[derive(Clone, Debug, Default)]
pub struct Series {
    pub t: Vec<f64>,
    pub footprint_bytes: Vec<u64>,
    pub superpage_bytes: Vec<u64>,
    pub contiguity: Vec<f64>,
}

const MAX_SAMPLES: usize = 512;

/// Progress callback: (accesses so far, cycles so far).
pub type ProgressFn = Box<dyn FnMut(u64, u64) + Send>;

/// A scheduler of several processes sharing the engine (`par(...)`, workload/compose.rs).
/// The engine hands itself to it after every event and when a process sleeps; it may lend the
/// engine to another process before returning.
pub trait Sched: Send {
    /// After an event of the running process: switch to another one if it is due.
    fn after_event(&mut self, e: &mut Engine) -> Result<()>;
    /// The running process sleeps until simulated time `until` (cycles); returns once it has
    /// run again at or after that time.
    fn sleep_until(&mut self, e: &mut Engine, until: u64) -> Result<()>;
    /// Whether another process of the composition has not finished yet.
    fn others_active(&self) -> bool;
}

pub struct Engine {
    pub os: Os,
    check: CheckMode,
    /// What the current event touched (recorded only under `CheckMode::Incremental`).
    touched: Touched,
    /// Full checks run so far (incremental mode counts them for tests and the curious).
    pub full_checks: u64,
    pub events: u64,
    pub compute_cycles: u64,
    pub background_cycles: u64,
    /// Cycles with every process asleep (`idle_to`).
    pub idle_cycles: u64,
    daemons: Vec<(Box<dyn Daemon>, u64)>,
    pub series: Series,
    sample_every: u64,
    next_sample: u64,
    superpage_orders: Vec<u8>,
    progress: Option<ProgressFn>,
    next_progress: u64,
    /// Kernel cycles (`VmStats::cycles_kernel`) already handed to the core.
    kernel_charged: u64,
    /// The scheduler when processes run concurrently (`par(...)`); None otherwise.
    pub sched: Option<Box<dyn Sched>>,
    /// Named points that workloads reached (`mark`), with the clock at each, in order: how one
    /// component of a `par(...)` waits for another's phase (seed 000 6.5's seeker starts once
    /// the web server is warm).
    marks: Vec<(String, u64)>,
    /// The clock when the workload started (`start_measuring`; 0 without a set-up phase).
    pub origin: u64,
    /// Cycles of each request a server workload served (`request_begin` .. `request_end`).
    pub requests: crate::vm::latency::LatencyHistogram,
    /// The clock at the open request of each process.
    request_open: Vec<(Pid, u64)>,
}

impl Engine {
    /// A fresh machine running `policy`. `free_bytes`: if given, only that much memory starts
    /// free and contiguous; the rest is wired, clustered at the top (seed 000 5.2).
    /// `check`: a `CheckMode`, or a bool (`true` = `CheckMode::Full`).
    pub fn new(
        machine: Machine,
        policy: Policy,
        check: impl Into<CheckMode>,
        free_bytes: Option<u64>,
    ) -> Engine {
        let check = check.into();
        let superpage_orders: Vec<u8> = (1..machine.page_shifts.len())
            .map(|c| machine.order_of(c))
            .collect();
        let mut os = Os::new(machine, policy);
        if let Some(free) = free_bytes {
            let frames = free >> os.base_shift();
            os.phys.wire_clustered(frames);
        }
        // FreeBSD sizes its paging targets from the page count and the free count at boot.
        // Memory `--free` wires at set-up stands for memory the machine does not have, so both
        // are the free count.
        let free = os.phys.buddy.free_frames;
        os.pageout.targets =
            crate::vm::pageout::Targets::freebsd(free, free, os.machine.base_size());
        // Linux sizes its watermarks from the managed pages (vm/compact.rs).
        os.compact.managed = free;
        os.phys.buddy.track_touched(check == CheckMode::Incremental);
        os.stats.around.track = check == CheckMode::Incremental;
        let mut e = Engine {
            os,
            check,
            touched: Touched::default(),
            full_checks: 0,
            events: 0,
            compute_cycles: 0,
            background_cycles: 0,
            idle_cycles: 0,
            daemons: Vec::new(),
            series: Series::default(),
            sample_every: 1 << 20,
            next_sample: 0,
            superpage_orders,
            progress: None,
            next_progress: 1 << 24,
            kernel_charged: 0,
            sched: None,
            marks: Vec::new(),
            origin: 0,
            requests: Default::default(),
            request_open: Vec::new(),
        };
        e.sample(0);
        if e.os.policy.pagedaemon {
            // The page daemon sleeps until memory runs short or its first stats interval ends.
            let first = crate::vm::pageout::STATS_INTERVAL_S * e.os.machine.freq_hz;
            e.daemons.push((
                Box::new(crate::daemon::pagedaemon::PageDaemon::default()),
                first,
            ));
        }
        if let Some(k) = &e.os.policy.khugepaged {
            let first = e.os.machine.ms_to_cycles(k.scan_sleep_ms);
            e.daemons
                .push((Box::new(crate::daemon::khugepaged::Khugepaged), first));
        }
        if e.os.policy.kcompactd.is_some() {
            let first = crate::vm::compact::FRAG_CHECK_INTERVAL_MS * e.os.machine.freq_hz / 1000;
            e.daemons
                .push((Box::new(crate::daemon::kcompactd::Kcompactd), first));
        }
        if let Some((_, crate::policy::PrepMode::Async)) = e.os.policy.prep.threshold() {
            // seed 003 5.2, Async-t: its first pass one period after boot.
            let first =
                e.os.machine
                    .ms_to_cycles(crate::vm::prepare::ASYNC_PERIOD_MS);
            e.daemons
                .push((Box::new(crate::daemon::quicksilver::AsyncPrepare), first));
        }
        e
    }

    pub fn add_daemon(&mut self, d: Box<dyn Daemon>) {
        self.daemons.push((d, 0));
    }

    pub fn set_progress(&mut self, f: ProgressFn) {
        self.progress = Some(f);
    }

    /// Cycles of the application so far: the core's clock (hw/core.rs), which overlaps
    /// independent misses and walks and serialises faults and kernel work. Its breakdown by
    /// cause is `os.hw.core.breakdown()`.
    pub fn clock(&self) -> u64 {
        self.os.hw.core.cycles()
    }

    /// Cycles since the workload started (`start_measuring`): its estimated run time.
    pub fn elapsed(&self) -> u64 {
        self.clock() - self.origin
    }

    /// The workload starts now: what ran before (the fragmenter and its settling, `--frag`,
    /// workload/fragment.rs) is set-up, not the workload's. The clock goes on (daemons keep
    /// their schedule); the time attribution, the application's counters of idle, compute and
    /// background cycles and events, and the series start again here.
    pub fn start_measuring(&mut self) {
        self.charge_kernel();
        self.os.hw.core.restart_attribution();
        self.origin = self.clock();
        self.events = 0;
        self.compute_cycles = 0;
        self.background_cycles = 0;
        self.idle_cycles = 0;
        self.series = Series::default();
        self.sample_every = 1 << 20;
        self.sample(self.origin);
    }

    /// Hands kernel work done since the last call to the core (it drains the window).
    fn charge_kernel(&mut self) {
        let k = self.os.stats.cycles_kernel;
        if k > self.kernel_charged {
            self.os
                .hw
                .core
                .serial(k - self.kernel_charged, cause::KERNEL);
            self.kernel_charged = k;
        }
    }

    fn sample(&mut self, now: u64) {
        if self.series.t.len() >= MAX_SAMPLES {
            fn keep<T>(v: &mut Vec<T>) {
                let mut i = 0;
                v.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
            }
            keep(&mut self.series.t);
            keep(&mut self.series.footprint_bytes);
            keep(&mut self.series.superpage_bytes);
            keep(&mut self.series.contiguity);
            self.sample_every *= 2;
        }
        self.series
            .t
            .push((now - self.origin) as f64 / self.os.machine.freq_hz as f64);
        self.series.footprint_bytes.push(self.os.footprint_bytes());
        self.series.superpage_bytes.push(self.os.superpage_bytes());
        self.series
            .contiguity
            .push(self.os.phys.buddy.contiguity(&self.superpage_orders));
        self.next_sample = now + self.sample_every;
    }

    /// Bookkeeping after every event: peaks, samples, daemons, progress, invariants.
    fn after_event(&mut self) -> Result<()> {
        self.events += 1;
        self.os.note_peaks();
        self.charge_kernel();
        let now = self.clock();
        if now >= self.next_sample {
            self.sample(now);
        }
        // Pages held busy by the event's faults are the page daemon's again.
        self.os.pageq.unbusy_all();
        for i in 0..self.daemons.len() {
            if self.daemons[i].1 <= now || self.daemons[i].0.wants(&self.os) {
                self.touched.everything = true;
                let (work, next) = self.daemons[i].0.wake(&mut self.os, now);
                self.background_cycles += work;
                self.daemons[i].1 = next.max(now + 1);
            }
        }
        if std::mem::take(&mut self.os.compact.ran) {
            // Compaction moved pages anywhere.
            self.touched.everything = true;
        }
        if std::mem::take(&mut self.os.pageout.ran) {
            // A scan (the daemon's, or one an allocation waited for) touched pages anywhere.
            self.touched.everything = true;
        }
        if self.os.acc.total >= self.next_progress {
            self.next_progress = self.os.acc.total + (1 << 24);
            if let Some(p) = self.progress.as_mut() {
                p(self.os.acc.total, now);
            }
        }
        self.check_event()?;
        if let Some(mut s) = self.sched.take() {
            // The scheduler may lend the engine to another process meanwhile; whichever state
            // comes back has no scheduler in it (each lender takes its own out).
            let r = s.after_event(self);
            self.sched = Some(s);
            r?;
        }
        Ok(())
    }

    /// The running process sleeps until simulated time `until` (cycles): under a scheduler
    /// the others run meanwhile; otherwise (or when all sleep) the machine is idle (`idle_to`).
    pub fn idle_until(&mut self, until: u64) -> Result<()> {
        if let Some(mut s) = self.sched.take() {
            let r = s.sleep_until(self, until);
            self.sched = Some(s);
            return r;
        }
        self.idle_to(until)
    }

    /// Records that the running workload reached the point `name` now (see `marked`).
    pub fn mark(&mut self, name: &str) {
        let now = self.clock();
        self.marks.push((name.to_string(), now));
    }

    /// Marks the start of a request process `pid` serves (a server workload's unit of work);
    /// `request_end` marks its end and records the cycles between in `requests`.
    pub fn request_begin(&mut self, pid: Pid) {
        let now = self.clock();
        self.request_open.retain(|r| r.0 != pid);
        self.request_open.push((pid, now));
    }

    /// Marks the end of `pid`'s open request (nothing if none is open).
    pub fn request_end(&mut self, pid: Pid) {
        if let Some(i) = self.request_open.iter().position(|r| r.0 == pid) {
            let (_, start) = self.request_open.swap_remove(i);
            self.requests.record(self.clock() - start);
        }
    }

    /// The clock when a workload first reached the point `name`, if one has.
    pub fn marked(&self, name: &str) -> Option<u64> {
        self.marks.iter().find(|(n, _)| n == name).map(|&(_, t)| t)
    }

    /// Whether another process of a composition (`par(...)`) is still running or asleep: if
    /// not, nothing else can reach a mark the running one waits for.
    pub fn others_running(&self) -> bool {
        self.sched.as_ref().is_some_and(|s| s.others_active())
    }

    /// Advances the clock to `until` with nothing to run, in steps that end at each daemon's
    /// wake time and each sample, so the page daemon runs (its 5 s aging, seed 000 5.1) and the
    /// series is sampled while every process sleeps. Each step is one event.
    pub fn idle_to(&mut self, until: u64) -> Result<()> {
        loop {
            let now = self.clock();
            if now >= until {
                return Ok(());
            }
            let wake = self.daemons.iter().map(|d| d.1).min().unwrap_or(u64::MAX);
            // Accesses after a batch's last event may have run the clock past the sample due
            // (`after_event` samples at the next event): this step's end takes it.
            let step = until
                .min(self.next_sample.max(now + 1))
                .min(wake.max(now + 1));
            self.os.hw.core.serial(step - now, cause::IDLE);
            self.idle_cycles += step - now;
            let s = self.sched.take();
            let r = self.after_event();
            self.sched = s;
            r?;
        }
    }

    /// A machine for nothing to run on: the same machine shrunk to its largest page, no
    /// checks. The concurrent scheduler (workload/compose.rs) parks one in a suspended process's
    /// place while the real engine runs another.
    pub fn placeholder(&self) -> Engine {
        let mut m = self.os.machine.clone();
        m.mem_bytes = 1u64 << m.page_shifts.last().copied().unwrap_or(m.base_shift());
        m.storage.swap_bytes = 0;
        let mut p = self.os.policy.clone();
        p.pagedaemon = false;
        Engine::new(m, p, CheckMode::Off, None)
    }

    /// The `--check` of one event (see `CheckMode`).
    fn check_event(&mut self) -> Result<()> {
        let r = match self.check {
            CheckMode::Off => return Ok(()),
            CheckMode::Full => self.full_check(),
            CheckMode::Incremental => {
                let frames = self.os.phys.buddy.take_touched();
                // Pages a fault mapped around the faulting one (vm/faultaround.rs).
                self.touched
                    .ranges
                    .append(&mut self.os.stats.around.touched);
                let r = if self.touched.everything || self.events.is_multiple_of(FULL_CHECK_EVERY) {
                    self.full_check()
                } else {
                    self.os.check_touched(&self.touched, &frames)
                };
                self.touched.clear();
                r
            }
        };
        r.map_err(|e| match e {
            crate::SimError::Invariant(m) => {
                crate::SimError::Invariant(format!("after event {}: {m}", self.events))
            }
            e => e,
        })
    }

    fn full_check(&mut self) -> Result<()> {
        self.full_checks += 1;
        self.os.check_invariants()
    }

    /// The check at the end of a run: every invariant, whatever the mode (none when off).
    pub fn final_check(&mut self) -> Result<()> {
        if self.check == CheckMode::Off {
            return Ok(());
        }
        self.full_check()
    }

    /// Records that the current event touched `[start, end)` of `pid` (incremental check).
    #[inline]
    fn touch(&mut self, pid: Pid, start: u64, end: u64) {
        if self.check == CheckMode::Incremental {
            self.touched.ranges.push((pid, start, end.max(start)));
        }
    }

    /// Records that the current event may have changed anything (fork).
    fn touch_everything(&mut self) {
        self.touched.everything = true;
    }

    /// The final sample and peaks; call once when the workload is done.
    pub fn finish(&mut self) {
        self.os.note_peaks();
        self.charge_kernel();
        let now = self.clock();
        self.sample(now);
    }

    /// Queues recorded frames for the next base-page allocations (vm/placement.rs): a native
    /// run's placement, read from /proc/self/pagemap, so that the model's pages lie where the
    /// real kernel put them. Returns how many were queued.
    pub fn place_frames(&mut self, pfns: impl IntoIterator<Item = u64>) -> usize {
        self.os.place_frames(pfns)
    }

    // ---- the event stream ----

    /// A new process (its u-area wired, vm/kmem.rs).
    pub fn spawn(&mut self) -> Result<Pid> {
        let pid = self.os.spawn()?;
        self.after_event()?;
        Ok(pid)
    }

    pub fn mmap(&mut self, pid: Pid, req: MmapReq) -> Result<u64> {
        let len = req.len;
        let r = self.os.mmap(pid, req)?;
        self.touch(pid, r, r.saturating_add(len));
        self.after_event()?;
        Ok(r)
    }

    pub fn munmap(&mut self, pid: Pid, addr: u64, len: u64) -> Result<()> {
        self.os.munmap(pid, addr, len)?;
        self.touch(pid, addr, addr.saturating_add(len));
        self.after_event()
    }

    /// mremap (see `Os::mremap`); returns the mapping's new address.
    pub fn mremap(
        &mut self,
        pid: Pid,
        old_addr: u64,
        old_len: u64,
        new_addr: u64,
        new_len: u64,
    ) -> Result<u64> {
        let r = self.os.mremap(pid, old_addr, old_len, new_addr, new_len)?;
        self.touch(pid, old_addr, old_addr.saturating_add(old_len));
        self.touch(pid, r, r.saturating_add(new_len));
        self.after_event()?;
        Ok(r)
    }

    pub fn mprotect(&mut self, pid: Pid, addr: u64, len: u64, prot: Prot) -> Result<()> {
        self.os.mprotect(pid, addr, len, prot)?;
        self.touch(pid, addr, addr.saturating_add(len));
        self.after_event()
    }

    pub fn madvise(&mut self, pid: Pid, addr: u64, len: u64, advice: Advice) -> Result<()> {
        self.os.madvise(pid, addr, len, advice)?;
        self.touch(pid, addr, addr.saturating_add(len));
        self.after_event()
    }

    /// `prctl(PR_SET_THP_DISABLE, disable)` (vm/thp.rs).
    pub fn prctl_thp_disable(&mut self, pid: Pid, disable: bool) -> Result<()> {
        self.os.set_thp_disable(pid, disable)?;
        self.after_event()
    }

    pub fn brk(&mut self, pid: Pid, new_end: u64) -> Result<u64> {
        let old_end = self.os.proc(pid)?.brk_end;
        let r = self.os.brk(pid, new_end)?;
        self.touch(pid, old_end.min(r), old_end.max(r));
        self.after_event()?;
        Ok(r)
    }

    /// The current program break of `pid`.
    pub fn current_brk(&self, pid: Pid) -> Result<u64> {
        Ok(self.os.proc(pid)?.brk_end)
    }

    pub fn fork(&mut self, pid: Pid) -> Result<Pid> {
        let c = self.os.fork(pid)?;
        self.os.files_fork(pid, c);
        self.touch_everything();
        self.after_event()?;
        Ok(c)
    }

    pub fn exec(&mut self, pid: Pid) -> Result<()> {
        self.os.exec(pid)?;
        self.touch(pid, 0, u64::MAX);
        self.after_event()
    }

    pub fn exit(&mut self, pid: Pid) -> Result<()> {
        self.os.files_exit(pid);
        self.os.exit(pid)?;
        self.touch(pid, 0, u64::MAX);
        self.after_event()
    }

    /// msync(MS_SYNC) of `[addr, addr + len)` by `pid` (`Os::msync`, vm/dirty.rs): the dirty
    /// pages of its shared file mappings are written, the caller waiting (one event).
    pub fn msync(&mut self, pid: Pid, addr: u64, len: u64) -> Result<()> {
        self.os.msync(pid, addr, len)?;
        // Dirty bits are cleared in every process mapping the files.
        self.touch_everything();
        self.after_event()
    }

    pub fn open_file(&mut self, file: u32, size: u64) -> Result<()> {
        self.os.open_file(file, size);
        self.after_event()
    }

    // ---- files (vm/file.rs) ----

    /// open(): `pid` opens `file`, created with `size` bytes if it is new (one event).
    pub fn open(&mut self, pid: Pid, file: u32, size: u64) -> Result<()> {
        self.os.file_open(pid, file, size)?;
        self.after_event()
    }

    /// close(): one open of `file` by `pid` ends (one event).
    pub fn close(&mut self, pid: Pid, file: u32) -> Result<()> {
        self.os.file_close(pid, file)?;
        self.after_event()
    }

    /// read(): `len` bytes of `file` from `offset` into the buffer at `buf_va` of `pid`;
    /// returns the bytes read (fewer at the end of the file). The kernel's copy-out stores to
    /// each line of the buffer (an access per line, as the process's).
    pub fn read(&mut self, pid: Pid, file: u32, offset: u64, len: u64, buf_va: u64) -> Result<u64> {
        let n = self.os.file_read(pid, file, offset, len)?;
        self.after_event()?;
        self.touch_buffer(pid, buf_va, n, MemOp::Store)?;
        Ok(n)
    }

    /// write(): `len` bytes from the buffer at `buf_va` of `pid` to `file` at `offset` (the
    /// kernel's copy-in loads each line of the buffer first).
    pub fn write(&mut self, pid: Pid, file: u32, offset: u64, len: u64, buf_va: u64) -> Result<()> {
        self.touch_buffer(pid, buf_va, len, MemOp::Load)?;
        self.os.file_write(pid, file, offset, len)?;
        self.after_event()
    }

    /// fsync(): writes `file`'s dirty cached pages and waits; returns the pages written.
    pub fn fsync(&mut self, pid: Pid, file: u32) -> Result<u64> {
        let n = self.os.file_fsync(pid, file)?;
        self.after_event()?;
        Ok(n)
    }

    /// A write of `len` bytes from the buffer at `buf_va` to a socket (or pipe): the kernel
    /// copies them out of the buffer (loads of each line, then the copy's cost).
    pub fn send(&mut self, pid: Pid, buf_va: u64, len: u64) -> Result<()> {
        self.touch_buffer(pid, buf_va, len, MemOp::Load)?;
        self.os.socket_send(len);
        self.after_event()
    }

    /// One access per cache line of `[va, va + len)`: a kernel copy's use of a user buffer.
    fn touch_buffer(&mut self, pid: Pid, va: u64, len: u64, op: MemOp) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let line = 1u64 << crate::hw::cache::LINE_SHIFT;
        let first = va & !(line - 1);
        let end = va.checked_add(len).ok_or_else(|| {
            crate::SimError::InvalidEvent(format!(
                "buffer at {va:#x} of {len} bytes wraps the address space"
            ))
        })?;
        let lines = (end - first).div_ceil(line);
        self.access_run(pid, first, line as i64, lines, op, 1)
    }

    /// One independent access with one instruction (one event).
    pub fn access(&mut self, pid: Pid, va: u64, kind: AccessKind) -> Result<()> {
        self.os.access(pid, va, kind)?;
        self.touch(pid, va, va.saturating_add(1));
        self.after_event()
    }

    /// One access (one event).
    pub fn access_op(&mut self, pid: Pid, a: Access) -> Result<()> {
        self.os.access_op(pid, a)?;
        self.touch(pid, a.va, a.va.saturating_add(1));
        self.after_event()
    }

    /// `count` independent accesses from `va` with a byte `stride`, `ipa` instructions each: a
    /// sequential run, its lines streamed by the prefetcher (one event). Long runs are cut into
    /// pieces of 2^20 accesses so that progress and samples advance.
    pub fn access_run(
        &mut self,
        pid: Pid,
        va: u64,
        stride: i64,
        count: u64,
        op: MemOp,
        ipa: u16,
    ) -> Result<()> {
        const PIECE: u64 = 1 << 20;
        let mut va = va;
        let mut left = count;
        while left > 0 {
            let n = left.min(PIECE);
            self.os.access_run(pid, va, stride, n, op, ipa)?;
            let last = va.wrapping_add((stride as u64).wrapping_mul(n - 1));
            self.touch(pid, va.min(last), va.max(last).saturating_add(1));
            self.after_event()?;
            va = va.wrapping_add((stride as u64).wrapping_mul(n));
            left -= n;
        }
        Ok(())
    }

    /// A batch of accesses (one event).
    pub fn accesses(&mut self, pid: Pid, batch: &[Access]) -> Result<()> {
        self.os.accesses(pid, batch)?;
        if self.check == CheckMode::Incremental {
            for a in batch {
                self.touch(pid, a.va, a.va.saturating_add(1));
            }
        }
        self.after_event()
    }

    /// Time spent computing without touching memory: `cycles` of instructions dispatched
    /// while earlier misses complete.
    pub fn compute(&mut self, _pid: Pid, cycles: u64) -> Result<()> {
        self.compute_cycles += cycles;
        self.os.hw.core.compute(cycles);
        self.after_event()
    }
}
