//! The structural unit every rule produces: a byte range of the document
//! with its section and symbol.

/// A unit of text with its context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Span {
    pub start: usize,
    pub end: usize,
    pub section: String,
    pub symbol: String,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Self {
        Span { start, end, section: String::new(), symbol: String::new() }
    }

    /// Another range with this span's context.
    pub fn sub(&self, start: usize, end: usize) -> Self {
        Span { start, end, section: self.section.clone(), symbol: self.symbol.clone() }
    }

    pub(super) fn same_context(&self, other: &Span) -> bool {
        self.section == other.section && self.symbol == other.symbol
    }
}
