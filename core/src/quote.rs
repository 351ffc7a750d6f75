//! How an error message quotes an argument back: the `search` tool and the
//! navigation tools alike.

use std::borrow::Cow;

/// Characters of an argument quoted back in an error message.
pub const SHOWN_CHARS: usize = 100;

/// `text` as an error message may quote it: whole when short, else its
/// first [`SHOWN_CHARS`] characters and `…`.
pub fn shown(text: &str) -> Cow<'_, str> {
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((end, _)) => Cow::Owned(format!("{}…", &text[..end])),
        None => Cow::Borrowed(text),
    }
}
