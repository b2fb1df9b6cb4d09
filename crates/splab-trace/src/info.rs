//! `splab trace info` and `splab trace cat`: a trace for people.
//!
//! Who calls it: the CLI. Both write text to the given `Write` and do nothing else.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::path::Path;

use crate::error::TraceError;
use crate::event::*;
use crate::format::{TraceHeader, Trailer};
use crate::reader::{read_summary, TraceReader};

#[derive(Debug, thiserror::Error)]
pub enum InfoError {
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error("writing the output: {0}")]
    Out(#[from] std::io::Error),
}

/// Prints the header, the counts, the process table, the files and the regions of a trace.
///
/// Uses the trailer through the footer (instant) when the file has one; otherwise (a
/// recording cut short) reads the blocks to count what is there, then reports where it ends.
pub fn info(path: &Path, out: &mut dyn Write) -> Result<(), InfoError> {
    info_limited(path, out, usize::MAX)
}

/// [`info`], listing at most `max_regions` regions (the count is always printed, and how to
/// see the rest: a compiler's trace has hundreds).
pub fn info_limited(path: &Path, out: &mut dyn Write, max_regions: usize) -> Result<(), InfoError> {
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    match read_summary(path) {
        Ok((h, t, version)) => {
            print_header(&h, version, size, out)?;
            print_trailer(&t, version, size, max_regions, out)?;
            Ok(())
        }
        Err(_) => {
            let mut r = TraceReader::open(path)?;
            let version = r.version();
            print_header(r.header(), version, size, out)?;
            let (tally, err) = tally(&mut r);
            if let Some(t) = r.trailer() {
                return Ok(print_trailer(t, version, size, max_regions, out)?);
            }
            let (total, acc) = (tally.accesses(), tally.kinds);
            writeln!(
                out,
                "events      {} (counted: the trailer is missing)",
                tally.events
            )?;
            writeln!(
                out,
                "accesses    {total} (reads {}, writes {}, ifetches {}, read-modify-writes {})",
                acc[0], acc[1], acc[2], acc[3]
            )?;
            if version >= 2 && total > 0 {
                ooo_line(tally.instructions, tally.dependent, total, out)?;
            }
            writeln!(out, "processes   {}", tally.pids.len())?;
            if let Some(e) = err {
                writeln!(out, "error       {e}")?;
            }
            Ok(())
        }
    }
}

/// What a read through a trace's events counts, as its trailer counts it: `trace info` of a
/// trace without a trailer prints it, and `trace info --verify` compares it with the trailer.
#[derive(Debug, Default)]
pub struct Tally {
    pub events: u64,
    /// Accesses by `AccessKind` (read, write, ifetch, read-modify-write).
    pub kinds: [u64; 4],
    /// The sum of the accesses' `ipa`.
    pub instructions: u64,
    /// Accesses with `dep > 0`.
    pub dependent: u64,
    /// The processes that made accesses.
    pub pids: HashSet<Pid>,
}

impl Tally {
    pub fn accesses(&self) -> u64 {
        self.kinds.iter().sum()
    }
}

/// Reads `r` through to its end (or its first damaged block, returned beside what was counted
/// before it), counting the events.
pub fn tally<R: Read>(r: &mut TraceReader<R>) -> (Tally, Option<TraceError>) {
    let mut t = Tally::default();
    let mut buf = Vec::with_capacity(1 << 14);
    // A process's accesses come in runs: the set is looked up once a run.
    let mut last = None;
    loop {
        buf.clear();
        match r.read_batch(&mut buf, 1 << 14) {
            Ok(0) => return (t, None),
            Ok(n) => {
                t.events += n as u64;
                for e in &buf {
                    if let TraceEvent::Access {
                        kind,
                        pid,
                        dep,
                        ipa,
                        ..
                    } = e
                    {
                        t.kinds[*kind as usize] += 1;
                        t.instructions += u64::from(*ipa);
                        t.dependent += u64::from(*dep > 0);
                        if last != Some(*pid) {
                            t.pids.insert(*pid);
                            last = Some(*pid);
                        }
                    }
                }
            }
            Err(e) => return (t, Some(e)),
        }
    }
}

fn ooo_line(
    instructions: u64,
    dependent: u64,
    accesses: u64,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(
        out,
        "ooo         {instructions} instructions, {:.2} per access (ipa); {:.1}% of accesses depend on a load (dep > 0)",
        instructions as f64 / accesses as f64,
        100.0 * dependent as f64 / accesses as f64
    )
}

fn print_header(
    h: &TraceHeader,
    version: u16,
    size: u64,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(out, "format      splab trace v{version}")?;
    writeln!(out, "source      {}", h.source)?;
    writeln!(out, "command     {}", h.command)?;
    writeln!(out, "page size   {}", h.page_size_hint)?;
    writeln!(out, "file        {size} bytes")?;
    Ok(())
}

fn print_trailer(
    t: &Trailer,
    version: u16,
    size: u64,
    max_regions: usize,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(out, "events      {}", t.events)?;
    writeln!(
        out,
        "accesses    {} (reads {}, writes {}, ifetches {}, read-modify-writes {})",
        t.accesses, t.reads, t.writes, t.ifetches, t.rmws
    )?;
    if version < 2 {
        writeln!(
            out,
            "ooo         none recorded (version 1: dep 0, ipa by docs/trace-format.md \"Reading version 1\")"
        )?;
    } else if t.accesses > 0 {
        ooo_line(t.instructions, t.dependent, t.accesses, out)?;
    }
    if t.brk_refused > 0 && t.morecore_mmaps >= t.brk_refused {
        writeln!(
            out,
            "heap        Valgrind refused {} brk calls (its 8 MiB heap cap); {} morecore mappings \
             (glibc's fallback) mark them: a replay rebuilds the native heap",
            t.brk_refused, t.morecore_mmaps
        )?;
    } else if t.brk_refused > 0 {
        writeln!(
            out,
            "WARNING     Valgrind refused {} brk calls (its 8 MiB heap cap) and {} morecore \
             mappings mark them: the replayed heap is not the native one",
            t.brk_refused, t.morecore_mmaps
        )?;
    }
    writeln!(out, "blocks      {}", t.blocks)?;
    if t.accesses > 0 {
        writeln!(
            out,
            "density     {:.3} bytes/access",
            size as f64 / t.accesses as f64
        )?;
    }
    writeln!(out, "processes   {}", t.processes.len())?;
    for p in &t.processes {
        let parent = p.parent.map_or("-".to_string(), |q| q.to_string());
        writeln!(
            out,
            "  pid {:<8} parent {:<8} events {:<12} accesses {:<12} execs {} {}",
            p.pid.0,
            parent,
            p.events,
            p.accesses,
            p.execs,
            if p.exited { "exited" } else { "running at end" }
        )?;
    }
    writeln!(out, "files       {}", t.files.len())?;
    for f in &t.files {
        writeln!(
            out,
            "  {:<6} {:>12} bytes  {}",
            f.file.to_string(),
            f.size,
            f.name.as_deref().unwrap_or("?")
        )?;
    }
    writeln!(
        out,
        "regions     {}{} (live at exit or end)",
        t.regions.len(),
        if t.regions_truncated {
            "+ (table truncated)"
        } else {
            ""
        }
    )?;
    for r in t.regions.iter().take(max_regions) {
        let what = if r.heap {
            "heap".to_string()
        } else {
            match r.file {
                Some(f) => {
                    let name = t
                        .files
                        .iter()
                        .find(|x| x.file == f)
                        .and_then(|x| x.name.as_deref())
                        .unwrap_or("?");
                    format!("{} {f} {name}", r.flags)
                }
                None => r.flags.to_string(),
            }
        };
        writeln!(
            out,
            "  pid {:<8} {:#014x}-{:#014x} {:>10} KB {} {}",
            r.pid.0,
            r.start.0,
            r.start.0.saturating_add(r.len),
            r.len / 1024,
            r.prot,
            what
        )?;
    }
    if t.regions.len() > max_regions {
        writeln!(
            out,
            "  ... {} more (--regions N lists more)",
            t.regions.len() - max_regions
        )?;
    }
    Ok(())
}

/// Prints events as text, one a line (`Display` of `TraceEvent`), at most `limit` of them
/// (all when None). A trace that ends in an error prints what it could, then the error.
pub fn cat(path: &Path, out: &mut dyn Write, limit: Option<u64>) -> Result<(), InfoError> {
    let mut r = TraceReader::open(path)?;
    let mut buf = Vec::with_capacity(4096);
    let mut left = limit.unwrap_or(u64::MAX);
    while left > 0 {
        buf.clear();
        let res = r.read_batch(&mut buf, left.min(4096) as usize);
        // Events decoded before an error are printed before it is reported.
        for e in &buf {
            writeln!(out, "{e}")?;
        }
        let n = res.map_err(|e| e.in_file(path))?;
        if n == 0 {
            break;
        }
        left -= n as u64;
    }
    Ok(())
}
