//! `cl100k_base` token counts, as LlamaIndex's default tokenizer computes them
//! (`tiktoken` with `allowed_special="all"`: special-token text such as
//! `<|endoftext|>` counts as one token).

use std::collections::HashSet;
use std::sync::OnceLock;

use tiktoken_rs::CoreBPE;

/// Counts tokens; cheap to create, shares one encoder per process.
#[derive(Clone, Copy)]
pub struct TokenCounter {
    bpe: &'static CoreBPE,
    special: &'static HashSet<&'static str>,
}

impl std::fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenCounter(cl100k_base)")
    }
}

impl Default for TokenCounter {
    fn default() -> Self {
        Self::new()
    }
}

impl TokenCounter {
    /// The shared `cl100k_base` counter (the ranks are embedded in the binary).
    pub fn new() -> Self {
        static SPECIAL: OnceLock<HashSet<&'static str>> = OnceLock::new();
        let bpe = tiktoken_rs::cl100k_base_singleton();
        let special = SPECIAL.get_or_init(|| bpe.special_tokens());
        TokenCounter { bpe, special }
    }

    /// Number of tokens in `text`.
    pub fn count(&self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        // With every special token allowed, encoding cannot fail.
        self.bpe.encode(text, self.special).map_or(0, |(tokens, _)| tokens.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_like_python_tiktoken() {
        // Values from tiktoken 0.13.0, `encode(text, allowed_special="all")`.
        let counter = TokenCounter::new();
        assert_eq!(counter.count(""), 0);
        assert_eq!(counter.count("hello <|endoftext|> world\n  "), 6);
        assert_eq!(counter.count("\n\n\n"), 1);
    }
}
