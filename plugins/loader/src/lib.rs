//! Dynamic plugins: stores, embedders and rerankers in shared libraries.
//!
//! The Rust ABI is not stable between compilers, so nothing Rust-specific
//! crosses the library boundary: the host and a plugin speak a small C ABI
//! ([`abi`]) and exchange UTF-8 JSON. Loading goes in a fixed order, and
//! nothing of the plugin runs before the handshake says it speaks our ABI:
//!
//! 1. the path must be one the operator listed (callers pass only paths from
//!    the configuration) and an existing file;
//! 2. `dlopen` (this runs the library's initialisers: the reason for 1);
//! 3. `rr_plugin_abi_version() -> u32` must exist and return
//!    [`abi::ABI_VERSION`];
//! 4. only then `rr_plugin_describe_v1() -> *const RrPluginV1` is called and
//!    its table validated (kind, UTF-8 name, no null function pointer).
//!
//! Every refusal is a [`PluginError`] naming the file and the reason; none
//! crashes the host. Libraries are never unloaded (instances and function
//! pointers may outlive any owner we could pick), so they are leaked on
//! purpose. This crate is the only one in the workspace allowed `unsafe`.

pub mod abi;
pub mod guest;

use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use rr_core::registry::{Entry, Factory, FactoryContext, FactoryError};
use rr_core::{BackendError, CallContext, Candidate, Chunk, Embedder, Reranker, VectorQuery, VectorStore};
use serde::Deserialize;
use serde_json::{Value, json};

use abi::{ABI_VERSION, ENTRY_ABI_VERSION, ENTRY_DESCRIBE, Kind, RrBuffer, RrPluginV1, RrSlice};

/// Why a library was refused.
#[derive(Debug, thiserror::Error)]
#[error("plugin {}: {reason}", path.display())]
pub struct PluginError {
    pub path: PathBuf,
    pub reason: String,
}

fn refuse(path: &Path, reason: impl Into<String>) -> PluginError {
    PluginError { path: path.to_owned(), reason: reason.into() }
}

/// Loads one operator-listed library and returns its registry entry.
pub fn load(path: &Path) -> Result<Vec<Entry>, PluginError> {
    if !path.is_file() {
        return Err(refuse(path, "no such file"));
    }
    // SAFETY: loading a library runs its initialisers. The path comes from the
    // operator's configuration only (never from a client), which is the trust
    // decision this crate documents; nothing else of the library runs yet.
    let library = unsafe { libloading::Library::new(path) }
        .map_err(|e| refuse(path, format!("not a loadable shared library ({e})")))?;
    // Never unloaded: function pointers and instances may live as long as the process.
    let library: &'static libloading::Library = Box::leak(Box::new(library));

    // SAFETY: the symbol's type is fixed by ABI v1 and every version after it:
    // `extern "C" fn() -> u32`, taking nothing and touching nothing.
    let version_fn = unsafe { library.get::<extern "C" fn() -> u32>(ENTRY_ABI_VERSION) }
        .map_err(|_| refuse(path, "no rr_plugin_abi_version entry point: not a repo-retriever plugin"))?;
    let version = version_fn();
    if version != ABI_VERSION {
        return Err(refuse(path, format!("plugin ABI version {version}, but this host speaks version {ABI_VERSION}")));
    }
    // SAFETY: the handshake confirmed ABI v1, whose second entry point has this signature.
    let describe = unsafe { library.get::<extern "C" fn() -> *const RrPluginV1>(ENTRY_DESCRIBE) }
        .map_err(|_| refuse(path, "ABI version 1 but no rr_plugin_describe_v1 entry point"))?;
    let table = describe();
    if table.is_null() {
        return Err(refuse(path, "rr_plugin_describe_v1 returned a null table"));
    }
    // SAFETY: ABI v1 requires the table to be a static that lives as long as the
    // library, which is never unloaded; it was checked for null above.
    let table: &'static RrPluginV1 = unsafe { &*table };
    if table.struct_size < std::mem::size_of::<RrPluginV1>() {
        return Err(refuse(
            path,
            format!("plugin table is {} bytes, ABI v1 needs {}", table.struct_size, size_of::<RrPluginV1>()),
        ));
    }
    // SAFETY: ABI v1: `name` points at `len` bytes of static memory.
    let name = unsafe { table.name.as_bytes() };
    let name = std::str::from_utf8(name).map_err(|_| refuse(path, "plugin name is not UTF-8"))?.to_owned();
    if name.is_empty() {
        return Err(refuse(path, "plugin name is empty"));
    }
    let origin = format!("{} (dynamic, ABI v{ABI_VERSION})", path.display());
    let handle = Handle { table, name: name.clone() };
    let factory = match Kind::from_u32(table.kind) {
        Some(Kind::Store) => Factory::Store(Arc::new(move |c: &Value, _: &FactoryContext| {
            Ok(Arc::new(PluginStore(handle.create(c)?)) as Arc<dyn VectorStore>)
        })),
        Some(Kind::Embedder) => Factory::Embedder(Arc::new(move |c: &Value, _: &FactoryContext| {
            Ok(Arc::new(PluginEmbedder(handle.create(c)?)) as Arc<dyn Embedder>)
        })),
        Some(Kind::Reranker) => Factory::Reranker(Arc::new(move |c: &Value, _: &FactoryContext| {
            Ok(Arc::new(PluginReranker(handle.create(c)?)) as Arc<dyn Reranker>)
        })),
        None => return Err(refuse(path, format!("unknown plugin kind {}", table.kind))),
    };
    Ok(vec![Entry { name, origin, factory }])
}

#[derive(Clone)]
struct Handle {
    table: &'static RrPluginV1,
    name: String,
}

impl Handle {
    fn create(&self, config: &Value) -> Result<Arc<Instance>, FactoryError> {
        let config = config.to_string();
        let mut out = RrBuffer::EMPTY;
        let mut instance: *mut c_void = std::ptr::null_mut();
        let status = (self.table.create)(RrSlice::from_str(&config), &mut out, &mut instance);
        let text = self.take(out);
        if status != 0 || instance.is_null() {
            return Err(FactoryError::new(if text.is_empty() {
                "plugin refused its configuration".into()
            } else {
                text
            }));
        }
        Ok(Arc::new(Instance { table: self.table, name: self.name.clone(), ptr: instance }))
    }

    /// Copies a plugin-owned buffer and hands it back to the plugin to free.
    fn take(&self, out: RrBuffer) -> String {
        if out.ptr.is_null() {
            return String::new();
        }
        // SAFETY: ABI v1: a non-null buffer written by the plugin points at `len`
        // initialised bytes that stay valid until `free_buffer` is called with it.
        let bytes = unsafe { std::slice::from_raw_parts(out.ptr, out.len) };
        let text = String::from_utf8_lossy(bytes).into_owned();
        (self.table.free_buffer)(out);
        text
    }
}

/// One plugin instance; destroyed when the last backend holding it drops.
struct Instance {
    table: &'static RrPluginV1,
    name: String,
    ptr: *mut c_void,
}

// SAFETY: ABI v1 requires instances to be usable from any thread, concurrently
// (docs/plugins.md, "Threads"); the host never touches the pointee itself.
unsafe impl Send for Instance {}
// SAFETY: as above: `call` may run concurrently on one instance.
unsafe impl Sync for Instance {}

impl Drop for Instance {
    fn drop(&mut self) {
        (self.table.destroy)(self.ptr);
    }
}

impl Instance {
    /// One JSON call, off the async runtime's threads.
    async fn call(self: &Arc<Self>, request: Value) -> Result<Value, BackendError> {
        let me = self.clone();
        let name = self.name.clone();
        tokio::task::spawn_blocking(move || {
            let request = request.to_string();
            let mut out = RrBuffer::EMPTY;
            let status = (me.table.call)(me.ptr, RrSlice::from_str(&request), &mut out);
            let handle = Handle { table: me.table, name: me.name.clone() };
            let text = handle.take(out);
            if status != 0 {
                return Err(BackendError::new(&me.name, format!("plugin {} failed: {text}", me.name)));
            }
            serde_json::from_str(&text)
                .map_err(|e| BackendError::new(&me.name, format!("plugin {} answered invalid JSON: {e}", me.name)))
        })
        .await
        .map_err(|e| BackendError::new(&name, format!("plugin {name} call did not complete: {e}")))?
    }

    fn decode<T: for<'de> Deserialize<'de>>(&self, value: Value) -> Result<T, BackendError> {
        serde_json::from_value(value).map_err(|e| {
            BackendError::new(&self.name, format!("plugin {} answered an unexpected shape: {e}", self.name))
        })
    }
}

struct PluginReranker(Arc<Instance>);

#[async_trait]
impl Reranker for PluginReranker {
    fn name(&self) -> &str {
        &self.0.name
    }
    async fn rerank(&self, query: &str, documents: &[String], _: &CallContext) -> Result<Vec<f64>, BackendError> {
        #[derive(Deserialize)]
        struct Answer {
            scores: Vec<f64>,
        }
        let a: Answer = self.0.decode(self.0.call(json!({"query": query, "documents": documents})).await?)?;
        if a.scores.len() != documents.len() {
            return Err(BackendError::new(
                &self.0.name,
                format!("plugin {} returned {} scores for {} documents", self.0.name, a.scores.len(), documents.len()),
            ));
        }
        Ok(a.scores)
    }
}

struct PluginEmbedder(Arc<Instance>);

#[async_trait]
impl Embedder for PluginEmbedder {
    fn name(&self) -> &str {
        &self.0.name
    }
    async fn embed(&self, inputs: &[String], _: &CallContext) -> Result<Vec<Vec<f32>>, BackendError> {
        #[derive(Deserialize)]
        struct Answer {
            embeddings: Vec<Vec<f32>>,
        }
        let a: Answer = self.0.decode(self.0.call(json!({"inputs": inputs})).await?)?;
        if a.embeddings.len() != inputs.len() || a.embeddings.iter().any(Vec::is_empty) {
            return Err(BackendError::new(&self.0.name, format!("plugin {} returned no embedding", self.0.name)));
        }
        Ok(a.embeddings)
    }
}

struct PluginStore(Arc<Instance>);

#[async_trait]
impl VectorStore for PluginStore {
    fn name(&self) -> &str {
        &self.0.name
    }
    async fn query(&self, q: &VectorQuery, _: &CallContext) -> Result<Vec<Candidate>, BackendError> {
        #[derive(Deserialize)]
        struct Answer {
            candidates: Vec<Chunk>,
        }
        let f = &q.filter;
        let request = json!({
            "embedding": q.embedding, "n_results": q.n_results,
            "filter": {"organization": f.organization, "repository": f.repository, "branch": f.branch,
                       "path_glob": f.path.as_ref().map(|p| p.pattern()),
                       "path_regex": f.path.as_ref().map(|p| p.path_regex())},
        });
        let a: Answer = self.0.decode(self.0.call(request).await?)?;
        // The host re-checks the filter: a plugin that ignores it cannot leak other repositories.
        Ok(a.candidates.into_iter().filter(|c| f.matches(c)).take(q.n_results).map(Candidate::from).collect())
    }
}
