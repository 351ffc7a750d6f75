//! The chunking options: token budgets and the scheme whose rules cut the units.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::types::{CHUNKING_VERSION, SEMANTIC_CHUNKING_VERSION};

/// Token budgets, and which rules cut the units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkingOptions {
    /// Maximum tokens of a record's document, context prefix included.
    pub chunk_size: usize,
    /// Tokens shared by consecutive windows of one oversized unit.
    pub chunk_overlap: usize,
    /// The reference's rules (version 2, the default) or the semantic ones (version 3).
    pub scheme: ChunkingScheme,
}

impl ChunkingOptions {
    /// What a store records beside a file to say how its records were cut:
    /// the scheme, its version, the budgets and the record schema. A file
    /// stored with the same text and key has the records this build would
    /// make, so `index` need not read its chunks again.
    pub fn key(&self) -> String {
        format!(
            "{}-v{}:size={}:overlap={}:schema={}",
            self.scheme.name(),
            self.scheme.version(),
            self.chunk_size,
            self.chunk_overlap,
            crate::schema::SCHEMA_VERSION
        )
    }
}

impl Default for ChunkingOptions {
    fn default() -> Self {
        ChunkingOptions { chunk_size: 512, chunk_overlap: 64, scheme: ChunkingScheme::Reference }
    }
}

/// Which rules cut a document into chunks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChunkingScheme {
    /// The reference indexer's chunking version 2: records identical to it.
    #[default]
    Reference,
    /// Version 3, this crate's own rules (`semantic.rs`).
    Semantic,
}

impl ChunkingScheme {
    pub const ALL: [ChunkingScheme; 2] = [ChunkingScheme::Reference, ChunkingScheme::Semantic];

    /// The name used on the command line and in store settings.
    pub fn name(self) -> &'static str {
        match self {
            ChunkingScheme::Reference => "reference",
            ChunkingScheme::Semantic => "semantic",
        }
    }

    /// The `chunking_version` of its records.
    pub fn version(self) -> i64 {
        match self {
            ChunkingScheme::Reference => CHUNKING_VERSION,
            ChunkingScheme::Semantic => SEMANTIC_CHUNKING_VERSION,
        }
    }
}

impl fmt::Display for ChunkingScheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ChunkingScheme {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|scheme| scheme.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|scheme| scheme.name()).collect();
            format!("unknown chunking \"{s}\"; valid choices: {}", names.join(", "))
        })
    }
}
