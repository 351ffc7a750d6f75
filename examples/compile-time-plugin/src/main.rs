//! A compile-time plugin: a `VectorStore` kind named `fixed`, registered with
//! `inventory` in a few lines. Link this crate into the server binary (add it
//! as a dependency of `repo-retriever` and reference it once) and
//! `kind = "fixed"` becomes valid in a stores file; `repo-retriever plugins`
//! lists it. Run `cargo run -p rr-example-compile-time-plugin` to see the
//! registry of this small binary.

use std::sync::Arc;

use async_trait::async_trait;
use rr_core::registry::{FactoryContext, FactoryError, PluginKind, Registry};
use rr_core::{BackendError, CallContext, Candidate, Chunk, VectorQuery, VectorStore};
use serde_json::Value;

/// Answers the same chunks to every query, filtered as the contract requires.
struct Fixed(Vec<Chunk>);

#[async_trait]
impl VectorStore for Fixed {
    fn name(&self) -> &str {
        "fixed"
    }
    async fn query(&self, q: &VectorQuery, _: &CallContext) -> Result<Vec<Candidate>, BackendError> {
        Ok(self.0.iter().filter(|c| q.filter.matches(c)).take(q.n_results).cloned().map(Candidate::from).collect())
    }
}

/// The factory: settings in (`chunks = [...]`), store out. Unknown keys are refused.
fn create(config: &Value, _ctx: &FactoryContext) -> Result<Arc<dyn VectorStore>, FactoryError> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Settings {
        #[serde(default)]
        chunks: Vec<Chunk>,
    }
    let s: Settings = FactoryError::parse(config)?;
    Ok(Arc::new(Fixed(s.chunks)))
}

// The whole registration.
rr_core::register_plugin!(store "fixed", create);

fn main() {
    let registry = Registry::builtin().expect("no duplicate plugin names");
    println!("stores: {}", registry.names(PluginKind::Store).join(", "));
    let store = registry.store("fixed", &serde_json::json!({"chunks": []}), &FactoryContext::new("example"));
    println!("built: {}", store.map(|s| s.name().to_owned()).unwrap_or_else(|e| e.to_string()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_is_registered_builds_its_store_and_refuses_unknown_keys() {
        let registry = Registry::builtin().unwrap();
        assert!(registry.names(PluginKind::Store).contains(&"fixed"));
        let ctx = FactoryContext::new("example");
        let store = registry.store("fixed", &serde_json::json!({"chunks": []}), &ctx).unwrap();
        assert_eq!(store.name(), "fixed");
        let refused = registry.store("fixed", &serde_json::json!({"chunk": []}), &ctx).err().unwrap();
        assert!(refused.to_string().contains("unknown field `chunk`"), "{refused}");
    }
}
