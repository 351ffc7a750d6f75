//! `search_code`: FTS5 BM25 over the catalogue's definitions.
//!
//! The query's words must all match; when nothing matches every word, any
//! word may (the seed's "drop words that miss"). A word also matches as the
//! run of camelCase parts it is made of, so `WithState` finds
//! `TestShallowWithState`. Words are quoted, so input cannot add FTS5
//! operators; filters are bound parameters.

use serde::Serialize;

use super::catalog::{Repository, split_identifier};
use super::entities::{SIGNATURE_CHARS, SNIPPET_CHARS, cut};
use super::schema::Args;
use super::{NavService, ToolResult, pretty, repos};

/// Longest query, in bytes of UTF-8.
pub const MAX_QUERY_BYTES: usize = 512;

const STOP_WORDS: [&str; 24] = [
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "how", "in", "is", "it", "of", "on", "or", "the",
    "to", "was", "what", "where", "which", "with",
];

#[derive(Serialize)]
struct Hit {
    entity_name: String,
    entity_type: &'static str,
    file_path: String,
    line_start: i64,
    line_end: i64,
    language: String,
    signature: Option<String>,
    snippet: String,
    description: Option<String>,
    url: Option<String>,
}

#[derive(Serialize)]
struct Output {
    query: String,
    repository: Option<String>,
    total_hits: i64,
    page: i64,
    pages: i64,
    results: Vec<Hit>,
}

/// FTS5 queries for the text: every word required, then any word.
pub fn fts_queries(query: &str) -> Option<(String, String)> {
    let words: Vec<&str> = query.split(|c: char| !c.is_alphanumeric() && c != '_').filter(|w| !w.is_empty()).collect();
    let significant: Vec<&str> =
        words.iter().copied().filter(|w| !STOP_WORDS.contains(&w.to_lowercase().as_str())).collect();
    let words = if significant.is_empty() { words } else { significant };
    let terms: Vec<String> = words
        .iter()
        .map(|w| {
            let whole = format!("\"{}\"", w.to_lowercase());
            let parts = split_identifier(w);
            let mut alts = vec![whole.clone()];
            if parts.len() > 1 {
                alts.push(format!("\"{}\"", parts.concat()));
                alts.push(format!("({})", parts.iter().map(|p| format!("\"{p}\"")).collect::<Vec<_>>().join(" AND ")));
            }
            // Plurals: `widgets` also finds `widget`.
            if w.len() > 3 && w.to_lowercase().ends_with('s') {
                alts.push(format!("\"{}\"", &w.to_lowercase()[..w.len() - 1]));
            }
            if alts.len() == 1 { whole } else { format!("({})", alts.join(" OR ")) }
        })
        .collect();
    if terms.is_empty() {
        return None;
    }
    Some((terms.join(" AND "), terms.join(" OR ")))
}

fn encode_path(path: &str) -> String {
    const SEGMENT: &percent_encoding::AsciiSet =
        &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');
    path.split('/').map(|s| percent_encoding::utf8_percent_encode(s, SEGMENT).to_string()).collect::<Vec<_>>().join("/")
}

/// A source link at the exact lines, in the host's format; `None` for
/// hosts without a known format or repositories without a URL.
pub fn source_url(repo: &Repository, file: &str, start: i64, end: i64) -> Option<String> {
    let url = repo.url.as_deref()?;
    let rest = url.split_once("://")?.1;
    let (host, path) = rest.split_once('/')?;
    let host = host.to_ascii_lowercase();
    let path = path.trim_end_matches('/').trim_end_matches(".git");
    let reference = repo
        .commit_sha
        .clone()
        .filter(|s| !s.is_empty())
        .or_else(|| repo.branch.clone().filter(|b| !b.is_empty()))
        .unwrap_or_else(|| "HEAD".into());
    let reference = encode_path(&reference);
    let file = encode_path(file);
    if host == "github.com" {
        Some(format!("https://github.com/{path}/blob/{reference}/{file}#L{start}-L{end}"))
    } else if host == "gitlab.com" || host.starts_with("gitlab.") {
        Some(format!("https://{host}/{path}/-/blob/{reference}/{file}#L{start}-{end}"))
    } else if host == "bitbucket.org" {
        Some(format!("https://bitbucket.org/{path}/src/{reference}/{file}#lines-{start}:{end}"))
    } else {
        None
    }
}

pub fn call(nav: &NavService, args: &Args) -> ToolResult {
    let query = args.str("query").unwrap_or_default();
    if query.len() > MAX_QUERY_BYTES {
        return Err(format!(
            "Invalid arguments for 'search_code': query is too long; the limit is {MAX_QUERY_BYTES} bytes"
        ));
    }
    let repo = match args.str("repository") {
        Some(r) => Some(repos::resolve_ready(nav, &r)?),
        None => None,
    };
    let limit = args.int("limit").unwrap_or(10);
    let page = args.int("page").unwrap_or(0);
    let language = args.str("language");
    let entity_type = args.str("entity_type");
    let (total, hits) = match fts_queries(&query) {
        None => (0, Vec::new()),
        Some((all, any)) => {
            let catalogue = nav.catalogue();
            let run = |q: &str| {
                catalogue.search(
                    q,
                    repo.as_ref().map(|r| r.id),
                    language.as_deref(),
                    entity_type.as_deref(),
                    limit,
                    page.saturating_mul(limit),
                )
            };
            let unavailable = |e: rusqlite::Error| {
                tracing::warn!(error = %e, "search_code query failed");
                "Search is unavailable; try again later.".to_owned()
            };
            let first = run(&all).map_err(unavailable)?;
            if first.0 == 0 && all != any { run(&any).map_err(unavailable)? } else { first }
        }
    };
    let repositories = if repo.is_some() { Vec::new() } else { nav.catalogue().repositories().unwrap_or_default() };
    let results = hits
        .into_iter()
        .map(|h| {
            let owner = repo.as_ref().or_else(|| repositories.iter().find(|r| r.id == h.repo_id));
            let e = h.entity;
            Hit {
                url: owner.and_then(|r| source_url(r, &e.file_path, e.line_start, e.line_end)),
                signature: Some(cut(&e.signature, SIGNATURE_CHARS)).filter(|s| !s.is_empty()),
                snippet: cut(&e.body, SNIPPET_CHARS),
                description: Some(cut(&e.description, SIGNATURE_CHARS)).filter(|s| !s.is_empty()),
                entity_name: e.entity_name,
                entity_type: e.entity_type,
                file_path: e.file_path,
                line_start: e.line_start,
                line_end: e.line_end,
                language: e.language,
            }
        })
        .collect();
    Ok(pretty(&Output {
        query,
        repository: repo.map(|r| r.name),
        total_hits: total,
        page,
        pages: (total + limit - 1) / limit,
        results,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_quoted_and_split() {
        let (all, any) = fts_queries("WithState \"x\" OR y").unwrap();
        assert_eq!(all, "(\"withstate\" OR \"withstate\" OR (\"with\" AND \"state\")) AND \"x\" AND \"y\"");
        assert!(any.contains(" OR \"y\""));
        assert_eq!(fts_queries("  ()  "), None);
    }

    #[test]
    fn source_links_in_the_three_host_formats() {
        let repo = |url: &str| Repository {
            id: 1,
            name: String::new(),
            url: Some(url.into()),
            branch: None,
            commit_sha: None,
            status: "completed".into(),
            total_files: 0,
            total_entities: 0,
            error_message: None,
            processed_at: None,
            namespace_id: String::new(),
            index_branch: String::new(),
            processed_files: 0,
            language: None,
            framework: None,
            fingerprint: String::new(),
            managed: false,
        };
        assert_eq!(
            source_url(&repo("https://github.com/pmndrs/zustand"), "src/vanilla.ts", 60, 97).unwrap(),
            "https://github.com/pmndrs/zustand/blob/HEAD/src/vanilla.ts#L60-L97"
        );
        assert_eq!(
            source_url(&repo("https://gitlab.com/group/sub/project"), "a b/c.py", 1, 2).unwrap(),
            "https://gitlab.com/group/sub/project/-/blob/HEAD/a%20b/c.py#L1-2"
        );
        assert_eq!(
            source_url(&repo("https://gitlab.example.org/g/p"), "x.go", 3, 4).unwrap(),
            "https://gitlab.example.org/g/p/-/blob/HEAD/x.go#L3-4"
        );
        let mut bb = repo("https://bitbucket.org/team/repo");
        bb.commit_sha = Some("abc".into());
        assert_eq!(
            source_url(&bb, "café.md", 5, 9).unwrap(),
            "https://bitbucket.org/team/repo/src/abc/caf%C3%A9.md#lines-5:9"
        );
        assert_eq!(source_url(&repo("https://git.example.org/a/b"), "x", 1, 1), None);
    }
}
