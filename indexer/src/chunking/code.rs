//! Code structure: the top-level nodes of a tree-sitter parse.
//!
//! Split points are the root's named children of a few declaration types (or
//! every named child when there are none). A unit runs from its node's start
//! to the next unit's start, so comments and non-declaration statements
//! between declarations stay with the declaration before them; text before the
//! first unit is its own span. A file that does not parse cleanly, or whose
//! language has no grammar here, is not split structurally.

use std::cell::RefCell;
use std::collections::HashMap;

use tree_sitter::{Language, Node, Parser};

use super::Span;

/// Node types that are split points when any is present at the top level.
const STRUCTURAL_TYPES: [&str; 12] = [
    "class_declaration",
    "class_definition",
    "function_declaration",
    "function_definition",
    "method_declaration",
    "method_definition",
    "interface_declaration",
    "impl_item",
    "struct_item",
    "enum_item",
    "type_declaration",
    "lexical_declaration",
];

/// Child types that name a node when it has no `name` field.
const NAME_TYPES: [&str; 3] = ["identifier", "type_identifier", "property_identifier"];

/// Loads a grammar.
type LoadGrammar = fn() -> Language;

/// The grammars bundled here, by language name of the classification table: every language the
/// reference splits by syntax tree. Which revision each one is, and whether that is the one the
/// reference pins, is in the crate's README.
const GRAMMARS: [(&str, LoadGrammar); 24] = [
    ("bash", || tree_sitter_bash::LANGUAGE.into()),
    ("c", || tree_sitter_c::LANGUAGE.into()),
    ("cpp", || tree_sitter_cpp::LANGUAGE.into()),
    ("csharp", || tree_sitter_c_sharp::LANGUAGE.into()),
    ("css", || tree_sitter_css::LANGUAGE.into()),
    ("go", || tree_sitter_go::LANGUAGE.into()),
    ("html", || tree_sitter_html::LANGUAGE.into()),
    ("java", || tree_sitter_java::LANGUAGE.into()),
    ("javascript", || tree_sitter_javascript::LANGUAGE.into()),
    ("json", || tree_sitter_json::LANGUAGE.into()),
    ("kotlin", || rr_grammars::KOTLIN.into()),
    ("lua", || tree_sitter_lua::LANGUAGE.into()),
    ("php", || tree_sitter_php::LANGUAGE_PHP.into()),
    ("python", || rr_grammars::PYTHON.into()),
    ("ruby", || tree_sitter_ruby::LANGUAGE.into()),
    ("rust", || tree_sitter_rust::LANGUAGE.into()),
    ("sql", || tree_sitter_sequel::LANGUAGE.into()),
    ("swift", || tree_sitter_swift::LANGUAGE.into()),
    ("toml", || tree_sitter_toml_ng::LANGUAGE.into()),
    ("tsx", || tree_sitter_typescript::LANGUAGE_TSX.into()),
    ("typescript", || tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into()),
    ("vue", || rr_grammars::VUE.into()),
    ("xml", || tree_sitter_xml::LANGUAGE_XML.into()),
    ("yaml", || tree_sitter_yaml::LANGUAGE.into()),
];

/// The grammar for a language name of the classification table, if bundled.
pub fn grammar(language: &str) -> Option<Language> {
    GRAMMARS.iter().find(|(name, _)| *name == language).map(|(_, load)| load())
}

thread_local! {
    /// One parser per language and thread; creating a parser is not free.
    static PARSERS: RefCell<HashMap<&'static str, Parser>> = RefCell::new(HashMap::new());
}

pub(super) fn with_parser<T>(language: &str, f: impl FnOnce(&mut Parser) -> T) -> Option<T> {
    let (name, load) = GRAMMARS.iter().find(|(name, _)| *name == language)?;
    PARSERS.with(|parsers| {
        let mut parsers = parsers.borrow_mut();
        if !parsers.contains_key(name) {
            let mut parser = Parser::new();
            parser.set_language(&load()).ok()?;
            parsers.insert(name, parser);
        }
        parsers.get_mut(name).map(f)
    })
}

/// `type:name`, or the bare type when the node has no name.
pub(super) fn symbol(node: Node<'_>, source: &[u8]) -> String {
    let mut cursor = node.walk();
    let name = node
        .child_by_field_name("name")
        .or_else(|| node.named_children(&mut cursor).find(|child| NAME_TYPES.contains(&child.kind())));
    let value = name.map(|n| String::from_utf8_lossy(&source[n.start_byte()..n.end_byte()]).into_owned());
    match value {
        Some(value) if !value.is_empty() => format!("{}:{value}", node.kind()),
        _ => node.kind().to_owned(),
    }
}

/// Structural spans of `text`, or `None` when it cannot be split that way.
pub(crate) fn code_spans(text: &str, language: &str) -> Option<Vec<Span>> {
    let tree = with_parser(language, |parser| parser.parse(text, None))??;
    let root = tree.root_node();
    if root.has_error() {
        return None;
    }
    let mut cursor = root.walk();
    let children: Vec<Node<'_>> = root.named_children(&mut cursor).collect();
    let structural: Vec<Node<'_>> = children.iter().copied().filter(|n| STRUCTURAL_TYPES.contains(&n.kind())).collect();
    let nodes = if structural.is_empty() { children } else { structural };
    if nodes.is_empty() {
        return Some(vec![Span::new(0, text.len())]);
    }
    let source = text.as_bytes();
    let mut spans = Vec::new();
    let mut cursor = 0;
    for (index, node) in nodes.iter().enumerate() {
        let start = node.start_byte();
        let next_start = nodes.get(index + 1).map_or(text.len(), |next| next.start_byte());
        if !text.is_char_boundary(start) || !text.is_char_boundary(node.end_byte()) {
            return None;
        }
        if cursor < start {
            spans.push(Span::new(cursor, start));
        }
        let end = node.end_byte().max(next_start);
        spans.push(Span { start, end, section: String::new(), symbol: symbol(*node, source) });
        cursor = end;
    }
    if cursor < text.len() {
        spans.push(Span::new(cursor, text.len()));
    }
    Some(spans)
}
