//! `repo-retriever eval`: measures retrieval quality and latency of several
//! pipelines on one query set, so that a reranker is kept because it helps
//! on *this* code, not because it usually helps (a cross-encoder can lower
//! recall on code).
//!
//! Each query runs through the pipeline's steps one by one, timed:
//! embed (with the store's query prefix; not for lexical retrieval) → the
//! store's dense, lexical or hybrid ranking through the query's filter →
//! each rerank stage → the first `--limit`. Every table ends with a `bm25`
//! row ([`bm25`]): plain Okapi BM25 over all the chunks of the store.
//! The ranked list is scored against the query's targets ([`metrics`]).
//! Queries run one at a time so latencies are not inflated by each other.
//!
//! `eval generate` builds a query set from a repository's doc comments
//! ([`generate`]).

pub mod bm25;
pub mod generate;
pub mod metrics;
pub mod pipelines;
pub mod queries;
pub mod report;

use std::path::PathBuf;

use clap::{Args, Subcommand};

use self::pipelines::Pipeline;
use self::report::{PipelineReport, QueryOutcome};

/// `repo-retriever eval`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct EvalCmd {
    #[command(subcommand)]
    pub command: Option<EvalSubcommand>,
    /// The query set: JSON Lines of {"query", "source"?, "path"?, "relevant": ["path#La-Lb", …]}.
    #[arg(long, required = true)]
    pub queries: Option<PathBuf>,
    /// A TOML file of [[pipeline]] tables to compare [default: the embedded store dense, lexical and
    /// hybrid, with each reranker, and the bm25 baseline].
    #[arg(long)]
    pub pipelines: Option<PathBuf>,
    /// Store folder of the default comparison [default: $REPO_RETRIEVER_STORE or ./.repo-retriever]
    #[arg(long, conflicts_with = "pipelines")]
    pub store: Option<PathBuf>,
    /// Also write the numbers and every query's ranks to this JSON file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Results kept per query (metrics are at 10).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..=100))]
    pub limit: u16,
}

#[derive(Debug, Subcommand)]
pub enum EvalSubcommand {
    /// Write a query set and a corpus from a repository's doc comments (CodeSearchNet style).
    Generate(GenerateCmd),
}

#[derive(Debug, Args)]
pub struct GenerateCmd {
    /// The repository folder.
    pub repo_dir: PathBuf,
    /// Output folder: queries.jsonl and corpus/ (the copy with the used comments blanked).
    #[arg(long)]
    pub out: PathBuf,
    /// Keep at most this many queries, evenly spread over the repository.
    #[arg(long)]
    pub max: Option<usize>,
}

/// Runs `eval` or `eval generate`; prints the table (or the generator's
/// counts) on stdout.
pub async fn run(cmd: EvalCmd) -> Result<bool, String> {
    if let Some(EvalSubcommand::Generate(g)) = cmd.command {
        let (repo, out, max) = (g.repo_dir, g.out, g.max);
        let summary = tokio::task::spawn_blocking(move || generate::generate(&repo, &out, max))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        crate::cli::stdout(&format!("{summary}\n"))?;
        return Ok(true);
    }
    let Some(queries_file) = cmd.queries else { return Err("--queries is required".into()) };
    let text = std::fs::read_to_string(&queries_file)
        .map_err(|e| format!("cannot read the query set {}: {e}", queries_file.display()))?;
    let queries = queries::parse(&text).map_err(|e| format!("query set {}:\n{e}", queries_file.display()))?;

    let ctx = rr_core::FactoryContext::new(crate::app::user_agent());
    let registry = rr_core::Registry::builtin().map_err(|e| e.to_string())?;
    let built = match &cmd.pipelines {
        Some(path) => {
            let file = pipelines::read(path).map_err(|e| e.to_string())?;
            let (mut built, baseline) = pipelines::build(&file, &registry, &ctx).map_err(|e| e.to_string())?;
            match baseline {
                Some(bm25) => built.push(bm25),
                None => {
                    eprintln!("no bm25 row: it ranks the chunks of an embedded store folder, and no pipeline reads one")
                }
            }
            built
        }
        None => {
            let store = cmd.store.clone().unwrap_or_else(crate::local::default_store_dir);
            let env = |name: &str| std::env::var(name).ok();
            let (built, missing) = pipelines::defaults(&store, &registry, &ctx, &env).map_err(|e| e.to_string())?;
            for name in missing {
                eprintln!("skipped pipeline {name:?}: a reranker kind it needs is not registered in this build");
            }
            built
        }
    };

    let limit = usize::from(cmd.limit);
    let mut reports = Vec::with_capacity(built.len());
    for pipeline in &built {
        reports.push(evaluate(pipeline, &queries, limit).await.map_err(|e| e.to_string())?);
    }
    crate::cli::stdout(&report::markdown(&reports))?;
    if let Some(path) = &cmd.json {
        let json = report::to_json(&reports, &queries_file.display().to_string(), limit);
        let body = serde_json::to_vec_pretty(&json).map_err(|e| e.to_string())?;
        std::fs::write(path, body).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(true)
}

/// Every query through one pipeline, one after the other.
pub async fn evaluate(
    pipeline: &Pipeline,
    queries: &[queries::EvalQuery],
    limit: usize,
) -> Result<PipelineReport, pipelines::PipelineError> {
    let mut outcomes = Vec::with_capacity(queries.len());
    for query in queries {
        let (results, timings) = pipeline.run(query, limit).await?;
        let matches: Vec<Vec<usize>> = results
            .iter()
            .map(|c| {
                let m = &c.chunk.metadata;
                query.targets.iter().enumerate().filter(|(_, t)| t.matches(m)).map(|(i, _)| i).collect()
            })
            .collect();
        outcomes.push(QueryOutcome {
            line: query.line,
            query: query.query.clone(),
            targets: query.targets.iter().map(ToString::to_string).collect(),
            results: results.iter().map(|c| c.chunk.metadata.path_with_lines()).collect(),
            metrics: metrics::score(&matches, query.targets.len()),
            timings,
        });
    }
    Ok(PipelineReport {
        name: pipeline.name.clone(),
        stages: pipeline.stage_names(),
        retrieval: pipeline.retrieval_ran().to_string(),
        candidates: pipeline.candidates,
        queries: outcomes,
    })
}
