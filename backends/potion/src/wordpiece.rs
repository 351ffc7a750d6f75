//! WordPiece for ASCII text, giving the same ids as the model's
//! `tokenizer.json` (BERT normaliser, lower-cased; BERT word splitting;
//! WordPiece with `##` continuations) at a fraction of its cost: no
//! normalisation pass, no offsets, no string allocated per piece. Most
//! source code is ASCII; other text goes through the `tokenizers` crate.
//! A test checks both agree on every chunk of the shared fixture
//! repositories.

use std::collections::HashMap;

/// A word longer than this many characters is one unknown token, as
/// WordPiece's `max_input_chars_per_word` says.
const MAX_WORD: usize = 100;

pub(crate) struct AsciiWordPiece {
    /// Pieces that start a word.
    starts: HashMap<Box<str>, u32>,
    /// Pieces that continue one, without their `##`.
    continuations: HashMap<Box<str>, u32>,
    longest: usize,
}

impl AsciiWordPiece {
    pub(crate) fn new(vocab: HashMap<String, u32>) -> Self {
        let (mut starts, mut continuations) = (HashMap::new(), HashMap::new());
        let mut longest = 0;
        for (token, id) in vocab {
            let (map, piece) = match token.strip_prefix("##") {
                Some(rest) => (&mut continuations, rest),
                None => (&mut starts, token.as_str()),
            };
            longest = longest.max(piece.len());
            map.insert(piece.into(), id);
        }
        AsciiWordPiece { starts, continuations, longest }
    }

    /// Appends the ids of `text`'s tokens to `out`, an unknown word as
    /// `unknown`; `None` (and `out` untouched) when `text` is not ASCII.
    pub(crate) fn ids(&self, text: &str, unknown: u32, out: &mut Vec<u32>) -> Option<()> {
        if !text.is_ascii() {
            return None;
        }
        let mut word = String::new();
        for &b in text.as_bytes() {
            match b {
                b' ' | b'\t' | b'\n' | b'\r' => self.word(&mut word, unknown, out),
                // Control characters are dropped, joining what is around them.
                0..=0x1f | 0x7f => {}
                b if b.is_ascii_punctuation() => {
                    self.word(&mut word, unknown, out);
                    word.push(b as char);
                    self.word(&mut word, unknown, out);
                }
                b => word.push(b.to_ascii_lowercase() as char),
            }
        }
        self.word(&mut word, unknown, out);
        Some(())
    }

    /// The pieces of `word` (then cleared), longest match first; a word
    /// with a part no piece covers is one unknown token.
    fn word(&self, word: &mut String, unknown: u32, out: &mut Vec<u32>) {
        if word.is_empty() {
            return;
        }
        if word.len() > MAX_WORD {
            out.push(unknown);
            word.clear();
            return;
        }
        let mark = out.len();
        let mut start = 0;
        while start < word.len() {
            let map = if start == 0 { &self.starts } else { &self.continuations };
            let mut end = word.len().min(start + self.longest);
            let found = loop {
                if end == start {
                    break None;
                }
                if let Some(&id) = map.get(&word[start..end]) {
                    break Some(id);
                }
                end -= 1;
            };
            match found {
                Some(id) => {
                    out.push(id);
                    start = end;
                }
                None => {
                    out.truncate(mark);
                    out.push(unknown);
                    break;
                }
            }
        }
        word.clear();
    }
}
