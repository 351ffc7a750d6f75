//! The `embedded` store kind of the plugin registry. Settings: `path`, the
//! store folder (it must already hold an index).
//!
//! The embedded default (`serve --store`, `search`, `eval`) builds its store
//! through this kind like every other backend, and reaches the concrete
//! [`EmbeddedStore`] behind it with [`embedded`] rather than opening the
//! database and its vector index a second time. Every open through this
//! module ([`shared`]) of a folder already open in the process hands back the
//! same store: `serve --stores FILE --tools all` reads the store folder the
//! file names and the navigation tools read, and each open would otherwise
//! hold its own vector index and lexical cache.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, Weak};

use async_trait::async_trait;
use rr_core::registry::{FactoryContext, FactoryError};
use rr_core::retrieval::LexicalStore;
use rr_core::{BackendError, CallContext, Candidate, VectorQuery, VectorStore};
use serde::Deserialize;
use serde_json::Value;

use crate::{EmbeddedError, EmbeddedStore, STORE_NAME};

/// The stores open in this process, by canonical folder.
static OPEN: LazyLock<Mutex<HashMap<PathBuf, Weak<EmbeddedStore>>>> = LazyLock::new(Default::default);

/// The store in `dir`, opened once per process: while a caller holds it, every
/// other caller naming the same folder (by any path) gets the same store.
pub fn shared(dir: &Path) -> Result<Arc<EmbeddedStore>, EmbeddedError> {
    let mut open = OPEN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let key = dir.canonicalize().ok();
    if let Some(store) = key.as_ref().and_then(|key| open.get(key)).and_then(Weak::upgrade) {
        return Ok(store);
    }
    let store = Arc::new(EmbeddedStore::open(dir)?);
    // Opening creates the folder, so it has a canonical path now.
    if let Ok(key) = dir.canonicalize() {
        open.retain(|_, store| store.strong_count() > 0);
        open.insert(key, Arc::downgrade(&store));
    }
    Ok(store)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    path: PathBuf,
}

/// The embedded store, reporting the dimension it holds.
struct Registered(Arc<EmbeddedStore>);

/// The [`EmbeddedStore`] behind a store the registry built with the
/// `embedded` kind; `None` for a store of any other kind.
pub fn embedded(store: &dyn VectorStore) -> Option<Arc<EmbeddedStore>> {
    store.as_any()?.downcast_ref::<Registered>().map(|r| r.0.clone())
}

#[async_trait]
impl VectorStore for Registered {
    fn name(&self) -> &str {
        STORE_NAME
    }
    async fn query(&self, query: &VectorQuery, ctx: &CallContext) -> Result<Vec<Candidate>, BackendError> {
        VectorStore::query(self.0.as_ref(), query, ctx).await
    }
    async fn dimension(&self, _ctx: &CallContext) -> Result<Option<usize>, BackendError> {
        Ok(self.0.dimension())
    }
    fn lexical(&self) -> Option<&dyn LexicalStore> {
        Some(self.0.as_ref())
    }
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

fn create(config: &Value, _ctx: &FactoryContext) -> Result<Arc<dyn VectorStore>, FactoryError> {
    let s: Settings = FactoryError::parse(config)?;
    if !s.path.is_dir() {
        return Err(FactoryError::new(format!("path: {} is not a store folder", s.path.display())));
    }
    shared(&s.path)
        .map(|store| Arc::new(Registered(store)) as Arc<dyn VectorStore>)
        .map_err(|e| FactoryError::new(format!("cannot open the store at {}: {e}", s.path.display())))
}

rr_core::register_plugin!(store "embedded", create);

#[cfg(test)]
mod tests {
    use super::*;

    struct Other;

    #[async_trait]
    impl VectorStore for Other {
        fn name(&self) -> &str {
            "other"
        }
        async fn query(&self, _: &VectorQuery, _: &CallContext) -> Result<Vec<Candidate>, BackendError> {
            Ok(Vec::new())
        }
    }

    #[test]
    fn the_embedded_kind_hands_back_the_store_it_opened() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = FactoryContext::new("test");
        let built = create(&serde_json::json!({ "path": dir.path() }), &ctx).unwrap();
        let first = embedded(built.as_ref()).expect("the embedded kind's store");
        let second = embedded(built.as_ref()).unwrap();
        // One open store behind the registry's handle and both callers.
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(Arc::strong_count(&first), 3);
        assert!(embedded(&Other).is_none());
    }

    #[test]
    fn a_folder_open_in_the_process_is_opened_once() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = FactoryContext::new("test");
        let built = create(&serde_json::json!({ "path": dir.path() }), &ctx).unwrap();
        // Another spelling of the same folder.
        let other_path = dir.path().join(".").join("..").join(dir.path().file_name().unwrap());
        let again = shared(&other_path).unwrap();
        assert!(Arc::ptr_eq(&embedded(built.as_ref()).unwrap(), &again));
        let elsewhere = tempfile::tempdir().unwrap();
        assert!(!Arc::ptr_eq(&shared(elsewhere.path()).unwrap(), &again));
        // Once nobody holds it, the next open is a new store.
        let weak = Arc::downgrade(&again);
        drop((built, again));
        assert!(weak.upgrade().is_none());
        let reopened = shared(dir.path()).unwrap();
        assert_eq!(Arc::strong_count(&reopened), 1);
    }
}
