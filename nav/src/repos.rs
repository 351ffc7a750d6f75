//! `list_repositories`, the repository argument's resolution and readiness
//! check, and the two resources.

use serde::Serialize;
use serde_json::json;

use super::catalog::Repository;
use super::{NavService, SCHEME, ToolResult, pretty};
use crate::limits::{MAX_URL_CHARS, shown};

#[derive(Serialize)]
struct RepositoryList {
    repositories: Vec<Repository>,
}

pub fn list_repositories(nav: &NavService) -> ToolResult {
    let _ = nav.refresh();
    let repositories = nav.catalogue().repositories().map_err(|e| e.to_string())?;
    Ok(pretty(&RepositoryList { repositories }))
}

/// The URL path of a repository (`owner/name`, `group/sub/project`) and its
/// host, lower-cased.
fn url_parts(url: &str) -> Option<(String, String)> {
    let rest = url.split_once("://")?.1;
    let (host, path) = rest.split_once('/')?;
    Some((host.to_ascii_lowercase(), path.trim_end_matches('/').trim_end_matches(".git").to_ascii_lowercase()))
}

/// Resolves the `repository` argument (trimmed; all digits → id only;
/// otherwise case-insensitive name or URL path), without the readiness check.
pub fn resolve(nav: &NavService, text: &str) -> Result<Repository, String> {
    let text = text.trim();
    let repos = nav.catalogue().repositories().map_err(|e| e.to_string())?;
    let not_found = || {
        let names: Vec<&str> = repos.iter().map(|r| r.name.as_str()).collect();
        let available = if names.is_empty() { "none indexed yet".to_owned() } else { names.join(", ") };
        format!("Repository '{}' not found. Available repositories: {available}", shown(text))
    };
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        if text.len() > 19 {
            return Err(not_found());
        }
        let id: i64 = text.parse().map_err(|_| not_found())?;
        return repos.iter().find(|r| r.id == id).cloned().ok_or_else(not_found);
    }
    let lower = text.to_lowercase();
    let matches: Vec<&Repository> = repos
        .iter()
        .filter(|r| {
            let name = r.name.to_lowercase();
            if name == lower || format!("{name}@{}", r.index_branch.to_lowercase()) == lower {
                return true;
            }
            match r.url.as_deref().and_then(url_parts) {
                Some((host, path)) => {
                    let url = r.url.as_deref().unwrap_or("").to_lowercase();
                    path == lower
                        || format!("{host}/{path}") == lower
                        || url == lower
                        || url.trim_end_matches(".git") == lower
                }
                None => false,
            }
        })
        .collect();
    match matches.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(not_found()),
        many => {
            let list: Vec<String> = many.iter().map(|r| format!("{} (id {})", r.name, r.id)).collect();
            Err(format!("Repository '{}' is ambiguous: {}. Use the numeric ID.", shown(text), list.join(", ")))
        }
    }
}

/// Resolves and checks that the repository is completed.
pub fn resolve_ready(nav: &NavService, text: &str) -> Result<Repository, String> {
    let repo = resolve(nav, text)?;
    ready(&repo)?;
    Ok(repo)
}

/// The readiness messages.
pub fn ready(repo: &Repository) -> Result<(), String> {
    match repo.status.as_str() {
        "completed" => Ok(()),
        "failed" => {
            let detail =
                repo.error_message.as_deref().filter(|m| !m.is_empty()).map(|m| format!(": {m}")).unwrap_or_default();
            Err(format!(
                "Repository '{}' failed to index{detail}. Reprocess it with add_repository or `repo-retriever index`.",
                repo.name
            ))
        }
        _ => {
            let progress = if repo.total_files > 0 {
                format!(" ({}/{} files)", repo.processed_files, repo.total_files)
            } else {
                String::new()
            };
            Err(format!("Repository '{}' is still indexing{progress}; try again when it completes.", repo.name))
        }
    }
}

/// A resource read failure, worded as the JSON-RPC error message.
pub fn resource_error(detail: &str) -> String {
    format!("Resource or repository not found: {detail}")
}

pub fn repositories_uri() -> String {
    format!("{SCHEME}://repositories")
}

/// `resources/list`.
pub fn resources_list() -> serde_json::Value {
    json!({"resources": [{
        "uri": repositories_uri(),
        "name": "Repositories",
        "description": "Every repository with status and size (the list_repositories result)",
        "mimeType": "application/json"
    }]})
}

/// `resources/templates/list`.
pub fn resource_templates() -> serde_json::Value {
    json!({"resourceTemplates": [{
        "uriTemplate": format!("{SCHEME}://repositories/{{id}}/files"),
        "name": "Repository files",
        "description": "The stored files of one repository (numeric id): path, language and line count, by path; at most 5,000",
        "mimeType": "application/json"
    }]})
}

/// Most files listed by the files resource.
pub const FILES_RESOURCE_CAP: usize = 5000;

#[derive(Serialize)]
struct FilesResource<'a> {
    repository: &'a str,
    total_files: usize,
    truncated: bool,
    files: Vec<FileRow<'a>>,
}

#[derive(Serialize)]
struct FileRow<'a> {
    file_path: &'a str,
    language: &'a str,
    line_count: usize,
}

/// `resources/read`: the JSON text, or the detail of a not-found error.
pub fn read_resource(nav: &NavService, uri: &str) -> Result<String, String> {
    if uri == repositories_uri() {
        return list_repositories(nav).map_err(|e| resource_error(&e));
    }
    if uri.chars().count() > MAX_URL_CHARS {
        return Err(resource_error(&format!("the uri is too long: at most {MAX_URL_CHARS} characters")));
    }
    let unknown = || resource_error(&format!("Unknown resource '{}'", shown(uri)));
    let id_text = uri
        .strip_prefix(&format!("{SCHEME}://repositories/"))
        .and_then(|r| r.strip_suffix("/files"))
        .filter(|id| !id.is_empty() && id.len() <= 19 && id.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(unknown)?;
    let missing = || resource_error(&format!("Repository {id_text} not found"));
    let id: i64 = id_text.parse().map_err(|_| missing())?;
    nav.sync_source()?;
    let repo = nav.catalogue().repository(id).map_err(|e| e.to_string())?.ok_or_else(missing)?;
    let files = if repo.status == "completed" { Some(nav.files_of(&repo)?) } else { None };
    let rows: Vec<FileRow<'_>> = match &files {
        Some(files) => files
            .iter()
            .take(FILES_RESOURCE_CAP)
            .map(|f| FileRow { file_path: &f.path, language: &f.language, line_count: f.line_count })
            .collect(),
        None => Vec::new(),
    };
    let total = match &files {
        Some(files) => files.len(),
        None => nav.source().file_count(&repo.namespace_id)?,
    };
    Ok(pretty(&FilesResource {
        repository: &repo.name,
        total_files: total,
        truncated: total > FILES_RESOURCE_CAP,
        files: rows,
    }))
}
