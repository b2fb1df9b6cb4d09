//! `filedirty`: seed 000 6.7's test of dirty superpages. "A program that maps a 100MB file,
//! reads every page thus triggering superpage promotion, then writes into every 512th page,
//! flushes the file and exits." The file is mapped shared, so the writes go to the file; the
//! flush is msync(MS_SYNC) of the whole mapping (vm/dirty.rs). With `policy dirty=trap` the
//! written superpages were demoted and one base page each is written; with `dirty=whole` each
//! written superpage is written entire (6.7: "the I/O volume is 512 times larger").

use crate::engine::Engine;
use crate::error::Result;
use crate::rng::Rng;
use crate::spec::Spec;
use crate::units::{fmt_size, MemOp, Prot};
use crate::vm::{MapFlags, MmapReq};

/// The file's id: far above the ids a recorded trace gives its files (numbered from 1), so a
/// composition with a trace cannot share it by accident.
pub const FILEDIRTY_FILE: u32 = 0x6700_0000;

/// Instructions per access of the read and write loops (a load or store, an add, a compare and
/// a branch, as `SCAN_IPA` in scan.rs; docs/constants.md 6).
const IPA: u16 = 4;

pub struct FileDirty {
    size: u64,
    /// Write one base page in this many.
    every: u64,
}

impl FileDirty {
    pub fn parse(spec: &mut Spec) -> Result<FileDirty> {
        let size = spec.take_size("size", 100 << 20, 1, super::MAX_SIZE)?;
        let every = spec.take_count("every", 512, 1, 1 << 40)?;
        Ok(FileDirty { size, every })
    }
}

impl super::Workload for FileDirty {
    fn describe(&self) -> String {
        format!(
            "filedirty:size={},every={}",
            fmt_size(self.size),
            self.every
        )
    }

    fn expected_accesses(&self) -> Option<u64> {
        None
    }

    fn run(&mut self, e: &mut Engine, _rng: &mut Rng) -> Result<()> {
        let base = e.os.machine.base_size();
        let pages = self.size.div_ceil(base);
        let len = pages * base;
        let pid = e.spawn()?;
        e.open_file(FILEDIRTY_FILE, len)?;
        let a = e.mmap(
            pid,
            MmapReq {
                addr: 0,
                len,
                prot: Prot::RW,
                flags: MapFlags::FILE.with(MapFlags::SHARED),
                file: FILEDIRTY_FILE,
                offset: 0,
            },
        )?;
        // Read every base page (promotion follows the reads).
        e.access_run(pid, a, base as i64, pages, MemOp::Load, IPA)?;
        // Write every `every`-th base page, from the first.
        let stride = (self.every * base) as i64;
        e.access_run(
            pid,
            a,
            stride,
            pages.div_ceil(self.every),
            MemOp::Store,
            IPA,
        )?;
        // Flush the file, and exit.
        e.msync(pid, a, len)?;
        e.exit(pid)
    }
}
