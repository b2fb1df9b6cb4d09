//! GUPS (HPCC RandomAccess): random read-modify-write updates of 8-byte words of a table.
//! Each update is one read-modify-write access (counted once as a write, docs/design.md), independent
//! of the others (the index comes from a register-held random sequence, not from memory).
//! No initialisation pass: the table is first touched by the updates themselves.
//!
//! The instructions per update decide how many updates the core's window holds, and so how
//! much of the walk latency it hides (docs/timing.md). Two forms, counted from the compiled
//! loops (gcc 12 -O2, x86-64; docs/constants.md 6.6):
//! - `form=hpcc` (default): HPCC RandomAccess, `ran = (ran << 1) ^ (ran < 0 ? POLY : 0);
//!   Table[ran & (size-1)] ^= ran;`: 12 instructions;
//! - `form=dis`: the DIS gups seed 003 cites, drawing `random() % size` per update: 56
//!   instructions measured (the 64-bit divide's latency is not modelled: instructions cost
//!   1/width cycle each).

use super::{map_anon, MAX_SIZE};
use crate::engine::Engine;
use crate::error::Result;
use crate::rng::Rng;
use crate::spec::Spec;
use crate::units::{fmt_size, Access, MemOp};

pub struct Gups {
    size: u64,
    updates: u64,
    /// Instructions per update.
    ipa: u16,
}

impl Gups {
    pub fn parse(spec: &mut Spec) -> Result<Gups> {
        let size = spec.take_size("size", 1 << 30, 8, MAX_SIZE)?;
        // HPCC RandomAccess performs 4 updates per table word.
        let updates = spec.take_count("updates", 4 * (size / 8), 1, 1 << 40)?;
        let form = spec.take_choice("form", "hpcc", &["hpcc", "dis"])?;
        // docs/constants.md 6.6: instructions per update of each form.
        let default_ipa = if form == "dis" { 56 } else { 12 };
        let ipa = spec.take_count("ipa", default_ipa, 1, u16::MAX as u64)? as u16;
        Ok(Gups { size, updates, ipa })
    }
}

impl super::Workload for Gups {
    fn describe(&self) -> String {
        format!(
            "gups:size={},updates={},ipa={}",
            fmt_size(self.size),
            self.updates,
            self.ipa
        )
    }

    fn footprint_bytes(&self) -> Option<u64> {
        Some(self.size)
    }
    fn expected_accesses(&self) -> Option<u64> {
        Some(self.updates)
    }

    fn run(&mut self, e: &mut Engine, rng: &mut Rng) -> Result<()> {
        let pid = e.spawn()?;
        let base = map_anon(e, pid, self.size)?;
        let words = self.size / 8;
        let mut buf = Vec::with_capacity(4096);
        let mut left = self.updates;
        while left > 0 {
            let n = left.min(4096);
            buf.clear();
            buf.extend(
                (0..n).map(|_| Access::new(base + 8 * rng.below(words), MemOp::Rmw, 0, self.ipa)),
            );
            e.accesses(pid, &buf)?;
            left -= n;
        }
        Ok(())
    }
}
