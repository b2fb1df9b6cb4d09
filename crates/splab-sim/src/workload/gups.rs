//! GUPS (HPCC RandomAccess): random read-modify-write updates of 8-byte words of a table.
//! Each update is one access, counted once as a write (design.md). No initialisation pass: the
//! table is first touched by the updates themselves.

use super::{map_anon, MAX_SIZE};
use crate::engine::Engine;
use crate::error::Result;
use crate::rng::Rng;
use crate::spec::Spec;
use crate::units::{fmt_size, AccessKind};

pub struct Gups {
    size: u64,
    updates: u64,
}

impl Gups {
    pub fn parse(spec: &mut Spec) -> Result<Gups> {
        let size = spec.take_size("size", 1 << 30, 8, MAX_SIZE)?;
        // HPCC RandomAccess performs 4 updates per table word.
        let updates = spec.take_count("updates", 4 * (size / 8), 1, 1 << 40)?;
        Ok(Gups { size, updates })
    }
}

impl super::Workload for Gups {
    fn describe(&self) -> String {
        format!("gups:size={},updates={}", fmt_size(self.size), self.updates)
    }

    fn expected_accesses(&self) -> Option<u64> {
        Some(self.updates)
    }

    fn run(&mut self, e: &mut Engine, rng: &mut Rng) -> Result<()> {
        let pid = e.spawn();
        let base = map_anon(e, pid, self.size)?;
        let words = self.size / 8;
        let mut buf = Vec::with_capacity(4096);
        let mut left = self.updates;
        while left > 0 {
            let n = left.min(4096);
            buf.clear();
            buf.extend((0..n).map(|_| base + 8 * rng.below(words)));
            e.accesses(pid, &buf, AccessKind::Write)?;
            left -= n;
        }
        Ok(())
    }
}
