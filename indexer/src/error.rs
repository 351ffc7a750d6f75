use std::path::PathBuf;

use crate::chunking::ChunkError;

/// Why a folder could not be indexed. Every error stops the whole build: the
/// reference never writes a partial desired state.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("{field} must be a non-empty, trimmed value")]
    InvalidIdentity { field: &'static str },
    #[error("{0}")]
    InvalidOptions(String),
    #[error("invalid path pattern {pattern:?}: {reason}")]
    InvalidPattern { pattern: String, reason: String },
    #[error("root is not an existing directory: {}", .0.display())]
    NotADirectory(PathBuf),
    #[error("failed while traversing {}: {source}", path.display())]
    Walk { path: PathBuf, source: std::io::Error },
    #[error("failed while reading the ignore rules under {}: {message}", path.display())]
    Ignore { path: PathBuf, message: String },
    #[error("could not read eligible file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("could not chunk {path}: {source}")]
    Chunk { path: String, source: ChunkError },
    #[error("desired state contains duplicate deterministic record ID {0}")]
    DuplicateId(String),
    /// The thread that reads and chunks files could not run.
    #[error("the build worker failed: {0}")]
    Worker(std::io::Error),
}
