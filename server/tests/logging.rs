//! What reaches stderr by default, with `--debug` and with `RUST_LOG`: our own lines, not the
//! dependencies' chatter.

use std::sync::{Arc, Mutex, PoisonError};

use repo_retriever::logging::*;

/// Emits, under `directives`, one line from each kind of target a
/// session has, and returns what was written.
fn written(directives: &str) -> String {
    let buffer = Arc::new(Mutex::new(Vec::new()));
    let sink = buffer.clone();
    let writer = move || Sink(sink.clone());
    tracing::subscriber::with_default(subscriber(directives, writer), || {
        tracing::info!(target: "rmcp::service", "Service initialized as server");
        tracing::debug!(target: "rmcp::service", "response message: the whole tool result");
        tracing::debug!(target: "hyper_util::client::legacy::pool", "pooling idle connection");
        tracing::debug!(target: "h2::codec::framed_write", "send frame");
        tracing::debug!(target: "rr_http::client", "backend request");
        tracing::debug!(target: "repo_retriever::app", "Debug mode enabled.");
        tracing::info!(target: "rr_engine::watch", "watch: updated");
        tracing::warn!(target: "rmcp::service", "response error");
        tracing::warn!(target: "reqwest::connect", "a dependency's warning");
        tracing::warn!(target: "rr_core::pipeline", "store skipped");
    });
    let bytes = buffer.lock().unwrap_or_else(PoisonError::into_inner).clone();
    String::from_utf8(bytes).unwrap()
}

/// The messages of the lines written, in order.
fn messages(directives: &str) -> Vec<String> {
    written(directives)
        .lines()
        .map(|line| line.split_once(": ").map_or(line, |(_, message)| message).to_owned())
        .collect()
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn default_logs_only_warnings() {
    let directives = Logging::default().directives(None);
    assert_eq!(directives, "warn,rmcp::service=error");
    assert_eq!(messages(&directives), ["a dependency's warning", "store skipped"]);
}

#[test]
fn debug_shows_our_lines_and_only_warnings_of_dependencies() {
    let directives = Logging { debug: true, watch: false }.directives(None);
    assert_eq!(directives, "warn,rmcp::service=error,repo_retriever=debug,rr_=debug");
    assert_eq!(
        messages(&directives),
        ["backend request", "Debug mode enabled.", "watch: updated", "a dependency's warning", "store skipped"]
    );
    let written = written(&directives);
    for chatter in ["Service initialized", "response message", "pooling idle connection", "send frame"] {
        assert!(!written.contains(chatter), "{chatter:?} in\n{written}");
    }
}

#[test]
fn watch_adds_its_updates_to_the_warnings() {
    let directives = Logging { debug: false, watch: true }.directives(None);
    assert_eq!(directives, "warn,rmcp::service=error,rr_engine::watch=info");
    assert_eq!(messages(&directives), ["watch: updated", "a dependency's warning", "store skipped"]);
    assert_eq!(Logging { debug: true, watch: true }.directives(None), DEBUG);
}

#[test]
fn rust_log_overrides_both_modes() {
    for logging in [Logging::default(), Logging { debug: true, watch: true }] {
        assert_eq!(logging.directives(Some("rmcp=info")), "rmcp=info");
        assert_eq!(logging.directives(Some(" h2=debug ")), "h2=debug");
    }
    assert_eq!(messages("rmcp=info"), ["Service initialized as server", "response error"]);
    assert_eq!(messages("hyper_util=debug,h2=off"), ["pooling idle connection"]);
}

#[test]
fn blank_rust_log_is_unset() {
    assert_eq!(Logging::default().directives(Some("")), QUIET);
    assert_eq!(Logging { debug: true, watch: false }.directives(Some("  ")), DEBUG);
}

#[test]
fn a_directive_that_does_not_parse_is_skipped() {
    assert_eq!(messages("rr_http=debug,hyper=loud"), ["backend request"]);
}
