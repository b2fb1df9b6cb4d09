//! Kernel memory the run allocates as it goes, wired (seed 000 5.2: "as the kernel allocates
//! memory while other processes are running, [wired pages] tend to get scattered"): each
//! process's u-area (its kernel stack and per-process structures), allocated when the process
//! is created and freed when it exits. Page-table pages are the other kind (vm/ptpages.rs). Both
//! come from `alloc_kernel_frame`, so `wired=clustered` puts them in the wired pool.
//!
//! The file system's per-file memory is the third kind: the first open of a file gives it a
//! vnode and an in-core inode from kernel zones, which grow a page at a time and never give
//! pages back (FreeBSD 4's zone allocator, `zalloc`), up to `desiredvnodes`, after which vnodes
//! are recycled (`getnewvnode`). A web server opening thousands of files thus leaves wired
//! pages among its page cache: what seed 000 6.5 blames for the cache scheme's lost contiguity
//! ("mostly due to scattered wired pages").

use super::Os;
use crate::error::Result;
use crate::units::Pfn;

/// Bytes of wired kernel memory per process: FreeBSD's alpha `UPAGES` (2) pages of 8KB, the
/// u-area holding the kernel stack (sys/alpha/include/param.h, 4.x); Linux x86-64's
/// `THREAD_SIZE` is the same 16KB (PAGE_SIZE << 2, arch/x86/include/asm/page_64_types.h).
pub const UAREA_BYTES: u64 = 16 << 10;

/// Kernel memory per vnode: `struct vnode`, the FFS in-core `struct inode` and a name-cache
/// entry. An assumption (about 512 bytes on a 64-bit 4.x kernel; no 4.x alpha kernel was at
/// hand to measure `vmstat -z`), listed in docs/constants.md 9.
pub const VNODE_BYTES: u64 = 512;

/// FreeBSD 4.3's `maxusers` in GENERIC (32; seed 000 ran 4.3), giving `maxproc` = 20 + 16 x
/// maxusers (`NPROC`, sys/conf/param.c).
const MAXPROC: u64 = 20 + 16 * 32;

/// Counters of per-process and file-system kernel memory.
#[derive(Clone, Debug, Default)]
pub struct KmemStats {
    /// Frames of u-areas now and at the peak.
    pub uarea_pages: u64,
    pub uarea_peak_pages: u64,
    /// Vnodes allocated (at most `desiredvnodes`), and the zone pages holding them.
    pub vnodes: u64,
    pub vnode_zone_pages: u64,
    /// Files that have had a vnode.
    pub(crate) files: rustc_hash::FxHashSet<u32>,
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

    /// FreeBSD 4 `vntblinit`: `desiredvnodes = maxproc + v_page_count / 4`.
    pub fn desired_vnodes(&self) -> u64 {
        MAXPROC + self.phys.frames() / 4
    }

    /// The first open of `file` gives it a vnode: a new one while fewer than `desiredvnodes`
    /// exist (the zone takes a wired page when its pages are full), else a recycled one.
    pub(crate) fn vnode_for(&mut self, file: u32) -> Result<()> {
        if !self.stats.kmem.files.insert(file) || self.stats.kmem.vnodes >= self.desired_vnodes() {
            return Ok(());
        }
        let per_page = (self.machine.base_size() / VNODE_BYTES).max(1);
        if self.stats.kmem.vnodes == self.stats.kmem.vnode_zone_pages * per_page {
            self.make_frames_free(1);
            if let Err(e) = self.alloc_kernel_frame() {
                self.stats.kmem.files.remove(&file);
                return Err(e);
            }
            self.phys.wired_frames += 1;
            self.stats.kmem.vnode_zone_pages += 1;
        }
        self.stats.kmem.vnodes += 1;
        Ok(())
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

#[cfg(test)]
mod vnode_tests {
    use crate::engine::Engine;
    use crate::hw::Machine;
    use crate::policy::Policy;

    /// Each file's first open takes a vnode; 16 vnodes of 512 bytes share an 8KB zone page,
    /// which stays wired when the files are closed; reopening takes no new vnode.
    #[test]
    fn vnodes_fill_zone_pages_that_stay_wired() {
        let m = Machine::from_spec("alpha21264:mem=16M").unwrap();
        let mut p = Policy::from_spec("base").unwrap();
        p.resolve(&m).unwrap();
        let mut e = Engine::new(m, p, true, None);
        let pid = e.spawn().unwrap();
        let wired = e.os.phys.wired_frames;
        for f in 1..=17u32 {
            e.open(pid, f, 8192).unwrap();
            e.close(pid, f).unwrap();
        }
        assert_eq!(e.os.stats.kmem.vnodes, 17);
        assert_eq!(e.os.stats.kmem.vnode_zone_pages, 2);
        assert_eq!(e.os.phys.wired_frames, wired + 2);
        e.open(pid, 3, 8192).unwrap();
        assert_eq!(e.os.stats.kmem.vnodes, 17);
        // desiredvnodes = 532 + 2048 / 4 on 16MB of 8KB pages.
        assert_eq!(e.os.desired_vnodes(), 532 + 512);
        e.os.check_invariants().unwrap();
    }
}
