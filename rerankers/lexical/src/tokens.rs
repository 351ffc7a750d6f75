//! The text split BM25 and MMR share (see the crate docs).

/// The sub-tokens of `text` (see the crate docs).
pub fn tokens(text: &str) -> Vec<String> {
    rr_hash_embed::sub_tokens(text)
}
