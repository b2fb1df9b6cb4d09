//! Matrix: the non-blocked transpose of seed 000 6.2, `B[j][i] = A[i][j]` over an n x n matrix,
//! row by row of A. Reads of A are sequential; writes of B walk a column, one row (n x elem
//! bytes) apart, which with 8KB pages and n = 1000 touches a new page on every write: one TLB
//! miss for every two accesses (seed 000 6.3).

use super::{map_anon, Batch};
use crate::engine::Engine;
use crate::error::Result;
use crate::rng::Rng;
use crate::spec::Spec;
use crate::units::{fmt_size, Access, MemOp};

/// Instructions per access of the transpose's inner loop: 6 per element (load, store, index
/// arithmetic, compare, branch; gcc -O2, docs/constants.md 6), one load and one store.
const MATRIX_IPA: u16 = 3;

pub struct Matrix {
    n: u64,
    elem: u64,
}

impl Matrix {
    pub fn parse(spec: &mut Spec) -> Result<Matrix> {
        let n = spec.take_count("n", 1000, 1, 1 << 20)?;
        let elem = spec.take_size("elem", 8, 1, 4096)?;
        Ok(Matrix { n, elem })
    }
}

impl super::Workload for Matrix {
    fn describe(&self) -> String {
        format!("matrix:n={},elem={}", self.n, fmt_size(self.elem))
    }

    fn expected_accesses(&self) -> Option<u64> {
        Some(2 * self.n * self.n)
    }

    fn run(&mut self, e: &mut Engine, _rng: &mut Rng) -> Result<()> {
        let pid = e.spawn();
        let bytes = self.n * self.n * self.elem;
        let a = map_anon(e, pid, bytes)?;
        let b = map_anon(e, pid, bytes)?;
        let row = self.n * self.elem;
        let mut batch = Batch::new(pid);
        for i in 0..self.n {
            for j in 0..self.n {
                let (src, dst) = (a + i * row + j * self.elem, b + j * row + i * self.elem);
                batch.push(e, Access::new(src, MemOp::Load, 0, MATRIX_IPA))?;
                batch.push(e, Access::new(dst, MemOp::Store, 0, MATRIX_IPA))?;
            }
        }
        batch.flush(e)
    }
}
