//! The build: scan a folder, read and chunk every eligible file on worker
//! threads, and gather the records with the run's counts (the crate docs
//! list the steps).

use std::path::Path;

use rr_core::Chunk;

use crate::chunking::ChunkingOptions;
use crate::classify::{DecodedFile, decode};
use crate::discovery::{SelectionOptions, SourceFile, scan};
use crate::error::IndexError;
use crate::identity::Identity;
use crate::pytext;
use crate::records::chunk_file;

/// What to index and how to chunk it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexOptions {
    pub selection: SelectionOptions,
    pub chunking: ChunkingOptions,
    /// Worker threads for reading and chunking; 0 means one per available core.
    /// The records do not depend on it.
    pub threads: usize,
}

impl IndexOptions {
    /// Checks the chunking budgets as the reference does.
    pub fn validate(&self) -> Result<(), IndexError> {
        let ChunkingOptions { chunk_size, chunk_overlap, .. } = self.chunking;
        if chunk_size == 0 {
            return Err(IndexError::InvalidOptions("chunk_size must be a positive integer".into()));
        }
        if chunk_overlap >= chunk_size {
            return Err(IndexError::InvalidOptions("chunk_overlap must be smaller than chunk_size".into()));
        }
        if self.selection.include_paths.iter().all(|p| pytext::is_blank(p)) {
            return Err(IndexError::InvalidOptions("include_paths must contain at least one pattern".into()));
        }
        Ok(())
    }
}

/// Counts of one build, named as in the reference's run summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BuildStats {
    pub files_scanned: usize,
    pub files_eligible: usize,
    /// Eligible files that produced at least one record.
    pub files_indexed: usize,
    /// Eligible files skipped as binary, or as text that does not decode in its detected encoding.
    pub files_binary_skipped: usize,
    pub files_other_skipped: usize,
    /// Files left out by `.gitignore`, `.ignore` or `.git/info/exclude`.
    pub files_ignored: usize,
    /// Files read but not chunked again, their text and chunking unchanged
    /// since the store got their records ([`build_stream_known`]).
    pub files_unchanged: usize,
}

/// The records of a folder, sorted by path then chunk index, and the counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Build {
    pub records: Vec<Chunk>,
    pub stats: BuildStats,
}

/// Reads an eligible file: `None` when it is binary.
pub fn read_source(file: &SourceFile) -> Result<Option<DecodedFile>, IndexError> {
    let data =
        std::fs::read(&file.path).map_err(|source| IndexError::Read { path: file.relative_path.clone(), source })?;
    Ok(decode(&data, &file.extension))
}

/// Scans `root` and builds the records of every eligible text file.
pub fn build(root: &Path, identity: &Identity, opts: &IndexOptions) -> Result<Build, IndexError> {
    identity.validate()?;
    opts.validate()?;
    let scan = scan(root, &opts.selection)?;
    let mut stats = BuildStats {
        files_scanned: scan.stats.files_scanned,
        files_eligible: scan.stats.files_eligible,
        files_other_skipped: scan.stats.files_other_skipped,
        files_ignored: scan.stats.files_ignored,
        ..BuildStats::default()
    };
    let mut records = Vec::new();
    for outcome in process_files(&scan.files, opts.threads, |f| process_file(f, identity, opts)) {
        let Some((_, chunks)) = outcome? else {
            stats.files_binary_skipped += 1;
            continue;
        };
        if !chunks.is_empty() {
            stats.files_indexed += 1;
            records.extend(chunks);
        }
    }
    // Files are visited in path order and chunks in index order already.
    let mut seen = std::collections::HashSet::with_capacity(records.len());
    if let Some(dup) = records.iter().find(|r| !seen.insert(r.id.as_str())) {
        return Err(IndexError::DuplicateId(dup.id.clone()));
    }
    Ok(Build { records, stats })
}

/// The decoded text and records of one file, or `None` when it is binary.
type TextOutcome = Result<Option<(String, Vec<Chunk>)>, IndexError>;

fn process_file(file: &SourceFile, identity: &Identity, opts: &IndexOptions) -> TextOutcome {
    match read_source(file)? {
        Some(decoded) => {
            let chunks = chunk_file(identity, &file.relative_path, &file.extension, &decoded, opts.chunking)?;
            Ok(Some((decoded.text, chunks)))
        }
        None => Ok(None),
    }
}

/// Runs `work` over `files` on worker threads; the outcomes are in file
/// order, so the first error reported is the first in that order, whatever
/// the scheduling.
fn process_files<T: Send>(files: &[SourceFile], threads: usize, work: impl Fn(&SourceFile) -> T + Sync) -> Vec<T> {
    let threads = match threads {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n => n,
    }
    .min(files.len());
    if threads <= 1 {
        return files.iter().map(work).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut outcomes: Vec<(usize, T)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let index = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(file) = files.get(index) else { break };
                        done.push((index, work(file)));
                    }
                    done
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    });
    outcomes.sort_by_key(|(index, _)| *index);
    outcomes.into_iter().map(|(_, outcome)| outcome).collect()
}

/// Files read and chunked together by [`BuildStream`]: enough to keep the
/// worker threads busy, few enough that a group's records stay small.
const STREAM_GROUP_FILES: usize = 64;
/// Groups read ahead of the consumer (besides the one it holds and the one
/// being made): the bound on what a stream holds in memory.
const STREAM_GROUPS_AHEAD: usize = 2;

/// One eligible file of a [`BuildStream`].
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltFile {
    /// Its place among the eligible files in path order (0-based), which
    /// the stream does not follow.
    pub position: usize,
    /// POSIX path relative to the root (the record `path`).
    pub path: String,
    /// The decoded text and its records in chunk order; `None` when the file
    /// is binary or `unchanged`.
    pub content: Option<(String, Vec<Chunk>)>,
    /// Set when the stream was told of the file ([`build_stream_known`])
    /// and its text still hashes as told: it was read, not chunked.
    pub unchanged: Option<KnownFile>,
}

/// A file whose records a store already holds, cut by the chunking being
/// built with: the SHA-256 of its decoded text and how many records it has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownFile {
    pub file_hash: String,
    pub chunks: usize,
}

/// Known files by path (see [`build_stream_known`]).
pub type KnownFiles = std::collections::HashMap<String, KnownFile>;

/// What the stream's workers make of one file.
enum StreamOutcome {
    Binary,
    Text(String, Vec<Chunk>),
    Unchanged(KnownFile),
}

fn stream_file(
    file: &SourceFile,
    identity: &Identity,
    opts: &IndexOptions,
    known: &KnownFiles,
) -> Result<StreamOutcome, IndexError> {
    let Some(decoded) = read_source(file)? else { return Ok(StreamOutcome::Binary) };
    if let Some(known) = known.get(&file.relative_path)
        && crate::identity::sha256_hex(&decoded.text) == known.file_hash
    {
        return Ok(StreamOutcome::Unchanged(known.clone()));
    }
    let chunks = chunk_file(identity, &file.relative_path, &file.extension, &decoded, opts.chunking)?;
    Ok(StreamOutcome::Text(decoded.text, chunks))
}

/// A build delivered a group of files at a time, so that no list of the
/// folder's records or texts exists: only the scan's file list (paths)
/// is held for the whole run.
///
/// Files come in the order of the SHA-256 of their path, which is the order
/// of their record ids (`repochunk:v1:<namespace>:<sha256(path)>:…`, the
/// chunk index zero-padded): the records of the whole stream, in the order
/// they come, are sorted by id, as the reference sends its upserts. Worker
/// threads read and chunk up to [`STREAM_GROUPS_AHEAD`] groups ahead of the
/// consumer; dropping the stream stops them.
pub struct BuildStream {
    receiver: std::sync::mpsc::Receiver<Vec<(usize, Result<StreamOutcome, IndexError>)>>,
    worker: Option<std::thread::JoinHandle<()>>,
    paths: Vec<String>,
    delivered: usize,
    stats: BuildStats,
    skipped: Vec<crate::SkippedFile>,
}

impl std::fmt::Debug for BuildStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildStream")
            .field("files", &self.paths.len())
            .field("delivered", &self.delivered)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl BuildStream {
    /// The number of eligible files the stream delivers in all.
    pub fn files(&self) -> usize {
        self.paths.len()
    }

    /// Files delivered so far.
    pub fn delivered(&self) -> usize {
        self.delivered
    }

    /// The counts of the files delivered so far (all of them once
    /// [`BuildStream::next_group`] has returned `None`).
    pub fn stats(&self) -> BuildStats {
        self.stats
    }

    /// The files the scan left out for their size or name.
    pub fn skipped(&self) -> &[crate::SkippedFile] {
        &self.skipped
    }

    /// The next files, or `None` when every file was delivered. A file that
    /// cannot be read or chunked ends the stream with its error.
    pub fn next_group(&mut self) -> Option<Result<Vec<BuiltFile>, IndexError>> {
        if self.delivered == self.paths.len() {
            return None;
        }
        let Ok(group) = self.receiver.recv() else {
            // The worker stops early only by panicking; the stream passes
            // the panic on, as [`build`] does.
            if let Some(Err(panic)) = self.worker.take().map(std::thread::JoinHandle::join) {
                std::panic::resume_unwind(panic);
            }
            self.delivered = self.paths.len();
            return Some(Err(IndexError::Worker(std::io::Error::other("the build stopped before its last file"))));
        };
        let mut files = Vec::with_capacity(group.len());
        for (position, outcome) in group {
            self.delivered += 1;
            let content = match outcome {
                Ok(content) => content,
                Err(e) => {
                    self.delivered = self.paths.len();
                    return Some(Err(e));
                }
            };
            let (content, unchanged) = match content {
                StreamOutcome::Binary => {
                    self.stats.files_binary_skipped += 1;
                    (None, None)
                }
                StreamOutcome::Text(text, records) => {
                    self.stats.files_indexed += usize::from(!records.is_empty());
                    (Some((text, records)), None)
                }
                StreamOutcome::Unchanged(known) => {
                    self.stats.files_indexed += usize::from(known.chunks > 0);
                    self.stats.files_unchanged += 1;
                    (None, Some(known))
                }
            };
            files.push(BuiltFile { position, path: self.paths[position].clone(), content, unchanged });
        }
        Some(Ok(files))
    }
}

/// Scans `root` and starts building its records in groups (see
/// [`BuildStream`]); the same records as [`build`], file by file.
pub fn build_stream(root: &Path, identity: &Identity, opts: &IndexOptions) -> Result<BuildStream, IndexError> {
    build_stream_known(root, identity, opts, KnownFiles::new())
}

/// [`build_stream`] that does not chunk a `known` file whose text hashes as
/// it says: the file comes as [`BuiltFile::unchanged`] instead, for a
/// caller whose store holds its records already. Reading and hashing a file
/// is a small part of chunking it (tokenising, parsing), so re-indexing an
/// unchanged folder costs little more than reading it.
pub fn build_stream_known(
    root: &Path,
    identity: &Identity,
    opts: &IndexOptions,
    known: KnownFiles,
) -> Result<BuildStream, IndexError> {
    identity.validate()?;
    opts.validate()?;
    let scan = scan(root, &opts.selection)?;
    let stats = BuildStats {
        files_scanned: scan.stats.files_scanned,
        files_eligible: scan.stats.files_eligible,
        files_other_skipped: scan.stats.files_other_skipped,
        files_ignored: scan.stats.files_ignored,
        ..BuildStats::default()
    };
    let skipped = scan.skipped;
    let paths: Vec<String> = scan.files.iter().map(|f| f.relative_path.clone()).collect();
    let mut order: Vec<(String, usize)> =
        paths.iter().enumerate().map(|(position, path)| (crate::identity::sha256_hex(path), position)).collect();
    order.sort_unstable();
    let mut files: Vec<Option<SourceFile>> = scan.files.into_iter().map(Some).collect();
    let (positions, sources): (Vec<usize>, Vec<SourceFile>) =
        order.into_iter().filter_map(|(_, position)| Some((position, files[position].take()?))).unzip();

    let (sender, receiver) = std::sync::mpsc::sync_channel(STREAM_GROUPS_AHEAD);
    let (identity, opts) = (identity.clone(), opts.clone());
    let worker = std::thread::Builder::new()
        .name("rr-build".into())
        .spawn(move || {
            for (sources, positions) in sources.chunks(STREAM_GROUP_FILES).zip(positions.chunks(STREAM_GROUP_FILES)) {
                let outcomes = process_files(sources, opts.threads, |f| stream_file(f, &identity, &opts, &known));
                let failed = outcomes.iter().any(Result::is_err);
                let group = positions.iter().copied().zip(outcomes).collect();
                // A closed channel means the consumer has stopped listening.
                if sender.send(group).is_err() || failed {
                    return;
                }
            }
        })
        .map_err(IndexError::Worker)?;
    Ok(BuildStream { receiver, worker: Some(worker), paths, delivered: 0, stats, skipped })
}

/// The records of every eligible text file under `root`, sorted by path then
/// chunk index.
pub fn build_records(root: &Path, identity: &Identity, opts: &IndexOptions) -> Result<Vec<Chunk>, IndexError> {
    Ok(build(root, identity, opts)?.records)
}
