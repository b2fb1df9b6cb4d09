//! `web`: a thttpd-like static web server (seed 000 6.5: "the thttpd web server servicing 50000
//! requests" of the Rice CS department's access log, working set 238MB, data set 3.6GB). The log
//! is not available, so the requests are synthetic:
//!
//! - **The file set**: `files` files whose sizes follow SPECweb96's file mix (spec.org/osg/web96,
//!   "The Workload for the SPECweb96 Benchmark", tables 1 and 2): class 0 (under 1KB), 1 (1-10KB),
//!   2 (10-100KB), 3 (100KB-1MB) with 35%, 50%, 14% and 1% of the requests, nine sizes per class
//!   (n x 102.4 bytes x 10^class, n = 1..9). Each file draws its class with those weights and its
//!   size uniformly among the class's nine; the mean is 14.7KB. The data set is the sum.
//! - **Popularity**: file `i` (by rank) is requested with probability proportional to
//!   `1 / i^zipf` (Breslau et al., "Web Caching and Zipf-like Distributions", INFOCOM'99: alpha
//!   between 0.64 and 0.83 in their six traces; 0.75 by default). The working set is what the
//!   requests touch; `files` sets the data set and `zipf` how concentrated the requests are.
//!   Defaults: 50,000 requests as in 6.5, and 100,000 files (a 1.5GB data set, three times the
//!   alpha21264's 512MB, as 6.5's 3.6GB is seven times its machine's), so the page cache fills
//!   memory and the page daemon runs. 6.5 starts from a freshly booted system: run it with
//!   `--page-cache cold`.
//! - **A request** (`mode=mmap`, thttpd's default): thttpd's `mmc_map` opens the file, maps it
//!   read-only and private, and closes the descriptor at once; the mapping is kept in its map
//!   cache and reused by later requests for the file. The response is written from the mapping
//!   to the socket (the kernel copies the file's bytes out: loads of each line, `Engine::send`).
//!   The map cache holds at most `maps` mappings (thttpd mmc.c `DESIRED_MAX_MAPPED_FILES`,
//!   2000) and 1e9 bytes (`DESIRED_MAX_MAPPED_BYTES`); beyond either the least recently used
//!   mapping is unmapped (thttpd frees unreferenced maps older than `DEFAULT_EXPIRE_AGE`, 600 s,
//!   and sooner when over its limits: modelled as LRU; the 600 s are longer than these runs).
//!   `mode=read`: open, read() into a 1MB buffer, send from it, close.
//! - `warmup=N`: N requests first, then `requests` more, in one run of the server (seed 000
//!   6.5's concurrent experiment: "We warm up the web server footprint by playing 100,000
//!   requests from the trace, and then measure the time taken to service the next 100,000").
//!   The server marks `warm` (`Engine::mark`) when the warm-up is done and `served` after the
//!   last request, so a concurrent `seeker:after=warm,until=served` runs beside the measured
//!   requests; `measured_seconds`, `measured_read_requests` / `_bytes`,
//!   `measured_served_bytes`, `measured_files_requested` and the latencies cover those only.
//!   `served_bytes`, `files_requested` and `working_set_bytes` cover every request, the
//!   warm-up's too, as the rest of the report does (its accesses, faults and time).
//! - At the end the server exits: its mappings go and its files are closed, so under
//!   `close_deactivate` (navarro, seed 000 5.1 (3)) their clean pages move to the inactive
//!   queue, as 6.5 describes ("the web server closes its files on exit").
//!
//! Request parsing, headers and the network are not modelled: only the file work. The page
//! cache ends interleaved with the requests' order: each file's pages are allocated when it is
//! first served, and pages of files whose mappings left the cache are deactivated, between pages
//! that stay active (6.5: "an interleaved distribution of active, inactive and cache pages").

use std::collections::{BTreeMap, HashMap};

use crate::engine::Engine;
use crate::error::{Result, SimError};
use crate::rng::Rng;
use crate::spec::Spec;
use crate::units::{Pid, Prot};
use crate::vm::pageq::Queue;
use crate::vm::{MapFlags, MmapReq};

/// File ids of the web server's files start here (traces number theirs from 1).
const FILE_BASE: u32 = 1 << 24;
/// SPECweb96 table 1: the share of requests (and here of files) of each size class, percent.
const CLASS_PERCENT: [u64; 4] = [35, 50, 14, 1];
/// thttpd mmc.c `DESIRED_MAX_MAPPED_BYTES`.
const MAX_MAPPED_BYTES: u64 = 1_000_000_000;
/// The read() buffer of `mode=read`: the largest SPECweb96 file (921,600 bytes), rounded up.
const READ_BUF: u64 = 1 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Mmap,
    Read,
}

pub struct Web {
    /// Requests served before the measured ones (`warmup=`): seed 000 6.5's concurrent
    /// experiment warms the server up with 100,000 requests of the log and measures the next
    /// 100,000, in one run of the server.
    warmup: u64,
    requests: u64,
    files: u64,
    zipf: f64,
    maps: u64,
    mode: Mode,
    stats: Option<serde_json::Value>,
}

impl Web {
    pub fn parse(spec: &mut Spec) -> Result<Web> {
        let requests = spec.take_count("requests", 50_000, 1, 1 << 32)?;
        let warmup = spec.take_count("warmup", 0, 0, 1 << 32)?;
        let files = spec.take_count("files", 100_000, 1, 1 << 22)?;
        let zipf = match spec.take_str("zipf") {
            None => 0.75,
            Some(v) => v.parse::<f64>().ok().filter(|z| (0.0..=4.0).contains(z)).ok_or_else(|| {
                SimError::BadInput(format!(
                    "workload 'web': bad zipf='{v}': expected the Zipf exponent, a number from 0 (uniform) to 4, e.g. zipf=0.75 (Breslau et al. INFOCOM'99: 0.64 to 0.83)"
                ))
            })?,
        };
        let maps = spec.take_count("maps", 2000, 1, 1 << 22)?;
        let mode = match spec.take_choice("mode", "mmap", &["mmap", "read"])? {
            "read" => Mode::Read,
            _ => Mode::Mmap,
        };
        Ok(Web {
            warmup,
            requests,
            files,
            zipf,
            maps,
            mode,
            stats: None,
        })
    }

    /// SPECweb96 table 2: size `n` (1..=9) of class `c` (0..=3), in bytes.
    fn class_size(c: u32, n: u64) -> u64 {
        (n * 1024 * 10u64.pow(c) + 5) / 10
    }
}

/// Least recently used mappings of the server's map cache.
#[derive(Default)]
struct MapCache {
    /// file -> (address, length, last use)
    by_file: HashMap<u32, (u64, u64, u64)>,
    by_use: BTreeMap<u64, u32>,
    bytes: u64,
}

impl super::Workload for Web {
    fn describe(&self) -> String {
        let warmup = match self.warmup {
            0 => String::new(),
            w => format!("warmup={w},"),
        };
        format!(
            "web:{warmup}requests={},files={},zipf={},maps={},mode={}",
            self.requests,
            self.files,
            self.zipf,
            self.maps,
            match self.mode {
                Mode::Mmap => "mmap",
                Mode::Read => "read",
            }
        )
    }

    fn expected_accesses(&self) -> Option<u64> {
        None
    }

    fn run(&mut self, e: &mut Engine, rng: &mut Rng) -> Result<()> {
        // The file set: every file exists at the start (cold or warm as --page-cache says).
        let mut sizes = Vec::with_capacity(self.files as usize);
        for i in 0..self.files {
            let mut r = rng.below(100);
            let mut c = 0;
            while r >= CLASS_PERCENT[c] {
                r -= CLASS_PERCENT[c];
                c += 1;
            }
            let size = Self::class_size(c as u32, 1 + rng.below(9));
            e.open_file(FILE_BASE + i as u32, size)?;
            sizes.push(size);
        }
        // Zipf popularity by rank: cumulative weights, drawn by bisection.
        let mut cum = Vec::with_capacity(sizes.len());
        let mut total = 0.0;
        for i in 0..sizes.len() {
            total += 1.0 / ((i + 1) as f64).powf(self.zipf);
            cum.push(total);
        }
        let pid = e.spawn()?;
        let buf = if self.mode == Mode::Read {
            super::map_anon(e, pid, READ_BUF)?
        } else {
            0
        };
        let mut cache = MapCache::default();
        let mut lat: Vec<u64> = Vec::with_capacity(self.requests as usize);
        let mut served_bytes = 0u64;
        // Of the measured requests only (`warmup=`): the stats say which is which.
        let mut measured_bytes = 0u64;
        let mut touched = vec![false; sizes.len()];
        let mut touched_measured = vec![false; sizes.len()];
        let freq = e.os.machine.freq_hz;
        let mut measured_from = e.clock();
        let io = |e: &Engine| (e.os.stats.io_read_requests, e.os.stats.io_read_bytes);
        let mut io_from = io(e);
        for t in 0..self.warmup + self.requests {
            if t == self.warmup && t > 0 {
                // The warm-up is over: the measured requests start (`seeker:after=warm`).
                e.mark("warm");
                measured_from = e.clock();
                io_from = io(e);
            }
            let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total;
            let i = cum.partition_point(|&c| c <= u).min(sizes.len() - 1);
            let file = FILE_BASE + i as u32;
            let size = sizes[i];
            touched[i] = true;
            let start = e.clock();
            if t >= self.warmup {
                e.request_begin(pid); // the report's time.request_latency: measured ones only
            }
            match self.mode {
                Mode::Mmap => {
                    let addr = match cache.by_file.get(&file).copied() {
                        Some((addr, len, used)) => {
                            cache.by_use.remove(&used);
                            cache.by_use.insert(t, file);
                            cache.by_file.insert(file, (addr, len, t));
                            addr
                        }
                        None => {
                            // mmc_map: open, map, close the descriptor.
                            e.open(pid, file, size)?;
                            let addr = e.mmap(
                                pid,
                                MmapReq {
                                    addr: 0,
                                    len: size,
                                    prot: Prot::READ,
                                    flags: MapFlags::FILE,
                                    file,
                                    offset: 0,
                                },
                            )?;
                            e.close(pid, file)?;
                            cache.by_file.insert(file, (addr, size, t));
                            cache.by_use.insert(t, file);
                            cache.bytes += size;
                            addr
                        }
                    };
                    e.send(pid, addr, size)?;
                    // mmc_cleanup: the least recently used maps go while over the limits.
                    while cache.by_file.len() as u64 > self.maps || cache.bytes > MAX_MAPPED_BYTES {
                        let Some((_, f)) = cache.by_use.pop_first() else {
                            break;
                        };
                        let (a, len, _) = cache.by_file.remove(&f).expect("map cache");
                        cache.bytes -= len;
                        unmap(e, pid, a, len)?;
                    }
                }
                Mode::Read => {
                    e.open(pid, file, size)?;
                    let n = e.read(pid, file, 0, size, buf)?;
                    e.send(pid, buf, n)?;
                    e.close(pid, file)?;
                }
            }
            served_bytes += size;
            if t >= self.warmup {
                measured_bytes += size;
                touched_measured[i] = true;
                lat.push(e.clock() - start);
                e.request_end(pid);
            }
        }
        let measured = e.clock() - measured_from;
        let io_measured = (io(e).0 - io_from.0, io(e).1 - io_from.1);
        // Every request is served (`seeker:until=served`); the exit follows.
        e.mark("served");
        let q = &e.os.pageq;
        let queues_before_exit = [
            q.count(Queue::Active),
            q.count(Queue::Inactive),
            q.count(Queue::Cache),
        ];
        e.exit(pid)?;
        let q = &e.os.pageq;
        let queues_after_exit = [
            q.count(Queue::Active),
            q.count(Queue::Inactive),
            q.count(Queue::Cache),
        ];
        lat.sort_unstable();
        let ns = |c: u64| (c as u128 * 1_000_000_000 / freq as u128) as u64;
        let pick = |p: f64| {
            lat.get(((p * lat.len() as f64).ceil() as usize).clamp(1, lat.len()) - 1)
                .map_or(0, |&c| ns(c))
        };
        let mean = if lat.is_empty() {
            0
        } else {
            ns(lat.iter().sum::<u64>() / lat.len() as u64)
        };
        let working_set: u64 = sizes
            .iter()
            .zip(&touched)
            .filter(|(_, &t)| t)
            .map(|(s, _)| s)
            .sum();
        let queues =
            |c: [u64; 3]| serde_json::json!({"active": c[0], "inactive": c[1], "cache": c[2]});
        self.stats = Some(serde_json::json!({
            "warmup_requests": self.warmup,
            "measured_seconds": measured as f64 / freq as f64,
            "measured_read_requests": io_measured.0,
            "measured_read_bytes": io_measured.1,
            "data_set_bytes": sizes.iter().sum::<u64>(),
            "working_set_bytes": working_set,
            "files_requested": touched.iter().filter(|&&t| t).count(),
            "served_bytes": served_bytes,
            "measured_served_bytes": measured_bytes,
            "measured_files_requested": touched_measured.iter().filter(|&&t| t).count(),
            "request_latency_ns": {"mean": mean, "p50": pick(0.5), "p95": pick(0.95), "p99": pick(0.99), "max": pick(1.0)},
            "pages_before_exit": queues(queues_before_exit),
            "pages_after_exit": queues(queues_after_exit),
        }));
        Ok(())
    }

    fn stats(&self) -> Option<serde_json::Value> {
        self.stats.clone()
    }
}

/// munmap of a mapping of `len` bytes (rounded to pages by the OS).
fn unmap(e: &mut Engine, pid: Pid, addr: u64, len: u64) -> Result<()> {
    e.munmap(pid, addr, len)
}
