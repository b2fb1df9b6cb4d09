//! Matrix: the non-blocked transpose of seed 000 6.2, `B[j][i] = A[i][j]` over an n x n matrix,
//! row by row of A. Reads of A are sequential; writes of B walk a column, one row (n x elem
//! bytes) apart, which with 8KB pages and n = 1000 touches a new page on every write: one TLB
//! miss for every two accesses (seed 000 6.3).

use super::{two_arrays, Batch};
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
    /// Where the two matrices come from: the brk heap, one after the other (`brk`), or one
    /// anonymous mmap each (`mmap`).
    heap: bool,
    /// Fill A in row order before the transpose (a program transposes data it has written).
    init: bool,
}

impl Matrix {
    pub fn parse(spec: &mut Spec) -> Result<Matrix> {
        let n = spec.take_count("n", 1000, 1, 1 << 20)?;
        let elem = spec.take_size("elem", 8, 1, 4096)?;
        // seed 000's FreeBSD 4.x malloc (phkmalloc, lib/libc/stdlib/malloc.c: map_pages() moves
        // the break with brk()) takes every allocation from the brk heap, so the paper's two
        // malloc'ed matrices lie one after the other in one growable object. Reservations of
        // a growable object may reach past its end (seed 000 4.2), which is what lets 4MB
        // superpages cover both.
        let heap = spec.take_choice("alloc", "brk", &["brk", "mmap"])? == "brk";
        let init = spec.take_bool("init", true)?;
        Ok(Matrix {
            n,
            elem,
            heap,
            init,
        })
    }
}

impl super::Workload for Matrix {
    fn describe(&self) -> String {
        format!(
            "matrix:n={},elem={},alloc={},init={}",
            self.n,
            fmt_size(self.elem),
            if self.heap { "brk" } else { "mmap" },
            self.init
        )
    }

    fn expected_accesses(&self) -> Option<u64> {
        Some((2 + self.init as u64) * self.n * self.n)
    }

    fn run(&mut self, e: &mut Engine, _rng: &mut Rng) -> Result<()> {
        let pid = e.spawn()?;
        let bytes = self.n * self.n * self.elem;
        // The transpose writes every element of B, the fill every one of A; each array starts
        // on a page.
        let page = e.os.machine.base_size();
        let written = bytes.div_ceil(page) * page * (1 + self.init as u64);
        super::check_written(e, &super::Workload::describe(self), written)?;
        let what = format!("two {bytes}-byte matrices");
        let (a, b) = two_arrays(e, pid, bytes, self.heap, "matrix", &what)?;
        let row = self.n * self.elem;
        if self.init {
            // A[i][j] = value: a sequential store run, one store and ~3 instructions per element.
            e.access_run(
                pid,
                a,
                self.elem as i64,
                self.n * self.n,
                MemOp::Store,
                MATRIX_IPA,
            )?;
        }
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
