//! Importer for ChampSim traces: xz-compressed (or plain) streams of 64-byte `input_instr`
//! records, converted into a splab trace of one process, with memory regions inferred from the
//! addresses (`infer`), since ChampSim traces carry no syscalls.
//!
//! Record layout (ChampSim's `trace_instr_format.h`, little endian, 64 bytes):
//! `ip: u64, is_branch: u8, branch_taken: u8, destination_registers: [u8; 2],
//! source_registers: [u8; 4], destination_memory: [u64; 2], source_memory: [u64; 4]`;
//! a memory slot of 0 is empty.
//!
//! Mapping: one `Ifetch` at `ip` (4 bytes: the record has no length) when `ifetch` is on, then
//! a `Read` per non-zero source address that is not also a destination, then per non-zero
//! destination address an `Rmw` (it is also a source of the same instruction) or a `Write`.
//! ChampSim records no access sizes: 8 bytes is assumed. With `ifetch` off, instructions with no
//! memory access become `Compute { unit: Instructions }` events (which the next access's `ipa`
//! counts too).
//!
//! `ipa`: the records since the previous access (one record is one instruction): 1 for an
//! `Ifetch`, else the instruction's idle predecessors + 1 for its first access, 0 for its others.
//!
//! `dep`: every register (ChampSim's numbers, one byte) holds the sequence number (in access
//! events of the trace, `Ifetch` included) of the load its value derives from: an instruction
//! that loads (`Read` or `Rmw`) gives its destination registers the sequence number of its last
//! load; any other gives them the most recent tag of its source registers. An access's `dep` is
//! the distance back to the most recent tag of its instruction's source registers. ChampSim does
//! not say which source registers form the address, so all of them count (as ChampSim's own core
//! model treats them: a store's data register counts as much as its address registers), except
//! the flags, which never form one. Two registers are special: the instruction pointer (26)
//! never carries a tag (rip-relative addresses are known early); the stack pointer (6) is never
//! given the tag of its instruction's own load: when an instruction both reads and writes it
//! (push, pop, call, ret, `add rsp, imm`) it keeps its tag (it was adjusted, not loaded) and is
//! the only register that instruction's addresses depend on (so `push rax` does not depend on
//! the load of rax; `push [mem]` loses the dependence of its load on the registers of `mem`);
//! otherwise (`leave`: rsp = rbp, then rbp = [rsp]) it takes its sources' tag.

use std::io::{BufReader, BufWriter, Write};
use std::path::Path;

use crate::error::TraceError;
use crate::event::*;
use crate::format::TraceHeader;
use crate::infer::{RegionInference, DEFAULT_CHUNK};
use crate::writer::{TraceWriter, DEFAULT_ZSTD_LEVEL};

pub const RECORD_BYTES: usize = 64;
/// ChampSim's register numbers with a meaning of their own (`trace_instruction.h`).
pub const REG_STACK_POINTER: u8 = 6;
pub const REG_FLAGS: u8 = 25;
pub const REG_INSTRUCTION_POINTER: u8 = 26;
const XZ_MAGIC: &[u8; 6] = &[0xfd, b'7', b'z', b'X', b'Z', 0];

#[derive(Clone, Debug)]
pub struct ChampSimOptions {
    /// The pid given to the trace's one process.
    pub pid: Pid,
    /// Emit an `Ifetch` per instruction.
    pub ifetch: bool,
    /// Size of the aligned chunks mapped before first use (a power of two).
    pub chunk: u64,
    /// Stop after this many records.
    pub max_records: Option<u64>,
    pub zstd_level: i32,
}

impl Default for ChampSimOptions {
    fn default() -> Self {
        ChampSimOptions {
            pid: Pid(1),
            ifetch: true,
            chunk: DEFAULT_CHUNK,
            max_records: None,
            zstd_level: DEFAULT_ZSTD_LEVEL,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct ImportSummary {
    pub records: u64,
    pub events: u64,
    pub accesses: u64,
    pub inferred_regions: u64,
    pub bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot open {path}: {source}")]
    Open {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("reading the ChampSim trace: {0}")]
    Read(String),
    /// The output cannot be created (before anything is read).
    #[error("{0}")]
    Output(std::io::Error),
    #[error("writing the trace: {0}")]
    Write(std::io::Error),
    #[error(
        "the ChampSim trace ends inside a record: {extra} bytes after record {records} (at decompressed \
         byte offset {offset}); expected 64-byte records"
    )]
    PartialRecord {
        records: u64,
        offset: u64,
        extra: usize,
    },
    #[error(transparent)]
    Trace(#[from] TraceError),
}

/// Parses 64-byte records as they are written into it (the xz decoder's output sink).
struct Sink<'a, W: Write> {
    w: &'a mut TraceWriter<W>,
    infer: RegionInference,
    opts: &'a ChampSimOptions,
    partial: [u8; RECORD_BYTES],
    have: usize,
    records: u64,
    /// Memory-less instructions not yet written as a `Compute` event (ifetch off).
    idle_insns: u64,
    /// Instructions since the previous access event (for `ipa`).
    insns: u64,
    /// Access events so far: the sequence number of the last one.
    seq: u64,
    /// Per register: the sequence number of the load its value derives from (0: none).
    tags: [u64; 256],
    err: Option<TraceError>,
}

impl<W: Write> Sink<'_, W> {
    fn record(&mut self, r: &[u8; RECORD_BYTES]) -> Result<(), TraceError> {
        let u64_at = |o: usize| {
            u64::from_le_bytes([
                r[o],
                r[o + 1],
                r[o + 2],
                r[o + 3],
                r[o + 4],
                r[o + 5],
                r[o + 6],
                r[o + 7],
            ])
        };
        let pid = self.opts.pid;
        let ip = u64_at(0);
        let dregs = [r[10], r[11]];
        let sregs = [r[12], r[13], r[14], r[15]];
        let dst = [u64_at(16), u64_at(24)];
        let src = [u64_at(32), u64_at(40), u64_at(48), u64_at(56)];
        self.records += 1;
        self.insns += 1;
        let has_mem = dst != [0, 0] || src != [0; 4];
        if self.opts.ifetch {
            self.infer.before_access(self.w, pid, ip, 4)?;
            self.emit(AccessKind::Ifetch, ip, 0)?;
        } else if !has_mem {
            self.idle_insns += 1;
        } else if self.idle_insns > 0 {
            self.w.write(&TraceEvent::Compute {
                pid,
                amount: self.idle_insns,
                unit: ComputeUnit::Instructions,
            })?;
            self.idle_insns = 0;
        }
        // The tag the addresses of this instruction depend on: the stack pointer's for stack
        // operations (push, pop, call, ret: they read and write it), else the most recent of
        // its source registers but the flags and the instruction pointer.
        let stack_op = sregs.contains(&REG_STACK_POINTER) && dregs.contains(&REG_STACK_POINTER);
        let addr_tag = if stack_op {
            self.tags[REG_STACK_POINTER as usize]
        } else {
            sregs
                .iter()
                .filter(|&&g| g != 0 && g != REG_FLAGS && g != REG_INSTRUCTION_POINTER)
                .map(|&g| self.tags[g as usize])
                .max()
                .unwrap_or(0)
        };
        let mut loaded = None;
        for (i, &a) in src.iter().enumerate() {
            if a == 0 || dst.contains(&a) || src[..i].contains(&a) {
                continue;
            }
            self.infer.before_access(self.w, pid, a, 8)?;
            loaded = Some(self.emit(AccessKind::Read, a, addr_tag)?);
        }
        for (i, &a) in dst.iter().enumerate() {
            if a == 0 || dst[..i].contains(&a) {
                continue;
            }
            self.infer.before_access(self.w, pid, a, 8)?;
            if src.contains(&a) {
                loaded = Some(self.emit(AccessKind::Rmw, a, addr_tag)?);
            } else {
                self.emit(AccessKind::Write, a, addr_tag)?;
            }
        }
        let source_tag = sregs
            .iter()
            .filter(|&&g| g != 0 && g != REG_INSTRUCTION_POINTER)
            .map(|&g| self.tags[g as usize])
            .max()
            .unwrap_or(0);
        for &d in &dregs {
            match d {
                0 | REG_INSTRUCTION_POINTER => {}
                // The stack pointer is adjusted (push, pop, call, ret) or copied (leave: from
                // rbp), never loaded: it keeps its tag or takes its sources'.
                REG_STACK_POINTER if stack_op => {}
                REG_STACK_POINTER => self.tags[d as usize] = source_tag,
                _ => self.tags[d as usize] = loaded.unwrap_or(source_tag),
            }
        }
        Ok(())
    }

    /// Writes one access with its dep (from `tag`, the sequence number of the load its address
    /// derives from, 0 for none) and ipa; returns its sequence number.
    fn emit(&mut self, kind: AccessKind, va: u64, tag: u64) -> Result<u64, TraceError> {
        self.seq += 1;
        let dep = match self.seq - tag {
            d if tag == 0 || d > DEP_CAP as u64 => 0,
            d => d as u16,
        };
        let ipa = std::mem::take(&mut self.insns).min(IPA_CAP as u64) as u16;
        self.w
            .access_with(self.opts.pid, Vaddr(va), kind, 8, dep, ipa)?;
        Ok(self.seq)
    }

    fn full(&self) -> bool {
        self.opts.max_records.is_some_and(|m| self.records >= m)
    }
}

impl<W: Write> Write for Sink<'_, W> {
    fn write(&mut self, mut buf: &[u8]) -> std::io::Result<usize> {
        let n = buf.len();
        while !buf.is_empty() && !self.full() {
            let take = (RECORD_BYTES - self.have).min(buf.len());
            self.partial[self.have..self.have + take].copy_from_slice(&buf[..take]);
            self.have += take;
            buf = &buf[take..];
            if self.have == RECORD_BYTES {
                self.have = 0;
                let rec = self.partial;
                if let Err(e) = self.record(&rec) {
                    self.err = Some(e);
                    return Err(std::io::Error::other("trace writer failed"));
                }
            }
        }
        if self.full() {
            // Stop the decoder early: it reports this error, which import_champsim ignores.
            return Err(std::io::Error::other("record limit reached"));
        }
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Converts a ChampSim trace (`.xz`, or uncompressed) into a splab trace at `out`.
pub fn import_champsim(
    input: &Path,
    out: &Path,
    opts: &ChampSimOptions,
) -> Result<ImportSummary, ImportError> {
    // A directory opens on Linux, and only its first read fails: refused here as the input
    // that cannot be read it is (exit status 2), not as a trace that broke while read.
    let f = crate::reader::open_file(input).map_err(|e| ImportError::Open {
        path: input.display().to_string(),
        source: e,
    })?;
    let mut src = BufReader::with_capacity(1 << 20, f);
    // Renamed into place at the end: a failed import leaves no partial trace.
    let (o, guard) = crate::atomic::AtomicOutput::create(out).map_err(ImportError::Output)?;
    let header = TraceHeader {
        page_size_hint: 4096,
        source: "champsim".into(),
        command: input.display().to_string(),
        processes: vec![crate::format::ProcessInfo {
            pid: opts.pid,
            ..Default::default()
        }],
    };
    let mut w = TraceWriter::new(
        BufWriter::with_capacity(1 << 20, o),
        &header,
        opts.zstd_level,
    )?;
    let mut magic = [0u8; 6];
    let got = {
        use std::io::BufRead;
        let b = src
            .fill_buf()
            .map_err(|e| ImportError::Read(e.to_string()))?;
        let n = b.len().min(6);
        magic[..n].copy_from_slice(&b[..n]);
        n
    };
    let mut sink = Sink {
        w: &mut w,
        infer: RegionInference::new(opts.chunk),
        opts,
        partial: [0; RECORD_BYTES],
        have: 0,
        records: 0,
        idle_insns: 0,
        insns: 0,
        seq: 0,
        tags: [0; 256],
        err: None,
    };
    let xz = got == 6 && &magic == XZ_MAGIC;
    let res = if xz {
        lzma_rs::xz_decompress(&mut src, &mut sink).map_err(|e| e.to_string())
    } else {
        std::io::copy(&mut src, &mut sink)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    if let Some(e) = sink.err.take() {
        return Err(e.into());
    }
    if let Err(e) = res {
        if !sink.full() {
            // Where and what: the decoder's own words ("failed to fill whole buffer") say
            // neither.
            use std::io::Seek;
            let at = src
                .stream_position()
                .map_or_else(|_| "?".into(), |n| n.to_string());
            let what = if xz {
                "the xz stream is cut short or corrupt"
            } else {
                "the file could not be read"
            };
            return Err(ImportError::Read(format!(
                "{}: {what} at byte offset {at} of the file, after {} whole records \
                 (decompressed byte offset {}): {e}{}",
                input.display(),
                sink.records,
                sink.records * RECORD_BYTES as u64 + sink.have as u64,
                if xz { " (was the file truncated?)" } else { "" }
            )));
        }
    }
    if sink.have != 0 && !sink.full() {
        return Err(ImportError::PartialRecord {
            records: sink.records,
            offset: sink.records * RECORD_BYTES as u64,
            extra: sink.have,
        });
    }
    let pid = opts.pid;
    if sink.idle_insns > 0 {
        let n = sink.idle_insns;
        sink.w.write(&TraceEvent::Compute {
            pid,
            amount: n,
            unit: ComputeUnit::Instructions,
        })?;
    }
    let records = sink.records;
    let inferred = sink.infer.inferred;
    w.write(&TraceEvent::Exit { pid })?;
    let fin = w.finish()?;
    drop(fin.out);
    guard.commit().map_err(ImportError::Write)?;
    Ok(ImportSummary {
        records,
        events: fin.trailer.events,
        accesses: fin.trailer.accesses,
        inferred_regions: inferred,
        bytes: fin.file_bytes,
    })
}

/// Writes `records` as an uncompressed ChampSim trace (for tests and examples; compress with
/// `xz` to get the usual form).
pub fn write_champsim_records(
    out: &mut dyn Write,
    records: &[ChampSimRecord],
) -> std::io::Result<()> {
    for r in records {
        out.write_all(&r.to_bytes())?;
    }
    Ok(())
}

/// One `input_instr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChampSimRecord {
    pub ip: u64,
    pub is_branch: u8,
    pub branch_taken: u8,
    pub destination_registers: [u8; 2],
    pub source_registers: [u8; 4],
    pub destination_memory: [u64; 2],
    pub source_memory: [u64; 4],
}

impl ChampSimRecord {
    pub fn to_bytes(&self) -> [u8; RECORD_BYTES] {
        let mut b = [0u8; RECORD_BYTES];
        b[0..8].copy_from_slice(&self.ip.to_le_bytes());
        b[8] = self.is_branch;
        b[9] = self.branch_taken;
        b[10..12].copy_from_slice(&self.destination_registers);
        b[12..16].copy_from_slice(&self.source_registers);
        for (i, d) in self.destination_memory.iter().enumerate() {
            b[16 + 8 * i..24 + 8 * i].copy_from_slice(&d.to_le_bytes());
        }
        for (i, s) in self.source_memory.iter().enumerate() {
            b[32 + 8 * i..40 + 8 * i].copy_from_slice(&s.to_le_bytes());
        }
        b
    }
}
