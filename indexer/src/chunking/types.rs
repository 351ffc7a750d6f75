//! What chunking produces, and how it fails.

/// The chunking version these rules implement (metadata `chunking_version`).
pub const CHUNKING_VERSION: i64 = 2;
/// The version of the semantic rules (metadata `chunking_version`).
pub const SEMANTIC_CHUNKING_VERSION: i64 = 3;

/// Why a document could not be chunked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChunkError {
    #[error("chunk_size is too small for the deterministic context prefix")]
    PrefixTooLong,
    #[error("chunk_size cannot accommodate a source character after the context prefix")]
    CharacterTooLarge,
    #[error("the token splitter returned text that is not an exact source excerpt")]
    NotAnExcerpt,
}

/// One chunk of a document, before it becomes a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextChunk {
    /// The exact source text.
    pub excerpt: String,
    /// 1-based line of the first character.
    pub start_line: usize,
    /// 1-based line of the last character (a trailing newline counts as its line).
    pub end_line: usize,
    /// Markdown heading path, `" > "`-joined.
    pub section: String,
    /// `node_type[:name]` of a code unit.
    pub symbol: String,
}
