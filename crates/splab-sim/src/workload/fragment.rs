//! Fragmentation levels (`--frag 0|50|100`), modelled on Quicksilver's tool (seed 003 6;
//! Frag/frag/fragment_level.c; docs/reference-policies.md 3). A fragmenter process maps a
//! large block-aligned anonymous region and pins one free block after another with 64KB of
//! resident pages (vm/fragment.rs) until the free blocks are no more than `(100 - pct)%` of the
//! workload's memory M in blocks (Frag-50 "leaves 50% of the application's maximum resident
//! memory as free superpages"); it stays alive. The machine then sits 60 simulated seconds, its
//! daemons running, so that the fragmenter's memory is inactive (the scripts sleep 60 s), and
//! the workload runs, measured from its start (`Engine::start_measuring`).
//!
//! Before it, the tool's first step (seed 003 6, `run`): a first fragmenter pins every free
//! block and exits; only the blocks' pageblock migratetypes and the kernel's compaction state
//! can remember it. The real tool's first programs do more. System-configs/linux/linux-frag.sh first runs
//! Frag/frag_compact.c (touch 30GB, pin 512 blocks with 4KB each, one THP fault in each of 1,536
//! regions under memory pressure, exit) and Frag/frag_background.c (fragment every free block,
//! then Frag/touch.c's 4,000 THP faults against full fragmentation and a 15 s sleep, exit).
//! Both exit before fragment_level.c starts, and fragment_level.c's loop stops at the target:
//! nothing of the tool runs during the workload. What the earlier two leave is kernel state
//! (Linux 4.3: pageblock migratetypes, skip bits, cached scanner positions, deferral); the model
//! has migratetypes but no skip bits, makes no kernel allocations but page tables, and its
//! deferral would be reset by their successful compactions (docs/linux-thp.md).
//!
//! The block is 2MB (seed 003 is about x86-64), or the machine's smallest superpage above 2MB
//! (else its largest); 64KB of it stays resident, 16 pages of 4KB.

use serde::Serialize;

use crate::engine::Engine;
use crate::error::{Result, SimError};
use crate::hw::Machine;
use crate::units::fmt_size;
use crate::vm::fragment::Fragmenter;
use crate::vm::MmapReq;

/// Superpage size the tool fragments (seed 003: x86-64's 2MB).
pub const BLOCK_BYTES: u64 = 2 << 20;
/// Resident bytes left in each fragmented block (fragment_level.c: all but the last 64KB of
/// each 2MB is munmapped).
pub const KEEP_BYTES: u64 = 64 << 10;
/// Simulated seconds between fragmenting and the workload (the scripts sleep 60 s so that the
/// fragmenting memory is inactive).
pub const SETTLE_SECONDS: u64 = 60;

/// What `--frag` asks for: the level in percent and the workload's memory M.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FragSpec {
    pub pct: u8,
    pub mem_bytes: u64,
}

/// What the fragmenter did, for the report (`frag`; docs/report.schema.json describes each
/// field). Blocks are counted in `block_bytes`.
#[derive(Clone, Debug, Serialize)]
pub struct FragReport {
    pub level: u8,
    pub mem_bytes: u64,
    pub block_bytes: u64,
    pub target_free_blocks: u64,
    pub free_blocks_initial: u64,
    /// Blocks the first step pinned before its process exited (memory pressure: all of them).
    pub pressure_blocks_fragmented: u64,
    pub blocks_fragmented: u64,
    /// At the workload's start, after the settle.
    pub free_blocks_before: u64,
    /// Resident at the workload's start (not in its footprint).
    pub fragmenter_bytes: u64,
    pub settle_seconds: u64,
}

/// The block order of `m` (see the module doc); an error if it has no superpage.
pub fn block_order(m: &Machine) -> Result<u8> {
    let sizes = m.page_sizes();
    let c = (1..sizes.len())
        .find(|&c| sizes[c] >= BLOCK_BYTES)
        .or((sizes.len() > 1).then(|| sizes.len() - 1))
        .ok_or_else(|| {
            SimError::BadInput(format!(
                "--frag: machine {} has no superpage size to fragment",
                m.label
            ))
        })?;
    Ok(m.order_of(c))
}

impl FragSpec {
    /// Checks the level and M against machine `m`: pct in 0..=100, M at least one block and at
    /// most the machine's memory.
    pub fn validate(&self, m: &Machine) -> Result<()> {
        self.validate_from(m, &format!("--frag-mem {}", fmt_size(self.mem_bytes)))
    }

    /// As `validate`, naming the workload's memory as `what` in errors (the option that gave
    /// it, or the workload that declared it).
    pub fn validate_from(&self, m: &Machine, what: &str) -> Result<()> {
        if self.pct > 100 {
            return Err(SimError::BadInput(format!(
                "--frag {}: the level is a percentage from 0 to 100 (Quicksilver's are 0, 50, 100)",
                self.pct
            )));
        }
        let block = 1u64 << (block_order(m)? + m.base_shift());
        if self.mem_bytes < block {
            return Err(SimError::BadInput(format!(
                "{what}: the workload's memory must be at least one {} block",
                fmt_size(block)
            )));
        }
        if self.mem_bytes > m.mem_bytes {
            return Err(SimError::BadInput(format!(
                "{what}: larger than the machine's memory ({})",
                fmt_size(m.mem_bytes)
            )));
        }
        Ok(())
    }
}

/// Fragments memory to `f`'s level, lets the machine settle, and starts the workload's
/// measurement. First (seed 003 6: the tool "first fragments superpages until there is memory
/// pressure, then starts over") a first fragmenter pins every free block and exits
/// (Frag/frag_background.c's loop at level 0); then the fragmenter of the level
/// (fragment_level.c) pins blocks until the target and stays.
pub fn run(e: &mut Engine, f: FragSpec) -> Result<FragReport> {
    f.validate(&e.os.machine)?;
    let order = block_order(&e.os.machine)?;
    let bs = e.os.base_shift();
    let block = 1u64 << (order + bs);
    let target = (100 - f.pct as u64) * f.mem_bytes.div_ceil(block) / 100;
    // The first step. Where the paper is silent: "memory pressure" is taken as no free block
    // left (frag_background.c's level-0 loop re-reads buddyinfo until it shows none); its
    // pages are pinned as the second step's are (64KB of each block); the 4KB pressure,
    // reclaim and kernel allocations of the real programs are not modelled.
    let pressure = if f.pct > 0 {
        let pid = e.spawn()?;
        let n = fragment_to(e, pid, order, 0)?;
        // Its exit is set-up work too, not the workload's (as `Os::fragment_block`'s).
        let (kernel, resv) = (e.os.stats.cycles_kernel, e.os.stats.cycles_reservation);
        e.exit(pid)?;
        e.os.stats.cycles_kernel = kernel;
        e.os.stats.cycles_reservation = resv;
        e.os.fragmenter = None;
        n
    } else {
        0
    };
    let pid = e.spawn()?;
    let initial = e.os.free_blocks(order);
    let fragmented = fragment_to(e, pid, order, target)?;
    let until = e.clock() + SETTLE_SECONDS * e.os.machine.freq_hz;
    e.idle_to(until)?;
    let r = FragReport {
        level: f.pct,
        mem_bytes: f.mem_bytes,
        block_bytes: block,
        target_free_blocks: target,
        free_blocks_initial: initial,
        pressure_blocks_fragmented: pressure,
        blocks_fragmented: fragmented,
        free_blocks_before: e.os.free_blocks(order),
        fragmenter_bytes: e.os.fragmenter_frames() << bs,
        settle_seconds: SETTLE_SECONDS,
    };
    e.start_measuring();
    Ok(r)
}

/// Process `pid` maps a large block-aligned region and pins one free block after another with
/// `KEEP_BYTES` resident until no more than `target` free blocks of `order` are left (or none
/// can be taken); it becomes `Os::fragmenter`. Returns the blocks pinned.
fn fragment_to(e: &mut Engine, pid: crate::units::Pid, order: u8, target: u64) -> Result<u64> {
    let bs = e.os.base_shift();
    let block = 1u64 << (order + bs);
    let keep = (KEEP_BYTES >> bs).max(1);
    let wanted = e.os.free_blocks(order).saturating_sub(target);
    let mut fragmented = 0;
    if wanted == 0 {
        return Ok(0);
    }
    // The region: one block per free block to fragment, and one to align it.
    let len = (wanted + 1) * block;
    // On a machine whose address space is not much larger than its memory (core2's 32 bits
    // for 2G) the region does not fit: that is the configuration's, said as such (bad input),
    // where it was "out of memory: mmap: no 0x80000000-byte gap left ... of pid 1" (exit 1).
    let start = e.mmap(pid, MmapReq::anon(len)).map_err(|err| match err {
        SimError::OutOfMemory(_) => SimError::BadInput(format!(
            "--frag: the fragmenter maps one {} block per free block, {} in one process, and \
             machine '{}' has a {}-bit address space, too small for it (--frag needs an \
             address space well above the machine's memory: a 64-bit machine, or a smaller \
             mem=)",
            fmt_size(block),
            fmt_size(len),
            e.os.machine.name,
            e.os.machine.va_bits
        )),
        other => other,
    })?;
    let obj =
        e.os.proc(pid)?
            .vma_at(start)
            .expect("fragmenter region")
            .obj;
    e.os.fragmenter = Some(Fragmenter { pid, obj });
    let first = start.next_multiple_of(block);
    if first > start {
        e.munmap(pid, start, first - start)?;
    }
    while fragmented < wanted && e.os.free_blocks(order) > target {
        let va = first + fragmented * block;
        if e.os.fragment_block(pid, va, order, keep)?.is_none() {
            break;
        }
        e.munmap(pid, va, block - (keep << bs))?;
        fragmented += 1;
    }
    let used = first + fragmented * block;
    if used < start + len {
        e.munmap(pid, used, start + len - used)?;
    }
    Ok(fragmented)
}
