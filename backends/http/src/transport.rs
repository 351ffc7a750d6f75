//! Go's words for what went wrong below HTTP.
//!
//! The reference server prints Go's `*url.Error` (`Get "<url>": dial tcp
//! 127.0.0.1:8000: connect: connection refused`). reqwest's errors carry the
//! same facts in a chain of sources; this module walks the chain and says them
//! the way Go would for the failures that happen in practice, and falls back
//! to the innermost cause otherwise.

use std::error::Error as StdError;
use std::io;

/// The attempt's deadline passed before the response head arrived.
pub(crate) const AWAITING_HEADERS_TIMEOUT: &str =
    "context deadline exceeded (Client.Timeout exceeded while awaiting headers)";
/// The attempt's deadline passed while the body was being read.
pub(crate) const READING_BODY_TIMEOUT: &str =
    "context deadline exceeded (Client.Timeout or context cancellation while reading body)";

fn chain<'a>(err: &'a (dyn StdError + 'static)) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    std::iter::successors(Some(err), |e: &&'a (dyn StdError + 'static)| (*e).source())
}

fn find_io<'a>(err: &'a (dyn StdError + 'static)) -> Option<&'a io::Error> {
    chain(err).find_map(|e| e.downcast_ref::<io::Error>())
}

fn find_hyper<'a>(err: &'a (dyn StdError + 'static)) -> Option<&'a hyper::Error> {
    chain(err).find_map(|e| e.downcast_ref::<hyper::Error>())
}

/// `dial tcp` names the address it dialled: the host as written in the URL
/// (IPv6 in brackets) and the port, defaulted by scheme.
fn host_port(url: &reqwest::Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port_or_known_default() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    }
}

/// An OS error as Go's `syscall.Errno` prints it: the C library's text,
/// lower-cased at the start, without Rust's `(os error N)` suffix.
fn errno_text(err: &io::Error) -> String {
    let text = err.to_string();
    let text = match (err.raw_os_error(), text.rfind(" (os error ")) {
        (Some(_), Some(at)) => &text[..at],
        _ => text.as_str(),
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn innermost(err: &(dyn StdError + 'static)) -> String {
    let last = chain(err).last().unwrap_or(err);
    match last.downcast_ref::<io::Error>() {
        Some(io) => errno_text(io),
        None => last.to_string(),
    }
}

/// What Go would put after `Get "<url>": ` when sending failed.
pub(crate) fn describe_send_error(err: &reqwest::Error, url: &reqwest::Url) -> String {
    if err.is_timeout() {
        return AWAITING_HEADERS_TIMEOUT.to_owned();
    }
    let dyn_err: &(dyn StdError + 'static) = err;
    if err.is_connect() {
        if err.is_dns() {
            // Go also names the resolver it asked when it uses its own; the
            // host and the verdict are the parts an operator acts on.
            return format!("dial tcp: lookup {}: no such host", url.host_str().unwrap_or_default());
        }
        if let Some(io) = find_io(dyn_err)
            && io.raw_os_error().is_some()
        {
            return format!("dial tcp {}: connect: {}", host_port(url), errno_text(io));
        }
        let inner = innermost(dyn_err);
        if inner.contains("UnknownIssuer") {
            return "tls: failed to verify certificate: x509: certificate signed by unknown authority".to_owned();
        }
        return inner;
    }
    if let Some(hyper) = find_hyper(dyn_err)
        && hyper.is_incomplete_message()
    {
        // The server closed the connection without answering.
        return "EOF".to_owned();
    }
    innermost(dyn_err)
}

/// What Go would put after `read response: ` when the body broke off.
pub(crate) fn describe_read_error(err: &reqwest::Error) -> String {
    if err.is_timeout() {
        return READING_BODY_TIMEOUT.to_owned();
    }
    let dyn_err: &(dyn StdError + 'static) = err;
    let incomplete = find_hyper(dyn_err).is_some_and(hyper::Error::is_incomplete_message)
        || find_io(dyn_err).is_some_and(|io| io.kind() == io::ErrorKind::UnexpectedEof);
    if incomplete {
        return "unexpected EOF".to_owned();
    }
    innermost(dyn_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn errno_text_is_go_style() {
        let refused = io::Error::from_raw_os_error(111);
        assert_eq!(errno_text(&refused), "connection refused");
        let custom = io::Error::other("Something odd");
        assert_eq!(errno_text(&custom), "something odd");
    }

    #[test]
    fn host_port_defaults_by_scheme() {
        let u = |s: &str| reqwest::Url::parse(s).unwrap();
        assert_eq!(host_port(&u("http://127.0.0.1:8000/x")), "127.0.0.1:8000");
        assert_eq!(host_port(&u("https://chroma.example.com/x")), "chroma.example.com:443");
        assert_eq!(host_port(&u("http://[::1]/x")), "[::1]:80");
    }
}
