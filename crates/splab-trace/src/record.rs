//! `record`: runs a program under Valgrind and writes its trace on the fly.
//!
//! Who calls it: the CLI's `splab record -o FILE -- CMD ARGS...`, tests, the benchmark.
//!
//! Two backends. `Tool` (the default when it was built): splab's own Valgrind tool
//! (valgrind/sp_tool.c, embedded in this crate by build.rs) writes binary chunks to a pipe; this
//! module converts them into the trace format while the program runs. `Lackey`: Valgrind's
//! example tool printing every access as text (`--trace-mem=yes --trace-syscalls=yes`), ~20x
//! slower, without file names or the initial address space (regions are then inferred from the
//! addresses, as for ChampSim), and without dependences (`dep` is 0; `ipa` is exact: lackey
//! prints every instruction); it is parsed after the program ends.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::TraceError;
use crate::event::*;
use crate::format::TraceHeader;
use crate::infer::{RegionInference, DEFAULT_CHUNK};
use crate::writer::TraceWriter;

/// Which Valgrind tool records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// splab's tool when it was built, lackey otherwise.
    Auto,
    /// splab's own tool (fast).
    Tool,
    /// Valgrind's lackey (slow fallback).
    Lackey,
}

/// Options of [`record`]; `Default` is what `splab record` uses.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    pub backend: Backend,
    /// Record instruction fetches too (one `Ifetch` per instruction; ~3x more events).
    pub ifetch: bool,
    /// Without `ifetch`: record one `Ifetch` per code page, the first time a process runs code
    /// from it (splab's tool only; lackey records no instructions without `ifetch`), so that a
    /// replay maps and faults the program's text. valgrind/sp_tool.c, "code pages".
    pub code_pages: bool,
    /// Record no access before the program's first `SPLAB_START()` (valgrind/splab.h; splab's
    /// tool only). Without it the recording of accesses starts on, and `SPLAB_STOP()` /
    /// `SPLAB_START()` turn it off and on.
    pub roi: bool,
    /// Leave out the first N accesses recorded (after the region's gating, across all processes
    /// in trace order); address-space events are kept.
    pub start_after: u64,
    /// Keep at most N accesses (after `start_after`); the program still runs to its end and its
    /// address-space events are kept. `Some(0)` is refused.
    pub max_accesses: Option<u64>,
    /// The `valgrind` launcher to run.
    pub valgrind: PathBuf,
    /// zstd level of the trace's blocks.
    pub zstd_level: i32,
    /// How often `progress` is called.
    pub progress_every: Duration,
    /// More arguments for valgrind, before the program (e.g. `--fair-sched=yes`).
    pub valgrind_args: Vec<String>,
    /// Where to put the tool's folder (default: the system's temporary folder).
    pub tool_dir: Option<PathBuf>,
}

impl Default for RecordOptions {
    fn default() -> Self {
        RecordOptions {
            backend: Backend::Auto,
            ifetch: false,
            code_pages: true,
            roi: false,
            start_after: 0,
            max_accesses: None,
            valgrind: PathBuf::from("valgrind"),
            // Level 2, not the writer's default 3: the converter, not Valgrind, bounds the capture
            // rate, and level 2 is ~35% faster for ~7% more bytes (docs/trace-format.md).
            zstd_level: 2,
            progress_every: Duration::from_millis(500),
            valgrind_args: Vec::new(),
            tool_dir: None,
        }
    }
}

/// Where a recording stands; passed to the progress callback.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    pub elapsed: Duration,
    pub processes: usize,
    pub events: u64,
    pub accesses: u64,
    /// Bytes of trace written so far.
    pub bytes: u64,
}

impl Progress {
    /// One line for a terminal, e.g. `12.0 s  2 proc  340.1M accesses (28.3M/s)  210.4 MB`.
    pub fn line(&self) -> String {
        let s = self.elapsed.as_secs_f64().max(1e-9);
        format!(
            "{:.1} s  {} proc  {:.1}M accesses ({:.1}M/s)  {:.1} MB",
            s,
            self.processes,
            self.accesses as f64 / 1e6,
            self.accesses as f64 / 1e6 / s,
            self.bytes as f64 / 1e6
        )
    }
}

/// What [`record`] did.
#[derive(Clone, Debug)]
pub struct RecordSummary {
    pub backend: Backend,
    pub processes: usize,
    pub events: u64,
    pub accesses: u64,
    /// The trace file's size.
    pub bytes: u64,
    pub wall: Duration,
    /// The program's exit code (None if killed by a signal).
    pub exit_code: Option<i32>,
    /// How the program ended, as a shell would say it.
    pub status: ProgramStatus,
    /// `brk` calls Valgrind refused (its 8 MiB heap cap, see valgrind/sp_tool.c) that a native
    /// kernel would have granted: when not 0, the recorded heap is not the native one.
    pub brk_refused: u64,
    /// Of the mappings glibc's malloc made instead, those marked `MmapFlags::MORECORE` (a
    /// replay puts them back on the heap). Less than `brk_refused`: some refused growth has no
    /// marked replacement, and the replayed heap cannot be the native one.
    pub morecore_mmaps: u64,
}

/// How a recorded program (valgrind, which exits as its client does) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgramStatus {
    Exited(i32),
    /// Killed by this signal.
    Signaled(i32),
}

impl ProgramStatus {
    pub fn from_exit(s: std::process::ExitStatus) -> ProgramStatus {
        use std::os::unix::process::ExitStatusExt;
        match (s.code(), s.signal()) {
            (Some(c), _) => ProgramStatus::Exited(c),
            (None, Some(sig)) => ProgramStatus::Signaled(sig),
            (None, None) => ProgramStatus::Exited(1),
        }
    }

    pub fn success(self) -> bool {
        self == ProgramStatus::Exited(0)
    }

    /// The status a shell reports for it: the exit code, or 128 + the signal number.
    pub fn shell_code(self) -> u8 {
        match self {
            ProgramStatus::Exited(c) => c as u8,
            ProgramStatus::Signaled(s) => 128u8.wrapping_add(s as u8),
        }
    }
}

impl std::fmt::Display for ProgramStatus {
    /// "exit status 127 (command not found)", "killed by signal 9 (SIGKILL)".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            ProgramStatus::Exited(c) => {
                write!(f, "exit status {c}")?;
                // The shell's conventions, which valgrind follows when it cannot start the program.
                match c {
                    126 => write!(f, " (not executable)"),
                    127 => write!(f, " (command not found)"),
                    _ => Ok(()),
                }
            }
            ProgramStatus::Signaled(s) => {
                let name = match s {
                    libc::SIGHUP => "SIGHUP",
                    libc::SIGINT => "SIGINT",
                    libc::SIGQUIT => "SIGQUIT",
                    libc::SIGILL => "SIGILL",
                    libc::SIGABRT => "SIGABRT",
                    libc::SIGBUS => "SIGBUS",
                    libc::SIGFPE => "SIGFPE",
                    libc::SIGKILL => "SIGKILL",
                    libc::SIGSEGV => "SIGSEGV",
                    libc::SIGPIPE => "SIGPIPE",
                    libc::SIGTERM => "SIGTERM",
                    _ => "",
                };
                if name.is_empty() {
                    write!(f, "killed by signal {s}")
                } else {
                    write!(f, "killed by signal {s} ({name})")
                }
            }
        }
    }
}

impl RecordSummary {
    pub fn bytes_per_access(&self) -> f64 {
        self.bytes as f64 / self.accesses.max(1) as f64
    }
    /// Accesses of the traced program recorded per second of wall time.
    pub fn accesses_per_second(&self) -> f64 {
        self.accesses as f64 / self.wall.as_secs_f64().max(1e-9)
    }
}

impl std::fmt::Display for RecordSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} processes, {} events, {} accesses in {:.2} s ({:.1}M accesses/s, {:?}); {} bytes, {:.3} bytes/access",
            self.processes,
            self.events,
            self.accesses,
            self.wall.as_secs_f64(),
            self.accesses_per_second() / 1e6,
            self.backend,
            self.bytes,
            self.bytes_per_access()
        )?;
        if !self.status.success() {
            write!(f, "; the program ended with {}", self.status)?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("no command to record: give one after `--`, e.g. `splab record -o ls.spt -- ls -l`")]
    NoCommand,
    #[error(
        "valgrind is not installed (could not run `{0}`): install it with `apt-get install valgrind` \
         (Debian, Ubuntu), `dnf install valgrind` (Fedora) or your system's package manager"
    )]
    ValgrindMissing(String),
    #[error(
        "splab's Valgrind tool was not built: Valgrind's tool headers and static libraries were \
         missing when splab was compiled. Install them (`apt-get install valgrind`) and rebuild, \
         or record with the lackey backend (about 20x slower)"
    )]
    ToolNotBuilt,
    #[error("cannot find Valgrind's library folder (the one holding memcheck-amd64-linux); set VALGRIND_LIB to it")]
    NoValgrindLib,
    /// The trace file cannot be created (checked before the program starts).
    #[error("{0}")]
    Output(std::io::Error),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error("the capture stream from the Valgrind tool is corrupt at byte {offset}: {msg}")]
    Wire { offset: u64, msg: String },
    #[error("valgrind stopped before recording anything ({0}); its messages are above")]
    ValgrindFailed(ProgramStatus),
    /// Options that cannot go together or a value out of range.
    #[error("{0}")]
    BadOption(String),
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> RecordError {
    let what = what.into();
    move |source| RecordError::Io { what, source }
}

/// True when splab's own Valgrind tool was built into this crate.
pub const fn tool_available() -> bool {
    cfg!(splab_vgtool)
}

#[cfg(splab_vgtool)]
static TOOL_BIN: &[u8] = include_bytes!(env!("SPLAB_VGTOOL_BIN"));
#[cfg(not(splab_vgtool))]
static TOOL_BIN: &[u8] = &[];

/// Valgrind's library folder (tools, preloads, suppressions).
fn valgrind_lib() -> Option<PathBuf> {
    let mut c: Vec<PathBuf> = Vec::new();
    if let Some(v) = std::env::var_os("VALGRIND_LIB") {
        c.push(v.into());
    }
    for d in [
        "/usr/libexec/valgrind",
        "/usr/lib/x86_64-linux-gnu/valgrind",
        "/usr/lib/valgrind",
        "/usr/local/libexec/valgrind",
        "/usr/local/lib/valgrind",
        "/usr/lib64/valgrind",
    ] {
        c.push(d.into());
    }
    c.into_iter()
        .find(|d| d.join("memcheck-amd64-linux").exists())
}

/// Writes the embedded tool into a folder next to links to every file of Valgrind's library
/// folder (Valgrind looks for `--tool=splab` as `$VALGRIND_LIB/splab-amd64-linux`). The folder
/// is named after the tool's checksum and reused; it is built under a temporary name and
/// renamed, so concurrent recorders never see it half made.
fn tool_folder(opts: &RecordOptions) -> Result<PathBuf, RecordError> {
    if TOOL_BIN.is_empty() {
        return Err(RecordError::ToolNotBuilt);
    }
    let lib = valgrind_lib().ok_or(RecordError::NoValgrindLib)?;
    let mut h = crc32fast::Hasher::new();
    h.update(TOOL_BIN);
    h.update(lib.as_os_str().as_encoded_bytes());
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let base = opts.tool_dir.clone().unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!("splab-vgtool-{uid}-{:08x}", h.finalize()));
    let bin = dir.join("splab-amd64-linux");
    if std::fs::metadata(&bin).is_ok_and(|m| m.len() == TOOL_BIN.len() as u64) {
        return Ok(dir);
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = base.join(format!(".splab-vgtool-tmp-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(io_err(format!("creating {}", tmp.display())))?;
    let build = || -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let t = tmp.join("splab-amd64-linux");
        std::fs::write(&t, TOOL_BIN)?;
        std::fs::set_permissions(&t, std::fs::Permissions::from_mode(0o755))?;
        for e in std::fs::read_dir(&lib)? {
            let e = e?;
            if e.file_name() == "splab-amd64-linux" {
                continue;
            }
            std::os::unix::fs::symlink(e.path(), tmp.join(e.file_name()))?;
        }
        Ok(())
    };
    if let Err(e) = build() {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(RecordError::Io {
            what: format!("preparing the Valgrind tool in {}", tmp.display()),
            source: e,
        });
    }
    if std::fs::rename(&tmp, &dir).is_err() {
        // Someone else made it first (or a stale one is there): use theirs if complete.
        let _ = std::fs::remove_dir_all(&tmp);
        if !std::fs::metadata(&bin).is_ok_and(|m| m.len() == TOOL_BIN.len() as u64) {
            let _ = std::fs::remove_dir_all(&dir);
            return tool_folder(opts);
        }
    }
    Ok(dir)
}

fn check_valgrind(opts: &RecordOptions) -> Result<(), RecordError> {
    match Command::new(&opts.valgrind)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => Ok(()),
        _ => Err(RecordError::ValgrindMissing(
            opts.valgrind.display().to_string(),
        )),
    }
}

/// Runs `cmd` under Valgrind, children followed, and writes its trace to `out`.
///
/// Contract: `cmd[0]` is the program (looked up in PATH), the rest its arguments; the program
/// keeps this process's stdin, stdout and stderr. `progress` is called about every
/// `opts.progress_every` while the program runs (tool backend) and once at the end. The trace is
/// complete (trailer written) when this returns Ok, whatever the program's exit status (which
/// is in the summary). Processes still alive when the last pipe writer closes get an `Exit`.
pub fn record(
    opts: &RecordOptions,
    cmd: &[String],
    out: &Path,
    mut progress: impl FnMut(&Progress),
) -> Result<RecordSummary, RecordError> {
    if cmd.is_empty() {
        return Err(RecordError::NoCommand);
    }
    if opts.max_accesses == Some(0) {
        return Err(RecordError::BadOption(
            "--max-accesses 0 would record no access: give at least 1 (or leave it out to \
             record them all)"
                .into(),
        ));
    }
    check_valgrind(opts)?;
    let backend = match opts.backend {
        Backend::Auto if tool_available() => Backend::Tool,
        Backend::Auto => Backend::Lackey,
        b => b,
    };
    if backend == Backend::Lackey && (opts.start_after > 0 || opts.max_accesses.is_some()) {
        return Err(RecordError::BadOption(
            "--start-after and --max-accesses need splab's own Valgrind tool, not lackey".into(),
        ));
    }
    if opts.roi && backend == Backend::Lackey {
        return Err(RecordError::BadOption(
            "--roi needs splab's own Valgrind tool (SPLAB_START/SPLAB_STOP are its client \
             requests); lackey cannot record a region"
                .into(),
        ));
    }
    // Written under a temporary name and renamed at the end: a recording that fails leaves no
    // partial trace (and keeps an older file of that name).
    let (file, guard) = crate::atomic::AtomicOutput::create(out).map_err(RecordError::Output)?;
    let header = TraceHeader {
        page_size_hint: 4096,
        source: match backend {
            Backend::Lackey => "valgrind-lackey".into(),
            _ => "valgrind-splab".into(),
        },
        command: cmd.join(" "),
        processes: Vec::new(),
    };
    let w = TraceWriter::new(
        BufWriter::with_capacity(1 << 20, file),
        &header,
        opts.zstd_level,
    )?;
    let summary = match backend {
        Backend::Lackey => record_lackey(opts, cmd, w, &mut progress),
        _ => record_tool(opts, cmd, w, &mut progress),
    }?;
    guard
        .commit()
        .map_err(io_err(format!("writing {}", out.display())))?;
    Ok(summary)
}

// ---------------------------------------------------------------------------------------------
// the tool backend

/// The tool's wire format (valgrind/sp_tool.c has the producer; docs/trace-format.md "Capture
/// wire" the description).
mod wire {
    pub const MAGIC: u32 = 0x3243_5053; // "SPC2"
    pub const CHUNK_HDR: usize = 16;
    pub const MAX_CHUNK: usize = 4096;
    /// An access word: 1:1 | run:1 | kind:2 | size code:3 | ipa:5 | dep:5 | addr:47.
    pub const ACCESS: u64 = 1 << 63;
    pub const RUN: u64 = 1 << 62;
    /// An ipa or dep field of 31: the value is the last DI word's.
    pub const ESC: u64 = 31;
    /// A DI word: tag:8 | dep:16 << 16 | ipa:16.
    pub const TAG_DI: u64 = 0x0f;
    /// What the DI values are before a chunk's first DI word.
    pub const DI_INITIAL: (u16, u16) = (0, 1);
    pub const TAG_MMAP: u64 = 0x10;
    pub const TAG_MUNMAP: u64 = 0x11;
    pub const TAG_MREMAP: u64 = 0x12;
    pub const TAG_MPROTECT: u64 = 0x13;
    pub const TAG_MADVISE: u64 = 0x14;
    pub const TAG_BRK: u64 = 0x15;
    /// a = parent pid; then the clone flags (an older tool sends none: a fork).
    pub const TAG_FORK: u64 = 0x16;
    /// Linux's CLONE_VM (include/uapi/linux/sched.h).
    pub const CLONE_VM: u64 = 0x100;
    pub const TAG_HELLO: u64 = 0x17;
    pub const TAG_EXIT: u64 = 0x18;
    pub const TAG_FILENAME: u64 = 0x19;
    pub const TAG_HEAPSTART: u64 = 0x1a;
    pub const TAG_STACK: u64 = 0x1b;
    pub const TAG_ACCESS_LONG: u64 = 0x1c;
    /// a = the break the program asked for; the break Valgrind left.
    pub const TAG_BRK_REFUSED: u64 = 0x1d;
    /// a = the address of the mapping in the next TAG_MMAP, which is glibc's mmap fallback
    /// for the refused brk before it (valgrind/sp_tool.c, `brk_refused_tid`).
    pub const TAG_MORECORE: u64 = 0x30;
}

/// `start_after` / `max_accesses`: which of the recorded accesses are written.
///
/// Counts every access the tool sends, in trace order, but the code-page fetches (recording
/// without `ifetch`: one `Ifetch` per code page, valgrind/sp_tool.c "code pages"), which are
/// kept wherever they fall, like address-space events, and count toward neither limit: a code
/// page first run before the window must still be mapped and faulted in the window.
struct Window {
    /// Accesses still to leave out.
    skip: u64,
    /// Accesses still to keep.
    left: u64,
    /// Ifetch accesses are code-page fetches (recording without `ifetch`).
    code_pages: bool,
    /// Accesses kept per pid since the window opened (the skip done), up to DEP_CAP + 1: a
    /// kept access whose dep reaches further back than that depended on a load that was left
    /// out (its dep becomes 0). Within the window nothing is left out, so the tool's distances
    /// hold there.
    kept: HashMap<u32, u64>,
}

impl Window {
    const DEP_CAP: u64 = 1023;

    fn all(code_pages: bool) -> Window {
        Window {
            skip: 0,
            left: u64::MAX,
            code_pages,
            kept: HashMap::new(),
        }
    }

    /// Of `count` accesses, how many to leave out first and how many to keep after them.
    #[inline]
    fn admit(&mut self, kind: AccessKind, count: u64) -> (u64, u64) {
        if self.code_pages && kind == AccessKind::Ifetch {
            return (0, count);
        }
        let skip = self.skip.min(count);
        self.skip -= skip;
        let keep = self.left.min(count - skip);
        if self.left != u64::MAX {
            self.left -= keep;
        }
        (skip, keep)
    }

    /// The dep of a kept access of `pid` (0 when its load was left out), noting `count` kept.
    fn dep(&mut self, pid: u32, dep: u16, count: u64) -> u16 {
        if self.skip > 0 {
            // Still skipping: a code-page fetch (dep 0), kept before the window opens.
            return dep;
        }
        let k = self.kept.entry(pid).or_insert(0);
        let d = if dep as u64 > *k { 0 } else { dep };
        *k = (*k + count).min(Self::DEP_CAP + 1);
        d
    }

    /// Nothing left out so far, nothing will be: the common case, with no bookkeeping.
    fn is_everything(&self) -> bool {
        self.skip == 0 && self.left == u64::MAX && self.kept.is_empty()
    }
}

/// Turns the tool's chunks into trace events.
struct Converter<W: std::io::Write> {
    w: TraceWriter<W>,
    window: Window,
    /// pid -> still running
    live: HashMap<u32, bool>,
    files: HashMap<(u64, u64), FileId>,
    names: HashMap<(u64, u64), (u64, String)>,
    offset: u64,
    /// pid -> address of its next mapping to mark `MORECORE` (the tool's TAG_MORECORE, sent
    /// just before that mapping's TAG_MMAP; other processes' chunks may come between).
    morecore: HashMap<u32, u64>,
}

impl<W: std::io::Write> Converter<W> {
    fn bad(&self, at: usize, msg: impl Into<String>) -> RecordError {
        RecordError::Wire {
            offset: self.offset + at as u64,
            msg: msg.into(),
        }
    }

    /// Writes `count` accesses at `va`, `va + stride`, ... that the window admits.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn access(
        &mut self,
        p: Pid,
        va: Vaddr,
        kind: AccessKind,
        size: u32,
        dep: u16,
        ipa: u16,
        stride: i64,
        count: u64,
    ) -> Result<(), RecordError> {
        if self.window.is_everything() {
            self.w
                .access_run_with(p, va, kind, size, dep, ipa, stride, count)?;
            return Ok(());
        }
        let (skip, keep) = self.window.admit(kind, count);
        if keep == 0 {
            return Ok(());
        }
        let dep = self.window.dep(p.0, dep, keep);
        let va = Vaddr(va.0.wrapping_add((stride as u64).wrapping_mul(skip)));
        // The first kept access of a cut run is not the run's first: it has no instructions of
        // its own beyond the run's (ipa as recorded), and keeps the run's dep.
        self.w
            .access_run_with(p, va, kind, size, dep, ipa, stride, keep)?;
        Ok(())
    }

    /// Converts one chunk's payload (records of 64-bit words).
    fn chunk(&mut self, pid: u32, words: &[u64]) -> Result<(), RecordError> {
        let p = Pid(pid);
        let (mut dep, mut ipa) = wire::DI_INITIAL;
        let mut i = 0;
        while i < words.len() {
            let w0 = words[i];
            if w0 & wire::ACCESS != 0 {
                let kind =
                    AccessKind::from_code(((w0 >> 60) & 3) as u8).unwrap_or(AccessKind::Read);
                let sc = (w0 >> 57) & 7;
                if sc == 7 {
                    return Err(self.bad(i * 8, "an access size code of at most 6"));
                }
                let (i5, d5) = ((w0 >> 52) & 31, (w0 >> 47) & 31);
                let a_ipa = if i5 == wire::ESC { ipa } else { i5 as u16 };
                let a_dep = if d5 == wire::ESC { dep } else { d5 as u16 };
                let va = Vaddr(w0 & ((1 << 47) - 1));
                if w0 & wire::RUN != 0 {
                    let Some(&w1) = words.get(i + 1) else {
                        return Err(self.bad(i * 8, "a run's second word"));
                    };
                    let stride = (w1 & 0xffff) as u16 as i16 as i64;
                    self.access(p, va, kind, 1 << sc, a_dep, a_ipa, stride, w1 >> 16)?;
                    i += 2;
                } else {
                    self.access(p, va, kind, 1 << sc, a_dep, a_ipa, 0, 1)?;
                    i += 1;
                }
                continue;
            }
            let tag = w0 >> 56;
            if tag == wire::TAG_DI {
                dep = (w0 >> 16) as u16;
                ipa = w0 as u16;
                i += 1;
                continue;
            }
            let n = (w0 & 0xffff_ffff) as usize;
            let Some(a) = words.get(i + 1..i + 1 + n) else {
                return Err(self.bad(i * 8, format!("{n} words of a record with tag {tag:#x}")));
            };
            i += 1 + n;
            let need = |k: usize| -> Result<(), RecordError> {
                if a.len() < k {
                    Err(RecordError::Wire {
                        offset: 0,
                        msg: format!("record {tag:#x} has {} words, expected {k}", a.len()),
                    })
                } else {
                    Ok(())
                }
            };
            match tag {
                wire::TAG_HELLO => {
                    if self.live.contains_key(&pid) {
                        self.w.write(&TraceEvent::Exec { pid: p })?;
                    }
                    self.live.insert(pid, true);
                }
                wire::TAG_FORK => {
                    need(1)?;
                    let parent = Pid(a[0] as u32);
                    // The clone flags the program asked for (Valgrind ran it as a fork
                    // either way, see sp_tool.c): CLONE_VM means the child shares the
                    // parent's memory until it execs or exits (vfork, posix_spawn).
                    let flags = a.get(1).copied().unwrap_or(0);
                    if flags & wire::CLONE_VM != 0 {
                        self.w.write(&TraceEvent::Vfork { parent, child: p })?;
                    } else {
                        self.w.write(&TraceEvent::Fork { parent, child: p })?;
                    }
                    self.live.insert(pid, true);
                }
                wire::TAG_EXIT => {
                    self.w.write(&TraceEvent::Exit { pid: p })?;
                    self.live.insert(pid, false);
                }
                wire::TAG_FILENAME => {
                    need(3)?;
                    let (dev, ino, size, len) =
                        (a[0], a[1], a[2], a.get(3).copied().unwrap_or(0) as usize);
                    let bytes: Vec<u8> = a[4.min(a.len())..]
                        .iter()
                        .flat_map(|w| w.to_le_bytes())
                        .take(len)
                        .collect();
                    self.names.insert(
                        (dev, ino),
                        (size, String::from_utf8_lossy(&bytes).into_owned()),
                    );
                }
                wire::TAG_MMAP => {
                    need(7)?;
                    let (addr, len, pf, off, dev, ino, fsize) =
                        (a[0], a[1], a[2], a[3], a[4], a[5], a[6]);
                    let has_file = dev != 0 || ino != 0;
                    let file = if has_file {
                        Some(self.file_id(dev, ino, fsize)?)
                    } else {
                        None
                    };
                    let mut flags = MmapFlags::from_linux(pf >> 32, has_file);
                    if self.morecore.get(&pid) == Some(&addr) {
                        self.morecore.remove(&pid);
                        flags = flags.union(MmapFlags::MORECORE);
                    }
                    self.w.write(&TraceEvent::Mmap {
                        pid: p,
                        addr: Vaddr(addr),
                        len,
                        prot: Prot((pf & 7) as u8),
                        flags,
                        file,
                        offset: if has_file { off } else { 0 },
                    })?;
                }
                wire::TAG_STACK => {
                    need(2)?;
                    self.w.write(&TraceEvent::Mmap {
                        pid: p,
                        addr: Vaddr(a[0]),
                        len: a[1].saturating_sub(a[0]),
                        prot: Prot::RW,
                        flags: MmapFlags::ANON
                            .union(MmapFlags::STACK)
                            .union(MmapFlags::GROWABLE),
                        file: None,
                        offset: 0,
                    })?;
                }
                wire::TAG_HEAPSTART | wire::TAG_BRK => {
                    need(1)?;
                    self.w.write(&TraceEvent::Brk {
                        pid: p,
                        new_end: Vaddr(a[0]),
                    })?;
                }
                wire::TAG_MUNMAP => {
                    need(2)?;
                    self.w.write(&TraceEvent::Munmap {
                        pid: p,
                        addr: Vaddr(a[0]),
                        len: a[1],
                    })?;
                }
                wire::TAG_MREMAP => {
                    need(4)?;
                    self.w.write(&TraceEvent::Mremap {
                        pid: p,
                        old_addr: Vaddr(a[0]),
                        old_len: a[1],
                        new_addr: Vaddr(a[2]),
                        new_len: a[3],
                    })?;
                }
                wire::TAG_MPROTECT => {
                    need(3)?;
                    self.w.write(&TraceEvent::Mprotect {
                        pid: p,
                        addr: Vaddr(a[0]),
                        len: a[1],
                        prot: Prot((a[2] & 7) as u8),
                    })?;
                }
                wire::TAG_MADVISE => {
                    need(3)?;
                    self.w.write(&TraceEvent::Madvise {
                        pid: p,
                        addr: Vaddr(a[0]),
                        len: a[1],
                        advice: Advice::from_linux(a[2]),
                    })?;
                }
                wire::TAG_BRK_REFUSED => {
                    self.w.note_brk_refused();
                }
                wire::TAG_MORECORE => {
                    need(1)?;
                    self.morecore.insert(pid, a[0]);
                }
                wire::TAG_ACCESS_LONG => {
                    need(3)?;
                    let kind = AccessKind::from_code((((a[2] >> 8) & 7) as u8).wrapping_sub(1))
                        .unwrap_or(AccessKind::Read);
                    let stride = (a[1] & 0xffff) as u16 as i16 as i64;
                    self.access(
                        p,
                        Vaddr(a[0]),
                        kind,
                        (a[2] & 0xff) as u32,
                        dep,
                        ipa,
                        stride,
                        a[1] >> 16,
                    )?;
                }
                _ => {} // unknown records are skipped (a newer tool)
            }
        }
        Ok(())
    }

    fn file_id(&mut self, dev: u64, ino: u64, size: u64) -> Result<FileId, RecordError> {
        if let Some(&id) = self.files.get(&(dev, ino)) {
            return Ok(id);
        }
        let id = FileId(self.files.len() as u32 + 1);
        self.files.insert((dev, ino), id);
        let (size, name) = match self.names.get(&(dev, ino)) {
            Some((s, n)) => (*s, Some(n.clone().into_boxed_str())),
            None => (size, None),
        };
        self.w.write(&TraceEvent::FileOpen {
            file: id,
            size,
            name,
        })?;
        Ok(id)
    }
}

fn record_tool<W: std::io::Write>(
    opts: &RecordOptions,
    cmd: &[String],
    w: TraceWriter<W>,
    progress: &mut dyn FnMut(&Progress),
) -> Result<RecordSummary, RecordError> {
    let dir = tool_folder(opts)?;
    let mut fds = [0i32; 2];
    // SAFETY: fds is a valid array of two ints; pipe2 fills it or fails.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io_err("creating the capture pipe")(
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: pipe2 succeeded: both descriptors are open and owned by nobody else.
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // A bigger pipe means fewer context switches between the tool and us (best effort).
    // SAFETY: fcntl on an fd we own.
    unsafe { libc::fcntl(rd.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
    let wfd = wr.as_raw_fd();
    let mut c = Command::new(&opts.valgrind);
    c.env("VALGRIND_LIB", &dir)
        .arg("--tool=splab")
        .arg("-q")
        .arg("--trace-children=yes")
        .arg(format!("--sp-fd={wfd}"))
        .arg(format!(
            "--sp-ifetch={}",
            if opts.ifetch { "yes" } else { "no" }
        ))
        .arg(format!(
            "--sp-code-pages={}",
            if opts.code_pages { "yes" } else { "no" }
        ))
        .arg(format!("--sp-roi={}", if opts.roi { "yes" } else { "no" }))
        .args(&opts.valgrind_args)
        .args(cmd);
    // SAFETY: runs in the forked child before exec; fcntl is async-signal-safe. The write end
    // is close-on-exec in this process (so that no other child inherits it) and inheritable
    // only in valgrind.
    unsafe {
        c.pre_exec(move || {
            if libc::fcntl(wfd, libc::F_SETFD, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let start = Instant::now();
    let mut child = c.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            RecordError::ValgrindMissing(opts.valgrind.display().to_string())
        }
        _ => RecordError::Io {
            what: format!("starting {}", opts.valgrind.display()),
            source: e,
        },
    })?;
    drop(wr);
    let mut pipe = File::from(rd);
    let mut conv = Converter {
        w,
        window: Window {
            skip: opts.start_after,
            left: opts.max_accesses.unwrap_or(u64::MAX),
            ..Window::all(opts.code_pages && !opts.ifetch)
        },
        live: HashMap::new(),
        files: HashMap::new(),
        names: HashMap::new(),
        offset: 0,
        morecore: HashMap::new(),
    };
    let mut buf = vec![0u8; 1 << 20];
    let mut have = 0usize;
    let mut words: Vec<u64> = Vec::with_capacity(wire::MAX_CHUNK / 8);
    let mut last_progress = Instant::now();
    let mut result = Ok(());
    loop {
        let n = match pipe.read(&mut buf[have..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                result = Err(io_err("reading the capture pipe")(e));
                break;
            }
        };
        have += n;
        let mut pos = 0;
        while have - pos >= wire::CHUNK_HDR {
            let h = &buf[pos..pos + wire::CHUNK_HDR];
            let magic = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
            let pid = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
            let len = u32::from_le_bytes([h[8], h[9], h[10], h[11]]) as usize;
            if magic != wire::MAGIC || !len.is_multiple_of(8) || len > wire::MAX_CHUNK {
                result = Err(RecordError::Wire {
                    offset: conv.offset,
                    msg: format!(
                        "a chunk header (magic SPC1, length <= 4080), found {magic:#x} / {len}"
                    ),
                });
                break;
            }
            if have - pos < wire::CHUNK_HDR + len {
                break;
            }
            words.clear();
            words.extend(
                buf[pos + wire::CHUNK_HDR..pos + wire::CHUNK_HDR + len]
                    .chunks_exact(8)
                    .map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])),
            );
            if let Err(e) = conv.chunk(pid, &words) {
                result = Err(e);
                break;
            }
            pos += wire::CHUNK_HDR + len;
            conv.offset += (wire::CHUNK_HDR + len) as u64;
        }
        if result.is_err() {
            break;
        }
        buf.copy_within(pos..have, 0);
        have -= pos;
        if last_progress.elapsed() >= opts.progress_every {
            last_progress = Instant::now();
            progress(&Progress {
                elapsed: start.elapsed(),
                processes: conv.w.processes(),
                events: conv.w.events(),
                accesses: conv.w.accesses(),
                bytes: conv.w.bytes_written(),
            });
        }
    }
    if result.is_err() {
        let _ = child.kill();
    }
    let status = child.wait().map_err(io_err("waiting for valgrind"))?;
    result?;
    if conv.live.is_empty() && conv.w.events() == 0 {
        return Err(RecordError::ValgrindFailed(ProgramStatus::from_exit(
            status,
        )));
    }
    finish(conv.w, conv.live, Backend::Tool, start, status, progress)
}

fn finish<W: std::io::Write>(
    mut w: TraceWriter<W>,
    live: HashMap<u32, bool>,
    backend: Backend,
    start: Instant,
    status: std::process::ExitStatus,
    progress: &mut dyn FnMut(&Progress),
) -> Result<RecordSummary, RecordError> {
    let mut still: Vec<u32> = live
        .into_iter()
        .filter(|&(_, l)| l)
        .map(|(p, _)| p)
        .collect();
    still.sort_unstable();
    for pid in still {
        w.write(&TraceEvent::Exit { pid: Pid(pid) })?;
    }
    let processes = w.processes();
    let fin = w.finish()?;
    let (t, bytes) = (fin.trailer, fin.file_bytes);
    let wall = start.elapsed();
    progress(&Progress {
        elapsed: wall,
        processes,
        events: t.events,
        accesses: t.accesses,
        bytes,
    });
    Ok(RecordSummary {
        backend,
        processes,
        events: t.events,
        accesses: t.accesses,
        bytes,
        wall,
        exit_code: status.code(),
        brk_refused: t.brk_refused,
        morecore_mmaps: t.morecore_mmaps,
        status: ProgramStatus::from_exit(status),
    })
}

// ---------------------------------------------------------------------------------------------
// the lackey backend

fn record_lackey<W: std::io::Write>(
    opts: &RecordOptions,
    cmd: &[String],
    mut w: TraceWriter<W>,
    progress: &mut dyn FnMut(&Progress),
) -> Result<RecordSummary, RecordError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let logs = std::env::temp_dir().join(format!("splab-lackey-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&logs).map_err(io_err(format!("creating {}", logs.display())))?;
    let start = Instant::now();
    let status = Command::new(&opts.valgrind)
        .arg("--tool=lackey")
        .arg("--trace-mem=yes")
        .arg("--trace-syscalls=yes")
        .arg("--trace-children=yes")
        .arg(format!("--log-file={}/lk.%p", logs.display()))
        .args(&opts.valgrind_args)
        .args(cmd)
        .status()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                RecordError::ValgrindMissing(opts.valgrind.display().to_string())
            }
            _ => RecordError::Io {
                what: format!("starting {}", opts.valgrind.display()),
                source: e,
            },
        })?;
    let res = convert_lackey_logs(&logs, opts.ifetch, &mut w);
    let _ = std::fs::remove_dir_all(&logs);
    let live = res?;
    if live.is_empty() && w.events() == 0 {
        return Err(RecordError::ValgrindFailed(ProgramStatus::from_exit(
            status,
        )));
    }
    finish(w, live, Backend::Lackey, start, status, progress)
}

/// Converts lackey's per-process logs: the first process's log, then its children's (each at
/// its fork's place in the process tree, after its parent's whole log).
fn convert_lackey_logs<W: std::io::Write>(
    dir: &Path,
    ifetch: bool,
    w: &mut TraceWriter<W>,
) -> Result<HashMap<u32, bool>, RecordError> {
    let mut pids: Vec<u32> = std::fs::read_dir(dir)
        .map_err(io_err(format!("reading {}", dir.display())))?
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_prefix("lk.")?
                .parse()
                .ok()
        })
        .collect();
    pids.sort_unstable();
    let mut live = HashMap::new();
    let mut infer = RegionInference::new(DEFAULT_CHUNK);
    let mut files: HashMap<(u32, u64), FileId> = HashMap::new();
    let mut queue: std::collections::VecDeque<u32> = pids.first().copied().into_iter().collect();
    let mut done = std::collections::HashSet::new();
    while let Some(pid) = queue.pop_front() {
        if !done.insert(pid) {
            continue;
        }
        let path = dir.join(format!("lk.{pid}"));
        let Ok(f) = File::open(&path) else { continue };
        live.insert(pid, true);
        let p = Pid(pid);
        // Instructions since the previous access (lackey prints an `I` line per instruction).
        let mut insns: u64 = 0;
        for line in BufReader::with_capacity(1 << 20, f).split(b'\n') {
            let line = line.map_err(io_err(format!("reading {}", path.display())))?;
            let line = line.as_slice();
            if line.len() > 3 && (line[0] == b' ' || line[0] == b'I') {
                let kind = match (line[0], line[1]) {
                    (b'I', _) if ifetch => {
                        insns += 1;
                        AccessKind::Ifetch
                    }
                    (b'I', _) => {
                        insns += 1;
                        continue;
                    }
                    (b' ', b'L') => AccessKind::Read,
                    (b' ', b'S') => AccessKind::Write,
                    (b' ', b'M') => AccessKind::Rmw,
                    _ => continue,
                };
                let Some((a, s)) = std::str::from_utf8(&line[3..])
                    .ok()
                    .and_then(|t| t.trim().split_once(','))
                else {
                    continue;
                };
                let (Ok(va), Ok(size)) = (u64::from_str_radix(a, 16), s.parse::<u32>()) else {
                    continue;
                };
                infer.before_access(w, p, va, size)?;
                let ipa = std::mem::take(&mut insns).min(IPA_CAP as u64) as u16;
                w.access_with(p, Vaddr(va), kind, size, 0, ipa)?;
                continue;
            }
            let Ok(text) = std::str::from_utf8(line) else {
                continue;
            };
            if let Some(rest) = text.find("created child ").map(|i| &text[i + 14..]) {
                if let Ok(child) = rest.trim().parse::<u32>() {
                    w.write(&TraceEvent::Fork {
                        parent: p,
                        child: Pid(child),
                    })?;
                    queue.push_back(child);
                }
                continue;
            }
            if !text.starts_with("SYSCALL[") {
                continue;
            }
            if let Some(ev) = parse_lackey_syscall(p, text, &mut files, w)? {
                match &ev {
                    TraceEvent::Mmap { addr, len, .. } => infer.note_mapping(p, addr.0, *len),
                    TraceEvent::Mremap {
                        new_addr, new_len, ..
                    } => infer.note_mapping(p, new_addr.0, *new_len),
                    _ => {}
                }
                w.write(&ev)?;
            }
        }
        w.write(&TraceEvent::Exit { pid: p })?;
        live.insert(pid, false);
    }
    Ok(live)
}

/// One `SYSCALL[pid,tid](nr) sys_name ( args ) --> ... Success(0xRES)` line of Valgrind's
/// `--trace-syscalls=yes`.
fn parse_lackey_syscall<W: std::io::Write>(
    p: Pid,
    text: &str,
    files: &mut HashMap<(u32, u64), FileId>,
    w: &mut TraceWriter<W>,
) -> Result<Option<TraceEvent>, RecordError> {
    let Some(res) = text
        .rfind("Success(0x")
        .map(|i| &text[i + 10..])
        .and_then(|r| r.split(')').next())
        .and_then(|r| u64::from_str_radix(r, 16).ok())
    else {
        return Ok(None);
    };
    let name = text.split_whitespace().nth(1).unwrap_or("");
    let args: Vec<u64> = match (text.find("( "), text.find(" )")) {
        (Some(a), Some(b)) if a < b => text[a + 2..b]
            .split(", ")
            .map(|x| {
                x.strip_prefix("0x").map_or_else(
                    || x.parse().unwrap_or(0),
                    |h| u64::from_str_radix(h, 16).unwrap_or(0),
                )
            })
            .collect(),
        _ => Vec::new(),
    };
    let arg = |i: usize| args.get(i).copied().unwrap_or(0);
    Ok(Some(match name {
        "sys_mmap" => {
            let fd = arg(4) as u32;
            let has_file = arg(3) & 0x20 == 0 && fd != u32::MAX;
            let file = if has_file {
                let next = FileId(files.len() as u32 + 1);
                let id = *files.entry((p.0, fd as u64)).or_insert(next);
                if id == next {
                    w.write(&TraceEvent::FileOpen {
                        file: id,
                        size: 0,
                        name: Some(format!("fd {fd} of pid {p}").into()),
                    })?;
                }
                Some(id)
            } else {
                None
            };
            TraceEvent::Mmap {
                pid: p,
                addr: Vaddr(res),
                len: arg(1),
                prot: Prot((arg(2) & 7) as u8),
                flags: MmapFlags::from_linux(arg(3), has_file),
                file,
                offset: if has_file { arg(5) } else { 0 },
            }
        }
        "sys_munmap" => TraceEvent::Munmap {
            pid: p,
            addr: Vaddr(arg(0)),
            len: arg(1),
        },
        "sys_mprotect" => TraceEvent::Mprotect {
            pid: p,
            addr: Vaddr(arg(0)),
            len: arg(1),
            prot: Prot((arg(2) & 7) as u8),
        },
        "sys_madvise" => TraceEvent::Madvise {
            pid: p,
            addr: Vaddr(arg(0)),
            len: arg(1),
            advice: Advice::from_linux(arg(2)),
        },
        "sys_brk" => TraceEvent::Brk {
            pid: p,
            new_end: Vaddr(res),
        },
        "sys_mremap" => TraceEvent::Mremap {
            pid: p,
            old_addr: Vaddr(arg(0)),
            old_len: arg(1),
            new_addr: Vaddr(res),
            new_len: arg(2),
        },
        _ => return Ok(None),
    }))
}
