//! Running the numpy references of the model crates' tests.
//!
//! Each model crate checks its candle forward pass against a Python script
//! that recomputes it with numpy (`numpy_bert.py`, beside this crate's tests,
//! holds the BERT encoder those scripts share). These helpers find a python
//! that can run them and exchange JSON with a script; they panic on failure,
//! as test code does.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The workspace's `.venv/bin/python`, else the `python3` on `PATH`,
/// whichever imports numpy first. When there is none, says on stderr that the
/// test using `script` is skipped.
pub fn python_for(script: &str) -> Option<PathBuf> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    let found = [venv, PathBuf::from("python3")].into_iter().find(|python| {
        Command::new(python)
            .args(["-c", "import numpy"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if found.is_none() {
        eprintln!("SKIPPED: no python with numpy (.venv/bin/python or python3) for {script}");
    }
    found
}

/// Runs `python script args…` with `request` on stdin and returns the JSON it
/// prints; panics with the script's stderr when it fails.
pub fn run_json<A: AsRef<OsStr>>(
    python: &Path,
    script: &str,
    args: impl IntoIterator<Item = A>,
    request: &serde_json::Value,
) -> serde_json::Value {
    let mut child = Command::new(python)
        .arg(script)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    child.stdin.take().unwrap().write_all(request.to_string().as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{script} failed: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{script} printed no JSON: {e}"))
}
