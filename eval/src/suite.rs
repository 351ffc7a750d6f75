//! `repo-retriever eval suite`: semble's annotated code-search benchmark,
//! run in-process and scored exactly as semble scores its own runs, so that
//! our number and the published ones in `published.json` are comparable.
//!
//! A suite folder holds `repos.json` (name, language, `split`,
//! `benchmark_root`), `annotations/<name>.json` (queries with the files, or
//! line spans, that answer them) and `published.json` (NDCG@10 per
//! repository of each method semble published). Each repository is indexed
//! and searched through a [`SuiteBackend`], which the command line builds
//! from the same code as `repo-retriever index` and `repo-retriever search`:
//! the suite measures the product as a user runs it, not a pipeline put
//! together for the benchmark.
//!
//! The scoring is semble's, not the one of [`crate::metrics`]: a target is
//! found at the rank of the *first* result that matches it, the gains of the
//! distinct ranks found are summed, and the ideal list counts only the
//! targets whose file exists in the checkout (see [`score`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use async_trait::async_trait;
use rr_core::{CallContext, SearchArgs, SearchEngine};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::metrics::{self, K};

/// What the suite could not read or do, worded for the operator.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: {source}")]
    Parse { path: PathBuf, source: serde_json::Error },
    #[error("--repos: not in {repos_json}: {names}")]
    UnknownRepos { repos_json: PathBuf, names: String },
    #[error("{repo}: {message}")]
    Repo { repo: String, message: String },
}

/// One repository of `repos.json` (its other keys are for fetching it).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SuiteRepo {
    pub name: String,
    pub language: String,
    /// `dev` (tune on it) or `test` (decide on it).
    pub split: String,
    /// The folder to index, relative to the checkout; none: the whole checkout.
    #[serde(default)]
    pub benchmark_root: Option<String>,
}

impl SuiteRepo {
    /// The benchmark root without a trailing `/`, `None` for the whole checkout.
    pub fn root(&self) -> Option<&str> {
        self.benchmark_root.as_deref().map(|r| r.trim_end_matches('/')).filter(|r| !r.is_empty())
    }
}

/// What a query should find: a repository-relative path, or a line span of one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Target {
    Path(String),
    Span { path: String, start_line: i64, end_line: i64 },
}

impl Target {
    pub fn path(&self) -> &str {
        match self {
            Target::Path(path) | Target::Span { path, .. } => path,
        }
    }

    /// First and last line, both included; `None`: the whole file.
    pub fn lines(&self) -> Option<(i64, i64)> {
        match self {
            Target::Path(_) => None,
            Target::Span { start_line, end_line, .. } => Some((*start_line, *end_line)),
        }
    }

    /// Whether `hit`, whose path is relative to the indexed folder, is this
    /// target: `prefix` + its path equals the target's path or ends with it
    /// at a `/`, and its lines overlap the target's span when there is one.
    fn matched_by(&self, hit: &Hit, prefix: &str) -> bool {
        let full = format!("{prefix}{}", hit.path);
        let path = self.path();
        let same_file = full == path || full.strip_suffix(path).is_some_and(|head| head.ends_with('/'));
        same_file && self.lines().is_none_or(|(first, last)| hit.start_line <= last && first <= hit.end_line)
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Path(path) => f.write_str(path),
            Target::Span { path, start_line, end_line } => write!(f, "{path}#L{start_line}-L{end_line}"),
        }
    }
}

/// One query of `annotations/<name>.json`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Annotation {
    pub query: String,
    pub relevant: Vec<Target>,
    #[serde(default)]
    pub secondary: Vec<Target>,
    /// `symbol`, `semantic`, `architecture`, ….
    pub category: String,
}

impl Annotation {
    /// `relevant` then `secondary`: both count alike.
    pub fn targets(&self) -> Vec<Target> {
        self.relevant.iter().chain(&self.secondary).cloned().collect()
    }
}

/// `published.json`: NDCG@10 per method, per repository.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Published {
    #[serde(default)]
    pub methods: BTreeMap<String, BTreeMap<String, f64>>,
}

/// The method of semble's headline, shown beside ours per repository.
pub const HEADLINE_METHOD: &str = "semble-hybrid";

impl Published {
    /// The methods shown per repository: semble's headline and the BM25 rows, when published.
    pub fn shown(&self) -> Vec<&str> {
        let headline = self.methods.contains_key(HEADLINE_METHOD).then_some(HEADLINE_METHOD);
        headline.into_iter().chain(self.methods.keys().map(String::as_str).filter(|m| m.starts_with("bm25"))).collect()
    }

    /// The mean of `method` over `repos` (those it has a number for); `None` when it has none.
    pub fn mean<'a>(&self, method: &str, repos: impl IntoIterator<Item = &'a str>) -> Option<f64> {
        let scores = self.methods.get(method)?;
        let values: Vec<f64> = repos.into_iter().filter_map(|r| scores.get(r).copied()).collect();
        (!values.is_empty()).then(|| metrics::mean(values))
    }
}

/// The suite folder, read.
#[derive(Debug, Clone)]
pub struct Suite {
    pub dir: PathBuf,
    pub repos: Vec<SuiteRepo>,
    pub published: Published,
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, SuiteError> {
    let text = std::fs::read_to_string(path).map_err(|source| SuiteError::Read { path: path.to_owned(), source })?;
    serde_json::from_str(&text).map_err(|source| SuiteError::Parse { path: path.to_owned(), source })
}

/// Which half of the suite runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    Dev,
    Test,
    All,
}

impl std::str::FromStr for Split {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "dev" => Ok(Split::Dev),
            "test" => Ok(Split::Test),
            "all" => Ok(Split::All),
            other => Err(format!("unknown split {other:?}: dev, test or all")),
        }
    }
}

impl Suite {
    /// Reads `repos.json` and, when there is one, `published.json`.
    pub fn read(dir: &Path) -> Result<Suite, SuiteError> {
        let repos = read_json(&dir.join("repos.json"))?;
        let published_file = dir.join("published.json");
        let published = if published_file.exists() { read_json(&published_file)? } else { Published::default() };
        Ok(Suite { dir: dir.to_owned(), repos, published })
    }

    /// The queries of repository `name`.
    pub fn annotations(&self, name: &str) -> Result<Vec<Annotation>, SuiteError> {
        read_json(&self.dir.join("annotations").join(format!("{name}.json")))
    }

    /// The repositories of `split`, limited to `names` when some are given, in `repos.json`'s order.
    pub fn select(&self, split: Split, names: &[String]) -> Result<Vec<SuiteRepo>, SuiteError> {
        let unknown: Vec<&str> =
            names.iter().filter(|n| !self.repos.iter().any(|r| &r.name == *n)).map(String::as_str).collect();
        if !unknown.is_empty() {
            return Err(SuiteError::UnknownRepos {
                repos_json: self.dir.join("repos.json"),
                names: unknown.join(", "),
            });
        }
        Ok(self
            .repos
            .iter()
            .filter(|r| match split {
                Split::All => true,
                Split::Dev => r.split == "dev",
                Split::Test => r.split == "test",
            })
            .filter(|r| names.is_empty() || names.contains(&r.name))
            .cloned()
            .collect())
    }
}

/// One search result: its path relative to the indexed folder and its lines
/// (0 when unknown).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub path: String,
    pub start_line: i64,
    pub end_line: i64,
}

impl Hit {
    /// The result of a search, from its chunk's metadata. A one-line chunk
    /// may record its end as 0 or as its start; both mean that one line.
    pub fn from_metadata(m: &rr_core::Metadata) -> Hit {
        Hit { path: m.path.clone(), start_line: m.start_line, end_line: m.end_line.max(m.start_line) }
    }

    /// `path#L<start>-L<end>` below `prefix`, as the JSON lists results.
    fn display(&self, prefix: &str) -> String {
        if self.start_line <= 0 {
            format!("{prefix}{}", self.path)
        } else {
            format!("{prefix}{}#L{}-L{}", self.path, self.start_line, self.end_line)
        }
    }
}

/// One query scored.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryScore {
    /// The distinct 1-based ranks at which a target was found, ascending.
    pub found: Vec<usize>,
    /// How many targets have a file in the checkout: the size of the ideal list (capped at [`K`]).
    pub existing: usize,
    pub ndcg: f64,
}

/// `1/log2(rank + 1)`.
fn gain(rank: usize) -> f64 {
    1.0 / ((rank + 1) as f64).log2()
}

/// Scores the first [`K`] `hits` of a query against its `targets`, as
/// semble does: each target is found at the rank of the first hit that
/// matches it; DCG sums the gains of the distinct ranks found (two targets
/// in one hit gain once); the ideal DCG has min(K, n) gains, n the number of
/// targets for which `exists(path)` holds. `root` is the benchmark root the
/// hits' paths are relative to.
///
/// A target found although its file is not where the annotation says (it
/// matched a deeper path) still gains, so a query can score above 1, as it
/// does in semble's scoring.
pub fn score(hits: &[Hit], targets: &[Target], root: Option<&str>, exists: impl Fn(&str) -> bool) -> QueryScore {
    let prefix = root.map(|r| format!("{}/", r.trim_end_matches('/'))).filter(|p| p != "/").unwrap_or_default();
    let found: BTreeSet<usize> = targets
        .iter()
        .filter_map(|t| hits.iter().take(K).position(|h| t.matched_by(h, &prefix)).map(|i| i + 1))
        .collect();
    let existing = targets.iter().filter(|t| exists(t.path())).count();
    let ideal: f64 = (1..=existing.min(K)).map(gain).sum();
    let ndcg = if ideal == 0.0 { 0.0 } else { found.iter().map(|&r| gain(r)).sum::<f64>() / ideal };
    QueryScore { found: found.into_iter().collect(), existing, ndcg }
}

/// How the suite indexes and searches a repository: the command line's
/// `index` and `search` code.
#[async_trait]
pub trait SuiteBackend: Send + Sync {
    /// Brings `store` up to date with `folder`, as `repo-retriever index <folder> --store <store>` does.
    async fn index(&self, folder: &Path, store: &Path) -> Result<(), String>;
    /// The engine `repo-retriever search --store <store>` searches with, with this run's flags.
    fn engine(&self, store: &Path) -> Result<SearchEngine, String>;
}

/// What one `eval suite` run covers.
#[derive(Debug, Clone)]
pub struct SuiteOptions {
    pub suite: PathBuf,
    /// `<checkouts>/<name>` is a repository's checkout.
    pub checkouts: PathBuf,
    /// `<stores>/<name>` is a repository's store.
    pub stores: PathBuf,
    pub split: Split,
    /// Only these repositories (empty: all of the split).
    pub repos: Vec<String>,
    /// Remove each store first, so the index time is a full build.
    pub reindex: bool,
}

/// The store folder for `checkouts` when none is given: `stores` beside it.
pub fn default_stores(checkouts: &Path) -> PathBuf {
    let checkouts = std::fs::canonicalize(checkouts).unwrap_or_else(|_| checkouts.to_owned());
    match checkouts.parent() {
        Some(parent) => parent.join("stores"),
        None => checkouts.join("stores"),
    }
}

/// One query of a repository, run and scored.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryRun {
    pub query: String,
    pub category: String,
    pub targets: Vec<Target>,
    pub hits: Vec<Hit>,
    pub score: QueryScore,
    /// Wall time of the search, milliseconds.
    pub ms: f64,
    /// The time of each stage of the engine's chain ([`rr_core::StageTimings::stages`]).
    pub timings: rr_core::StageTimings,
    /// The search's error; it then scores as an empty list.
    pub error: Option<String>,
}

/// One repository, indexed and searched.
#[derive(Debug, Clone, PartialEq)]
pub struct RepoRun {
    pub repo: SuiteRepo,
    /// Wall time of the index call (little for a store already up to date).
    pub index_seconds: f64,
    pub queries: Vec<QueryRun>,
}

impl RepoRun {
    /// The repository's score: the mean NDCG@10 over its queries.
    pub fn ndcg(&self) -> f64 {
        metrics::mean(self.queries.iter().map(|q| q.score.ndcg))
    }

    /// The nearest-rank median of the query times, milliseconds.
    pub fn p50_ms(&self) -> f64 {
        metrics::percentile(&self.queries.iter().map(|q| q.ms).collect::<Vec<_>>(), 50.0)
    }

    /// The nearest-rank median of each stage's time, milliseconds, by stage name.
    pub fn stage_p50_ms(&self) -> serde_json::Map<String, Value> {
        let names = rr_core::StageTimings::default().stages().map(|(name, _)| name);
        names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let times: Vec<f64> =
                    self.queries.iter().map(|q| q.timings.stages()[i].1.as_secs_f64() * 1000.0).collect();
                ((*name).to_owned(), json!(metrics::percentile(&times, 50.0)))
            })
            .collect()
    }
}

/// A whole run: what ran, what was skipped and why, and the published numbers to compare with.
#[derive(Debug, Clone, PartialEq)]
pub struct SuiteReport {
    pub runs: Vec<RepoRun>,
    /// (repository, reason).
    pub skipped: Vec<(String, String)>,
    pub published: Published,
}

/// Indexes and searches every selected repository, one after the other
/// (queries one at a time, so their times do not inflate each other).
/// A repository without a checkout is skipped and reported; progress goes
/// to stderr.
pub async fn run(opts: &SuiteOptions, backend: &dyn SuiteBackend) -> Result<SuiteReport, SuiteError> {
    let suite = Suite::read(&opts.suite)?;
    let selected = suite.select(opts.split, &opts.repos)?;
    let mut report = SuiteReport { runs: Vec::new(), skipped: Vec::new(), published: suite.published.clone() };
    for repo in selected {
        let checkout = opts.checkouts.join(&repo.name);
        let folder = repo.root().map_or_else(|| checkout.clone(), |root| checkout.join(root));
        if !folder.is_dir() {
            eprintln!("skipped {}: no folder {}", repo.name, folder.display());
            report.skipped.push((repo.name.clone(), format!("no folder {}", folder.display())));
            continue;
        }
        let annotations = suite.annotations(&repo.name)?;
        let store = opts.stores.join(&repo.name);
        let fail = |message: String| SuiteError::Repo { repo: repo.name.clone(), message };
        if opts.reindex && store.exists() {
            if !store.join(rr_engine::local::SETTINGS_FILE).exists() {
                return Err(fail(format!("--reindex: {} is not a store folder, not removing it", store.display())));
            }
            std::fs::remove_dir_all(&store).map_err(|e| fail(format!("cannot remove {}: {e}", store.display())))?;
        }
        eprintln!("{}: indexing {} into {}", repo.name, folder.display(), store.display());
        let started = Instant::now();
        backend.index(&folder, &store).await.map_err(|e| fail(format!("index: {e}")))?;
        let index_seconds = started.elapsed().as_secs_f64();
        let engine = backend.engine(&store).map_err(fail)?;
        let queries = run_queries(&engine, &annotations, &repo, &checkout).await;
        let run = RepoRun { repo, index_seconds, queries };
        eprintln!(
            "{}: {} queries, NDCG@10 {:.3}, index {:.2} s, query p50 {:.2} ms",
            run.repo.name,
            run.queries.len(),
            run.ndcg(),
            run.index_seconds,
            run.p50_ms()
        );
        report.runs.push(run);
    }
    Ok(report)
}

/// Every annotation of `repo` through `engine` with [`K`] results, scored.
async fn run_queries(
    engine: &SearchEngine,
    annotations: &[Annotation],
    repo: &SuiteRepo,
    checkout: &Path,
) -> Vec<QueryRun> {
    let ctx = CallContext::default();
    let mut runs = Vec::with_capacity(annotations.len());
    for annotation in annotations {
        let args = SearchArgs { query: annotation.query.clone(), limit: K as i64, ..SearchArgs::default() };
        let started = Instant::now();
        let outcome = match args.validate() {
            Ok(request) => engine.search_outcome(&request, &ctx).await.map_err(|e| e.summary_message()),
            Err(e) => Err(e.to_string()),
        };
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        let (hits, timings, error) = match outcome {
            Ok(outcome) => {
                (outcome.results.iter().map(|c| Hit::from_metadata(&c.chunk.metadata)).collect(), outcome.timings, None)
            }
            Err(e) => {
                eprintln!("{}: query {:?}: {e}", repo.name, annotation.query);
                (Vec::new(), Default::default(), Some(e))
            }
        };
        let targets = annotation.targets();
        let score = score(&hits, &targets, repo.root(), |path| checkout.join(path).exists());
        runs.push(QueryRun {
            query: annotation.query.clone(),
            category: annotation.category.clone(),
            targets,
            hits,
            score,
            ms,
            timings,
            error,
        });
    }
    runs
}

/// The name of our row in the tables.
pub const OURS: &str = "repo-retriever";

/// One row of the summary: a method's mean of repository means over all,
/// dev and test repositories that ran (`None`: no repository of that half).
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRow {
    pub method: String,
    pub all: Option<f64>,
    pub dev: Option<f64>,
    pub test: Option<f64>,
}

impl SuiteReport {
    fn runs_of<'a>(&'a self, split: Option<&'a str>) -> impl Iterator<Item = &'a RepoRun> + 'a {
        self.runs.iter().filter(move |r| split.is_none_or(|s| r.repo.split == s))
    }

    /// How many repositories ran in all, dev and test.
    pub fn counts(&self) -> [usize; 3] {
        [None, Some("dev"), Some("test")].map(|s| self.runs_of(s).count())
    }

    /// Ours, then every published method (best first over all that ran), each
    /// averaged over the same repositories.
    pub fn summary(&self) -> Vec<SummaryRow> {
        let ours = |split: Option<&str>| {
            let means: Vec<f64> = self.runs_of(split).map(RepoRun::ndcg).collect();
            (!means.is_empty()).then(|| metrics::mean(means))
        };
        let mut rows =
            vec![SummaryRow { method: OURS.into(), all: ours(None), dev: ours(Some("dev")), test: ours(Some("test")) }];
        let theirs = |method: &str, split: Option<&str>| {
            self.published.mean(method, self.runs_of(split).map(|r| r.repo.name.as_str()))
        };
        let mut published: Vec<SummaryRow> = self
            .published
            .methods
            .keys()
            .map(|m| SummaryRow {
                method: m.clone(),
                all: theirs(m, None),
                dev: theirs(m, Some("dev")),
                test: theirs(m, Some("test")),
            })
            .collect();
        published.sort_by(|a, b| b.all.unwrap_or(f64::NEG_INFINITY).total_cmp(&a.all.unwrap_or(f64::NEG_INFINITY)));
        rows.extend(published);
        rows
    }

    /// Our mean of repository means per language: (language, repositories, NDCG@10).
    pub fn languages(&self) -> Vec<(String, usize, f64)> {
        let mut by: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for run in &self.runs {
            by.entry(&run.repo.language).or_default().push(run.ndcg());
        }
        by.into_iter().map(|(l, v)| (l.to_owned(), v.len(), metrics::mean(v))).collect()
    }

    /// Our mean NDCG@10 per query category, the queries of every repository
    /// that ran pooled: (category, queries, NDCG@10).
    pub fn categories(&self) -> Vec<(String, usize, f64)> {
        let mut by: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for q in self.runs.iter().flat_map(|r| &r.queries) {
            by.entry(&q.category).or_default().push(q.score.ndcg);
        }
        by.into_iter().map(|(c, v)| (c.to_owned(), v.len(), metrics::mean(v))).collect()
    }
}

fn cell(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{v:.3}"))
}

/// The Markdown tables: per repository, the summary against the published
/// methods, ours per language and per category.
pub fn markdown(report: &SuiteReport) -> String {
    let shown = report.published.shown();
    let mut out = format!("## Per repository (NDCG@10)\n\n| repository | language | split | queries | {OURS} |");
    for m in &shown {
        out.push_str(&format!(" {m} |"));
    }
    out.push_str(" index s | query p50 ms |\n|---|---|---|--:|--:|");
    out.push_str(&"--:|".repeat(shown.len()));
    out.push_str("--:|--:|\n");
    for run in &report.runs {
        let r = &run.repo;
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.3} |",
            r.name,
            r.language,
            r.split,
            run.queries.len(),
            run.ndcg()
        ));
        for m in &shown {
            let v = report.published.methods.get(*m).and_then(|s| s.get(&r.name)).copied();
            out.push_str(&format!(" {} |", cell(v)));
        }
        out.push_str(&format!(" {:.2} | {:.2} |\n", run.index_seconds, run.p50_ms()));
    }
    if !report.skipped.is_empty() {
        let names: Vec<String> = report.skipped.iter().map(|(n, why)| format!("{n} ({why})")).collect();
        out.push_str(&format!("\nSkipped: {}.\n", names.join(", ")));
    }

    let [all, dev, test] = report.counts();
    out.push_str(&format!(
        "\n## Summary (NDCG@10, mean of repository means)\n\n| method | all ({all}) | dev ({dev}) | test ({test}) |\n|---|--:|--:|--:|\n"
    ));
    for row in report.summary() {
        let name = if row.method == OURS { format!("**{OURS}**") } else { row.method.clone() };
        out.push_str(&format!("| {name} | {} | {} | {} |\n", cell(row.all), cell(row.dev), cell(row.test)));
    }

    out.push_str(&format!(
        "\n## {OURS} per language (mean of repository means)\n\n| language | repositories | NDCG@10 |\n|---|--:|--:|\n"
    ));
    for (language, n, v) in report.languages() {
        out.push_str(&format!("| {language} | {n} | {v:.3} |\n"));
    }
    out.push_str(&format!(
        "\n## {OURS} per category (queries pooled)\n\n| category | queries | NDCG@10 |\n|---|--:|--:|\n"
    ));
    for (category, n, v) in report.categories() {
        out.push_str(&format!("| {category} | {n} | {v:.3} |\n"));
    }
    out
}

/// The tables' numbers and every query's results, targets and score.
pub fn to_json(report: &SuiteReport) -> Value {
    let repos: Vec<Value> = report
        .runs
        .iter()
        .map(|run| {
            let r = &run.repo;
            let prefix = r.root().map(|root| format!("{root}/")).unwrap_or_default();
            let published: serde_json::Map<String, Value> = report
                .published
                .methods
                .iter()
                .filter_map(|(m, scores)| scores.get(&r.name).map(|v| (m.clone(), json!(v))))
                .collect();
            let queries: Vec<Value> = run
                .queries
                .iter()
                .map(|q| {
                    json!({
                        "query": q.query,
                        "category": q.category,
                        "ndcg@10": q.score.ndcg,
                        "found_ranks": q.score.found,
                        "targets_in_checkout": q.score.existing,
                        "results": q.hits.iter().map(|h| h.display(&prefix)).collect::<Vec<_>>(),
                        "targets": q.targets,
                        "ms": q.ms,
                        "error": q.error,
                    })
                })
                .collect();
            json!({
                "name": r.name,
                "language": r.language,
                "split": r.split,
                "benchmark_root": r.benchmark_root,
                "queries": run.queries.len(),
                "ndcg@10": run.ndcg(),
                "published": published,
                "index_seconds": run.index_seconds,
                "query_p50_ms": run.p50_ms(),
                "stage_p50_ms": run.stage_p50_ms(),
                "per_query": queries,
            })
        })
        .collect();
    let [all, dev, test] = report.counts();
    let summary: Vec<Value> = report
        .summary()
        .into_iter()
        .map(|row| json!({"method": row.method, "all": row.all, "dev": row.dev, "test": row.test}))
        .collect();
    let languages: Vec<Value> = report
        .languages()
        .into_iter()
        .map(|(language, n, v)| json!({"language": language, "repositories": n, "ndcg@10": v}))
        .collect();
    let categories: Vec<Value> = report
        .categories()
        .into_iter()
        .map(|(category, n, v)| json!({"category": category, "queries": n, "ndcg@10": v}))
        .collect();
    let skipped: Vec<Value> = report.skipped.iter().map(|(name, why)| json!({"name": name, "reason": why})).collect();
    json!({
        "k": K,
        "repositories": {"all": all, "dev": dev, "test": test},
        "summary": summary,
        "languages": languages,
        "categories": categories,
        "repos": repos,
        "skipped": skipped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-12, "{a} != {b}");
    }

    fn hit(path: &str, start_line: i64, end_line: i64) -> Hit {
        Hit { path: path.into(), start_line, end_line }
    }

    fn file(path: &str) -> Target {
        Target::Path(path.into())
    }

    fn span(path: &str, start_line: i64, end_line: i64) -> Target {
        Target::Span { path: path.into(), start_line, end_line }
    }

    /// Every target's file exists.
    fn all_exist(_: &str) -> bool {
        true
    }

    #[test]
    fn a_whole_file_target_is_found_at_the_first_result_in_that_file() {
        // Found at rank 2 (rank 3 is the same file again and adds nothing):
        // DCG = 1/log2(3) = 0.6309…; one target, so IDCG = 1/log2(2) = 1.
        let hits = [hit("b.go", 1, 9), hit("a.go", 1, 9), hit("a.go", 10, 20)];
        let s = score(&hits, &[file("a.go")], None, all_exist);
        assert_eq!(s.found, [2]);
        assert_eq!(s.existing, 1);
        close(s.ndcg, 0.6309297535714575);
        // A result whose lines are unknown still is the file.
        close(score(&[hit("a.go", 0, 0)], &[file("a.go")], None, all_exist).ndcg, 1.0);
    }

    #[test]
    fn a_span_target_needs_a_result_whose_lines_overlap_it() {
        let target = [span("lib/rack/response.rb", 23, 62)];
        // Lines 1–22 end before it, 63–80 start after it, lines unknown do
        // not overlap; 60–70 does, at rank 4: DCG = 1/log2(5); IDCG = 1.
        let hits = [
            hit("lib/rack/response.rb", 1, 22),
            hit("lib/rack/response.rb", 63, 80),
            hit("lib/rack/response.rb", 0, 0),
            hit("lib/rack/response.rb", 60, 70),
        ];
        let s = score(&hits, &target, None, all_exist);
        assert_eq!(s.found, [4]);
        close(s.ndcg, 0.43067655807339306);
        // Sharing one line is an overlap, at either end.
        assert_eq!(score(&[hit("lib/rack/response.rb", 10, 23)], &target, None, all_exist).found, [1]);
        assert_eq!(score(&[hit("lib/rack/response.rb", 62, 70)], &target, None, all_exist).found, [1]);
        // The same lines in another file are not the target.
        assert!(score(&[hit("lib/rack/request.rb", 23, 62)], &target, None, all_exist).found.is_empty());
    }

    #[test]
    fn a_result_path_ending_with_the_target_at_a_slash_is_the_target() {
        // "subcommand.go" ends with "command.go" but not at a `/`; "cmd/command.go" does.
        let hits = [hit("subcommand.go", 1, 5), hit("cmd/command.go", 1, 5)];
        let s = score(&hits, &[file("command.go")], None, all_exist);
        assert_eq!(s.found, [2]);
        close(s.ndcg, 0.6309297535714575);
        // The other way round (the target deeper than the result) is no match.
        assert!(score(&[hit("command.go", 1, 5)], &[file("cmd/command.go")], None, all_exist).found.is_empty());
    }

    #[test]
    fn result_paths_are_read_below_the_benchmark_root() {
        let target = [file("src/main/java/org/apache/commons/lang3/StringUtils.java")];
        let hits = [hit("StringUtils.java", 1, 40)];
        let root = Some("src/main/java/org/apache/commons/lang3");
        assert_eq!(score(&hits, &target, root, all_exist).found, [1]);
        // A trailing slash on the root changes nothing.
        assert_eq!(score(&hits, &target, Some("src/main/java/org/apache/commons/lang3/"), all_exist).found, [1]);
        // Without the root, or an empty one, the result's path is not the target's.
        assert!(score(&hits, &target, None, all_exist).found.is_empty());
        assert!(score(&hits, &target, Some(""), all_exist).found.is_empty());
        // express indexes `lib`: "router/index.js" is "lib/router/index.js".
        let express = score(&[hit("router/index.js", 1, 9)], &[file("lib/router/index.js")], Some("lib"), all_exist);
        assert_eq!(express.found, [1]);
    }

    #[test]
    fn ideal_dcg_counts_the_targets_up_to_ten() {
        // Three targets, found at ranks 1 and 4:
        // DCG = 1 + 1/log2(5) = 1.4306…; IDCG = 1 + 1/log2(3) + 1/log2(4) = 2.1309…; 0.6713…
        let targets = [file("a.go"), file("b.go"), file("c.go")];
        let hits = [hit("a.go", 1, 2), hit("x.go", 1, 2), hit("y.go", 1, 2), hit("c.go", 1, 2)];
        let s = score(&hits, &targets, None, all_exist);
        assert_eq!((s.found.as_slice(), s.existing), ([1, 4].as_slice(), 3));
        close(s.ndcg, 0.6713860725233041);
        // Twelve targets, ten found at ranks 1..10: the ideal holds ten gains, so 1.
        let twelve: Vec<Target> = (0..12).map(|i| file(&format!("f{i}.go"))).collect();
        let first_ten: Vec<Hit> = (0..10).map(|i| hit(&format!("f{i}.go"), 1, 2)).collect();
        let s = score(&first_ten, &twelve, None, all_exist);
        assert_eq!(s.existing, 12);
        close(s.ndcg, 1.0);
    }

    #[test]
    fn ideal_dcg_leaves_out_targets_whose_file_is_missing() {
        // Three targets, "gone.go" not in the checkout; one found at rank 2:
        // DCG = 1/log2(3) = 0.6309…; IDCG over two = 1 + 0.6309… = 1.6309…; 0.3868…
        let targets = [file("a.go"), file("b.go"), file("gone.go")];
        let exists = |p: &str| p != "gone.go";
        let s = score(&[hit("x.go", 1, 2), hit("b.go", 1, 2)], &targets, None, exists);
        assert_eq!(s.existing, 2);
        close(s.ndcg, 0.38685280723454163);
        // Had it existed: IDCG over three = 2.1309…, so 0.2960…
        close(score(&[hit("x.go", 1, 2), hit("b.go", 1, 2)], &targets, None, all_exist).ndcg, 0.2960819109658652);
        // No target's file exists: 0, whatever is found.
        close(score(&[hit("a.go", 1, 2)], &[file("a.go")], None, |_| false).ndcg, 0.0);
        // A missing target found under a deeper path still gains, as in semble's
        // scoring: ranks 1 and 2 found, IDCG over the one existing target = 1.
        let s = score(&[hit("sub/gone.go", 1, 2), hit("b.go", 1, 2)], &[file("gone.go"), file("b.go")], None, exists);
        assert_eq!((s.found.as_slice(), s.existing), ([1, 2].as_slice(), 1));
        close(s.ndcg, 1.6309297535714575);
    }

    #[test]
    fn a_one_line_result_is_that_line() {
        // A chunk of one line may record its end as its start or as 0.
        for end_line in [7, 0] {
            let m = rr_core::Metadata { path: "a.go".into(), start_line: 7, end_line, ..Default::default() };
            let one = Hit::from_metadata(&m);
            assert_eq!(one, hit("a.go", 7, 7));
            assert_eq!(score(std::slice::from_ref(&one), &[span("a.go", 7, 9)], None, all_exist).found, [1]);
            assert_eq!(score(std::slice::from_ref(&one), &[file("a.go")], None, all_exist).found, [1]);
            assert!(score(&[one], &[span("a.go", 8, 9)], None, all_exist).found.is_empty());
        }
    }

    #[test]
    fn targets_found_by_one_result_gain_once() {
        // Two spans of one file, both in the rank-1 result: the distinct ranks
        // are {1}, DCG = 1; IDCG = 1.6309…; 0.6131…
        let targets = [span("a.rs", 1, 10), span("a.rs", 20, 30)];
        let s = score(&[hit("a.rs", 1, 40), hit("a.rs", 20, 30)], &targets, None, all_exist);
        assert_eq!(s.found, [1]);
        close(s.ndcg, 0.6131471927654584);
    }

    #[test]
    fn only_the_first_ten_results_count() {
        let mut hits: Vec<Hit> = (0..10).map(|i| hit(&format!("x{i}.go"), 1, 2)).collect();
        hits.push(hit("a.go", 1, 2));
        let s = score(&hits, &[file("a.go")], None, all_exist);
        assert!(s.found.is_empty());
        close(s.ndcg, 0.0);
    }

    #[test]
    fn the_suite_files_are_read_with_both_target_forms() {
        let annotations: Vec<Annotation> = serde_json::from_str(
            r#"[{"query": "Builder", "relevant": ["lib/rack/builder.rb"], "category": "symbol", "seed": 1},
                {"query": "response body", "relevant": [{"path": "lib/rack/response.rb", "start_line": 23, "end_line": 62}],
                 "secondary": ["lib/rack/body_proxy.rb"], "category": "semantic"}]"#,
        )
        .unwrap();
        assert_eq!(annotations[0].targets(), [file("lib/rack/builder.rb")]);
        assert_eq!(annotations[1].targets(), [span("lib/rack/response.rb", 23, 62), file("lib/rack/body_proxy.rb")]);
        assert_eq!(annotations[1].targets()[0].to_string(), "lib/rack/response.rb#L23-L62");

        let repos: Vec<SuiteRepo> = serde_json::from_str(
            r#"[{"name": "cobra", "language": "go", "split": "dev", "url": "u", "revision": "r"},
                {"name": "express", "language": "javascript", "split": "dev", "benchmark_root": "lib/"},
                {"name": "serde", "language": "rust", "split": "test", "benchmark_root": null}]"#,
        )
        .unwrap();
        let roots: Vec<Option<&str>> = repos.iter().map(SuiteRepo::root).collect();
        assert_eq!(roots, [None, Some("lib"), None]);

        let suite = Suite { dir: PathBuf::from("suite"), repos, published: Published::default() };
        let names = |split, only: &[&str]| -> Vec<String> {
            let only: Vec<String> = only.iter().map(|s| s.to_string()).collect();
            suite.select(split, &only).unwrap().into_iter().map(|r| r.name).collect()
        };
        assert_eq!(names(Split::All, &[]), ["cobra", "express", "serde"]);
        assert_eq!(names(Split::Dev, &[]), ["cobra", "express"]);
        assert_eq!(names(Split::Test, &[]), ["serde"]);
        assert_eq!(names(Split::Dev, &["serde", "cobra"]), ["cobra"]);
        let err = suite.select(Split::All, &["cobra".into(), "nope".into(), "gone".into()]).unwrap_err();
        assert_eq!(err.to_string(), "--repos: not in suite/repos.json: nope, gone");
    }

    fn query(category: &str, ndcg: f64, ms: f64) -> QueryRun {
        QueryRun {
            query: "q".into(),
            category: category.into(),
            targets: vec![file("lib/a.rb")],
            hits: vec![hit("a.rb", 3, 9), hit("b.rb", 0, 0)],
            score: QueryScore { found: vec![1], existing: 1, ndcg },
            ms,
            timings: rr_core::StageTimings {
                retrieve: std::time::Duration::from_secs_f64(ms / 2000.0),
                ..Default::default()
            },
            error: None,
        }
    }

    fn repo_run(name: &str, language: &str, split: &str, index_seconds: f64, queries: Vec<QueryRun>) -> RepoRun {
        let repo = SuiteRepo {
            name: name.into(),
            language: language.into(),
            split: split.into(),
            benchmark_root: Some("lib".into()),
        };
        RepoRun { repo, index_seconds, queries }
    }

    fn report() -> SuiteReport {
        let published: Published = serde_json::from_str(
            r#"{"what": "x", "methods": {
                "ripgrep": {"a": 0.1, "b": 0.2, "c": 0.3},
                "semble-hybrid": {"a": 0.9, "b": 0.8, "c": 0.7, "z": 0.1},
                "bm25-raw": {"a": 0.6, "b": 0.4}}}"#,
        )
        .unwrap();
        SuiteReport {
            runs: vec![
                repo_run("a", "go", "dev", 1.5, vec![query("symbol", 1.0, 2.0), query("semantic", 0.5, 4.0)]),
                repo_run("b", "go", "test", 0.25, vec![query("semantic", 0.25, 3.0)]),
                repo_run("c", "rust", "dev", 2.0, vec![query("architecture", 0.5, 1.0)]),
            ],
            skipped: vec![("d".into(), "no folder /x/d".into())],
            published,
        }
    }

    #[test]
    fn tables_average_repository_means_and_compare_on_the_same_repositories() {
        // Ours: a = (1 + 0.5)/2 = 0.75, b = 0.25, c = 0.5; all (0.75 + 0.25 + 0.5)/3 = 0.5,
        // dev (0.75 + 0.5)/2 = 0.625, test 0.25. semble-hybrid over a, b, c (not z) = 0.8.
        // bm25-raw has no c: all (0.6 + 0.4)/2 = 0.5, dev 0.6. Query p50 of a's {2, 4} = 2.
        // Go: (0.75 + 0.25)/2 = 0.5. Semantic queries pooled: (0.5 + 0.25)/2 = 0.375.
        let expected = "\
## Per repository (NDCG@10)

| repository | language | split | queries | repo-retriever | semble-hybrid | bm25-raw | index s | query p50 ms |
|---|---|---|--:|--:|--:|--:|--:|--:|
| a | go | dev | 2 | 0.750 | 0.900 | 0.600 | 1.50 | 2.00 |
| b | go | test | 1 | 0.250 | 0.800 | 0.400 | 0.25 | 3.00 |
| c | rust | dev | 1 | 0.500 | 0.700 | – | 2.00 | 1.00 |

Skipped: d (no folder /x/d).

## Summary (NDCG@10, mean of repository means)

| method | all (3) | dev (2) | test (1) |
|---|--:|--:|--:|
| **repo-retriever** | 0.500 | 0.625 | 0.250 |
| semble-hybrid | 0.800 | 0.800 | 0.800 |
| bm25-raw | 0.500 | 0.600 | 0.400 |
| ripgrep | 0.200 | 0.200 | 0.200 |

## repo-retriever per language (mean of repository means)

| language | repositories | NDCG@10 |
|---|--:|--:|
| go | 2 | 0.500 |
| rust | 1 | 0.500 |

## repo-retriever per category (queries pooled)

| category | queries | NDCG@10 |
|---|--:|--:|
| architecture | 1 | 0.500 |
| semantic | 2 | 0.375 |
| symbol | 1 | 1.000 |
";
        assert_eq!(markdown(&report()), expected);
    }

    #[test]
    fn the_json_holds_the_tables_and_every_query() {
        let json = to_json(&report());
        assert_eq!(json["repositories"], json!({"all": 3, "dev": 2, "test": 1}));
        assert_eq!(json["summary"][0], json!({"method": "repo-retriever", "all": 0.5, "dev": 0.625, "test": 0.25}));
        assert_eq!(json["summary"][2], json!({"method": "bm25-raw", "all": 0.5, "dev": 0.6, "test": 0.4}));
        assert_eq!(json["categories"][1], json!({"category": "semantic", "queries": 2, "ndcg@10": 0.375}));
        let c = &json["repos"][2];
        assert_eq!(c["published"], json!({"ripgrep": 0.3, "semble-hybrid": 0.7}));
        let q = &c["per_query"][0];
        // Results are repository paths: the benchmark root, then the indexed path.
        assert_eq!(q["results"], json!(["lib/a.rb#L3-L9", "lib/b.rb"]));
        assert_eq!(q["targets"], json!(["lib/a.rb"]));
        assert_eq!((&q["found_ranks"], &q["ndcg@10"]), (&json!([1]), &json!(0.5)));
        assert_eq!(json["skipped"], json!([{"name": "d", "reason": "no folder /x/d"}]));
        // The median of each stage's time: here the retrieval takes half of each query's time.
        let stages = &json["repos"][0]["stage_p50_ms"];
        assert_eq!(
            (stages["retrieve"].as_f64(), stages["embed"].as_f64()),
            (Some(json["repos"][0]["query_p50_ms"].as_f64().unwrap() / 2.0), Some(0.0))
        );
    }

    #[test]
    fn stores_default_to_a_folder_beside_the_checkouts() {
        let tmp = tempfile::tempdir().unwrap();
        let checkouts = tmp.path().join("checkouts");
        std::fs::create_dir(&checkouts).unwrap();
        let expected = std::fs::canonicalize(tmp.path()).unwrap().join("stores");
        assert_eq!(default_stores(&checkouts), expected);
        assert_eq!(default_stores(&checkouts.join("..").join("checkouts")), expected);
    }
}
