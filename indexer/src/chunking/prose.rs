//! Heading sections of reStructuredText and AsciiDoc, for the semantic
//! chunking.
//!
//! The reference classifies these files as generic text and cuts them into
//! token windows, so a window can straddle several sections and no record says
//! which section it is from. Here their headings play the part of Markdown's:
//! each heading starts a section whose path of titles becomes the record's
//! `section`, and the section's blank-line blocks are packed to the budget as
//! Markdown blocks are.
//!
//! Only what decides where a section starts is parsed: the title lines. A
//! directive, a literal block or an AsciiDoc delimited block may contain text
//! that looks like a heading; reST literal text is indented (a title never
//! is), and AsciiDoc delimited blocks are skipped.

use std::sync::OnceLock;

use regex::Regex;

use super::{Span, markdown};
use crate::pytext;

/// A heading syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Syntax {
    ReStructuredText,
    AsciiDoc,
}

/// The heading syntax of a (lowercase, dotted) extension, if it has one here.
pub(crate) fn syntax_for(extension: &str) -> Option<Syntax> {
    match extension {
        ".rst" => Some(Syntax::ReStructuredText),
        ".adoc" | ".asciidoc" => Some(Syntax::AsciiDoc),
        _ => None,
    }
}

/// Blank-line blocks of `text` annotated with their heading path.
pub(crate) fn section_spans(text: &str, syntax: Syntax) -> Vec<Span> {
    let lines = lines(text);
    let headings = match syntax {
        Syntax::ReStructuredText => rst_headings(&lines),
        Syntax::AsciiDoc => asciidoc_headings(&lines),
    };
    markdown::heading_sections(text, &headings).into_iter().flat_map(|section| block_spans(text, section)).collect()
}

/// Each line's offset and text, without its newline.
fn lines(text: &str) -> Vec<(usize, &str)> {
    pytext::line_ranges(text).into_iter().map(|(s, e)| (s, text[s..e].trim_end_matches('\n'))).collect()
}

/// Splits a section after each blank line; blank blocks are dropped. Unlike
/// Markdown's, no line opens a fence: `~~~` and ```` ``` ```` are reST
/// adornments, and a code listing cut at a blank line is packed together again.
fn block_spans(text: &str, section: Span) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut block_start = section.start;
    for (start, end) in pytext::line_ranges(&text[section.start..section.end]) {
        if pytext::is_blank(&text[section.start + start..section.start + end]) {
            spans.push(section.sub(block_start, section.start + end));
            block_start = section.start + end;
        }
    }
    if block_start < section.end {
        spans.push(section.sub(block_start, section.end));
    }
    spans.retain(|span| !pytext::is_blank(&text[span.start..span.end]));
    spans
}

/// A reST adornment line: one punctuation character repeated, at least three times.
fn adornment(line: &str) -> Option<(char, usize)> {
    let mut chars = line.chars();
    let first = chars.next()?;
    let count = 1 + chars.by_ref().take_while(|&c| c == first).count();
    (first.is_ascii_punctuation() && count >= 3 && count == line.chars().count()).then_some((first, count))
}

/// reST section titles: a title line underlined (or over- and underlined) by
/// an adornment at least as long as the title. Levels follow the order in
/// which adornment styles first appear, as docutils assigns them.
fn rst_headings(lines: &[(usize, &str)]) -> Vec<(usize, usize, String)> {
    let mut styles: Vec<(char, bool)> = Vec::new();
    let mut headings = Vec::new();
    let blank_before = |i: usize| i == 0 || pytext::is_blank(lines[i - 1].1);
    let mut i = 0;
    while i < lines.len() {
        let (start, line) = lines[i];
        let title_at =
            |j: usize| lines.get(j).map(|(_, t)| *t).filter(|t| !pytext::is_blank(t) && adornment(t).is_none());
        let found = if let (Some((mark, width)), Some(title), Some((_, under))) =
            (adornment(line), title_at(i + 1), lines.get(i + 2))
            && adornment(under) == Some((mark, width))
            && blank_before(i)
            && pytext::strip(title).chars().count() <= width
        {
            Some(((mark, true), pytext::strip(title), 3))
        } else if let (Some(title), Some((_, under))) = (title_at(i), lines.get(i + 1))
            && let Some((mark, width)) = adornment(under)
            && blank_before(i)
            && !title.starts_with(pytext::is_space)
            && title.chars().count() <= width
        {
            Some(((mark, false), pytext::strip(title), 2))
        } else {
            None
        };
        let Some((style, title, consumed)) = found else {
            i += 1;
            continue;
        };
        let level = match styles.iter().position(|s| *s == style) {
            Some(index) => index + 1,
            None => {
                styles.push(style);
                styles.len()
            }
        };
        headings.push((start, level, title.to_owned()));
        i += consumed;
    }
    headings
}

fn asciidoc_heading_regex() -> &'static Regex {
    static HEADING: OnceLock<Regex> = OnceLock::new();
    HEADING.get_or_init(|| Regex::new(r"^(={1,6}|#{1,6})[ \t]+(\S.*?)(?:[ \t]+[=#]+)?[ \t]*$").expect("valid regex"))
}

fn asciidoc_delimiter_regex() -> &'static Regex {
    static DELIMITER: OnceLock<Regex> = OnceLock::new();
    DELIMITER
        .get_or_init(|| Regex::new(r"^(?:-{4,}|\.{4,}|\+{4,}|\*{4,}|_{4,}|={4,}|/{4,}|```.*)$").expect("valid regex"))
}

/// AsciiDoc section titles (`= Document`, `== Section`, …, or the Markdown-style
/// `#` markers AsciiDoc also accepts) outside delimited blocks; the number of
/// markers is the level.
fn asciidoc_headings(lines: &[(usize, &str)]) -> Vec<(usize, usize, String)> {
    let mut open: Option<&str> = None;
    let mut headings = Vec::new();
    for &(start, line) in lines {
        let trimmed = line.trim_end();
        if asciidoc_delimiter_regex().is_match(trimmed) {
            match open {
                None => open = Some(if trimmed.starts_with("```") { "```" } else { trimmed }),
                Some(delimiter) if trimmed == delimiter => open = None,
                Some(_) => {}
            }
            continue;
        }
        if open.is_some() {
            continue;
        }
        if let Some(caps) = asciidoc_heading_regex().captures(trimmed) {
            headings.push((start, caps[1].len(), caps[2].to_owned()));
        }
    }
    headings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sections(text: &str, syntax: Syntax) -> Vec<(String, String)> {
        section_spans(text, syntax).into_iter().map(|s| (s.section, text[s.start..s.end].to_owned())).collect()
    }

    fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect()
    }

    #[test]
    fn rst_levels_follow_the_order_of_adornment_styles() {
        let text = "=====\nGuide\n=====\n\nIntro.\n\nInstall\n-------\n\nRun pip.\n\nFrom source\n~~~~~~~~~~~\n\nClone it.\n\nUsage\n-----\n\nCall it.\n";
        assert_eq!(
            sections(text, Syntax::ReStructuredText),
            owned(&[
                ("Guide", "=====\nGuide\n=====\n\n"),
                ("Guide", "Intro.\n\n"),
                ("Guide > Install", "Install\n-------\n\n"),
                ("Guide > Install", "Run pip.\n\n"),
                ("Guide > Install > From source", "From source\n~~~~~~~~~~~\n\n"),
                ("Guide > Install > From source", "Clone it.\n\n"),
                ("Guide > Usage", "Usage\n-----\n\n"),
                ("Guide > Usage", "Call it.\n"),
            ])
        );
    }

    #[test]
    fn rst_transitions_literal_text_and_short_underlines_are_not_titles() {
        // A transition (an adornment alone), an indented line over an
        // adornment, an underline shorter than its title, and a title that
        // follows a paragraph line without a blank line.
        let text =
            "Para.\n\n----\n\nExample::\n\n    code\n    ====\n\nLong title\n---\n\nText\nNot a title\n-----------\n";
        assert_eq!(rst_headings(&lines(text)), []);
    }

    #[test]
    fn asciidoc_sections_skip_delimited_blocks() {
        let text = "= Manual\n\nPreface.\n\n== Setup\n\n----\n== not a heading\n----\n\n=== Linux ===\n\nApt.\n\n== Use\nRun.\n";
        assert_eq!(
            sections(text, Syntax::AsciiDoc),
            owned(&[
                ("Manual", "= Manual\n\n"),
                ("Manual", "Preface.\n\n"),
                ("Manual > Setup", "== Setup\n\n"),
                ("Manual > Setup", "----\n== not a heading\n----\n\n"),
                ("Manual > Setup > Linux", "=== Linux ===\n\n"),
                ("Manual > Setup > Linux", "Apt.\n\n"),
                ("Manual > Use", "== Use\nRun.\n"),
            ])
        );
    }

    #[test]
    fn only_rst_and_asciidoc_extensions_have_a_syntax() {
        assert_eq!(syntax_for(".rst"), Some(Syntax::ReStructuredText));
        assert_eq!(syntax_for(".adoc"), Some(Syntax::AsciiDoc));
        assert_eq!(syntax_for(".asciidoc"), Some(Syntax::AsciiDoc));
        assert_eq!(syntax_for(".txt"), None);
    }
}
