//! Chunking version 2 of the reference indexer, and the semantic version 3
//! ([`ChunkingScheme`]; its rules are in `semantic.rs` and `prose.rs`, built on
//! the units of `reference.rs`).
//!
//! A document is cut into structural units (Markdown blocks packed per heading
//! section, top-level code nodes, or the whole file), each unit is split into
//! token windows when it does not fit the budget left after its context
//! prefix, and whitespace-only pieces are dropped. All offsets are byte
//! offsets into the document text, always on character boundaries.

mod code;
mod markdown;
mod options;
mod prose;
mod reference;
mod semantic;
mod span;
mod splitter;
mod types;

pub use code::grammar;
pub use options::{ChunkingOptions, ChunkingScheme};
pub use reference::chunk_document;
pub(crate) use semantic::chunk_semantic;
pub use types::{CHUNKING_VERSION, ChunkError, SEMANTIC_CHUNKING_VERSION, TextChunk};

// The semantic rules build on the reference's units, packing and splitting.
pub(crate) use reference::{
    LineIndex, PrefixTokens, budget_after_prefix, fits, pack_markdown_blocks, pieces_to_chunks,
};
pub(crate) use span::Span;
