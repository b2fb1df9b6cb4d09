//! `splab calibrate`: microbenchmarks that measure the machine splab runs on and write a
//! machine file (README "Machine files", docs/calibrate.md). x86-64 Linux only.
//!
//! Every value in the file has, in its table's `source`, the benchmark it came from and the
//! spread of its repeats; what the benchmarks cannot measure is copied from the skylake preset
//! and marked "assumed (not measurable here)".

use anyhow::Result;

use crate::cli::Output;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub(crate) mod bench;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod measure;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod pairfill;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub(crate) mod reporting;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod storebuf;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod walkcost;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub use measure::l2_footprint;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub(crate) use measure::HugeFaults;

#[derive(clap::Args)]
pub struct CalibrateArgs {
    /// The machine file to write ("-" for standard output), e.g. -o host.toml; then
    /// splab run -m file:host.toml.
    #[arg(short, long, value_name = "FILE")]
    pub output: String,
    /// A shorter run (about 30 s here): fewer repeats, smaller footprints.
    #[arg(long)]
    pub quick: bool,
    /// The machine's `name` in the file (what reports call it).
    #[arg(long, default_value = "host")]
    pub name: String,
    /// No progress lines (the summary is still printed to standard error).
    #[arg(short, long)]
    pub quiet: bool,
    /// Leave the guest's free page reporting as it is. By default calibrate turns it off while
    /// it measures (when it may: root) and writes free memory once, so that no first touch
    /// includes the host's faults (docs/calibrate.md, "Free page reporting").
    #[arg(long)]
    pub leave_reporting: bool,
    /// Leave out the LLC's whole measured eviction curve (`lifetime_curve_ns`), which the model
    /// reads in place of the half-way lifetime's threshold: the file then has `lifetime_ns`
    /// alone, as before 2026-11-28 (docs/calibrate.md, "The LLC: the whole lifetime curve").
    #[arg(long, conflicts_with = "lifetime_curve")]
    pub no_lifetime_curve: bool,
    /// The curve is written by default since 2026-11-28; the option is still accepted.
    #[arg(long, hide = true)]
    pub lifetime_curve: bool,
}

pub fn run(args: &CalibrateArgs) -> Result<()> {
    if args.name.is_empty() || args.name.contains(['"', '\\', '\n']) {
        return Err(splab_sim::SimError::BadInput(format!(
            "calibrate: --name {:?}: give a plain name",
            args.name
        ))
        .into());
    }
    let out = Output::open("--output", Some(&args.output))?.expect("a path was given");
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let text = measure::calibrate(args)?;
        // The file must load before it is written.
        splab_sim::hw::machine_file::parse(&text, "the calibrated machine file").map_err(|e| {
            anyhow::anyhow!("calibrate wrote a machine file that does not load: {e}")
        })?;
        out.write(&text)?;
        if args.output != "-" && args.output.ends_with(".toml") {
            splab_sim::hw::Machine::from_spec(&format!("file:{}", args.output))?;
            eprintln!("wrote {} (loads as -m file:{})", args.output, args.output);
        }
        Ok(())
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        drop(out);
        anyhow::bail!(
            "calibrate: the benchmarks are written for x86-64 Linux only (cpuid, rdtsc-free \
             timing, madvise); this is {} {}",
            std::env::consts::ARCH,
            std::env::consts::OS
        )
    }
}
