//! Diagnostics on stderr: which targets speak, and at what level.
//!
//! stdout belongs to the protocol (stdio) or to the request log (HTTP), so
//! every diagnostic goes to stderr, and a stdio client shows that stream to
//! its user. The libraries underneath (rmcp, hyper, h2, reqwest, tower) log
//! every session, connection, pooled socket and message at INFO and DEBUG,
//! rmcp a whole tool result with each answer; none of that helps an operator
//! find out why a search failed. So they speak only at WARN unless `RUST_LOG`
//! asks for more, and `--debug` turns on this server's own lines (one per
//! backend request, retry and failure) and nothing of theirs. rmcp's
//! service speaks only at ERROR: it warns of every JSON-RPC error it
//! answers (an unknown tool, invalid arguments), which is the client's
//! mistake, already in the client's answer, and would fill a stdio
//! client's log with a line per call.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// What is logged when neither `--debug` nor `RUST_LOG` says otherwise:
/// warnings and errors, of every crate.
pub const QUIET: &str = "warn,rmcp::service=error";

/// `--debug`: this server's crates at DEBUG, everything else at WARN. A
/// target directive matches every target that starts with it, so `rr_`
/// covers each `rr-*` library.
pub const DEBUG: &str = "warn,rmcp::service=error,repo_retriever=debug,rr_=debug";

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
