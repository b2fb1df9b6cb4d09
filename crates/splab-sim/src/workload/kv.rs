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
use crate::report::human;
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

/// One key's record: its four allocations, its hash, its value's size and the next key of its
/// chain (the `dictEntry`'s `next`). Packed to 44 bytes, the host memory a key costs besides
/// its share of the bucket heads (`HOST_BYTES_PER_KEY`): `hash` keeps the low 32 bits of the
/// drawn hash, all a table of at most 2^29 buckets uses (`objects` is at most 2^28, and a
/// table is at most the power of two at or above twice that); `size` is at most 1 GiB; ids
/// are below 2^28, so `NIL` is no id.
#[derive(Clone, Copy)]
#[repr(C, packed(4))]
struct Obj {
    /// 0 while the key is not in the dictionary (before its SET, after its DEL).
    entry: u64,
    key: u64,
    robj: u64,
    val: u64,
    hash: u32,
    size: u32,
    next: u32,
}

const _: () = assert!(std::mem::size_of::<Obj>() == 44);

/// The end of a chain.
const NIL: u32 = u32::MAX;

/// Host bytes a key can need at the peak: its `Obj`, and 4 bytes of bucket head for each of
/// the up to 3 buckets a key has while the dictionary rehashes (`ht[0]` of `used` buckets and
/// `ht[1]` of twice that), plus the `del:` phase's shuffled ids (4 bytes a key).
const HOST_BYTES_PER_KEY: u64 = std::mem::size_of::<Obj>() as u64 + 3 * 4;
const HOST_BYTES_PER_DEL: u64 = 4;

/// One hash table of the dictionary: its bucket array's address and each bucket's first key
/// (the chains run through `Obj::next`, head first).
struct Table {
    addr: u64,
    heads: Vec<u32>,
}

impl Table {
    fn slot(&self, hash: u32) -> usize {
        (hash & (self.heads.len() as u32 - 1)) as usize
    }

    /// The keys of bucket `b`, head first.
    fn chain<'a>(&self, b: usize, objs: &'a [Obj]) -> impl Iterator<Item = u32> + 'a {
        std::iter::successors(Some(self.heads[b]).filter(|&o| o != NIL), move |&o| {
            Some(objs[o as usize].next).filter(|&n| n != NIL)
        })
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
    /// moved is empty); returns (table, bucket, the key before it in the chain).
    fn lookup(&self, s: &mut Server, objs: &[Obj], id: u32) -> Result<(usize, usize, Option<u32>)> {
        for (t, tab) in self.ht.iter().enumerate() {
            let b = tab.slot(objs[id as usize].hash);
            let mut p = s.op(tab.addr + 8 * b as u64, MemOp::Load, None)?;
            let mut prev = None;
            for o in tab.chain(b, objs) {
                let ob = objs[o as usize];
                let ent = s.op(ob.entry, MemOp::Load, Some(p))?;
                s.op(ob.key, MemOp::Load, Some(ent))?;
                if o == id {
                    return Ok((t, b, prev));
                }
                p = ent;
                prev = Some(o);
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
    /// A chain being moved by `rehash_step` (reused).
    chain: Vec<u32>,
}

impl Store {
    /// SET of a new key `id` (the object record's hash and size set).
    fn insert(&mut self, s: &mut Server, id: u32) -> Result<()> {
        s.begin()?;
        self.rehash_step(s)?;
        if self.dict.ht.len() == 1 && self.dict.used >= self.dict.ht[0].heads.len() as u64 {
            let size = (self.dict.used * 2).next_power_of_two();
            let addr = self.arena.alloc(s, 8 * size)?;
            self.dict.ht.push(Table {
                addr,
                heads: vec![NIL; size as usize],
            });
            self.dict.rehashidx = 0;
        }
        // The lookup that finds the key absent: its bucket and chain in each table.
        let hash = self.objs[id as usize].hash;
        for tab in &self.dict.ht {
            let b = tab.slot(hash);
            let mut p = s.op(tab.addr + 8 * b as u64, MemOp::Load, None)?;
            for o in tab.chain(b, &self.objs) {
                let ob = self.objs[o as usize];
                p = s.op(ob.entry, MemOp::Load, Some(p))?;
                s.op(ob.key, MemOp::Load, Some(p))?;
            }
        }
        let size = u64::from(self.objs[id as usize].size);
        let mut o = Obj {
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
        o.next = tab.heads[b];
        tab.heads[b] = id;
        self.objs[id as usize] = o;
        self.dict.used += 1;
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
        let n = self.dict.ht[0].heads.len();
        while self.dict.rehashidx < n {
            let i = self.dict.rehashidx;
            self.dict.rehashidx += 1;
            s.op(self.dict.ht[0].addr + 8 * i as u64, MemOp::Load, None)?;
            if self.dict.ht[0].heads[i] == NIL {
                empty -= 1;
                if empty == 0 {
                    return Ok(());
                }
                continue;
            }
            // The chain from its tail: each key goes to the head of its new bucket, so keys
            // that share one keep their order.
            self.chain.clear();
            self.chain.extend(self.dict.ht[0].chain(i, &self.objs));
            self.dict.ht[0].heads[i] = NIL;
            for &id in self.chain.iter().rev() {
                let ob = &mut self.objs[id as usize];
                let to = &mut self.dict.ht[1];
                let b = to.slot(ob.hash);
                s.op(to.addr + 8 * b as u64, MemOp::Store, None)?;
                s.op(ob.entry, MemOp::Store, None)?;
                ob.next = to.heads[b];
                to.heads[b] = id;
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
        s.e.send(s.pid, ob.val, u64::from(ob.size))?;
        s.end()
    }

    /// SET of an existing key (`dbOverwrite`): new object and value, the old ones freed.
    fn overwrite(&mut self, s: &mut Server, id: u32) -> Result<()> {
        s.begin()?;
        self.rehash_step(s)?;
        self.dict.lookup(s, &self.objs, id)?;
        let ob = self.objs[id as usize];
        let size = u64::from(ob.size);
        let robj = self.arena.alloc(s, ROBJ)?;
        let val = self.arena.alloc(s, sds(size))?;
        s.fill(val, sds(size))?;
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
        let (t, b, prev) = self.dict.lookup(s, &self.objs, id)?;
        let ob = self.objs[id as usize];
        let tab = &mut self.dict.ht[t];
        // Unlink: the previous entry's next, or the bucket.
        match prev {
            None => {
                s.op(tab.addr + 8 * b as u64, MemOp::Store, None)?;
                tab.heads[b] = ob.next;
            }
            Some(p) => {
                s.op(self.objs[p as usize].entry, MemOp::Store, None)?;
                self.objs[p as usize].next = ob.next;
            }
        };
        self.dict.used -= 1;
        self.objs[id as usize].entry = 0;
        for p in [ob.key, ob.val, ob.robj, ob.entry] {
            self.arena.free(s, p)?;
        }
        s.end()
    }
}

impl Kv {
    /// Host bytes a key's records can need at the peak (`HOST_BYTES_PER_KEY`, and the shuffle
    /// of `del:`).
    fn host_bytes_per_key(&self) -> u64 {
        match self.phase {
            Phase::Del(_) => HOST_BYTES_PER_KEY + HOST_BYTES_PER_DEL,
            _ => HOST_BYTES_PER_KEY,
        }
    }
}

/// The host's memory (`MemTotal` of /proc/meminfo), where the host says.
fn host_mem_total() -> Option<u64> {
    crate::host::meminfo_kb("MemTotal:")?.checked_mul(1024)
}

/// The keys' records (`objects` x `per_key` bytes) may take at most half the host's memory
/// (`host_total`, unknown: no limit), leaving the other half to the simulator's own state (its
/// frames, page tables, caches: O(modelled memory)) and to the host: more is refused before
/// the run, naming `objects`, rather than thrashing or being killed by the host's OOM killer
/// hours in.
fn check_host(objects: u64, per_key: u64, host_total: Option<u64>) -> Result<()> {
    let Some(total) = host_total else {
        return Ok(());
    };
    let (need, limit) = (objects.saturating_mul(per_key), total / 2);
    if need > limit {
        return Err(bad(
            "objects",
            &objects.to_string(),
            &format!(
                "at most what half the host's memory holds: {objects} keys need {} of host memory \
                 ({per_key} bytes a key), over the limit of {} (half the host's {}, MemTotal in /proc/meminfo)",
                human(need),
                human(limit),
                human(total)
            ),
        ));
    }
    Ok(())
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
        check_host(self.objects, self.host_bytes_per_key(), host_mem_total())?;
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
            chain: Vec::new(),
        };
        let addr = st.arena.alloc(&mut s, 8 * DICT_INITIAL)?;
        st.dict.ht.push(Table {
            addr,
            heads: vec![NIL; DICT_INITIAL as usize],
        });
        for _ in 0..self.objects {
            let size = match self.phase {
                Phase::Range(lo, hi) => lo + rng.below(hi - lo + 1),
                _ => self.size,
            };
            st.objs.push(Obj {
                // The low 32 bits: see `Obj`.
                hash: rng.next_u64() as u32,
                entry: 0,
                key: 0,
                robj: 0,
                val: 0,
                size: u32::try_from(size).expect("a value is at most 1 GiB"),
                next: NIL,
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
        // The dictionary's shape (Redis's `DEBUG HTSTATS`: table size, elements, longest chain).
        let t0 = &st.dict.ht[0];
        let longest_chain = (0..t0.heads.len())
            .map(|b| t0.chain(b, &st.objs).count())
            .max()
            .unwrap_or(0);
        self.stats = Some(serde_json::json!({
            "inserted": self.objects,
            "gets": gets,
            "sets": sets,
            "deleted": dels,
            "live_objects": st.objs.iter().filter(|o| o.entry != 0).count(),
            "value_bytes_live": st.objs.iter().filter(|o| o.entry != 0).map(|o| u64::from(o.size)).sum::<u64>(),
            "footprint_after_phase_bytes": footprint_after_phase,
            "idle_seconds": idle,
            "dict": {
                "buckets": t0.heads.len(),
                "keys": st.dict.used,
                "longest_chain": longest_chain,
            },
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Redis `dictFind` / `_dictKeyIndex`: a key's bucket is its hash masked by the table's
    /// size (`h & d->ht[table].sizemask`), so keys spread over every bucket of the table.
    #[test]
    fn a_keys_bucket_is_its_hash_masked_by_the_table_size() {
        let t = |n: usize| Table {
            addr: 0,
            heads: vec![NIL; n],
        };
        assert_eq!(t(8).slot(0x1234_5677), 7);
        assert_eq!(t(8).slot(0x1234_5672), 2);
        assert_eq!(t(1 << 20).slot(0xdead_beef), 0xdbeef);
        assert_eq!(t(1).slot(u32::MAX), 0);
        let hit: std::collections::BTreeSet<usize> = (0..64u32).map(|h| t(16).slot(h)).collect();
        assert_eq!(hit.len(), 16);
    }

    #[test]
    fn host_check_refuses_records_over_half_the_host() {
        // 2^28 keys of `cold` on a 24 GiB host: 15,032,385,536 bytes > 12 GiB.
        let e = check_host(1 << 28, HOST_BYTES_PER_KEY, Some(24 << 30))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "workload 'kv': bad value '268435456' for 'objects': expected at most what half the host's memory holds: \
             268435456 keys need 14.00 GiB of host memory (56 bytes a key), over the limit of 12.00 GiB \
             (half the host's 24.00 GiB, MemTotal in /proc/meminfo)"
        );
        // Exactly half is allowed, a byte more is not; an unknown host has no limit.
        let per = HOST_BYTES_PER_KEY;
        assert!(check_host(1 << 20, per, Some(2 * (per << 20))).is_ok());
        assert!(check_host(1 << 20, per, Some(2 * (per << 20) - 2)).is_err());
        assert!(check_host(1 << 28, per, None).is_ok());
        assert!(check_host(u64::MAX, per, Some(u64::MAX)).is_err());
    }

    #[test]
    fn a_key_costs_56_host_bytes_and_60_under_del() {
        assert_eq!(HOST_BYTES_PER_KEY, 56);
        let mut spec = Spec::parse("workload", "kv:phase=del:70").unwrap();
        let kv = Kv::parse(&mut spec).unwrap();
        assert_eq!(kv.host_bytes_per_key(), 60);
        let mut spec = Spec::parse("workload", "kv:phase=warm").unwrap();
        assert_eq!(Kv::parse(&mut spec).unwrap().host_bytes_per_key(), 56);
    }

    #[test]
    fn host_mem_total_reads_meminfo() {
        if std::path::Path::new("/proc/meminfo").exists() {
            let t = host_mem_total().expect("MemTotal");
            assert!(t > 64 << 20, "{t}");
        }
    }
}
