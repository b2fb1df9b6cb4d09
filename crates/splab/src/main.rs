//! splab: the command-line interface. Argument parsing and output only; every decision lives in
//! splab-sim.
//!
//! Exit status: 0 success; 2 bad input (unknown name, malformed parameter, impossible config);
//! 1 a run that failed (the workload faulted, memory ran out, an invariant broke).

mod advise;
mod calibrate;
mod cc;
mod cli;
mod machine_diff;
mod plot;
mod validate;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
