//! `kv`: a Redis-like key-value server whose objects live in a jemalloc arena (workload/
//! jemalloc.rs), for seed 003's Redis workloads (section 6, Tables 1 and 10; the Quicksilver
//! repository's scripts: docs/reference-policies.md section 3).
//!
//! The server's data is Redis 4.0's main dictionary (`src/dict.c`, `src/server.h`), every piece
//! allocated by `zmalloc`, i.e. jemalloc:
//! - the bucket table: `size` pointers, a power of two from `DICT_HT_INITIAL_SIZE` 4, grown to
//!   the power of two at or above `2 x used` once `used >= size` (`_dictExpandIfNeeded`). Redis
//!   rehashes incrementally (`_dictRehashStep`: each request first moves one bucket of the old
//!   table to the new one, new keys go to the new one, lookups search both; the old table is
//!   freed when empty);
//! - per key: a `dictEntry` (key, value, next: 24 bytes), the key as an sds string (16
//!   characters, memtier's `memtier-NNNNNNNN`, plus `sdshdr8`'s 3 bytes and the NUL), the value's
//!   `robj` (16 bytes) and its sds string (the value plus `sdshdr16`'s 5 bytes, `sdshdr32`'s 9
//!   from 64 KiB, and the NUL: an 8 KiB value is an 8,198-byte allocation, jemalloc's 10 KiB
//!   class, two to a five-page run). A new entry goes at the head of its chain (`dictAddRaw`).
//!
//! Requests (each between `Engine::request_begin` and `request_end`, so the report has their
//! latency): SET of a new key (the lookup, four allocations, the key, object and value written,
//! the entry linked), SET of an existing key (`dbOverwrite`: the old object and value freed, new
//! ones allocated and written), GET (the lookup, dependent loads down the chain, the value sent
//! to the socket: `Engine::send`), DEL (the lookup, the entry unlinked, its four allocations
//! freed). Parsing, the reply buffers and the network are not modelled: only the memory work.
//!
//! Phases (`phase=`; seed 003 6: "Cold ... populates an empty Redis instance with 16GB of 4KB
//! objects. Warm ... a set/get ratio of 5:5 ... Del-70 and Del-50 insert 2 million 8KB objects
//! and randomly delete 70% and 50% of them ... Range-S and Range-XL insert randomly sized
//! objects" (Range-XL: 256B-1MB, section 3.2)):
//! - `cold`: insert `objects` objects of `size` bytes;
//! - `warm`: the same, then `ops` requests, GET or SET of a uniformly random key, 5:5;
//! - `del:PCT`: insert, then DEL a uniformly random PCT% of the keys;
//! - `range:MIN..MAX`: insert objects of sizes uniform in [MIN, MAX].
//!
//! Then the server stays up, idle, `idle` simulated seconds, so that the kernel's daemons act on
//! what the phase left: the default (`idle=auto`) is one full pass of khugepaged over the heap
//! at Linux's default rate (`pages_to_scan` 4096 every `scan_sleep_millisecs` 10 s:
//! docs/reference-policies.md section 2) plus one sleep, the same for every policy. The
//! allocator purges as it frees (jemalloc 4.x's ratio mode: jemalloc.rs), so no decay time is
//! waited for. The server does not exit: `memory.footprint_end_bytes` is what it holds then.
//!
//! `jemalloc=auto|linux|freebsd`: jemalloc's build: Linux's retains deallocated chunks purged
//! with MADV_DONTNEED, FreeBSD's munmaps them and purges runs with MADV_FREE (jemalloc.rs).
//! `auto`: FreeBSD's under a reserving policy (FreeBSD and its descendants), else Linux's.

use super::jemalloc::{size_class, Arena, Sys, PAGE};
use super::Batch;
use crate::engine::Engine;
use crate::error::{Result, SimError};
use crate::rng::Rng;
use crate::spec::{parse_size, Spec};
use crate::units::{Access, MemOp, Pid};
use crate::vm::Advice;

/// Bytes of a key: memtier_benchmark's default keys, `memtier-` and up to 8 digits.
const KEY_LEN: u64 = 16;
/// `sizeof(dictEntry)` and `sizeof(robj)` on x86-64 (Redis 4.0 dict.h, server.h).
const ENTRY: u64 = 24;
const ROBJ: u64 = 16;
/// `DICT_HT_INITIAL_SIZE`.
const DICT_INITIAL: u64 = 4;
const LINE: u64 = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Cold,
    Warm,
    Del(u64),
    Range(u64, u64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Build {
    Auto,
    Linux,
    FreeBsd,
}

pub struct Kv {
    phase: Phase,
    objects: u64,
    size: u64,
    ops: u64,
    /// Idle seconds after the phase; None: auto.
    idle: Option<u64>,
    build: Build,
    stats: Option<serde_json::Value>,
}

fn bad(key: &str, v: &str, expected: &str) -> SimError {
    SimError::BadInput(format!(
        "workload 'kv': bad value '{v}' for '{key}': expected {expected}"
    ))
}

/// The sds allocation of a string of `len` bytes (Redis 4.0 sds.c `sdsReqType`, header + NUL).
fn sds(len: u64) -> u64 {
    let hdr = match len {
        0..256 => 3,
        256..65536 => 5,
        _ => 9,
    };
    len + hdr + 1
}

impl Kv {
    pub fn parse(spec: &mut Spec) -> Result<Kv> {
        let max = super::MAX_SIZE;
        let phase_text = spec.take_str("phase").unwrap_or_else(|| "cold".into());
        let expected =
            "cold, warm, del:PCT (0 to 100) or range:MIN..MAX (sizes, e.g. range:256..1M)";
        let phase = match phase_text.split_once(':') {
            None if phase_text == "cold" => Phase::Cold,
            None if phase_text == "warm" => Phase::Warm,
            Some(("del", p)) => match p.parse::<u64>() {
                Ok(p) if p <= 100 => Phase::Del(p),
                _ => return Err(bad("phase", &phase_text, expected)),
            },
            Some(("range", r)) => {
                let (lo, hi) = r
                    .split_once("..")
                    .and_then(|(a, b)| Some((parse_size(a)?, parse_size(b)?)))
                    .filter(|&(a, b)| a >= 1 && a <= b && b <= 1 << 30)
                    .ok_or_else(|| bad("phase", &phase_text, expected))?;
                Phase::Range(lo, hi)
            }
            _ => return Err(bad("phase", &phase_text, expected)),
        };
        let objects = spec.take_count("objects", 100_000, 1, 1 << 28)?;
        let size = spec.take_size("size", 8 << 10, 1, 1 << 30)?;
        let ops = spec.take_count("ops", objects, 0, 1 << 40)?;
        let idle =
            match spec.take_str("idle") {
                None => None,
                Some(v) if v == "auto" => None,
                Some(v) => Some(v.parse::<u64>().ok().filter(|&s| s <= 1 << 20).ok_or_else(
                    || {
                        bad(
                            "idle",
                            &v,
                            "auto or whole simulated seconds up to 1048576, e.g. idle=60",
                        )
                    },
                )?),
            };
        let build = match spec.take_choice("jemalloc", "auto", &["auto", "linux", "freebsd"])? {
            "linux" => Build::Linux,
            "freebsd" => Build::FreeBsd,
            _ => Build::Auto,
        };
        let biggest = match phase {
            Phase::Range(_, hi) => hi,
            _ => size,
        };
        if objects.saturating_mul(biggest) > max {
            return Err(bad(
                "objects",
                &objects.to_string(),
                "objects x size (the largest of a range) at most 1T",
            ));
        }
        Ok(Kv {
            phase,
            objects,
            size,
            ops,
            idle,
            build,
            stats: None,
        })
    }
}

/// The server process: the arena's system calls go to the engine, its metadata writes and the
/// dictionary's accesses through a batch (flushed before any system call and at each request's
/// end, so the clock is the request's).
struct Server<'a> {
    e: &'a mut Engine,
    pid: Pid,
    batch: Batch,
    purge: Advice,
}

impl Sys for Server<'_> {
    fn mmap(&mut self, len: u64) -> Result<u64> {
        self.batch.flush(self.e)?;
        super::map_anon(self.e, self.pid, len)
    }
    fn munmap(&mut self, addr: u64, len: u64) -> Result<()> {
        self.batch.flush(self.e)?;
        self.e.munmap(self.pid, addr, len)
    }
    /// On a machine whose base page is larger than jemalloc's 4 KiB, only the whole base pages
    /// inside the range are purged.
    fn purge(&mut self, addr: u64, len: u64) -> Result<()> {
        self.batch.flush(self.e)?;
        let bs = self.e.os.machine.base_size();
        let (start, end) = (addr.div_ceil(bs) * bs, (addr + len) / bs * bs);
        if start >= end {
            return Ok(());
        }
        self.e.madvise(self.pid, start, end - start, self.purge)
    }
    fn touch(&mut self, addr: u64) -> Result<()> {
        self.batch.push(self.e, Access::new(addr, MemOp::Rmw, 0, 1))
    }
}

impl Server<'_> {
    fn op(&mut self, va: u64, op: MemOp, producer: Option<u64>) -> Result<u64> {
        let n = self.batch.pushed;
        let dep = self.batch.dep_on(producer);
        self.batch.push(self.e, Access::new(va, op, dep, 1))?;
        Ok(n)
    }
    /// A copy into `[va, va + len)`: a store per line, streamed.
    fn fill(&mut self, va: u64, len: u64) -> Result<()> {
        self.batch.flush(self.e)?;
        let first = va & !(LINE - 1);
        let lines = (va + len - first).div_ceil(LINE);
        self.e
            .access_run(self.pid, first, LINE as i64, lines, MemOp::Store, 1)
    }
    fn begin(&mut self) -> Result<()> {
        self.batch.flush(self.e)?;
        self.e.request_begin(self.pid);
        Ok(())
    }
    fn end(&mut self) -> Result<()> {
        self.batch.flush(self.e)?;
        self.e.request_end(self.pid);
        Ok(())
    }
}

#[derive(Clone, Copy)]
struct Obj {
    hash: u64,
    entry: u64,
    key: u64,
    robj: u64,
    val: u64,
    size: u64,
}

/// One hash table of the dictionary: its bucket array's address and chains (head first).
struct Table {
    addr: u64,
    buckets: Vec<Vec<u32>>,
}

impl Table {
    fn slot(&self, hash: u64) -> usize {
        (hash & (self.buckets.len() as u64 - 1)) as usize
    }
}

/// Redis's main dictionary: `ht[0]`, and `ht[1]` while rehashing (`rehashidx` the next bucket
/// of `ht[0]` to move; see the module comment).
struct Dict {
    ht: Vec<Table>,
    rehashidx: usize,
    used: u64,
}

impl Dict {
    /// The chain walk to `id` (dependent loads from the bucket), ht[0] first (a bucket already
    /// moved is empty); returns (table, bucket, position in the chain).
    fn lookup(&self, s: &mut Server, objs: &[Obj], id: u32) -> Result<(usize, usize, usize)> {
        for (t, tab) in self.ht.iter().enumerate() {
            let b = tab.slot(objs[id as usize].hash);
            let mut p = s.op(tab.addr + 8 * b as u64, MemOp::Load, None)?;
            for (i, &o) in tab.buckets[b].iter().enumerate() {
                let ob = &objs[o as usize];
                let ent = s.op(ob.entry, MemOp::Load, Some(p))?;
                s.op(ob.key, MemOp::Load, Some(ent))?;
                if o == id {
                    return Ok((t, b, i));
                }
                p = ent;
            }
        }
        Err(SimError::InvalidEvent(format!(
            "kv: key {id} not in its bucket"
        )))
    }
}

/// One jemalloc arena and the dictionary.
struct Store {
    arena: Arena,
    dict: Dict,
    objs: Vec<Obj>,
    live: Vec<bool>,
}

impl Store {
    /// SET of a new key `id` (the object record's hash and size set).
    fn insert(&mut self, s: &mut Server, id: u32) -> Result<()> {
        s.begin()?;
        self.rehash_step(s)?;
        if self.dict.ht.len() == 1 && self.dict.used >= self.dict.ht[0].buckets.len() as u64 {
            let size = (self.dict.used * 2).next_power_of_two();
            let addr = self.arena.alloc(s, 8 * size)?;
            self.dict.ht.push(Table {
                addr,
                buckets: vec![Vec::new(); size as usize],
            });
            self.dict.rehashidx = 0;
        }
        // The lookup that finds the key absent: its bucket and chain in each table.
        let hash = self.objs[id as usize].hash;
        for tab in &self.dict.ht {
            let b = tab.slot(hash);
            let mut p = s.op(tab.addr + 8 * b as u64, MemOp::Load, None)?;
            for &o in &tab.buckets[b] {
                let ob = self.objs[o as usize];
                p = s.op(ob.entry, MemOp::Load, Some(p))?;
                s.op(ob.key, MemOp::Load, Some(p))?;
            }
        }
        let size = self.objs[id as usize].size;
        let o = Obj {
            entry: self.arena.alloc(s, ENTRY)?,
            key: self.arena.alloc(s, sds(KEY_LEN))?,
            robj: self.arena.alloc(s, ROBJ)?,
            val: self.arena.alloc(s, sds(size))?,
            ..self.objs[id as usize]
        };
        s.fill(o.key, sds(KEY_LEN))?;
        s.fill(o.val, sds(size))?;
        s.op(o.robj, MemOp::Store, None)?;
        s.op(o.entry, MemOp::Store, None)?;
        // dictAddRaw: into ht[1] while rehashing.
        let tab = self.dict.ht.last_mut().expect("a table");
        let b = tab.slot(hash);
        s.op(tab.addr + 8 * b as u64, MemOp::Store, None)?;
        tab.buckets[b].insert(0, id);
        self.objs[id as usize] = o;
        self.dict.used += 1;
        self.live[id as usize] = true;
        s.end()
    }

    /// `_dictRehashStep`: one bucket of ht[0] moved to ht[1] (visiting at most 10 empty ones,
    /// `dictRehash`'s `empty_visits`), a store to its new bucket and to its `next` each; when
    /// ht[0] is empty it is freed and ht[1] becomes ht[0].
    fn rehash_step(&mut self, s: &mut Server) -> Result<()> {
        if self.dict.ht.len() < 2 {
            return Ok(());
        }
        let mut empty = 10;
        let n = self.dict.ht[0].buckets.len();
        while self.dict.rehashidx < n {
            let i = self.dict.rehashidx;
            self.dict.rehashidx += 1;
            s.op(self.dict.ht[0].addr + 8 * i as u64, MemOp::Load, None)?;
            let chain = std::mem::take(&mut self.dict.ht[0].buckets[i]);
            if chain.is_empty() {
                empty -= 1;
                if empty == 0 {
                    return Ok(());
                }
                continue;
            }
            for &id in chain.iter().rev() {
                let ob = self.objs[id as usize];
                let to = &mut self.dict.ht[1];
                let b = to.slot(ob.hash);
                s.op(to.addr + 8 * b as u64, MemOp::Store, None)?;
                s.op(ob.entry, MemOp::Store, None)?;
                to.buckets[b].insert(0, id);
            }
            break;
        }
        if self.dict.rehashidx >= n {
            let old = self.dict.ht.remove(0);
            self.arena.free(s, old.addr)?;
        }
        Ok(())
    }

    fn get(&mut self, s: &mut Server, id: u32) -> Result<()> {
        s.begin()?;
        self.rehash_step(s)?;
        self.dict.lookup(s, &self.objs, id)?;
        let ob = self.objs[id as usize];
        s.op(ob.robj, MemOp::Load, None)?;
        s.batch.flush(s.e)?;
        s.e.send(s.pid, ob.val, ob.size)?;
        s.end()
    }

    /// SET of an existing key (`dbOverwrite`): new object and value, the old ones freed.
    fn overwrite(&mut self, s: &mut Server, id: u32) -> Result<()> {
        s.begin()?;
        self.rehash_step(s)?;
        self.dict.lookup(s, &self.objs, id)?;
        let ob = self.objs[id as usize];
        let robj = self.arena.alloc(s, ROBJ)?;
        let val = self.arena.alloc(s, sds(ob.size))?;
        s.fill(val, sds(ob.size))?;
        s.op(robj, MemOp::Store, None)?;
        s.op(ob.entry, MemOp::Store, None)?;
        self.arena.free(s, ob.val)?;
        self.arena.free(s, ob.robj)?;
        self.objs[id as usize] = Obj { robj, val, ..ob };
        s.end()
    }

    fn delete(&mut self, s: &mut Server, id: u32) -> Result<()> {
        s.begin()?;
        self.rehash_step(s)?;
        let (t, b, i) = self.dict.lookup(s, &self.objs, id)?;
        let ob = self.objs[id as usize];
        let tab = &mut self.dict.ht[t];
        // Unlink: the previous entry's next, or the bucket.
        match i {
            0 => s.op(tab.addr + 8 * b as u64, MemOp::Store, None)?,
            _ => {
                let prev = tab.buckets[b][i - 1];
                s.op(self.objs[prev as usize].entry, MemOp::Store, None)?
            }
        };
        tab.buckets[b].remove(i);
        self.dict.used -= 1;
        self.live[id as usize] = false;
        for p in [ob.key, ob.val, ob.robj, ob.entry] {
            self.arena.free(s, p)?;
        }
        s.end()
    }
}

impl super::Workload for Kv {
    fn describe(&self) -> String {
        let phase = match self.phase {
            Phase::Cold => "cold".to_string(),
            Phase::Warm => "warm".to_string(),
            Phase::Del(p) => format!("del:{p}"),
            Phase::Range(a, b) => format!(
                "range:{}..{}",
                crate::units::fmt_size(a),
                crate::units::fmt_size(b)
            ),
        };
        let idle = self.idle.map_or("auto".to_string(), |s| s.to_string());
        let build = match self.build {
            Build::Auto => "auto",
            Build::Linux => "linux",
            Build::FreeBsd => "freebsd",
        };
        format!(
            "kv:phase={phase},objects={},size={},ops={},idle={idle},jemalloc={build}",
            self.objects,
            crate::units::fmt_size(self.size),
            self.ops
        )
    }

    fn expected_accesses(&self) -> Option<u64> {
        None
    }

    fn run(&mut self, e: &mut Engine, rng: &mut Rng) -> Result<()> {
        let freebsd = match self.build {
            Build::Auto => e.os.policy.reserv().is_some(),
            b => b == Build::FreeBsd,
        };
        // What the objects need at least (sizes rounded to their classes): more than the
        // machine's memory is an error naming the parameter, before any host memory is spent.
        let per_object = [ENTRY, sds(KEY_LEN), ROBJ]
            .map(size_class)
            .iter()
            .sum::<u64>()
            + size_class(sds(match self.phase {
                Phase::Range(lo, _) => lo,
                _ => self.size,
            }));
        if self.objects.saturating_mul(per_object) > e.os.machine.mem_bytes {
            return Err(bad(
                "objects",
                &self.objects.to_string(),
                &format!(
                    "at most what the machine's {} hold ({per_object} bytes an object at least)",
                    crate::units::fmt_size(e.os.machine.mem_bytes)
                ),
            ));
        }
        let pid = e.spawn()?;
        let mut s = Server {
            e,
            pid,
            batch: Batch::new(pid),
            purge: if freebsd {
                Advice::Free
            } else {
                Advice::DontNeed
            },
        };
        let mut st = Store {
            arena: Arena::new(freebsd, rng.next_u64()),
            dict: Dict {
                ht: Vec::new(),
                rehashidx: 0,
                used: 0,
            },
            objs: Vec::with_capacity(self.objects as usize),
            live: vec![false; self.objects as usize],
        };
        let addr = st.arena.alloc(&mut s, 8 * DICT_INITIAL)?;
        st.dict.ht.push(Table {
            addr,
            buckets: vec![Vec::new(); DICT_INITIAL as usize],
        });
        for _ in 0..self.objects {
            let size = match self.phase {
                Phase::Range(lo, hi) => lo + rng.below(hi - lo + 1),
                _ => self.size,
            };
            st.objs.push(Obj {
                hash: rng.next_u64(),
                entry: 0,
                key: 0,
                robj: 0,
                val: 0,
                size,
            });
        }
        let n = self.objects as u32;
        for id in 0..n {
            st.insert(&mut s, id)?;
        }
        let (mut gets, mut sets, mut dels) = (0u64, 0u64, 0u64);
        match self.phase {
            Phase::Warm => {
                for _ in 0..self.ops {
                    let id = rng.below(n as u64) as u32;
                    if rng.below(2) == 0 {
                        st.get(&mut s, id)?;
                        gets += 1;
                    } else {
                        st.overwrite(&mut s, id)?;
                        sets += 1;
                    }
                }
            }
            Phase::Del(pct) => {
                // A uniformly random pct% of the keys (a partial Fisher-Yates shuffle).
                let k = (n as u64 * pct / 100) as usize;
                let mut ids: Vec<u32> = (0..n).collect();
                for i in 0..k {
                    let j = i + rng.below((ids.len() - i) as u64) as usize;
                    ids.swap(i, j);
                    st.delete(&mut s, ids[i])?;
                    dels += 1;
                }
            }
            Phase::Cold | Phase::Range(..) => {}
        }
        // serverCron's incremental rehashing (`activerehashing yes`) finishes a rehash in
        // progress while the server idles.
        while st.dict.ht.len() == 2 {
            st.rehash_step(&mut s)?;
        }
        s.batch.flush(s.e)?;
        let footprint_after_phase = s.e.os.footprint_bytes();
        let idle = self.idle.unwrap_or_else(|| {
            // One khugepaged pass over every chunk the arena mapped, at Linux's default rate
            // (8 regions of 2MB a wake), plus one sleep.
            // jemalloc's chunks are 2 MiB, the size of x86-64's THP.
            (st.arena.stats.chunks_mapped.div_ceil(4096 / 512) + 1) * 10
        });
        let freq = s.e.os.machine.freq_hz;
        let until = s.e.clock() + idle * freq;
        s.e.idle_until(until)?;
        let a = &st.arena;
        self.stats = Some(serde_json::json!({
            "inserted": self.objects,
            "gets": gets,
            "sets": sets,
            "deleted": dels,
            "live_objects": st.live.iter().filter(|&&l| l).count(),
            "value_bytes_live": st.objs.iter().zip(&st.live).filter(|(_, &l)| l).map(|(o, _)| o.size).sum::<u64>(),
            "footprint_after_phase_bytes": footprint_after_phase,
            "idle_seconds": idle,
            "jemalloc": if freebsd { "freebsd" } else { "linux" },
            "heap": {
                "allocated_bytes": a.stats.live_bytes,
                "active_bytes": a.nactive * PAGE,
                "dirty_bytes": a.ndirty * PAGE,
                "mapped_bytes": a.mapped_bytes(),
                "retained_bytes": a.retained_bytes(),
                "chunks_mapped": a.stats.chunks_mapped,
                "chunks_unmapped": a.stats.chunks_unmapped,
                "purges": a.stats.purge_calls,
                "purged_bytes": a.stats.bytes_purged,
            },
        }));
        Ok(())
    }

    fn stats(&self) -> Option<serde_json::Value> {
        self.stats.clone()
    }
}
