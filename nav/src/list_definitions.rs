//! `list_definitions`: a repository's definitions ordered by file, line and
//! id, filtered, exact and unranked; `total` counts every match.

use serde::Serialize;

use super::catalog::DefinitionFilter;
use super::entities::{SIGNATURE_CHARS, cut};
use super::schema::Args;
use super::{NavService, ToolResult, pretty, repos};

#[derive(Serialize)]
struct Definition {
    entity_type: &'static str,
    entity_name: String,
    file_path: String,
    line_start: i64,
    line_end: i64,
    signature: Option<String>,
    description: Option<String>,
}

#[derive(Serialize)]
struct Output {
    repository: String,
    total: i64,
    definitions: Vec<Definition>,
}

pub fn call(nav: &NavService, args: &Args) -> ToolResult {
    let repo = repos::resolve_ready(nav, &args.str("repository").unwrap_or_default())?;
    let filter = DefinitionFilter {
        path_prefix: args.str("path_prefix"),
        entity_type: args.str("entity_type"),
        name: args.str("name"),
    };
    let (total, entities) =
        nav.catalogue().definitions(repo.id, &filter, args.int("limit").unwrap_or(100)).map_err(|e| e.to_string())?;
    let definitions = entities
        .into_iter()
        .map(|e| Definition {
            signature: Some(cut(&e.signature, SIGNATURE_CHARS)).filter(|s| !s.is_empty()),
            description: Some(cut(&e.description, SIGNATURE_CHARS)).filter(|s| !s.is_empty()),
            entity_type: e.entity_type,
            entity_name: e.entity_name,
            file_path: e.file_path,
            line_start: e.line_start,
            line_end: e.line_end,
        })
        .collect();
    Ok(pretty(&Output { repository: repo.name, total, definitions }))
}
