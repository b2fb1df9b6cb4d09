//! splab: the command-line interface. Argument parsing and output only; every decision lives in
//! splab-sim.
//!
//! Exit status: 0 success; 2 bad input (unknown name, malformed parameter, impossible config);
//! 1 a run that failed (the workload faulted, memory ran out, an invariant broke).

// `!(x > y)` on floats is written on purpose where a NaN must take the rejecting branch.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

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
