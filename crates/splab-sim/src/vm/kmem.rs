//! Kernel memory the run allocates as it goes, wired (seed 000 5.2: "as the kernel allocates
//! memory while other processes are running, [wired pages] tend to get scattered"): each
//! process's u-area (its kernel stack and per-process structures), allocated when the process
//! is created and freed when it exits. Page-table pages are the other kind (vm/ptpages.rs). Both
//! come from `alloc_kernel_frame`, so `wired=clustered` puts them in the wired pool.

use super::Os;
use crate::error::Result;
use crate::units::Pfn;

/// Bytes of wired kernel memory per process: FreeBSD's alpha `UPAGES` (2) pages of 8KB, the
/// u-area holding the kernel stack (sys/alpha/include/param.h, 4.x); Linux x86-64's
/// `THREAD_SIZE` is the same 16KB (PAGE_SIZE << 2, arch/x86/include/asm/page_64_types.h).
pub const UAREA_BYTES: u64 = 16 << 10;

/// Counters of per-process kernel memory.
#[derive(Clone, Debug, Default)]
pub struct KmemStats {
    /// Frames of u-areas now and at the peak.
    pub uarea_pages: u64,
    pub uarea_peak_pages: u64,
}

impl Os {
    /// Frames per u-area.
    fn uarea_frames(&self) -> u64 {
        UAREA_BYTES.div_ceil(self.machine.base_size())
    }

    /// Wires a new process's u-area. Out of memory only when nothing can be reclaimed.
    pub(crate) fn alloc_uarea(&mut self) -> Result<Vec<Pfn>> {
        let n = self.uarea_frames();
        self.make_frames_free(n);
        let mut frames = Vec::with_capacity(n as usize);
        for _ in 0..n {
            // Counted as each frame comes, so that an out-of-memory message says where they are.
            match self.alloc_kernel_frame() {
                Ok(pfn) => {
                    frames.push(pfn);
                    self.phys.wired_frames += 1;
                    self.stats.kmem.uarea_pages += 1;
                }
                Err(e) => {
                    self.free_uarea(frames);
                    return Err(e);
                }
            }
        }
        let st = &mut self.stats.kmem;
        st.uarea_peak_pages = st.uarea_peak_pages.max(st.uarea_pages);
        Ok(frames)
    }

    /// An exiting process's u-area goes back.
    pub(crate) fn free_uarea(&mut self, frames: Vec<Pfn>) {
        for pfn in frames {
            self.phys.wired_frames -= 1;
            self.stats.kmem.uarea_pages -= 1;
            self.free_kernel_frame(pfn);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::Engine;
    use crate::hw::Machine;
    use crate::policy::Policy;

    fn engine(machine: &str, policy: &str) -> Engine {
        let m = Machine::from_spec(machine).unwrap();
        let mut p = Policy::from_spec(policy).unwrap();
        p.resolve(&m).unwrap();
        Engine::new(m, p, true, None)
    }

    /// A process wires 16KB while it lives: two 8KB frames on the Alpha, four 4KB frames on
    /// x86; a fork wires the child's, exit gives them back.
    #[test]
    fn a_process_wires_its_uarea_while_it_lives() {
        for (machine, frames) in [("alpha21264:mem=16M", 2), ("skylake:mem=1G", 4)] {
            let mut e = engine(machine, "base");
            let wired = e.os.phys.wired_frames;
            let free = e.os.phys.buddy.free_frames;
            let pid = e.spawn().unwrap();
            assert_eq!(e.os.phys.wired_frames, wired + frames, "{machine}");
            assert_eq!(e.os.phys.buddy.free_frames, free - frames);
            assert_eq!(e.os.proc(pid).unwrap().uarea.len() as u64, frames);
            let child = e.fork(pid).unwrap();
            assert_eq!(e.os.stats.kmem.uarea_pages, 2 * frames);
            e.exit(child).unwrap();
            e.exit(pid).unwrap();
            assert_eq!(e.os.phys.wired_frames, wired);
            assert_eq!(e.os.phys.buddy.free_frames, free);
            assert_eq!(e.os.stats.kmem.uarea_peak_pages, 2 * frames);
            e.os.check_invariants().unwrap();
        }
    }

    /// With `wired=clustered` the u-areas come from the wired pool and go back to it.
    #[test]
    fn clustered_uareas_share_the_pool() {
        let mut e = engine("alpha21264:mem=16M", "base:wired=clustered");
        let pids: Vec<_> = (0..3).map(|_| e.spawn().unwrap()).collect();
        assert_eq!(e.os.contig.stats.wired_pools, 1);
        // One 64KB pool (8 frames) at the top of memory holds all six frames.
        let top = e.os.phys.frames();
        for &pid in &pids {
            for f in &e.os.proc(pid).unwrap().uarea {
                assert!(f.0 >= top - 8, "frame {} outside the pool", f.0);
            }
        }
        assert_eq!(e.os.contig.pool_frames(), 2);
        e.exit(pids[0]).unwrap();
        assert_eq!(e.os.contig.pool_frames(), 4);
        e.os.check_invariants().unwrap();
    }
}
