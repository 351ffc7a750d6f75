//! What an operator watches: `/healthz`, `/readyz` and Prometheus text at
//! `/metrics`.
//!
//! The counters and histograms go through the `metrics` facade (one global
//! recorder per process, installed by [`Telemetry::install`]); the
//! Prometheus recorder of `metrics-exporter-prometheus` renders them. The
//! store's figures are gauges read when a scrape comes, from whatever
//! [`StoreStatus`] the server was given: they cost nothing between scrapes.
//!
//! Recorded per tool call (stdio and HTTP alike, in [`crate::McpServer`]):
//! `repo_retriever_tool_calls_total{tool}`,
//! `repo_retriever_tool_errors_total{tool,class}` and
//! `repo_retriever_tool_call_duration_seconds{tool}`. The classes of
//! errors are [`ErrorClass`]'s. Per search that answered:
//! `repo_retriever_search_stage_duration_seconds{stage}`, the time of each
//! stage of the ranking chain (`embed`, `retrieve`, `rerank`, `code_rank`,
//! `select`; [`rr_core::StageTimings`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

pub const TOOL_CALLS: &str = "repo_retriever_tool_calls_total";
pub const TOOL_ERRORS: &str = "repo_retriever_tool_errors_total";
pub const TOOL_DURATION: &str = "repo_retriever_tool_call_duration_seconds";
pub use crate::search::SEARCH_STAGE_DURATION;
pub const STORE_CHUNKS: &str = "repo_retriever_store_chunks";
pub const STORE_FILES: &str = "repo_retriever_store_files";
pub const STORE_REPOSITORIES: &str = "repo_retriever_store_repositories";

/// Latency buckets of a tool or backend call, in seconds: a search of the embedded store takes milliseconds,
/// one through remote backends or an `add_repository` clone may take many seconds.
const DURATION_BUCKETS: [f64; 14] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// Buckets of one stage of a search, in seconds: over the embedded store most
/// stages take well under a millisecond.
const STAGE_BUCKETS: [f64; 12] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.5];

/// Why a tool call failed, as the `class` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// The arguments were refused (a tool error naming the argument).
    InvalidArguments,
    /// A backend (store, embedder, reranker) failed.
    Backend,
    /// Any other tool error of a navigation tool.
    Tool,
    /// A read-only token asked for a tool that changes the index.
    Forbidden,
    /// The client cancelled the call.
    Cancelled,
    /// A JSON-RPC error (unknown tool and the like).
    Protocol,
}

impl ErrorClass {
    pub fn label(self) -> &'static str {
        match self {
            ErrorClass::InvalidArguments => "invalid_arguments",
            ErrorClass::Backend => "backend",
            ErrorClass::Tool => "tool_error",
            ErrorClass::Forbidden => "forbidden",
            ErrorClass::Cancelled => "cancelled",
            ErrorClass::Protocol => "protocol",
        }
    }
}

/// Whether a recorder is installed: without one (the drop-in, stdio without
/// `--metrics`) a call records nothing and builds no labels.
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Whether tool calls are counted (a recorder is installed).
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Counts one tool call that took `elapsed`, and its error when it failed.
pub fn record_tool_call(tool: &str, elapsed: Duration, error: Option<ErrorClass>) {
    if !ENABLED.load(Ordering::Relaxed) {
        return;
    }
    metrics::counter!(TOOL_CALLS, "tool" => tool.to_owned()).increment(1);
    metrics::histogram!(TOOL_DURATION, "tool" => tool.to_owned()).record(elapsed.as_secs_f64());
    if let Some(class) = error {
        metrics::counter!(TOOL_ERRORS, "tool" => tool.to_owned(), "class" => class.label()).increment(1);
    }
}

/// Where a tool's handler says why its call failed, for the call's
/// `class` label: put into the call's context by [`crate::McpServer`].
#[derive(Debug, Clone, Default)]
pub struct ErrorSlot(Arc<Mutex<Option<ErrorClass>>>);

impl ErrorSlot {
    pub fn set(&self, class: ErrorClass) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(class);
    }
    pub fn take(&self) -> Option<ErrorClass> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

/// The size of the served store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    pub chunks: u64,
    pub files: u64,
    pub repositories: u64,
}

/// What `/metrics` and `/readyz` know of the served store.
#[async_trait::async_trait]
pub trait StoreStatus: Send + Sync + 'static {
    /// The store's figures; `None` when they are not counted (a remote store).
    async fn stats(&self) -> Option<Result<StoreStats, String>>;
    /// `Ok` when the store and its backends answer; `Err` says which does not.
    async fn ready(&self) -> Result<(), String>;
}

/// A local store whose figures `read` gives (called on a blocking thread):
/// ready when they can be read.
pub struct LocalStore<F>(pub F);

#[async_trait::async_trait]
impl<F> StoreStatus for LocalStore<F>
where
    F: Fn() -> Result<StoreStats, String> + Clone + Send + Sync + 'static,
{
    async fn stats(&self) -> Option<Result<StoreStats, String>> {
        let read = self.0.clone();
        Some(tokio::task::spawn_blocking(read).await.unwrap_or_else(|e| Err(e.to_string())))
    }

    async fn ready(&self) -> Result<(), String> {
        self.stats().await.map_or(Ok(()), |stats| stats.map(drop))
    }
}

/// Remote backends (Chroma, embedding and rerank endpoints, several
/// stores): ready when a one-result search through them all succeeds,
/// each backend within its own time-out and attempts.
pub struct SearchProbe(pub rr_core::SearchEngine);

/// The query of a readiness search.
pub const PROBE_QUERY: &str = "readiness probe";

#[async_trait::async_trait]
impl StoreStatus for SearchProbe {
    async fn stats(&self) -> Option<Result<StoreStats, String>> {
        None
    }

    async fn ready(&self) -> Result<(), String> {
        let args = rr_core::SearchArgs { query: PROBE_QUERY.into(), limit: 1, ..Default::default() };
        let limits = rr_core::ArgLimits::default();
        let ctx = rr_core::CallContext::default();
        let outcome = crate::search::call_with(&self.0, args, &ctx, &limits, crate::ErrorText::Summary).await;
        if outcome.is_error { Err(outcome.text) } else { Ok(()) }
    }
}

/// How long a readiness answer is kept: `/readyz` reaches the backends at
/// most once per interval, however often it is asked.
pub const READY_INTERVAL: Duration = Duration::from_secs(5);

/// How long `/readyz` waits for a probe before it answers not ready: a
/// backend that hangs makes the probe slow, not the answer.
pub const READY_DEADLINE: Duration = Duration::from_millis(1500);

/// What says, at no cost and uncached, whether the server can serve
/// beyond its backends answering (a watch that cannot watch its folder).
pub type ReadyGate = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// The readiness probe, run at most once at a time and once per interval:
/// `/readyz` is open to anyone, so it must not be a way to load the
/// backends. A probe runs on its own task; callers wait for it up to the
/// deadline, and a probe still running past it is waited for, not repeated.
struct Readiness {
    interval: Duration,
    deadline: Duration,
    state: Mutex<ProbeState>,
}

type Answer = Option<Result<(), String>>;

#[derive(Default)]
struct ProbeState {
    /// When the last probe started, and what it found.
    last: Option<(std::time::Instant, Result<(), String>)>,
    /// The probe running now.
    running: Option<tokio::sync::watch::Receiver<Answer>>,
}

impl Readiness {
    fn new(interval: Duration, deadline: Duration) -> Self {
        Readiness { interval, deadline, state: Mutex::default() }
    }

    async fn ready(self: &Arc<Self>, store: &Arc<dyn StoreStatus>) -> Result<(), String> {
        let mut answer = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            // A probe whose task is gone (it panicked) is no longer waited for.
            if state.running.as_ref().is_some_and(|running| running.has_changed().is_err()) {
                state.running = None;
            }
            match (&state.running, &state.last) {
                (Some(running), _) => running.clone(),
                (None, Some((started, result))) if started.elapsed() < self.interval => return result.clone(),
                (None, _) => {
                    let (sender, receiver) = tokio::sync::watch::channel(None);
                    state.running = Some(receiver.clone());
                    let (this, store) = (self.clone(), store.clone());
                    tokio::spawn(async move {
                        let started = std::time::Instant::now();
                        let result = store.ready().await;
                        let mut state = this.state.lock().unwrap_or_else(PoisonError::into_inner);
                        state.last = Some((started, result.clone()));
                        state.running = None;
                        let _ = sender.send(Some(result));
                    });
                    receiver
                }
            }
        };
        match tokio::time::timeout(self.deadline, answer.wait_for(Option::is_some)).await {
            Ok(Ok(result)) => (*result).clone().unwrap_or(Ok(())),
            Ok(Err(_)) => Err("the readiness probe stopped".into()),
            Err(_) => Err(format!("the backends did not answer within {} ms", self.deadline.as_millis())),
        }
    }
}

/// The process's recorder and the store to report on.
#[derive(Clone)]
pub struct Telemetry {
    handle: PrometheusHandle,
    store: Option<Arc<dyn StoreStatus>>,
    readiness: Arc<Readiness>,
    gates: Vec<ReadyGate>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry").field("store", &self.store.is_some()).finish()
    }
}

static HANDLE: OnceLock<Result<PrometheusHandle, String>> = OnceLock::new();

fn describe() {
    metrics::describe_counter!(TOOL_CALLS, "Tool calls, by tool.");
    metrics::describe_counter!(TOOL_ERRORS, "Tool calls that failed, by tool and class of error.");
    metrics::describe_histogram!(TOOL_DURATION, metrics::Unit::Seconds, "Time to answer a tool call, by tool.");
    metrics::describe_histogram!(
        SEARCH_STAGE_DURATION,
        metrics::Unit::Seconds,
        "Time of each stage of a search's ranking chain, by stage."
    );
    metrics::describe_gauge!(STORE_CHUNKS, "Chunks in the served store.");
    metrics::describe_gauge!(STORE_FILES, "Files in the served store.");
    metrics::describe_gauge!(STORE_REPOSITORIES, "Repositories (namespaces) in the served store.");
}

impl Telemetry {
    /// Installs the Prometheus recorder as the process's (once; later calls
    /// share it) and reports on `store` when given. Histogram samples are
    /// folded in every few seconds by a task on the current runtime.
    pub fn install(store: Option<Arc<dyn StoreStatus>>) -> Result<Telemetry, String> {
        let handle = HANDLE
            .get_or_init(|| {
                let recorder = PrometheusBuilder::new()
                    // Tool calls and backend calls alike (`…_duration_seconds`).
                    .set_buckets_for_metric(Matcher::Suffix("_duration_seconds".into()), &DURATION_BUCKETS)
                    .map_err(|e| format!("metrics: {e}"))?
                    // A full name wins over a suffix.
                    .set_buckets_for_metric(Matcher::Full(SEARCH_STAGE_DURATION.into()), &STAGE_BUCKETS)
                    .map_err(|e| format!("metrics: {e}"))?
                    .build_recorder();
                let handle = recorder.handle();
                metrics::set_global_recorder(recorder).map_err(|e| format!("metrics: {e}"))?;
                describe();
                ENABLED.store(true, Ordering::Relaxed);
                let upkeep = handle.clone();
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    runtime.spawn(async move {
                        loop {
                            tokio::time::sleep(Duration::from_secs(5)).await;
                            upkeep.run_upkeep();
                        }
                    });
                }
                Ok(handle)
            })
            .clone()?;
        Ok(Telemetry {
            handle,
            store,
            readiness: Arc::new(Readiness::new(READY_INTERVAL, READY_DEADLINE)),
            gates: vec![],
        })
    }

    /// Adds a condition `/readyz` checks on every request, before the
    /// (cached) probe of the store.
    pub fn gate(mut self, gate: ReadyGate) -> Self {
        self.gates.push(gate);
        self
    }

    /// The Prometheus text of a scrape, the store's gauges set first.
    pub async fn render(&self) -> String {
        let stats = match &self.store {
            Some(store) => store.stats().await,
            None => None,
        };
        if let Some(Ok(stats)) = stats {
            metrics::gauge!(STORE_CHUNKS).set(stats.chunks as f64);
            metrics::gauge!(STORE_FILES).set(stats.files as f64);
            metrics::gauge!(STORE_REPOSITORIES).set(stats.repositories as f64);
        }
        self.handle.render()
    }

    /// `Ok` when the server can answer: every gate passes and the store,
    /// and the backends it needs, answer (asked at most once per
    /// [`READY_INTERVAL`], waited for at most [`READY_DEADLINE`]).
    pub async fn ready(&self) -> Result<(), String> {
        for gate in &self.gates {
            gate()?;
        }
        match &self.store {
            Some(store) => self.readiness.ready(store).await,
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A backend that counts its probes and answers after `delay`, or never.
    struct Counted {
        probes: AtomicUsize,
        delay: Option<Duration>,
    }

    #[async_trait::async_trait]
    impl StoreStatus for Counted {
        async fn stats(&self) -> Option<Result<StoreStats, String>> {
            None
        }
        async fn ready(&self) -> Result<(), String> {
            self.probes.fetch_add(1, Ordering::SeqCst);
            match self.delay {
                Some(delay) => tokio::time::sleep(delay).await,
                None => std::future::pending().await,
            }
            Ok(())
        }
    }

    fn counted(delay: Option<Duration>) -> (Arc<Counted>, Arc<dyn StoreStatus>) {
        let counted = Arc::new(Counted { probes: AtomicUsize::new(0), delay });
        (counted.clone(), counted)
    }

    #[tokio::test]
    async fn many_readiness_checks_reach_the_backends_once_per_interval() {
        let (counted, store) = counted(Some(Duration::from_millis(20)));
        let readiness = Arc::new(Readiness::new(Duration::from_secs(3600), Duration::from_secs(60)));
        let checks: Vec<_> = (0..200)
            .map(|_| {
                let (readiness, store) = (readiness.clone(), store.clone());
                tokio::spawn(async move { readiness.ready(&store).await })
            })
            .collect();
        for check in checks {
            assert_eq!(check.await.unwrap(), Ok(()));
        }
        // Asked again within the interval: the answer kept.
        assert_eq!(readiness.ready(&store).await, Ok(()));
        assert_eq!(counted.probes.load(Ordering::SeqCst), 1);

        // Once the interval has passed, one probe more.
        let readiness = Arc::new(Readiness::new(Duration::ZERO, Duration::from_secs(60)));
        for _ in 0..3 {
            assert_eq!(readiness.ready(&store).await, Ok(()));
        }
        assert_eq!(counted.probes.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn a_backend_that_never_answers_makes_readiness_fail_not_wait() {
        let (counted, store) = counted(None);
        let readiness = Arc::new(Readiness::new(Duration::ZERO, Duration::from_millis(50)));
        for _ in 0..3 {
            assert_eq!(readiness.ready(&store).await, Err("the backends did not answer within 50 ms".into()));
        }
        // The probe still running is waited for, never started again beside it.
        assert_eq!(counted.probes.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_gate_that_fails_makes_the_server_not_ready() {
        let telemetry = Telemetry::install(None).unwrap().gate(Arc::new(|| Err("the watched folder is gone".into())));
        assert_eq!(telemetry.ready().await, Err("the watched folder is gone".into()));
    }
}
