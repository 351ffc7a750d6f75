//! What a failed backend call says, in the reference server's words.
//!
//! Each variant's text is part of the client contract (it follows the fixed
//! `repository content search failed: ` prefix), so the formats mirror Go's
//! `fmt.Errorf` calls in the reference `doJSON` one for one. Every text is
//! redacted when the error is built, so no `Display` of an [`HttpError`] can
//! carry a configured secret or the caller's credential.

/// A failed HTTP call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// The server answered with a non-2xx status (after any retries). The body
    /// is already trimmed, redacted and cut to 1000 bytes; it may be empty.
    #[error("{operation} failed with HTTP {status}: {body}")]
    Status { operation: String, status: u16, body: String },
    /// No response arrived: connection failure, timeout, bad header (after any
    /// retries). `method` is Go's spelling (`Get`, `Post`).
    #[error("{operation} failed: {method} {url:?}: {detail}")]
    Transport { operation: String, method: &'static str, url: String, detail: String },
    /// The request could not be built (an unparsable URL).
    #[error("{operation}: create request: {detail}")]
    CreateRequest { operation: String, detail: String },
    /// The body could not be encoded (a non-finite float).
    #[error("{operation}: encode request: {detail}")]
    Encode { operation: String, detail: String },
    /// The response body broke off or timed out while being read.
    #[error("{operation}: read response: {detail}")]
    Read { operation: String, detail: String },
    /// A 2xx body that is not the expected JSON.
    #[error("{operation}: decode response: {detail}")]
    Decode { operation: String, detail: String },
    /// A 2xx body longer than the client reads ([`crate::MAX_RESPONSE_BYTES`]):
    /// named as such rather than decoded cut (the reference reports the cut
    /// body's `unexpected end of JSON input`).
    #[error("{operation}: read response: the reply is larger than the {limit}-byte limit")]
    TooLarge { operation: String, limit: usize },
    /// A 2xx body that decoded but breaks the backend's reply contract
    /// (lists of different lengths, a field of the wrong type).
    #[error("{operation} returned a malformed reply: {detail}")]
    Malformed { operation: String, detail: String },
    /// The HTTP client itself could not be set up (TLS roots, for example).
    #[error("HTTP client setup failed: {detail}")]
    Setup { detail: String },
}

impl HttpError {
    /// How the call failed, as the backend metrics' `kind` label says it.
    pub fn kind(&self) -> &'static str {
        match self {
            HttpError::Status { status, .. } if *status == 429 => "rate_limited",
            HttpError::Status { status, .. } if *status >= 500 => "server_error",
            HttpError::Status { .. } => "client_error",
            HttpError::Transport { detail, .. } if detail.contains("deadline exceeded") => "timeout",
            HttpError::Transport { .. } => "transport",
            HttpError::CreateRequest { .. } | HttpError::Encode { .. } | HttpError::Setup { .. } => "request",
            HttpError::Read { .. } | HttpError::TooLarge { .. } => "read",
            HttpError::Decode { .. } | HttpError::Malformed { .. } => "reply",
        }
    }

    /// The error as a client outside the drop-in is shown it: the operation
    /// and what went wrong, never a URL or the backend's reply text (both
    /// stay in the debug log, see [`crate::HttpClient`]).
    pub fn summary(&self) -> String {
        match self {
            HttpError::Status { operation, status, .. } => format!("{operation} failed with HTTP {status}"),
            HttpError::Transport { operation, detail, .. } => {
                let what = if detail.contains("deadline exceeded") { "timed out" } else { "got no response" };
                format!("{operation} failed: the request {what}")
            }
            HttpError::CreateRequest { operation, .. } => format!("{operation}: the request URL is invalid"),
            HttpError::Encode { operation, .. } => format!("{operation}: the request could not be encoded"),
            HttpError::Read { operation, detail } => {
                let what = if detail.contains("deadline exceeded") { "timed out" } else { "broke off" };
                format!("{operation}: reading the reply {what}")
            }
            HttpError::Decode { operation, .. } => format!("{operation}: the reply is not the expected JSON"),
            HttpError::TooLarge { .. } | HttpError::Malformed { .. } | HttpError::Setup { .. } => self.to_string(),
        }
    }

    /// The HTTP status of a [`HttpError::Status`].
    pub fn status(&self) -> Option<u16> {
        match self {
            HttpError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// The text that replaces a secret.
pub const REDACTED: &str = "<redacted>";

/// At most this many bytes of an error body reach the message.
pub const MAX_ERROR_BODY_BYTES: usize = 1000;

/// The secrets of one call, longest first so that a secret containing
/// another is replaced whole.
#[derive(Debug, Clone, Default)]
pub(crate) struct Secrets(Vec<String>);

impl Secrets {
    pub(crate) fn new<'a>(configured: impl IntoIterator<Item = &'a str>, authorization: Option<&'a str>) -> Self {
        let mut list: Vec<String> = configured
            .into_iter()
            .chain(authorization.map(credential))
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        list.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        list.dedup();
        Secrets(list)
    }

    /// Every secret in `bytes` replaced, left to right and secret by secret,
    /// as Go's `strings.ReplaceAll` in sequence.
    pub(crate) fn redact_bytes(&self, bytes: &[u8]) -> Vec<u8> {
        let mut out = bytes.to_vec();
        for secret in &self.0 {
            out = replace_all(&out, secret.as_bytes(), REDACTED.as_bytes());
        }
        out
    }

    pub(crate) fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in &self.0 {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), REDACTED);
            }
        }
        out
    }
}

/// The credential inside an `Authorization` value: what follows the scheme
/// (`Bearer`, `Basic`, any case), or the whole value when it has none.
///
/// Only the credential is redacted, not the scheme, so an echoed
/// `Bearer <token>` reads `Bearer <redacted>` exactly as the reference server
/// (which redacts its configured token) would print it.
fn credential(authorization: &str) -> &str {
    let value = authorization.trim();
    if value.eq_ignore_ascii_case("bearer") {
        return "";
    }
    match value.split_once(' ') {
        Some((_, rest)) if !rest.trim().is_empty() => rest.trim(),
        _ => value,
    }
}

fn replace_all(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return haystack.to_vec();
    }
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}

/// The body part of a [`HttpError::Status`] message: Go's `TrimSpace`, then
/// redaction, then a cut at 1000 bytes, then what is not valid UTF-8 (a
/// sequence split by the cut, or a non-UTF-8 body) replaced by U+FFFD.
pub(crate) fn status_body(body: &[u8], secrets: &Secrets) -> String {
    let redacted = secrets.redact_bytes(go_trim_space(body));
    let cut = &redacted[..redacted.len().min(MAX_ERROR_BODY_BYTES)];
    String::from_utf8_lossy(cut).into_owned()
}

/// Go's `strings.TrimSpace` over raw bytes: Unicode white space is removed at
/// both ends; an invalid byte stops the trimming like any non-space rune.
/// Rust's `char::is_whitespace` is the same White_Space set Go's
/// `unicode.IsSpace` uses.
pub(crate) fn go_trim_space(bytes: &[u8]) -> &[u8] {
    let valid_prefix = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
    };
    let start = valid_prefix.len() - valid_prefix.trim_start().len();
    let mut end = bytes.len();
    'trailing: while end > start {
        // A white-space rune is at most 3 bytes; Go decodes the last rune
        // from the nearest preceding start byte, which is the same as asking
        // whether the tail is exactly one white-space character.
        for width in 1..=3 {
            if end < start + width {
                break;
            }
            if let Ok(tail) = std::str::from_utf8(&bytes[end - width..end]) {
                let mut chars = tail.chars();
                if let (Some(c), None) = (chars.next(), chars.next())
                    && c.is_whitespace()
                {
                    end -= width;
                    continue 'trailing;
                }
            }
        }
        break;
    }
    &bytes[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trim_space_matches_go() {
        assert_eq!(go_trim_space(b"  a b \n\t"), b"a b");
        assert_eq!(go_trim_space(" \u{a0}\u{3000}x\u{2028}\u{85}\u{b}\u{c}".as_bytes()), b"x");
        assert_eq!(go_trim_space(b"\xff  x  \xfe"), b"\xff  x  \xfe");
        assert_eq!(go_trim_space(b"   "), b"");
        assert_eq!(
            go_trim_space("\u{200b}x".as_bytes()),
            "\u{200b}x".as_bytes(),
            "zero-width space is not White_Space"
        );
        assert_eq!(go_trim_space(b""), b"");
    }

    #[test]
    fn credentials_are_taken_from_any_scheme() {
        assert_eq!(credential("Bearer abc"), "abc");
        assert_eq!(credential("bearer abc"), "abc");
        assert_eq!(credential("Basic dXNlcg=="), "dXNlcg==");
        assert_eq!(credential("abc"), "abc");
        assert_eq!(credential("  Bearer   abc  "), "abc");
        assert_eq!(credential("Bearer "), "");
    }

    #[test]
    fn longer_secrets_are_replaced_first() {
        let s = Secrets::new(["tok", "tok-long", ""], Some("Bearer pass"));
        assert_eq!(s.redact("tok-long tok pass Bearer pass"), "<redacted> <redacted> <redacted> Bearer <redacted>");
        assert_eq!(String::from_utf8(s.redact_bytes(b"xtok-longtokx")).unwrap(), "x<redacted><redacted>x");
    }

    #[test]
    fn status_body_is_trimmed_redacted_then_cut() {
        let secrets = Secrets::new(["s3cret"], None);
        assert_eq!(status_body(b"  oops s3cret \n", &secrets), "oops <redacted>");
        let long = format!("{}é", "a".repeat(999));
        assert_eq!(status_body(long.as_bytes(), &secrets), format!("{}\u{FFFD}", "a".repeat(999)));
        // The cut leaves two of the three bytes of `€`: one broken sequence, one U+FFFD.
        let long = format!("{}€", "a".repeat(998));
        assert_eq!(status_body(long.as_bytes(), &secrets), format!("{}\u{FFFD}", "a".repeat(998)));
        let exact = "a".repeat(1000);
        assert_eq!(status_body(format!("{exact}bbb").as_bytes(), &secrets), exact);
        // Redaction happens before the cut, so a secret straddling byte 1000 never leaks.
        let straddle = format!("{}s3cret", "a".repeat(997));
        assert_eq!(status_body(straddle.as_bytes(), &secrets), format!("{}<re", "a".repeat(997)));
    }
}
