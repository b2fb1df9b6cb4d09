//! Commands and flags, each defined once with its help text beside it.

mod trace_cmd;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use splab_sim::engine::CheckMode;
use splab_sim::report::{Comparison, Report};
use splab_sim::{hw, policy, workload, RunSpec, SimError};
use splab_trace::{AtomicOutput, Backend, RecordOptions};

/// The exit statuses, the same for every command (README "Exit status").
const EXIT_STATUS: &str = "Exit status: 0 success; 1 a run or recording that failed (the workload \
    faulted, modelled memory ran out, a trace is truncated or corrupt, an output could not be \
    written); 2 bad input (a bad name, parameter or flag, a missing or unreadable input file, an \
    output path that cannot be created, a workload that writes more than memory and swap hold), reported before any long work starts. `splab record` \
    exits with the recorded program's own status when the program ran (the trace is kept), or \
    128+N when a signal N killed it.";

#[derive(Parser)]
#[command(
    name = "splab",
    version,
    about = "splab: a lab for superpage (huge page) management policies",
    long_about = "splab models an operating system's memory subsystem (buddy allocator, reservations, page tables \
                  with mixed page sizes, TLBs, page walks) and replays workloads on it, reporting TLB misses, page \
                  walks, faults, superpages, bloat, fragmentation, latency and estimated run time.\n\n\
                  Names take parameters: NAME:key=value,key=value (sizes accept K/M/G/T suffixes, binary: \
                  4K = 4096; counts accept K/M/G, decimal: 10M = 10,000,000).\n\
                  Try: splab demo",
    after_help = EXIT_STATUS
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args, Clone)]
struct RunArgs {
    /// Machine: a preset or a machine file, optionally with parameters mem=SIZE, swap=SIZE and
    /// nested=SIZE (a guest under nested paging with host pages of SIZE) (e.g. skylake,
    /// skylake:mem=4G, skylake:nested=4K, file:my.toml, file:my.toml:mem=4G; the path ends at
    /// `.toml`). See `splab list machines`; `splab machine show NAME` prints a preset's file.
    #[arg(short, long, default_value = "skylake")]
    machine: String,
    /// Workload, e.g. gups:size=1G or matrix:n=1000. See `splab list workloads`.
    #[arg(short, long)]
    workload: String,
    /// Seed of the workload's random choices (runs are deterministic given the seed).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Check the model's invariants: after every event what it touched, and everything every
    /// 1024 events and at the end (--check, or --check=incremental); or everything after every
    /// event (--check=full: O(memory) per event, for tests and for finding the event at fault).
    #[arg(long, value_name = "MODE", num_args = 0..=1, require_equals = true, default_missing_value = "incremental")]
    check: Option<String>,
    /// Start with only SIZE of memory free and contiguous; the rest is wired (e.g. --free 4M).
    #[arg(long, value_name = "SIZE")]
    free: Option<String>,
    /// Whether files' pages start in the page cache: warm (as when re-running a program: no
    /// I/O for file pages) or cold (every file page read from storage at its first use).
    #[arg(long, value_name = "warm|cold", default_value = "warm")]
    page_cache: String,
    /// Also write the JSON report to PATH ("-" for standard output, the summary then goes to stderr).
    #[arg(long, value_name = "PATH")]
    json: Option<String>,
    /// No progress display.
    #[arg(short, long)]
    quiet: bool,
    /// After the summary, print the reservation lists at the end of the run (for debugging).
    #[arg(long)]
    dump_reservations: bool,
    /// Fragment memory first, as Quicksilver's tool (seed 003 Frag-0/50/100): a fragmenter
    /// process pins every free 2MB block beyond (100 - PCT)% of the workload's memory with 16
    /// resident 4KB pages, the machine sits 60 simulated seconds, then the workload runs
    /// (its time measured from its start). PCT: 0, 50 or 100 (any of 0..=100).
    #[arg(long, value_name = "PCT")]
    frag: Option<String>,
    /// The workload's memory for --frag (default: what the workload declares, e.g. gups's
    /// size; needed for the others), e.g. --frag-mem 8G.
    #[arg(long, value_name = "SIZE")]
    frag_mem: Option<String>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one workload under one policy and print a summary.
    Run {
        /// Policy, e.g. base or navarro:sizes=64K+4M, or a policy file: file:PATH.toml (see
        /// `splab policy show`). See `splab list policies`.
        #[arg(short, long, default_value = "base")]
        policy: String,
        #[command(flatten)]
        args: RunArgs,
    },
    /// Run one workload under several policies and compare them with a baseline (the first, or
    /// --baseline): speedup, page walks, faults, p95 fault latency, footprint (seed 003 Tables
    /// 8-10; add --frag for their fragmentation levels).
    Compare {
        /// Policies, comma-separated or repeated (the first is the baseline), e.g. -p base,navarro
        /// or -p base,file:mine.toml.
        #[arg(short, long, required = true)]
        policy: Vec<String>,
        /// Also write the comparison table as CSV to PATH ("-" for standard output).
        #[arg(long, value_name = "PATH")]
        csv: Option<String>,
        /// Run at most N policies at once (default: one per core). Results do not depend on it.
        #[arg(short, long, value_name = "N")]
        jobs: Option<usize>,
        /// The policy the others are compared with (one of -p; default: the first), e.g.
        /// --baseline linux as seed 003's Tables 8-10.
        #[arg(long, value_name = "POLICY")]
        baseline: Option<String>,
        #[command(flatten)]
        args: RunArgs,
    },
    /// Draw a time series of JSON reports as a figure (SVG or PNG): one line per report, x =
    /// simulated seconds, dotted lines at the phase boundaries of seq(...) runs; or, with
    /// --x-values, a sweep: one point per report.
    Plot {
        /// Reports written by `splab run --json` or `splab compare --json` (all its reports).
        #[arg(required = true, value_name = "REPORT.json")]
        reports: Vec<String>,
        /// The series to draw: contiguity, superpage_bytes or footprint_bytes; with --x-values, any
        /// number of the report by its dotted JSON path (e.g. tlb.levels.0.misses, time.cycles_total).
        #[arg(short = 'y', long = "y", default_value = "contiguity")]
        metric: String,
        /// A sweep instead of a time series: one point per report, x = these values (comma-separated);
        /// the reports are taken in order, as many per line as there are values (seed 004 Figure 2).
        #[arg(
            long,
            value_name = "X1,X2,...",
            value_delimiter = ',',
            allow_hyphen_values = true
        )]
        x_values: Vec<f64>,
        /// The x axis's label of a sweep.
        #[arg(long, value_name = "TEXT")]
        x_label: Option<String>,
        /// The figure to write: FILE.svg or FILE.png.
        #[arg(short, long, value_name = "FIG")]
        out: String,
        /// Title (default: the first report's workload).
        #[arg(long)]
        title: Option<String>,
        /// Legend of each line, in order (repeat; default: each report's policy).
        #[arg(long)]
        label: Vec<String>,
    },
    /// Machines as data: print a preset (or a machine file) as TOML.
    Machine {
        #[command(subcommand)]
        cmd: MachineCmd,
    },
    /// List machines, policies or workloads.
    List {
        /// What to list.
        #[arg(value_parser = ["machines", "policies", "workloads"])]
        what: String,
    },
    /// Policies as data: print a policy as the TOML file `-p file:PATH.toml` reads back.
    Policy {
        #[command(subcommand)]
        cmd: PolicyCmd,
    },
    /// Measure the simulator's own speed (simulated accesses per second): seq and gups on
    /// skylake under base and navarro, each run --repeat times (the rounds alternate the cases,
    /// so that a slow phase of a shared machine falls on all of them); prints the median and the
    /// range of each.
    Bench {
        /// Smaller runs (for a quick check).
        #[arg(long)]
        quick: bool,
        /// Runs of each case (the median and the range are printed; at least 1).
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
        repeat: u32,
    },
    /// Compare every implemented policy on a few of the papers' workloads and machines.
    Demo {
        /// Directory for the JSON reports.
        #[arg(long, default_value = "splab-demo")]
        out: PathBuf,
    },
    /// Compile a C program with seed 004's superpage advisor (an LLVM 19 pass) and link it with
    /// the smalloc runtime: per loop nest the spread against the TLB threshold, and malloc
    /// rewritten to smalloc when the decision is "superpages".
    ///
    /// Example: splab cc -m core2-64 transpose.c -o transpose -- -DN=200. Needs clang-19 and
    /// llvm-19-dev (Debian); the pass and runtime are built once into ~/.cache/splab.
    Cc {
        /// The C source file.
        #[arg(value_name = "SOURCE.c", required_unless_present = "print_preload")]
        source: Option<PathBuf>,
        /// The executable to write (default: the source without .c).
        #[arg(short, long, value_name = "EXE")]
        output: Option<PathBuf>,
        /// The machine whose data TLB gives the threshold (seed 004 section 4).
        #[arg(short, long, default_value = "core2-64")]
        machine: String,
        /// Which data-TLB level: the last (seed 004 5.1's 256-entry TLB on Core 2) or l1.
        #[arg(long, value_parser = ["l1", "last"], default_value = "last")]
        tlb_level: String,
        /// auto: the heuristic decides (Figure 1); superpages / base: force one build.
        #[arg(long, value_parser = ["auto", "superpages", "base"], default_value = "auto")]
        superpages: String,
        /// One decision for the program (seed 004) or one per allocation site.
        #[arg(long, value_parser = ["program", "site"], default_value = "program")]
        granularity: String,
        /// Trip count assumed for loops whose count the compiler cannot know, at least 1 [pass
        /// default: 100].
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        default_trip: Option<u32>,
        /// Where the pass writes its JSON report (default: EXE.superpages.json).
        #[arg(long, value_name = "FILE")]
        report: Option<PathBuf>,
        /// Print only the path of libsmalloc.so (smalloc's LD_PRELOAD mode), building it if needed.
        #[arg(long)]
        print_preload: bool,
        /// No summary.
        #[arg(short, long)]
        quiet: bool,
        /// Arguments for clang (after `--`), e.g. -- -DN=200 -O3.
        #[arg(last = true, value_name = "CLANG ARGS")]
        clang_args: Vec<String>,
    },
    /// Record a program's memory events into a trace (runs it under Valgrind).
    ///
    /// Example: splab record -o sort.spt -- sort -o out.txt in.txt; then replay it with
    /// splab run -w trace:path=sort.spt. Needs Valgrind (apt-get install valgrind).
    Record {
        /// The trace file to write.
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
        /// Record with Valgrind's lackey tool (about 20x slower; no file names).
        #[arg(long)]
        lackey: bool,
        /// Record instruction fetches too (about 3x more events).
        #[arg(long)]
        ifetch: bool,
        /// Without --ifetch, do not record the code pages the program runs (by default one
        /// instruction fetch per code page, the first time each process runs it).
        #[arg(long, conflicts_with = "ifetch")]
        no_code_pages: bool,
        /// Record no access before the program's first SPLAB_START() (crates/splab-trace/valgrind/splab.h,
        /// docs/replay.md "Regions of interest").
        #[arg(long)]
        roi: bool,
        /// Leave out the first N accesses (address-space events are still recorded); N takes
        /// K/M/G, decimal, as the replay's skip= does.
        #[arg(long, value_name = "N", default_value = "0", value_parser = count_arg)]
        start_after: u64,
        /// Record at most N accesses (after --start-after); the program still runs to its end.
        /// N takes K/M/G, decimal, as the replay's limit= does.
        #[arg(long, value_name = "N", value_parser = count_arg)]
        max_accesses: Option<u64>,
        /// The Valgrind launcher to run.
        #[arg(long, value_name = "PATH", default_value = "valgrind")]
        valgrind: PathBuf,
        /// Pass ARG to Valgrind, before the program (repeatable), e.g. --valgrind-arg=--fair-sched=yes.
        #[arg(long = "valgrind-arg", value_name = "ARG", allow_hyphen_values = true)]
        valgrind_args: Vec<String>,
        /// No progress line.
        #[arg(short, long)]
        quiet: bool,
        /// The program and its arguments (after `--`).
        #[arg(
            required = true,
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "CMD"
        )]
        cmd: Vec<String>,
    },
    /// Advise superpages per region of a recorded trace: seed 004's threshold and spread
    /// (Figure 1), the spread measured per window of data accesses (docs/advise.md).
    ///
    /// Example: splab advise -w trace:path=prog.spt -m core2 --hints-out prog.hints --json a.json.
    /// The JSON holds the table's data: trace, machine, tlb, threshold {pages, bytes, formula},
    /// superpage_bytes, window {accesses, default, windows}, data_accesses, ifetches,
    /// unattributed_accesses, regions [{pid, start, end, kind, file, size_bytes, mapped_bytes,
    /// accesses, distinct_pages, spread_median, spread_max, share_at_or_above_threshold,
    /// verdict, reason, ...}], program {spread_median, spread_max, verdict}, hints.
    Advise(crate::advise::AdviseArgs),
    /// Measure this machine (x86-64 Linux) with microbenchmarks and write a machine file:
    /// clock, caches, TLBs, whether it is a guest and its host page size, memory-level
    /// parallelism, concurrent walks, fault, zeroing and copy costs, each value with the
    /// benchmark and the spread it came from (docs/calibrate.md). Under 2 minutes on a 2-core guest; --quick about 30 s.
    ///
    /// Example: splab calibrate -o host.toml; then splab run -m file:host.toml -w gups.
    Calibrate(crate::calibrate::CalibrateArgs),
    /// Check the model against this machine (x86-64 Linux): the calibration benchmarks' access
    /// patterns measured natively and predicted, then held-out C programs (tree lookups, a
    /// sequential scan, random updates) at several sizes, run natively with 4KB and with
    /// MADV_HUGEPAGE memory, recorded with splab record and replayed: measured vs predicted
    /// superpage speedup (docs/validation.md). Needs Valgrind and a C compiler for the held-out part.
    ///
    /// Example: splab calibrate -o host.toml; splab validate -m file:host.toml.
    Validate(crate::validate::ValidateArgs),
    /// Inspect or convert traces: info, cat, import-champsim.
    Trace {
        #[command(subcommand)]
        cmd: TraceCmd,
    },
}

#[derive(Subcommand)]
enum PolicyCmd {
    /// Print a policy (a preset with parameters, e.g. navarro:sizes=64K+4M, or file:PATH.toml)
    /// as TOML, organised by the five events of a superpage's life. Run with `-p file:OUT.toml`
    /// it gives the same results as the policy itself.
    Show {
        /// The policy, as `-p` takes it.
        #[arg(value_name = "POLICY")]
        name: String,
    },
}

#[derive(Subcommand)]
enum MachineCmd {
    /// Print a machine as a TOML machine file, every value with its source note, to start a
    /// machine of your own from: splab machine show skylake > my.toml; then run with
    /// -m file:my.toml. Options are written into the file (skylake:mem=4G gives mem = "4G").
    Show {
        /// A preset (splab list machines), or file:PATH.toml, optionally with
        /// :mem=SIZE,swap=SIZE,nested=SIZE.
        name: String,
    },
    /// Compare two machines parameter by parameter (notes left out), e.g. two runs of
    /// splab calibrate: splab machine diff file:a.toml file:b.toml. Prints the parameters that
    /// differ with |a - b| / max(|a|, |b|), and exits 1 if any differs by more than the
    /// tolerance.
    Diff {
        /// The first machine, as -m takes it.
        a: String,
        /// The second machine.
        b: String,
        /// Percent beyond which a difference counts (and the exit status is 1).
        #[arg(long, default_value_t = 10.0)]
        tolerance: f64,
    },
}

#[derive(Subcommand)]
enum TraceCmd {
    /// Header, counts, processes, files and live regions of a trace.
    ///
    /// Instant: read from the trailer. A trace cut short is read through, and where it ends is
    /// reported (exit status 1). `--verify` also reads every block, checking its CRC-32, and
    /// the counts against the trailer (exit status 1 on damage, naming the byte offset).
    Info {
        /// The trace file.
        file: PathBuf,
        /// List at most N regions (0: none; the count is always printed).
        #[arg(long, value_name = "N", default_value_t = 20)]
        regions: usize,
        /// Read every block too: check each block's CRC-32 and that the events agree with
        /// the trailer's counts (takes a full read of the file).
        #[arg(long)]
        verify: bool,
    },
    /// The events of a trace as text, one a line.
    Cat {
        /// The trace file.
        file: PathBuf,
        /// Print at most N events (K/M/G, decimal).
        #[arg(long, value_name = "N", value_parser = count_arg)]
        limit: Option<u64>,
    },
    /// Convert a ChampSim trace (.xz or uncompressed, 64-byte records) into a splab trace.
    ImportChampsim {
        /// The ChampSim trace.
        input: PathBuf,
        /// The splab trace to write.
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
        /// Leave out instruction fetches (instructions without memory operands become Compute).
        #[arg(long)]
        no_ifetch: bool,
        /// Convert at most N records (K/M/G, decimal).
        #[arg(long, value_name = "N", value_parser = count_arg)]
        max_records: Option<u64>,
    },
}

/// A count flag: a number with an optional K/M/G suffix, decimal (10M = 10,000,000), as the
/// count parameters of names take (`trace:skip=10M`).
fn count_arg(s: &str) -> std::result::Result<u64, String> {
    splab_sim::spec::parse_count(s)
        .ok_or_else(|| format!("'{s}' is not a count: expected a number such as 5000 or 10M"))
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            let bad_input = e
                .downcast_ref::<SimError>()
                .is_some_and(|s| matches!(s, SimError::BadInput(_)));
            eprintln!("error: {e:#}");
            if bad_input {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

fn dispatch(cli: Cli) -> Result<ExitCode> {
    match cli.cmd {
        Cmd::Run { policy, args } => cmd_run(&policy, &args),
        Cmd::Compare {
            policy,
            csv,
            jobs,
            baseline,
            args,
        } => cmd_compare(
            &split_policies(&policy)?,
            csv.as_deref(),
            jobs,
            baseline.as_deref(),
            &args,
        ),
        Cmd::Plot {
            reports,
            metric,
            out,
            title,
            label,
            x_values,
            x_label,
        } => {
            crate::plot::is_png(&out)?;
            // Checked (and created under a temporary name) before the reports are read, as
            // every output flag: a path that cannot be written is bad input (exit status 2).
            let dest = Output::open("-o", Some(&out))?.expect("a path");
            let fig = if x_values.is_empty() {
                if x_label.is_some() {
                    return Err(SimError::BadInput(
                        "plot: --x-label is for a sweep (--x-values)".into(),
                    )
                    .into());
                }
                crate::plot::figure(&reports, &metric, &label, title.as_deref())?
            } else {
                crate::plot::sweep(
                    &reports,
                    &x_values,
                    &metric,
                    &label,
                    title.as_deref(),
                    x_label.as_deref(),
                )?
            };
            dest.write_bytes(&crate::plot::render(&fig, &out)?)
        }
        Cmd::Machine {
            cmd: MachineCmd::Show { name },
        } => {
            let text = hw::Machine::show(&name)?;
            let mut out = std::io::stdout().lock();
            match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                // `splab machine show skylake | head` is not an error.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                r => r.context("writing the machine file to standard output"),
            }
        }
        Cmd::Machine {
            cmd: MachineCmd::Diff { a, b, tolerance },
        } => {
            if !(tolerance >= 0.0) {
                return Err(splab_sim::SimError::BadInput(format!(
                    "machine diff: --tolerance {tolerance}: give a percentage, 0 or more"
                ))
                .into());
            }
            let (text, beyond) = crate::machine_diff::table(&a, &b, tolerance)?;
            print!("{text}");
            if beyond > 0 {
                return Ok(ExitCode::from(1));
            }
            Ok(())
        }
        Cmd::List { what } => {
            cmd_list(&what);
            Ok(())
        }
        Cmd::Policy {
            cmd: PolicyCmd::Show { name },
        } => {
            print!("{}", policy::Policy::from_spec(&name)?.to_toml());
            Ok(())
        }
        Cmd::Bench { quick, repeat } => cmd_bench(quick, repeat as usize),
        Cmd::Cc {
            source,
            output,
            machine,
            tlb_level,
            superpages,
            granularity,
            default_trip,
            report,
            print_preload,
            quiet,
            clang_args,
        } => {
            if print_preload {
                let (_, so) = crate::cc::runtime()?;
                println!("{}", so.display());
            } else {
                let threshold = crate::advise::Threshold::of(&machine, &tlb_level)?;
                let args = crate::cc::CcArgs {
                    source: source.expect("clap requires SOURCE without --print-preload"),
                    output,
                    threshold,
                    decision: superpages,
                    granularity,
                    default_trip,
                    report,
                    clang_args,
                };
                let (exe, v) = crate::cc::compile(&args)?;
                if !quiet {
                    print!("{}", crate::cc::summary(&v, &args.threshold));
                    println!("  wrote {}", exe.display());
                }
            }
            Ok(())
        }
        Cmd::Demo { out } => cmd_demo(&out),
        Cmd::Record {
            output,
            lackey,
            ifetch,
            no_code_pages,
            roi,
            start_after,
            max_accesses,
            valgrind,
            valgrind_args,
            quiet,
            cmd,
        } => {
            return trace_cmd::record(
                &output,
                RecordOptions {
                    backend: if lackey {
                        Backend::Lackey
                    } else {
                        Backend::Auto
                    },
                    ifetch,
                    code_pages: !no_code_pages,
                    roi,
                    start_after,
                    max_accesses,
                    valgrind,
                    valgrind_args,
                    ..Default::default()
                },
                quiet,
                &cmd,
            )
        }
        Cmd::Advise(a) => crate::advise::run(&a),
        Cmd::Calibrate(a) => crate::calibrate::run(&a),
        Cmd::Validate(a) => crate::validate::run(&a),
        Cmd::Trace { cmd } => match cmd {
            TraceCmd::Info {
                file,
                regions,
                verify,
            } => trace_cmd::info(&file, regions).and_then(|()| {
                if verify {
                    trace_cmd::verify(&file)
                } else {
                    Ok(())
                }
            }),
            TraceCmd::Cat { file, limit } => trace_cmd::cat(&file, limit),
            TraceCmd::ImportChampsim {
                input,
                output,
                no_ifetch,
                max_records,
            } => trace_cmd::import_champsim(&input, &output, !no_ifetch, max_records),
        },
    }
    .map(|()| ExitCode::SUCCESS)
}

/// Splits "base,navarro:sizes=64K,x=1,linux" into policies: a comma-separated piece with an
/// '=' but no ':' continues the previous policy's parameters. An empty piece ("base,", ",",
/// "") is bad input: it is a typo, not a request for fewer policies.
fn split_policies(args: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for a in args {
        for piece in a.split(',') {
            if piece.trim().is_empty() {
                return Err(SimError::BadInput(format!(
                    "-p '{a}': empty policy name; give policies separated by commas, e.g. -p base,navarro"
                ))
                .into());
            }
            match out.last_mut() {
                Some(prev) if piece.contains('=') && !piece.contains(':') && prev.contains(':') => {
                    prev.push(',');
                    prev.push_str(piece);
                }
                _ => out.push(piece.to_string()),
            }
        }
    }
    Ok(out)
}

fn parse_page_cache(s: &str) -> Result<splab_sim::vm::object::PageCache> {
    splab_sim::vm::object::PageCache::parse(s).ok_or_else(|| {
        SimError::BadInput(format!(
            "--page-cache: unknown mode '{s}': expected warm or cold"
        ))
        .into()
    })
}

fn parse_free(free: &Option<String>) -> Result<Option<u64>> {
    match free {
        None => Ok(None),
        Some(s) => splab_sim::spec::parse_size(s).map(Some).ok_or_else(|| {
            SimError::BadInput(format!(
                "--free: bad size '{s}': expected a size such as 4M or 1G"
            ))
            .into()
        }),
    }
}

/// `--frag PCT` and `--frag-mem SIZE`: the level and the workload's memory if given.
type Frag = Option<(u8, Option<u64>)>;

fn parse_frag(a: &RunArgs) -> Result<Frag> {
    let mem = match &a.frag_mem {
        None => None,
        Some(s) => Some(splab_sim::spec::parse_size(s).ok_or_else(|| {
            SimError::BadInput(format!(
                "--frag-mem: bad size '{s}': expected a size such as 512M or 8G"
            ))
        })?),
    };
    let Some(f) = &a.frag else {
        if mem.is_some() {
            return Err(SimError::BadInput(
                "--frag-mem: only with --frag PCT (the level to fragment memory to)".into(),
            )
            .into());
        }
        return Ok(None);
    };
    match f.trim().parse::<u64>() {
        Ok(pct) if pct <= 100 => Ok(Some((pct as u8, mem))),
        _ => Err(SimError::BadInput(format!(
            "--frag {f}: the level is a percentage from 0 to 100 (Quicksilver's are 0, 50, 100)"
        ))
        .into()),
    }
}

/// Parses and validates a run, with its `--frag`.
fn prepare(spec: &RunSpec, frag: Frag) -> Result<splab_sim::Prepared> {
    let p = spec.prepare()?;
    Ok(match frag {
        Some((pct, mem)) => p.with_frag(pct, mem)?,
        None => p,
    })
}

fn spec_for(policy: &str, a: &RunArgs) -> Result<RunSpec> {
    Ok(RunSpec {
        machine: a.machine.clone(),
        policy: policy.to_string(),
        workload: a.workload.clone(),
        seed: a.seed,
        check: match &a.check {
            None => CheckMode::Off,
            Some(m) => CheckMode::parse(m)?,
        },
        free_bytes: parse_free(&a.free)?,
        page_cache: parse_page_cache(&a.page_cache)?,
        dump_reservations: a.dump_reservations,
    })
}

/// A progress line on stderr for runs longer than a second, when stderr is a terminal.
fn progress(
    label: String,
    expected: Option<u64>,
    quiet: bool,
) -> Option<splab_sim::engine::ProgressFn> {
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let start = Instant::now();
    Some(Box::new(move |done: u64, _cycles: u64| {
        let secs = start.elapsed().as_secs_f64();
        if secs < 1.0 {
            return;
        }
        let rate = done as f64 / secs / 1e6;
        let line = match expected {
            Some(n) if n > 0 => {
                let f = (done as f64 / n as f64).min(1.0);
                let w = 30;
                let filled = (f * w as f64) as usize;
                format!(
                    "{label} [{}{}] {:>5.1}%  {:.0}M accesses  {rate:.0}M/s  {secs:.0}s",
                    "=".repeat(filled),
                    " ".repeat(w - filled),
                    100.0 * f,
                    done as f64 / 1e6
                )
            }
            _ => format!(
                "{label} {:.0}M accesses  {rate:.0}M/s  {secs:.0}s",
                done as f64 / 1e6
            ),
        };
        eprint!("\r{line}\x1b[K");
        let _ = std::io::stderr().flush();
    }))
}

fn clear_progress(quiet: bool) {
    if !quiet && std::io::stderr().is_terminal() {
        eprint!("\r\x1b[K");
    }
}

fn run_one(spec: &RunSpec, frag: Frag, quiet: bool) -> Result<Report> {
    let prepared = prepare(spec, frag)?;
    let label = format!(
        "{} {} {}",
        prepared.machine.name,
        prepared.policy.name,
        prepared.workload.describe()
    );
    let p = progress(label, prepared.workload.expected_accesses(), quiet);
    let r = prepared.run(p);
    clear_progress(quiet);
    r.with_context(|| {
        format!(
            "run of {} under policy {} on {}",
            spec.workload, spec.policy, spec.machine
        )
    })
    .map_err(|e| {
        // Keep bad-input errors recognisable for the exit status.
        match e.downcast::<SimError>() {
            Ok(s) => anyhow::Error::new(s),
            Err(e) => e,
        }
    })
}

/// An output file named by a flag (`--json`, `--csv`): "-" is standard output; a file is
/// created (under a temporary name) before the run starts, so that a path that cannot be
/// written is reported at once, and it appears only whole (splab_trace::AtomicOutput).
pub(crate) enum Output {
    Stdout,
    File(std::fs::File, AtomicOutput),
}

impl Output {
    pub(crate) fn open(flag: &str, path: Option<&str>) -> Result<Option<Output>> {
        match path {
            None => Ok(None),
            Some("-") => Ok(Some(Output::Stdout)),
            Some(p) => {
                if is_splab_trace(Path::new(p)) {
                    return Err(SimError::BadInput(format!(
                        "{flag} {p}: {p} is a splab trace (the run's input?); writing there would \
                         replace it: give another path"
                    ))
                    .into());
                }
                let (f, g) = AtomicOutput::create(Path::new(p))
                    .map_err(|e| SimError::BadInput(format!("{flag} {p}: {e}")))?;
                Ok(Some(Output::File(f, g)))
            }
        }
    }

    pub(crate) fn write(self, text: &str) -> Result<()> {
        self.write_bytes(text.as_bytes())
    }

    pub(crate) fn write_bytes(self, bytes: &[u8]) -> Result<()> {
        match self {
            Output::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(bytes)
                    .and_then(|()| out.flush())
                    .context("writing to standard output")
            }
            Output::File(mut f, g) => {
                let dest = g.dest().display().to_string();
                f.write_all(bytes)
                    .and_then(|()| f.flush())
                    .with_context(|| format!("writing {dest}"))?;
                drop(f);
                g.commit()?;
                Ok(())
            }
        }
    }
}

/// Whether `path` is an existing splab trace (it starts with the trace magic). An output flag
/// naming one would replace a recording, typically the very trace being replayed
/// (`-w trace:path=t.spt --json t.spt`), and a recording can take minutes to make again. Only
/// a regular file is read: opening a pipe (`--json /dev/stdout` into `| jq`) to read it would
/// wait for a writer that never comes.
fn is_splab_trace(path: &Path) -> bool {
    use std::io::Read;
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut magic = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == splab_trace::format::MAGIC
}

/// `path` made absolute with its links resolved, its folder's when it does not exist yet (an
/// output's): two spellings of one file (`r.json`, `./r.json`) give one key.
pub(crate) fn file_key(path: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(path) {
        return c;
    }
    match (std::fs::canonicalize(folder_of(path)), path.file_name()) {
        (Ok(d), Some(name)) => d.join(name),
        _ => path.to_path_buf(),
    }
}

/// The folder `path` is in: "." for a bare file name.
pub(crate) fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Refuses output flags that name one file (`--json r --csv r`): each output is written under a
/// temporary name and renamed, so one would silently replace the other, and the second rename
/// would fail after the whole run. "-" (standard output) is checked by the callers.
pub(crate) fn distinct_outputs(outs: &[(&str, Option<&str>)]) -> Result<()> {
    let key = |p: &str| file_key(Path::new(p));
    let files: Vec<(&str, &str)> = outs
        .iter()
        .filter_map(|&(flag, p)| p.filter(|p| *p != "-").map(|p| (flag, p)))
        .collect();
    for (i, (fa, pa)) in files.iter().enumerate() {
        for (fb, pb) in &files[i + 1..] {
            if key(pa) == key(pb) {
                return Err(SimError::BadInput(format!(
                    "{fa} {pa} and {fb} {pb} name the same file: give each output its own path"
                ))
                .into());
            }
        }
    }
    Ok(())
}

fn json_text(value: &impl serde::Serialize) -> Result<String> {
    Ok(serde_json::to_string_pretty(value)? + "\n")
}

fn say(to_stderr: bool, text: &str) {
    if to_stderr {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
}

fn cmd_run(policy: &str, a: &RunArgs) -> Result<()> {
    let spec = spec_for(policy, a)?;
    let frag = parse_frag(a)?;
    prepare(&spec, frag)?;
    let json = Output::open("--json", a.json.as_deref())?;
    let report = run_one(&spec, frag, a.quiet)?;
    let json_stdout = a.json.as_deref() == Some("-");
    say(json_stdout, &report.to_text());
    if let Some(d) = &report.dump {
        say(json_stdout, d);
    }
    if let Some(o) = json {
        o.write(&json_text(&report)?)?;
    }
    Ok(())
}

fn cmd_compare(
    policies: &[String],
    csv: Option<&str>,
    jobs: Option<usize>,
    baseline: Option<&str>,
    a: &RunArgs,
) -> Result<()> {
    if policies.is_empty() {
        return Err(SimError::BadInput(
            "-p: no policy given; e.g. -p base,navarro (the first is the baseline)".into(),
        )
        .into());
    }
    let base = match baseline {
        None => 0,
        Some(b) => policies.iter().position(|p| p == b).ok_or_else(|| {
            SimError::BadInput(format!(
                "--baseline {b}: not one of the policies compared ({})",
                policies.join(", ")
            ))
        })?,
    };
    if a.json.as_deref() == Some("-") && csv == Some("-") {
        return Err(SimError::BadInput(
            "--json - and --csv -: only one of them can go to standard output".into(),
        )
        .into());
    }
    // Validate every policy and output before running any.
    for p in policies {
        prepare(&spec_for(p, a)?, parse_frag(a)?)?;
    }
    let jobs = match jobs {
        Some(0) => {
            return Err(SimError::BadInput(
                "--jobs 0: must run at least one policy at a time".into(),
            )
            .into())
        }
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    distinct_outputs(&[("--json", a.json.as_deref()), ("--csv", csv)])?;
    let json = Output::open("--json", a.json.as_deref())?;
    let csv_out = Output::open("--csv", csv)?;
    let specs = policies
        .iter()
        .map(|p| spec_for(p, a))
        .collect::<Result<Vec<_>>>()?;
    let reports = run_policies(&specs, parse_frag(a)?, jobs, a.quiet)?;
    let cmp = Comparison::with_baseline(reports, base);
    let to_stderr = a.json.as_deref() == Some("-") || csv == Some("-");
    say(to_stderr, &cmp.to_text());
    // --dump-reservations: each policy's lists after the table, named by its policy.
    for r in &cmp.reports {
        if let Some(d) = &r.dump {
            let d = d.strip_prefix("reservations: ").unwrap_or(d);
            say(
                to_stderr,
                &format!("\nreservations of {}: {d}", r.config.policy),
            );
        }
    }
    if let Some(o) = json {
        o.write(&json_text(&cmp)?)?;
    }
    if let Some(o) = csv_out {
        o.write(&cmp.to_csv())?;
    }
    Ok(())
}

/// What `compare`'s progress line knows: per policy, accesses done and expected, and whether
/// it has finished.
struct CompareProgress {
    start: Instant,
    names: Vec<String>,
    done: Vec<u64>,
    expected: Vec<Option<u64>>,
    finished: Vec<bool>,
    running: Vec<bool>,
}

impl CompareProgress {
    /// "splab compare: 1 of 3 done, running navarro (2 of 3), freebsd (3 of 3); 41% ETA 12s".
    fn draw(&self) {
        let n = self.names.len();
        let finished = self.finished.iter().filter(|&&f| f).count();
        let running: Vec<String> = (0..n)
            .filter(|&i| self.running[i])
            .map(|i| format!("{} ({} of {n})", self.names[i], i + 1))
            .collect();
        let secs = self.start.elapsed().as_secs_f64();
        // The fraction of the work done: accesses where the workload says how many it makes,
        // else finished runs.
        let frac = if self.expected.iter().all(|e| e.is_some_and(|e| e > 0)) {
            let total: u64 = self.expected.iter().map(|e| e.unwrap_or(0)).sum();
            let done: u64 = (0..n)
                .map(|i| {
                    if self.finished[i] {
                        self.expected[i].unwrap_or(0)
                    } else {
                        self.done[i].min(self.expected[i].unwrap_or(0))
                    }
                })
                .sum();
            done as f64 / total as f64
        } else {
            finished as f64 / n as f64
        };
        let eta = if frac > 0.0 && secs >= 1.0 {
            format!(" ETA {:.0}s", secs * (1.0 - frac) / frac)
        } else {
            String::new()
        };
        eprint!(
            "\rsplab compare: {finished} of {n} done, running {}; {:.0}%{eta}  {secs:.0}s\x1b[K",
            running.join(", "),
            100.0 * frac
        );
        let _ = std::io::stderr().flush();
    }
}

/// Runs one spec per policy on up to `jobs` threads and returns the reports in the order of
/// `specs`. Each run is a deterministic function of its spec and shares nothing with the
/// others, so the reports do not depend on `jobs` (apart from `sim`, the wall time). Progress
/// goes to stderr when it is a terminal and not `quiet`. On failure, the error of the first
/// failing policy in `specs` order; policies not yet started are not started.
fn run_policies(specs: &[RunSpec], frag: Frag, jobs: usize, quiet: bool) -> Result<Vec<Report>> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    let n = specs.len();
    let show = !quiet && std::io::stderr().is_terminal();
    let progress = Arc::new(Mutex::new(CompareProgress {
        start: Instant::now(),
        names: specs.iter().map(|s| s.policy.clone()).collect(),
        done: vec![0; n],
        expected: vec![None; n],
        finished: vec![false; n],
        running: vec![false; n],
    }));
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Mutex<Vec<Option<Result<Report>>>> = Mutex::new((0..n).map(|_| None).collect());
    let worker = || loop {
        let i = next.fetch_add(1, Ordering::SeqCst);
        if i >= n || failed.load(Ordering::SeqCst) {
            return;
        }
        let r = run_compared(&specs[i], frag, i, &progress, show);
        if r.is_err() {
            failed.store(true, Ordering::SeqCst);
        }
        {
            let mut p = progress.lock().unwrap();
            p.running[i] = false;
            p.finished[i] = true;
            if show {
                p.draw();
            }
        }
        results.lock().unwrap()[i] = Some(r);
    };
    std::thread::scope(|s| {
        for _ in 0..jobs.min(n).max(1) {
            s.spawn(worker);
        }
    });
    if show {
        eprint!("\r\x1b[K");
    }
    let mut reports = Vec::with_capacity(n);
    for r in results.into_inner().unwrap() {
        match r {
            Some(r) => reports.push(r?),
            None => anyhow::bail!("compare: a run was not started after an earlier one failed"),
        }
    }
    Ok(reports)
}

/// One policy of `compare`: run_one, reporting progress to the shared line.
fn run_compared(
    spec: &RunSpec,
    frag: Frag,
    i: usize,
    progress: &std::sync::Arc<std::sync::Mutex<CompareProgress>>,
    show: bool,
) -> Result<Report> {
    let prepared = prepare(spec, frag)?;
    let p: Option<splab_sim::engine::ProgressFn> = if show {
        let shared = progress.clone();
        {
            let mut s = shared.lock().unwrap();
            s.expected[i] = prepared.workload.expected_accesses();
            s.running[i] = true;
            s.draw();
        }
        let mut last = Instant::now();
        Some(Box::new(move |done: u64, _cycles: u64| {
            let mut s = shared.lock().unwrap();
            s.done[i] = done;
            if last.elapsed().as_millis() >= 200 {
                last = Instant::now();
                s.draw();
            }
        }))
    } else {
        None
    };
    prepared
        .run(p)
        .with_context(|| {
            format!(
                "run of {} under policy {} on {}",
                spec.workload, spec.policy, spec.machine
            )
        })
        .map_err(|e| match e.downcast::<SimError>() {
            // Keep bad-input errors recognisable for the exit status.
            Ok(s) => anyhow::Error::new(s),
            Err(e) => e,
        })
}

fn cmd_list(what: &str) {
    match what {
        "machines" => {
            for name in hw::MACHINES {
                let m = hw::Machine::from_spec(name).expect("presets parse");
                println!("{:<12} {}", name, m.description);
            }
            println!(
                "\nParameters: mem=SIZE, swap=SIZE (e.g. skylake:mem=4G), nested=SIZE (a guest \
                 under nested paging with host pages of SIZE: skylake:nested=4K). A machine file: \
                 -m file:PATH.toml[:mem=SIZE,swap=SIZE,nested=SIZE]; `splab machine show NAME` \
                 prints a preset's file to start one from."
            );
        }
        "policies" => {
            println!(
                "Each preset's choice per event (`splab policy show NAME` prints one as TOML):\n"
            );
            print!("{}", policy::presets_table());
            println!("\nParameters (NAME:key=value,...; any policy also as file:PATH.toml[:key=value,...]):\n");
            for (name, d) in policy::POLICIES {
                println!("{name:<12} {d}");
            }
        }
        _ => {
            for (name, d) in workload::WORKLOADS {
                println!("{name:<8} {d}");
            }
        }
    }
}

fn cmd_bench(quick: bool, repeat: usize) -> Result<()> {
    let scale = if quick { 4 } else { 1 };
    let cases = [
        (
            "seq (sequential scan, 8-byte words)",
            format!("seq:size={}M,op=read", 4096 / scale),
        ),
        (
            "gups (random updates)",
            format!("gups:size=1G,updates={}M", 64 / scale),
        ),
    ];
    let policies = ["base", "navarro"];
    println!(
        "splab bench: simulated accesses per second on skylake (use a release build); \
         {repeat} run{} of each, median (range)",
        if repeat == 1 { "" } else { "s" }
    );
    // rates[case][policy]: one rate per round; accesses[case][policy]: a run's accesses.
    let mut rates = vec![vec![Vec::with_capacity(repeat); policies.len()]; cases.len()];
    let mut accesses = vec![vec![0u64; policies.len()]; cases.len()];
    // Progress on a terminal only: redirected, the carriage returns would leave one long line.
    let tty = std::io::stderr().is_terminal();
    for round in 0..repeat {
        for (c, (what, w)) in cases.iter().enumerate() {
            for (p, policy) in policies.iter().enumerate() {
                if repeat > 1 && tty {
                    eprint!("\r  round {}/{repeat}: {what}, {policy}\x1b[K", round + 1);
                }
                let spec = RunSpec {
                    machine: "skylake".into(),
                    policy: (*policy).into(),
                    workload: w.clone(),
                    seed: 1,
                    check: CheckMode::Off,
                    free_bytes: None,
                    page_cache: Default::default(),
                    dump_reservations: false,
                };
                let r = run_one(&spec, None, true)?;
                rates[c][p].push(r.sim.accesses_per_second);
                accesses[c][p] = r.accesses.total;
            }
        }
    }
    if repeat > 1 && tty {
        eprint!("\r\x1b[K");
    }
    for (c, (what, w)) in cases.iter().enumerate() {
        let base = median(&rates[c][0]);
        for (p, policy) in policies.iter().enumerate() {
            let m = median(&rates[c][p]);
            let (lo, hi) = min_max(&rates[c][p]);
            let range = if repeat > 1 {
                format!(" ({:.1}-{:.1}M)", lo / 1e6, hi / 1e6)
            } else {
                String::new()
            };
            let vs = if p == 0 {
                String::new()
            } else {
                format!(", {:.2}x base's time", base / m)
            };
            // The median run's wall time (every run makes the same accesses).
            let (n, secs) = (accesses[c][p], accesses[c][p] as f64 / m);
            println!(
                "  {:<38} {:<8} {:>8.1}M accesses/s{range}   ({} accesses in {:.2} s{vs}; {})",
                what,
                policy,
                m / 1e6,
                splab_sim::report::group(n),
                secs,
                w
            );
        }
    }
    Ok(())
}

/// The median of `v` (the mean of the middle two for an even count); `v` is not empty.
fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// The smallest and the largest of `v`.
fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        })
}

fn cmd_demo(out: &Path) -> Result<()> {
    // Every preset as it is, but `hpux`: HP-UX's default tunables (vps_ceiling 16KB) give no
    // large page on machines without a 16KB page, and seed 002's experiments (9) set chatr
    // hints: the demo shows it with the largest hint the Alpha has (2MB on skylake: the next
    // lower page size).
    let policies: Vec<String> = policy::POLICIES
        .iter()
        .map(|p| match p.0 {
            "hpux" => "hpux:hint=4M".to_string(),
            name => name.to_string(),
        })
        .collect();
    // A few of the papers' workloads on their machines: seed 000's Matrix and Tree on the Alpha,
    // GUPS and a sequential scan on the Kaby Lake of seed 003.
    let cases = [
        ("alpha21264", "matrix:n=1000"),
        ("alpha21264", "tree:ops=2000"),
        ("skylake", "gups:size=256M,updates=8M"),
        ("skylake", "seq:size=1G,op=write"),
    ];
    // A folder that cannot be made (a file of that name, no permission) is bad input, before
    // the runs: it was exit status 1 ("creating X: File exists").
    if out.exists() && !out.is_dir() {
        return Err(SimError::BadInput(format!(
            "demo --out {}: is a file, not a folder for the reports",
            out.display()
        ))
        .into());
    }
    std::fs::create_dir_all(out).map_err(|e| {
        SimError::BadInput(format!(
            "demo --out {}: cannot create it: {e}",
            out.display()
        ))
    })?;
    println!(
        "splab demo: every implemented policy ({}) on the papers' workloads\n",
        policies.join(", ")
    );
    for (machine, w) in cases {
        let mut reports = Vec::new();
        for p in &policies {
            let spec = RunSpec {
                machine: machine.into(),
                policy: p.clone(),
                workload: w.into(),
                seed: 1,
                check: CheckMode::Off,
                free_bytes: None,
                page_cache: Default::default(),
                dump_reservations: false,
            };
            reports.push(run_one(&spec, None, false)?);
        }
        let cmp = Comparison::new(reports);
        println!("{}", cmp.to_text());
        let name = format!("{}-{}.json", machine, w.split(':').next().unwrap_or(w));
        let path = out.join(name);
        Output::open(
            "--out",
            Some(path.to_str().context("non-UTF-8 output path")?),
        )?
        .context("an output file")?
        .write(&json_text(&cmp)?)?;
        println!("  -> {}\n", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `record --start-after 10K` was refused ("invalid digit") while the replay's `skip=10K`,
    /// which README gives as its equivalent, is taken: the count flags take K/M/G too.
    #[test]
    fn count_flags_take_suffixes() {
        let cli = Cli::try_parse_from([
            "splab",
            "record",
            "-o",
            "x.spt",
            "--start-after",
            "10K",
            "--max-accesses",
            "2M",
            "--",
            "true",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        let Cmd::Record {
            start_after,
            max_accesses,
            ..
        } = cli.cmd
        else {
            panic!("not record");
        };
        assert_eq!((start_after, max_accesses), (10_000, Some(2_000_000)));
        let cli = Cli::try_parse_from(["splab", "trace", "cat", "t.spt", "--limit", "1K"]).unwrap();
        assert!(matches!(
            cli.cmd,
            Cmd::Trace {
                cmd: TraceCmd::Cat {
                    limit: Some(1000),
                    ..
                }
            }
        ));
        let e = Cli::try_parse_from(["splab", "trace", "cat", "t.spt", "--limit", "lots"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("'lots' is not a count"), "{e}");
    }

    #[test]
    fn policy_lists_split_on_commas_but_keep_parameters() {
        let v = split_policies(&[
            "base,navarro:sizes=64K,x=1,linux".into(),
            "hpux:hint=4M".into(),
        ])
        .unwrap();
        assert_eq!(
            v,
            vec!["base", "navarro:sizes=64K,x=1", "linux", "hpux:hint=4M"]
        );
    }

    #[test]
    fn bench_reports_the_median_and_the_range_of_its_runs() {
        assert_eq!(median(&[5.0]), 5.0);
        assert_eq!(median(&[9.0, 1.0, 4.0]), 4.0);
        assert_eq!(median(&[4.0, 1.0, 9.0, 6.0]), 5.0);
        assert_eq!(min_max(&[4.0, 1.0, 9.0, 6.0]), (1.0, 9.0));
    }
}
