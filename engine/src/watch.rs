//! Keeping an embedded store in step with a checkout while it is served
//! (`serve --watch`).
//!
//! Every update is a whole re-index of the folder ([`crate::local`]'s), not
//! a patch per notified path: a re-index reads and hashes every file but
//! chunks and embeds only those whose text changed, deletes the records of
//! files that vanished and costs a small fraction of a fresh index, and it
//! is what makes the store converge whatever was missed. A notification
//! only says *when* to look again: an editor's save, a rename (seen as a
//! deletion and a new file), a branch switch, events dropped by a full
//! inotify queue, or a process killed halfway all end in the state a fresh
//! index of the tree would give, on the next update or the next start.
//!
//! Notifications are debounced ([`notify_debouncer_full`]): an update waits
//! until the tree has been quiet for the debounce time, and everything
//! notified meanwhile is folded into it, so a burst of edits costs one or
//! two updates. Events inside `.git` and the store's own folder are
//! ignored (a store inside the checkout would otherwise wake itself).
//!
//! An update writes all its records in one transaction ([`Follower::update`]),
//! so a search sees each file before or after it, never half of it; the
//! catch-up when the watch starts may be large and writes in batches.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify_debouncer_full::notify::event::{MetadataKind, ModifyKind};
use notify_debouncer_full::notify::{EventKind, RecursiveMode};
use notify_debouncer_full::{DebounceEventResult, new_debouncer};
use rr_core::Embedder;
use rr_embedded::EmbeddedStore;
use rr_indexer::sync::SyncSummary;

use crate::local::{IndexRequest, LocalError, OpenStore, StoreSettings, Writes};

/// How long the tree must be quiet before an update, by default.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(300);

/// Re-indexes one folder into a store that is open (and served).
#[derive(Clone)]
pub struct Follower {
    request: IndexRequest,
    settings: StoreSettings,
    embedder: Arc<dyn Embedder>,
    store: Arc<EmbeddedStore>,
}

impl std::fmt::Debug for Follower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follower").field("root", &self.request.root).field("store", &self.request.store).finish()
    }
}

impl Follower {
    /// Follows `request.root` into the store `open` (which `request.store`
    /// names), with the embedder and settings it was written with.
    pub fn new(request: IndexRequest, open: &OpenStore) -> Result<Self, LocalError> {
        if request.chroma.is_some() || request.dry_run {
            return Err(LocalError::WatchNeedsEmbedded);
        }
        let mut settings = open.settings.clone();
        if let Some(scheme) = request.chunking {
            settings.chunking = scheme;
        }
        Ok(Follower { request, settings, embedder: open.embedder.clone(), store: open.store.clone() })
    }

    /// The folder followed.
    pub fn root(&self) -> &Path {
        &self.request.root
    }

    /// Brings the store in line with the folder, writing every change in
    /// one transaction.
    pub async fn update(&self) -> Result<SyncSummary, LocalError> {
        self.run(Writes::Atomic).await
    }

    /// [`Follower::update`] in batches, for a catch-up that may rewrite
    /// much of the store.
    pub async fn catch_up(&self) -> Result<SyncSummary, LocalError> {
        self.run(Writes::Batched).await
    }

    async fn run(&self, mode: Writes) -> Result<SyncSummary, LocalError> {
        crate::local::index_in(
            self.request.clone(),
            self.settings.clone(),
            self.embedder.clone(),
            Some(self.store.clone()),
            mode,
        )
        .await
    }
}

/// A folder being watched: [`Watch::start`] sets the notifications up (so
/// that a folder that cannot be watched fails at once), [`Watch::run`]
/// catches up and then updates after every quiet burst of changes.
pub struct Watch {
    follower: Follower,
    /// Run (on the blocking pool) after every update that succeeded.
    after_update: Option<Arc<dyn Fn() + Send + Sync>>,
    ignored: Vec<PathBuf>,
    events: tokio::sync::mpsc::UnboundedReceiver<DebounceEventResult>,
    // Dropping it stops the notifications.
    _debouncer: Box<dyn std::any::Any + Send>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch").field("follower", &self.follower).finish_non_exhaustive()
    }
}

impl Watch {
    /// Starts watching `follower`'s folder, recursively.
    pub fn start(follower: Follower, debounce: Duration) -> Result<Self, LocalError> {
        // Absolute and canonical, so that the notified paths compare with
        // the ignored ones however the folders were named (`.`, a symlink).
        let canonical = |path: &Path| std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
        let root = canonical(follower.root());
        let failed = |source| LocalError::Watch { path: root.clone(), source };
        let (sender, events) = tokio::sync::mpsc::unbounded_channel();
        let mut debouncer = new_debouncer(debounce, None, move |result: DebounceEventResult| {
            // The receiver is gone only when the watch is.
            let _ = sender.send(result);
        })
        .map_err(failed)?;
        debouncer.watch(&root, RecursiveMode::Recursive).map_err(failed)?;
        let ignored = vec![root.join(".git"), canonical(&follower.request.store)];
        Ok(Watch { follower, after_update: None, ignored, events, _debouncer: Box::new(debouncer) })
    }

    /// Runs `hook` after every update that succeeded, e.g. to refresh what
    /// the navigation tools derive from the store.
    pub fn after_update(mut self, hook: impl Fn() + Send + Sync + 'static) -> Self {
        self.after_update = Some(Arc::new(hook));
        self
    }

    /// Whether a notification may concern the indexed files.
    fn concerns_files(&self, result: &DebounceEventResult) -> bool {
        match result {
            // Lost notifications: look again.
            Err(_) => true,
            Ok(events) => events
                .iter()
                // Opening and reading a file is no change; an update reads
                // every file, and would otherwise wake the next one.
                .filter(|event| changes_content(&event.kind))
                .flat_map(|event| event.paths.iter())
                .any(|path| !self.ignored.iter().any(|ignored| path.starts_with(ignored))),
        }
    }

    /// Catches up with the folder, then updates the store after every
    /// burst of changes, until the notifications stop. A failed update is
    /// logged and retried at the next change.
    pub async fn run(mut self) {
        let outcome = self.follower.catch_up().await;
        updated("catch-up", outcome, self.after_update.clone()).await;
        while let Some(first) = self.events.recv().await {
            let mut wanted = self.concerns_files(&first);
            log_errors(&first);
            while let Ok(more) = self.events.try_recv() {
                wanted |= self.concerns_files(&more);
                log_errors(&more);
            }
            if wanted {
                let outcome = self.follower.update().await;
                updated("update", outcome, self.after_update.clone()).await;
            }
        }
    }
}

/// Whether an event of `kind` may change what a file holds or where it is.
fn changes_content(kind: &EventKind) -> bool {
    !matches!(kind, EventKind::Access(_) | EventKind::Modify(ModifyKind::Metadata(MetadataKind::AccessTime)))
}

/// Logs an update's outcome and runs the hook after a success.
async fn updated(what: &str, outcome: Result<SyncSummary, LocalError>, hook: Option<Arc<dyn Fn() + Send + Sync>>) {
    let succeeded = outcome.is_ok();
    report(what, outcome);
    if let (true, Some(hook)) = (succeeded, hook) {
        // A panicking hook is the hook's problem: the watch goes on.
        let _ = tokio::task::spawn_blocking(move || hook()).await;
    }
}

fn log_errors(result: &DebounceEventResult) {
    if let Err(errors) = result {
        for error in errors {
            tracing::warn!(%error, "watch: file-system notification error; the folder is indexed again");
        }
    }
}

fn report(what: &str, outcome: Result<SyncSummary, LocalError>) {
    match outcome {
        Ok(s) => tracing::info!(
            what,
            files_unchanged = s.files_unchanged,
            files_eligible = s.files_eligible,
            added = s.chunks_added_or_updated,
            deleted = s.chunks_deleted,
            duration_ms = s.duration_ms,
            "watch: store updated"
        ),
        Err(error) => tracing::warn!(what, %error, "watch: the update failed; retried at the next change"),
    }
}
