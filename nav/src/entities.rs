//! Definitions derived from the index: the chunker's code symbols
//! (`<node_type>:<name>`) and Markdown sections become the seed's five
//! entity types (`function`, `class`, `import`, `doc_section`,
//! `terraform_block`). The mapping is documented in `docs/tools.md`.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use rr_core::Metadata;
use rr_indexer::entity_type_of;

pub const ENTITY_TYPES: [&str; 5] = ["function", "class", "import", "doc_section", "terraform_block"];

/// Signatures and descriptions are cut here.
pub const SIGNATURE_CHARS: usize = 300;
/// Search snippets are cut here.
pub const SNIPPET_CHARS: usize = 600;
/// At most this much of an entity's body is stored.
pub const BODY_CHARS: usize = 2000;

/// One entity, as stored in the catalogue.
#[derive(Debug, Clone, PartialEq)]
pub struct Entity {
    pub entity_type: &'static str,
    pub entity_name: String,
    pub file_path: String,
    pub line_start: i64,
    pub line_end: i64,
    pub language: String,
    pub signature: String,
    pub body: String,
    pub description: String,
    pub is_test: bool,
}

impl Entity {
    /// Classes first, then functions and Terraform blocks, then doc
    /// sections, then imports (the order of ties in `search_code`).
    pub fn rank_weight(&self) -> i64 {
        match self.entity_type {
            "class" => 0,
            "function" | "terraform_block" => 1,
            "doc_section" => 2,
            _ => 3,
        }
    }
}

static UNNAMED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^\s*(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:abstract\s+)?(?:async\s+)?(function\*?|class|interface|type|enum|const|let|var)\s+([A-Za-z_$][\w$]*)",
    )
    .expect("valid regex")
});

static GO_RECEIVER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*func\s*\(\s*\w*\s*\*?\s*([A-Za-z_]\w*)").expect("valid regex"));

/// The entity of a node whose symbol has no name (`type_declaration`,
/// `export_statement`, `lexical_declaration`), read from its first line.
fn unnamed(node_type: &str, first_line: &str) -> Option<(&'static str, &'static str, String)> {
    let caps = UNNAMED.captures(first_line)?;
    let name = caps[2].to_owned();
    let keyword = &caps[1];
    let (kind, word) = match keyword {
        "class" => ("class", "class"),
        "interface" => ("class", "interface"),
        "type" => ("class", "type"),
        "enum" => ("class", "enum"),
        "const" | "let" | "var" => {
            // A variable is a definition only when it holds a function.
            if first_line.contains("=>") || first_line.contains("function") {
                ("function", "function")
            } else {
                return None;
            }
        }
        _ => ("function", "function"),
    };
    let _ = node_type;
    Some((kind, word, name))
}

/// The label used in descriptions: `TypeScript`, `Python`, ….
pub fn language_title(language: &str) -> String {
    match language {
        "typescript" => "TypeScript".into(),
        "javascript" => "JavaScript".into(),
        "csharp" => "C#".into(),
        "cpp" => "C++".into(),
        "php" => "PHP".into(),
        "hcl" | "terraform" => "Terraform".into(),
        other => {
            let mut c = other.chars();
            c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default()
        }
    }
}

/// The file's language label: the chunk's language, else its file type.
pub fn label(meta: &Metadata) -> String {
    if meta.language.is_empty() { meta.file_type.clone() } else { meta.language.clone() }
}

/// Whether a path is a test file (these rank after source files).
pub fn is_test_path(path: &str) -> bool {
    rr_core::PathClass::of(path) == rr_core::PathClass::Test
}

/// Cuts `s` to at most `n` characters.
pub fn cut(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => s[..i].to_owned(),
        None => s.to_owned(),
    }
}

/// The lines of a stored text, without their line ends (`\r\n` or `\n`).
pub fn lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    body.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect()
}

/// Entities of one file from its chunks (in chunk order) and its text.
/// Consecutive chunks of one symbol whose line ranges overlap are the
/// token-split pieces of one node and become one entity; consecutive chunks
/// of one Markdown section become one `doc_section`.
pub fn file_entities(chunks: &[&Metadata], text: &str) -> Vec<Entity> {
    let all = lines(text);
    let mut groups: Vec<Group> = Vec::new();
    for m in chunks {
        if m.symbol.is_empty() && m.section.is_empty() {
            continue;
        }
        if let Some(last) = groups.last_mut()
            && last.0 == m.symbol
            && last.1 == m.section
            && (m.start_line <= last.3 || (m.symbol.is_empty() && m.start_line <= last.3 + 1))
        {
            last.3 = last.3.max(m.end_line);
            continue;
        }
        groups.push((m.symbol.clone(), m.section.clone(), m.start_line, m.end_line, (*m).clone()));
    }
    let mut out = Vec::new();
    for (symbol, section, start, end, meta) in groups.into_iter().flat_map(|group| split_merged(group, &all)) {
        let language = label(&meta);
        let path = meta.path.clone();
        // Ranges run up to the next node: leave trailing blank lines out.
        let mut end = end.min(all.len() as i64).max(start);
        // A code node's range also holds the comment above the next node.
        let trailing = |l: &str| l.trim().is_empty() || (!symbol.is_empty() && is_comment_line(l));
        while end > start && all.get(end as usize - 1).is_some_and(|l| trailing(l)) {
            end -= 1;
        }
        // A semantic (version 3) chunk starts at the declaration's doc
        // comment, attributes or decorators: the definition starts after them.
        let mut start = start;
        if !symbol.is_empty() {
            while start < end && all.get(start as usize - 1).is_some_and(|l| is_leading_line(l)) {
                start += 1;
            }
        }
        let slice = |a: i64, b: i64| -> String {
            let a = (a.max(1) - 1) as usize;
            let b = (b.max(0) as usize).min(all.len());
            if a >= b { String::new() } else { all[a..b].join("\n") }
        };
        let first_line = all.get((start.max(1) - 1) as usize).copied().unwrap_or("");
        let (entity_type, entity_name, description) = if symbol.is_empty() {
            let name = section.rsplit(" > ").next().unwrap_or(&section).trim().to_owned();
            ("doc_section", name, format!("Markdown section: {section}"))
        } else {
            let (node_type, name) = symbol.split_once(':').unwrap_or((symbol.as_str(), ""));
            let found = match (entity_type_of(node_type), name.is_empty()) {
                (Some((kind, word)), false) => Some((kind, word, name.to_owned())),
                _ => unnamed(node_type, first_line),
            };
            let Some((kind, word, name)) = found else { continue };
            let mut qualified = name.clone();
            if node_type == "method_declaration"
                && let Some(c) = GO_RECEIVER.captures(first_line)
            {
                qualified = format!("{}.{name}", &c[1]);
            }
            (kind, name, format!("{} {word}: {qualified}", language_title(&language)))
        };
        out.push(Entity {
            entity_type,
            entity_name,
            is_test: is_test_path(&path),
            file_path: path,
            line_start: start,
            line_end: end,
            language,
            signature: cut(first_line.trim_end(), SIGNATURE_CHARS),
            body: cut(&slice(start, end), BODY_CHARS),
            description: cut(&description, SIGNATURE_CHARS),
        });
    }
    out
}

/// A comment line, or a line inside a block comment.
fn is_comment_line(line: &str) -> bool {
    let t = line.trim();
    t.starts_with("//") || t.starts_with('#') || t.starts_with("/*") || t.starts_with('*')
}

/// What may come before a declaration in its chunk: blank and comment lines,
/// attributes (`#[...]`, which look like comments here) and decorators.
fn is_leading_line(line: &str) -> bool {
    line.trim().is_empty() || is_comment_line(line) || line.trim_start().starts_with('@')
}

/// Whether `line` holds `name` as a whole identifier.
fn has_identifier(line: &str, name: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    line.match_indices(name).any(|(at, _)| {
        !line[..at].chars().next_back().is_some_and(ident) && !line[at + name.len()..].chars().next().is_some_and(ident)
    })
}

/// A group of one chunk of the semantic chunking that merged small units
/// (`symbol` lists them, `", "`-joined), cut into one group per unit: each
/// starts at the first code line at or after the previous one's that names it.
fn split_merged(group: Group, all: &[&str]) -> Vec<Group> {
    let (symbol, section, start, end, meta) = group;
    if !symbol.contains(", ") {
        return vec![(symbol, section, start, end, meta)];
    }
    let mut starts = Vec::new();
    let mut from = start;
    for unit in symbol.split(", ") {
        let name = unit.split_once(':').map_or("", |(_, name)| name);
        let found = (from..=end).find(|&l| {
            all.get((l.max(1) - 1) as usize)
                .is_some_and(|line| !is_leading_line(line) && (name.is_empty() || has_identifier(line, name)))
        });
        let at = found.unwrap_or(from);
        starts.push((unit.to_owned(), at));
        from = (at + 1).min(end);
    }
    let mut groups = Vec::with_capacity(starts.len());
    for (index, (unit, at)) in starts.iter().enumerate() {
        let until = starts.get(index + 1).map_or(end, |(_, next)| (next - 1).max(*at));
        groups.push((unit.clone(), section.clone(), *at, until, meta.clone()));
    }
    groups
}

/// Chunks of one entity: symbol, section, first and last line, the first chunk's metadata.
type Group = (String, String, i64, i64, Metadata);

/// Entities of a namespace from all its chunk metadata and a text lookup.
pub fn namespace_entities<'a>(metadata: &[Metadata], text_of: impl Fn(&str) -> Option<&'a str>) -> Vec<Entity> {
    let mut by_path: HashMap<&str, Vec<&Metadata>> = HashMap::new();
    let mut order = Vec::new();
    for m in metadata {
        by_path
            .entry(m.path.as_str())
            .or_insert_with(|| {
                order.push(m.path.as_str());
                Vec::new()
            })
            .push(m);
    }
    let mut out = Vec::new();
    for path in order {
        let mut chunks = by_path.remove(path).unwrap_or_default();
        chunks.sort_by_key(|m| m.chunk_index);
        out.extend(file_entities(&chunks, text_of(path).unwrap_or("")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(symbol: &str, start_line: i64, end_line: i64) -> Metadata {
        Metadata {
            path: "src/lib.rs".into(),
            language: "rust".into(),
            file_type: "rust".into(),
            symbol: symbol.into(),
            start_line,
            end_line,
            ..Metadata::default()
        }
    }

    #[test]
    fn semantic_chunks_give_one_definition_per_unit_starting_at_its_code() {
        let text = "//! Docs.\n\n/// Parsing.\npub fn parse() {}\n/// The answer.\npub const ANSWER: u32 = 42;\n\n/// A point.\n#[derive(Debug)]\npub struct Point {\n    x: i32,\n}\n";
        let merged = chunk("function_item:parse, const_item:ANSWER", 1, 7);
        let point = chunk("struct_item:Point", 8, 12);
        let entities = file_entities(&[&merged, &point], text);
        let got: Vec<(&str, i64, i64, &str)> =
            entities.iter().map(|e| (e.entity_name.as_str(), e.line_start, e.line_end, e.signature.as_str())).collect();
        assert_eq!(
            got,
            [("parse", 4, 4, "pub fn parse() {}"), ("Point", 10, 12, "pub struct Point {")],
            "the constant is no definition; the doc comments and the attribute are not the signature"
        );
    }

    #[test]
    fn unnamed_nodes_test_paths_and_lines_are_read() {
        assert_eq!(unnamed("type_declaration", "type Store struct {").unwrap().2, "Store");
        assert_eq!(unnamed("export_statement", "export async function go(x) {").unwrap().0, "function");
        assert_eq!(unnamed("export_statement", "export const x = 5;"), None);
        assert!(is_test_path("internal/store/store_test.go"));
        assert!(!is_test_path("internal/store/store.go"));
        assert_eq!(lines("a\r\nb\n"), vec!["a", "b"]);
        assert_eq!(cut("héllo", 2), "hé");
    }
}
