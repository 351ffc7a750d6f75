//! Example dynamic plugin: a reranker that boosts results by path prefix or
//! file extension, keeping the incoming order otherwise.
//!
//! Configuration (`[reranker]` or `[stores.<name>.reranker]`):
//!
//! ```toml
//! kind = "boost"
//! prefixes = ["docs/"]        # a document whose File: line starts with one of these gains 1.0
//! extensions = [".md"]        # ... or ends with one of these
//! ```
//!
//! Scores are `boost - position / n`, so ties keep the pipeline's order.

use rr_plugins::abi::Kind;
use rr_plugins::guest::GuestPlugin;
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Boost {
    #[serde(default)]
    prefixes: Vec<String>,
    #[serde(default)]
    extensions: Vec<String>,
}

#[derive(Deserialize)]
struct Request {
    #[allow(dead_code)]
    query: String,
    documents: Vec<String>,
}

impl Boost {
    /// The `File:` path of a rerank document (`Repository: …\nFile: path#Lx-Ly\n\n…`).
    fn path(document: &str) -> &str {
        document.lines().find_map(|l| l.strip_prefix("File: ")).map(|p| p.split('#').next().unwrap_or(p)).unwrap_or("")
    }

    pub fn scores(&self, documents: &[String]) -> Vec<f64> {
        let n = documents.len().max(1) as f64;
        documents
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let path = Self::path(d);
                let hit = self.prefixes.iter().any(|p| path.starts_with(p.as_str()))
                    || self.extensions.iter().any(|e| path.ends_with(e.as_str()));
                f64::from(u8::from(hit)) - i as f64 / n
            })
            .collect()
    }
}

impl GuestPlugin for Boost {
    const KIND: Kind = Kind::Reranker;
    const NAME: &'static str = "boost";

    fn create(config: &str) -> Result<Self, String> {
        serde_json::from_str(config).map_err(|e| e.to_string())
    }

    fn call(&self, request: &str) -> Result<String, String> {
        let r: Request = serde_json::from_str(request).map_err(|e| e.to_string())?;
        Ok(serde_json::json!({ "scores": self.scores(&r.documents) }).to_string())
    }
}

#[allow(unsafe_code)]
mod export {
    // SAFETY: exports the two ABI v1 entry points under their documented names; no other
    // library in a host process is expected to define them.
    rr_plugins::export_plugin!(super::Boost);
}
