//! Tree-sitter grammars vendored from their repositories at fixed revisions.
//!
//! The indexer's records must equal the reference indexer's, and the reference parses with the
//! grammar revisions its grammar pack (tree-sitter-language-pack 1.14.3) pins. Most of those
//! revisions are crates.io releases and come in as ordinary dependencies of `rr-indexer`; the
//! grammars here are the ones whose pinned (or nearest obtainable) revision has no release:
//!
//! | grammar | repository | revision | pinned revision |
//! |---|---|---|---|
//! | kotlin | fwcd/tree-sitter-kotlin | e1a2d5a (release 0.3.8, 2024-08) | c8ac3d2, which no published history holds; 0.3.8 is the grammar's newest release |
//! | python | tree-sitter/tree-sitter-python | 26855ea ("mark `expression_statement` as a supertype") | 26855ea (the pin) |
//! | vue | tree-sitter-grammars/tree-sitter-vue | 22bdfa6 (2024-03-26) | ce8011a, which no published history holds |
//!
//! Each folder holds the generated `src/parser.c`, the external scanner and the `tree_sitter/`
//! headers exactly as they are at that revision, and the grammar's LICENSE (MIT).
//! `scripts/vendor-grammar` copies them from a clone.

use tree_sitter_language::LanguageFn;

// The generated parsers' entry points; each returns a pointer to a static `TSLanguage`.
#[allow(unsafe_code)]
unsafe extern "C" {
    fn tree_sitter_kotlin() -> *const ();
    fn tree_sitter_python() -> *const ();
    fn tree_sitter_vue() -> *const ();
}

/// Kotlin (fwcd's grammar, the one the reference uses) at e1a2d5a. Its crates.io release binds
/// a tree-sitter older than 0.23, so only its generated parser is taken.
// SAFETY: as for PYTHON, with kotlin/src/parser.c.
#[allow(unsafe_code)]
pub const KOTLIN: LanguageFn = unsafe { LanguageFn::from_raw(tree_sitter_kotlin) };

/// Python at 26855ea: `expression_statement` is a supertype, so a module-level statement's node is
/// the inner `assignment`, `call` or `string`.
// SAFETY: the function is the C entry point that build.rs compiles from python/src/parser.c; it
// takes no argument and returns a pointer to a static language table, which is what `from_raw` needs.
#[allow(unsafe_code)]
pub const PYTHON: LanguageFn = unsafe { LanguageFn::from_raw(tree_sitter_python) };

/// Vue at 22bdfa6.
// SAFETY: as for PYTHON, with vue/src/parser.c.
#[allow(unsafe_code)]
pub const VUE: LanguageFn = unsafe { LanguageFn::from_raw(tree_sitter_vue) };

#[cfg(test)]
mod tests {
    use tree_sitter::{Language, Parser};

    fn parse(language: Language, text: &str) -> String {
        let mut parser = Parser::new();
        parser.set_language(&language).expect("the runtime accepts the grammar's ABI");
        parser.parse(text, None).expect("a parse tree").root_node().to_sexp()
    }

    #[test]
    fn python_statements_are_named_after_the_inner_node() {
        let tree = parse(super::PYTHON.into(), "WAREHOUSES = 3\nsetup()\n");
        assert_eq!(
            tree,
            "(module (assignment left: (identifier) right: (integer)) (call function: (identifier) arguments: (argument_list)))"
        );
    }

    #[test]
    fn vue_parses_a_component() {
        let tree =
            parse(super::VUE.into(), "<template><p>{{ n }}</p></template>\n<script>export default {}</script>\n");
        assert_eq!(
            tree,
            "(document (template_element (start_tag (tag_name)) (element (start_tag (tag_name)) (interpolation \
             (raw_text)) (end_tag (tag_name))) (end_tag (tag_name))) (script_element (start_tag (tag_name)) \
             (raw_text) (end_tag (tag_name))))"
        );
    }

    #[test]
    fn kotlin_is_fwcds_grammar() {
        // fwcd's grammar names functions with a `simple_identifier` child, not a `name` field.
        let tree = parse(super::KOTLIN.into(), "fun Money.isZero() = cents == 0L\n");
        assert!(!tree.contains("ERROR"), "{tree}");
        assert!(
            tree.starts_with("(source_file (function_declaration (user_type (type_identifier)) (simple_identifier)"),
            "{tree}"
        );
    }
}
