//! The comparison table (Markdown, to paste into docs) and its JSON twin
//! with the per-query details.

use std::time::Duration;

use serde_json::{Value, json};

use super::metrics::{self, QueryMetrics};
use super::pipelines::Timings;

/// One query through one pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryOutcome {
    pub line: usize,
    pub query: String,
    pub targets: Vec<String>,
    /// `path#Lx-Ly` of each result, in rank order.
    pub results: Vec<String>,
    /// The store's distance of each result, in the same order (`None` where
    /// the store gave none), so a fusion or cut can be studied offline from
    /// the report without running the store again.
    pub distances: Vec<Option<f64>>,
    pub metrics: QueryMetrics,
    pub timings: Timings,
}

/// Every query through one pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineReport {
    pub name: String,
    /// The names of the rerank stages, in order (empty: no reranker).
    pub stages: Vec<String>,
    /// The retrieval mode that ran (`dense` for a store asked for another
    /// mode that cannot rank lexically).
    pub retrieval: String,
    pub candidates: usize,
    pub queries: Vec<QueryOutcome>,
}

/// p50 and p99 in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub p50: f64,
    pub p99: f64,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl PipelineReport {
    fn mean(&self, f: impl Fn(&QueryMetrics) -> f64) -> f64 {
        metrics::mean(self.queries.iter().map(|q| f(&q.metrics)))
    }

    fn spread(&self, f: impl Fn(&Timings) -> Duration) -> Spread {
        let values: Vec<f64> = self.queries.iter().map(|q| ms(f(&q.timings))).collect();
        Spread { p50: metrics::percentile(&values, 50.0), p99: metrics::percentile(&values, 99.0) }
    }

    /// MRR@10, nDCG@10, R@1, R@5, R@10, averaged over the queries.
    pub fn means(&self) -> [f64; 5] {
        [
            self.mean(|m| m.reciprocal_rank),
            self.mean(|m| m.ndcg),
            self.mean(|m| m.recall_1),
            self.mean(|m| m.recall_5),
            self.mean(|m| m.recall_10),
        ]
    }

    pub fn embed(&self) -> Spread {
        self.spread(|t| t.embed)
    }

    pub fn retrieve(&self) -> Spread {
        self.spread(|t| t.retrieve)
    }

    /// All rerank stages of a query together.
    pub fn rerank(&self) -> Spread {
        self.spread(|t| t.rerank.iter().map(|(_, d)| *d).sum())
    }

    /// Stage `n` alone (0 for a query whose retrieval found nothing to rerank).
    pub fn stage(&self, n: usize) -> Spread {
        self.spread(|t| t.rerank.get(n).map_or(Duration::ZERO, |(_, d)| *d))
    }

    /// The code ranking and the selection of the results together.
    pub fn order(&self) -> Spread {
        self.spread(|t| t.code_rank + t.select)
    }

    pub fn total(&self) -> Spread {
        self.spread(|t| t.total)
    }
}

/// The metric keys of the JSON, in the table's order.
pub const METRIC_KEYS: [&str; 5] = ["mrr@10", "ndcg@10", "recall@1", "recall@5", "recall@10"];

/// The Markdown table, one row per pipeline.
pub fn markdown(reports: &[PipelineReport]) -> String {
    let mut out = String::from(
        "| pipeline | queries | MRR@10 | nDCG@10 | R@1 | R@5 | R@10 | embed ms p50 / p99 | retrieve ms p50 / p99 | rerank ms p50 / p99 | code rank + select ms p50 / p99 | total ms p50 / p99 |\n\
         |---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n",
    );
    let spread = |s: Spread| format!("{:.2} / {:.2}", s.p50, s.p99);
    for r in reports {
        let [mrr, ndcg, r1, r5, r10] = r.means();
        let rerank = if r.stages.is_empty() { "–".to_owned() } else { spread(r.rerank()) };
        out.push_str(&format!(
            "| {} | {} | {mrr:.3} | {ndcg:.3} | {r1:.3} | {r5:.3} | {r10:.3} | {} | {} | {rerank} | {} | {} |\n",
            r.name.replace('|', "\\|"),
            r.queries.len(),
            spread(r.embed()),
            spread(r.retrieve()),
            spread(r.order()),
            spread(r.total()),
        ));
    }
    out
}

fn spread_json(s: Spread) -> Value {
    json!({"p50": s.p50, "p99": s.p99})
}

/// The same numbers as [`markdown`], plus each stage's latency and every
/// query's details.
pub fn to_json(reports: &[PipelineReport], queries_file: &str, limit: usize) -> Value {
    let pipelines: Vec<Value> = reports
        .iter()
        .map(|r| {
            let means = r.means();
            let metrics: serde_json::Map<String, Value> =
                METRIC_KEYS.iter().zip(means).map(|(k, v)| ((*k).to_owned(), json!(v))).collect();
            let stages: Vec<Value> = r
                .stages
                .iter()
                .enumerate()
                .map(|(n, name)| {
                    let s = r.stage(n);
                    json!({"name": name, "p50": s.p50, "p99": s.p99})
                })
                .collect();
            let per_query: Vec<Value> = r
                .queries
                .iter()
                .map(|q| {
                    let t = &q.timings;
                    json!({
                        "line": q.line,
                        "query": q.query,
                        "relevant": q.targets,
                        "relevant_ranks": q.metrics.relevant_ranks,
                        "results": q.results,
                        "distances": q.distances,
                        "reciprocal_rank": q.metrics.reciprocal_rank,
                        "ndcg@10": q.metrics.ndcg,
                        "recall@1": q.metrics.recall_1,
                        "recall@5": q.metrics.recall_5,
                        "recall@10": q.metrics.recall_10,
                        "latency_ms": {
                            "embed": ms(t.embed),
                            "retrieve": ms(t.retrieve),
                            "stages": t.rerank.iter().map(|(name, d)| json!({"name": name, "ms": ms(*d)})).collect::<Vec<_>>(),
                            "code_rank": ms(t.code_rank),
                            "select": ms(t.select),
                            "total": ms(t.total),
                        },
                    })
                })
                .collect();
            json!({
                "name": r.name,
                "queries": r.queries.len(),
                "retrieval": r.retrieval,
                "candidates": r.candidates,
                "rerankers": r.stages,
                "metrics": metrics,
                "latency_ms": {
                    "embed": spread_json(r.embed()),
                    "retrieve": spread_json(r.retrieve()),
                    "rerank": spread_json(r.rerank()),
                    "stages": stages,
                    "total": spread_json(r.total()),
                },
                "per_query": per_query,
            })
        })
        .collect();
    json!({"queries_file": queries_file, "k": metrics::K, "limit": limit, "pipelines": pipelines})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(rr: f64, total_ms: u64, stage_ms: Option<u64>) -> QueryOutcome {
        QueryOutcome {
            line: 1,
            query: "q".into(),
            targets: vec!["a.rs".into()],
            results: vec!["a.rs#L1-L9".into()],
            distances: vec![Some(-0.25)],
            metrics: QueryMetrics {
                reciprocal_rank: rr,
                ndcg: rr,
                recall_1: rr,
                recall_5: 1.0,
                recall_10: 1.0,
                relevant_ranks: vec![1],
            },
            timings: Timings {
                embed: Duration::from_millis(1),
                retrieve: Duration::from_millis(2),
                rerank: stage_ms.map(|m| ("bm25-fusion".to_owned(), Duration::from_millis(m))).into_iter().collect(),
                code_rank: Duration::from_micros(250),
                select: Duration::from_micros(250),
                total: Duration::from_millis(total_ms),
            },
        }
    }

    #[test]
    fn table_rows_average_metrics_and_show_latency_spreads() {
        let plain = PipelineReport {
            name: "hash".into(),
            stages: Vec::new(),
            retrieval: "dense".into(),
            candidates: 30,
            queries: vec![outcome(1.0, 4, None), outcome(0.5, 8, None)],
        };
        let fused = PipelineReport {
            name: "hash + bm25-fusion".into(),
            stages: vec!["bm25-fusion".into()],
            retrieval: "hybrid".into(),
            candidates: 30,
            queries: vec![outcome(0.0, 5, Some(1)), outcome(0.25, 6, Some(3))],
        };
        let table = markdown(&[plain.clone(), fused.clone()]);
        let rows: Vec<&str> = table.lines().collect();
        assert_eq!(rows.len(), 4);
        // MRR (1 + 0.5)/2 = 0.75; total p50 of {4, 8} = 4 (rank ceil(1) = 1), p99 = 8.
        assert_eq!(
            rows[2],
            "| hash | 2 | 0.750 | 0.750 | 0.750 | 1.000 | 1.000 | 1.00 / 1.00 | 2.00 / 2.00 | – | 0.50 / 0.50 | 4.00 / 8.00 |"
        );
        assert_eq!(
            rows[3],
            "| hash + bm25-fusion | 2 | 0.125 | 0.125 | 0.125 | 1.000 | 1.000 | 1.00 / 1.00 | 2.00 / 2.00 | 1.00 / 3.00 | 0.50 / 0.50 | 5.00 / 6.00 |"
        );
        let json = to_json(&[plain, fused], "q.jsonl", 10);
        assert_eq!(json["pipelines"][0]["metrics"]["mrr@10"], 0.75);
        assert_eq!(
            (&json["pipelines"][0]["retrieval"], &json["pipelines"][1]["retrieval"]),
            (&json!("dense"), &json!("hybrid"))
        );
        assert_eq!(
            json["pipelines"][1]["latency_ms"]["stages"][0],
            json!({"name": "bm25-fusion", "p50": 1.0, "p99": 3.0})
        );
        assert_eq!(json["pipelines"][1]["per_query"][1]["latency_ms"]["stages"][0]["ms"], 3.0);
        assert_eq!(json["pipelines"][1]["per_query"][1]["latency_ms"]["code_rank"], 0.25);
        assert_eq!(json["pipelines"][1]["per_query"][0]["relevant_ranks"], json!([1]));
        assert_eq!(json["pipelines"][1]["per_query"][0]["distances"], json!([-0.25]));
        assert_eq!(json["k"], 10);
    }
}
