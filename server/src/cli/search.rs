//! `repo-retriever search`: the embedded store searched as the MCP tool
//! searches it, the same Markdown on stdout.

use clap::Args;

use super::args::{RerankArgs, RetrievalArgs, StoreArg};

#[derive(Debug, Args)]
pub struct SearchCmd {
    /// What to look for.
    pub query: String,
    #[command(flatten)]
    pub store: StoreArg,
    /// owner/repository or owner/repository@branch.
    #[arg(long, default_value = "", hide_default_value = true)]
    pub source: String,
    /// Path pattern: * crosses folders, **/ matches zero or more folders, ? one character.
    #[arg(long, default_value = "", hide_default_value = true)]
    pub path: String,
    /// Maximum excerpts, 1 to 20 [default: 5].
    #[arg(long, default_value_t = 0, hide_default_value = true)]
    pub limit: i64,
    /// Only chunks of this language (one the index holds, e.g. rust, python, markdown).
    #[arg(long)]
    pub language: Option<String>,
    /// Only files of this kind: source, test, example, bench, docs, generated or vendored.
    #[arg(long)]
    pub kind: Option<String>,
    #[command(flatten)]
    pub retrieval: RetrievalArgs,
    #[command(flatten)]
    pub rerank: RerankArgs,
}

/// Prints the tool's answer; a tool error goes to stderr and fails the command.
pub async fn run(args: SearchCmd) -> Result<bool, String> {
    let open = rr_engine::local::open(&args.store.dir()).map_err(|e| e.to_string())?;
    let facets = SearchFacets(rr_engine::local::StoreFacets::new(&open));
    if let Err(text) = rr_mcp::search::check_facets(args.language.as_deref(), args.kind.as_deref(), &facets) {
        eprintln!("{text}");
        return Ok(false);
    }
    let search = rr_core::SearchArgs {
        query: args.query,
        source: args.source,
        path: args.path,
        limit: args.limit,
        language: args.language.unwrap_or_default(),
        kind: args.kind.unwrap_or_default(),
    };
    let engine = args.retrieval.engine(&open, args.rerank.reranker()?)?;
    let ctx = rr_core::CallContext::default();
    let limits = rr_core::ArgLimits::default();
    let outcome = rr_mcp::search::call_with(&engine, search, &ctx, &limits, rr_mcp::ErrorText::Summary).await;
    if outcome.is_error {
        eprintln!("{}", outcome.text);
    } else {
        super::output::stdout(&format!("{}\n", outcome.text))?;
    }
    Ok(!outcome.is_error)
}

/// [`rr_engine::local::StoreFacets`] as the `search` tool reads them.
pub struct SearchFacets(pub rr_engine::local::StoreFacets);

impl rr_mcp::search::SearchFacets for SearchFacets {
    fn languages(&self) -> Vec<String> {
        self.0.languages()
    }

    fn kinds(&self) -> Vec<String> {
        self.0.kinds()
    }
}
