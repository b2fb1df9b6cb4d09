//! `splab record` and `splab trace info|cat|import-champsim`: output and exit status around the
//! functions of splab-trace.
//!
//! Exit status: 2 for what the user can fix before trying again (no Valgrind, no command, a
//! file that cannot be opened or is not a splab trace); 1 for a trace that turns out truncated
//! or corrupt, or a recording that fails. Every error is one line; trace errors name the byte
//! offset (the library's messages).

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{anyhow, Result};
use splab_sim::report::group;
use splab_sim::SimError;
use splab_trace::{
    ChampSimOptions, ImportError, InfoError, RecordError, RecordOptions, TraceError, TraceReader,
};

/// One line for the user: the error's own message, without anyhow's cause chain (the
/// library's messages already include their causes).
fn fail(bad_input: bool, msg: String) -> anyhow::Error {
    if bad_input {
        SimError::BadInput(msg).into()
    } else {
        anyhow!(msg)
    }
}

fn trace_fail(e: TraceError) -> anyhow::Error {
    fail(e.is_bad_input(), e.to_string())
}

fn info_fail(e: InfoError) -> anyhow::Error {
    match e {
        InfoError::Trace(t) => trace_fail(t),
        // A closed pipe (`splab trace cat x | head`) is not an error worth a message.
        InfoError::Out(io) if io.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        InfoError::Out(io) => anyhow!("writing the output: {io}"),
    }
}

/// Records `cmd`; the exit status is the program's own (README "Exit status"), or 1 / 2 when
/// the recording itself fails.
pub fn record(output: &Path, opts: RecordOptions, quiet: bool, cmd: &[String]) -> Result<ExitCode> {
    // The trace is renamed over -o when the program ends: onto a file the command names (its
    // input, `record -o in.txt -- sort in.txt`, or the program itself) it replaced that file.
    let out_key = super::file_key(output);
    for (i, arg) in cmd.iter().enumerate() {
        let p = Path::new(arg);
        if p.is_file() && super::file_key(p) == out_key {
            return Err(fail(
                true,
                format!(
                    "splab record: -o {} is {} of the recorded command: the trace would replace \
                     it; give the trace another path",
                    output.display(),
                    if i == 0 {
                        "the program"
                    } else {
                        "a file argument"
                    }
                ),
            ));
        }
    }
    let tty = !quiet && std::io::stderr().is_terminal();
    let res = splab_trace::record(&opts, cmd, output, |p| {
        if tty {
            eprint!("\rsplab record: {}\x1b[K", p.line());
            let _ = std::io::stderr().flush();
        }
    });
    if tty {
        eprint!("\r\x1b[K");
    }
    let s = match res {
        Ok(s) => s,
        // The program could not start (valgrind says why, e.g. "command not found"): no trace,
        // and the shell's status for it.
        Err(RecordError::ValgrindFailed(st)) => {
            eprintln!("error: splab record: the program did not run ({st}); no trace was written");
            return Ok(ExitCode::from(st.shell_code().max(1)));
        }
        Err(e) => {
            let bad = matches!(
                e,
                RecordError::NoCommand
                    | RecordError::ValgrindMissing(_)
                    | RecordError::ToolNotBuilt
                    | RecordError::NoValgrindLib
                    | RecordError::Output(_)
                    | RecordError::BadOption(_)
            );
            return Err(fail(bad, format!("splab record: {e}")));
        }
    };
    let plural = |n: usize| if n == 1 { "" } else { "es" };
    eprintln!(
        "splab record: {} process{}, {} events, {} accesses in {:.2} s ({:.1}M accesses/s); \
         {} bytes, {:.3} bytes/access -> {}",
        s.processes,
        plural(s.processes),
        group(s.events),
        group(s.accesses),
        s.wall.as_secs_f64(),
        s.accesses_per_second() / 1e6,
        group(s.bytes),
        s.bytes_per_access(),
        output.display()
    );
    if s.brk_refused > 0 && s.morecore_mmaps >= s.brk_refused {
        eprintln!(
            "splab record: note: Valgrind refused {} brk call{} growing the heap past its 8 MiB \
             data-segment cap (a hard limit of Valgrind's); the trace marks the mappings glibc's \
             malloc made instead (`morecore`), and a replay puts them back on the heap, as the \
             native program's brk heap (docs/replay.md \"Valgrind's heap cap\").",
            group(s.brk_refused),
            if s.brk_refused == 1 { "" } else { "s" }
        );
    } else if s.brk_refused > 0 {
        eprintln!(
            "splab record: WARNING: the recording is not the native program. Valgrind refused {} \
             brk call{} growing the heap past its 8 MiB data-segment cap (a hard limit of \
             Valgrind's, no option changes it), and only {} of them were answered by a mapping \
             of glibc's malloc that the replay can put back on the heap: the trace's heap \
             layout, and so its superpages, differ from a native run. docs/replay.md \
             \"Valgrind's heap cap\" says what to do.",
            group(s.brk_refused),
            if s.brk_refused == 1 { "" } else { "s" },
            group(s.morecore_mmaps)
        );
    }
    if s.status.success() {
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "splab record: the program failed ({}); the trace records it up to there",
        s.status
    );
    Ok(ExitCode::from(s.status.shell_code()))
}

pub fn info(file: &Path, max_regions: usize) -> Result<()> {
    let complete = splab_trace::read_header_and_trailer(file).is_ok();
    let mut out = std::io::stdout().lock();
    splab_trace::info_limited(file, &mut out, max_regions).map_err(info_fail)?;
    out.flush().ok();
    if complete {
        return Ok(());
    }
    // No trailer through the footer: read the trace through to say where and why it ends.
    let mut r = TraceReader::open(file).map_err(trace_fail)?;
    let mut buf = Vec::with_capacity(1 << 14);
    loop {
        buf.clear();
        match r.read_batch(&mut buf, 1 << 14) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) => return Err(trace_fail(e.in_file(file))),
        }
    }
}

/// `splab trace info --verify`: reads every block (each one's CRC-32 is checked as it is
/// decoded) and compares what it counted with the trailer's counts. The instant `info` trusts
/// the trailer; this is the check for a trace that was copied, cut or edited. Exit status 1 on
/// the first damaged block or on counts that disagree, naming where.
pub fn verify(file: &Path) -> Result<()> {
    let mut r = TraceReader::open(file).map_err(trace_fail)?;
    let (read, err) = splab_trace::tally(&mut r);
    if let Some(e) = err {
        return Err(trace_fail(e.in_file(file)));
    }
    let Some(t) = r.trailer() else {
        return Err(anyhow!(
            "{}: every block read is intact, but the trace has no trailer (a recording cut short)",
            file.display()
        ));
    };
    let (events, accesses, kinds) = (read.events, read.accesses(), read.kinds);
    let checks = [
        ("events", events, t.events),
        ("accesses", accesses, t.accesses),
        ("reads", kinds[0], t.reads),
        ("writes", kinds[1], t.writes),
        ("ifetches", kinds[2], t.ifetches),
        ("read-modify-writes", kinds[3], t.rmws),
        (
            "instructions (sum of ipa)",
            read.instructions,
            t.instructions,
        ),
        ("dependent accesses", read.dependent, t.dependent),
    ];
    // Version-1 traces have no ipa, dep or rmw in their trailer (0), nor in their events.
    let bad: Vec<String> = checks
        .iter()
        .filter(|(_, read, said)| read != said)
        .map(|(what, read, said)| format!("{what}: read {read}, the trailer says {said}"))
        .collect();
    if !bad.is_empty() {
        return Err(anyhow!(
            "{}: the blocks are intact but disagree with the trailer: {}",
            file.display(),
            bad.join("; ")
        ));
    }
    println!(
        "verified    every block's CRC-32 matches; {} events, {} accesses, as the trailer says",
        group(events),
        group(accesses)
    );
    Ok(())
}

pub fn cat(file: &Path, limit: Option<u64>) -> Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let res = splab_trace::cat(file, &mut out, limit);
    let flushed = out.flush();
    res.map_err(info_fail)?;
    if let Err(e) = flushed {
        return Err(info_fail(InfoError::Out(e)));
    }
    Ok(())
}

pub fn import_champsim(
    input: &Path,
    output: &Path,
    ifetch: bool,
    max_records: Option<u64>,
) -> Result<()> {
    // The converted trace is renamed over -o at the end: onto the input, it replaced the
    // ChampSim trace (a download, often of gigabytes) with the conversion.
    if input.exists() && super::file_key(input) == super::file_key(output) {
        return Err(fail(
            true,
            format!(
                "splab trace import-champsim: -o {} is the input: give the splab trace another path",
                output.display()
            ),
        ));
    }
    let opts = ChampSimOptions {
        ifetch,
        max_records,
        ..Default::default()
    };
    let s = splab_trace::import_champsim(input, output, &opts).map_err(|e| {
        let bad = matches!(e, ImportError::Open { .. } | ImportError::Output(_));
        fail(bad, format!("splab trace import-champsim: {e}"))
    })?;
    // Bytes per access only where there are accesses (a whole file is not one access's).
    let density = if s.accesses > 0 {
        format!(" ({:.3} bytes/access)", s.bytes as f64 / s.accesses as f64)
    } else {
        String::new()
    };
    eprintln!(
        "splab trace import-champsim: {} records -> {} events, {} accesses, {} inferred regions; \
         {} bytes{density} -> {}",
        group(s.records),
        group(s.events),
        group(s.accesses),
        s.inferred_regions,
        group(s.bytes),
        output.display()
    );
    Ok(())
}
