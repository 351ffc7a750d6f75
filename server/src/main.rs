//! `repo-retriever`: a subcommand (`index`, `search`, `serve`, `eval`,
//! `plugins`), or, started with the flags, environment and YAML of
//! `mcp-chromadb-repo-search`, the same MCP `search` tool as that server.

use std::process::ExitCode;

use repo_retriever::config::{self, Invocation};
use repo_retriever::logging::Logging;
use repo_retriever::{app, cli, limits};
use rr_mcp::{McpServer, http, stdio};

/// mimalloc rather than glibc's malloc: in a search call, reading Chroma's answer into JSON values,
/// glibc's malloc and free took about 29 % of the instructions, mimalloc's take about 7 %.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The variables of `serve --http`'s bearer tokens, which the drop-in does not read.
const TOKEN_VARIABLES: [&str; 2] = [rr_mcp::auth::TOKENS_ENV, "REPO_RETRIEVER_TOKEN_FILE"];

fn main() -> ExitCode {
    let args_os: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    // A subcommand's arguments are clap's to read: a path may be any bytes.
    if args_os.first().and_then(|a| a.to_str()).is_some_and(|a| cli::SUBCOMMANDS.contains(&a)) {
        return run_subcommand();
    }
    let args: Vec<String> = match args_os.into_iter().map(std::ffi::OsString::into_string).collect() {
        Ok(args) => args,
        Err(bad) => {
            eprintln!("invalid argument {:?}: not valid UTF-8", bad.to_string_lossy());
            return ExitCode::from(2);
        }
    };
    let env = |name: &str| std::env::var(name).ok();
    let config = match config::resolve(&args, &env) {
        Ok(Invocation::Serve(config)) => config,
        Ok(Invocation::Version) => {
            println!("{}", app::version_line());
            return ExitCode::SUCCESS;
        }
        Ok(Invocation::Help) => {
            print!("{}", cli::help());
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprint!("{}", e.stderr_output());
            return ExitCode::from(e.exit_code() as u8);
        }
    };
    Logging { debug: config.debug, watch: false }.init();
    for name in TOKEN_VARIABLES.iter().filter(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty())) {
        tracing::warn!(
            "{name} is ignored: the drop-in server (no subcommand) checks no bearer token and passes the \
             client's Authorization on to Chroma; `repo-retriever serve --http` reads it"
        );
    }
    if config.debug {
        tracing::debug!("Debug mode enabled.");
    }
    // One stdio session reads one pipe: a single-threaded runtime serves it
    // with fewer threads to start and no hand-offs between workers (searches
    // of the embedded store run on the blocking pool either way). HTTP
    // serves many clients at once and keeps a worker per core.
    let runtime = if config.http_addr.is_empty() { current_thread_runtime() } else { runtime() };
    let Some(runtime) = runtime else { return ExitCode::FAILURE };
    match runtime.block_on(run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("Fatal: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(config: config::Config) -> Result<(), String> {
    let engine = app::build_engine(&config)?;
    let limits = limits::search_limits(&|name| std::env::var(name).ok())?;
    let server = McpServer::builder(engine, app::NAME, app::version_line()).limits(limits).build();
    if config.http_addr.is_empty() {
        return stdio::serve(server).await.map_err(|e| format!("stdio MCP server terminated: {e}"));
    }
    let listener = http::bind(&config.http_addr).await.map_err(|e| format!("Streamable HTTP server error: {e}"))?;
    http::serve(listener, server, http::HttpOptions::default())
        .await
        .map_err(|e| format!("Streamable HTTP server error: {e}"))
}

fn runtime() -> Option<tokio::runtime::Runtime> {
    built(tokio::runtime::Builder::new_multi_thread().enable_all().build())
}

fn current_thread_runtime() -> Option<tokio::runtime::Runtime> {
    built(tokio::runtime::Builder::new_current_thread().enable_all().build())
}

fn built(runtime: std::io::Result<tokio::runtime::Runtime>) -> Option<tokio::runtime::Runtime> {
    match runtime {
        Ok(rt) => Some(rt),
        Err(e) => {
            eprintln!("Fatal: {e}");
            None
        }
    }
}

/// `index`, `search` and `serve` on the embedded store.
fn run_subcommand() -> ExitCode {
    use clap::Parser as _;
    let parsed = cli::Cli::parse();
    let stdio = matches!(&parsed.command, cli::Command::Serve(serve) if serve.http.is_none());
    // What the watch did, and why an update failed, is the operator's only
    // view of it: one line per update on stderr.
    let watch = matches!(&parsed.command, cli::Command::Serve(serve) if serve.watch.is_some());
    Logging { debug: false, watch }.init();
    let runtime = if stdio { current_thread_runtime() } else { runtime() };
    let Some(runtime) = runtime else { return ExitCode::FAILURE };
    match runtime.block_on(cli::run(parsed)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("Error: {message}");
            ExitCode::FAILURE
        }
    }
}
