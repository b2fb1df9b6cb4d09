//! Scans: `seq` (every element in order), `stride` (one access per stride), `sparse` (touch one
//! byte every `step` bytes). Issued as access runs, so a scan costs one lookup per page.

use super::{map_anon, Op, MAX_SIZE};
use crate::engine::Engine;
use crate::error::{Result, SimError};
use crate::rng::Rng;
use crate::spec::Spec;
use crate::units::{fmt_size, Access, MemOp};

/// Instructions per element of a scalar scan loop (gcc -O2: load or store, pointer increment,
/// compare, branch; docs/constants.md 6).
const SCAN_IPA: u16 = 4;

pub struct Scan {
    name: &'static str,
    size: u64,
    /// Bytes between accesses.
    step: u64,
    op: Op,
    /// Map, scan, (unmap) this many times.
    rounds: u64,
    /// Unmap the region after each scan (seed 000 6.6's adversaries deallocate).
    unmap: bool,
    /// Scans of the region per round (the second and later ones find it mapped: steady state).
    passes: u64,
}

impl Scan {
    pub fn seq(spec: &mut Spec) -> Result<Scan> {
        let size = spec.take_size("size", 1 << 30, 1, MAX_SIZE)?;
        let op = Op::take(spec, "read", &["read", "write", "rw"])?;
        let elem = spec.take_size("elem", 8, 1, 4096)?;
        let (rounds, unmap, passes) = Self::rounds(spec)?;
        Ok(Scan {
            name: "seq",
            size,
            step: elem,
            op,
            rounds,
            unmap,
            passes,
        })
    }

    pub fn stride(spec: &mut Spec) -> Result<Scan> {
        let size = spec.take_size("size", 1 << 30, 1, MAX_SIZE)?;
        let stride = spec.take_size("stride", 4096, 1, MAX_SIZE)?;
        let op = Op::take(spec, "read", &["read", "write", "rw"])?;
        let (rounds, unmap, passes) = Self::rounds(spec)?;
        Ok(Scan {
            name: "stride",
            size,
            step: stride,
            op,
            rounds,
            unmap,
            passes,
        })
    }

    pub fn sparse(spec: &mut Spec) -> Result<Scan> {
        Self::sparse_as(spec, "sparse", 1 << 30, 64 << 10)
    }

    /// seed 003 observation 1's microbenchmark: "sparsely touches 30GB of anonymous memory",
    /// one byte per 2MB (Linux THP: 30GB and 1.4 s, against 0.2GB and 0.06 s with THP off).
    pub fn sparse_touch(spec: &mut Spec) -> Result<Scan> {
        Self::sparse_as(spec, "sparse-touch", 30 << 30, 2 << 20)
    }

    fn sparse_as(spec: &mut Spec, name: &'static str, size: u64, step: u64) -> Result<Scan> {
        let size = spec.take_size("size", size, 1, MAX_SIZE)?;
        let step = spec.take_size("step", step, 1, MAX_SIZE)?;
        let op = Op::take(spec, "write", &["write", "read"])?;
        let (rounds, unmap, passes) = Self::rounds(spec)?;
        Ok(Scan {
            name,
            size,
            step,
            op,
            rounds,
            unmap,
            passes,
        })
    }

    fn rounds(spec: &mut Spec) -> Result<(u64, bool, u64)> {
        let rounds = spec.take_count("rounds", 1, 1, 1 << 20)?;
        let passes = spec.take_count("passes", 1, 1, 1 << 20)?;
        let unmap = spec.take_bool("unmap", rounds > 1)?;
        if rounds > 1 && !unmap {
            return Err(SimError::BadInput(format!(
                "workload '{}': rounds={rounds} needs unmap=true (each round maps anew)",
                spec.name
            )));
        }
        Ok((rounds, unmap, passes))
    }

    fn suffix(&self) -> String {
        let mut s = match (self.rounds, self.unmap) {
            (1, false) => String::new(),
            (1, true) => ",unmap=true".into(),
            (r, _) => format!(",rounds={r},unmap=true"),
        };
        if self.passes > 1 {
            s += &format!(",passes={}", self.passes);
        }
        s
    }

    fn count(&self) -> u64 {
        self.size.div_ceil(self.step)
    }

    /// Bytes of base pages (`base`) one mapping's scan writes: the pages its accesses start in
    /// (the region is page-aligned), all of them under `op=write` and `rw`, none under `read`.
    fn written_bytes(&self, base: u64) -> u64 {
        if self.op == Op::Read {
            return 0;
        }
        let n = self.count();
        let pages = if self.step >= base {
            n
        } else {
            (n - 1) * self.step / base + 1
        };
        pages * base
    }
}

impl super::Workload for Scan {
    fn describe(&self) -> String {
        let size = fmt_size(self.size);
        let base = match self.name {
            "seq" => format!(
                "seq:size={size},op={},elem={}",
                self.op.name(),
                fmt_size(self.step)
            ),
            "stride" => format!(
                "stride:size={size},stride={},op={}",
                fmt_size(self.step),
                self.op.name()
            ),
            name => format!(
                "{name}:size={size},step={},op={}",
                fmt_size(self.step),
                self.op.name()
            ),
        };
        base + &self.suffix()
    }

    fn expected_accesses(&self) -> Option<u64> {
        Some(
            self.rounds * self.passes * self.count() * if self.op == Op::ReadWrite { 2 } else { 1 },
        )
    }

    fn run(&mut self, e: &mut Engine, _rng: &mut Rng) -> Result<()> {
        let pid = e.spawn()?;
        if self.size > e.os.machine.mem_bytes.saturating_mul(64) {
            return Err(SimError::BadInput(format!(
                "workload {}: size={} is far beyond the machine's memory",
                self.name,
                fmt_size(self.size)
            )));
        }
        // Each round unmaps before the next maps: one mapping's pages at a time.
        let written = self.written_bytes(e.os.machine.base_size());
        super::check_written(e, &super::Workload::describe(self), written)?;
        for _ in 0..self.rounds {
            let base = map_anon(e, pid, self.size)?;
            for _ in 0..self.passes {
                self.scan(e, pid, base)?;
            }
            if self.unmap {
                e.munmap(pid, base, self.size)?;
            }
        }
        Ok(())
    }
}

impl Scan {
    fn scan(&self, e: &mut Engine, pid: crate::units::Pid, base: u64) -> Result<()> {
        let n = self.count();
        match self.op {
            Op::Read => e.access_run(pid, base, self.step as i64, n, MemOp::Load, SCAN_IPA)?,
            Op::Write => e.access_run(pid, base, self.step as i64, n, MemOp::Store, SCAN_IPA)?,
            Op::ReadWrite => {
                // Each element is read then written. Within one page every access after the first
                // read and write hits the same MRU TLB entry, so page by page: the first element's
                // read and write in program order, then the rest of the page's accesses as runs.
                let page = e.os.machine.base_size();
                let mut i = 0;
                while i < n {
                    let va = base + i * self.step;
                    let page_end = (va / page + 1) * page;
                    let in_page = ((page_end - va).div_ceil(self.step)).min(n - i);
                    e.access_op(pid, Access::new(va, MemOp::Load, 0, SCAN_IPA))?;
                    e.access_op(pid, Access::new(va, MemOp::Store, 0, SCAN_IPA))?;
                    if in_page > 1 {
                        e.access_run(
                            pid,
                            va + self.step,
                            self.step as i64,
                            in_page - 1,
                            MemOp::Load,
                            SCAN_IPA,
                        )?;
                        e.access_run(
                            pid,
                            va + self.step,
                            self.step as i64,
                            in_page - 1,
                            MemOp::Store,
                            SCAN_IPA,
                        )?;
                    }
                    i += in_page;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(text: &str) -> Scan {
        let mut spec = Spec::parse("workload", text).unwrap();
        match spec.name.as_str() {
            "seq" => Scan::seq(&mut spec),
            "stride" => Scan::stride(&mut spec),
            _ => Scan::sparse(&mut spec),
        }
        .unwrap()
    }

    #[test]
    fn written_bytes_are_the_pages_the_accesses_start_in() {
        let k4 = 4096;
        assert_eq!(scan("seq:size=8G,op=write").written_bytes(k4), 8 << 30);
        assert_eq!(scan("seq:size=8G,op=rw").written_bytes(k4), 8 << 30);
        assert_eq!(scan("seq:size=8G").written_bytes(k4), 0);
        // A partial last page is a whole page; 8K pages (alpha21264) likewise.
        assert_eq!(scan("seq:size=5000,op=write").written_bytes(k4), 2 * k4);
        assert_eq!(scan("seq:size=5000,op=write").written_bytes(8192), 8192);
        // One page in 16 of a stride of 64K; a stride under a page writes every page.
        assert_eq!(
            scan("stride:size=1G,stride=64K,op=write").written_bytes(k4),
            16384 * k4
        );
        assert_eq!(
            scan("stride:size=1G,stride=1K,op=write").written_bytes(k4),
            1 << 30
        );
        // sparse: one page per step, far less than its size.
        assert_eq!(
            scan("sparse:size=1T,step=2M").written_bytes(k4),
            (1 << 19) * k4
        );
        assert_eq!(scan("sparse:size=1T,step=2M,op=read").written_bytes(k4), 0);
    }
}
