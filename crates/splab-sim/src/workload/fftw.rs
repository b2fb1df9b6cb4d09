//! FFTW: the memory access pattern of an out-of-place complex 3D transform of an n x n x n
//! array of complex doubles (seed 000 6.2: "FFTW with a 200x200x200 matrix as input").
//!
//! Footprint: two arrays (input, output) of n^3 x 16 bytes; n = 200 gives 128,000,000 bytes
//! (122.07MB) each, 30.5 4MB regions each, 61.04 for both: seed 000 6.5's "60 contiguous
//! regions of 4MB size" (and 6.2's "60 superpages of size 4MB") within the rounding of the
//! two arrays' ends and the reservations that stay partial there.
//!
//! The program: fill the input (a sequential store run), then the transform as three passes of
//! n^2 one-dimensional transforms of length n each:
//! - along x (unit stride): the x-lines of the input, written to the output (out of place);
//! - along y (stride n x 16 bytes), then z (stride n^2 x 16 bytes): in place in the output, one
//!   column at a time gathered into a contiguous buffer and scattered back (a strided
//!   dimension through a work array, as FFTW 2's `fftwnd` does for dimensions other than the
//!   last when given one).
//!
//! Each 1D transform loads its n points (two 8-byte loads each: the real and imaginary parts;
//! the 21264 has no 16-byte loads), computes, and stores the n points. The computation works in
//! a buffer of n x 16 bytes (3.2KB for n = 200) that stays in the L1 data cache, so it is
//! charged as instructions (`Engine::compute`) rather than as accesses: FFTW's operation count,
//! 5 n log2 n floating-point operations per complex transform (the count benchFFT's "mflops"
//! is normalised by; Frigo and Johnson, Proc. IEEE 93(2), 2005), one instruction each (scalar
//! codelets), plus one load and one store of each point's two words per radix pass, the
//! passes being the factors of n in FFTW 2's codelet radices (2..16, 32, 64): 200 = 10 x 10 x 2,
//! three passes. Addresses come from loop counters: no access depends on a load (`dep` 0).

use super::{two_arrays, Batch};
use crate::engine::Engine;
use crate::error::Result;
use crate::rng::Rng;
use crate::spec::Spec;
use crate::units::{fmt_size, Access, MemOp, Pid};

/// Bytes of one complex double.
const ELEM: u64 = 16;
/// Instructions per point of a gather or scatter loop (docs/constants.md 6.6.1): two loads, two
/// stores (one side in the L1-resident buffer), two pointer increments, compare and branch = 8;
/// the first word's access carries 6 of them, the second's 2.
const POINT_IPA: [u16; 2] = [6, 2];
/// Instructions per 8-byte store of the initialising loop (store, increment, compare and
/// branch, as a scalar scan; docs/constants.md 6).
const INIT_IPA: u16 = 4;
/// FFTW 2's codelet radices (the `fftw_no_twiddle_N` / `fftw_twiddle_N` codelets it ships).
const RADICES: [u64; 15] = [64, 32, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4];

pub struct Fftw {
    n: u64,
    /// Forward transforms after the initialisation.
    repeat: u64,
    /// Arrays from the brk heap (phkmalloc, as `matrix`) or one anonymous mmap each.
    heap: bool,
}

impl Fftw {
    pub fn parse(spec: &mut Spec) -> Result<Fftw> {
        let n = spec.take_count("n", 200, 2, 4096)?;
        let repeat = spec.take_count("repeat", 1, 1, 1000)?;
        // seed 000's FreeBSD 4.x malloc takes every allocation from the brk heap (see matrix.rs).
        let heap = spec.take_choice("alloc", "brk", &["brk", "mmap"])? == "brk";
        Ok(Fftw { n, repeat, heap })
    }

    /// Radix passes of a length-n transform: the factors of n taken greedily from FFTW 2's
    /// codelet radices; a factor none divides (a prime above 16) is one generic pass.
    pub fn passes(n: u64) -> u64 {
        let mut m = n;
        let mut passes = 0;
        while m > 1 {
            match RADICES
                .iter()
                .chain([2, 3].iter())
                .find(|&&r| m.is_multiple_of(r))
            {
                Some(&r) => m /= r,
                None => m = 1,
            }
            passes += 1;
        }
        passes
    }

    /// Instructions of the computation of one length-n transform (see the module comment).
    pub fn compute_instructions(n: u64) -> u64 {
        let flops = (5.0 * n as f64 * (n as f64).log2()).ceil() as u64;
        flops + 4 * n * Self::passes(n)
    }

    /// Accesses of one run: the fill, and per transform 3 passes x n^2 lines x n points x
    /// (2 loads + 2 stores).
    pub fn accesses(&self) -> u64 {
        let points = self.n * self.n * self.n;
        2 * points + self.repeat * 3 * 4 * points
    }

    /// One strided line: n points from `src` gathered, computed, scattered to `dst`.
    #[allow(clippy::too_many_arguments)]
    fn line(
        &self,
        e: &mut Engine,
        b: &mut Batch,
        pid: Pid,
        src: u64,
        dst: u64,
        stride: u64,
        cycles: u64,
    ) -> Result<()> {
        for (op, base) in [(MemOp::Load, src), (MemOp::Store, dst)] {
            for k in 0..self.n {
                let va = base + k * stride;
                b.push(e, Access::new(va, op, 0, POINT_IPA[0]))?;
                b.push(e, Access::new(va + 8, op, 0, POINT_IPA[1]))?;
            }
            if op == MemOp::Load {
                b.flush(e)?;
                e.compute(pid, cycles)?;
            }
        }
        Ok(())
    }
}

impl super::Workload for Fftw {
    fn describe(&self) -> String {
        format!(
            "fftw:n={},repeat={},alloc={}",
            self.n,
            self.repeat,
            if self.heap { "brk" } else { "mmap" }
        )
    }

    fn expected_accesses(&self) -> Option<u64> {
        Some(self.accesses())
    }

    fn run(&mut self, e: &mut Engine, _rng: &mut Rng) -> Result<()> {
        let pid = e.spawn()?;
        let n = self.n;
        let bytes = n * n * n * ELEM;
        let what = format!("two arrays of {}", fmt_size(bytes));
        let (input, out) = two_arrays(e, pid, bytes, self.heap, "fftw", &what)?;
        // Fill the input: two 8-byte stores per point, in order.
        e.access_run(pid, input, 8, 2 * n * n * n, MemOp::Store, INIT_IPA)?;
        let width = e.os.machine.core.width as u64;
        let cycles = Self::compute_instructions(n).div_ceil(width);
        let mut b = Batch::new(pid);
        for _ in 0..self.repeat {
            // x: unit stride, input -> output.
            for line in 0..n * n {
                let off = line * n * ELEM;
                self.line(e, &mut b, pid, input + off, out + off, ELEM, cycles)?;
            }
            // y: stride n points, in place in the output.
            for z in 0..n {
                for x in 0..n {
                    let at = out + (z * n * n + x) * ELEM;
                    self.line(e, &mut b, pid, at, at, n * ELEM, cycles)?;
                }
            }
            // z: stride n^2 points, in place.
            for line in 0..n * n {
                let at = out + line * ELEM;
                self.line(e, &mut b, pid, at, at, n * n * ELEM, cycles)?;
            }
        }
        b.flush(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn radix_passes_and_operation_count() {
        assert_eq!(Fftw::passes(200), 3); // 10 x 10 x 2
        assert_eq!(Fftw::passes(64), 1);
        assert_eq!(Fftw::passes(1024), 2); // 64 x 16
        assert_eq!(Fftw::passes(2 * 17), 2); // 2, then the prime 17 as one generic pass
                                             // 5 x 200 x log2(200) = 7643.8 flops, + 4 x 200 x 3 buffer accesses.
        assert_eq!(Fftw::compute_instructions(200), 7644 + 2400);
    }
}
