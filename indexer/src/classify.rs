//! Reading a file as text and deciding how it is chunked.

use std::fmt;

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

/// Decodes file bytes as the reference does, or `None` for a binary file.
///
/// UTF-8 (one leading BOM removed) is decoded exactly. The reference falls
/// back to `charset_normalizer`'s best guess for other bytes; that guesser is
/// not reproduced: such files are read as Windows-1252 instead, so their text
/// (and records) may differ from the reference's.
pub fn decode(data: &[u8], extension: &str) -> Option<DecodedFile> {
    if binary::is_binary(data) {
        return None;
    }
    let data = data.strip_prefix(b"\xef\xbb\xbf").unwrap_or(data);
    let text = match std::str::from_utf8(data) {
        Ok(text) => normalize_newlines(text),
        Err(_) => normalize_newlines(&windows_1252(data)),
    };
    Some(classify(text, extension))
}

/// CRLF and lone CR become LF.
pub fn normalize_newlines(text: &str) -> String {
    if !text.contains('\r') {
        return text.to_owned();
    }
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// Windows-1252, with its five unassigned bytes mapped to the C1 controls.
fn windows_1252(data: &[u8]) -> String {
    const HIGH: [char; 32] = [
        '€', '\u{81}', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', '\u{8d}', 'Ž', '\u{8f}', '\u{90}', '‘',
        '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', '\u{9d}', 'ž', 'Ÿ',
    ];
    data.iter().map(|&b| if (0x80..0xa0).contains(&b) { HIGH[usize::from(b - 0x80)] } else { char::from(b) }).collect()
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
    }
}
