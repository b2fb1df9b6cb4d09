//! The byte-level format (docs/trace-format.md is the spec; this file is its only implementation):
//! constants, varints, the header and trailer, and the event encoding inside a block.
//!
//! Who calls it: `writer` (encode) and `reader` (decode). Nothing here does I/O.
//!
//! Architecture Invariant: a block decodes on its own. The delta state (current pid, last
//! address per pid) starts empty at every block, so a reader can skip or parallelise blocks and
//! a corrupt block cannot poison the next one.

use crate::event::*;

pub const MAGIC: &[u8; 8] = b"SPLTRACE";
pub const FOOTER_MAGIC: &[u8; 8] = b"SPLTEND1";
/// The version this build writes. It reads 1 ..= VERSION. Version 3 codes each access's
/// address against predictions (below, "address prediction"), where version 2 wrote a plain
/// delta, adds the `Vfork` event and ends the trailer with `brk_refused`. Version 4 adds the
/// `morecore` mmap flag and the trailer's `morecore_mmaps`.
pub const VERSION: u16 = 4;

/// What a version-1 trace's data accesses get as `ipa` when nothing in the trace says better
/// (docs/trace-format.md, "Reading version 1"): the instructions per access of real programs
/// recorded with version 2, rounded: gzip 3.85, `ls -lR` 2.83, `cc -O2 -c` 2.65, sort 1.96
/// (3.09 over all their accesses; a scan and a list walk: 5.00 and 4.07).
pub const V1_IPA: u16 = 3;

pub const FRAME_BLOCK: u8 = b'B';
pub const FRAME_TRAILER: u8 = b'T';

/// Limits a reader enforces before allocating, so that a corrupt length cannot make it
/// allocate without bound (constant memory whatever the input).
pub const MAX_HEADER: u32 = 1 << 20;
pub const MAX_BLOCK_RAW: u32 = 1 << 24;
pub const MAX_TRAILER: u32 = 1 << 26;
/// A writer closes a block when its encoded events reach this size.
pub const TARGET_BLOCK_RAW: usize = 1 << 20;
/// ... or when it holds this many events (runs count every access they stand for).
pub const MAX_BLOCK_EVENTS: u64 = 1 << 30;

// Opcodes of the event encoding. 0x00..=0x3f and (version 2) 0x80..=0xbf are accesses:
//   bit 7 = a dep/ipa byte follows (else: the predicted dep and ipa hold), bit 5 = run,
//   bits 3..4 = kind (0 read, 1 write, 2 ifetch, 3 read-modify-write), bits 0..2 = size code
//   (0..=6: 1 << code bytes; 7: the size follows as a varint).
pub const OP_ACCESS_MAX: u8 = 0x3f;
pub const OP_RUN_BIT: u8 = 0x20;
pub const OP_DI_BIT: u8 = 0x80;
/// In the dep/ipa byte, a nibble of 15 means "15 + a varint that follows".
pub const DI_ESCAPE: u8 = 15;

// ---------------------------------------------------------------------------------------------
// dep/ipa prediction (version 2)
//
// Most accesses repeat the dep and ipa that the same instruction had on its previous execution,
// but consecutive accesses rarely share them (2% in gzip), so a per-block table predicts the
// pair from its context: the pid's previous two pairs in the block and the access's kind and
// size code (which the decoder has read before). A correct prediction costs nothing (bit 7 of
// the opcode clear); 89% of gzip's accesses are predicted.

/// log2 of the prediction table's entries.
pub const PRED_BITS: u32 = 14;
/// The (dep, ipa) every prediction entry and both history slots of a pid start a block with.
pub const PRED_INITIAL: u32 = pack_di(0, 1);

/// A (dep, ipa) pair as the predictor keeps it: `dep << 16 | ipa`.
#[inline]
pub const fn pack_di(dep: u16, ipa: u16) -> u32 {
    ((dep as u32) << 16) | ipa as u32
}

/// The table entry of an access whose pid's previous two pairs are `p1` (the last) and `p2`,
/// of kind `kind` (its code) and size code `sc`.
#[inline]
pub fn pred_index(p1: u32, p2: u32, kind: u8, sc: u8) -> usize {
    // p1 uses bits 0..=25 (dep <= 1023): the kind and size code go in bits 27..=31. One
    // multiply: the index is on the decoder's critical path (each access's context is the
    // previous access's result).
    let ks = (((kind & 3) << 3) | (sc & 7)) as u64;
    let x = (p1 as u64) | (ks << 27) | ((p2 as u64) << 32);
    (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - PRED_BITS)) as usize
}

/// The prediction table of a block (encoder and decoder keep the same one).
struct PredTable(Box<[u32]>);

impl Default for PredTable {
    fn default() -> Self {
        PredTable(vec![PRED_INITIAL; 1 << PRED_BITS].into_boxed_slice())
    }
}

impl PredTable {
    fn reset(&mut self) {
        self.0.fill(PRED_INITIAL);
    }
    #[inline]
    fn get(&self, i: usize) -> u32 {
        self.0.get(i).copied().unwrap_or(PRED_INITIAL)
    }
    #[inline]
    fn set(&mut self, i: usize, v: u32) {
        if let Some(e) = self.0.get_mut(i) {
            *e = v;
        }
    }
}
// ---------------------------------------------------------------------------------------------
// address prediction (version 3)
//
// Version 2 wrote each address as a delta from the pid's previous access: ~1.2 of gzip's 1.4
// bytes per access. Version 3 predicts the address instead, as value-prediction trace
// compressors do (Burtscher, "VPC3: a fast and effective trace-compression algorithm",
// SIGMETRICS 2004; Burtscher, Ganusov, Jackson, Ke, Ratanaworabhan, Sam, "The VPC
// trace-compression algorithms", IEEE ToC 2005: a table indexed by the instruction keeps its last
// value and stride, several predictors race, the code of the one that was right is written, and
// a general-purpose compressor then squeezes the codes). Those compressors index by the program
// counter; our traces carry none (the Valgrind wire has no room, and capture is bounded by the
// converter), so the table is indexed by what the decoder already knows of the access: its
// (dep, ipa) pair, the pid's previous pair, kind and size code, the same context that predicts
// dep and ipa, a stand-in for the static instruction. Each entry holds the entry's last address,
// its stride, and the offsets of that address from the pid's previous and second-previous
// accesses (`p = q + 8` field accesses, two pointers advancing in step). Of gzip's accesses 32%
// hit the stride, 6% the offset from the previous access, 9% the one from the access before
// (docs/trace-format.md, "Addresses (version 3)", has the measurements and the rejected designs).

/// log2 of the address table's entries (32 bytes each: 512 KiB per block being coded).
pub const ADDR_BITS: u32 = 14;
/// Address codes 0..=2 are predictor hits; 3 escapes to a full delta; 4 and up are misses.
pub const ADDR_STRIDE: u64 = 0;
pub const ADDR_OFFSET1: u64 = 1;
pub const ADDR_OFFSET2: u64 = 2;
pub const ADDR_ESCAPE: u64 = 3;
pub const ADDR_MISS: u64 = 4;

/// The address-table entry of an access of (dep, ipa) pair `di` whose pid's previous pair is
/// `p1`, of kind `kind` (its code) and size code `sc`.
#[inline]
pub fn addr_index(di: u32, p1: u32, kind: u8, sc: u8) -> usize {
    let ks = (((kind & 3) << 3) | (sc & 7)) as u64;
    let x = (di as u64) | (ks << 27) | ((p1 as u64) << 32);
    // A different odd multiplier from `pred_index`'s (any would do: the tables are apart).
    (x.wrapping_mul(0xD6E8_FEB8_6659_FD93) >> (64 - ADDR_BITS)) as usize
}

/// One address-table entry. All arithmetic wraps (addresses and offsets are 64-bit patterns).
#[derive(Clone, Copy, Debug, Default)]
struct AddrEntry {
    /// The last address (end of run) of the accesses that used this entry.
    last: u64,
    /// `last` minus the address before it in this entry (a run's own stride after a run).
    stride: u64,
    /// The first address of the last access of this entry minus its pid's previous address.
    off1: u64,
    /// ... minus its pid's second-previous address.
    off2: u64,
}

/// The address table of a block (encoder and decoder keep the same one): all zeros at the
/// block start.
struct AddrTable(Box<[AddrEntry]>);

impl Default for AddrTable {
    fn default() -> Self {
        AddrTable(vec![AddrEntry::default(); 1 << ADDR_BITS].into_boxed_slice())
    }
}

impl AddrTable {
    fn reset(&mut self) {
        self.0.fill(AddrEntry::default());
    }
    #[inline]
    fn get(&self, i: usize) -> AddrEntry {
        self.0.get(i).copied().unwrap_or_default()
    }

    /// The address that code `code` (< ADDR_ESCAPE) or miss value `code` (>= ADDR_MISS)
    /// stands for; `None` for ADDR_ESCAPE (a full delta from `lane.last` follows).
    #[inline]
    fn decode(e: &AddrEntry, lane: &Lane, code: u64) -> Option<u64> {
        Some(match code {
            ADDR_STRIDE => e.last.wrapping_add(e.stride),
            ADDR_OFFSET1 => lane.last.wrapping_add(e.off1),
            ADDR_OFFSET2 => lane.prev.wrapping_add(e.off2),
            ADDR_ESCAPE => return None,
            m => {
                let m = m - ADDR_MISS;
                let base = if m & 1 == 0 { lane.last } else { e.last };
                base.wrapping_add(unzigzag(m >> 1) as u64)
            }
        })
    }

    /// The code of address `va` (ADDR_ESCAPE: write a full delta from `lane.last` after it).
    #[inline]
    fn encode(e: &AddrEntry, lane: &Lane, va: u64) -> u64 {
        if va == e.last.wrapping_add(e.stride) {
            return ADDR_STRIDE;
        }
        if va == lane.last.wrapping_add(e.off1) {
            return ADDR_OFFSET1;
        }
        if va == lane.prev.wrapping_add(e.off2) {
            return ADDR_OFFSET2;
        }
        let zl = zigzag(va.wrapping_sub(lane.last) as i64);
        let ze = zigzag(va.wrapping_sub(e.last) as i64);
        let (z, b) = if zl <= ze { (zl, 0) } else { (ze, 1) };
        if z >> 62 != 0 {
            return ADDR_ESCAPE;
        }
        ADDR_MISS + ((z << 1) | b)
    }

    /// After an access (or run: `count` accesses, `stride` apart) at `va`: the entry and the
    /// pid's last two addresses learn it.
    #[inline]
    fn learn(&mut self, i: usize, lane: &mut Lane, va: u64, stride: u64, count: u64) {
        let end = va.wrapping_add((count - 1).wrapping_mul(stride));
        if let Some(e) = self.0.get_mut(i) {
            e.stride = if count > 1 {
                stride
            } else {
                va.wrapping_sub(e.last)
            };
            e.off1 = va.wrapping_sub(lane.last);
            e.off2 = va.wrapping_sub(lane.prev);
            e.last = end;
        }
        lane.prev = if count > 1 {
            end.wrapping_sub(stride)
        } else {
            lane.last
        };
        lane.last = end;
    }
}

pub const OP_SET_PID: u8 = 0x40;
pub const OP_MMAP: u8 = 0x41;
pub const OP_MUNMAP: u8 = 0x42;
pub const OP_MREMAP: u8 = 0x43;
pub const OP_MPROTECT: u8 = 0x44;
pub const OP_MADVISE: u8 = 0x45;
pub const OP_BRK: u8 = 0x46;
pub const OP_FORK: u8 = 0x47;
pub const OP_EXEC: u8 = 0x48;
pub const OP_EXIT: u8 = 0x49;
pub const OP_FILE_OPEN: u8 = 0x4a;
pub const OP_COMPUTE: u8 = 0x4b;
/// Version 3: a vfork (the child shares the parent's address space until exec or exit).
pub const OP_VFORK: u8 = 0x4c;

// ---------------------------------------------------------------------------------------------
// varints (LEB128, at most 10 bytes for a u64) and zigzag

#[inline]
pub fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

#[inline]
pub const fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
pub const fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

pub fn put_str(buf: &mut Vec<u8>, s: &str) {
    put_varint(buf, s.len() as u64);
    buf.extend_from_slice(s.as_bytes());
}

/// A decoding failure inside a byte slice: where, and what was expected.
#[derive(Debug)]
pub struct DecodeErr {
    pub pos: usize,
    pub expected: String,
    pub found: String,
}

#[cold]
fn derr(pos: usize, expected: impl Into<String>, found: impl Into<String>) -> DecodeErr {
    DecodeErr {
        pos,
        expected: expected.into(),
        found: found.into(),
    }
}

/// Reads a byte slice front to back; every read is checked.
pub struct Cursor<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }
    #[inline]
    pub fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }
    #[inline]
    pub fn u8(&mut self, what: &str) -> Result<u8, DecodeErr> {
        match self.buf.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => Err(derr(self.pos, what, "the end of the data")),
        }
    }
    #[inline]
    pub fn varint(&mut self, what: &str) -> Result<u64, DecodeErr> {
        // Fast path: one byte.
        if let Some(&b) = self.buf.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(b as u64);
            }
        }
        self.varint_slow(what)
    }
    #[cold]
    fn varint_slow(&mut self, what: &str) -> Result<u64, DecodeErr> {
        let start = self.pos;
        let mut v: u64 = 0;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(derr(
                    start,
                    format!("{what} (a varint)"),
                    "the end of the data",
                ));
            };
            self.pos += 1;
            if i == 9 && b > 1 {
                return Err(derr(
                    start,
                    format!("{what} (a varint of at most 64 bits)"),
                    "a longer varint",
                ));
            }
            v |= ((b & 0x7f) as u64) << (7 * i);
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(derr(
            start,
            format!("{what} (a varint)"),
            "more than 10 bytes",
        ))
    }
    pub fn u32v(&mut self, what: &str) -> Result<u32, DecodeErr> {
        let pos = self.pos;
        let v = self.varint(what)?;
        u32::try_from(v).map_err(|_| derr(pos, format!("{what} (at most 32 bits)"), v.to_string()))
    }
    pub fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8], DecodeErr> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        match end {
            Some(end) => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(derr(
                self.pos,
                format!("{what} ({n} bytes)"),
                "the end of the data",
            )),
        }
    }
    pub fn string(&mut self, what: &str) -> Result<String, DecodeErr> {
        let pos = self.pos;
        let n = self.varint(what)?;
        let n = usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.buf.len())
            .ok_or_else(|| derr(pos, format!("{what} (a string length)"), n.to_string()))?;
        let b = self.bytes(n, what)?;
        String::from_utf8(b.to_vec())
            .map_err(|_| derr(pos, format!("{what} (UTF-8 text)"), "invalid UTF-8"))
    }
}

// ---------------------------------------------------------------------------------------------
// header and trailer

/// The header, written first. `processes` is the process table known when the trace started
/// (empty for `record`, which learns processes as they appear: the trailer has them all).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceHeader {
    /// The page size of the machine the trace came from (4096 for amd64 Linux), a hint only.
    pub page_size_hint: u32,
    /// Who produced the trace: "valgrind-splab", "valgrind-lackey", "champsim", ...
    pub source: String,
    /// The command line (or input file) traced.
    pub command: String,
    pub processes: Vec<ProcessInfo>,
}

/// A row of the process table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessInfo {
    pub pid: Pid,
    pub parent: Option<Pid>,
    /// Events of this process (accesses counted one by one).
    pub events: u64,
    pub accesses: u64,
    /// Times this pid replaced its image (`Exec`).
    pub execs: u32,
    pub exited: bool,
}

/// A mapping live at the end of the trace (or at its process's exit), from the Mmap / Munmap /
/// Mremap / Brk events. Kept for `trace info`; a replayer needs only the events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    pub pid: Pid,
    pub start: Vaddr,
    pub len: u64,
    pub prot: Prot,
    pub flags: MmapFlags,
    pub file: Option<FileId>,
    /// True for the heap (the range of the program break).
    pub heap: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileInfo {
    pub file: FileId,
    pub size: u64,
    pub name: Option<String>,
}

/// The trailer, written by `TraceWriter::finish`: counts and tables for `trace info`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trailer {
    pub events: u64,
    pub accesses: u64,
    pub reads: u64,
    pub writes: u64,
    pub ifetches: u64,
    /// Read-modify-writes (0 in version-1 traces, which counted them as writes).
    pub rmws: u64,
    pub blocks: u64,
    /// Bytes of the whole file up to the trailer frame.
    pub bytes: u64,
    /// The sum of the accesses' `ipa`: the instructions of the trace (0 in version 1).
    pub instructions: u64,
    /// Accesses with `dep > 0` (0 in version 1).
    pub dependent: u64,
    pub processes: Vec<ProcessInfo>,
    pub regions: Vec<Region>,
    /// True when more regions existed than the writer keeps (`writer::MAX_REGIONS`).
    pub regions_truncated: bool,
    pub files: Vec<FileInfo>,
    /// Version 3: `brk` calls the recorder saw refused although a native kernel would have
    /// granted them (Valgrind caps the heap at 8 MiB): the recording's heap is not the
    /// program's native heap. 0 in older versions and for other sources.
    pub brk_refused: u64,
    /// Version 4: mappings the recorder marked `MmapFlags::MORECORE` (glibc's mmap fallback
    /// after a refused `brk`), which a replayer can put back on the heap. When it equals
    /// `brk_refused`, every refused growth has its replacement marked.
    pub morecore_mmaps: u64,
}

fn put_process(b: &mut Vec<u8>, p: &ProcessInfo) {
    put_varint(b, p.pid.0 as u64);
    put_varint(b, p.parent.map_or(0, |q| q.0 as u64 + 1));
    put_varint(b, p.events);
    put_varint(b, p.accesses);
    put_varint(b, p.execs as u64);
    b.push(p.exited as u8);
}

fn get_process(c: &mut Cursor) -> Result<ProcessInfo, DecodeErr> {
    let pid = Pid(c.u32v("a pid")?);
    let parent = c.varint("a parent pid")?;
    let parent = match parent {
        0 => None,
        p => Some(Pid(
            u32::try_from(p - 1).map_err(|_| derr(c.pos, "a parent pid", p.to_string()))?
        )),
    };
    Ok(ProcessInfo {
        pid,
        parent,
        events: c.varint("an event count")?,
        accesses: c.varint("an access count")?,
        execs: c.u32v("an exec count")?,
        exited: c.u8("an exited flag")? != 0,
    })
}

/// A count read from the data, checked against what the rest of the data could hold, so that a
/// corrupt count cannot make the reader reserve memory without bound.
fn get_count(c: &mut Cursor, what: &str, min_item_bytes: usize) -> Result<usize, DecodeErr> {
    let pos = c.pos;
    let n = c.varint(what)?;
    let room = (c.buf.len() - c.pos.min(c.buf.len())) / min_item_bytes.max(1);
    usize::try_from(n)
        .ok()
        .filter(|&n| n <= room)
        .ok_or_else(|| {
            derr(
                pos,
                format!("{what} (at most {room} for the bytes left)"),
                n.to_string(),
            )
        })
}

impl TraceHeader {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        put_varint(&mut b, self.page_size_hint as u64);
        put_str(&mut b, &self.source);
        put_str(&mut b, &self.command);
        put_varint(&mut b, self.processes.len() as u64);
        for p in &self.processes {
            put_process(&mut b, p);
        }
        b
    }
    pub fn decode(buf: &[u8]) -> Result<TraceHeader, DecodeErr> {
        let mut c = Cursor::new(buf);
        let page_size_hint = c.u32v("the page size hint")?;
        let source = c.string("the source")?;
        let command = c.string("the command")?;
        let n = get_count(&mut c, "the number of processes", 6)?;
        let mut processes = Vec::with_capacity(n);
        for _ in 0..n {
            processes.push(get_process(&mut c)?);
        }
        // Bytes after these fields are for later versions' additions: ignored.
        Ok(TraceHeader {
            page_size_hint,
            source,
            command,
            processes,
        })
    }
}

impl Trailer {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        for v in [
            self.events,
            self.accesses,
            self.reads,
            self.writes,
            self.ifetches,
            self.blocks,
            self.bytes,
        ] {
            put_varint(&mut b, v);
        }
        put_varint(&mut b, self.processes.len() as u64);
        for p in &self.processes {
            put_process(&mut b, p);
        }
        put_varint(&mut b, self.regions.len() as u64);
        b.push(self.regions_truncated as u8);
        for r in &self.regions {
            put_varint(&mut b, r.pid.0 as u64);
            put_varint(&mut b, r.start.0);
            put_varint(&mut b, r.len);
            b.push(r.prot.0);
            put_varint(&mut b, r.flags.0 as u64);
            put_varint(&mut b, r.file.map_or(0, |f| f.0 as u64));
            b.push(r.heap as u8);
        }
        put_varint(&mut b, self.files.len() as u64);
        for f in &self.files {
            put_varint(&mut b, f.file.0 as u64);
            put_varint(&mut b, f.size);
            match &f.name {
                Some(n) => {
                    b.push(1);
                    put_str(&mut b, n);
                }
                None => b.push(0),
            }
        }
        // Version 2 appends its counts (a version-1 layout before them).
        for v in [self.rmws, self.instructions, self.dependent] {
            put_varint(&mut b, v);
        }
        // Version 3 appends its own.
        put_varint(&mut b, self.brk_refused);
        // Version 4 appends its own.
        put_varint(&mut b, self.morecore_mmaps);
        b
    }

    /// Decodes a trailer of a trace of format `version`.
    pub fn decode(buf: &[u8], version: u16) -> Result<Trailer, DecodeErr> {
        let mut c = Cursor::new(buf);
        let mut t = Trailer {
            events: c.varint("the event count")?,
            accesses: c.varint("the access count")?,
            reads: c.varint("the read count")?,
            writes: c.varint("the write count")?,
            ifetches: c.varint("the ifetch count")?,
            blocks: c.varint("the block count")?,
            bytes: c.varint("the byte count")?,
            ..Default::default()
        };
        let n = get_count(&mut c, "the number of processes", 6)?;
        for _ in 0..n {
            t.processes.push(get_process(&mut c)?);
        }
        let n = get_count(&mut c, "the number of regions", 7)?;
        t.regions_truncated = c.u8("the regions-truncated flag")? != 0;
        for _ in 0..n {
            let pid = Pid(c.u32v("a region's pid")?);
            let start = Vaddr(c.varint("a region's start")?);
            let len = c.varint("a region's length")?;
            let prot = Prot(c.u8("a region's protection")?);
            let flags = MmapFlags(u16::try_from(c.varint("a region's flags")?).unwrap_or(0));
            let file = c.u32v("a region's file id")?;
            let heap = c.u8("a region's heap flag")? != 0;
            t.regions.push(Region {
                pid,
                start,
                len,
                prot,
                flags,
                file: (file != 0).then_some(FileId(file)),
                heap,
            });
        }
        let n = get_count(&mut c, "the number of files", 3)?;
        for _ in 0..n {
            let pos = c.pos;
            let file = c.u32v("a file id")?;
            if file == 0 {
                return Err(derr(pos, "a file id (not 0)", "0"));
            }
            let size = c.varint("a file size")?;
            let name = match c.u8("a file-name flag")? {
                0 => None,
                _ => Some(c.string("a file name")?),
            };
            t.files.push(FileInfo {
                file: FileId(file),
                size,
                name,
            });
        }
        if version >= 2 {
            t.rmws = c.varint("the read-modify-write count")?;
            t.instructions = c.varint("the instruction count")?;
            t.dependent = c.varint("the dependent-access count")?;
        }
        if version >= 3 {
            t.brk_refused = c.varint("the refused-brk count")?;
        }
        if version >= 4 {
            t.morecore_mmaps = c.varint("the morecore mapping count")?;
        }
        Ok(t)
    }
}

// ---------------------------------------------------------------------------------------------
// events inside a block

#[inline]
fn size_code(size: u32) -> u8 {
    match size {
        1 => 0,
        2 => 1,
        4 => 2,
        8 => 3,
        16 => 4,
        32 => 5,
        64 => 6,
        _ => 7,
    }
}

/// The delta state of one pid inside a block: its last two access addresses and its last two
/// (dep, ipa) pairs (the predictor's context).
#[derive(Clone, Copy, Debug)]
struct Lane {
    /// The last address (end of run) of the pid's accesses in the block (0 at the start).
    last: u64,
    /// Version 3: the address before `last` (0 at the start).
    prev: u64,
    p1: u32,
    p2: u32,
    /// Version 1 only: the pid has had an instruction fetch in this block, so its data accesses
    /// belong to the instruction of the fetch before them.
    v1_fetched: bool,
    /// Version 1 only: instructions of the pid's `Compute` events since its previous access.
    v1_compute: u64,
}

impl Default for Lane {
    fn default() -> Self {
        Lane {
            last: 0,
            prev: 0,
            p1: PRED_INITIAL,
            p2: PRED_INITIAL,
            v1_fetched: false,
            v1_compute: 0,
        }
    }
}

/// The lanes of the pids of a block: the current pid's apart (the hot path), the others in a
/// short list.
#[derive(Default)]
struct Lanes {
    cur_pid: Option<Pid>,
    cur: Lane,
    others: Vec<(Pid, Lane)>,
}

impl Lanes {
    fn clear(&mut self) {
        self.cur_pid = None;
        self.cur = Lane::default();
        self.others.clear();
    }

    /// Makes `pid` current. False (and nothing changed) when that would keep more than `max`
    /// other lanes.
    fn switch(&mut self, pid: Pid, max: usize) -> bool {
        if let Some(old) = self.cur_pid {
            match self.others.iter_mut().find(|(p, _)| *p == old) {
                Some(e) => e.1 = self.cur,
                None => {
                    if self.others.len() >= max {
                        return false;
                    }
                    self.others.push((old, self.cur))
                }
            }
        }
        self.cur = self
            .others
            .iter()
            .find(|(p, _)| *p == pid)
            .map_or_else(Lane::default, |e| e.1);
        self.cur_pid = Some(pid);
        true
    }
}

/// Encodes events into one block's payload, keeping the per-pid delta state.
#[derive(Default)]
pub struct BlockEncoder {
    pub buf: Vec<u8>,
    /// Events in the block, each access of a run counted.
    pub events: u64,
    lanes: Lanes,
    pred: PredTable,
    addr: AddrTable,
    /// Accesses that carried a dep/ipa byte (the pair was not predicted), over the encoder's life.
    pub di_bytes: u64,
}

impl BlockEncoder {
    pub fn clear(&mut self) {
        self.buf.clear();
        self.events = 0;
        self.lanes.clear();
        self.pred.reset();
        self.addr.reset();
    }

    #[inline]
    fn set_pid(&mut self, pid: Pid) {
        if self.lanes.cur_pid == Some(pid) {
            return;
        }
        self.switch_pid(pid);
    }

    #[cold]
    fn switch_pid(&mut self, pid: Pid) {
        self.lanes.switch(pid, usize::MAX);
        self.buf.push(OP_SET_PID);
        put_varint(&mut self.buf, pid.0 as u64);
    }

    /// `count` accesses at `va`, `va + stride`, ... (count >= 1), all with this dep (at most
    /// DEP_CAP) and ipa.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn access_run(
        &mut self,
        pid: Pid,
        va: u64,
        kind: AccessKind,
        size: u32,
        dep: u16,
        ipa: u16,
        stride: i64,
        count: u64,
    ) {
        debug_assert!(count >= 1, "BlockEncoder::access_run: empty run");
        self.set_pid(pid);
        let sc = size_code(size);
        let run = count > 1;
        debug_assert!(
            dep <= DEP_CAP,
            "BlockEncoder::access_run: dep beyond the cap"
        );
        let lane = &mut self.lanes.cur;
        let di = pack_di(dep, ipa);
        let slot = pred_index(lane.p1, lane.p2, kind as u8, sc);
        let ai = addr_index(di, lane.p1, kind as u8, sc);
        let changed = self.pred.get(slot) != di;
        let b = &mut self.buf;
        b.push(((changed as u8) << 7) | ((run as u8) << 5) | ((kind as u8) << 3) | sc);
        if changed {
            let ni = ipa.min(DI_ESCAPE as u16) as u8;
            let nd = dep.min(DI_ESCAPE as u16) as u8;
            b.push((nd << 4) | ni);
            if ni == DI_ESCAPE {
                put_varint(b, (ipa - DI_ESCAPE as u16) as u64);
            }
            if nd == DI_ESCAPE {
                put_varint(b, (dep - DI_ESCAPE as u16) as u64);
            }
            self.pred.set(slot, di);
            self.di_bytes += 1;
        }
        lane.p2 = lane.p1;
        lane.p1 = di;
        if sc == 7 {
            put_varint(b, size as u64);
        }
        let code = AddrTable::encode(&self.addr.get(ai), lane, va);
        put_varint(b, code);
        if code == ADDR_ESCAPE {
            put_varint(b, zigzag(va.wrapping_sub(lane.last) as i64));
        }
        if run {
            put_varint(b, count - 2);
            put_varint(b, zigzag(stride));
        }
        self.addr.learn(ai, lane, va, stride as u64, count);
        self.events += count;
    }

    /// Any event but an access (use `access_run` for those).
    pub fn other(&mut self, ev: &TraceEvent) {
        use TraceEvent::*;
        if let Access {
            pid,
            va,
            kind,
            size,
            dep,
            ipa,
        } = ev
        {
            self.access_run(*pid, va.0, *kind, *size, *dep, *ipa, 0, 1);
            return;
        }
        if let Some(pid) = ev.pid() {
            self.set_pid(pid);
        }
        let b = &mut self.buf;
        match ev {
            Access { .. } => unreachable!("handled above"),
            Mmap {
                addr,
                len,
                prot,
                flags,
                file,
                offset,
                ..
            } => {
                b.push(OP_MMAP);
                put_varint(b, addr.0);
                put_varint(b, *len);
                b.push(prot.0);
                put_varint(b, flags.0 as u64);
                put_varint(b, file.map_or(0, |f| f.0 as u64));
                put_varint(b, *offset);
            }
            Munmap { addr, len, .. } => {
                b.push(OP_MUNMAP);
                put_varint(b, addr.0);
                put_varint(b, *len);
            }
            Mremap {
                old_addr,
                old_len,
                new_addr,
                new_len,
                ..
            } => {
                b.push(OP_MREMAP);
                put_varint(b, old_addr.0);
                put_varint(b, *old_len);
                put_varint(b, new_addr.0);
                put_varint(b, *new_len);
            }
            Mprotect {
                addr, len, prot, ..
            } => {
                b.push(OP_MPROTECT);
                put_varint(b, addr.0);
                put_varint(b, *len);
                b.push(prot.0);
            }
            Madvise {
                addr, len, advice, ..
            } => {
                b.push(OP_MADVISE);
                put_varint(b, addr.0);
                put_varint(b, *len);
                match advice {
                    Advice::DontNeed => b.push(0),
                    Advice::Free => b.push(1),
                    Advice::HugePage => b.push(2),
                    Advice::NoHugePage => b.push(3),
                    Advice::Collapse => b.push(4),
                    Advice::Other(x) => {
                        b.push(5);
                        put_varint(b, *x as u64);
                    }
                }
            }
            Brk { new_end, .. } => {
                b.push(OP_BRK);
                put_varint(b, new_end.0);
            }
            Fork { child, .. } => {
                b.push(OP_FORK);
                put_varint(b, child.0 as u64);
            }
            Vfork { child, .. } => {
                b.push(OP_VFORK);
                put_varint(b, child.0 as u64);
            }
            Exec { .. } => b.push(OP_EXEC),
            Exit { .. } => b.push(OP_EXIT),
            FileOpen { file, size, name } => {
                b.push(OP_FILE_OPEN);
                put_varint(b, file.0 as u64);
                put_varint(b, *size);
                match name {
                    Some(n) => {
                        put_varint(b, n.len() as u64 + 1);
                        b.extend_from_slice(n.as_bytes());
                    }
                    None => put_varint(b, 0),
                }
            }
            Compute { amount, unit, .. } => {
                b.push(OP_COMPUTE);
                put_varint(b, *amount);
                b.push(match unit {
                    ComputeUnit::Cycles => 0,
                    ComputeUnit::Instructions => 1,
                });
            }
        }
        self.events += 1;
    }
}

/// A run being expanded into single accesses.
#[derive(Clone, Copy, Debug, Default)]
struct PendingRun {
    pid: Pid,
    next: u64,
    stride: i64,
    remaining: u64,
    kind: u8,
    size: u32,
    dep: u16,
    ipa: u16,
    /// The ipa of the next access to hand out: `ipa`, except for the first access of a
    /// version-1 run after `Compute` instructions.
    next_ipa: u16,
}

/// Version 1's rule for an access's ipa (docs/trace-format.md, "Reading version 1"): returns
/// the first access's ipa and the ipa of the rest of its run.
#[inline]
fn v1_ipa(lane: &mut Lane, kind: AccessKind, fallback: u16) -> (u16, u16) {
    let base = match kind {
        AccessKind::Ifetch => {
            lane.v1_fetched = true;
            1
        }
        _ if lane.v1_fetched => 0,
        _ => fallback,
    };
    let compute = std::mem::take(&mut lane.v1_compute);
    let first = (base as u64).saturating_add(compute).min(IPA_CAP as u64) as u16;
    (first, base)
}

/// Decodes one block's payload into events. Never panics; counts every event against the
/// block header's count so that a corrupt run length cannot produce unbounded output.
#[derive(Default)]
pub struct BlockDecoder {
    pos: usize,
    lanes: Lanes,
    pred: PredTable,
    /// Versions 1 and 2: addresses are plain deltas (else: coded against `addr`).
    address_deltas: bool,
    addr: AddrTable,
    run: PendingRun,
    /// Events still to produce according to the block header.
    left: u64,
    /// Version-1 blocks: `Some(ipa of a data access nothing else accounts for)`.
    v1: Option<u16>,
}

impl BlockDecoder {
    /// A decoder of the blocks of a trace of format `version` whose header names `source`
    /// (`default()` decodes the current version).
    pub fn for_version(version: u16, source: &str) -> Self {
        BlockDecoder {
            v1: (version < 2).then_some(if source == "champsim" { 1 } else { V1_IPA }),
            address_deltas: version < 3,
            ..Default::default()
        }
    }

    pub fn reset(&mut self, events: u64) {
        self.pos = 0;
        self.lanes.clear();
        if self.v1.is_none() {
            self.pred.reset();
        }
        if !self.address_deltas {
            self.addr.reset();
        }
        self.run = PendingRun::default();
        self.left = events;
    }

    /// True when the block is fully decoded (checks that the bytes and the count agree).
    pub fn finished(&self, buf: &[u8]) -> Result<bool, DecodeErr> {
        if self.run.remaining > 0 {
            return Ok(false);
        }
        if self.pos < buf.len() {
            if self.left == 0 {
                return Err(derr(
                    self.pos,
                    "the end of the block (its header's event count is reached)",
                    "more bytes",
                ));
            }
            return Ok(false);
        }
        if self.left != 0 {
            return Err(derr(
                self.pos,
                format!("{} more events (the block header's count)", self.left),
                "the end of the block",
            ));
        }
        Ok(true)
    }

    /// Appends decoded events to `out` until it holds `limit` events or the block ends.
    /// Returns `Ok(true)` when the block is done.
    pub fn decode_into(
        &mut self,
        buf: &[u8],
        out: &mut Vec<TraceEvent>,
        limit: usize,
    ) -> Result<bool, DecodeErr> {
        loop {
            if out.len() >= limit {
                return self.finished(buf);
            }
            if self.run.remaining > 0 {
                let n = self.run.remaining.min((limit - out.len()) as u64);
                let r = &mut self.run;
                let kind = AccessKind::from_code(r.kind).unwrap_or(AccessKind::Read);
                let (pid, size, stride, dep, ipa) = (r.pid, r.size, r.stride as u64, r.dep, r.ipa);
                let mut va = r.next;
                out.reserve(n as usize);
                // The first may have its own ipa (version 1), the rest share one.
                out.push(TraceEvent::Access {
                    pid,
                    va: Vaddr(va),
                    kind,
                    size,
                    dep,
                    ipa: r.next_ipa,
                });
                va = va.wrapping_add(stride);
                // A trusted-length iterator: no length update per element.
                out.extend((0..n - 1).map(move |j| TraceEvent::Access {
                    pid,
                    va: Vaddr(va.wrapping_add(j.wrapping_mul(stride))),
                    kind,
                    size,
                    dep,
                    ipa,
                }));
                va = va.wrapping_add((n - 1).wrapping_mul(stride));
                r.next = va;
                r.next_ipa = ipa;
                r.remaining -= n;
                continue;
            }
            self.fast_singles(buf, out, limit);
            if out.len() >= limit {
                continue;
            }
            if self.pos >= buf.len() {
                return self.finished(buf);
            }
            if self.left == 0 {
                return Err(derr(
                    self.pos,
                    "the end of the block (its header's event count is reached)",
                    "more events",
                ));
            }
            let mut c = Cursor { buf, pos: self.pos };
            let ev = self.decode_one(&mut c)?;
            self.pos = c.pos;
            if let Some(ev) = ev {
                self.left -= 1;
                out.push(ev);
            }
        }
    }

    /// The hot path: single accesses of a power-of-two size (and, in version 2, a dep/ipa byte
    /// without escapes), while at least 16 bytes remain (so that an opcode, a dep/ipa byte and
    /// a full varint can be read without bounds checks per byte). Anything else, including
    /// every malformed input, is left to `decode_one`.
    #[inline]
    fn fast_singles(&mut self, buf: &[u8], out: &mut Vec<TraceEvent>, limit: usize) {
        let Some(pid) = self.lanes.cur_pid else {
            return;
        };
        let mut pos = self.pos;
        let mut lane = self.lanes.cur;
        let mut left = self.left;
        let room = limit.saturating_sub(out.len()) as u64;
        let max_n = left.min(room);
        let mut n = 0u64;
        while n < max_n && pos + 16 <= buf.len() {
            let w: &[u8; 16] = match buf[pos..pos + 16].try_into() {
                Ok(w) => w,
                Err(_) => break,
            };
            let op = w[0];
            let body = op & !OP_DI_BIT;
            // single access (no run bit), size code 0..=6
            if body > OP_ACCESS_MAX || body & OP_RUN_BIT != 0 || body & 7 == 7 {
                break;
            }
            let kind = match (body >> 3) & 3 {
                0 => AccessKind::Read,
                1 => AccessKind::Write,
                2 => AccessKind::Ifetch,
                _ => AccessKind::Rmw,
            };
            if self.v1.is_some() && (op & OP_DI_BIT != 0 || kind == AccessKind::Rmw) {
                break;
            }
            let slot = pred_index(lane.p1, lane.p2, kind as u8, body & 7);
            let mut di = self.pred.get(slot);
            let mut i = 1;
            if op & OP_DI_BIT != 0 {
                let e = w[1];
                if e & 15 == DI_ESCAPE || e >> 4 == DI_ESCAPE {
                    break;
                }
                di = pack_di((e >> 4) as u16, (e & 15) as u16);
                i = 2;
            }
            let start = i;
            let mut v: u64 = 0;
            loop {
                let b = w[i];
                v |= ((b & 0x7f) as u64) << (7 * (i - start));
                i += 1;
                if b < 0x80 {
                    break;
                }
                if i == start + 10 {
                    // An over-long varint: let the checked path report it.
                    self.commit(pos, lane, left);
                    return;
                }
            }
            if i == start + 10 && w[start + 9] > 1 {
                break;
            }
            let va;
            if !self.address_deltas {
                let ai = addr_index(di, lane.p1, kind as u8, body & 7);
                match AddrTable::decode(&self.addr.get(ai), &lane, v) {
                    Some(a) => va = a,
                    None => break, // an escaped delta: the checked path reads it
                }
                self.addr.learn(ai, &mut lane, va, 0, 1);
            } else {
                va = lane.last.wrapping_add(unzigzag(v) as u64);
                lane.last = va;
            }
            let (dep, ipa);
            if let Some(fallback) = self.v1 {
                dep = 0;
                ipa = v1_ipa(&mut lane, kind, fallback).0;
            } else {
                if op & OP_DI_BIT != 0 {
                    self.pred.set(slot, di);
                }
                lane.p2 = lane.p1;
                lane.p1 = di;
                dep = (di >> 16) as u16;
                ipa = di as u16;
            }
            out.push(TraceEvent::Access {
                pid,
                va: Vaddr(va),
                kind,
                size: 1u32 << (body & 7),
                dep,
                ipa,
            });
            pos += i;
            left -= 1;
            n += 1;
        }
        self.commit(pos, lane, left);
    }

    #[inline]
    fn commit(&mut self, pos: usize, lane: Lane, left: u64) {
        self.pos = pos;
        self.lanes.cur = lane;
        self.left = left;
    }

    fn pid(&self, at: usize) -> Result<Pid, DecodeErr> {
        self.lanes.cur_pid.ok_or_else(|| {
            derr(
                at,
                "a set-pid opcode (0x40) before the first event of a block",
                "an event",
            )
        })
    }

    /// A dep or ipa of 15 or more: 15 plus a varint, at most `max`.
    fn di_escape(c: &mut Cursor, what: &str, max: u16) -> Result<u16, DecodeErr> {
        let pos = c.pos;
        let v = c.varint(what)?;
        v.checked_add(DI_ESCAPE as u64)
            .filter(|&x| x <= max as u64)
            .map(|x| x as u16)
            .ok_or_else(|| {
                derr(
                    pos,
                    format!("{what} of at most {max} (15 + at most {})", max - 15),
                    format!("15 + {v}"),
                )
            })
    }

    /// One opcode. Returns None for opcodes that produce no event by themselves (set-pid, and
    /// runs, which are expanded by `decode_into`).
    #[inline]
    fn decode_one(&mut self, c: &mut Cursor) -> Result<Option<TraceEvent>, DecodeErr> {
        let at = c.pos;
        let op = c.u8("an opcode")?;
        let body = op & !OP_DI_BIT;
        if body <= OP_ACCESS_MAX && (op & OP_DI_BIT == 0 || self.v1.is_none()) {
            let pid = self.pid(at)?;
            let kind_code = (body >> 3) & 3;
            let kind =
                match AccessKind::from_code(kind_code) {
                    Some(AccessKind::Rmw) if self.v1.is_some() => return Err(derr(
                        at,
                        "an access opcode with kind 0, 1 or 2 (version 1 has no read-modify-write)",
                        format!("{op:#04x}"),
                    )),
                    Some(k) => k,
                    None => AccessKind::Read, // unreachable: two bits
                };
            let sc = body & 7;
            let lane = &self.lanes.cur;
            let slot = pred_index(lane.p1, lane.p2, kind as u8, sc);
            let pred = self.pred.get(slot);
            let (mut dep, mut ipa) = ((pred >> 16) as u16, pred as u16);
            if op & OP_DI_BIT != 0 {
                let e = c.u8("a dep/ipa byte")?;
                ipa = (e & 15) as u16;
                dep = (e >> 4) as u16;
                if ipa == DI_ESCAPE as u16 {
                    ipa = Self::di_escape(c, "an ipa", u16::MAX)?;
                }
                if dep == DI_ESCAPE as u16 {
                    dep = Self::di_escape(c, "a dep", DEP_CAP)?;
                }
            }
            let size = if sc == 7 {
                c.u32v("an access size")?
            } else {
                1u32 << sc
            };
            let lane = &self.lanes.cur;
            let mut ai = None;
            let va = if !self.address_deltas {
                let i = addr_index(pack_di(dep, ipa), lane.p1, kind as u8, sc);
                ai = Some(i);
                let code = c.varint("an address code")?;
                match AddrTable::decode(&self.addr.get(i), lane, code) {
                    Some(a) => a,
                    None => {
                        let d = unzigzag(c.varint("an escaped address delta")?);
                        lane.last.wrapping_add(d as u64)
                    }
                }
            } else {
                let delta = unzigzag(c.varint("an address delta")?);
                lane.last.wrapping_add(delta as u64)
            };
            let first_ipa;
            if let Some(fallback) = self.v1 {
                dep = 0;
                (first_ipa, ipa) = v1_ipa(&mut self.lanes.cur, kind, fallback);
            } else {
                let di = pack_di(dep, ipa);
                if op & OP_DI_BIT != 0 {
                    self.pred.set(slot, di);
                }
                let lane = &mut self.lanes.cur;
                lane.p2 = lane.p1;
                lane.p1 = di;
                first_ipa = ipa;
            }
            if body & OP_RUN_BIT != 0 {
                let cpos = c.pos;
                let count = c.varint("a run length")?.checked_add(2);
                let stride = unzigzag(c.varint("a run stride")?);
                let count = match count {
                    Some(n) if n <= self.left => n,
                    _ => {
                        return Err(derr(
                            cpos,
                            format!(
                                "a run length of at most {} (events left in the block)",
                                self.left
                            ),
                            format!("{count:?}"),
                        ))
                    }
                };
                self.left -= count;
                match ai {
                    Some(i) => self
                        .addr
                        .learn(i, &mut self.lanes.cur, va, stride as u64, count),
                    None => {
                        self.lanes.cur.last =
                            va.wrapping_add((count - 1).wrapping_mul(stride as u64))
                    }
                }
                self.run = PendingRun {
                    pid,
                    next: va,
                    stride,
                    remaining: count,
                    kind: kind as u8,
                    size,
                    dep,
                    ipa,
                    next_ipa: first_ipa,
                };
                return Ok(None);
            }
            match ai {
                Some(i) => self.addr.learn(i, &mut self.lanes.cur, va, 0, 1),
                None => self.lanes.cur.last = va,
            }
            return Ok(Some(TraceEvent::Access {
                pid,
                va: Vaddr(va),
                kind,
                size,
                dep,
                ipa: first_ipa,
            }));
        }
        let ev = match op {
            OP_SET_PID => {
                let pid = Pid(c.u32v("a pid")?);
                if !self.lanes.switch(pid, 4096) {
                    return Err(derr(at, "at most 4096 pids in a block", "more"));
                }
                return Ok(None);
            }
            OP_MMAP => {
                let pid = self.pid(at)?;
                let addr = Vaddr(c.varint("an mmap address")?);
                let len = c.varint("an mmap length")?;
                let prot = Prot(c.u8("an mmap protection")?);
                let fpos = c.pos;
                let flags = c.varint("mmap flags")?;
                let flags = u16::try_from(flags)
                    .ok()
                    .filter(|f| f & !MmapFlags::ALL == 0)
                    .ok_or_else(|| derr(fpos, "mmap flags (bits 0..7)", format!("{flags:#x}")))?;
                let file = c.u32v("an mmap file id")?;
                let offset = c.varint("an mmap file offset")?;
                TraceEvent::Mmap {
                    pid,
                    addr,
                    len,
                    prot,
                    flags: MmapFlags(flags),
                    file: (file != 0).then_some(FileId(file)),
                    offset,
                }
            }
            OP_MUNMAP => TraceEvent::Munmap {
                pid: self.pid(at)?,
                addr: Vaddr(c.varint("an munmap address")?),
                len: c.varint("an munmap length")?,
            },
            OP_MREMAP => TraceEvent::Mremap {
                pid: self.pid(at)?,
                old_addr: Vaddr(c.varint("an mremap old address")?),
                old_len: c.varint("an mremap old length")?,
                new_addr: Vaddr(c.varint("an mremap new address")?),
                new_len: c.varint("an mremap new length")?,
            },
            OP_MPROTECT => TraceEvent::Mprotect {
                pid: self.pid(at)?,
                addr: Vaddr(c.varint("an mprotect address")?),
                len: c.varint("an mprotect length")?,
                prot: Prot(c.u8("an mprotect protection")?),
            },
            OP_MADVISE => {
                let pid = self.pid(at)?;
                let addr = Vaddr(c.varint("an madvise address")?);
                let len = c.varint("an madvise length")?;
                let apos = c.pos;
                let advice = match c.u8("an madvise advice code")? {
                    0 => Advice::DontNeed,
                    1 => Advice::Free,
                    2 => Advice::HugePage,
                    3 => Advice::NoHugePage,
                    4 => Advice::Collapse,
                    5 => Advice::Other(c.u32v("an madvise advice number")?),
                    x => return Err(derr(apos, "an advice code 0..=5", x.to_string())),
                };
                TraceEvent::Madvise {
                    pid,
                    addr,
                    len,
                    advice,
                }
            }
            OP_BRK => TraceEvent::Brk {
                pid: self.pid(at)?,
                new_end: Vaddr(c.varint("a brk end")?),
            },
            OP_FORK => TraceEvent::Fork {
                parent: self.pid(at)?,
                child: Pid(c.u32v("a child pid")?),
            },
            OP_VFORK => TraceEvent::Vfork {
                parent: self.pid(at)?,
                child: Pid(c.u32v("a child pid")?),
            },
            OP_EXEC => TraceEvent::Exec { pid: self.pid(at)? },
            OP_EXIT => TraceEvent::Exit { pid: self.pid(at)? },
            OP_FILE_OPEN => {
                let fpos = c.pos;
                let file = c.u32v("a file id")?;
                if file == 0 {
                    return Err(derr(fpos, "a file id (not 0)", "0"));
                }
                let size = c.varint("a file size")?;
                let npos = c.pos;
                let n = c.varint("a file-name length")?;
                let name = if n == 0 {
                    None
                } else {
                    let n = usize::try_from(n - 1)
                        .map_err(|_| derr(npos, "a file-name length", n.to_string()))?;
                    let b = c.bytes(n, "a file name")?;
                    Some(
                        std::str::from_utf8(b)
                            .map_err(|_| derr(npos, "a file name in UTF-8", "invalid UTF-8"))?
                            .into(),
                    )
                };
                TraceEvent::FileOpen {
                    file: FileId(file),
                    size,
                    name,
                }
            }
            OP_COMPUTE => {
                let pid = self.pid(at)?;
                let amount = c.varint("a compute amount")?;
                let upos = c.pos;
                let unit = match c.u8("a compute unit")? {
                    0 => ComputeUnit::Cycles,
                    1 => ComputeUnit::Instructions,
                    x => return Err(derr(upos, "a compute unit 0 or 1", x.to_string())),
                };
                if self.v1.is_some() && unit == ComputeUnit::Instructions {
                    let l = &mut self.lanes.cur;
                    l.v1_compute = l.v1_compute.saturating_add(amount);
                }
                TraceEvent::Compute { pid, amount, unit }
            }
            other => {
                return Err(derr(
                    at,
                    if self.v1.is_some() {
                        "an opcode (0x00..=0x3f access, 0x40..=0x4b others)"
                    } else {
                        "an opcode (0x00..=0x3f or 0x80..=0xbf access, 0x40..=0x4b others)"
                    },
                    format!("{other:#04x}"),
                ))
            }
        };
        Ok(Some(ev))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_roundtrip_at_the_edges() {
        for v in [
            0u64,
            1,
            127,
            128,
            16383,
            16384,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut c = Cursor::new(&b);
            assert_eq!(c.varint("v").unwrap(), v);
            assert!(c.at_end());
        }
    }

    #[test]
    fn zigzag_roundtrip() {
        for v in [0i64, 1, -1, 63, -64, i64::MAX, i64::MIN] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }

    #[test]
    fn overlong_varint_is_an_error_not_a_panic() {
        let b = [0xffu8; 12];
        assert!(Cursor::new(&b).varint("v").is_err());
    }

    fn access(va: u64, dep: u16, ipa: u16) -> TraceEvent {
        TraceEvent::Access {
            pid: Pid(1),
            va: Vaddr(va),
            kind: AccessKind::Read,
            size: 8,
            dep,
            ipa,
        }
    }

    fn decode_all(buf: &[u8], events: u64) -> Result<Vec<TraceEvent>, DecodeErr> {
        let mut d = BlockDecoder::default();
        d.reset(events);
        let mut out = Vec::new();
        while !d.decode_into(buf, &mut out, usize::MAX)? {}
        Ok(out)
    }

    #[test]
    fn a_loop_of_dep_ipa_pairs_is_predicted_after_one_round() {
        // Three accesses per iteration with their own (dep, ipa), random addresses: after the
        // first iterations, no access carries a dep/ipa byte.
        let pairs = [(0u16, 4u16), (1, 2), (3, 40)];
        let mut enc = BlockEncoder::default();
        let mut x: u64 = 99;
        let mut evs = Vec::new();
        for i in 0..3000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (dep, ipa) = pairs[i % 3];
            let e = access(x >> 20, dep, ipa);
            enc.other(&e);
            evs.push(e);
        }
        assert_eq!(decode_all(&enc.buf, enc.events).unwrap(), evs);
        assert!(
            enc.di_bytes <= 6,
            "{} accesses of 3000 carried a dep/ipa byte",
            enc.di_bytes
        );
    }

    #[test]
    fn a_dep_beyond_the_cap_is_corrupt() {
        let mut b = vec![OP_SET_PID, 1, OP_DI_BIT | (AccessKind::Read as u8) << 3 | 3];
        b.push((DI_ESCAPE << 4) | 1); // dep: 15 + the varint, ipa 1
        put_varint(&mut b, (DEP_CAP - 15 + 1) as u64);
        put_varint(&mut b, ADDR_STRIDE); // address code
        let e = decode_all(&b, 1).unwrap_err();
        assert!(e.expected.contains("a dep of at most 1023"), "{e:?}");
        // At the cap it decodes.
        let n = b.len();
        b.truncate(3);
        b.push((DI_ESCAPE << 4) | 1);
        put_varint(&mut b, (DEP_CAP - 15) as u64);
        // A miss coded against the lane's last address (0 at the block start).
        put_varint(&mut b, ADDR_MISS + (zigzag(0x1000) << 1));
        assert!(n > 0);
        assert_eq!(decode_all(&b, 1).unwrap(), vec![access(0x1000, DEP_CAP, 1)]);
    }

    #[test]
    fn an_event_is_at_most_48_bytes() {
        // read_batch writes one per event: its size bounds the reader's memory traffic.
        assert!(
            std::mem::size_of::<TraceEvent>() <= 48,
            "{}",
            std::mem::size_of::<TraceEvent>()
        );
    }
}
