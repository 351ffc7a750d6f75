//! Diagnostics on stderr: which targets speak, and at what level.
//!
//! stdout belongs to the protocol (stdio) or to the request log (HTTP), so
//! every diagnostic goes to stderr, and a stdio client shows that stream to
//! its user. The libraries underneath (rmcp, hyper, h2, reqwest, tower) log
//! every session, connection, pooled socket and message at INFO and DEBUG,
//! rmcp a whole tool result with each answer; none of that helps an operator
//! find out why a search failed. So they speak only at WARN unless `RUST_LOG`
//! asks for more, and `--debug` turns on this server's own lines (one per
//! backend request, retry and failure) and nothing of theirs.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// What is logged when neither `--debug` nor `RUST_LOG` says otherwise:
/// warnings and errors, of every crate.
pub const QUIET: &str = "warn";

/// `--debug`: this server's crates at DEBUG, everything else at WARN. A
/// target directive matches every target that starts with it, so `rr_`
/// covers each `rr-*` library.
pub const DEBUG: &str = "warn,repo_retriever=debug,rr_=debug";

/// `serve --watch`: one line per update of the followed checkout.
const WATCH: &str = "rr_engine::watch=info";

/// How the process is started, as far as its logging is concerned.
#[derive(Debug, Clone, Copy, Default)]
pub struct Logging {
    /// `--debug` of the drop-in.
    pub debug: bool,
    /// `serve --watch`: the watch reports each update.
    pub watch: bool,
}

impl Logging {
    /// The filter directives: `RUST_LOG` when it is set and not blank (the
    /// operator's word is final), else [`DEBUG`] or [`QUIET`], with the
    /// watch's updates added.
    pub fn directives(self, rust_log: Option<&str>) -> String {
        if let Some(rust_log) = rust_log.map(str::trim).filter(|v| !v.is_empty()) {
            return rust_log.to_owned();
        }
        match (self.debug, self.watch) {
            // DEBUG already has the watch's lines.
            (true, _) => DEBUG.to_owned(),
            (false, true) => format!("{QUIET},{WATCH}"),
            (false, false) => QUIET.to_owned(),
        }
    }

    /// Installs the process's subscriber, writing to stderr, with `RUST_LOG`
    /// read from the environment.
    pub fn init(self) {
        let directives = self.directives(std::env::var("RUST_LOG").ok().as_deref());
        // Only fails when a subscriber is already set, and then that one stays.
        let _ = tracing::subscriber::set_global_default(subscriber(&directives, std::io::stderr));
    }
}

/// A subscriber that writes the events `directives` let through to `writer`,
/// one plain line each (no colours: stderr is often a client's log file).
/// A directive that does not parse is skipped.
pub fn subscriber<W>(directives: &str, writer: W) -> impl tracing::Subscriber + Send + Sync + 'static
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .with_writer(writer)
        .with_ansi(false)
        .with_env_filter(EnvFilter::builder().parse_lossy(directives))
        .finish()
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex, PoisonError};

    use super::*;

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
        assert_eq!(directives, "warn");
        assert_eq!(messages(&directives), ["a dependency's warning", "store skipped"]);
    }

    #[test]
    fn debug_shows_our_lines_and_only_warnings_of_dependencies() {
        let directives = Logging { debug: true, watch: false }.directives(None);
        assert_eq!(directives, "warn,repo_retriever=debug,rr_=debug");
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
        assert_eq!(directives, "warn,rr_engine::watch=info");
        assert_eq!(messages(&directives), ["watch: updated", "a dependency's warning", "store skipped"]);
        assert_eq!(Logging { debug: true, watch: true }.directives(None), DEBUG);
    }

    #[test]
    fn rust_log_overrides_both_modes() {
        for logging in [Logging::default(), Logging { debug: true, watch: true }] {
            assert_eq!(logging.directives(Some("rmcp=info")), "rmcp=info");
            assert_eq!(logging.directives(Some(" h2=debug ")), "h2=debug");
        }
        assert_eq!(messages("rmcp=info"), ["Service initialized as server"]);
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
}
