//! Errors of the trace subsystem. Every decoding error names the byte offset in the file and
//! what the reader expected there, so that a person can tell a cut-short file from a corrupt one.

use std::path::PathBuf;

/// An error reading or writing a trace.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("I/O error at byte offset {offset}: {source}")]
    Io {
        offset: u64,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    File {
        path: PathBuf,
        #[source]
        source: Box<TraceError>,
    },
    #[error("cannot open {path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} is not a regular file (a pipe, FIFO, standard input or device): a trace must be \
         a seekable file (its trailer is read first, and a replay reads it twice); save it to a \
         file first"
    )]
    NotSeekable { path: PathBuf },
    #[error("not a splab trace: the file starts with {found:?}, expected the magic \"SPLTRACE\"")]
    BadMagic { found: String },
    #[error(
        "trace format version {found} is not supported (this build reads versions 1 to {supported})"
    )]
    Version { found: u16, supported: u16 },
    #[error(
        "truncated trace at byte offset {offset}: expected {expected}, but the file ends there \
         (was the recording interrupted?)"
    )]
    Truncated { offset: u64, expected: String },
    #[error("corrupt trace at byte offset {offset}: expected {expected}, found {found}")]
    Corrupt {
        offset: u64,
        expected: String,
        found: String,
    },
    #[error(
        "corrupt event in the block at byte offset {block_offset} (byte {pos} of its decoded \
         events): expected {expected}, found {found}"
    )]
    BadEvent {
        block_offset: u64,
        pos: usize,
        expected: String,
        found: String,
    },
    #[error("cannot write this event: {0}")]
    Unencodable(String),
}

impl TraceError {
    #[cold]
    pub(crate) fn corrupt(
        offset: u64,
        expected: impl Into<String>,
        found: impl Into<String>,
    ) -> Self {
        TraceError::Corrupt {
            offset,
            expected: expected.into(),
            found: found.into(),
        }
    }
    #[cold]
    pub(crate) fn truncated(offset: u64, expected: impl Into<String>) -> Self {
        TraceError::Truncated {
            offset,
            expected: expected.into(),
        }
    }
    #[cold]
    pub(crate) fn io(offset: u64, source: std::io::Error) -> Self {
        TraceError::Io { offset, source }
    }
    /// Whether the error is about the input the user named (a file that cannot be opened, is
    /// not a regular file, not a splab trace, or of an unsupported version) rather than a
    /// trace that turned out truncated or corrupt: exit status 2 against 1 (README "Exit
    /// status"), the same for every command that reads a trace.
    pub fn is_bad_input(&self) -> bool {
        match self {
            TraceError::File { source, .. } => source.is_bad_input(),
            TraceError::Open { .. }
            | TraceError::NotSeekable { .. }
            | TraceError::BadMagic { .. }
            | TraceError::Version { .. } => true,
            _ => false,
        }
    }
    /// Adds the file's path to the message.
    pub fn in_file(self, path: impl Into<PathBuf>) -> Self {
        TraceError::File {
            path: path.into(),
            source: Box::new(self),
        }
    }
}
