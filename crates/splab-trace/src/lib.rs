//! splab-trace: the trace subsystem of splab: the `.spt` file format (a writer and a streaming
//! reader), `record` (capture of real programs under Valgrind), `info` / `cat`, and importers.
//!
//! # The central design decision
//!
//! A trace is **a stream of independently decodable zstd blocks of byte-oriented, delta-encoded
//! events, with runs**. Every block restarts the delta state (current pid, last address per
//! pid), so a reader needs one block in memory (constant memory whatever the trace's length),
//! a corrupt block is reported with its byte offset and cannot poison the next one, and blocks
//! could be decoded in parallel. Addresses (format version 3) are coded against a per-block table
//! of stride and offset predictions indexed by the access's context, VPC3-style (a code for the
//! prediction that held, else a delta from the better base; docs/trace-format.md, "Addresses
//! (version 3)"); consecutive accesses of one kind, size, dep and ipa at a constant stride are one run
//! event (start, count, stride), which is what makes a sequential scan cost far less than a byte
//! per access. Each access's dep and ipa (what an out-of-order core model needs, format version
//! 2) cost nothing when a per-block table predicts them from the pid's last two pairs, which it
//! does for ~90% of the accesses of real programs. zstd then removes the remaining regularity.
//!
//! Capture is a Valgrind tool of our own (`valgrind/sp_tool.c`) that folds accesses into runs
//! in the instrumented program and writes 8-byte binary records to a pipe, in chunks of at most
//! PIPE_BUF bytes so that processes (fork, `--trace-children`) share one pipe without
//! interleaving. The Rust side (`record`) converts the chunks into the format on the fly, on the
//! other core.
//!
//! # Alternatives rejected
//!
//! - **Fixed-size binary records** (ChampSim's 64 bytes, drcachesim's 12+): simple and fast to
//!   decode, but 8-16 bytes per access before compression and still ~2-4 after; the budget is
//!   <= 2 bytes per access on a scan.
//! - **One zstd stream for the whole file**: smaller by a few percent, but an error anywhere
//!   loses the rest, no seeking, and no block-level event counts to bound a corrupt input.
//! - **Columnar blocks** (addresses, kinds, pids in separate arrays): better compression for
//!   some traces, but each event needs several cursors and the writer must buffer a whole block
//!   of typed values; the byte-oriented form decodes at >100M events/s with one cursor.
//! - **dep/ipa as "same as the previous access" flags**: consecutive accesses share their pair
//!   for 2% of gzip's accesses (they come from different instructions), so nearly every access
//!   paid a byte (+43% per access after zstd, against +14% with the prediction table).
//! - **The Valgrind tool writing the final format itself**: would put zstd and the block logic
//!   into a no-libc Valgrind tool and make the format harder to change; the 8-byte wire keeps
//!   the tool small and lets the converter run on the second core.
//! - **Lackey as the recorder**: text output, ~1.7M accesses/s; kept only as a fallback
//!   (`Backend::Lackey`).
//!
//! # Reading order
//!
//! `event` (what a trace says) -> `format` (the bytes; docs/trace-format.md is its spec) ->
//! `writer`, `reader` -> `record` (capture) -> `info` (info, cat) -> `champsim` (importer).
//!
//! Architecture Invariant: the reader never panics and never allocates beyond the format's
//! limits, whatever bytes it is given (property tests in `tests/robustness.rs`).

pub mod atomic;
pub mod champsim;
pub mod error;
pub mod event;
pub mod format;
pub mod infer;
pub mod info;
pub mod reader;
pub mod record;
pub mod writer;

pub use atomic::AtomicOutput;
pub use champsim::{import_champsim, ChampSimOptions, ImportError, ImportSummary};
pub use error::TraceError;
pub use event::*;
pub use format::{FileInfo, ProcessInfo, Region, TraceHeader, Trailer};
pub use info::{cat, info, info_limited, tally, InfoError, Tally};
pub use reader::{read_header_and_trailer, TraceReader};
pub use record::{
    record, tool_available, Backend, ProgramStatus, Progress, RecordError, RecordOptions,
    RecordSummary,
};
pub use writer::{Finished, TraceWriter, DEFAULT_ZSTD_LEVEL};
