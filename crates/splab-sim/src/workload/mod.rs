//! Workloads: synthetic generators of the papers' benchmarks and adversaries. They drive the
//! engine's event methods directly, in batches, and let the OS choose addresses.
//!
//! Names and parameters: `NAME:key=value,...`; sizes take K/M/G (binary), counts K/M/G (decimal).

mod chase;
pub mod compose;
mod fftw;
pub mod filedirty;
pub mod fragment;
mod gups;
pub mod jemalloc;
mod kv;
mod matrix;
mod scan;
mod seeker;
pub mod trace;
mod tree;
mod web;

use crate::engine::Engine;
use crate::error::Result;
use crate::rng::Rng;
use crate::spec::Spec;
use crate::units::{Access, MemOp, Pid};
use crate::vm::MmapReq;

/// A workload: a program whose memory events the engine replays.
pub trait Workload {
    /// The canonical spec, with every parameter (defaults included), for reports.
    fn describe(&self) -> String;
    /// Accesses it will make, if known in advance (for progress display).
    fn expected_accesses(&self) -> Option<u64>;
    /// Runs to completion.
    fn run(&mut self, e: &mut Engine, rng: &mut Rng) -> Result<()>;

    /// Anything the workload itself counted, for the report (`workload_stats`): e.g. what a
    /// trace replay could not follow. None by default.
    fn stats(&self) -> Option<serde_json::Value> {
        None
    }

    /// The memory it will use, if it declares it (`--frag` takes it as the workload's memory
    /// M). None by default.
    fn footprint_bytes(&self) -> Option<u64> {
        None
    }
}

/// Names accepted by `parse`, with their parameters, for `splab list` and error messages.
pub const WORKLOADS: &[(&str, &str)] = &[
    ("seq", "sequential scan: size=1G, op=read|write|rw (rw: read then write each element), elem=8"),
    ("stride", "strided scan: size=1G, stride=4K, op=read|write|rw"),
    ("sparse", "touch one byte every `step` bytes: size=1G, step=64K, op=write|read; all scans take rounds=N, unmap=true (map, scan, unmap; seed 000 6.6) and passes=N (scans per mapping)"),
    ("sparse-touch", "seed 003 observation 1: touch one byte every 2MB of a 30GB anonymous region (sparse with size=30G, step=2M; the same parameters)"),
    ("gups", "random 8-byte read-modify-write updates (HPCC RandomAccess): size=1G, updates=4 x words, form=hpcc|dis (12 or 56 instructions per update; ipa=N overrides)"),
    ("chase", "K interleaved dependent pointer chains, one line per hop, after a write pass that builds them: size=64M, chains=1, hops=lines"),
    ("matrix", "non-blocked transpose of an n x n matrix (seed 000 6.2): n=1000, elem=8, alloc=brk|mmap (both matrices from the brk heap, as FreeBSD 4's malloc, or one mmap each), init=true (fill the source first)"),
    (
        "trace",
        "replay a recorded trace (splab record, splab trace import-champsim): path=FILE, \
         skip=N (accesses not replayed), limit=N (accesses replayed), \
         heap=native (rebuild a heap Valgrind capped, the default) or recorded",
    ),
    ("filedirty", "seed 000 6.7: map a file shared, read every base page (promotion), write one base page in `every`, msync, exit: size=100M, every=512"),
    ("tree", "red-black tree of 50000 nodes with 128-byte records (seed 000 6.2): nodes=50000, ops=20000"),
    ("fftw", "out-of-place complex 3D FFT of an n x n x n array (seed 000 6.2): n=200, repeat=1, alloc=brk|mmap"),
    ("seeker", "map, touch and unmap `size` five times a second, sleeping between (seed 000 6.5): size=1M, rate=5, duration=60 (simulated seconds) or count=N; counts chunks satisfied with contiguous memory; in par(...): after=MARK starts once another component reached MARK, until=MARK stops once one has (web marks warm and served)"),
    ("seq(A,B,...)", "run workloads one after another on the same machine, each a fresh process (seed 000 6.5): seq(web,fftw,fftw); components keep their parameters: seq(gups:size=1M,updates=10,tree)"),
    ("par(A,B,...)", "run workloads concurrently, interleaved per event on the simulated clock, fairly (seed 000 6.5): par(web:warmup=100000,requests=100000,seeker:after=warm,until=served)"),
    ("web", "thttpd-like web server (seed 000 6.5): SPECweb96 file sizes, Zipf popularity; requests=50000, files=100000, zipf=0.75, maps=2000 (thttpd's map cache), mode=mmap|read; warmup=N requests first (marks warm, then served at the end; the latencies and the measured_* stats cover the rest, the other counts every request)"),
    ("kv", "Redis-like key-value server on a jemalloc 4.x arena (seed 003 6, Tables 1 and 10): phase=cold (insert) | warm (insert, then ops= GET/SET 5:5) | del:PCT (insert, then DEL a random PCT%) | range:MIN..MAX (insert objects of random sizes), objects=100K, size=8K (value bytes), ops=objects, idle=auto|SECONDS (stays up idle after the phase; auto: one khugepaged pass over the heap at Linux's default rate), jemalloc=auto|linux|freebsd (Linux's build retains purged chunks and purges with MADV_DONTNEED; FreeBSD's munmaps and uses MADV_FREE; auto: freebsd under reserving policies); each request's latency is in the report"),
];

/// Parses a workload spec.
pub fn parse(text: &str) -> Result<Box<dyn Workload>> {
    if compose::is_composition(text) {
        return Ok(Box::new(compose::parse(text)?));
    }
    let mut spec = Spec::parse("workload", text)?;
    let names: Vec<&str> = WORKLOADS
        .iter()
        .map(|w| w.0)
        .filter(|n| !n.contains('('))
        .collect();
    let w: Box<dyn Workload> = match spec.name.as_str() {
        "seq" => Box::new(scan::Scan::seq(&mut spec)?),
        "stride" => Box::new(scan::Scan::stride(&mut spec)?),
        "sparse" => Box::new(scan::Scan::sparse(&mut spec)?),
        "sparse-touch" => Box::new(scan::Scan::sparse_touch(&mut spec)?),
        "gups" => Box::new(gups::Gups::parse(&mut spec)?),
        "chase" => Box::new(chase::Chase::parse(&mut spec)?),
        "matrix" => Box::new(matrix::Matrix::parse(&mut spec)?),
        "tree" => Box::new(tree::Tree::parse(&mut spec)?),
        "fftw" => Box::new(fftw::Fftw::parse(&mut spec)?),
        "seeker" => Box::new(seeker::Seeker::parse(&mut spec)?),
        "filedirty" => Box::new(filedirty::FileDirty::parse(&mut spec)?),
        "trace" => Box::new(trace::TraceReplay::parse(&mut spec)?),
        "web" => Box::new(web::Web::parse(&mut spec)?),
        "kv" => Box::new(kv::Kv::parse(&mut spec)?),
        _ => return Err(spec.unknown_name(&names)),
    };
    spec.finish()?;
    Ok(w)
}

/// Largest size a synthetic workload may ask for (1TB); the machine's memory limits it further.
pub const MAX_SIZE: u64 = 1 << 40;

/// Refuses, before any work, a workload that writes `written` bytes of anonymous memory (whole
/// base pages, all mapped at once: its exact count, not its size) where the machine's memory
/// and swap together cannot hold them. A written page needs a frame or a swap slot under every
/// policy, so the run could only end out of memory, after simulating everything up to there
/// (`seq:size=1T,op=write` on skylake: minutes). `what` is the workload's spec.
pub(crate) fn check_written(e: &Engine, what: &str, written: u64) -> Result<()> {
    let m = &e.os.machine;
    let (mem, swap) = (m.mem_bytes, m.storage.swap_bytes);
    if written > mem.saturating_add(swap) {
        return Err(crate::error::SimError::BadInput(format!(
            "workload '{what}' writes {} of anonymous memory, every page of it kept, more than the \
             machine's memory and swap hold ({} + {} = {}): it could only run out of memory; give \
             it a smaller size, or more memory or swap (-m {}:mem=SIZE,swap=SIZE)",
            crate::report::human(written),
            crate::report::human(mem),
            crate::report::human(swap),
            crate::report::human(mem.saturating_add(swap)),
            m.name
        )));
    }
    Ok(())
}

/// The access kind(s) of an `op=` parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
    ReadWrite,
}

impl Op {
    fn take(spec: &mut Spec, default: &'static str, choices: &[&'static str]) -> Result<Op> {
        Ok(match spec.take_choice("op", default, choices)? {
            "read" => Op::Read,
            "write" => Op::Write,
            _ => Op::ReadWrite,
        })
    }
    fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::ReadWrite => "rw",
        }
    }
}

/// Maps `len` bytes of private anonymous read-write memory, placed by the OS.
pub(crate) fn map_anon(e: &mut Engine, pid: Pid, len: u64) -> Result<u64> {
    e.mmap(pid, MmapReq::anon(len))
}

/// Two arrays of `bytes` each: two page-rounded chunks from the break, as FreeBSD 4's malloc
/// (phkmalloc) hands out large requests (`heap`), or one anonymous mapping each. `who` and
/// `what` name the workload and its arrays in the error when the break is refused.
pub(crate) fn two_arrays(
    e: &mut Engine,
    pid: Pid,
    bytes: u64,
    heap: bool,
    who: &str,
    what: &str,
) -> Result<(u64, u64)> {
    if !heap {
        return Ok((map_anon(e, pid, bytes)?, map_anon(e, pid, bytes)?));
    }
    let page = e.os.machine.base_size();
    let chunk = bytes.div_ceil(page) * page;
    let start = e.current_brk(pid)?.div_ceil(page) * page;
    let want = start + 2 * chunk;
    if e.brk(pid, want)? < want {
        return Err(crate::error::SimError::OutOfMemory(format!(
            "{who}: brk to {want:#x} refused ({what})"
        )));
    }
    Ok((start, start + chunk))
}

/// Buffers accesses and hands them to the engine in batches of one event each. Counts the
/// accesses pushed, so a workload can express a dependence as a distance (`dep_on`).
pub(crate) struct Batch {
    pid: Pid,
    buf: Vec<Access>,
    /// Accesses pushed so far.
    pub pushed: u64,
}

impl Batch {
    pub fn new(pid: Pid) -> Batch {
        Batch {
            pid,
            buf: Vec::with_capacity(4096),
            pushed: 0,
        }
    }
    #[inline]
    pub fn push(&mut self, e: &mut Engine, a: Access) -> Result<()> {
        self.buf.push(a);
        self.pushed += 1;
        if self.buf.len() == 4096 {
            self.flush(e)?;
        }
        Ok(())
    }
    /// The `dep` of an access made now whose address came from the access numbered `producer`
    /// (a value of `pushed` before that access was pushed); 0 if too far back to matter.
    #[inline]
    pub fn dep_on(&self, producer: Option<u64>) -> u16 {
        match producer {
            Some(p) if p < self.pushed && self.pushed - p <= u16::MAX as u64 => {
                (self.pushed - p) as u16
            }
            _ => 0,
        }
    }
    /// `n` consecutive 8-byte words from `va`, independent, `ipa` instructions each, the first
    /// dependent on `producer`.
    pub fn words(
        &mut self,
        e: &mut Engine,
        va: u64,
        n: u64,
        op: MemOp,
        ipa: u16,
        producer: Option<u64>,
    ) -> Result<()> {
        for i in 0..n {
            let dep = self.dep_on(producer);
            self.push(e, Access::new(va + 8 * i, op, dep, ipa))?;
        }
        Ok(())
    }
    pub fn flush(&mut self, e: &mut Engine) -> Result<()> {
        if !self.buf.is_empty() {
            e.accesses(self.pid, &self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_names_and_errors() {
        assert_eq!(
            parse("seq:size=64M,op=write").unwrap().describe(),
            "seq:size=64M,op=write,elem=8"
        );
        let e = parse("sqe").err().unwrap().to_string();
        assert!(e.contains("'sqe'") && e.contains("gups"), "{e}");
        assert!(parse("gups:size=0").is_err());
        assert!(parse("matrix:n=abc").is_err());
        assert!(parse("seq:size=1G,bogus=1").is_err());
    }

    /// `check_written` refuses exactly what memory and swap together cannot hold: their sum
    /// runs, one page more is bad input naming the workload and the three sizes.
    #[test]
    fn check_written_refuses_one_page_beyond_memory_and_swap() {
        use crate::engine::Engine;
        use crate::hw::Machine;
        use crate::policy::Policy;
        for (spec, total) in [
            ("skylake:mem=1G,swap=0", 1u64 << 30),
            ("skylake:mem=1G,swap=1G", 2 << 30),
        ] {
            let m = Machine::from_spec(spec).unwrap();
            let mut p = Policy::from_spec("base").unwrap();
            p.resolve(&m).unwrap();
            let e = Engine::new(m, p, false, None);
            assert!(check_written(&e, "w", 0).is_ok(), "{spec}");
            assert!(check_written(&e, "w", total).is_ok(), "{spec}");
            let err = check_written(&e, "seq:size=9G", total + 4096).unwrap_err();
            assert!(
                matches!(err, crate::error::SimError::BadInput(_)),
                "{spec}: {err}"
            );
            let msg = err.to_string();
            assert!(
                msg.contains("'seq:size=9G'") && msg.contains("more than the machine's memory"),
                "{spec}: {msg}"
            );
        }
    }
}
