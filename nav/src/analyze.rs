//! `analyze_repository`: measured counts and layout, no interpretation.

use std::collections::BTreeMap;

use serde::Serialize;

use super::schema::Args;
use super::{NavService, ToolResult, counts, pretty, repos};

/// Labels that are not programming languages, for the primary language.

#[derive(Serialize)]
struct Directory {
    directory: String,
    files: i64,
}

#[derive(Serialize)]
struct Largest {
    file_path: String,
    line_count: usize,
}

#[derive(Serialize)]
struct Output {
    repository: String,
    repository_id: i64,
    status: String,
    total_files: i64,
    processed_files: i64,
    total_lines: usize,
    total_entities: i64,
    entities_by_type: BTreeMap<String, i64>,
    files_by_language: BTreeMap<String, i64>,
    language: Option<String>,
    framework: Option<String>,
    top_directories: Vec<Directory>,
    largest_files: Vec<Largest>,
    definitions_by_language: BTreeMap<String, i64>,
}

pub fn call(nav: &NavService, args: &Args) -> ToolResult {
    let repo = repos::resolve_ready(nav, &args.str("repository").unwrap_or_default())?;
    let files = nav.files_of(&repo)?;
    let (by_type, by_language) = nav.catalogue().entity_counts(repo.id).map_err(|e| e.to_string())?;
    let dirs = counts(files.iter().map(|f| match f.path.split_once('/') {
        Some((d, _)) => d.to_owned(),
        None => "(root)".to_owned(),
    }));
    let mut top: Vec<Directory> = dirs.into_iter().map(|(directory, files)| Directory { directory, files }).collect();
    top.sort_by(|a, b| b.files.cmp(&a.files).then(a.directory.cmp(&b.directory)));
    top.truncate(10);
    let mut largest: Vec<Largest> =
        files.iter().map(|f| Largest { file_path: f.path.clone(), line_count: f.line_count }).collect();
    largest.sort_by(|a, b| b.line_count.cmp(&a.line_count).then(a.file_path.cmp(&b.file_path)));
    largest.truncate(10);
    Ok(pretty(&Output {
        repository: repo.name.clone(),
        repository_id: repo.id,
        status: repo.status.clone(),
        total_files: files.len() as i64,
        processed_files: repo.processed_files,
        total_lines: files.iter().map(|f| f.line_count).sum(),
        total_entities: repo.total_entities,
        entities_by_type: by_type.into_iter().collect(),
        files_by_language: counts(files.iter().map(|f| f.language.clone())),
        language: repo.language.clone(),
        framework: repo.framework.clone(),
        top_directories: top,
        largest_files: largest,
        definitions_by_language: by_language.into_iter().collect(),
    }))
}
