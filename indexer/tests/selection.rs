//! File selection: Git wildmatch paths as Python `pathspec` evaluates them,
//! extension lists, `.git` never indexed, hidden files indexed, symlinks not
//! followed.

use std::fs;
use std::path::Path;

use rr_indexer::{PathSpec, SelectionOptions, normalize_extensions, scan};

fn write(root: &Path, relative: &str, text: &str) {
    let path = root.join(relative);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn relative_paths(root: &Path, opts: &SelectionOptions) -> Vec<String> {
    scan(root, opts).unwrap().files.into_iter().map(|f| f.relative_path).collect()
}

#[test]
fn wildmatch_agrees_with_pathspec() {
    // (patterns, path, pathspec 0.12.1 `PathSpec.from_lines("gitwildmatch", patterns).match_file(path)`)
    let cases: &[(&[&str], &str, bool)] = &[
        (&["**/*.PY"], "src/keep.PY", true),
        (&["**/*.PY"], "src/skip.py", false),
        (&["*.py"], "a/b/c.py", true),
        (&["docs"], "docs/a/b.md", true),
        (&["docs"], "x/docs/a.md", true),
        (&["/docs"], "x/docs/a.md", false),
        (&["docs/"], "docs", false),
        (&["docs/"], "x/docs/a.md", true),
        (&["a/**/b"], "a/b", true),
        (&["a/**/b"], "a/x/y/b", true),
        (&["a/*"], "a/x/y", true),
        (&["**/"], "top.md", false),
        (&["**/"], "a/b.md", true),
        (&["src/*.rs"], "x/src/a.rs", false),
        (&["[!a]*.md"], "b.md", true),
        (&["[!a]*.md"], "a.md", false),
        (&["[^a]*.md"], "a.md", false),
        (&["\\#x"], "#x", true),
        (&["#x"], "#x", false),
        (&["**", "!docs/**"], "docs/a.md", false),
        (&["**", "!docs/**"], "src/a.rs", true),
        (&["!docs/**", "**"], "docs/a.md", true),
        (&["?.md"], "ab.md", false),
        (&["*.md"], ".hidden.md", true),
        (&["**"], ".github/workflow.yml", true),
        (&["café/*"], "café/x", true),
    ];
    for (patterns, path, expected) in cases {
        let spec = PathSpec::new(patterns).unwrap();
        assert_eq!(spec.matches(path), *expected, "{patterns:?} on {path}");
    }
}

#[test]
fn hidden_files_selected_and_git_never() {
    // The reference's own discovery test.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".github/workflow.yml", "name: test");
    write(root, "src/keep.PY", "print('yes')");
    write(root, "src/skip.py", "print('no')");
    write(root, ".git/config", "secret");
    let opts = SelectionOptions {
        include_paths: vec!["**/*.PY".into(), ".github/**".into()],
        exclude_paths: vec!["src/skip.py".into()],
        ..SelectionOptions::default()
    };
    let result = scan(root, &opts).unwrap();
    let paths: Vec<&str> = result.files.iter().map(|f| f.relative_path.as_str()).collect();
    assert_eq!(paths, [".github/workflow.yml", "src/keep.PY"]);
    assert_eq!(result.files[1].extension, ".py");
    assert_eq!(result.stats.files_eligible, 2);
    assert_eq!(result.stats.files_scanned, 3);
    assert_eq!(result.stats.files_other_skipped, 1); // the .git directory

    // Even `**` never reaches into the root .git directory.
    assert_eq!(
        relative_paths(root, &SelectionOptions::default()),
        [".github/workflow.yml", "src/keep.PY", "src/skip.py"]
    );
}

#[test]
fn extension_lists() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for path in ["a.md", "b.MD", "c.go", "d", ".bashrc", "e.txt"] {
        write(root, path, "x");
    }
    let only_md = SelectionOptions { include_extensions: vec!["MD".into()], ..Default::default() };
    assert_eq!(relative_paths(root, &only_md), ["a.md", "b.MD"]);
    let no_md_txt =
        SelectionOptions { exclude_extensions: normalize_extensions(&[".md", "txt"]), ..Default::default() };
    assert_eq!(relative_paths(root, &no_md_txt), [".bashrc", "c.go", "d"]);
}

#[cfg(unix)]
#[test]
fn symlinks_are_not_followed() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "real/a.md", "hello");
    symlink(root.join("real/a.md"), root.join("link.md")).unwrap();
    symlink(root.join("real"), root.join("linkdir")).unwrap();
    symlink(root.join("nowhere"), root.join("broken")).unwrap();
    let result = scan(root, &SelectionOptions::default()).unwrap();
    let paths: Vec<&str> = result.files.iter().map(|f| f.relative_path.as_str()).collect();
    assert_eq!(paths, ["real/a.md"]);
    assert_eq!(result.stats.files_scanned, 1);
    assert_eq!(result.stats.files_other_skipped, 3);
}

#[test]
fn invalid_patterns_are_reported() {
    let opts = SelectionOptions { include_paths: vec!["[z-a]".into()], ..Default::default() };
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(scan(dir.path(), &opts), Err(rr_indexer::IndexError::InvalidPattern { .. })));
}
