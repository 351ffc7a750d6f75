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

/// A checkout after a build: sources beside build output, dependencies and
/// editor files that its ignore rules name.
fn built_checkout() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    rr_testkit::git(root, &["init", "--quiet"]);
    write(root, ".gitignore", "target/\nnode_modules/\n/dist\n.venv/\n*.log\n!keep.log\n");
    write(root, ".ignore", "generated/\n");
    write(root, ".git/info/exclude", "scratch.md\n");
    write(root, "src/main.rs", "fn main() {}\n");
    write(root, "keep.log", "kept by a negation\n");
    write(root, "README.md", "# demo\n");
    write(root, "web/.gitignore", "cache/\n");
    write(root, "web/app.ts", "export const a = 1;\n");
    for ignored in [
        "target/debug/build/out.rs",
        "target/release/demo.d",
        "node_modules/left-pad/index.js",
        "web/node_modules/x/index.js",
        "dist/bundle.js",
        ".venv/lib/site.py",
        "build.log",
        "generated/api.go",
        "scratch.md",
        "web/cache/data.json",
    ] {
        write(root, ignored, "ignored\n");
    }
    dir
}

#[test]
fn ignore_rules_leave_out_build_output() {
    let dir = built_checkout();
    let root = dir.path();
    let opts = SelectionOptions { respect_ignore: true, ..SelectionOptions::default() };
    let result = scan(root, &opts).unwrap();
    let paths: Vec<&str> = result.files.iter().map(|f| f.relative_path.as_str()).collect();
    assert_eq!(
        paths,
        [".gitignore", ".ignore", "README.md", "keep.log", "src/main.rs", "web/.gitignore", "web/app.ts"]
    );
    assert_eq!(result.stats.files_ignored, 10);
    assert_eq!(result.stats.files_scanned, 17);
    assert_eq!(result.stats.files_eligible, 7);

    // --no-ignore: the reference's selection, build output included.
    let all = scan(root, &SelectionOptions::default()).unwrap();
    assert_eq!(all.stats.files_ignored, 0);
    assert_eq!(all.stats.files_eligible, 17);
    assert!(all.files.iter().any(|f| f.relative_path == "target/debug/build/out.rs"));

    // The path and extension options still apply on top of the ignore rules.
    let only_rs = SelectionOptions { include_extensions: vec![".rs".into()], ..opts.clone() };
    assert_eq!(relative_paths(root, &only_rs), ["src/main.rs"]);
    let no_web = SelectionOptions { exclude_paths: vec!["web/**".into()], ..opts };
    assert!(!relative_paths(root, &no_web).iter().any(|p| p.starts_with("web/")));
}

#[test]
fn ignore_files_apply_without_git_too() {
    // An unpacked archive carries its .gitignore; it is honoured as in the clone.
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), ".gitignore", "target/\n");
    write(dir.path(), "src/lib.rs", "pub fn f() {}\n");
    write(dir.path(), "target/out.rs", "x\n");
    let opts = SelectionOptions { respect_ignore: true, ..SelectionOptions::default() };
    assert_eq!(relative_paths(dir.path(), &opts), [".gitignore", "src/lib.rs"]);
}

#[test]
fn a_file_over_the_size_limit_is_skipped_and_named() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "src/lib.rs", "pub fn f() {}\n");
    write(dir.path(), "data/huge.txt", &"x".repeat(2048));
    write(dir.path(), "data/edge.txt", &"x".repeat(1024));
    let opts = SelectionOptions { max_file_bytes: 1024, ..SelectionOptions::default() };
    let result = scan(dir.path(), &opts).unwrap();
    let paths: Vec<&str> = result.files.iter().map(|f| f.relative_path.as_str()).collect();
    assert_eq!(paths, ["data/edge.txt", "src/lib.rs"]);
    assert_eq!(
        result.skipped,
        [rr_indexer::SkippedFile {
            path: "data/huge.txt".into(),
            reason: "2048 bytes, over the limit of 1024 bytes".into()
        }]
    );
    assert_eq!((result.stats.files_scanned, result.stats.files_eligible), (3, 2));
    // No limit: the reference's selection.
    assert_eq!(relative_paths(dir.path(), &SelectionOptions::default()).len(), 3);
}

#[test]
fn a_file_whose_name_is_not_utf8_is_skipped_and_named_not_counted_as_ignored() {
    use std::os::unix::ffi::OsStrExt as _;
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "src/lib.rs", "pub fn f() {}\n");
    fs::write(dir.path().join(std::ffi::OsStr::from_bytes(b"caf\xe9.rs")), "pub fn g() {}\n").unwrap();
    for respect_ignore in [true, false] {
        let opts = SelectionOptions { respect_ignore, ..SelectionOptions::default() };
        let result = scan(dir.path(), &opts).expect("the walk goes on");
        assert_eq!(result.files.len(), 1, "{respect_ignore}");
        assert_eq!(result.stats.files_ignored, 0, "{respect_ignore}");
        assert_eq!(
            result.skipped,
            [rr_indexer::SkippedFile { path: "caf\u{fffd}.rs".into(), reason: "its name is not valid UTF-8".into() }]
        );
    }
}
