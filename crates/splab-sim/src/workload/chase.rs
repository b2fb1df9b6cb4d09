//! Chase: `chains` interleaved dependent pointer chains over a footprint, one 64-byte line per
//! hop: the workload that exposes memory-level parallelism. With one chain every hop waits for
//! the one before (latency-bound); with K chains K independent hops are in flight (up to the
//! core's fill buffers and walkers).
//!
//! The list is a random cyclic permutation of the footprint's lines (Sattolo's algorithm), built
//! first by a sequential write pass over the region (as a program initialising it would). The
//! K chains start at evenly spaced points of the cycle and advance in turn, so the hop of chain
//! c depends on the access K back (`dep` = K). Each hop is 4 instructions (`p = p->next` plus
//! the loop: gcc -O2, docs/constants.md 6.6).

use super::{map_anon, MAX_SIZE};
use crate::engine::Engine;
use crate::error::{Result, SimError};
use crate::rng::Rng;
use crate::spec::Spec;
use crate::units::{fmt_size, Access, MemOp};

const LINE: u64 = 64;
const CHASE_IPA: u16 = 4;
/// Instructions per 8-byte word of the initialising write pass.
const INIT_IPA: u16 = 4;

pub struct Chase {
    size: u64,
    chains: u64,
    hops: u64,
}

impl Chase {
    pub fn parse(spec: &mut Spec) -> Result<Chase> {
        let size = spec.take_size("size", 64 << 20, 2 * LINE, MAX_SIZE)?;
        let chains = spec.take_count("chains", 1, 1, 256)?;
        let lines = size / LINE;
        if lines > u32::MAX as u64 {
            return Err(SimError::BadInput(format!(
                "workload 'chase': size={} has more than 2^32 lines",
                fmt_size(size)
            )));
        }
        let hops = spec.take_count("hops", lines, 1, 1 << 40)?;
        Ok(Chase { size, chains, hops })
    }
}

impl super::Workload for Chase {
    fn describe(&self) -> String {
        format!(
            "chase:size={},chains={},hops={}",
            fmt_size(self.size),
            self.chains,
            self.hops
        )
    }

    fn expected_accesses(&self) -> Option<u64> {
        Some(self.size / 8 + self.hops)
    }

    fn run(&mut self, e: &mut Engine, rng: &mut Rng) -> Result<()> {
        // The list is written in full: it must fit (checked before the host builds its
        // permutation, 4 bytes a line).
        if self.size > e.os.machine.mem_bytes {
            return Err(SimError::BadInput(format!(
                "workload 'chase': size={} is larger than the machine's memory ({})",
                fmt_size(self.size),
                fmt_size(e.os.machine.mem_bytes)
            )));
        }
        let pid = e.spawn()?;
        let base = map_anon(e, pid, self.size)?;
        let n = (self.size / LINE) as usize;
        // Sattolo: a random permutation that is one cycle through every line.
        let mut next: Vec<u32> = (0..n as u32).collect();
        for i in (1..n).rev() {
            let j = rng.below(i as u64) as usize;
            next.swap(i, j);
        }
        // The program builds the list: a sequential write pass.
        e.access_run(pid, base, 8, self.size / 8, MemOp::Store, INIT_IPA)?;
        let k = self.chains as usize;
        let mut pos: Vec<u32> = Vec::with_capacity(k);
        let mut p = 0u32;
        let spacing = (n / k).max(1);
        for c in 0..k {
            pos.push(p);
            if c + 1 < k {
                for _ in 0..spacing {
                    p = next[p as usize];
                }
            }
        }
        let mut buf = Vec::with_capacity(4096);
        let mut left = self.hops;
        let mut first_round = true;
        while left > 0 {
            buf.clear();
            let round = left.min(4096 / k as u64 * k as u64).max(1);
            for i in 0..round as usize {
                let c = i % k;
                // The first hop of each chain loads a register-held head: independent.
                let dep = if first_round && i < k { 0 } else { k as u16 };
                buf.push(Access::new(
                    base + pos[c] as u64 * LINE,
                    MemOp::Load,
                    dep,
                    CHASE_IPA,
                ));
                pos[c] = next[pos[c] as usize];
            }
            first_round = false;
            e.accesses(pid, &buf)?;
            left -= round;
        }
        Ok(())
    }
}
