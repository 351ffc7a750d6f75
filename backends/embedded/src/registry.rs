//! The `embedded` store kind of the plugin registry. Settings: `path`, the
//! store folder (it must already hold an index).
//!
//! Every open of a folder already open in the process hands back the same
//! store ([`shared`]): `serve --stores FILE --tools all` reads the store
//! folder the file names and the navigation tools read, and each open would
//! otherwise hold its own vector index and lexical cache.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, Weak};

use rr_core::VectorStore;
use rr_core::registry::{FactoryContext, FactoryError};
use serde::Deserialize;
use serde_json::Value;

use crate::{EmbeddedError, EmbeddedStore};

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

fn create(config: &Value, _ctx: &FactoryContext) -> Result<Arc<dyn VectorStore>, FactoryError> {
    let s: Settings = FactoryError::parse(config)?;
    if !s.path.is_dir() {
        return Err(FactoryError::new(format!("path: {} is not a store folder", s.path.display())));
    }
    shared(&s.path)
        .map(|store| store as Arc<dyn VectorStore>)
        .map_err(|e| FactoryError::new(format!("cannot open the store at {}: {e}", s.path.display())))
}

rr_core::register_plugin!(store "embedded", create);

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `store` is `embedded` itself.
    fn same(store: &Arc<dyn VectorStore>, embedded: &Arc<EmbeddedStore>) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(store), Arc::as_ptr(embedded))
    }

    #[test]
    fn a_folder_open_in_the_process_is_opened_once() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = FactoryContext::new("test");
        let built = create(&serde_json::json!({ "path": dir.path() }), &ctx).unwrap();
        // Another spelling of the same folder.
        let other_path = dir.path().join(".").join("..").join(dir.path().file_name().unwrap());
        let again = shared(&other_path).unwrap();
        assert!(same(&built, &again));
        let elsewhere = tempfile::tempdir().unwrap();
        assert!(!Arc::ptr_eq(&shared(elsewhere.path()).unwrap(), &again));
        // Once nobody holds it, the next open is a new store.
        let weak = Arc::downgrade(&again);
        drop((built, again));
        assert!(weak.upgrade().is_none());
        let reopened = shared(dir.path()).unwrap();
        assert_eq!(Arc::strong_count(&reopened), 1);
    }

    #[test]
    fn a_path_that_is_not_a_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let err = create(&serde_json::json!({ "path": file }), &FactoryContext::new("test")).err().unwrap();
        assert_eq!(err.to_string(), format!("path: {} is not a store folder", file.display()));
    }
}
