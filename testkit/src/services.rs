//! Chroma and the embed server, each started once per test binary behind a watchdog.
//!
//! Why the services are spawned through `sh -c` with a watchdog loop: they live in `static`s, which
//! are never dropped, so nothing in this process would ever kill them. The small shell wrapper polls
//! the pid of the test process and stops the service (TERM, then KILL) once that process is gone,
//! however it ended, and removes the service's temporary data folder. No `unsafe`, no signal hooks.
//!
//! Environment:
//! - `CHROMA_URL`: use an already running Chroma instead of starting one.
//! - `CHROMA_BIN`: the `chroma` executable; else `<workspace>/.venv/bin/chroma` (what
//!   `scripts/setup-chroma` installs), else `chroma` on `PATH`. With none of them the tests fail,
//!   saying how to install it: a missing Chroma must never pass as a skipped test.
//! - `EMBED_URL`: use an already running embed server instead of starting one.
//! - `PYTHON`: the interpreter for the embed server (default `python3`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::fixture::{testdata_dir, workspace_root};

/// How long a service may take to come up.
const SERVICE_START_TIMEOUT: Duration = Duration::from_secs(60);

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local_addr").port()
}

/// A short name of this test binary, to name its log files.
fn binary_stem() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| format!("pid{}", std::process::id()))
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read(path).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Runs `"$@"` in the background and stops it once `$RR_WATCH_PID` (the test process) is gone;
/// exits itself when the service dies, so `try_wait` on the wrapper reports an early death.
const WATCHDOG: &str = r#"
"$@" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT HUP
while kill -0 "$RR_WATCH_PID" 2>/dev/null && kill -0 "$child" 2>/dev/null; do sleep 0.5; done
kill -TERM "$child" 2>/dev/null
i=0
while kill -0 "$child" 2>/dev/null && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i+1)); done
kill -KILL "$child" 2>/dev/null
wait "$child" 2>/dev/null
rc=$?
if [ -n "$RR_CLEANUP_DIR" ]; then rm -rf "$RR_CLEANUP_DIR"; fi
exit "$rc"
"#;

fn spawn_watched(program: &Path, args: &[String], log: &Path, cleanup_dir: Option<&Path>) -> Child {
    let log_file = std::fs::File::create(log).unwrap_or_else(|e| panic!("create {}: {e}", log.display()));
    let log_err = log_file.try_clone().expect("clone log file handle");
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(WATCHDOG).arg("sh").arg(program).args(args);
    cmd.env("RR_WATCH_PID", std::process::id().to_string());
    cmd.env("RR_CLEANUP_DIR", cleanup_dir.map(|d| d.as_os_str().to_owned()).unwrap_or_default());
    cmd.stdin(Stdio::null()).stdout(Stdio::from(log_file)).stderr(Stdio::from(log_err));
    cmd.spawn().unwrap_or_else(|e| panic!("spawn sh for {}: {e}", program.display()))
}

/// The status of a plain HTTP/1.1 GET on loopback, without an async runtime.
fn status_of(port: u16, path: &str, timeout: Duration) -> Option<u16> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    stream.set_write_timeout(Some(timeout)).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n").ok()?;
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf).ok()?;
    String::from_utf8_lossy(&buf).split_whitespace().nth(1)?.parse().ok()
}

/// A service started behind [`WATCHDOG`].
#[derive(Debug)]
struct Started {
    /// Kept, never waited for nor killed: the watchdog owns the service's lifetime.
    _wrapper: Child,
    port: u16,
    log: PathBuf,
}

/// Starts `program args… --host 127.0.0.1 --port <free port>` behind the watchdog and waits until
/// `GET health_path` answers 200. Retries on a fresh port when the service dies during start-up
/// (e.g. the port was taken).
fn start_service(
    what: &str,
    program: &Path,
    args: &[String],
    health_path: &str,
    cleanup_dir: Option<&Path>,
    log_dir: &Path,
) -> Started {
    let args_for_port = |port: u16| {
        let mut all = args.to_vec();
        all.extend(["--host".into(), "127.0.0.1".into(), "--port".into(), port.to_string()]);
        all
    };
    std::fs::create_dir_all(log_dir).unwrap_or_else(|e| panic!("create {}: {e}", log_dir.display()));
    let log = log_dir.join(format!("{what}-{}.log", binary_stem()));
    let mut last_failure = String::new();
    let mut last_port = 0;
    for _attempt in 0..3 {
        let port = free_port();
        last_port = port;
        let mut wrapper = spawn_watched(program, &args_for_port(port), &log, cleanup_dir);
        let started = Instant::now();
        loop {
            if status_of(port, health_path, Duration::from_secs(2)) == Some(200) {
                return Started { _wrapper: wrapper, port, log };
            }
            if let Ok(Some(status)) = wrapper.try_wait() {
                last_failure = format!("{what} exited during start-up ({status})");
                break;
            }
            if started.elapsed() > SERVICE_START_TIMEOUT {
                let _ = wrapper.kill();
                panic!(
                    "{what} did not answer GET {health_path} on 127.0.0.1:{port} within {:?}\n\
                     command: {} {}\nlog {}:\n{}",
                    SERVICE_START_TIMEOUT,
                    program.display(),
                    args_for_port(port).join(" "),
                    log.display(),
                    tail(&log, 40)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    panic!(
        "{last_failure}; gave up after 3 attempts\ncommand: {} {}\nlog {}:\n{}",
        program.display(),
        args_for_port(last_port).join(" "),
        log.display(),
        tail(&log, 40)
    );
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| p.is_file())
}

/// The `chroma` executable: `CHROMA_BIN`, else `<workspace>/.venv/bin/chroma`, else `chroma` on
/// `PATH`; panics, saying how to install it, when there is none.
pub fn chroma_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("CHROMA_BIN").filter(|v| !v.is_empty()) {
        let bin = PathBuf::from(bin);
        assert!(bin.is_file(), "CHROMA_BIN={} does not exist", bin.display());
        return bin;
    }
    let venv = workspace_root().join(".venv/bin/chroma");
    if venv.is_file() {
        return venv;
    }
    if let Some(bin) = find_on_path("chroma") {
        return bin;
    }
    panic!(
        "these tests need a real Chroma 1.5.9 server and found none.\n\
         Run `bash scripts/test` (it creates .venv and installs it), or install it yourself:\n\
         \x20   python3 -m venv .venv && .venv/bin/pip install chromadb==1.5.9\n\
         then set CHROMA_BIN=/path/to/chroma (or CHROMA_URL=http://host:port for a running server)."
    );
}

/// A service shared by all tests of one test binary: started by it, or adopted from the URL in an
/// environment variable.
#[derive(Debug)]
pub struct Service {
    url: String,
    /// None when adopted.
    started: Option<Started>,
}

impl Service {
    /// The service at `$var` (no trailing slash) when that is set and not empty.
    fn adopted(var: &str) -> Option<Service> {
        let url = std::env::var(var).ok().filter(|v| !v.is_empty())?;
        Some(Service { url: url.trim_end_matches('/').to_string(), started: None })
    }

    fn started(started: Started) -> Service {
        Service { url: format!("http://127.0.0.1:{}", started.port), started: Some(started) }
    }

    /// `http://127.0.0.1:<port>` (or the adopted URL), no trailing slash.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The log file of a service this binary started (None when adopted).
    pub fn log(&self) -> Option<&Path> {
        self.started.as_ref().map(|s| s.log.as_path())
    }
}

/// The real Chroma of this test binary: started on first use (or adopted from `CHROMA_URL`), the
/// same one on later calls. Its log goes into `log_dir` (a test's `CARGO_TARGET_TMPDIR`, say).
pub fn chroma(log_dir: &Path) -> &'static Service {
    static CHROMA: OnceLock<Result<Service, String>> = OnceLock::new();
    init_once(&CHROMA, "Chroma", || {
        if let Some(adopted) = Service::adopted("CHROMA_URL") {
            return adopted;
        }
        let bin = chroma_bin();
        let dir = std::env::temp_dir().join(format!("rr-chroma-{}-{}", std::process::id(), unique()));
        std::fs::create_dir_all(&dir).expect("create the Chroma data folder");
        let args = ["run".into(), "--path".into(), dir.join("data").display().to_string()];
        Service::started(start_service("chroma", &bin, &args, "/api/v2/heartbeat", Some(&dir), log_dir))
    })
}

/// The model name the tests pass to the embed server (it accepts any).
pub const EMBED_MODEL: &str = "hash-256";

/// The deterministic OpenAI-compatible embeddings and rerank server of this test binary
/// (`testdata/embed_server.py`): started on first use (or adopted from `EMBED_URL`), the same one on
/// later calls. Its log goes into `log_dir`.
pub fn embed_server(log_dir: &Path) -> &'static Service {
    static EMBED: OnceLock<Result<Service, String>> = OnceLock::new();
    init_once(&EMBED, "the embed server", || {
        if let Some(adopted) = Service::adopted("EMBED_URL") {
            return adopted;
        }
        let python = std::env::var_os("PYTHON").filter(|v| !v.is_empty()).map(PathBuf::from);
        let python = python.or_else(|| find_on_path("python3")).expect("python3 is needed for the embed server");
        let script = testdata_dir().join("embed_server.py");
        assert!(script.is_file(), "missing {}", script.display());
        Service::started(start_service("embed", &python, &[script.display().to_string()], "/health", None, log_dir))
    })
}

fn unique() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default()
}

/// The message of a caught panic.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(non-string panic)".to_string())
}

/// Initialises a shared value once; when that fails, every later caller fails at once with the
/// same message instead of trying again (a Chroma that cannot start would otherwise cost every
/// test its own start-up timeout).
pub fn init_once<T>(cell: &'static OnceLock<Result<T, String>>, what: &str, init: impl FnOnce() -> T) -> &'static T {
    let result = cell.get_or_init(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(init)).map_err(|p| panic_message(p.as_ref()))
    });
    match result {
        Ok(value) => value,
        Err(message) => panic!("{what} could not be set up (first failure, remembered):\n{message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_set_up_is_remembered_with_its_message() {
        static CELL: OnceLock<Result<u8, String>> = OnceLock::new();
        let first = std::panic::catch_unwind(|| *init_once(&CELL, "the thing", || panic!("no disk")));
        let first = panic_message(first.unwrap_err().as_ref());
        assert_eq!(first, "the thing could not be set up (first failure, remembered):\nno disk");
        let again = std::panic::catch_unwind(|| *init_once(&CELL, "the thing", || 1));
        assert_eq!(panic_message(again.unwrap_err().as_ref()), first, "not tried again");
    }

    #[test]
    fn a_free_port_can_be_bound() {
        let port = free_port();
        assert!(TcpListener::bind(("127.0.0.1", port)).is_ok());
    }
}
