//! The out-of-order core: a first-order interval model (Karkhanis & Smith, ISCA 2004, "A
//! first-order superscalar processor model"), as the simple out-of-order cores of ChampSim and
//! Ramulator time memory references. Knows nothing of the VM; the access path hands it, per
//! access, what the TLBs, the walker and the caches did, and it keeps the clock.
//!
//! The model:
//! - Instructions dispatch in order at `width` per cycle into a reorder window of `window`
//!   instructions. An access brings `ipa` instructions (itself and the non-memory ones before
//!   it). Time is kept in ticks of 1/width cycle, so dispatch costs one tick per instruction.
//! - Retirement is in order. A load (or read-modify-write) blocks retirement until its data
//!   arrives; a store blocks it only until its address is translated (it then waits in the store
//!   buffer). An instruction cannot dispatch before the one `window` instructions older retired:
//!   that is the only way a long miss stalls dispatch.
//! - A dependent access (`dep` > 0) issues when the load `dep` accesses back has its data.
//! - At most `mshrs` L1 misses are outstanding (fill buffers / miss address file); a miss that
//!   finds them all busy waits for the earliest to complete. A miss to a line already in flight
//!   merges with it and completes with it.
//! - At most `walkers` page walks run at once; a TLB miss waits for a free walker.
//! - A fault, a system call or other kernel work drains the window first (the trap waits for
//!   everything older), then runs serially. A software-refilled TLB (Alpha PALcode, PA-RISC) traps
//!   on every miss and so drains the window too.
//!
//! Attribution: every tick the clock advances is charged to exactly one cause, so the breakdown
//! sums to the total. Dispatch is `compute`. A dispatch stall waits for a blocking access; the
//! stall is split over that access's life in proportion to its parts (its data fetch at the
//! level that served it, its walk by the levels that served the walk's references, its
//! second-level TLB hit, its waits for a free walker or fill buffer, and its wait for the load it
//! depended on, which is split over that load's own parts). Charging only the part the stall
//! overlaps would blame the last segment (usually data) for a stall whose cause is a throughput
//! limit earlier in the access's life (a queue for the two walkers); charging a dependence wait
//! to the producer's own parts (not its own wait in turn) charges a chain's stalls to the walks
//! and data of its links.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::Serialize;

pub use crate::units::MemOp;

/// Core parameters of a machine (values and sources in the machine files, `machines/*.toml`).
#[derive(Clone, Debug, Serialize)]
pub struct CoreConfig {
    /// Reorder window, instructions (ROB size).
    pub window: u32,
    /// Dispatch width, instructions per cycle.
    pub width: u32,
    /// Outstanding L1 data misses (fill buffers, MSHRs, miss address file).
    pub mshrs: u32,
    /// Concurrent hardware page walks (ignored with a software refill, which drains).
    pub walkers: u32,
    /// Sustained memory bandwidth for streamed lines, bytes per core cycle.
    pub stream_bytes_per_cycle: f64,
    /// Store buffer (store queue) entries; 0: unbounded (stores never stall dispatch).
    pub store_buffer: u32,
    /// Loaded latency: cycles a demand miss served beyond L2 waits for each other such miss of
    /// this core in flight when it starts (the memory system's queueing under the core's own
    /// misses; `splab calibrate` measures it as the slope of the per-miss latency over the
    /// number of interleaved chases). 0: a miss's latency is the same however many are in flight.
    pub loaded_cycles_per_miss: f64,
}

/// Where time went. Indices into `Breakdown::cycles` (ticks until `finish`).
pub mod cause {
    pub const COMPUTE: usize = 0;
    pub const TLB_HIT: usize = 1;
    /// Walk references served by cache level k (0..3) or DRAM (3): WALK + k.
    pub const WALK: usize = 2;
    /// Software refill handler instructions (the trap and the handler's own work).
    pub const WALK_HANDLER: usize = 6;
    /// Data served by cache level k or DRAM (3): DATA + k.
    pub const DATA: usize = 7;
    /// Waiting for a free fill buffer.
    pub const DATA_QUEUE: usize = 11;
    pub const FAULT: usize = 12;
    pub const IO: usize = 13;
    pub const KERNEL: usize = 14;
    pub const STREAM: usize = 15;
    /// Waiting for a free hardware walker.
    pub const WALK_QUEUE: usize = 16;
    /// No process had anything to run: every one was asleep (`Engine::idle_until`).
    pub const IDLE: usize = 17;
    pub const N: usize = 18;
}

/// Critical-path attribution of the clock, in cycles once finished.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Breakdown {
    pub compute: u64,
    pub tlb_hit: u64,
    /// Walk references by the level that served them: L1, L2, LLC, DRAM.
    pub walk_by_level: [u64; 4],
    /// Software refill handler instructions.
    pub walk_handler: u64,
    /// Waiting for a free hardware walker (walk parallelism exhausted).
    pub walk_queue: u64,
    /// Data by the level that served it: L1, L2, LLC, DRAM.
    pub data_by_level: [u64; 4],
    /// Waiting for a free fill buffer (miss-level parallelism exhausted).
    pub data_queue: u64,
    /// Streamed lines (bandwidth-bound sequential runs).
    pub stream: u64,
    pub fault: u64,
    pub io: u64,
    pub kernel: u64,
    /// Idle: every process asleep (`Engine::idle_until`).
    pub idle: u64,
}

impl Breakdown {
    pub fn walk(&self) -> u64 {
        self.walk_by_level.iter().sum::<u64>() + self.walk_handler + self.walk_queue
    }
    pub fn data(&self) -> u64 {
        self.data_by_level.iter().sum::<u64>() + self.data_queue + self.stream
    }
    pub fn total(&self) -> u64 {
        self.compute
            + self.tlb_hit
            + self.walk()
            + self.data()
            + self.fault
            + self.io
            + self.kernel
            + self.idle
    }
}

/// What happened to one access on its way, as the access path reports it to the core.
#[derive(Clone, Copy, Debug, Default)]
pub struct Trip {
    /// Cycles of lower-level TLB hits (0 for an L1 TLB hit).
    pub tlb_cycles: u64,
    /// The access walked (hardware walker).
    pub walked: bool,
    /// Walk latency by the place that served each reference (L1, L2, LLC, DRAM), cycles.
    pub walk_by_level: [u32; 4],
    /// The walk's fixed cycles beyond its references (`Walker::fixed_cycles`): part of the
    /// walk's latency, so overlapping walks overlap it too; attributed with the references'
    /// places in proportion to their cycles.
    pub walk_fixed: u32,
    /// Software refill: handler cycles (the refill drains the window).
    pub refill_cycles: u64,
    /// Where the data line was served (0 = L1 .. levels = DRAM) and its line number.
    pub served: u8,
    pub latency: u64,
    pub line: u64,
}

const RING: usize = 512;
const _: () = assert!(RING.is_power_of_two());
const MAX_MSHRS: usize = 32;
/// Stalls whose attribution `attribute` defers, applied together by `flush_stalls`.
const PENDING: usize = 32;
const MAX_WALKERS: usize = 8;

/// The timeline of one access (ticks), kept for attribution and dependences.
#[derive(Clone, Copy, Debug, Default)]
struct Life {
    dispatch: u64,
    issue: u64,
    walk_start: u64,
    walk_end: u64,
    data_start: u64,
    done: u64,
    tlb_end: u64,
    /// Walk cycles by level, for proportional attribution.
    walk_by_level: [u32; 4],
    served: u8,
    /// Producer's access number + 1, 0 = none.
    producer: u64,
}

#[derive(Clone)]
pub struct Core {
    width: u64,
    window: u64,
    /// Page walkers and fill buffers in use: `cfg`'s, at least one and at most the arrays'
    /// sizes (computed once: on the access path they were a dozen host instructions).
    walkers: usize,
    mshrs: usize,
    /// Dispatch clock, ticks.
    now: u64,
    /// Instructions dispatched.
    instr: u64,
    /// Accesses issued.
    n: u64,
    /// Retirement-blocking accesses in order: (instruction number, done tick, access number).
    rob: Rob,
    /// Everything older than the front of `rob` retired by this tick.
    retired: u64,
    lives: Box<[Life; RING]>,
    mshr_done: [u64; MAX_MSHRS],
    mshr_line: [u64; MAX_MSHRS],
    /// Where each fill buffer's line comes from (`Trip::served`): a hit that waits for the
    /// fill is charged there.
    mshr_served: [u8; MAX_MSHRS],
    /// `mshr_done[i] << 5 | i` (`MAX_MSHRS` is 32) as an `f64`, +inf past the machine's
    /// buffers: the smallest key is the first fill buffer to free and when, a plain minimum
    /// instead of a compare and two selects per buffer (the scan was a fifth of `access`), and
    /// as doubles two at a time in SSE2 (`min_key`; as integers, ten loads, compares and
    /// selects with their spills were about 40 host instructions per access). Exact while every
    /// `done` is below 2^48 (`mshr_scan_by`): the key is then below 2^53, a double's integers.
    mshr_key: [f64; MAX_MSHRS],
    /// The unrolled scan of the keys `access` takes: the machine's fill buffers when they are
    /// a preset's (10, 8 or 6), else 0: `mshr_scan` of `mshr_done`. Also 0 once a `done` of
    /// 2^48 ticks or more was stored (not on any run of today's sizes: 2^48 ticks are 7e13
    /// cycles at width 4). One byte to test where the count and a flag were two (and six
    /// host instructions per L1 miss).
    mshr_scan_by: u8,
    /// How many fill buffers hold a line (not `u64::MAX`) of each value of its low byte: a
    /// filter for `mshr_line`'s matches, a zero proves there is none (one load, where the
    /// 4-wide SSE2 compares of the low 32 bits of every buffer's line were a dozen host
    /// instructions per L1 miss).
    mshr_by_low: [u8; 256],
    walker_done: [u64; MAX_WALKERS],
    /// Latest completion of anything issued (for drains).
    horizon: u64,
    ticks: [u64; cause::N],
    /// Stalls yet to be charged to `ticks`: the life of the access that ended each and its
    /// length (`attribute`; those of accesses that waited for no other). Their shares are
    /// integer sums, so when they are added does not matter; charged one by one, each waited
    /// on its own chain of two dependent divisions (the walk's share, then its split by level:
    /// a tenth of skylake GUPS's time, perf), charged in a batch the chains overlap. (When a
    /// pending stall was a copy of its life, those with no walk were charged at once: the copy
    /// cost more than their one division's wait. Deferred too since the copy went, the call of
    /// `attribute_now` they took is gone: 3.9 host instructions fewer per skylake GUPS access,
    /// 7.4 under navarro.) Each is kept as the access number whose life (in
    /// `lives`) it is charged to, not a copy of the life (a 96-byte copy per stall, a
    /// twentieth of `access` on skylake GUPS): `pending_by` says when the oldest one's slot
    /// is about to be reused, and `access` charges them all before that.
    pending: [(u64, u64); PENDING],
    npending: usize,
    /// The smallest `acc + RING` of the stalls in `pending` (`u64::MAX` with none): the
    /// access numbered so would overwrite that stall's life.
    pending_by: u64,
    /// Fractional stream cost carried between runs, in 1/1024 ticks.
    stream_frac: u64,
    stream_ticks_per_line_1024: u64,
    /// When the previous streamed line arrived (ticks; `prefetched_line`).
    stream_at: u64,
    /// The store buffer (`CoreConfig::store_buffer` entries; empty: unbounded): per entry, the
    /// tick its store commits and where its line came from (`Trip::served`), in allocation
    /// order from `sb_head`. A store (or the store of a read-modify-write) takes the oldest
    /// entry at dispatch, waiting for it to commit if it has not; stores commit in program
    /// order (x86 TSO), each once its line is there (`sb_last`: the youngest commit so far)
    /// and it has retired, which is after every older load has completed (`load_done`).
    sb: Box<[(u64, u8)]>,
    sb_head: usize,
    sb_last: u64,
    /// `CoreConfig::loaded_cycles_per_miss` in ticks (0: none).
    loaded_ticks_per_miss: u64,
    /// The latest completion of any load, read-modify-write or instruction fetch so far.
    load_done: u64,
    /// Where the dispatch clock (`now`, ticks) is published for the caches' line lifetimes
    /// (`Caches::set_lifetime`), when a level has one: after every access, stream, serial
    /// work and prefetched line. None: nothing is published (one predictable branch).
    clock: Option<Arc<AtomicU64>>,
}

impl Core {
    pub fn new(cfg: &CoreConfig) -> Core {
        assert!(cfg.window as usize <= RING, "window larger than {RING}");
        let width = cfg.width.max(1) as u64;
        let stream = if cfg.stream_bytes_per_cycle > 0.0 {
            (64.0 / cfg.stream_bytes_per_cycle * width as f64 * 1024.0).round() as u64
        } else {
            0
        };
        Core {
            width,
            window: cfg.window.max(1) as u64,
            walkers: (cfg.walkers.max(1) as usize).min(MAX_WALKERS),
            mshrs: (cfg.mshrs.max(1) as usize).min(MAX_MSHRS),
            now: 0,
            instr: 0,
            n: 0,
            rob: Rob::new(),
            retired: 0,
            lives: Box::new([Life::default(); RING]),
            mshr_done: [0; MAX_MSHRS],
            mshr_line: [u64::MAX; MAX_MSHRS],
            mshr_served: [0; MAX_MSHRS],
            mshr_key: std::array::from_fn(|i| {
                if i < cfg.mshrs.clamp(1, MAX_MSHRS as u32) as usize {
                    i as f64
                } else {
                    f64::INFINITY
                }
            }),
            mshr_scan_by: match cfg.mshrs.clamp(1, MAX_MSHRS as u32) {
                m @ (10 | 8 | 6) => m as u8,
                _ => 0,
            },
            mshr_by_low: [0; 256],
            walker_done: [0; MAX_WALKERS],
            horizon: 0,
            ticks: [0; cause::N],
            pending: [(0, 0); PENDING],
            npending: 0,
            pending_by: u64::MAX,
            stream_frac: 0,
            stream_ticks_per_line_1024: stream,
            stream_at: 0,
            clock: None,
            sb: vec![(0, 0); cfg.store_buffer as usize].into_boxed_slice(),
            sb_head: 0,
            sb_last: 0,
            load_done: 0,
            loaded_ticks_per_miss: (cfg.loaded_cycles_per_miss.max(0.0) * cfg.width.max(1) as f64)
                .round() as u64,
        }
    }

    /// Publishes the dispatch clock to `clock` from now on (for `Caches::set_lifetime`); its
    /// ticks are `ticks_per_cycle()` a cycle.
    pub fn set_clock(&mut self, clock: Arc<AtomicU64>) {
        clock.store(self.now, Ordering::Relaxed);
        self.clock = Some(clock);
    }

    /// The clock `set_clock` gave, if any.
    pub fn clock(&self) -> Option<&Arc<AtomicU64>> {
        self.clock.as_ref()
    }

    /// Ticks of the dispatch clock per cycle (the width).
    pub fn ticks_per_cycle(&self) -> u64 {
        self.width
    }

    #[inline(always)]
    fn publish(&self) {
        if let Some(c) = &self.clock {
            c.store(self.now, Ordering::Relaxed);
        }
    }

    /// The clock, in cycles: when everything issued so far will have completed.
    pub fn cycles(&self) -> u64 {
        self.now.max(self.horizon).div_ceil(self.width)
    }

    /// Dispatches `ipa` instructions ending in this access (0: another access of the previous
    /// access's instruction) and applies the window limit.
    #[inline]
    fn dispatch(&mut self, ipa: u64) -> u64 {
        self.instr += ipa;
        self.now += ipa;
        self.ticks[cause::COMPUTE] += ipa;
        // The instruction `window` older must have retired.
        self.retire_to(self.instr.saturating_sub(self.window));
        self.now
    }

    /// Charges a stall of `amount` ticks that ended when access `acc` completed to the parts of
    /// that access's life, in proportion to their lengths: its second-level TLB hit, its wait
    /// for a walker, its walk (split by the levels that served the walk's references), its wait
    /// for a fill buffer, its data (by the level that served it), and its wait for the load it
    /// depended on, which is charged to that load's own parts in the same proportions. A stall
    /// behind a throughput limit (walkers, fill buffers) is thus charged to that limit, and a
    /// stall in a dependent chain to the walks and data of the chain's links.
    ///
    /// Inlined, the deferral of a stall (`pending`: GUPS's usual case, about one an access)
    /// is a dozen host instructions; as a call its saved registers were as many again.
    #[inline(always)]
    fn attribute(&mut self, acc: u64, amount: u64) {
        if amount == 0 {
            return;
        }
        let life = &self.lives[(acc as usize) % RING];
        if life.producer == 0 {
            // All of it to the access's own parts: deferred (`pending`). (`attribute_now` of a
            // life with no producer is `charge_own` of it.)
            self.pending[self.npending % PENDING] = (acc, amount);
            self.npending += 1;
            self.pending_by = self.pending_by.min(acc + RING as u64);
            if self.npending == PENDING {
                self.flush_stalls();
            }
            return;
        }
        self.attribute_now(acc, amount);
    }

    /// `attribute` of a stall it does not defer.
    #[inline(never)]
    fn attribute_now(&mut self, acc: u64, amount: u64) {
        let life = &self.lives[(acc as usize) % RING];
        let dep_wait = life.issue.saturating_sub(life.dispatch);
        let total = dep_wait + life.done.saturating_sub(life.issue);
        if total == 0 {
            self.ticks[cause::DATA + life.served.min(3) as usize] += amount;
            return;
        }
        let to_dep = if life.producer > 0 {
            floor(f(amount) * f(dep_wait) / f(total))
        } else {
            0
        };
        charge_own(&mut self.ticks, life, amount - to_dep.min(amount));
        if to_dep > 0 {
            let p = &self.lives[((life.producer - 1) as usize) % RING];
            charge_own(&mut self.ticks, p, to_dep.min(amount));
        }
    }

    /// Charges the deferred stalls (`pending`) to `ticks`.
    #[inline(never)]
    fn flush_stalls(&mut self) {
        for &(acc, amount) in &self.pending[..self.npending.min(PENDING)] {
            charge_own(&mut self.ticks, &self.lives[(acc as usize) % RING], amount);
        }
        self.npending = 0;
        self.pending_by = u64::MAX;
    }

    /// Retires, in order, the blocking accesses up to instruction `limit`; a stall of dispatch
    /// until then is charged to the access that ends it.
    #[inline]
    fn retire_to(&mut self, limit: u64) {
        while let Some((i, done, acc)) = self.rob.front() {
            if i > limit {
                break;
            }
            self.rob.pop_front();
            if done > self.retired {
                self.retired = done;
            }
            if self.retired > self.now {
                let stall = self.retired - self.now;
                self.attribute(acc, stall);
                self.now = self.retired;
            }
        }
    }

    /// One access: dispatches its instructions, times its translation and data, and records it.
    /// `dep`: distance back to the load whose value formed its address (0 = none). Inlined
    /// into its one caller on the access path (`Os::data`): the call, its saved registers and
    /// its spills were a tenth of it.
    #[inline(always)]
    pub fn access(&mut self, op: MemOp, ipa: u64, dep: u64, trip: &Trip) {
        let w = self.width;
        let mut disp = self.dispatch(ipa);
        let stores = matches!(op, MemOp::Store | MemOp::Rmw) && !self.sb.is_empty();
        if stores {
            disp = self.store_buffer_entry();
        }
        let n = self.n;
        self.n += 1;
        let mut issue = disp;
        let mut producer = 0;
        // `dep` in 1..=n and below RING (one compare: a `dep` of 0 wraps to the largest).
        if dep.wrapping_sub(1) < n.min(RING as u64 - 1) {
            let p = n - dep;
            let pd = self.lives[(p as usize) % RING].done;
            if pd > issue {
                issue = pd;
                producer = p + 1;
            }
        }
        if trip.refill_cycles > 0 {
            issue = self.refill(issue, trip);
        }
        let tlb_end = issue + trip.tlb_cycles * w;
        let (mut walk_start, mut walk_end) = (tlb_end, tlb_end);
        if trip.walked {
            let walk: u64 = (trip.walk_by_level.iter().map(|&c| c as u64).sum::<u64>()
                + trip.walk_fixed as u64)
                * w;
            let (slot, free) = match self.walkers {
                // The presets' walkers, unrolled.
                1 => (0, self.walker_done[0]),
                2 => min_slot_n::<2>(&self.walker_done),
                p => min_slot(&self.walker_done[..p]),
            };
            walk_start = tlb_end.max(free);
            walk_end = walk_start + walk;
            self.walker_done[slot] = walk_end;
        }
        let mut data_start = walk_end;
        let mut done = data_start + trip.latency * w;
        let mut served = trip.served;
        if trip.served == 0
            && op != MemOp::Ifetch
            && self.mshr_by_low[trip.line as u8 as usize] != 0
        {
            // A hit on a line whose miss is still in flight (the caches are filled at the
            // miss's lookup, untimed, so the access after it finds the line): its data comes
            // with the fill, not before. A load that hits a fill buffer waits for it (Intel's
            // L1D_PEND_MISS / LOAD_HIT_PRE "hit a fill buffer", AMD's MAB merge): a tree node's
            // child pointer, loaded from the line its key's load missed, is ready when the
            // line is, not one L1 latency after its issue.
            if let Some(i) = self.mshr_line[..self.mshrs]
                .iter()
                .position(|&l| l == trip.line)
            {
                if self.mshr_done[i] > done {
                    done = self.mshr_done[i];
                    served = self.mshr_served[i];
                }
            }
        }
        if trip.served > 0 && op != MemOp::Ifetch {
            let m = self.mshrs;
            let (same, slot, free) = match self.mshr_scan_by {
                // The presets' fill buffers, unrolled.
                10 => self.mshr_scan_n::<10>(trip.line),
                8 => self.mshr_scan_n::<8>(trip.line),
                6 => self.mshr_scan_n::<6>(trip.line),
                _ => mshr_scan(&self.mshr_line[..m], &self.mshr_done[..m], trip.line),
            };
            if let Some(i) = same {
                // Merges with the miss in flight for the same line.
                if self.mshr_done[i] > data_start {
                    done = self.mshr_done[i].max(data_start + w);
                } else {
                    done = data_start + trip.latency * w;
                    self.set_mshr_done(i, done);
                }
            } else {
                data_start = data_start.max(free);
                done = data_start + trip.latency * w;
                if self.loaded_ticks_per_miss > 0 && trip.served >= 2 {
                    done += self.loaded_ticks_per_miss * self.misses_beyond_l2_at(data_start);
                }
                self.set_mshr_done(slot, done);
                let old = self.mshr_line[slot];
                if old != u64::MAX {
                    self.mshr_by_low[old as u8 as usize] -= 1;
                }
                self.mshr_by_low[trip.line as u8 as usize] += 1;
                self.mshr_line[slot] = trip.line;
                self.mshr_served[slot] = trip.served;
            }
        }
        if stores {
            self.store_buffer_commit(done, served);
        }
        if op != MemOp::Store && done > self.load_done {
            self.load_done = done;
        }
        // A store retires once translated; its data drains from the store buffer.
        let blocks_until = if op == MemOp::Store { walk_end } else { done };
        if n >= self.pending_by {
            // This access's life takes the slot of a stall not yet charged (`pending`).
            self.flush_stalls();
        }
        self.lives[(n as usize) % RING] = Life {
            dispatch: disp,
            issue,
            walk_start,
            walk_end,
            data_start,
            done: if op == MemOp::Store { walk_end } else { done },
            tlb_end,
            walk_by_level: trip.walk_by_level,
            served,
            producer,
        };
        if done > self.horizon {
            self.horizon = done;
        }
        if op == MemOp::Ifetch {
            // An instruction-fetch miss stalls the front end.
            if blocks_until > self.now {
                let stall = blocks_until - self.now;
                self.attribute(n, stall);
                self.now = blocks_until;
            }
        } else if blocks_until > disp + self.window {
            // Only an access that may outlive `window` dispatch ticks can ever stall dispatch.
            self.rob.push_back(self.instr, blocks_until, n);
        }
        self.publish();
    }

    /// A software refill (`access` of a trip with `refill_cycles`): it traps: everything older
    /// completes first, then the handler. Returns the access's issue tick after it. Out of line:
    /// no preset's hardware walker takes it, and inlined it was register pressure on the
    /// access path.
    #[cold]
    #[inline(never)]
    fn refill(&mut self, issue: u64, trip: &Trip) -> u64 {
        let w = self.width;
        self.drain();
        let t = self.now.max(issue);
        self.ticks[cause::WALK_HANDLER] += trip.refill_cycles * w;
        let refs: u64 = trip.walk_by_level.iter().map(|&c| c as u64).sum();
        for k in 0..4 {
            self.ticks[cause::WALK + k] += trip.walk_by_level[k] as u64 * w;
        }
        self.now = t + (trip.refill_cycles + refs) * w;
        self.now
    }

    /// A store's store-buffer entry (the oldest one): when it has not committed, dispatch waits
    /// for it, a stall charged to the data of that store (the level its line came from: the
    /// store that blocks the buffer's head is the one waiting for its line). Returns the
    /// dispatch clock. Intel's RESOURCE_STALLS.SB counts these cycles.
    #[inline]
    fn store_buffer_entry(&mut self) -> u64 {
        debug_assert!(self.sb_head < self.sb.len());
        // SAFETY: `sb` is not empty here (`access` calls this only then), and
        // `sb_head < sb.len()`: it starts at 0 and `store_buffer_commit` wraps it at the length.
        let (free, served) = unsafe { *self.sb.get_unchecked(self.sb_head) };
        if free > self.now {
            self.ticks[cause::DATA + served.min(3) as usize] += free - self.now;
            self.now = free;
            self.publish();
        }
        self.now
    }

    /// Fills the entry `store_buffer_entry` took: the store commits once its line is there
    /// (`done`), once it has retired (a store retires after every older instruction: here,
    /// after every older load has completed) and after every older store (in program order).
    #[inline]
    fn store_buffer_commit(&mut self, done: u64, served: u8) {
        let commit = done.max(self.sb_last).max(self.load_done);
        self.sb_last = commit;
        debug_assert!(self.sb_head < self.sb.len());
        // SAFETY: as in `store_buffer_entry`, whose entry this is.
        unsafe { *self.sb.get_unchecked_mut(self.sb_head) = (commit, served) };
        self.sb_head += 1;
        if self.sb_head == self.sb.len() {
            self.sb_head = 0;
        }
    }

    /// `mshr_scan` over the first `M` fill buffers, with `M` known (unrolled), from their keys
    /// (`mshr_key`): the smallest key's low five bits are the first buffer to free and the rest
    /// when. A buffer holding `line` is looked for only if one may (`mshr_by_low`): GUPS's
    /// random lines almost never find one.
    #[inline(always)]
    fn mshr_scan_n<const M: usize>(&self, line: u64) -> (Option<usize>, usize, u64) {
        const { assert!(M <= MAX_MSHRS && MAX_MSHRS == 32) };
        debug_assert_eq!(M, self.mshrs);
        let min = min_key::<M>(&self.mshr_key);
        let same = if self.mshr_by_low[line as u8 as usize] != 0 {
            self.mshr_line[..M].iter().position(|&l| l == line)
        } else {
            None
        };
        (same, (min & 31) as usize, min >> 5)
    }

    /// Fill buffers holding a miss served beyond L2 that is still in flight at `t` (loaded
    /// latency: `CoreConfig::loaded_cycles_per_miss`).
    #[cold]
    #[inline(never)]
    fn misses_beyond_l2_at(&self, t: u64) -> u64 {
        (0..self.mshrs)
            .filter(|&j| self.mshr_done[j] > t && self.mshr_served[j] >= 2)
            .count() as u64
    }

    /// Fill buffer `i` completes at `done` (`mshr_done` and its key).
    #[inline(always)]
    fn set_mshr_done(&mut self, i: usize, done: u64) {
        // `i` is a fill buffer's index, below `mshrs` (at most `MAX_MSHRS`, a power of two):
        // the masks drop the bounds checks.
        debug_assert!(i < self.mshrs);
        self.mshr_done[i & (MAX_MSHRS - 1)] = done;
        self.mshr_key[i & (MAX_MSHRS - 1)] = f(done << 5 | i as u64);
        if done >> 48 != 0 {
            self.mshr_scan_by = 0;
        }
    }

    /// The ticks `lines` streamed lines take at the stream bandwidth, the fraction carried.
    #[inline]
    fn stream_ticks(&mut self, lines: u64) -> u64 {
        let bw = lines * self.stream_ticks_per_line_1024 + self.stream_frac;
        self.stream_frac = bw % 1024;
        bw / 1024
    }

    /// A run of `lines` streamed lines with `instrs` instructions: bandwidth-bound. The lines
    /// come from a prefetcher; the instructions dispatch meanwhile.
    pub fn stream(&mut self, instrs: u64, lines: u64) {
        let bw = self.stream_ticks(lines);
        let compute = instrs;
        self.instr += instrs;
        // The run cannot dispatch past what retirement allows; then it takes the longer of its
        // instructions and its lines.
        self.retire_to(self.instr.saturating_sub(self.window));
        self.now += compute;
        self.ticks[cause::COMPUTE] += compute;
        if bw > compute {
            self.now += bw - compute;
            self.ticks[cause::STREAM] += bw - compute;
        }
        self.stream_at = self.now;
        self.publish();
    }

    /// A line the hardware prefetcher brought from memory ahead of an individual access
    /// (hw/prefetch.rs): lines arrive no faster than the stream bandwidth allows, so dispatch
    /// waits if less than a line's transfer time passed since the previous streamed line.
    #[inline]
    pub fn prefetched_line(&mut self) {
        let ready = self.stream_at + self.stream_ticks(1);
        if ready > self.now {
            self.ticks[cause::STREAM] += ready - self.now;
            self.now = ready;
        }
        self.stream_at = self.now;
        self.publish();
    }

    /// Waits until everything issued has completed, charging the wait to the blocking accesses
    /// in order, then to outstanding store data.
    fn drain(&mut self) {
        self.retire_to(u64::MAX);
        if self.horizon > self.now {
            // Stores' data still draining from the store buffer.
            self.ticks[cause::DATA + 3] += self.horizon - self.now;
            self.now = self.horizon;
        }
        self.retired = self.now;
    }

    /// Starts the attribution afresh at the next whole cycle (the clock goes on): what ran
    /// before (a set-up phase, `Engine::start_measuring`) is in no part of `breakdown`, which
    /// then sums to the cycles since.
    pub fn restart_attribution(&mut self) {
        self.drain();
        self.now = self.now.next_multiple_of(self.width);
        self.horizon = self.horizon.max(self.now);
        self.retired = self.now;
        // The stalls not yet charged would be dropped with the rest.
        self.npending = 0;
        self.pending_by = u64::MAX;
        self.ticks = [0; cause::N];
        self.publish();
    }

    /// Serial work that traps or enters the kernel (fault handling, I/O waits, system calls,
    /// kernel bookkeeping): drains the window, then takes `cycles`.
    pub fn serial(&mut self, cycles: u64, c: usize) {
        if cycles == 0 {
            return;
        }
        self.drain();
        self.now += cycles * self.width;
        self.ticks[c] += cycles * self.width;
        self.retired = self.now;
        self.horizon = self.horizon.max(self.now);
        self.publish();
    }

    /// Work that does not touch memory (a `compute` event): dispatches `cycles * width`
    /// instructions' worth of time, overlapping outstanding misses.
    pub fn compute(&mut self, cycles: u64) {
        self.stream(cycles * self.width, 0);
    }

    /// The attribution so far, in cycles; the parts sum to `cycles()` (the tail still in flight
    /// is charged as its accesses' segments).
    pub fn breakdown(&self) -> Breakdown {
        let mut c = self.clone();
        c.drain();
        c.flush_stalls();
        let w = self.width;
        let t = &c.ticks;
        // Convert ticks to cycles so that the parts sum exactly to the total.
        let total_ticks: u64 = t.iter().sum();
        let total = total_ticks.div_ceil(w);
        let mut parts: Vec<u64> = t.iter().map(|&x| x / w).collect();
        let mut rem = total - parts.iter().sum::<u64>();
        // Hand the rounding remainder to the largest parts first (deterministic).
        let mut order: Vec<usize> = (0..cause::N).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(t[i] % w), i));
        for i in order {
            if rem == 0 {
                break;
            }
            if !t[i].is_multiple_of(w) {
                parts[i] += 1;
                rem -= 1;
            }
        }
        parts[cause::COMPUTE] += rem;
        Breakdown {
            compute: parts[cause::COMPUTE],
            tlb_hit: parts[cause::TLB_HIT],
            walk_by_level: [
                parts[cause::WALK],
                parts[cause::WALK + 1],
                parts[cause::WALK + 2],
                parts[cause::WALK + 3],
            ],
            walk_handler: parts[cause::WALK_HANDLER],
            walk_queue: parts[cause::WALK_QUEUE],
            data_by_level: [
                parts[cause::DATA],
                parts[cause::DATA + 1],
                parts[cause::DATA + 2],
                parts[cause::DATA + 3],
            ],
            data_queue: parts[cause::DATA_QUEUE],
            stream: parts[cause::STREAM],
            fault: parts[cause::FAULT],
            io: parts[cause::IO],
            kernel: parts[cause::KERNEL],
            idle: parts[cause::IDLE],
        }
    }
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core")
            .field("now", &self.now)
            .field("instr", &self.instr)
            .finish()
    }
}

/// Splits `amount` over the parts of `life` from issue to completion (proportionally; the
/// rounding remainder to its data), and its wait for a producer to its data too.
fn charge_own(ticks: &mut [u64; cause::N], life: &Life, amount: u64) {
    charge_own_with::<true>(ticks, life, amount)
}

/// `charge_own`; `ONE_LEVEL`: with the one-level walk's shortcut (false: every walk by the
/// general rule, the oracle `the_one_level_walk_split_is_the_general_one` compares with).
#[inline(always)]
fn charge_own_with<const ONE_LEVEL: bool>(ticks: &mut [u64; cause::N], life: &Life, amount: u64) {
    if amount == 0 {
        return;
    }
    let data = cause::DATA + life.served.min(3) as usize;
    let walk = life.walk_end.saturating_sub(life.walk_start);
    let parts = [
        (life.tlb_end.saturating_sub(life.issue), cause::TLB_HIT),
        (
            life.walk_start.saturating_sub(life.tlb_end),
            cause::WALK_QUEUE,
        ),
        (
            life.data_start.saturating_sub(life.walk_end),
            cause::DATA_QUEUE,
        ),
    ];
    let total = life.done.saturating_sub(life.issue);
    if total == 0 {
        ticks[data] += amount;
        return;
    }
    // Shares by floating point (IEEE arithmetic: deterministic), rounded down and capped so
    // that the parts sum to `amount` exactly.
    let k = f(amount) / f(total);
    let mut given = 0;
    for (len, c) in parts {
        // An empty part gets nothing (0 * k is 0).
        if len > 0 {
            let x = floor(f(len) * k).min(amount - given);
            ticks[c] += x;
            given += x;
        }
    }
    if walk > 0 {
        let x = floor(f(walk) * k).min(amount - given);
        let w = &life.walk_by_level;
        let used = levels_used(w);
        if used == 0 {
            ticks[cause::WALK_QUEUE] += x;
        } else if ONE_LEVEL && used & (used - 1) == 0 {
            // One level (GUPS's usual walk: one reference, the page-walk caches held the
            // rest): the rule below gives it its share, at most `x`, and then the remainder,
            // `x` in all; without the division (tested: `the_one_level_walk_split_is_the_general_one`).
            ticks[cause::WALK + used.trailing_zeros() as usize] += x;
        } else {
            let wt: u64 = w.iter().map(|&c| c as u64).sum();
            let kw = f(x) / f(wt);
            let mut g = 0;
            let mut last = 3;
            for k in 0..4 {
                let c = life.walk_by_level[k];
                if c > 0 {
                    let part = floor(f(c as u64) * kw).min(x - g);
                    ticks[cause::WALK + k] += part;
                    g += part;
                    last = k;
                }
            }
            // The rounding remainder to the slowest level used.
            ticks[cause::WALK + last] += x - g;
        }
        given += x;
    }
    ticks[data] += amount - given;
}

/// The levels that served a walk's references (bit k: `w[k] > 0`). On x86-64 one SSE2 compare
/// of the four and its mask (as four compares and shifts, 16 host instructions a stall: the
/// walks of gups:size=1G use several levels); the same bits either way.
#[inline(always)]
fn levels_used(w: &[u32; 4]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86_64; the unaligned 16-byte load reads the four `u32`s of `w`.
    unsafe {
        use std::arch::x86_64::*;
        let zero = _mm_cmpeq_epi32(_mm_loadu_si128(w.as_ptr().cast()), _mm_setzero_si128());
        !(_mm_movemask_ps(_mm_castsi128_ps(zero)) as u32) & 15
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        (w[0] > 0) as u32
            | ((w[1] > 0) as u32) << 1
            | ((w[2] > 0) as u32) << 2
            | ((w[3] > 0) as u32) << 3
    }
}

/// `n as f64`, for `n < 2^63` (every tick count and amount): through the signed conversion, one
/// x86-64 instruction where the unsigned one takes several; the value is the same.
#[inline(always)]
fn f(n: u64) -> f64 {
    debug_assert!(n < 1 << 63);
    n as i64 as f64
}

/// `x as u64` for `0 <= x < 2^63` (shares of an amount below 2^63): through the signed
/// conversion, which gives the same value in that range. On x86-64 the bare truncating
/// instruction (`cvttsd2si`): `as` adds the saturation and NaN checks, five instructions more
/// per share (`charge_own` converts up to nine).
#[inline(always)]
fn floor(x: f64) -> u64 {
    debug_assert!((0.0..9.2e18).contains(&x));
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86_64. (Out of range the instruction gives i64::MIN: never UB.)
    unsafe {
        use std::arch::x86_64::*;
        _mm_cvttsd_si64(_mm_set_sd(x)) as u64
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        x as i64 as u64
    }
}

/// The smallest of the first `M` keys (`Core::mshr_key`; those past the machine's are +inf),
/// as the integer it holds. On x86-64 two at a time in SSE2 (`minpd`); the same value either
/// way (the keys are distinct integers below 2^53, exact as doubles).
#[inline(always)]
fn min_key<const M: usize>(k: &[f64; MAX_MSHRS]) -> u64 {
    const { assert!(M >= 1 && M <= MAX_MSHRS) };
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86_64; the unaligned 16-byte loads read the first `M` rounded
    // up to 2 (at most `MAX_MSHRS`) entries of `k`.
    unsafe {
        use std::arch::x86_64::*;
        let p = k.as_ptr();
        let mut m = _mm_loadu_pd(p);
        for i in 1..M.div_ceil(2) {
            m = _mm_min_pd(m, _mm_loadu_pd(p.add(2 * i)));
        }
        let m = _mm_min_sd(m, _mm_unpackhi_pd(m, m));
        floor(_mm_cvtsd_f64(m))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        floor(
            k[..M.div_ceil(2) * 2]
                .iter()
                .fold(f64::INFINITY, |a, &b| a.min(b)),
        )
    }
}

/// In one pass over the fill buffers: the first one holding `line`, and the first of those that
/// free first and when.
#[inline]
fn mshr_scan(lines: &[u64], done: &[u64], line: u64) -> (Option<usize>, usize, u64) {
    let mut same = usize::MAX;
    let (mut best, mut t) = (0, u64::MAX);
    // Backwards, so that the first match and the first minimum win.
    for i in (0..lines.len().min(done.len())).rev() {
        same = if lines[i] == line { i } else { same };
        let le = done[i] <= t;
        t = if le { done[i] } else { t };
        best = if le { i } else { best };
    }
    ((same != usize::MAX).then_some(same), best, t)
}

/// The retirement-blocking accesses in order, in a ring of a power-of-two size that doubles when
/// full (it rarely is: at most `window` accesses with distinct instructions are in flight).
/// `head` and `tail` count pops and pushes (they never wrap: 2^64 accesses), an entry's slot is
/// its count masked by `mask` (the length - 1): a pop is one increment, where a masked head
/// and a length were two updates and a mask derived from the length each time (about four
/// host instructions per access).
#[derive(Clone)]
struct Rob {
    e: Vec<(u64, u64, u64)>,
    mask: usize,
    head: usize,
    tail: usize,
}

impl Rob {
    fn new() -> Rob {
        Rob {
            e: vec![(0, 0, 0); RING],
            mask: RING - 1,
            head: 0,
            tail: 0,
        }
    }
    #[inline(always)]
    fn front(&self) -> Option<(u64, u64, u64)> {
        debug_assert!(self.e.len().is_power_of_two() && self.mask == self.e.len() - 1);
        // SAFETY: `e`'s length is a power of two (`RING`, doubled by `grow`) and `mask` is
        // that length - 1, so the masked index is below it. (The bounds check was a fifth of
        // `retire_to`'s loop: the compiler cannot see the length is not zero.)
        (self.head != self.tail).then(|| unsafe { *self.e.get_unchecked(self.head & self.mask) })
    }
    #[inline(always)]
    fn pop_front(&mut self) {
        debug_assert!(self.head != self.tail);
        self.head += 1;
    }
    #[inline(always)]
    fn push_back(&mut self, instr: u64, done: u64, acc: u64) {
        if self.tail - self.head > self.mask {
            self.grow();
        }
        debug_assert!(self.e.len().is_power_of_two() && self.mask == self.e.len() - 1);
        // SAFETY: as in `front`: the index is masked by a power-of-two length - 1.
        unsafe { *self.e.get_unchecked_mut(self.tail & self.mask) = (instr, done, acc) };
        self.tail += 1;
    }
    #[cold]
    fn grow(&mut self) {
        let n = self.e.len();
        let mut e = Vec::with_capacity(2 * n);
        e.extend((self.head..self.tail).map(|k| self.e[k & (n - 1)]));
        let len = e.len();
        e.resize(2 * n, (0, 0, 0));
        self.e = e;
        self.mask = 2 * n - 1;
        self.head = 0;
        self.tail = len;
    }
}

/// `min_slot` over the first `N` slots, with `N` known (unrolled).
#[inline(always)]
fn min_slot_n<const N: usize>(s: &[u64; MAX_WALKERS]) -> (usize, u64) {
    min_slot(&s[..N])
}

/// The slot that frees first and when.
#[inline]
fn min_slot(s: &[u64]) -> (usize, u64) {
    let mut best = 0;
    let mut t = u64::MAX;
    for (i, &d) in s.iter().enumerate() {
        if d < t {
            t = d;
            best = i;
        }
    }
    (best, t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core(window: u32, mshrs: u32) -> Core {
        core_sb(window, mshrs, 0)
    }

    fn core_sb(window: u32, mshrs: u32, store_buffer: u32) -> Core {
        Core::new(&CoreConfig {
            window,
            width: 4,
            mshrs,
            walkers: 2,
            stream_bytes_per_cycle: 16.0,
            store_buffer,
            loaded_cycles_per_miss: 0.0,
        })
    }

    /// Three stores that miss to DRAM (100 cycles), one instruction each, 4 ticks a cycle, 4
    /// fill buffers. With 2 store-buffer entries the third waits at dispatch (tick 3) for the
    /// first to commit (tick 1 + 400): it completes at 401 + 400 = 801 ticks, 201 cycles, and
    /// the 398 ticks of waiting are the first store's DRAM data. Unbounded, it dispatches at
    /// tick 3 and completes at 403: 101 cycles.
    #[test]
    fn a_full_store_buffer_stalls_dispatch_until_its_oldest_store_commits() {
        for (sb, cycles, dram_ticks) in [(2, 201, 398), (3, 101, 0), (0, 101, 0)] {
            let mut c = core_sb(64, 4, sb);
            for line in 0..3 {
                c.access(MemOp::Store, 1, 0, &miss(100, line));
            }
            assert_eq!(c.ticks[cause::DATA + 3], dram_ticks, "store buffer {sb}");
            assert_eq!(c.cycles(), cycles, "store buffer {sb}");
            let b = c.breakdown();
            assert_eq!(b.total(), c.cycles());
        }
    }

    /// Stores commit in program order: a store that hits L1 behind one that misses holds its
    /// entry until the miss's line arrives. Entries: 1 miss, then 1 hit, then a third store:
    /// the third waits for the hit's commit, which is the miss's (tick 1 + 400), not the
    /// hit's own 2 + 16.
    #[test]
    fn a_store_commits_after_every_older_store() {
        let mut c = core_sb(64, 4, 2);
        c.access(MemOp::Store, 1, 0, &miss(100, 7));
        let hit = l1_hit(8);
        c.access(MemOp::Store, 1, 0, &hit);
        // The third store takes the first entry (committed at 401); the fourth the second,
        // whose commit is also 401 (in order), not 18.
        c.access(MemOp::Store, 1, 0, &hit);
        assert_eq!(c.now, 401);
        c.access(MemOp::Store, 1, 0, &hit);
        assert_eq!(
            c.now, 402,
            "the in-order commit of the hit freed its entry at 401"
        );
        // Read-modify-writes take entries too.
        let mut r = core_sb(64, 4, 1);
        r.access(MemOp::Rmw, 1, 0, &miss(100, 1));
        r.access(MemOp::Rmw, 1, 0, &miss(100, 2));
        assert_eq!(r.now, 401);
        // Loads do not.
        let mut l = core_sb(64, 4, 1);
        l.access(MemOp::Load, 1, 0, &miss(100, 1));
        l.access(MemOp::Load, 1, 0, &miss(100, 2));
        assert_eq!(l.now, 2);
    }

    /// A store retires, and so commits, only after every older load: stores that hit L1
    /// behind a load that misses fill the buffer, and the next store waits for the load.
    /// Accesses 20 instructions (ticks) apart: a load miss at tick 20 (done at 20 + 400), then
    /// three L1-hit stores (4 cycles, 16 ticks) with 2 entries: the third, at tick 80, waits
    /// until 420. After a store that hits instead of the load, every store's entry has
    /// committed 16 ticks after it was taken, before the next needs it: no wait.
    #[test]
    fn stores_behind_a_load_miss_fill_the_store_buffer() {
        let hit = l1_hit(9);
        for (load, now) in [(true, 420), (false, 80)] {
            let mut c = core_sb(64, 4, 2);
            if load {
                c.access(MemOp::Load, 20, 0, &miss(100, 1));
            } else {
                c.access(MemOp::Store, 20, 0, &hit);
            }
            c.access(MemOp::Store, 20, 0, &hit);
            c.access(MemOp::Store, 20, 0, &hit);
            c.access(MemOp::Store, 20, 0, &hit);
            assert_eq!(c.now, now, "after a load miss: {load}");
        }
    }

    /// The older load a store waits for is the latest to complete, not the last issued: a
    /// miss (done at 20 + 400), then a load that hits (done at 40 + 16), then two stores with
    /// one entry: the second waits for the first's commit, after the miss (420).
    #[test]
    fn a_store_waits_for_the_latest_older_load_not_the_last() {
        let mut c = core_sb(64, 4, 1);
        c.access(MemOp::Load, 20, 0, &miss(100, 1));
        c.access(MemOp::Load, 20, 0, &l1_hit(2));
        c.access(MemOp::Store, 20, 0, &l1_hit(3));
        c.access(MemOp::Store, 20, 0, &l1_hit(3));
        assert_eq!(c.now, 420);
    }

    /// calibrate's store-buffer benchmark (crates/splab/src/calibrate/storebuf.rs) run on the
    /// model: two independent chases that miss (400 cycles), each hop followed by K stores
    /// that hit L1. While the K stores after a hop fit in the buffer, the other chase's hop
    /// dispatches and the two misses overlap: about one miss a step. Past that, each hop waits
    /// for the other: two a step. The knee is at the buffer's size, which is what the
    /// benchmark reads from a machine.
    #[test]
    fn the_store_buffer_benchmark_knees_at_the_buffer_size() {
        let hit = l1_hit(9);
        let per_step = |n: u32, k: u64| {
            let mut c = core_sb(224, 10, n);
            let steps = 200;
            for s in 0..steps {
                for chain in 0..2u64 {
                    // Each hop depends on the same chain's previous hop, 2K + 2 accesses back.
                    let dep = if s == 0 { 0 } else { 2 * k + 2 };
                    c.access(MemOp::Load, 1, dep, &miss(400, 2 * s + chain));
                    for _ in 0..k {
                        c.access(MemOp::Store, 1, 0, &hit);
                    }
                }
            }
            c.cycles() as f64 / steps as f64
        };
        for n in [24u32, 32, 56] {
            let below = per_step(n, n as u64 - 4);
            let at = per_step(n, n as u64);
            let above = per_step(n, n as u64 + 4);
            assert!(
                below < 500.0 && at < 500.0,
                "store buffer {n}: {below} {at}"
            );
            assert!(above > 750.0, "store buffer {n}: {above}");
        }
    }

    /// A reference that hits L1 (4 cycles).
    fn l1_hit(line: u64) -> Trip {
        Trip {
            served: 0,
            latency: 4,
            line,
            ..Trip::default()
        }
    }

    fn miss(latency: u64, line: u64) -> Trip {
        Trip {
            served: 3,
            latency,
            line,
            ..Trip::default()
        }
    }

    /// Loaded latency (`loaded_cycles_per_miss` 10, width 4: 40 ticks a miss in flight): three
    /// independent DRAM misses of 100 cycles dispatched at ticks 1, 2, 3 start with 0, 1 and 2
    /// others in flight and complete at 401, 442 and 483 ticks (121 cycles; 101 without it).
    /// A miss served by L2 neither waits nor counts: the DRAM miss after one DRAM miss and one
    /// L2 miss starts with one other (443), and the L2 miss completes at its own 2 + 64.
    #[test]
    fn a_miss_beyond_l2_waits_for_each_other_one_in_flight() {
        let loaded = |cycles: f64| {
            Core::new(&CoreConfig {
                window: 64,
                width: 4,
                mshrs: 4,
                walkers: 2,
                stream_bytes_per_cycle: 16.0,
                store_buffer: 0,
                loaded_cycles_per_miss: cycles,
            })
        };
        let mut c = loaded(10.0);
        let mut done = Vec::new();
        for line in 0..3 {
            c.access(MemOp::Load, 1, 0, &miss(100, line));
            done.push(c.horizon);
        }
        assert_eq!(done, [401, 442, 483]);
        assert_eq!(c.cycles(), 121);
        let mut plain = loaded(0.0);
        for line in 0..3 {
            plain.access(MemOp::Load, 1, 0, &miss(100, line));
        }
        assert_eq!(plain.cycles(), 101);

        let mut m = loaded(10.0);
        m.access(MemOp::Load, 1, 0, &miss(100, 1));
        let l2 = Trip {
            served: 1,
            latency: 16,
            line: 2,
            ..Trip::default()
        };
        m.access(MemOp::Load, 1, 0, &l2);
        assert_eq!(m.mshr_done[..2], [401, 66]);
        m.access(MemOp::Load, 1, 0, &miss(100, 3));
        assert_eq!(m.horizon, 443);
        // An LLC hit (served 2) waits too.
        let mut h = loaded(10.0);
        h.access(MemOp::Load, 1, 0, &miss(100, 1));
        let llc = Trip {
            served: 2,
            ..miss(30, 2)
        };
        h.access(MemOp::Load, 1, 0, &llc);
        assert_eq!(h.horizon, 401);
        assert_eq!(h.mshr_done[1], 2 + 120 + 40);
        // A miss that completes as the next one starts is no longer in flight: the first
        // completes at 1 + 4 ticks, the second dispatches 4 instructions later, at tick 5.
        let mut e = loaded(10.0);
        e.access(MemOp::Load, 1, 0, &miss(1, 1));
        e.access(MemOp::Load, 4, 0, &miss(100, 2));
        assert_eq!(e.mshr_done[..2], [5, 405]);
    }

    #[test]
    fn independent_misses_overlap_up_to_the_mshrs() {
        // 1000 independent DRAM misses of 200 cycles, 2 instructions each, 10 fill buffers:
        // bounded by 200/10 = 20 cycles each.
        let mut c = core(224, 10);
        for i in 0..1000 {
            c.access(MemOp::Load, 2, 0, &miss(200, i));
        }
        let per = c.cycles() as f64 / 1000.0;
        assert!((19.0..22.0).contains(&per), "{per}");
        let b = c.breakdown();
        assert_eq!(b.total(), c.cycles());
        assert!(b.data_by_level[3] + b.data_queue > b.compute, "{b:?}");
    }

    #[test]
    fn the_fill_buffer_keys_find_what_the_scan_finds() {
        let mut c = core(224, 10);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Few distinct lines (merges, and buffers reused out of order), mixed levels.
            let line = (x >> 8) % 24;
            let want = mshr_scan(&c.mshr_line[..10], &c.mshr_done[..10], line);
            assert_eq!(c.mshr_scan_n::<10>(line), want);
            let t = Trip {
                served: (x % 4) as u8,
                latency: [4, 12, 40, 200][(x % 4) as usize],
                line,
                ..Trip::default()
            };
            c.access(MemOp::Load, 1 + (x >> 20) % 5, 0, &t);
            let mut by_low = [0u8; 256];
            for &l in c.mshr_line.iter().filter(|&&l| l != u64::MAX) {
                by_low[l as u8 as usize] += 1;
            }
            assert_eq!(c.mshr_by_low, by_low);
        }
    }

    #[test]
    fn levels_used_marks_the_nonzero_levels() {
        for bits in 0..16u32 {
            for v in [1u32, 7, 1 << 31, u32::MAX] {
                let w: [u32; 4] = std::array::from_fn(|k| if bits >> k & 1 == 1 { v } else { 0 });
                assert_eq!(levels_used(&w), bits, "{w:?}");
            }
        }
    }

    /// Random lives (walks by zero to four levels, empty and long parts, stalls shorter and
    /// longer than the life) through `charge_own` and the general rule: the same ticks.
    #[test]
    fn the_one_level_walk_split_is_the_general_one() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for _ in 0..200_000 {
            let issue = next(1 << 40);
            let tlb_end = issue + [0, 1, 28, next(1000)][next(4) as usize];
            let walk_start = tlb_end + [0, 0, next(50), next(5000)][next(4) as usize];
            let mut walk_by_level = [0u32; 4];
            for c in walk_by_level.iter_mut() {
                if next(3) == 0 {
                    *c = [1, 4, 12, 40, 200, next(1 << 20) as u32][next(6) as usize];
                }
            }
            let walk = if next(4) == 0 {
                next(3000)
            } else {
                walk_by_level.iter().map(|&c| c as u64).sum::<u64>() * 4 + next(50)
            };
            let walk_end = walk_start + walk;
            let data_start = walk_end + [0, next(10), next(2000)][next(3) as usize];
            let done = data_start + [0, 16, next(1000)][next(3) as usize];
            let life = Life {
                dispatch: issue,
                issue,
                walk_start,
                walk_end,
                data_start,
                done,
                tlb_end,
                walk_by_level,
                served: next(5) as u8,
                producer: 0,
            };
            let amount = [0, 1, next(100), next(1 << 16), next(1 << 40)][next(5) as usize];
            let (mut a, mut b) = ([0; cause::N], [0; cause::N]);
            charge_own(&mut a, &life, amount);
            charge_own_with::<false>(&mut b, &life, amount);
            assert_eq!(a, b, "{life:?} {amount}");
            assert_eq!(a.iter().sum::<u64>(), amount);
        }
    }

    /// A fill buffer's completion past 2^48 ticks (a key no longer exact as a double) turns the
    /// unrolled key scan off for good; the scan of `mshr_done` then finds the same buffers.
    #[test]
    fn a_completion_past_2_48_ticks_scans_the_fill_buffers() {
        for m in [10, 8, 6, 4] {
            let mut c = core(224, m);
            assert_eq!(c.mshr_scan_by as u32, if m == 4 { 0 } else { m });
            c.access(MemOp::Load, 1, 0, &miss(1 << 40, 1));
            assert_eq!(c.mshr_scan_by as u32, if m == 4 { 0 } else { m });
            c.access(MemOp::Load, 1, 0, &miss(1 << 47, 2));
            assert_eq!(c.mshr_scan_by, 0);
            // The first buffer to free is still the earliest (line 1's): a new line takes
            // another free one, and a third access to line 2 merges with its fill.
            c.access(MemOp::Load, 1, 0, &miss(100, 3));
            let at = c.mshr_done[c.mshr_line[..m as usize]
                .iter()
                .position(|&l| l == 2)
                .unwrap()];
            c.access(MemOp::Load, 1, 0, &miss(100, 2));
            assert_eq!(c.lives[3].done, at);
            assert_eq!(c.breakdown().total(), c.cycles());
        }
    }

    #[test]
    fn a_dependent_chain_serialises() {
        let mut c = core(224, 10);
        for i in 0..100 {
            c.access(MemOp::Load, 2, if i == 0 { 0 } else { 1 }, &miss(200, i));
        }
        let per = c.cycles() as f64 / 100.0;
        assert!((199.0..202.0).contains(&per), "{per}");
        assert_eq!(c.breakdown().total(), c.cycles());
    }

    /// A load that hits a line whose miss is still in flight (the caches, untimed, already
    /// hold it) gets its data with the fill: a tree's descent, whose child pointer is loaded
    /// from the line its key's load missed, takes a miss per node, not an L1 hit.
    #[test]
    fn a_hit_on_a_line_in_flight_waits_for_the_fill() {
        let hit = |line| Trip {
            served: 0,
            latency: 4,
            line,
            ..Trip::default()
        };
        let mut c = core(224, 10);
        // Node k: its key misses (200 cycles, line k), its child pointer hits the same line;
        // node k + 1's loads depend on that pointer (dep 1 and 2).
        for k in 0..100u64 {
            c.access(MemOp::Load, 1, if k == 0 { 0 } else { 1 }, &miss(200, k));
            c.access(MemOp::Load, 1, if k == 0 { 0 } else { 2 }, &hit(k));
        }
        // Tick 1 + 800 per node (width 4): node 99's pointer arrives at tick 80,001.
        assert_eq!(c.cycles(), 20_001);
        let b = c.breakdown();
        assert_eq!(b.total(), c.cycles());
        // The waits are DRAM's (the fill's), not L1's.
        assert!(
            b.data_by_level[3] > 19_900 && b.data_by_level[0] < 10,
            "{b:?}"
        );

        // A hit after the fill arrived is an L1 hit: the miss is done at tick 801, the hit
        // dispatches at tick 1,001 and completes 16 ticks later.
        let mut c = core(224, 10);
        c.access(MemOp::Load, 1, 0, &miss(200, 7));
        c.access(MemOp::Load, 1000, 0, &hit(7));
        assert_eq!(c.cycles(), 255);
    }

    #[test]
    fn the_window_limits_overlap() {
        // 50 instructions per access and a 100-instruction window: 2 misses at a time.
        let mut c = core(100, 10);
        for i in 0..200 {
            c.access(MemOp::Load, 50, 0, &miss(200, i));
        }
        let per = c.cycles() as f64 / 200.0;
        assert!((95.0..110.0).contains(&per), "{per}");
    }

    #[test]
    fn stores_do_not_block_and_faults_drain() {
        let mut c = core(64, 10);
        for i in 0..100 {
            c.access(MemOp::Store, 4, 0, &miss(200, i));
        }
        // Stores are bounded by the fill buffers only: 20 cycles each.
        let t = c.cycles();
        assert!((100 * 19..=100 * 21 + 200).contains(&t), "{t}");
        c.serial(1000, cause::FAULT);
        let b = c.breakdown();
        assert_eq!(b.fault, 1000);
        assert_eq!(b.total(), c.cycles());
    }

    #[test]
    fn the_reorder_ring_grows_in_order() {
        let mut r = Rob::new();
        for k in 0..3 * RING as u64 + 5 {
            r.push_back(k, 2 * k, 3 * k);
            if k % 3 == 0 {
                r.pop_front();
            }
        }
        let mut k = (3 * RING as u64 + 5).div_ceil(3);
        while let Some((i, d, a)) = r.front() {
            assert_eq!((i, d, a), (k, 2 * k, 3 * k));
            r.pop_front();
            k += 1;
        }
        assert_eq!(k, 3 * RING as u64 + 5);
    }

    /// A walk's fixed cost is part of its latency: a dependent chain of walks pays it on every
    /// hop, exactly (STLB lookup 7 + two L1 references 8 + fixed 11 + the data's L1 hit 4 = 30
    /// cycles a hop), and it is walk time in the breakdown; independent walks on two walkers
    /// overlap it as they overlap their references.
    #[test]
    fn a_walks_fixed_cost_is_walk_latency() {
        let hop = |fixed: u32| Trip {
            tlb_cycles: 7,
            walked: true,
            walk_by_level: [8, 0, 0, 0],
            walk_fixed: fixed,
            served: 0,
            latency: 4,
            line: 5,
            ..Trip::default()
        };
        let mut walk = Vec::new();
        for (fixed, cycles) in [(0, 1_901), (11, 3_001)] {
            let mut c = core(224, 10);
            for k in 0..100u64 {
                c.access(MemOp::Load, 1, if k == 0 { 0 } else { 1 }, &hop(fixed));
            }
            // Tick 1, then 4 ticks a cycle: 100 x (7 + 8 + fixed + 4) cycles.
            assert_eq!(c.cycles(), cycles, "fixed {fixed}");
            let b = c.breakdown();
            assert_eq!(b.total(), c.cycles());
            walk.push(b.walk());
        }
        // The 1,100 cycles the fixed cost adds are walk time (the stalls' attribution spreads
        // the dispatch's overlap over the parts: within 5%).
        assert!((1_045..=1_100).contains(&(walk[1] - walk[0])), "{walk:?}");
        // Two independent walks of 300 + 100 cycles on two walkers: one walk's time, not two.
        let t = Trip {
            walked: true,
            walk_by_level: [0, 0, 0, 300],
            walk_fixed: 100,
            served: 0,
            latency: 4,
            ..Trip::default()
        };
        let mut c = core(224, 10);
        c.access(MemOp::Load, 1, 0, &t);
        c.access(MemOp::Load, 1, 0, &t);
        assert!((404..=406).contains(&c.cycles()), "{}", c.cycles());
    }

    #[test]
    fn walkers_limit_concurrent_walks() {
        let mut c = core(224, 10);
        let t = Trip {
            walked: true,
            walk_by_level: [0, 0, 0, 300],
            served: 0,
            latency: 4,
            ..Trip::default()
        };
        for _ in 0..100 {
            c.access(MemOp::Load, 2, 0, &t);
        }
        let per = c.cycles() as f64 / 100.0;
        assert!((148.0..155.0).contains(&per), "{per}");
        let b = c.breakdown();
        // Time waiting for a walker and walking: all of it walk time.
        assert!(b.walk() > 100 * 140, "{b:?}");
    }
}
