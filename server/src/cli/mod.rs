//! Subcommands beyond the drop-in server: `index`, `search`, `serve`,
//! `plugins` and `eval`, a module each. Invoked without a subcommand the
//! binary behaves as `mcp-chromadb-repo-search`, Go flag syntax included.

use clap::{Parser, Subcommand};

pub mod args;
pub mod eval;
pub mod index;
mod output;
pub mod plugins;
pub mod search;
pub mod serve;

pub use serve::{LocalServices, REMOTE_MODE, REMOTE_RERANK, local_services};

/// Words that select a subcommand when they come first.
pub const SUBCOMMANDS: [&str; 5] = ["index", "search", "serve", "plugins", "eval"];

#[derive(Debug, Parser)]
#[command(name = "repo-retriever", version, about = "Repository search for AI agents over MCP")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Index a folder into the embedded store (records identical to chromadb-repo-indexer's).
    Index(Box<index::IndexArgs>),
    /// Search the embedded store and print the same Markdown as the MCP tool.
    Search(search::SearchCmd),
    /// Serve MCP over the embedded store, or a Chroma collection with --chroma-url (stdio, or HTTP with --http).
    Serve(Box<serve::ServeCmd>),
    /// List the registered store, embedder and reranker kinds (name, kind, origin).
    Plugins(plugins::PluginsCmd),
    /// Compare retrieval pipelines (rerankers) on a query set: MRR, nDCG, recall and latency.
    Eval(eval::EvalCmd),
}

/// The text of `repo-retriever --help`: the subcommands, one line each, then the drop-in flags.
pub fn help() -> String {
    use clap::CommandFactory as _;
    crate::config::help(&Cli::command())
}

/// Runs a subcommand. `Ok(false)` means it finished but reports failure
/// (a search that answered with a tool error).
pub async fn run(cli: Cli) -> Result<bool, String> {
    match cli.command {
        Command::Index(args) => index::run(*args).await,
        Command::Search(args) => search::run(args).await,
        Command::Serve(args) => serve::run(*args).await,
        Command::Plugins(args) => plugins::run(args),
        Command::Eval(args) => eval::run(args).await,
    }
}
