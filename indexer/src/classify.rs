//! Reading a file as text and deciding how it is chunked.

use std::borrow::Cow;
use std::fmt;

use chardetng::{EncodingDetector, Iso2022JpDetection, Utf8Detection};
use encoding_rs::{Encoding, UTF_16BE, UTF_16LE};

use crate::binary;

/// How a file is split into chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Heading sections, then blank-line blocks packed to the budget.
    Markdown,
    /// Top-level tree-sitter nodes of the file's language.
    Code,
    /// Token windows only.
    Generic,
}

impl Strategy {
    /// The `chunking_strategy` metadata value.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Markdown => "markdown",
            Strategy::Code => "code",
            Strategy::Generic => "generic",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The decoded, normalised text of a file and its classification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedFile {
    /// UTF-8 text without BOM, with CRLF and CR turned into LF.
    pub text: String,
    pub strategy: Strategy,
    /// `markdown`, the language for code, `text` otherwise.
    pub file_type: &'static str,
    /// The language for code, empty otherwise.
    pub language: &'static str,
}

const MARKDOWN_EXTENSIONS: [&str; 4] = [".md", ".markdown", ".mdown", ".mkd"];

/// The reference's extension → language table (extensions lowercase, with the dot).
pub fn language_for_extension(extension: &str) -> Option<&'static str> {
    Some(match extension {
        ".bash" | ".sh" => "bash",
        ".c" | ".h" => "c",
        ".cc" | ".cpp" | ".hpp" => "cpp",
        ".cs" => "csharp",
        ".css" => "css",
        ".go" => "go",
        ".html" => "html",
        ".java" => "java",
        ".js" | ".jsx" => "javascript",
        ".json" => "json",
        ".kt" | ".kts" => "kotlin",
        ".lua" => "lua",
        ".php" => "php",
        ".py" => "python",
        ".rb" => "ruby",
        ".rs" => "rust",
        ".sql" => "sql",
        ".swift" => "swift",
        ".toml" => "toml",
        ".ts" => "typescript",
        ".tsx" => "tsx",
        ".vue" => "vue",
        ".xml" => "xml",
        ".yaml" | ".yml" => "yaml",
        _ => return None,
    })
}

/// Classifies already-normalised text by the file's (lowercase) extension.
pub fn classify(text: String, extension: &str) -> DecodedFile {
    if MARKDOWN_EXTENSIONS.contains(&extension) {
        return DecodedFile { text, strategy: Strategy::Markdown, file_type: "markdown", language: "" };
    }
    match language_for_extension(extension) {
        Some(language) => DecodedFile { text, strategy: Strategy::Code, file_type: language, language },
        None => DecodedFile { text, strategy: Strategy::Generic, file_type: "text", language: "" },
    }
}

/// Decodes file bytes as the reference does, or `None` for a file that is
/// skipped: binary, or not decodable in the encoding it appears to be in.
///
/// UTF-8 (one leading BOM removed) is decoded exactly. UTF-16 with a byte-order
/// mark is decoded by that mark; its NUL bytes would otherwise make it binary.
/// For other bytes the reference takes `charset_normalizer`'s best match;
/// here `chardetng` (Firefox's detector) guesses the encoding and `encoding_rs`
/// decodes it strictly. Both pick Windows-1252 for Latin-1 text in Western
/// languages; for short or unusual text the two guessers can disagree, and
/// then the text (and the records) differ from the reference's.
pub fn decode(data: &[u8], extension: &str) -> Option<DecodedFile> {
    let text = decode_text(data)?;
    Some(classify(normalize_newlines(&text), extension))
}

fn decode_text(data: &[u8]) -> Option<Cow<'_, str>> {
    if let Some((encoding, bom_length)) = Encoding::for_bom(data)
        && (encoding == UTF_16LE || encoding == UTF_16BE)
    {
        return encoding.decode_without_bom_handling_and_without_replacement(&data[bom_length..]);
    }
    if binary::is_binary(data) {
        return None;
    }
    let data = data.strip_prefix(b"\xef\xbb\xbf").unwrap_or(data);
    if let Ok(text) = std::str::from_utf8(data) {
        return Some(Cow::Borrowed(text));
    }
    // ISO-2022-JP is 7-bit, so it was valid UTF-8 above; UTF-8 itself was ruled out there too.
    let mut detector = EncodingDetector::new(Iso2022JpDetection::Deny);
    detector.feed(data, true);
    let encoding = detector.guess(None, Utf8Detection::Deny);
    encoding.decode_without_bom_handling_and_without_replacement(data)
}

/// CRLF and lone CR become LF.
pub fn normalize_newlines(text: &str) -> String {
    if !text.contains('\r') {
        return text.to_owned();
    }
    text.replace("\r\n", "\n").replace('\r', "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bom_and_newlines_are_normalised() {
        let decoded = decode(b"\xef\xbb\xbf# Title\r\nBody\r", ".md").unwrap();
        assert_eq!(decoded.text, "# Title\nBody\n");
        assert_eq!(decoded.strategy, Strategy::Markdown);
        assert_eq!(decoded.file_type, "markdown");
        assert_eq!(decoded.language, "");
        // Only one BOM is removed, as with Python's utf-8-sig.
        let twice = decode(b"\xef\xbb\xbf\xef\xbb\xbfx", ".txt").unwrap();
        assert_eq!(twice.text, "\u{feff}x");
    }

    #[test]
    fn classification_follows_the_extension() {
        let code = classify(String::new(), ".tsx");
        assert_eq!((code.strategy, code.file_type, code.language), (Strategy::Code, "tsx", "tsx"));
        let text = classify(String::new(), ".txt");
        assert_eq!((text.strategy, text.file_type, text.language), (Strategy::Generic, "text", ""));
        let none = classify(String::new(), "");
        assert_eq!(none.strategy, Strategy::Generic);
    }

    #[test]
    fn nul_bytes_mean_binary() {
        assert!(decode(b"abc\x00def", ".bin").is_none());
    }

    #[test]
    fn latin1_falls_back_to_windows_1252() {
        let decoded = decode(b"caf\xe9 \x80 na\xefve text here", ".txt").unwrap();
        assert_eq!(decoded.text, "café € naïve text here");
        let french = b"/* Rapport journalier : quantit\xe9s re\xe7ues, \xe9carts et d\xe9p\xf4ts fran\xe7ais. */\n";
        assert_eq!(
            decode(french, ".c").unwrap().text,
            "/* Rapport journalier : quantités reçues, écarts et dépôts français. */\n"
        );
    }

    #[test]
    fn utf16_with_a_bom_is_decoded_despite_its_nul_bytes() {
        let text = "# Überblick\r\nZeile zwei\r\n";
        let le: Vec<u8> = [0xff, 0xfe].into_iter().chain(text.encode_utf16().flat_map(u16::to_le_bytes)).collect();
        let be: Vec<u8> = [0xfe, 0xff].into_iter().chain(text.encode_utf16().flat_map(u16::to_be_bytes)).collect();
        for data in [le, be] {
            let decoded = decode(&data, ".md").unwrap();
            assert_eq!(decoded.text, "# Überblick\nZeile zwei\n");
            assert_eq!(decoded.strategy, Strategy::Markdown);
        }
        // An unpaired surrogate cannot be decoded: the file is skipped, not mangled.
        assert!(decode(&[0xff, 0xfe, b'a', 0, 0x00, 0xd8, b'b', 0], ".txt").is_none());
        // Without a BOM, NUL bytes still mean binary.
        assert!(decode(&[b'a', 0, b'b', 0], ".txt").is_none());
    }
}
