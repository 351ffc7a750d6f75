//! Which of the chunker's tree-sitter node types are definitions: the
//! navigation tools' entity types and the generated query sets read the same
//! classification.

/// The entity type of a tree-sitter node type, and the word used in
/// descriptions; `None` for nodes that are not definitions.
pub fn entity_type_of(node_type: &str) -> Option<(&'static str, &'static str)> {
    Some(match node_type {
        "function_declaration" | "function_definition" | "function_item" | "arrow_function" => ("function", "function"),
        "method_declaration" | "method_definition" => ("function", "method"),
        "class_declaration" | "class_definition" => ("class", "class"),
        "interface_declaration" => ("class", "interface"),
        "type_declaration" | "type_alias_declaration" | "type_item" => ("class", "type"),
        "struct_item" => ("class", "struct"),
        "enum_item" | "enum_declaration" => ("class", "enum"),
        "trait_item" => ("class", "trait"),
        "impl_item" => ("class", "impl"),
        "import_statement" | "import_from_statement" | "import_declaration" | "use_declaration" => ("import", "import"),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_are_classified_and_other_nodes_are_not() {
        assert_eq!(entity_type_of("function_declaration").unwrap().0, "function");
        assert_eq!(entity_type_of("class_definition").unwrap().0, "class");
        assert_eq!(entity_type_of("import_from_statement").unwrap().0, "import");
        assert_eq!(entity_type_of("method_definition"), Some(("function", "method")));
        assert_eq!(entity_type_of("expression_statement"), None);
    }
}
