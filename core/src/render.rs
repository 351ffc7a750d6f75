//! The Markdown result a client reads.
//!
//! Byte-for-byte the reference server's format: a summary line, then per
//! result a `### n` heading, `**Repo:**`/`**File:**` lines, a GitHub link, an
//! optional context line and the excerpt in a fence that its own backticks
//! cannot close. Distances, scores, ids and hashes never appear.
//!
//! A record may say where its repository is hosted with the [`SOURCE_HOST`]
//! metadata key, which the reference's records never carry: without it the
//! link is the reference's GitHub link, byte for byte; with it the link is
//! in that host's format, or left out when the host is unknown (`""`) or its
//! link format is not known (see [`source_url`]).

use std::fmt::Write as _;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::record::{Candidate, Metadata};
use crate::select::clean_document;

/// The text for an empty result.
pub const NO_MATCH: &str = "No relevant repository content was found. Try a broader or more specific query.";
/// The text for an empty result when `source` narrowed the search.
pub const NO_MATCH_WITH_SOURCE: &str = "No relevant repository content was found. Try a broader or more specific query, or omit `source` to search all indexed repositories.";

/// Bytes kept as they are in one URL path segment: alphanumerics, the
/// unreserved marks and the sub-delimiters RFC 3986 allows inside a segment,
/// which is the set Go's `url.PathEscape` keeps.
const PATH_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'$')
    .remove(b'&')
    .remove(b'+')
    .remove(b':')
    .remove(b'=')
    .remove(b'@');

/// Escapes one URL path segment as Go's `url.PathEscape` does.
pub fn path_escape(s: &str) -> String {
    utf8_percent_encode(s, PATH_SEGMENT).to_string()
}

/// Renders selected results; `source` is the trimmed `source` argument.
pub fn render(results: &[Candidate], source: &str) -> String {
    if results.is_empty() {
        return if source.is_empty() { NO_MATCH } else { NO_MATCH_WITH_SOURCE }.to_owned();
    }
    let mut out = String::with_capacity(256 + results.iter().map(|c| c.chunk.document.len() + 256).sum::<usize>());
    let plural = if results.len() == 1 { "" } else { "s" };
    let _ = writeln!(out, "Found {} relevant repository excerpt{plural}, ranked by semantic relevance.", results.len());
    for (i, candidate) in results.iter().enumerate() {
        let m = &candidate.chunk.metadata;
        out.push_str("\n---\n\n");
        let _ = write!(
            out,
            "### {}\n\n**Repo:** `{}/{}@{}`\n**File:** `{}`\n\n",
            i + 1,
            m.organization,
            m.repository,
            m.branch,
            m.path_with_lines()
        );
        if let Some(url) = source_url(m) {
            let _ = writeln!(out, "Source: [{}]({url})", m.path);
        }
        let context = context_items(m);
        if !context.is_empty() {
            out.push_str("Context: ");
            out.push_str(&context.join(" · "));
            out.push('\n');
        }
        out.push('\n');
        let body = clean_document(&candidate.chunk.document);
        let fence = markdown_fence(body);
        out.push_str(&fence);
        out.push_str(fence_language(m));
        out.push('\n');
        out.push_str(body);
        out.push('\n');
        out.push_str(&fence);
        out.push('\n');
    }
    out
}

/// The info string of the code fence.
pub fn fence_language(m: &Metadata) -> &str {
    if m.language.is_empty() && m.file_type == "markdown" { "markdown" } else { &m.language }
}

/// `section` then `symbol`, each when non-empty, with backticks escaped.
fn context_items(m: &Metadata) -> Vec<String> {
    [("section", &m.section), ("symbol", &m.symbol)]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k} `{}`", v.replace('`', "\\`")))
        .collect()
}

/// The metadata key naming the host of a repository that is not on GitHub;
/// `""` means the host is unknown (a folder with no git remote).
pub const SOURCE_HOST: &str = "source_host";

/// The link to a record's lines at the indexed commit (or branch), in the
/// format of its host:
///
/// - no [`SOURCE_HOST`] key: GitHub, [`github_source_url`];
/// - `github.com` or a `github.*` host (GitHub Enterprise): `/blob/<ref>/`, `#L1-L9`;
/// - `gitlab.com` or a `gitlab.*` host: `/-/blob/<ref>/`, `#L1-9`;
/// - `bitbucket.org`: `/src/<ref>/`, `#lines-1:9`;
/// - `codeberg.org`, `gitea.com` or a `gitea.*`/`forgejo.*` host:
///   `/src/commit/<sha>/` (or `/src/branch/<branch>/`), `#L1-L9`;
///
/// and `None` for any other host, an unknown one, or a missing field: no
/// link rather than a wrong one. The organization may hold `/` (GitLab
/// subgroups); each of its segments is escaped on its own.
pub fn source_url(m: &Metadata) -> Option<String> {
    let host = match m.extra.get(SOURCE_HOST) {
        None => return github_source_url(m),
        Some(serde_json::Value::String(host)) => host.to_ascii_lowercase(),
        Some(_) => return None,
    };
    let reference = if m.indexed_commit_sha.is_empty() { &m.branch } else { &m.indexed_commit_sha };
    if host.is_empty() || m.organization.is_empty() || m.repository.is_empty() || reference.is_empty() {
        return None;
    }
    if m.path.is_empty() || host.contains(['/', '?', '#', '@']) || host.contains(char::is_whitespace) {
        return None;
    }
    let segments = |s: &str| s.split('/').map(path_escape).collect::<Vec<_>>().join("/");
    let base = format!("https://{host}/{}/{}", segments(&m.organization), path_escape(&m.repository));
    let (path, reference) = (segments(&m.path), path_escape(reference));
    let (start, end) = (m.start_line, m.end_line);
    let label = host.split(':').next().unwrap_or_default();
    let anchor = |range: &dyn Fn(i64, i64) -> String, single: &dyn Fn(i64) -> String| match (start, end) {
        (s, _) if s <= 0 => String::new(),
        (s, e) if e > s => range(s, e),
        (s, _) => single(s),
    };
    if label == "github.com" || label.starts_with("github.") {
        Some(format!("{base}/blob/{reference}/{path}{}", m.line_anchor()))
    } else if label == "gitlab.com" || label.starts_with("gitlab.") {
        let anchor = anchor(&|s, e| format!("#L{s}-{e}"), &|s| format!("#L{s}"));
        Some(format!("{base}/-/blob/{reference}/{path}{anchor}"))
    } else if label == "bitbucket.org" {
        let anchor = anchor(&|s, e| format!("#lines-{s}:{e}"), &|s| format!("#lines-{s}"));
        Some(format!("{base}/src/{reference}/{path}{anchor}"))
    } else if ["codeberg.org", "gitea.com"].contains(&label)
        || label.starts_with("gitea.")
        || label.starts_with("forgejo.")
    {
        let kind = if m.indexed_commit_sha.is_empty() { "branch" } else { "commit" };
        Some(format!("{base}/src/{kind}/{reference}/{path}{}", m.line_anchor()))
    } else {
        None
    }
}

/// The GitHub link at the indexed commit (or branch), or `None` when a
/// needed field is missing.
pub fn github_source_url(m: &Metadata) -> Option<String> {
    let reference = if m.indexed_commit_sha.is_empty() { &m.branch } else { &m.indexed_commit_sha };
    if m.organization.is_empty() || m.repository.is_empty() || reference.is_empty() || m.path.is_empty() {
        return None;
    }
    let path = m.path.split('/').map(path_escape).collect::<Vec<_>>().join("/");
    Some(format!(
        "https://github.com/{}/{}/blob/{}/{}{}",
        path_escape(&m.organization),
        path_escape(&m.repository),
        path_escape(reference),
        path,
        m.line_anchor()
    ))
}

/// Backticks, one more than the longest run that starts a line (after
/// leading spaces and tabs), and at least three.
pub fn markdown_fence(body: &str) -> String {
    let longest = body
        .split('\n')
        .map(|line| line.trim_start_matches([' ', '\t']).bytes().take_while(|&b| b == b'`').count())
        .max()
        .unwrap_or(0)
        .max(2);
    "`".repeat(longest + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Chunk;

    fn candidate(meta: Metadata, document: &str) -> Candidate {
        Candidate { chunk: Chunk { id: "x".into(), document: document.into(), metadata: meta }, distance: Some(0.1) }
    }

    fn go_meta() -> Metadata {
        Metadata {
            organization: "example-org".into(),
            repository: "example-repository".into(),
            branch: "main".into(),
            path: "internal/config/config.go".into(),
            language: "go".into(),
            file_type: "go".into(),
            start_line: 20,
            end_line: 32,
            symbol: "Load".into(),
            indexed_commit_sha: "COMMIT".into(),
            ..Default::default()
        }
    }

    #[test]
    fn renders_the_seed_example_exactly() {
        let doc = "Source: example-org/example-repository@main:internal/config/config.go\nType: go\nSymbol: function_declaration:Load\n\nfunc Load() error {\n    // Relevant source excerpt\n}\n";
        let out = render(&[candidate(go_meta(), doc)], "");
        assert_eq!(
            out,
            "Found 1 relevant repository excerpt, ranked by semantic relevance.\n\n---\n\n### 1\n\n**Repo:** `example-org/example-repository@main`\n**File:** `internal/config/config.go#L20-L32`\n\nSource: [internal/config/config.go](https://github.com/example-org/example-repository/blob/COMMIT/internal/config/config.go#L20-L32)\nContext: symbol `Load`\n\n```go\nfunc Load() error {\n    // Relevant source excerpt\n}\n```\n"
        );
    }

    #[test]
    fn source_links_follow_the_host() {
        let with_host = |host: &str| {
            let mut m = go_meta();
            m.extra.insert(SOURCE_HOST.into(), host.into());
            m
        };
        // No key: the reference's GitHub link, whatever the organization looks like.
        assert_eq!(source_url(&go_meta()), github_source_url(&go_meta()));
        let mut m = with_host("gitlab.com");
        m.organization = "group/sub group".into();
        assert_eq!(
            source_url(&m).unwrap(),
            "https://gitlab.com/group/sub%20group/example-repository/-/blob/COMMIT/internal/config/config.go#L20-32"
        );
        m.end_line = 20;
        assert!(source_url(&m).unwrap().ends_with("config.go#L20"));
        assert_eq!(
            source_url(&with_host("GitLab.Example.com")).unwrap(),
            "https://gitlab.example.com/example-org/example-repository/-/blob/COMMIT/internal/config/config.go#L20-32"
        );
        assert_eq!(
            source_url(&with_host("bitbucket.org")).unwrap(),
            "https://bitbucket.org/example-org/example-repository/src/COMMIT/internal/config/config.go#lines-20:32"
        );
        let mut m = with_host("codeberg.org");
        assert_eq!(
            source_url(&m).unwrap(),
            "https://codeberg.org/example-org/example-repository/src/commit/COMMIT/internal/config/config.go#L20-L32"
        );
        m.indexed_commit_sha.clear();
        m.start_line = 0;
        assert_eq!(
            source_url(&m).unwrap(),
            "https://codeberg.org/example-org/example-repository/src/branch/main/internal/config/config.go"
        );
        assert_eq!(
            source_url(&with_host("github.example.com")).unwrap(),
            "https://github.example.com/example-org/example-repository/blob/COMMIT/internal/config/config.go#L20-L32"
        );
        // Unknown host, a host with no known link format, a host that is not a host: no link.
        for host in ["", "git.example.com", "evil.com/x", "a@b", "gitlab.com#x"] {
            assert_eq!(source_url(&with_host(host)), None, "{host:?}");
        }
        let mut m = go_meta();
        m.extra.insert(SOURCE_HOST.into(), serde_json::json!(1));
        assert_eq!(source_url(&m), None);
        // The rendered result has no Source line when there is no link.
        let out = render(&[candidate(with_host(""), "Source: x\nType: go\n\nbody\n")], "");
        assert!(out.contains("**File:** `internal/config/config.go#L20-L32`\n\nContext: symbol `Load`\n"), "{out}");
    }

    #[test]
    fn no_match_texts() {
        assert_eq!(render(&[], ""), NO_MATCH);
        assert_eq!(render(&[], "a/b"), NO_MATCH_WITH_SOURCE);
    }

    #[test]
    fn fence_grows_past_backtick_runs_at_line_start() {
        assert_eq!(markdown_fence("plain"), "```");
        assert_eq!(markdown_fence("x ```` inline"), "```");
        assert_eq!(markdown_fence("  \t````md\nx\n````"), "`````");
        assert_eq!(markdown_fence("``"), "```");
        assert_eq!(markdown_fence("```"), "````");
    }

    #[test]
    fn url_escapes_segments_like_go() {
        let m = Metadata {
            organization: "o g".into(),
            repository: "r#1".into(),
            branch: "feat/x".into(),
            path: "docs/café.md".into(),
            ..Default::default()
        };
        assert_eq!(github_source_url(&m).unwrap(), "https://github.com/o%20g/r%231/blob/feat%2Fx/docs/caf%C3%A9.md");
        let m2 = Metadata {
            path: "a/$&+:=@-_.~;,?%/b c".into(),
            organization: "o".into(),
            repository: "r".into(),
            indexed_commit_sha: "s".into(),
            ..Default::default()
        };
        assert_eq!(github_source_url(&m2).unwrap(), "https://github.com/o/r/blob/s/a/$&+:=@-_.~%3B%2C%3F%25/b%20c");
        assert_eq!(github_source_url(&Metadata { path: "p".into(), ..Default::default() }), None);
    }

    #[test]
    fn context_line_and_languages() {
        let mut m = go_meta();
        m.section = "A `b` > C".into();
        m.symbol = String::new();
        m.language = String::new();
        m.file_type = "markdown".into();
        m.start_line = 0;
        m.indexed_commit_sha = String::new();
        let out =
            render(&[candidate(m.clone(), "Source: x\n\nbody"), candidate(Metadata::default(), "raw body")], "a/b");
        assert!(out.starts_with("Found 2 relevant repository excerpts, ranked by semantic relevance.\n"));
        assert!(out.contains("**File:** `internal/config/config.go`\n\nSource: [internal/config/config.go](https://github.com/example-org/example-repository/blob/main/internal/config/config.go)\nContext: section `A \\`b\\` > C`\n\n```markdown\nbody\n```\n"));
        assert!(out.ends_with("### 2\n\n**Repo:** `/@`\n**File:** ``\n\n\n```\nraw body\n```\n"));
        m.symbol = "function:x".into();
        assert!(render(&[candidate(m, "b")], "").contains("Context: section `A \\`b\\` > C` · symbol `function:x`\n"));
    }
}
