//! The text split BM25 and MMR share (see the crate docs).

/// The tokens of `text`: [`rr_core::text::tokens`] without stop words.
pub fn tokens(text: &str) -> Vec<String> {
    rr_core::text::tokens(text).into_iter().filter(|t| !rr_core::text::is_stopword(t)).collect()
}
