//! WordPiece for ASCII text, giving the same ids as the model's
//! `tokenizer.json` (BERT normaliser, lower-cased; BERT word splitting;
//! WordPiece with `##` continuations) at a fraction of its cost: no
//! normalisation pass, no offsets, no string allocated per piece. Most
//! source code is ASCII; other text goes through the `tokenizers` crate.
//! A test checks both agree on every chunk of the shared fixture
//! repositories.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A word longer than this many characters is one unknown token, as
/// WordPiece's `max_input_chars_per_word` says.
const MAX_WORD: usize = 100;

/// The pieces of the vocabulary, by text; the texts borrow the compiled-in
/// `tokenizer.json` where they need no unescaping.
type Pieces = HashMap<Cow<'static, str>, u32, BuildHasherDefault<PieceHasher>>;

pub(crate) struct AsciiWordPiece {
    /// Pieces that start a word.
    starts: Pieces,
    /// Pieces that continue one, without their `##`.
    continuations: Pieces,
    longest: usize,
}

impl AsciiWordPiece {
    /// From the vocabulary's (token, id) pairs.
    pub(crate) fn new(vocab: Vec<(Cow<'static, str>, u32)>) -> Self {
        let (mut starts, mut continuations) = (Pieces::default(), Pieces::default());
        let mut longest = 0;
        for (token, id) in vocab {
            let (map, piece) = match token {
                Cow::Borrowed(token) => match token.strip_prefix("##") {
                    Some(rest) => (&mut continuations, Cow::Borrowed(rest)),
                    None => (&mut starts, Cow::Borrowed(token)),
                },
                Cow::Owned(token) => match token.strip_prefix("##") {
                    Some(rest) => (&mut continuations, Cow::Owned(rest.to_owned())),
                    None => (&mut starts, Cow::Owned(token)),
                },
            };
            longest = longest.max(piece.len());
            map.insert(piece, id);
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

/// FxHash (rustc's hasher) over a piece's bytes: the pieces are the fixed
/// vocabulary and a few bytes long, where SipHash's start-up cost is most
/// of the look-up. Text can only probe the table, not grow it.
#[derive(Default)]
pub(crate) struct PieceHasher(u64);

impl Hasher for PieceHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
            self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
        }
        let mut tail = [0u8; 8];
        let rest = chunks.remainder();
        tail[..rest.len()].copy_from_slice(rest);
        self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(tail) ^ rest.len() as u64).wrapping_mul(K);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}
