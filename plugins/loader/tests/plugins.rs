//! Dynamic plugins: the example cdylib is loaded and reranks; a library
//! without the entry point, one with a wrong ABI version and a file that is not a
//! library are each refused with an error naming the file and the reason.

use std::path::PathBuf;

use rr_core::CallContext;
use rr_core::registry::{FactoryContext, PluginKind, Registry};
use serde_json::json;

/// `<target>/<profile>/deps/lib<name>.so` (or .dylib/.dll), built because the
/// crate is a dev-dependency with a `cdylib` crate type.
fn cdylib(crate_name: &str) -> PathBuf {
    let deps = std::env::current_exe().unwrap().parent().unwrap().to_path_buf();
    let file = format!("{}{}{}", std::env::consts::DLL_PREFIX, crate_name, std::env::consts::DLL_SUFFIX);
    for dir in [deps.clone(), deps.parent().unwrap().to_path_buf()] {
        if dir.join(&file).is_file() {
            return dir.join(&file);
        }
    }
    panic!("{file} not found next to the test binary in {}", deps.display());
}

#[tokio::test]
async fn the_example_cdylib_loads_and_boosts_by_path() {
    let path = cdylib("rr_plugin_boost");
    let entries = rr_plugins::load(&path).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].name, "boost");
    assert!(entries[0].origin.contains("rr_plugin_boost") && entries[0].origin.contains("ABI v1"));
    let mut registry = Registry::empty();
    registry.add(entries.into_iter().next().unwrap()).unwrap();
    assert_eq!(registry.names(PluginKind::Reranker), ["boost"]);
    let ctx = FactoryContext::new("test");
    let reranker = registry.reranker("boost", &json!({"extensions": [".md"]}), &ctx).unwrap();
    let docs: Vec<String> =
        ["a.go", "README.md", "b.go"].iter().map(|p| format!("Repository: o/r@b\nFile: {p}#L1-L2\n\nbody")).collect();
    let scores = reranker.rerank("q", &docs, &CallContext::default()).await.unwrap();
    assert!(scores[1] > scores[0] && scores[0] > scores[2], "{scores:?}");
    // Bad configuration: the plugin's own message, through the registry.
    let err = registry.reranker("boost", &json!({"prefix": 1}), &ctx).err().unwrap().to_string();
    assert!(err.starts_with("reranker \"boost\": unknown field `prefix`"), "{err}");
    // Loading the same library twice is a duplicate, refused by the registry.
    let again = rr_plugins::load(&path).unwrap().into_iter().next().unwrap();
    let dup = registry.add(again).unwrap_err().to_string();
    assert!(dup.starts_with("duplicate reranker plugin \"boost\": registered by"), "{dup}");
}

#[test]
fn a_library_without_the_entry_point_is_refused() {
    let path = cdylib("rr_plugin_fixture_no_entry");
    let err = rr_plugins::load(&path).unwrap_err().to_string();
    assert_eq!(
        err,
        format!("plugin {}: no rr_plugin_abi_version entry point: not a repo-retriever plugin", path.display())
    );
}

#[test]
fn a_wrong_abi_version_is_refused_after_the_handshake() {
    let path = cdylib("rr_plugin_fixture_wrong_abi");
    let err = rr_plugins::load(&path).unwrap_err().to_string();
    assert_eq!(err, format!("plugin {}: plugin ABI version 999, but this host speaks version 1", path.display()));
}

#[test]
fn a_file_that_is_not_a_library_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("libnot_a_plugin.so");
    std::fs::write(&path, "this is text, not ELF\n").unwrap();
    let err = rr_plugins::load(&path).unwrap_err().to_string();
    assert!(err.starts_with(&format!("plugin {}: not a loadable shared library (", path.display())), "{err}");
    let missing = dir.path().join("missing.so");
    assert_eq!(
        rr_plugins::load(&missing).unwrap_err().to_string(),
        format!("plugin {}: no such file", missing.display())
    );
}
