//! The simulator's error type. Bad input and impossible configurations are errors the user can
//! act on; a violated invariant is a bug in splab and says so.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum SimError {
    /// A bad name, parameter or configuration given by the user.
    #[error("{0}")]
    BadInput(String),
    /// The workload touched memory it has not mapped, or broke a mapping's protection.
    #[error("segmentation fault: pid {pid} {kind} at {va:#x}: {why}")]
    Segfault {
        pid: u32,
        va: u64,
        kind: &'static str,
        why: String,
    },
    /// Modelled physical memory ran out and the policy has no way to reclaim.
    #[error("out of memory: {0}")]
    OutOfMemory(String),
    /// A workload event that the OS model rejects (e.g. munmap of an unaligned range).
    #[error("invalid event: {0}")]
    InvalidEvent(String),
    /// An invariant checker found an inconsistency: a bug in splab.
    #[error("invariant violated (a bug in splab): {0}")]
    Invariant(String),
    /// Trace input problems (reported by the trace reader with offsets).
    #[error("{0}")]
    Trace(String),
}

pub type Result<T> = std::result::Result<T, SimError>;

/// Returns `Err(SimError::Invariant)` with a formatted message when `cond` is false.
#[macro_export]
macro_rules! ensure_inv {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            return Err($crate::error::SimError::Invariant(format!($($arg)*)));
        }
    };
}
