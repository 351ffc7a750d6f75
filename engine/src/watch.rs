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
//! An update writes all its records, and the files' texts, in one
//! transaction ([`Follower::update`]), so a search sees each file before
//! or after it, never half of it. So does the catch-up when the watch
//! starts, unless the store has nothing of the repository yet: a first
//! fill may be the whole repository, and is written in batches (memory
//! stays bounded), while [`WatchStatus`] says not ready.
//!
//! The repository's identity (its branch above all) is read from the
//! checkout again before every update, as `index` reads it: after `git
//! checkout feature` the files are indexed as `feature`'s.
//!
//! A watched folder that is deleted and created again (a re-clone, a
//! recreated worktree, a build that wipes and restores) takes its
//! notifications with it. The watch notices (the folder's inode changes,
//! it is gone, or a notification says it was deleted or moved: a folder
//! created at once may get the old inode number back), says not ready,
//! waits for the folder to be back, watches it anew and indexes it again.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
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

/// How often the watch looks whether its folder is still the one it
/// watches (and, once it is gone, whether it is back).
const FOLDER_CHECK: Duration = Duration::from_millis(250);

/// Whether a watch follows its folder: shared with whoever reports
/// readiness (`/readyz`).
#[derive(Debug, Clone, Default)]
pub struct WatchStatus(Arc<Mutex<Option<String>>>);

impl WatchStatus {
    /// `Ok` while the store is in step with the folder and the folder is
    /// watched; otherwise why not.
    pub fn check(&self) -> Result<(), String> {
        match &*self.0.lock().unwrap_or_else(PoisonError::into_inner) {
            None => Ok(()),
            Some(why) => Err(why.clone()),
        }
    }

    fn set(&self, why: Option<String>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = why;
    }
}

/// Re-indexes one folder into a store that is open (and served).
#[derive(Clone)]
pub struct Follower {
    request: IndexRequest,
    settings: StoreSettings,
    embedder: Arc<dyn Embedder>,
    store: Arc<EmbeddedStore>,
    /// When set, the identity is read from the checkout before each run.
    identity_flags: Option<rr_indexer::checkout::IdentityFlags>,
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
        Ok(Follower {
            request,
            settings,
            embedder: open.embedder.clone(),
            store: open.store.clone(),
            identity_flags: None,
        })
    }

    /// Reads the repository's identity from the checkout (with `flags`
    /// winning, as for `index`) before every run, rather than keeping the
    /// request's: a branch switch is then indexed as the new branch.
    pub fn identity_from_checkout(mut self, flags: rr_indexer::checkout::IdentityFlags) -> Self {
        self.identity_flags = Some(flags);
        self
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

    /// [`Follower::update`] when the watch starts: in one transaction too,
    /// unless the store holds nothing of the repository yet (a first fill,
    /// written in batches to keep memory bounded).
    pub async fn catch_up(&self) -> Result<SyncSummary, LocalError> {
        let follower = self.clone();
        let known = tokio::task::spawn_blocking(move || {
            let namespace_id = follower.current_request().identity.namespace_id();
            follower.store.list_files(&namespace_id).map(|files| !files.is_empty())
        })
        .await?
        .map_err(LocalError::StoreFiles)?;
        self.run(if known { Writes::Atomic } else { Writes::Batched }).await
    }

    /// The request of the next run, with the identity the checkout has now.
    fn current_request(&self) -> IndexRequest {
        let mut request = self.request.clone();
        if let Some(flags) = &self.identity_flags {
            request.identity = rr_indexer::checkout::local_identity(&request.root, flags);
        }
        request
    }

    async fn run(&self, mode: Writes) -> Result<SyncSummary, LocalError> {
        let request = {
            let follower = self.clone();
            tokio::task::spawn_blocking(move || follower.current_request()).await?
        };
        crate::local::index_in(request, self.settings.clone(), self.embedder.clone(), Some(self.store.clone()), mode)
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
    /// The folder watched, canonical, and which folder it was when the
    /// notifications were set up.
    root: PathBuf,
    /// `.git/HEAD`, which names the checkout's branch.
    head: PathBuf,
    inode: Option<FolderId>,
    debounce: Duration,
    status: WatchStatus,
    events: tokio::sync::mpsc::UnboundedReceiver<DebounceEventResult>,
    // Dropping it stops the notifications.
    _debouncer: Box<dyn std::any::Any + Send>,
}

/// Which folder a path names: a folder deleted and created again is
/// another one, though its path is the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FolderId(u64, u64);

impl FolderId {
    #[cfg(unix)]
    fn of(path: &Path) -> Option<FolderId> {
        use std::os::unix::fs::MetadataExt as _;
        let metadata = std::fs::metadata(path).ok().filter(std::fs::Metadata::is_dir)?;
        Some(FolderId(metadata.dev(), metadata.ino()))
    }

    #[cfg(not(unix))]
    fn of(path: &Path) -> Option<FolderId> {
        std::fs::metadata(path).ok().filter(std::fs::Metadata::is_dir).map(|_| FolderId(0, 0))
    }
}

type Events = tokio::sync::mpsc::UnboundedReceiver<DebounceEventResult>;

/// Recursive notifications of `root`, debounced, and what keeps them coming.
fn notifications(root: &Path, debounce: Duration) -> Result<(Events, Box<dyn std::any::Any + Send>), LocalError> {
    let failed = |source| LocalError::Watch { path: root.to_owned(), source };
    let (sender, events) = tokio::sync::mpsc::unbounded_channel();
    let mut debouncer = new_debouncer(debounce, None, move |result: DebounceEventResult| {
        // The receiver is gone only when the watch is.
        let _ = sender.send(result);
    })
    .map_err(failed)?;
    debouncer.watch(root, RecursiveMode::Recursive).map_err(failed)?;
    Ok((events, Box::new(debouncer)))
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
        let inode = FolderId::of(&root);
        let (events, debouncer) = notifications(&root, debounce)?;
        let ignored = vec![root.join(".git"), canonical(&follower.request.store)];
        let status = WatchStatus::default();
        status.set(Some(format!("the watch is indexing {} for the first time", root.display())));
        Ok(Watch {
            follower,
            after_update: None,
            ignored,
            head: root.join(".git").join("HEAD"),
            root,
            inode,
            debounce,
            status,
            events,
            _debouncer: debouncer,
        })
    }

    /// Whether the watch is in step with its folder, for readiness.
    pub fn status(&self) -> WatchStatus {
        self.status.clone()
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
                // A branch switch over identical trees changes `.git/HEAD` alone,
                // and the branch the files are indexed as.
                .any(|path| *path == self.head || !self.ignored.iter().any(|ignored| path.starts_with(ignored))),
        }
    }

    /// Whether a notification says the watched folder itself was deleted
    /// or moved away: its watch is then gone, even when a folder created
    /// at once in its place got the same inode number back.
    fn loses_root(&self, result: &DebounceEventResult) -> bool {
        let Ok(events) = result else { return false };
        events.iter().any(|event| {
            matches!(event.kind, EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(_)))
                && event.paths.contains(&self.root)
        })
    }

    /// Catches up with the folder, then updates the store after every
    /// burst of changes, until the notifications stop. A failed update is
    /// logged and retried at the next change.
    pub async fn run(mut self) {
        let outcome = self.follower.catch_up().await;
        let root = self.root.display();
        let failed = format!("the watch could not index {root}; retried at the next change");
        self.status.set((!updated("catch-up", outcome, self.after_update.clone()).await).then_some(failed));
        let mut check = tokio::time::interval(FOLDER_CHECK);
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let (wanted, lost) = tokio::select! {
                first = self.events.recv() => {
                    let Some(first) = first else { break };
                    let (mut wanted, mut lost) = (self.concerns_files(&first), self.loses_root(&first));
                    log_errors(&first);
                    while let Ok(more) = self.events.try_recv() {
                        wanted |= self.concerns_files(&more);
                        lost |= self.loses_root(&more);
                        log_errors(&more);
                    }
                    (wanted, lost)
                }
                _ = check.tick() => (false, false),
            };
            if lost || FolderId::of(&self.root) != self.inode {
                self.rearm().await;
            } else if wanted {
                let outcome = self.follower.update().await;
                if updated("update", outcome, self.after_update.clone()).await {
                    self.status.set(None);
                }
            }
        }
    }

    /// The folder was deleted or replaced: not ready until it is back,
    /// watched anew and indexed again.
    async fn rearm(&mut self) {
        let root = self.root.display().to_string();
        tracing::warn!(folder = %root, "watch: the watched folder was deleted or replaced; waiting for it");
        self.status.set(Some(format!("the watched folder {root} was deleted or replaced")));
        loop {
            let inode = FolderId::of(&self.root);
            if inode.is_some() {
                match notifications(&self.root, self.debounce) {
                    Ok((events, debouncer)) => {
                        (self.events, self._debouncer, self.inode) = (events, debouncer, inode);
                        break;
                    }
                    Err(error) => tracing::warn!(%error, "watch: the folder cannot be watched yet"),
                }
            }
            tokio::time::sleep(FOLDER_CHECK).await;
        }
        self.status.set(Some(format!("the watch is indexing {root} again, which was replaced")));
        // A folder being restored (a clone, a copy) is indexed once it is quiet.
        let quiet = self.debounce.max(FOLDER_CHECK);
        while let Ok(Some(_)) = tokio::time::timeout(quiet, self.events.recv()).await {}
        let outcome = self.follower.update().await;
        let failed = format!("the watch could not index {root} again; retried at the next change");
        self.status.set((!updated("re-index", outcome, self.after_update.clone()).await).then_some(failed));
    }
}

/// Whether an event of `kind` may change what a file holds or where it is.
fn changes_content(kind: &EventKind) -> bool {
    !matches!(kind, EventKind::Access(_) | EventKind::Modify(ModifyKind::Metadata(MetadataKind::AccessTime)))
}

/// Logs an update's outcome and runs the hook after a success; whether it
/// succeeded.
async fn updated(
    what: &str,
    outcome: Result<SyncSummary, LocalError>,
    hook: Option<Arc<dyn Fn() + Send + Sync>>,
) -> bool {
    let succeeded = outcome.is_ok();
    report(what, outcome);
    if let (true, Some(hook)) = (succeeded, hook) {
        // A panicking hook is the hook's problem: the watch goes on.
        let _ = tokio::task::spawn_blocking(move || hook()).await;
    }
    succeeded
}

fn log_errors(result: &DebounceEventResult) {
    if let Err(errors) = result {
        for error in errors {
            tracing::warn!(%error, "watch: file-system notification error; the folder is indexed again");
        }
    }
}

fn report(what: &str, outcome: Result<SyncSummary, LocalError>) {
    // Every update would repeat them: named when the folder is indexed whole.
    if let Ok(summary) = &outcome
        && what != "update"
    {
        for skipped in &summary.files_skipped {
            tracing::warn!(path = %skipped.path, reason = %skipped.reason, "watch: file skipped");
        }
    }
    match outcome {
        Ok(s) => tracing::info!(
            what,
            files_unchanged = s.files_unchanged,
            files_eligible = s.files_eligible,
            added = s.chunks_added_or_updated,
            deleted = s.chunks_deleted,
            skipped = s.files_skipped.len(),
            duration_ms = s.duration_ms,
            "watch: store updated"
        ),
        Err(error) => tracing::warn!(what, %error, "watch: the update failed; retried at the next change"),
    }
}
