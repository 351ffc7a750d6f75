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
//! ([`generate`]); `eval suite` runs semble's annotated benchmark over
//! checkouts of its repositories and compares with its published numbers
//! ([`suite`]).

pub mod bm25;
pub mod generate;
pub mod metrics;
pub mod pipelines;
pub mod queries;
pub mod report;
pub mod suite;

use std::path::{Path, PathBuf};

use self::pipelines::Pipeline;
use self::report::{PipelineReport, QueryOutcome};

/// What one `eval` run compares.
#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// The query set: JSON Lines of {"query", "source"?, "path"?, "relevant": ["path#La-Lb", …]}.
    pub queries: PathBuf,
    /// A TOML file of `[[pipeline]]` tables; `None`: the default comparison over `store`.
    pub pipelines: Option<PathBuf>,
    /// Store folder of the default comparison.
    pub store: PathBuf,
    /// Also write the numbers and every query's ranks to this JSON file.
    pub json: Option<PathBuf>,
    /// Results kept per query (metrics are at 10).
    pub limit: usize,
}

/// `eval generate`: writes a query set and a corpus from `repo`'s doc
/// comments into `out`, and returns the generator's counts.
pub async fn generate(repo: &Path, out: &Path, max: Option<usize>) -> Result<String, String> {
    let (repo, out) = (repo.to_owned(), out.to_owned());
    let summary = tokio::task::spawn_blocking(move || generate::generate(&repo, &out, max))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    Ok(format!("{summary}\n"))
}

/// Runs every pipeline over the query set and returns the Markdown table;
/// skipped pipelines are reported on stderr.
pub async fn run(opts: &EvalOptions) -> Result<String, String> {
    let queries_file = &opts.queries;
    let text = std::fs::read_to_string(queries_file)
        .map_err(|e| format!("cannot read the query set {}: {e}", queries_file.display()))?;
    let queries = queries::parse(&text).map_err(|e| format!("query set {}:\n{e}", queries_file.display()))?;

    let ctx = rr_core::FactoryContext::new(rr_engine::user_agent());
    let registry = rr_core::Registry::builtin().map_err(|e| e.to_string())?;
    let built = match &opts.pipelines {
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
            let env = |name: &str| std::env::var(name).ok();
            let (built, missing) =
                pipelines::defaults(&opts.store, &registry, &ctx, &env).map_err(|e| e.to_string())?;
            for name in missing {
                eprintln!("skipped pipeline {name:?}: a reranker kind it needs is not registered in this build");
            }
            built
        }
    };

    let mut reports = Vec::with_capacity(built.len());
    for pipeline in &built {
        reports.push(evaluate(pipeline, &queries, opts.limit).await.map_err(|e| e.to_string())?);
    }
    if let Some(path) = &opts.json {
        let json = report::to_json(&reports, &queries_file.display().to_string(), opts.limit);
        let body = serde_json::to_vec_pretty(&json).map_err(|e| e.to_string())?;
        std::fs::write(path, body).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(report::markdown(&reports))
}

/// Every query through one pipeline, one after the other.
pub async fn evaluate(
    pipeline: &Pipeline,
    queries: &[queries::EvalQuery],
    limit: usize,
) -> Result<PipelineReport, pipelines::PipelineError> {
    let mut outcomes = Vec::with_capacity(queries.len());
    let engine = pipeline.engine();
    for query in queries {
        let (results, timings) = pipeline.run(&engine, query, limit).await?;
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
            distances: results.iter().map(|c| c.distance).collect(),
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
