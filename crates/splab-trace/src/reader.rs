//! `TraceReader`: a .spt file in, events out, one block in memory at a time.
//!
//! Who calls it: the simulator's trace workload (`read_batch`, the fast path), `trace cat` and
//! `trace info` (the iterator), tests.
//!
//! Contract: whatever the input bytes, the reader returns events or a `TraceError` naming the
//! byte offset and what it expected there; it never panics and never allocates more than the
//! format's limits (`MAX_BLOCK_RAW`, `MAX_TRAILER`). After an error, it yields nothing more.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use crate::error::TraceError;
use crate::event::*;
use crate::format::*;

/// Events handed out per internal refill of the iterator.
const ITER_BATCH: usize = 4096;

pub struct TraceReader<R: Read> {
    src: R,
    /// Bytes consumed from `src` (the file offset of the next byte).
    offset: u64,
    header: TraceHeader,
    version: u16,
    comp: Vec<u8>,
    raw: Vec<u8>,
    zstd: zstd::bulk::Decompressor<'static>,
    dec: BlockDecoder,
    /// File offset of the block being decoded.
    block_offset: u64,
    in_block: bool,
    trailer: Option<Trailer>,
    done: bool,
    /// For the iterator: decoded events not yet handed out.
    pending: Vec<TraceEvent>,
    pending_pos: usize,
    events_read: u64,
}

impl TraceReader<BufReader<File>> {
    /// Opens a trace file and reads its header.
    pub fn open(path: &Path) -> Result<Self, TraceError> {
        check_seekable(path)?;
        let f = open_file(path).map_err(|e| TraceError::Open {
            path: path.to_owned(),
            source: e,
        })?;
        TraceReader::new(BufReader::with_capacity(1 << 16, f)).map_err(|e| e.in_file(path))
    }
}

impl<R: Read> TraceReader<R> {
    /// Reads and checks the magic, version and header.
    pub fn new(src: R) -> Result<Self, TraceError> {
        let mut r = TraceReader {
            src,
            offset: 0,
            header: TraceHeader::default(),
            version: VERSION,
            comp: Vec::new(),
            raw: Vec::new(),
            zstd: zstd::bulk::Decompressor::new().map_err(|e| TraceError::io(0, e))?,
            dec: BlockDecoder::default(),
            block_offset: 0,
            in_block: false,
            trailer: None,
            done: false,
            pending: Vec::new(),
            pending_pos: 0,
            events_read: 0,
        };
        let mut magic = [0u8; 8];
        let got = r.read_upto(&mut magic)?;
        if got < 8 || &magic != MAGIC {
            if got < 8 && magic[..got] == MAGIC[..got] {
                return Err(TraceError::truncated(
                    got as u64,
                    "the 8-byte magic \"SPLTRACE\"",
                ));
            }
            return Err(TraceError::BadMagic {
                found: String::from_utf8_lossy(&magic[..got]).into_owned(),
            });
        }
        let mut v = [0u8; 2];
        r.fill(&mut v, "the format version (u16)")?;
        let version = u16::from_le_bytes(v);
        if !(1..=VERSION).contains(&version) {
            return Err(TraceError::Version {
                found: version,
                supported: VERSION,
            });
        }
        let len_at = r.offset;
        let len = r.u32("the header length (u32)")?;
        if len > MAX_HEADER {
            return Err(TraceError::corrupt(
                len_at,
                format!("a header length of at most {MAX_HEADER}"),
                len.to_string(),
            ));
        }
        let mut h = vec![0u8; len as usize];
        let h_at = r.offset;
        r.fill(&mut h, "the header")?;
        let crc_at = r.offset;
        let crc = r.u32("the header checksum (u32)")?;
        if crc != crc32fast::hash(&h) {
            return Err(TraceError::corrupt(
                crc_at,
                "the header's CRC-32",
                "a mismatch: the header is damaged",
            ));
        }
        r.header = TraceHeader::decode(&h)
            .map_err(|e| TraceError::corrupt(h_at + e.pos as u64, e.expected, e.found))?;
        r.version = version;
        r.dec = BlockDecoder::for_version(version, &r.header.source);
        Ok(r)
    }

    /// The format version of the trace (1 or 2): a version-1 trace's accesses get the documented
    /// defaults for `dep` and `ipa` (docs/trace-format.md, "Reading version 1").
    pub fn version(&self) -> u16 {
        self.version
    }

    pub fn header(&self) -> &TraceHeader {
        &self.header
    }

    /// The trailer, once the reader has reached it.
    pub fn trailer(&self) -> Option<&Trailer> {
        self.trailer.as_ref()
    }

    /// The file offset of the next unread byte.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Events returned so far.
    pub fn events_read(&self) -> u64 {
        self.events_read
    }

    fn read_upto(&mut self, buf: &mut [u8]) -> Result<usize, TraceError> {
        let mut got = 0;
        while got < buf.len() {
            match self.src.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(TraceError::io(self.offset + got as u64, e)),
            }
        }
        self.offset += got as u64;
        Ok(got)
    }

    fn fill(&mut self, buf: &mut [u8], what: &str) -> Result<(), TraceError> {
        let got = self.read_upto(buf)?;
        if got < buf.len() {
            return Err(TraceError::truncated(self.offset, what));
        }
        Ok(())
    }

    fn u32(&mut self, what: &str) -> Result<u32, TraceError> {
        let mut b = [0u8; 4];
        self.fill(&mut b, what)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Reads the next frame: loads a block (returns true) or consumes the trailer (false).
    fn next_frame(&mut self) -> Result<bool, TraceError> {
        let at = self.offset;
        let mut tag = [0u8; 1];
        if self.read_upto(&mut tag)? == 0 {
            return Err(TraceError::truncated(
                at,
                "a block ('B') or the trailer ('T'): the trace ends without its trailer",
            ));
        }
        match tag[0] {
            FRAME_BLOCK => {
                let raw_len = self.u32("a block's decoded length (u32)")?;
                let comp_len = self.u32("a block's compressed length (u32)")?;
                let events = self.u32("a block's event count (u32)")?;
                let crc = self.u32("a block's checksum (u32)")?;
                if raw_len > MAX_BLOCK_RAW {
                    return Err(TraceError::corrupt(
                        at + 1,
                        format!("a decoded block length of at most {MAX_BLOCK_RAW}"),
                        raw_len.to_string(),
                    ));
                }
                let bound = zstd::zstd_safe::compress_bound(raw_len as usize) as u64;
                if comp_len as u64 > bound || (raw_len > 0 && comp_len == 0) {
                    return Err(TraceError::corrupt(
                        at + 5,
                        format!(
                            "a compressed length of at most {bound} for {raw_len} decoded bytes"
                        ),
                        comp_len.to_string(),
                    ));
                }
                if events == 0 {
                    return Err(TraceError::corrupt(
                        at + 9,
                        "a block event count of at least 1",
                        "0",
                    ));
                }
                self.comp.resize(comp_len as usize, 0);
                let mut comp = std::mem::take(&mut self.comp);
                let res = self.fill(&mut comp, "a block's compressed events");
                self.comp = comp;
                res?;
                if crc32fast::hash(&self.comp) != crc {
                    return Err(TraceError::corrupt(
                        at + 13,
                        "the block's CRC-32 to match its bytes",
                        "a mismatch: the block is damaged",
                    ));
                }
                self.raw.clear();
                self.raw.reserve(raw_len as usize);
                match self
                    .zstd
                    .decompress_to_buffer(self.comp.as_slice(), &mut self.raw)
                {
                    Ok(n) if n == raw_len as usize => {}
                    Ok(n) => {
                        return Err(TraceError::corrupt(
                            at + 17,
                            format!("a zstd frame of {raw_len} decoded bytes"),
                            format!("{n} bytes"),
                        ))
                    }
                    Err(e) => {
                        return Err(TraceError::corrupt(at + 17, "a zstd frame", e.to_string()))
                    }
                }
                self.dec.reset(events as u64);
                self.block_offset = at;
                self.in_block = true;
                Ok(true)
            }
            FRAME_TRAILER => {
                let len = self.u32("the trailer length (u32)")?;
                let crc = self.u32("the trailer checksum (u32)")?;
                if len > MAX_TRAILER {
                    return Err(TraceError::corrupt(
                        at + 1,
                        format!("a trailer length of at most {MAX_TRAILER}"),
                        len.to_string(),
                    ));
                }
                let body_at = self.offset;
                let mut body = vec![0u8; len as usize];
                self.fill(&mut body, "the trailer")?;
                if crc32fast::hash(&body) != crc {
                    return Err(TraceError::corrupt(
                        at + 5,
                        "the trailer's CRC-32 to match its bytes",
                        "a mismatch: the trailer is damaged",
                    ));
                }
                let t = Trailer::decode(&body, self.version).map_err(|e| {
                    TraceError::corrupt(body_at + e.pos as u64, e.expected, e.found)
                })?;
                let mut footer = [0u8; 16];
                let foot_at = self.offset;
                self.fill(
                    &mut footer,
                    "the 16-byte footer (trailer offset, \"SPLTEND1\")",
                )?;
                if &footer[8..] != FOOTER_MAGIC
                    || u64::from_le_bytes(footer[..8].try_into().unwrap_or([0; 8])) != at
                {
                    return Err(TraceError::corrupt(
                        foot_at,
                        format!("the footer: offset {at} then \"SPLTEND1\""),
                        format!("{:?}", String::from_utf8_lossy(&footer[8..])),
                    ));
                }
                let mut extra = [0u8; 1];
                if self.read_upto(&mut extra)? != 0 {
                    return Err(TraceError::corrupt(
                        self.offset - 1,
                        "the end of the file after the footer",
                        "more bytes",
                    ));
                }
                self.trailer = Some(t);
                Ok(false)
            }
            other => Err(TraceError::corrupt(
                at,
                "a frame tag 'B' (0x42, a block) or 'T' (0x54, the trailer)",
                format!("{other:#04x}"),
            )),
        }
    }

    /// Appends up to `max` events to `out` (which it does not clear). Returns how many it
    /// appended: 0 means the trace is over (the trailer was read). This is the fast path.
    pub fn read_batch(
        &mut self,
        out: &mut Vec<TraceEvent>,
        max: usize,
    ) -> Result<usize, TraceError> {
        let start = out.len();
        let limit = start.saturating_add(max);
        while out.len() < limit && !self.done {
            if !self.in_block {
                match self.next_frame() {
                    Ok(true) => {}
                    Ok(false) => {
                        self.done = true;
                        break;
                    }
                    Err(e) => {
                        self.done = true;
                        return Err(e);
                    }
                }
            }
            match self.dec.decode_into(&self.raw, out, limit) {
                Ok(true) => self.in_block = false,
                Ok(false) => {}
                Err(e) => {
                    self.done = true;
                    return Err(TraceError::BadEvent {
                        block_offset: self.block_offset,
                        pos: e.pos,
                        expected: e.expected,
                        found: e.found,
                    });
                }
            }
        }
        let n = out.len() - start;
        self.events_read += n as u64;
        Ok(n)
    }
}

impl<R: Read> Iterator for TraceReader<R> {
    type Item = Result<TraceEvent, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pending_pos >= self.pending.len() {
            self.pending.clear();
            self.pending_pos = 0;
            let mut buf = std::mem::take(&mut self.pending);
            let res = self.read_batch(&mut buf, ITER_BATCH);
            self.pending = buf;
            match res {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => return Some(Err(e)),
            }
        }
        let ev = std::mem::replace(
            &mut self.pending[self.pending_pos],
            TraceEvent::Exec { pid: Pid(0) },
        );
        self.pending_pos += 1;
        Some(Ok(ev))
    }
}

/// Refuses what is not a regular file (`-`, a FIFO, `/dev/stdin`) before opening it: opening
/// would consume or block on a pipe, and every reader of a trace needs to seek or re-read.
/// A path that does not exist is left to `File::open` (its message names the OS error).
fn check_seekable(path: &Path) -> Result<(), TraceError> {
    let not = || TraceError::NotSeekable {
        path: path.to_owned(),
    };
    if path.as_os_str() == "-" && !path.exists() {
        return Err(not());
    }
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() && !m.is_dir() => Err(not()),
        _ => Ok(()),
    }
}

/// Opens a file to read, refusing a directory: Linux opens one, and only the first read
/// fails ("I/O error at byte offset 0: Is a directory", exit status 1, as a trace that broke
/// while read), where a directory is an input that cannot be read (exit status 2, as a
/// missing file).
pub(crate) fn open_file(path: &Path) -> std::io::Result<File> {
    let f = File::open(path)?;
    if f.metadata()?.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::IsADirectory,
            "it is a directory, not a file",
        ));
    }
    Ok(f)
}

/// Reads only the header and trailer of a trace file, using the footer to jump to the trailer
/// (no decoding of blocks). Fails when the file has no valid footer (a cut-short recording):
/// read it with `TraceReader` then, which reports where it ends.
pub fn read_header_and_trailer(path: &Path) -> Result<(TraceHeader, Trailer), TraceError> {
    read_summary(path).map(|(h, t, _)| (h, t))
}

/// [`read_header_and_trailer`], and the trace's format version.
pub(crate) fn read_summary(path: &Path) -> Result<(TraceHeader, Trailer, u16), TraceError> {
    check_seekable(path)?;
    let f = open_file(path).map_err(|e| TraceError::Open {
        path: path.to_owned(),
        source: e,
    })?;
    let mut reader = TraceReader::new(BufReader::new(f)).map_err(|e| e.in_file(path))?;
    let header = reader.header.clone();
    let mut f = open_file(path).map_err(|e| TraceError::Open {
        path: path.to_owned(),
        source: e,
    })?;
    let size = f
        .seek(SeekFrom::End(0))
        .map_err(|e| TraceError::io(0, e).in_file(path))?;
    if size < 16 {
        return Err(TraceError::truncated(size, "a 16-byte footer").in_file(path));
    }
    let mut footer = [0u8; 16];
    f.seek(SeekFrom::Start(size - 16))
        .and_then(|_| f.read_exact(&mut footer))
        .map_err(|e| TraceError::io(size - 16, e).in_file(path))?;
    if &footer[8..] != FOOTER_MAGIC {
        return Err(TraceError::truncated(
            size,
            "the footer \"SPLTEND1\" at the end: the trace ends without its trailer",
        )
        .in_file(path));
    }
    let at = u64::from_le_bytes(footer[..8].try_into().unwrap_or([0; 8]));
    if at < reader.offset || at >= size - 16 {
        return Err(TraceError::corrupt(
            size - 16,
            "a trailer offset inside the file",
            at.to_string(),
        )
        .in_file(path));
    }
    f.seek(SeekFrom::Start(at))
        .map_err(|e| TraceError::io(at, e).in_file(path))?;
    reader.src = BufReader::new(f);
    reader.offset = at;
    match reader.next_frame() {
        Ok(false) => {}
        Ok(true) => {
            return Err(TraceError::corrupt(
                at,
                "the trailer frame ('T') where the footer points",
                "a block",
            )
            .in_file(path))
        }
        Err(e) => return Err(e.in_file(path)),
    }
    match reader.trailer {
        Some(t) => Ok((header, t, reader.version)),
        None => Err(TraceError::corrupt(at, "a trailer", "nothing").in_file(path)),
    }
}
