//! Git checkouts made by tests, and a loopback git server to clone them from.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::fixture::corpus;

/// Runs `git -C <dir> <args>` as a fixed test author (no signing, whatever the
/// user's configuration), panicking with git's stderr on failure; its trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"])
        .args(args)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A `git daemon`, stopped when dropped.
#[derive(Debug)]
pub struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A bare repository `demo/widgets.git` (branches main and dev), an empty
/// one `demo/empty.git`, served by `git daemon` on 127.0.0.1.
pub fn serve_git(base: &Path) -> (Daemon, u16) {
    let work = base.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let corpus = corpus();
    for sub in ["src", "py/widgets", "internal/store"] {
        std::fs::create_dir_all(work.join(sub)).unwrap();
    }
    for f in ["README.md", "src/lib.rs", "py/widgets/client.py", "internal/store/store.go"] {
        std::fs::copy(corpus.join(f), work.join(f)).unwrap();
    }
    // Over the 1 MB limit: left out, and said so.
    std::fs::write(work.join("big.txt"), "x".repeat(1024 * 1024)).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    git(&work, &["add", "."]);
    git(&work, &["commit", "-q", "-m", "init"]);
    git(&work, &["branch", "dev"]);
    std::fs::create_dir_all(base.join("srv/demo")).unwrap();
    git(base, &["clone", "-q", "--bare", work.to_str().unwrap(), "srv/demo/widgets.git"]);
    git(base, &["init", "-q", "--bare", "srv/demo/empty.git"]);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new("git")
        .args([
            "daemon",
            "--reuseaddr",
            "--export-all",
            "--listen=127.0.0.1",
            &format!("--port={port}"),
            &format!("--base-path={}", base.join("srv").display()),
            &base.join("srv").display().to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < Duration::from_secs(10), "git daemon did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    (Daemon(child), port)
}
