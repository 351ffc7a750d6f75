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
    for outcome in process_files(&scan.files, identity, opts) {
        let Some(chunks) = outcome? else {
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

/// The records of one file, or `None` when it is binary.
type FileOutcome = Result<Option<Vec<Chunk>>, IndexError>;

fn process_file(file: &SourceFile, identity: &Identity, opts: &IndexOptions) -> FileOutcome {
    match read_source(file)? {
        Some(decoded) => chunk_file(identity, &file.relative_path, &file.extension, &decoded, opts.chunking).map(Some),
        None => Ok(None),
    }
}

/// Processes `files` on worker threads; the outcomes are in file order, so the
/// first error reported is the first in path order, whatever the scheduling.
fn process_files(files: &[SourceFile], identity: &Identity, opts: &IndexOptions) -> Vec<FileOutcome> {
    let threads = match opts.threads {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n => n,
    }
    .min(files.len());
    if threads <= 1 {
        return files.iter().map(|file| process_file(file, identity, opts)).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut outcomes: Vec<(usize, FileOutcome)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let index = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(file) = files.get(index) else { break };
                        done.push((index, process_file(file, identity, opts)));
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

/// The records of every eligible text file under `root`, sorted by path then
/// chunk index.
pub fn build_records(root: &Path, identity: &Identity, opts: &IndexOptions) -> Result<Vec<Chunk>, IndexError> {
    Ok(build(root, identity, opts)?.records)
}
