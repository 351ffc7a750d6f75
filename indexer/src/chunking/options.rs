//! The chunking options: token budgets and the scheme whose rules cut the units.

use super::semantic::ChunkingScheme;

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

impl Default for ChunkingOptions {
    fn default() -> Self {
        ChunkingOptions { chunk_size: 512, chunk_overlap: 64, scheme: ChunkingScheme::Reference }
    }
}
