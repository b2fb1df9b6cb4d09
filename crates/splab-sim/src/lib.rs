//! splab-sim: an executable model of an operating system's memory-management subsystem, for
//! studying superpage (huge page) policies on modelled hardware.
//!
//! Central design decision: the OS model is a *model*, not an emulator. It keeps the state a real
//! VM keeps (buddy free lists, map entries, objects, page tables with mixed sizes, TLB contents)
//! exactly, and charges time through a cost model whose every constant cites its source; it never
//! executes program instructions. Rejected alternatives: full-system simulation (gem5 FS; too slow
//! for long runs and no way to swap OS policies in minutes) and analytical TLB models (they cannot
//! capture fragmentation, preemption or promotion timing).
//!
//! Data flows one way: workload -> engine -> vm (OS model) -> hw (hardware model); stats flow
//! back into the report. See ARCHITECTURE.md for the code map and the invariants.

pub mod daemon;
pub mod engine;
pub mod error;
pub mod host;
pub mod hw;
pub mod phys;
pub mod policy;
pub mod report;
pub mod reserv;
pub mod rng;
pub mod spec;
pub mod units;
pub mod vm;
pub mod workload;

use std::time::Instant;

pub use error::{Result, SimError};

/// Everything that defines one run.
#[derive(Clone, Debug)]
pub struct RunSpec {
    pub machine: String,
    pub policy: String,
    pub workload: String,
    pub seed: u64,
    /// Invariant checks (`--check`): off, incremental or full.
    pub check: engine::CheckMode,
    /// Start with only this many bytes free (the rest wired, clustered).
    pub free_bytes: Option<u64>,
    /// Keep a dump of the reservation lists at the end in the report (`Report::dump`).
    pub dump_reservations: bool,
    /// Whether files' pages start in the page cache (`--page-cache`, default warm).
    pub page_cache: vm::object::PageCache,
}

/// A run whose names and parameters have all been parsed and validated.
pub struct Prepared {
    pub machine: hw::Machine,
    pub policy: policy::Policy,
    pub workload: Box<dyn workload::Workload>,
    pub spec: RunSpec,
    /// Fragment memory before the workload (`--frag`, `with_frag`).
    pub frag: Option<workload::fragment::FragSpec>,
}

impl RunSpec {
    /// Parses and validates every part, so that bad input fails before any work is done.
    pub fn prepare(&self) -> Result<Prepared> {
        let machine = hw::Machine::from_spec(&self.machine)?;
        let mut policy = policy::Policy::from_spec(&self.policy)?;
        policy.resolve(&machine)?;
        let workload = workload::parse(&self.workload)?;
        if let Some(f) = self.free_bytes {
            let base = machine.base_size();
            if f > machine.mem_bytes || f < base {
                return Err(SimError::BadInput(format!(
                    "--free {}: must be between one base page ({}) and the machine's memory ({})",
                    units::fmt_size(f),
                    units::fmt_size(base),
                    units::fmt_size(machine.mem_bytes)
                )));
            }
            // Memory is given out in base pages: a remainder would be silently dropped, and
            // the report's config.free_bytes would name more than the run had.
            if f % base != 0 {
                return Err(SimError::BadInput(format!(
                    "--free {}: not a whole number of base pages ({}); e.g. --free {}",
                    units::fmt_size(f),
                    units::fmt_size(base),
                    units::fmt_size(f / base * base)
                )));
            }
        }
        Ok(Prepared {
            machine,
            policy,
            workload,
            spec: self.clone(),
            frag: None,
        })
    }
}

impl Prepared {
    /// Fragments memory to `pct` percent before the workload (`--frag`, workload/fragment.rs).
    /// The workload's memory M is `mem_bytes` (`--frag-mem`) if given, else what the workload
    /// declares (`Workload::footprint_bytes`); an error if neither is known.
    pub fn with_frag(mut self, pct: u8, mem_bytes: Option<u64>) -> Result<Prepared> {
        let what = match mem_bytes {
            Some(m) => format!("--frag-mem {}", units::fmt_size(m)),
            None => format!(
                "--frag {pct}: {} declares {} (--frag-mem SIZE sets another)",
                self.workload.describe(),
                self.workload
                    .footprint_bytes()
                    .map_or_else(String::new, units::fmt_size)
            ),
        };
        let mem_bytes = match mem_bytes.or(self.workload.footprint_bytes()) {
            Some(m) => m,
            None => {
                return Err(SimError::BadInput(format!(
                    "--frag {pct}: the workload's memory is needed and {} declares none; give it \
                     with --frag-mem SIZE (e.g. --frag-mem 1G)",
                    self.workload.describe()
                )))
            }
        };
        let f = workload::fragment::FragSpec { pct, mem_bytes };
        f.validate_from(&self.machine, &what)?;
        self.frag = Some(f);
        Ok(self)
    }

    /// Runs the workload to completion and builds its report.
    pub fn run(mut self, progress: Option<engine::ProgressFn>) -> Result<report::Report> {
        let start = Instant::now();
        let mem_bytes = self.machine.mem_bytes;
        let machine_label = self.machine.label.clone();
        let policy_name = self.policy.name.clone();
        let mut e = engine::Engine::new(
            self.machine,
            self.policy,
            self.spec.check,
            self.spec.free_bytes,
        );
        e.os.page_cache = self.spec.page_cache;
        if let Some(p) = progress {
            e.set_progress(p);
        }
        let frag = match self.frag {
            Some(f) => Some(workload::fragment::run(&mut e, f)?),
            None => None,
        };
        let mut rng = rng::Rng::new(self.spec.seed);
        self.workload.run(&mut e, &mut rng)?;
        e.finish();
        e.final_check()?;
        let config = report::Config {
            machine: machine_label,
            policy: policy_name,
            workload: self.workload.describe(),
            mem_bytes,
            seed: self.spec.seed,
            free_bytes: self.spec.free_bytes.unwrap_or(mem_bytes),
            page_cache: self.spec.page_cache.name().into(),
        };
        let mut r = report::Report::from_engine(&e, config, start.elapsed().as_secs_f64());
        r.workload_stats = self.workload.stats();
        r.frag = frag;
        if self.spec.dump_reservations {
            r.dump = Some(e.os.dump_reservations());
        }
        Ok(r)
    }
}

/// Parses, validates and runs.
pub fn run(spec: &RunSpec) -> Result<report::Report> {
    spec.prepare()?.run(None)
}
