//! Markdown structure: ATX heading sections, then blank-line blocks.
//!
//! Lines are Python `splitlines()` lines. A line whose stripped start is three
//! backticks or three tildes opens a fence, and a later line starting with the
//! same three characters closes it (so a ```` ```` ```` fence is also closed by
//! a ```` ``` ```` line, as in the reference). Headings inside fences are
//! ignored; a heading of level `n` replaces the path from level `n` on.

use std::sync::OnceLock;

use regex::Regex;

use super::Span;
use crate::pytext;

fn heading_regex() -> &'static Regex {
    static HEADING: OnceLock<Regex> = OnceLock::new();
    HEADING.get_or_init(|| Regex::new(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$").expect("valid heading regex"))
}

/// Tracks fenced code blocks line by line.
#[derive(Default)]
struct Fence {
    open: bool,
    marker: String,
}

impl Fence {
    /// Updates the state for `line`; true when the line is a fence line.
    fn update(&mut self, line: &str) -> bool {
        let stripped = pytext::lstrip(line);
        if !(stripped.starts_with("```") || stripped.starts_with("~~~")) {
            return false;
        }
        let marker = &stripped[..3];
        if !self.open {
            self.open = true;
            self.marker = marker.to_owned();
        } else if marker == self.marker {
            self.open = false;
        }
        true
    }
}

/// Atomic blocks annotated with their heading path.
pub(crate) fn markdown_spans(text: &str) -> Vec<Span> {
    let mut headings: Vec<(usize, usize, String)> = Vec::new();
    let mut fence = Fence::default();
    for (start, end) in pytext::line_ranges(text) {
        let line = &text[start..end];
        if fence.update(line) || fence.open {
            continue;
        }
        let line = line.trim_end_matches('\n');
        if let Some(caps) = heading_regex().captures(line) {
            let level = caps[1].len();
            headings.push((start, level, pytext::strip(&caps[2]).to_owned()));
        }
    }
    heading_sections(text, &headings).into_iter().flat_map(|section| block_spans(text, section)).collect()
}

/// Sections of `text` from its headings (offset, level from 1, title), each
/// with the `" > "`-joined path of titles; a heading of level `n` replaces the
/// path from level `n` on. Text before the first heading is a section without
/// a path. No headings: the whole text.
pub(super) fn heading_sections(text: &str, headings: &[(usize, usize, String)]) -> Vec<Span> {
    if headings.is_empty() {
        return vec![Span::new(0, text.len())];
    }
    let mut sections = Vec::new();
    if headings[0].0 > 0 {
        sections.push(Span::new(0, headings[0].0));
    }
    let mut path: Vec<&str> = Vec::new();
    for (index, (start, level, title)) in headings.iter().enumerate() {
        path.truncate(level - 1);
        path.push(title);
        let end = headings.get(index + 1).map_or(text.len(), |next| next.0);
        sections.push(Span { start: *start, end, section: path.join(" > "), symbol: String::new() });
    }
    sections
}

/// Splits a section after each blank line outside a fence; blank blocks are dropped.
fn block_spans(text: &str, section: Span) -> Vec<Span> {
    let value = &text[section.start..section.end];
    let mut spans = Vec::new();
    let mut block_start = 0;
    let mut fence = Fence::default();
    for (start, end) in pytext::line_ranges(value) {
        let line = &value[start..end];
        fence.update(line);
        if !fence.open && pytext::is_blank(line) {
            spans.push(section.sub(section.start + block_start, section.start + end));
            block_start = end;
        }
    }
    if block_start < value.len() {
        spans.push(section.sub(section.start + block_start, section.end));
    }
    spans.retain(|span| !pytext::is_blank(&text[span.start..span.end]));
    spans
}
