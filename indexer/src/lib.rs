//! Discovery, chunking and record building for repo-retriever's indexer.
//!
//! By default every record equals what the reference indexer
//! (`chromadb-repo-indexer` 1.2.0, chunking version 2) writes for the same
//! folder and identity: the same ids, document text and metadata, so the two
//! indexers can share a collection. The steps are:
//!
//! 1. [`scan`]: walk the folder without following symlinks, skip the root
//!    `.git`, optionally skip what its ignore rules ignore, select files with
//!    Git wildmatch include/exclude paths and extension lists;
//! 2. [`read_source`]: skip binary files, decode UTF-8 (BOM removed), UTF-16
//!    by its BOM, or the encoding detected for other bytes, turn
//!    CRLF/CR into LF, classify as Markdown, code or generic text;
//! 3. [`chunk_file`]: cut the text into chunks that fit `chunk_size`
//!    `cl100k_base` tokens including their context prefix, and build records.
//!
//! [`build`] runs all three over a folder; [`build_records`] returns only the
//! records. Nothing there writes to a store; [`sync()`] then makes a store's
//! namespace hold exactly a build's records, safely (see [the module](mod@sync)).
//!
//! **Two chunkings.** [`ChunkingScheme::Reference`] (the default of
//! [`ChunkingOptions`]) is the reference's chunking version 2, record for
//! record. [`ChunkingScheme::Semantic`] (version 3) is this crate's own, for
//! indexes that do not have to match the reference: it keeps the reference's
//! split points and token splitter, but gives a declaration its doc comment,
//! attributes and decorators, merges small neighbouring units (imports,
//! constants, `//!` lines) up to the budget, bounds dense one-line files
//! (minified code, SVG) to a few windows, and cuts reST and AsciiDoc at their
//! headings with section metadata (the rules are documented in
//! `chunking/semantic.rs`). Its record ids carry the version
//! ([`chunking_record_id`]): the two chunkings never share an id, so a sync
//! that switches a namespace from one to the other rewrites every record
//! instead of keeping stale chunks as "unchanged".
//!
//! Known differences from the reference, outside the fixture corpora: text
//! that is neither UTF-8 nor UTF-16 with a BOM is decoded in the encoding
//! `chardetng` guesses, where the reference takes charset-normalizer's guess
//! (both give Windows-1252 for Western Latin-1 text); grammars whose pinned
//! revision could not be had are the nearest one (`README.md`, "Grammars").

mod binary;
pub mod checkout;
mod chunking;
mod classify;
mod definitions;
mod discovery;
mod error;
mod identity;
mod pipeline;
mod pytext;
mod records;
mod schema;
pub mod sync;
mod tokens;
mod wildmatch;

pub use binary::{is_binary, is_binary_string};
pub use chunking::{
    CHUNKING_VERSION, ChunkError, ChunkingOptions, ChunkingScheme, SEMANTIC_CHUNKING_VERSION, TextChunk,
    chunk_document, grammar,
};
pub use classify::{DecodedFile, Strategy, classify, decode, language_for_extension, normalize_newlines};
pub use definitions::entity_type_of;
pub use discovery::{
    Scan, ScanStats, SelectionOptions, SkippedFile, SourceFile, extension_of, normalize_extensions, normalize_patterns,
    scan,
};
pub use error::IndexError;
pub use identity::{Identity, chunking_record_id, document_id, namespace_id, record_id, sha256_hex};
pub use pipeline::{
    Build, BuildStats, BuildStream, BuiltFile, IndexOptions, KnownFile, KnownFiles, build, build_records, build_stream,
    build_stream_known, read_source,
};
pub use records::{SCHEMA_VERSION, chunk_file, context_prefix, file_record_ids};
pub use sync::{StreamSync, SyncError, SyncOptions, SyncSummary, sync, sync_build};
pub use tokens::TokenCounter;
pub use wildmatch::PathSpec;
