//! The query set: JSON Lines, one query per line.
//!
//! ```json
//! {"query": "retry with backoff", "source": "acme/widgets@main", "path": "internal/**", "relevant": ["internal/store/store.go#L52-L70"]}
//! ```
//!
//! `source` and `path` are optional and mean what the search tool's
//! arguments mean. A target is a repository-relative path, optionally with
//! a line range (`#L10-L42`, or `#L10` for one line); a result is relevant to
//! it when its path is the same and, for a range, its lines overlap it.

use rr_core::{Metadata, SearchArgs, SearchFilter};
use serde::Deserialize;

/// One thing a query should find.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub path: String,
    /// First and last line, both included.
    pub lines: Option<(i64, i64)>,
}

impl Target {
    /// Parses `path`, `path#L<n>` or `path#L<a>-L<b>`.
    pub fn parse(text: &str) -> Result<Target, String> {
        let text = text.trim();
        let (path, anchor) = match text.rsplit_once("#L") {
            Some((path, anchor)) => (path, Some(anchor)),
            None => (text, None),
        };
        let path = path.strip_prefix('/').unwrap_or(path);
        if path.is_empty() {
            return Err("the path is empty".into());
        }
        let Some(anchor) = anchor else {
            return Ok(Target { path: path.to_owned(), lines: None });
        };
        let number = |s: &str| s.parse::<i64>().ok().filter(|n| *n >= 1);
        let lines = match anchor.split_once("-L") {
            Some((a, b)) => number(a).zip(number(b)),
            None => number(anchor).map(|n| (n, n)),
        };
        match lines {
            None => Err("the line range must be #L<first> or #L<first>-L<last>, with lines from 1".into()),
            Some((a, b)) if b < a => Err(format!("the line range ends (L{b}) before it starts (L{a})")),
            Some(lines) => Ok(Target { path: path.to_owned(), lines: Some(lines) }),
        }
    }

    /// Whether a result with this metadata is relevant to the target.
    pub fn matches(&self, m: &Metadata) -> bool {
        m.path == self.path && self.lines.is_none_or(|(a, b)| m.start_line <= b && a <= m.end_line)
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.lines {
            None => f.write_str(&self.path),
            Some((a, b)) if a == b => write!(f, "{}#L{a}", self.path),
            Some((a, b)) => write!(f, "{}#L{a}-L{b}", self.path),
        }
    }
}

/// One parsed query.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalQuery {
    /// 1-based line of the query set.
    pub line: usize,
    /// Trimmed, without any embedding prefix.
    pub query: String,
    pub filter: SearchFilter,
    pub targets: Vec<Target>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    query: String,
    #[serde(default)]
    source: String,
    #[serde(default)]
    path: String,
    relevant: Vec<String>,
}

/// Every bad line of a query set, one message each.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join("\n"))]
pub struct QuerySetError(pub Vec<String>);

/// Parses a whole query set. Blank lines are skipped; every bad line is
/// reported as `line <n>: <why>`.
pub fn parse(text: &str) -> Result<Vec<EvalQuery>, QuerySetError> {
    let mut queries = Vec::new();
    let mut errors = Vec::new();
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (index, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        match parse_line(raw, index + 1) {
            Ok(q) => queries.push(q),
            Err(e) => errors.push(format!("line {}: {e}", index + 1)),
        }
    }
    if queries.is_empty() && errors.is_empty() {
        errors.push("no query: the file holds no JSON line".into());
    }
    if errors.is_empty() { Ok(queries) } else { Err(QuerySetError(errors)) }
}

fn parse_line(raw: &str, line: usize) -> Result<EvalQuery, String> {
    let parsed: Line = serde_json::from_str(raw).map_err(|e| {
        // serde_json's own position is "line 1 column n" of this one line.
        let message = e.to_string();
        let what = message.rsplit_once(" at line ").map_or(message.as_str(), |(what, _)| what);
        let kind = if e.is_data() { "" } else { "invalid JSON: " };
        format!("{kind}{what} (column {})", e.column())
    })?;
    // The search tool's own validation, so a query means what it would mean there.
    let request =
        SearchArgs { query: parsed.query, source: parsed.source, path: parsed.path, limit: 1, ..Default::default() }
            .validate()
            .map_err(|e| e.to_string())?;
    if parsed.relevant.is_empty() {
        return Err("relevant must list at least one target".into());
    }
    let targets = parsed
        .relevant
        .iter()
        .enumerate()
        .map(|(i, t)| Target::parse(t).map_err(|e| format!("relevant[{i}] {t:?}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(EvalQuery { line, query: request.query, filter: request.filter, targets })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(path: &str, start: i64, end: i64) -> Metadata {
        Metadata { path: path.into(), start_line: start, end_line: end, ..Default::default() }
    }

    fn errors(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn targets_parse_and_match_by_path_and_overlapping_lines() {
        let t = Target::parse("src/a.rs#L10-L42").unwrap();
        assert_eq!(t, Target { path: "src/a.rs".into(), lines: Some((10, 42)) });
        assert_eq!(t.to_string(), "src/a.rs#L10-L42");
        assert!(t.matches(&meta("src/a.rs", 1, 10)));
        assert!(t.matches(&meta("src/a.rs", 42, 50)));
        assert!(t.matches(&meta("src/a.rs", 20, 30)));
        assert!(t.matches(&meta("src/a.rs", 1, 100)));
        assert!(!t.matches(&meta("src/a.rs", 1, 9)));
        assert!(!t.matches(&meta("src/a.rs", 43, 60)));
        assert!(!t.matches(&meta("src/b.rs", 10, 42)));
        let whole = Target::parse("/docs/a b.md").unwrap();
        assert_eq!(whole, Target { path: "docs/a b.md".into(), lines: None });
        assert!(whole.matches(&meta("docs/a b.md", 0, 0)));
        let one = Target::parse("x.py#L7").unwrap();
        assert_eq!(one.lines, Some((7, 7)));
        assert_eq!(one.to_string(), "x.py#L7");
        assert!(one.matches(&meta("x.py", 5, 7)) && !one.matches(&meta("x.py", 8, 9)));
        // Only the last `#L` is an anchor: a `#` inside the path stays in it.
        assert_eq!(Target::parse("a#b.md#L3").unwrap().path, "a#b.md");
    }

    #[test]
    fn parses_a_query_set_with_filters() {
        let text = concat!(
            r#"{"query": "  retry with backoff ", "relevant": ["a.go#L5-L9", "b.go"]}"#,
            "\n\n",
            r#"{"query": "q", "source": "acme/widgets@main", "path": "/internal/*", "relevant": ["c.go"]}"#,
            "\n"
        );
        let q = parse(text).unwrap();
        assert_eq!(q.len(), 2);
        assert_eq!(q[0].line, 1);
        assert_eq!(q[0].query, "retry with backoff");
        assert_eq!(q[0].targets.len(), 2);
        assert_eq!(q[0].filter, SearchFilter::default());
        assert_eq!(q[1].line, 3);
        assert_eq!(q[1].filter.organization, "acme");
        assert_eq!(q[1].filter.branch, "main");
        assert_eq!(q[1].filter.path.as_ref().unwrap().pattern(), "internal/*");
    }

    #[test]
    fn every_bad_line_is_reported_with_its_number() {
        let text = [
            r#"{"query": "fine", "relevant": ["a.rs"]}"#,
            r#"{"query": "no targets", "relevant": []}"#,
            r#"{"query": "x", "relevant": ["a.rs#L9-L3"]}"#,
            r#"not json"#,
            r#"{"query": "x", "relevant": ["a.rs", "b.rs#L0"]}"#,
            r#"{"query": "  ", "relevant": ["a.rs"]}"#,
            r#"{"query": "x", "source": "acme", "relevant": ["a.rs"]}"#,
            r#"{"query": "x", "relevent": ["a.rs"]}"#,
            r#"{"query": "x"}"#,
            r##"{"query": "x", "relevant": ["#L1"]}"##,
        ]
        .join("\n");
        assert_eq!(
            errors(&text),
            [
                "line 2: relevant must list at least one target",
                "line 3: relevant[0] \"a.rs#L9-L3\": the line range ends (L3) before it starts (L9)",
                "line 4: invalid JSON: expected ident (column 2)",
                "line 5: relevant[1] \"b.rs#L0\": the line range must be #L<first> or #L<first>-L<last>, with lines from 1",
                "line 6: query must be non-empty",
                "line 7: source must use owner/repository or owner/repository@branch",
                "line 8: unknown field `relevent`, expected one of `query`, `source`, `path`, `relevant` (column 25)",
                "line 9: missing field `relevant` (column 14)",
                "line 10: relevant[0] \"#L1\": the path is empty",
            ]
            .join("\n")
        );
        assert_eq!(errors("\n  \n"), "no query: the file holds no JSON line");
        // A byte-order mark is not part of the first line.
        assert_eq!(parse("\u{feff}{\"query\": \"q\", \"relevant\": [\"a\"]}").unwrap()[0].query, "q");
    }
}
