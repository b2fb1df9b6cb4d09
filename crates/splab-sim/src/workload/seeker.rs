//! seeker: seed 000 6.5's "dummy application that only exercises the need for contiguity. This
//! application maps, touches and unmaps 1MB of memory, five times a second". Between
//! operations it sleeps (`Engine::idle_until`): the simulated clock moves on, the page daemon
//! and any concurrent workload (`par(...)`) run meanwhile.
//!
//! Its metric is 6.5's "contiguous chunks of 512KB size ... satisfied": the mapping is cut into
//! virtually aligned chunks of the machine's largest superpage size not above the request
//! (512KB on the Alpha for 1MB); after the touch, a chunk is satisfied when its base pages sit
//! in one aligned physical extent of that size, in order (read through the map entry's object,
//! the OS model's own record of the frames).
//!
//! In a composition, `after=MARK` holds the first operation until another component has
//! reached the point MARK (`Engine::mark`), and `until=MARK` stops before the next operation
//! once one has: `par(web:warmup=100000,requests=100000,seeker:after=warm,until=served)` is
//! 6.5's experiment, the seeker running while the warm server serves its next requests. Waiting
//! for a mark, the seeker wakes once a period to look; a mark that no running component can set
//! any more is an error for `after=` and the end of the run for `until=`.

use super::{map_anon, MAX_SIZE};
use crate::engine::Engine;
use crate::error::{Result, SimError};
use crate::rng::Rng;
use crate::spec::Spec;
use crate::units::{fmt_size, MemOp, Pid};

/// Instructions per touching store (store, increment, compare and branch: a scalar loop;
/// docs/constants.md 6).
const TOUCH_IPA: u16 = 4;

pub struct Seeker {
    size: u64,
    /// Operations per simulated second.
    rate: u64,
    /// Operations in all (from `count=`, or `duration=` x `rate`).
    count: u64,
    /// The parameter it came from, for `describe`.
    duration: Option<u64>,
    after: Option<String>,
    until: Option<String>,
    chunk_bytes: u64,
    chunks: u64,
    contiguous: u64,
    /// Operations that started after their time (the previous one overran its period).
    late: u64,
    /// Operations done (fewer than `count` when `until=` stopped them).
    ops: u64,
    /// Clock (seconds) of the first operation.
    began: f64,
}

impl Seeker {
    pub fn parse(spec: &mut Spec) -> Result<Seeker> {
        let size = spec.take_size("size", 1 << 20, 1, MAX_SIZE)?;
        let rate = spec.take_count("rate", 5, 1, 1_000_000)?;
        let duration = spec.take_count("duration", 0, 1, 1 << 32)?;
        let count = spec.take_count("count", 0, 1, 1 << 32)?;
        let after = spec.take_str("after");
        let until = spec.take_str("until");
        for (key, v) in [("after", &after), ("until", &until)] {
            if v.as_deref().is_some_and(|m| m.is_empty()) {
                return Err(SimError::BadInput(format!(
                    "workload 'seeker': {key}= needs the name of a mark another component sets (web sets 'warm' after its warm-up and 'served' at its end)"
                )));
            }
        }
        let (count, duration) = match (duration, count) {
            // Bounded by a mark alone: as many operations as it takes.
            (0, 0) if until.is_some() => (u64::MAX, None),
            (0, 0) => (60 * rate, Some(60)),
            (d, 0) => (d * rate, Some(d)),
            (0, c) => (c, None),
            _ => {
                return Err(SimError::BadInput(
                    "workload 'seeker': give duration= (simulated seconds) or count= (operations), not both"
                        .into(),
                ))
            }
        };
        Ok(Seeker {
            size,
            rate,
            count,
            duration,
            after,
            until,
            chunk_bytes: 0,
            chunks: 0,
            contiguous: 0,
            late: 0,
            ops: 0,
            began: 0.0,
        })
    }

    /// Chunks of the mapping at `base` and how many sit in one aligned physical extent.
    fn count_chunks(&self, e: &Engine, pid: Pid, base: u64, chunk: u64) -> Result<(u64, u64)> {
        let os = &e.os;
        let shift = os.base_shift();
        let per = chunk >> shift;
        let p = os.proc(pid)?;
        let (mut all, mut good) = (0, 0);
        let mut va = base.div_ceil(chunk) * chunk;
        while va + chunk <= base + self.size {
            all += 1;
            let vma = p.vma_at(va).ok_or_else(|| {
                SimError::Invariant(format!("seeker: {va:#x} not mapped after mmap"))
            })?;
            let obj = os.obj(vma.shadow.unwrap_or(vma.obj));
            let first = vma.pgoff + ((va - vma.start) >> shift);
            let ok = obj.pages.get(first).is_some_and(|f0| {
                f0.0 % per == 0
                    && (1..per).all(|i| obj.pages.get(first + i).is_some_and(|f| f.0 == f0.0 + i))
            });
            good += ok as u64;
            va += chunk;
        }
        Ok((all, good))
    }
}

impl super::Workload for Seeker {
    fn describe(&self) -> String {
        let mut bound = match (self.duration, self.count) {
            (Some(d), _) => format!("duration={d}"),
            (None, u64::MAX) => String::new(),
            (None, c) => format!("count={c}"),
        };
        for (key, m) in [("after", &self.after), ("until", &self.until)] {
            if let Some(m) = m {
                if !bound.is_empty() {
                    bound.push(',');
                }
                bound.push_str(&format!("{key}={m}"));
            }
        }
        format!(
            "seeker:size={},rate={},{bound}",
            fmt_size(self.size),
            self.rate
        )
    }

    fn expected_accesses(&self) -> Option<u64> {
        None
    }

    fn run(&mut self, e: &mut Engine, _rng: &mut Rng) -> Result<()> {
        let pid = e.spawn()?;
        let page = e.os.machine.base_size();
        // The largest superpage size not above the request (the base page if none is).
        self.chunk_bytes =
            e.os.machine
                .page_sizes()
                .into_iter()
                .filter(|&s| s <= self.size)
                .max()
                .unwrap_or(page);
        let period = e.os.machine.freq_hz / self.rate;
        if let Some(m) = &self.after {
            while e.marked(m).is_none() {
                if !e.others_running() {
                    return Err(SimError::BadInput(format!(
                        "workload 'seeker': after={m}: no other component of the composition is left to reach the mark '{m}' (web sets 'warm' after its warm-up, with warmup=N)"
                    )));
                }
                let next = e.clock() + period;
                e.idle_until(next)?;
            }
        }
        let t0 = e.clock();
        self.began = t0 as f64 / e.os.machine.freq_hz as f64;
        for i in 0..self.count {
            if let Some(m) = &self.until {
                if e.marked(m).is_some() || !e.others_running() {
                    break;
                }
            }
            let due = t0 + i * period;
            if e.clock() > due {
                self.late += 1;
            }
            e.idle_until(due)?;
            let base = map_anon(e, pid, self.size)?;
            let pages = self.size.div_ceil(page);
            e.access_run(pid, base, page as i64, pages, MemOp::Store, TOUCH_IPA)?;
            let (all, good) = self.count_chunks(e, pid, base, self.chunk_bytes)?;
            self.chunks += all;
            self.contiguous += good;
            e.munmap(pid, base, self.size)?;
            self.ops += 1;
        }
        Ok(())
    }

    fn stats(&self) -> Option<serde_json::Value> {
        Some(serde_json::json!({
            "operations": self.ops,
            "late_operations": self.late,
            "first_operation_seconds": self.began,
            "chunk_bytes": self.chunk_bytes,
            "chunks": self.chunks,
            "chunks_contiguous": self.contiguous,
        }))
    }
}
