//! Named factories for vector stores, embedders and rerankers.
//!
//! Every backend is created from a *name* and a *configuration section*, so a
//! configuration file can say `kind = "chroma"` and a third party can add a
//! kind without touching the server. Built-ins register at compile time with
//! [`inventory`]: each backend crate submits a constant [`Plugin`] holding a
//! plain `fn` pointer (see [`register_plugin!`]), which the linker gathers
//! into the final binary. Dynamic plugins (the `rr-plugins` crate) are added
//! at run time with [`Registry::add`] and their factories may close over the
//! loaded library.
//!
//! Names are unique per kind (`openai` is both an embedder and a reranker);
//! a second registration of the same kind and name is refused when the
//! registry is built, naming both origins, rather than silently letting link
//! order decide which one wins.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::traits::{Embedder, Reranker, VectorStore};

pub use inventory;

/// What a factory builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PluginKind {
    Store,
    Embedder,
    Reranker,
}

impl PluginKind {
    /// `store`, `embedder` or `reranker`.
    pub fn as_str(self) -> &'static str {
        match self {
            PluginKind::Store => "store",
            PluginKind::Embedder => "embedder",
            PluginKind::Reranker => "reranker",
        }
    }
}

impl fmt::Display for PluginKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Looks an environment variable up; injectable for tests.
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// What every factory shares: HTTP settings and where secrets come from.
#[derive(Clone)]
pub struct FactoryContext {
    /// Sent on every backend request.
    pub user_agent: String,
    /// Attempts in total per backend request.
    pub retry_attempts: u32,
    /// Deadline of one attempt.
    pub request_timeout: Duration,
    /// Secrets known before any factory runs (redacted in every error).
    pub secrets: Vec<String>,
    /// Secrets are read from the environment only, through this.
    pub env: EnvLookup,
}

impl fmt::Debug for FactoryContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FactoryContext")
            .field("user_agent", &self.user_agent)
            .field("retry_attempts", &self.retry_attempts)
            .field("request_timeout", &self.request_timeout)
            .field("secrets", &format_args!("[{} redacted]", self.secrets.len()))
            .finish_non_exhaustive()
    }
}

impl FactoryContext {
    /// A context with the reference defaults (3 attempts, 120 s) reading
    /// the process environment.
    pub fn new(user_agent: impl Into<String>) -> Self {
        FactoryContext {
            user_agent: user_agent.into(),
            retry_attempts: 3,
            request_timeout: Duration::from_secs(120),
            secrets: Vec::new(),
            env: Arc::new(|name| std::env::var(name).ok()),
        }
    }

    /// The secret held by environment variable `var`, named in the
    /// configuration by `key` (e.g. `api_key_env`). The value never appears
    /// in an error; the variable's name does.
    pub fn secret(&self, key: &str, var: &str) -> Result<String, FactoryError> {
        match (self.env)(var) {
            Some(value) if !value.is_empty() => Ok(value),
            _ => Err(FactoryError::new(format!("{key}: environment variable {var} is not set or empty"))),
        }
    }

    /// [`secret`](Self::secret) for an optional `*_env` setting.
    pub fn optional_secret(&self, key: &str, var: Option<&str>) -> Result<Option<String>, FactoryError> {
        var.map(|v| self.secret(key, v)).transpose()
    }
}

/// Why a factory refused its configuration, worded for the operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FactoryError(pub String);

impl FactoryError {
    pub fn new(message: impl Into<String>) -> Self {
        FactoryError(message.into())
    }

    /// Deserialises a configuration section into a factory's settings type
    /// (which should be `#[serde(deny_unknown_fields)]`, so that serde's
    /// message names the unknown key and lists the valid ones).
    pub fn parse<T: serde::de::DeserializeOwned>(config: &Value) -> Result<T, FactoryError> {
        serde_json::from_value(config.clone()).map_err(|e| FactoryError::new(e.to_string()))
    }
}

/// A store factory: a configuration section and the shared context in, a store out.
pub type StoreFactoryFn = fn(&Value, &FactoryContext) -> Result<Arc<dyn VectorStore>, FactoryError>;
/// An embedder factory.
pub type EmbedderFactoryFn = fn(&Value, &FactoryContext) -> Result<Arc<dyn Embedder>, FactoryError>;
/// A reranker factory.
pub type RerankerFactoryFn = fn(&Value, &FactoryContext) -> Result<Arc<dyn Reranker>, FactoryError>;

/// A compile-time factory, as a constant `fn` pointer.
#[derive(Debug, Clone, Copy)]
pub enum FactoryFn {
    Store(StoreFactoryFn),
    Embedder(EmbedderFactoryFn),
    Reranker(RerankerFactoryFn),
}

/// One compile-time registration, submitted with [`register_plugin!`].
#[derive(Debug, Clone, Copy)]
pub struct Plugin {
    pub name: &'static str,
    /// Where it comes from, e.g. `rr-chroma 0.1.0 (built in)`.
    pub origin: &'static str,
    pub factory: FactoryFn,
}

impl Plugin {
    pub fn kind(&self) -> PluginKind {
        match self.factory {
            FactoryFn::Store(_) => PluginKind::Store,
            FactoryFn::Embedder(_) => PluginKind::Embedder,
            FactoryFn::Reranker(_) => PluginKind::Reranker,
        }
    }
}

inventory::collect!(Plugin);

/// Registers a compile-time factory:
///
/// ```ignore
/// rr_core::register_plugin!(store "chroma", create_chroma);
/// rr_core::register_plugin!(embedder "hash", create_hash);
/// rr_core::register_plugin!(reranker "openai", create_reranker);
/// ```
///
/// The origin recorded is the calling crate's name and version.
#[macro_export]
macro_rules! register_plugin {
    (store $name:literal, $factory:path) => {
        $crate::register_plugin!(@submit $name, $crate::registry::FactoryFn::Store($factory));
    };
    (embedder $name:literal, $factory:path) => {
        $crate::register_plugin!(@submit $name, $crate::registry::FactoryFn::Embedder($factory));
    };
    (reranker $name:literal, $factory:path) => {
        $crate::register_plugin!(@submit $name, $crate::registry::FactoryFn::Reranker($factory));
    };
    (@submit $name:literal, $factory:expr) => {
        $crate::registry::inventory::submit! {
            $crate::registry::Plugin {
                name: $name,
                origin: concat!(env!("CARGO_PKG_NAME"), " ", env!("CARGO_PKG_VERSION"), " (built in)"),
                factory: $factory,
            }
        }
    };
}

/// A store factory as the registry holds it (may close over a loaded library).
pub type DynStoreFactory =
    Arc<dyn Fn(&Value, &FactoryContext) -> Result<Arc<dyn VectorStore>, FactoryError> + Send + Sync>;
/// An embedder factory as the registry holds it.
pub type DynEmbedderFactory =
    Arc<dyn Fn(&Value, &FactoryContext) -> Result<Arc<dyn Embedder>, FactoryError> + Send + Sync>;
/// A reranker factory as the registry holds it.
pub type DynRerankerFactory =
    Arc<dyn Fn(&Value, &FactoryContext) -> Result<Arc<dyn Reranker>, FactoryError> + Send + Sync>;

/// A factory as the registry holds it: compile-time `fn` pointers and
/// dynamic plugins alike.
#[derive(Clone)]
pub enum Factory {
    Store(DynStoreFactory),
    Embedder(DynEmbedderFactory),
    Reranker(DynRerankerFactory),
}

impl Factory {
    pub fn kind(&self) -> PluginKind {
        match self {
            Factory::Store(_) => PluginKind::Store,
            Factory::Embedder(_) => PluginKind::Embedder,
            Factory::Reranker(_) => PluginKind::Reranker,
        }
    }
}

impl From<FactoryFn> for Factory {
    fn from(f: FactoryFn) -> Self {
        match f {
            FactoryFn::Store(f) => Factory::Store(Arc::new(f)),
            FactoryFn::Embedder(f) => Factory::Embedder(Arc::new(f)),
            FactoryFn::Reranker(f) => Factory::Reranker(Arc::new(f)),
        }
    }
}

/// One registered factory.
#[derive(Clone)]
pub struct Entry {
    pub name: String,
    pub origin: String,
    pub factory: Factory,
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("kind", &self.factory.kind())
            .field("name", &self.name)
            .field("origin", &self.origin)
            .finish()
    }
}

/// Why the registry refused a registration or a lookup.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("duplicate {kind} plugin \"{name}\": registered by {first} and by {second}")]
    Duplicate { kind: PluginKind, name: String, first: String, second: String },
    #[error("unknown {kind} kind \"{name}\"; valid kinds: {valid}")]
    UnknownKind { kind: PluginKind, name: String, valid: String },
    #[error("{kind} \"{name}\": {message}")]
    Factory { kind: PluginKind, name: String, message: String },
}

/// Every known factory, sorted by kind then name.
#[derive(Clone, Default)]
pub struct Registry {
    entries: BTreeMap<(PluginKind, String), Entry>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.entries.values()).finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn empty() -> Self {
        Registry::default()
    }

    /// Every compile-time registration linked into this binary. Fails on
    /// the first duplicate (in name order, so the error is deterministic).
    pub fn builtin() -> Result<Self, RegistryError> {
        Registry::from_plugins(inventory::iter::<Plugin>.into_iter().copied())
    }

    /// A registry of the given compile-time registrations.
    pub fn from_plugins(plugins: impl IntoIterator<Item = Plugin>) -> Result<Self, RegistryError> {
        let mut plugins: Vec<Plugin> = plugins.into_iter().collect();
        plugins.sort_by(|a, b| (a.kind(), a.name, a.origin).cmp(&(b.kind(), b.name, b.origin)));
        let mut registry = Registry::empty();
        for p in plugins {
            registry.add(Entry { name: p.name.to_owned(), origin: p.origin.to_owned(), factory: p.factory.into() })?;
        }
        Ok(registry)
    }

    /// Adds one factory; refuses a name already taken for its kind.
    pub fn add(&mut self, entry: Entry) -> Result<(), RegistryError> {
        let key = (entry.factory.kind(), entry.name.clone());
        if let Some(existing) = self.entries.get(&key) {
            return Err(RegistryError::Duplicate {
                kind: key.0,
                name: entry.name,
                first: existing.origin.clone(),
                second: entry.origin,
            });
        }
        self.entries.insert(key, entry);
        Ok(())
    }

    /// All entries, sorted by kind, then name.
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.entries.values()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The registered names of one kind, sorted.
    pub fn names(&self, kind: PluginKind) -> Vec<&str> {
        self.entries.keys().filter(|(k, _)| *k == kind).map(|(_, n)| n.as_str()).collect()
    }

    fn get(&self, kind: PluginKind, name: &str) -> Result<&Factory, RegistryError> {
        self.entries.get(&(kind, name.to_owned())).map(|e| &e.factory).ok_or_else(|| RegistryError::UnknownKind {
            kind,
            name: name.to_owned(),
            valid: self.names(kind).join(", "),
        })
    }

    fn wrap(kind: PluginKind, name: &str) -> impl Fn(FactoryError) -> RegistryError + '_ {
        move |e| RegistryError::Factory { kind, name: name.to_owned(), message: e.0 }
    }

    /// Builds the store of kind `name` from `config`.
    pub fn store(
        &self,
        name: &str,
        config: &Value,
        ctx: &FactoryContext,
    ) -> Result<Arc<dyn VectorStore>, RegistryError> {
        match self.get(PluginKind::Store, name)? {
            Factory::Store(f) => f(config, ctx).map_err(Self::wrap(PluginKind::Store, name)),
            _ => unreachable!("entries are keyed by their factory's kind"),
        }
    }

    /// Builds the embedder of kind `name` from `config`.
    pub fn embedder(
        &self,
        name: &str,
        config: &Value,
        ctx: &FactoryContext,
    ) -> Result<Arc<dyn Embedder>, RegistryError> {
        match self.get(PluginKind::Embedder, name)? {
            Factory::Embedder(f) => f(config, ctx).map_err(Self::wrap(PluginKind::Embedder, name)),
            _ => unreachable!("entries are keyed by their factory's kind"),
        }
    }

    /// Builds the reranker of kind `name` from `config`.
    pub fn reranker(
        &self,
        name: &str,
        config: &Value,
        ctx: &FactoryContext,
    ) -> Result<Arc<dyn Reranker>, RegistryError> {
        match self.get(PluginKind::Reranker, name)? {
            Factory::Reranker(f) => f(config, ctx).map_err(Self::wrap(PluginKind::Reranker, name)),
            _ => unreachable!("entries are keyed by their factory's kind"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::BackendError;
    use crate::record::Candidate;
    use crate::traits::{CallContext, VectorQuery};
    use async_trait::async_trait;

    struct Nothing;
    #[async_trait]
    impl VectorStore for Nothing {
        fn name(&self) -> &str {
            "nothing"
        }
        async fn query(&self, _: &VectorQuery, _: &CallContext) -> Result<Vec<Candidate>, BackendError> {
            Ok(Vec::new())
        }
    }

    fn nothing(config: &Value, _: &FactoryContext) -> Result<Arc<dyn VectorStore>, FactoryError> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Settings {
            #[serde(default)]
            size: usize,
        }
        let _: Settings = FactoryError::parse(config)?;
        Ok(Arc::new(Nothing))
    }

    register_plugin!(store "core-test-nothing", nothing);

    fn plugin(name: &'static str, origin: &'static str) -> Plugin {
        Plugin { name, origin, factory: FactoryFn::Store(nothing) }
    }

    #[test]
    fn inventory_collects_registrations() {
        let registry = Registry::builtin().unwrap();
        assert!(registry.names(PluginKind::Store).contains(&"core-test-nothing"));
    }

    #[test]
    fn duplicate_names_are_refused_naming_both_origins() {
        let err = Registry::from_plugins([plugin("b", "crate-x 1.0"), plugin("a", "x"), plugin("b", "crate-y 2.0")])
            .unwrap_err();
        assert_eq!(err.to_string(), "duplicate store plugin \"b\": registered by crate-x 1.0 and by crate-y 2.0");
    }

    #[test]
    fn same_name_in_two_kinds_is_fine_and_entries_are_sorted() {
        fn emb(_: &Value, _: &FactoryContext) -> Result<Arc<dyn Embedder>, FactoryError> {
            Err(FactoryError::new("no"))
        }
        let r = Registry::from_plugins([
            plugin("z", "o"),
            Plugin { name: "z", origin: "o", factory: FactoryFn::Embedder(emb) },
            plugin("a", "o"),
        ])
        .unwrap();
        let listed: Vec<_> = r.entries().map(|e| (e.factory.kind(), e.name.as_str())).collect();
        assert_eq!(listed, [(PluginKind::Store, "a"), (PluginKind::Store, "z"), (PluginKind::Embedder, "z")]);
    }

    #[test]
    fn unknown_kind_lists_the_valid_ones_and_bad_keys_are_named() {
        let r = Registry::from_plugins([plugin("chroma", "o"), plugin("alpha", "o")]).unwrap();
        let ctx = FactoryContext::new("t");
        let err = r.store("qdrnt", &serde_json::json!({}), &ctx).err().unwrap();
        assert_eq!(err.to_string(), "unknown store kind \"qdrnt\"; valid kinds: alpha, chroma");
        let err = r.embedder("x", &serde_json::json!({}), &ctx).err().unwrap();
        assert_eq!(err.to_string(), "unknown embedder kind \"x\"; valid kinds: ");
        let err = r.store("alpha", &serde_json::json!({"sise": 1}), &ctx).err().unwrap();
        assert_eq!(err.to_string(), "store \"alpha\": unknown field `sise`, expected `size`");
    }

    #[test]
    fn secrets_come_from_the_environment_and_are_never_quoted() {
        let mut ctx = FactoryContext::new("t");
        ctx.env = Arc::new(|n| (n == "KEY").then(|| "s3cret".to_owned()));
        assert_eq!(ctx.secret("api_key_env", "KEY").unwrap(), "s3cret");
        assert_eq!(
            ctx.secret("api_key_env", "NOPE").unwrap_err().to_string(),
            "api_key_env: environment variable NOPE is not set or empty"
        );
        assert!(!format!("{ctx:?}").contains("s3cret"));
    }
}
