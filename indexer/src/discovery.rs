//! Finding the files of a folder that are eligible for indexing.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use crate::IndexError;
use crate::wildmatch::PathSpec;

/// Which files are indexed. Paths are Git wildmatch patterns matched against
/// the POSIX path relative to the root; extensions are normalised (trimmed,
/// lowercased, leading dot added) and compared with the file's lowercase
/// extension. `.git/**` is always excluded, hidden files are not.
///
/// With `respect_ignore`, files that the folder's ignore rules leave out are
/// skipped before the path and extension rules apply (see [`scan`]); without
/// it the selection is the reference indexer's, file for file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectionOptions {
    /// A file must match these (default `**`, everything).
    pub include_paths: Vec<String>,
    /// A file matching these is skipped.
    pub exclude_paths: Vec<String>,
    /// When non-empty, only these extensions are indexed.
    pub include_extensions: Vec<String>,
    /// These extensions are never indexed.
    pub exclude_extensions: Vec<String>,
    /// Skip what `.gitignore`, `.ignore` and `.git/info/exclude` ignore.
    pub respect_ignore: bool,
    /// Skip (and report in [`Scan::skipped`]) a file larger than this many
    /// bytes; 0: no limit, the reference's selection.
    pub max_file_bytes: u64,
}

impl Default for SelectionOptions {
    fn default() -> Self {
        SelectionOptions {
            include_paths: vec!["**".to_owned()],
            exclude_paths: Vec::new(),
            include_extensions: Vec::new(),
            exclude_extensions: Vec::new(),
            respect_ignore: false,
            max_file_bytes: 0,
        }
    }
}

/// Trims patterns and drops blank ones, as the reference's configuration does.
pub fn normalize_patterns<S: AsRef<str>>(patterns: &[S]) -> Vec<String> {
    patterns.iter().map(|p| crate::pytext::strip(p.as_ref())).filter(|p| !p.is_empty()).map(str::to_owned).collect()
}

/// Trims and lowercases extensions, adds the leading dot, drops blanks and
/// duplicates (first occurrence kept), as the reference's configuration does.
pub fn normalize_extensions<S: AsRef<str>>(extensions: &[S]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for extension in extensions {
        let mut value = crate::pytext::strip(extension.as_ref()).to_lowercase();
        if value.is_empty() {
            continue;
        }
        if !value.starts_with('.') {
            value.insert(0, '.');
        }
        if !out.contains(&value) {
            out.push(value);
        }
    }
    out
}

/// A file selected for indexing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Where to read it.
    pub path: PathBuf,
    /// POSIX path relative to the root (the record `path`).
    pub relative_path: String,
    /// Lowercase extension with its dot, or empty.
    pub extension: String,
}

/// Counts of a discovery walk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// Regular files seen (symlinks and special files excluded).
    pub files_scanned: usize,
    /// Files selected for indexing.
    pub files_eligible: usize,
    /// Symlinks, special files and the root `.git` directory.
    pub files_other_skipped: usize,
    /// Regular files left out by ignore rules (counted in `files_scanned`;
    /// always 0 without [`SelectionOptions::respect_ignore`]).
    pub files_ignored: usize,
}

/// A file the selection would index but that is left out, and why: the
/// run's summary lists each one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SkippedFile {
    /// The relative path (a name that is not UTF-8 shown with U+FFFD).
    pub path: String,
    pub reason: String,
}

/// The result of [`scan`]: eligible files sorted by relative path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    pub files: Vec<SourceFile>,
    pub stats: ScanStats,
    /// Files left out for their size or their name, by path.
    pub skipped: Vec<SkippedFile>,
}

/// The extension as Python's `PurePath.suffix` (3.14, `os.path.splitext`)
/// gives it, lowercased: the last dot-part of the name, where leading dots do
/// not start an extension (`.bashrc` has none, `a.` has `.`).
pub fn extension_of(name: &str) -> String {
    let Some(dot) = name.rfind('.') else {
        return String::new();
    };
    if name[..dot].bytes().all(|b| b == b'.') {
        return String::new();
    }
    name[dot..].to_lowercase()
}

/// Compiled selection rules.
struct Selector {
    includes: PathSpec,
    excludes: PathSpec,
    include_extensions: Vec<String>,
    exclude_extensions: Vec<String>,
}

impl Selector {
    fn new(opts: &SelectionOptions) -> Result<Self, IndexError> {
        Ok(Selector {
            includes: PathSpec::new(&opts.include_paths)?,
            excludes: PathSpec::new(&opts.exclude_paths)?,
            include_extensions: normalize_extensions(&opts.include_extensions),
            exclude_extensions: normalize_extensions(&opts.exclude_extensions),
        })
    }

    fn eligible(&self, relative: &str, extension: &str) -> bool {
        self.includes.matches(relative)
            && !self.excludes.matches(relative)
            && (self.include_extensions.is_empty() || self.include_extensions.iter().any(|e| e == extension))
            && !self.exclude_extensions.iter().any(|e| e == extension)
    }
}

fn is_git_dir(relative: &str) -> bool {
    relative == ".git" || relative.starts_with(".git/")
}

/// The relative paths of the regular files that survive the ignore rules of
/// `root`: `.gitignore` and `.ignore` files at every level (and in the
/// folders above `root`, as git reads them for a subfolder of a checkout) and
/// `.git/info/exclude`. They apply whether or not `root` is a git checkout,
/// so an unpacked archive is treated like its clone. The user's global
/// excludes file is not read: the same folder gives the same records on
/// every machine.
fn unignored_files(root: &Path) -> Result<HashSet<PathBuf>, IndexError> {
    let walker = ignore::WalkBuilder::new(root)
        .standard_filters(false)
        .git_ignore(true)
        .git_exclude(true)
        .ignore(true)
        .parents(true)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|entry| !(entry.depth() == 1 && entry.file_name() == ".git"))
        .build();
    let mut kept = HashSet::new();
    for entry in walker {
        let entry = match entry {
            Ok(entry) => entry,
            // A line git would not parse either: git skips it, and so does ripgrep.
            Err(e) if e.io_error().is_none() => {
                tracing::warn!(error = %e, "ignore rule skipped");
                continue;
            }
            Err(e) => return Err(IndexError::Ignore { path: root.to_owned(), message: e.to_string() }),
        };
        if entry.file_type().is_some_and(|t| t.is_file())
            && let Ok(relative) = entry.path().strip_prefix(root)
        {
            kept.insert(relative.to_owned());
        }
    }
    Ok(kept)
}

/// Walks `root` (symlinks are never followed) and selects the files to index.
///
/// The walk itself is the reference's whatever the options, so that
/// `files_scanned` means the same in both modes; with
/// [`SelectionOptions::respect_ignore`] a file the ignore rules leave out is
/// counted in `files_ignored` and goes no further.
pub fn scan(root: &Path, opts: &SelectionOptions) -> Result<Scan, IndexError> {
    let walk_error = |path: &Path, source: std::io::Error| IndexError::Walk { path: path.to_owned(), source };
    let root = fs::canonicalize(root).map_err(|e| walk_error(root, e))?;
    if !root.is_dir() {
        return Err(IndexError::NotADirectory(root));
    }
    let selector = Selector::new(opts)?;
    let unignored = if opts.respect_ignore { Some(unignored_files(&root)?) } else { None };
    let mut result = Scan::default();
    let mut pending = vec![(root.clone(), String::new())];
    while let Some((dir, prefix)) = pending.pop() {
        let entries = fs::read_dir(&dir).map_err(|e| walk_error(&dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| walk_error(&dir, e))?;
            let path = entry.path();
            let file_type = entry.file_type().map_err(|e| walk_error(&path, e))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let relative = format!("{prefix}{name}");
            if file_type.is_symlink() {
                result.stats.files_other_skipped += 1;
            } else if file_type.is_dir() {
                if is_git_dir(&relative) {
                    result.stats.files_other_skipped += 1;
                } else {
                    pending.push((path, format!("{relative}/")));
                }
            } else if !file_type.is_file() {
                result.stats.files_other_skipped += 1;
            } else {
                result.stats.files_scanned += 1;
                if is_git_dir(&relative) {
                    continue;
                }
                let relative_path = path.strip_prefix(&root).unwrap_or(&path);
                if unignored.as_ref().is_some_and(|kept| !kept.contains(relative_path)) {
                    result.stats.files_ignored += 1;
                    continue;
                }
                if relative_path.to_str().is_none() {
                    // A record's path is text: such a file cannot be indexed, and says so.
                    result.skipped.push(SkippedFile { path: relative, reason: "its name is not valid UTF-8".into() });
                    continue;
                }
                let extension = extension_of(&name);
                if selector.eligible(&relative, &extension) {
                    if opts.max_file_bytes > 0 {
                        let size = entry.metadata().map_err(|e| walk_error(&path, e))?.len();
                        if size > opts.max_file_bytes {
                            let reason = format!("{size} bytes, over the limit of {} bytes", opts.max_file_bytes);
                            result.skipped.push(SkippedFile { path: relative, reason });
                            continue;
                        }
                    }
                    result.files.push(SourceFile { path, relative_path: relative, extension });
                    result.stats.files_eligible += 1;
                }
            }
        }
    }
    result.files.sort_by(|a, b| a.relative_path.cmp(&b.relative_path));
    result.skipped.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_follow_python_suffix() {
        for (name, ext) in
            [("a.go", ".go"), ("keep.PY", ".py"), (".bashrc", ""), ("Makefile", ""), ("a.tar.gz", ".gz"), ("..x", "")]
        {
            assert_eq!(extension_of(name), ext, "{name}");
        }
        assert_eq!(extension_of(".hidden.md"), ".md");
    }

    #[test]
    fn extension_options_are_normalised() {
        assert_eq!(normalize_extensions(&[" MD ", ".md", "", "Go"]), [".md", ".go"]);
        assert_eq!(normalize_patterns(&[" docs/** ", "", "  "]), ["docs/**"]);
    }
}
