//! What a file is for, read from its path: source, a test, an example, a
//! benchmark, documentation, generated or vendored code.
//!
//! One classification, from each language's conventions, used wherever the
//! project asks the question: the code ranking ([`crate::code_rank`]) ranks
//! source before the rest, the navigation tools mark tests, `eval generate`
//! leaves tests out. It reads only the path, so it applies to every record of
//! every store (the reference indexer's included) without a new field.

/// The class of a file, from its repository-relative path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PathClass {
    Source,
    Test,
    Example,
    Bench,
    Docs,
    Generated,
    Vendored,
}

/// Every class, in the order the tool schemas list them.
pub const PATH_CLASSES: [PathClass; 7] = [
    PathClass::Source,
    PathClass::Test,
    PathClass::Example,
    PathClass::Bench,
    PathClass::Docs,
    PathClass::Generated,
    PathClass::Vendored,
];

impl PathClass {
    pub fn as_str(self) -> &'static str {
        match self {
            PathClass::Source => "source",
            PathClass::Test => "test",
            PathClass::Example => "example",
            PathClass::Bench => "bench",
            PathClass::Docs => "docs",
            PathClass::Generated => "generated",
            PathClass::Vendored => "vendored",
        }
    }

    /// The class of `path` (`/`-separated, relative to the repository).
    pub fn of(path: &str) -> PathClass {
        let lower = path.to_ascii_lowercase();
        let mut parts: Vec<&str> = lower.split('/').filter(|p| !p.is_empty()).collect();
        let name = parts.pop().unwrap_or("");
        let dirs = parts;
        let dir_is = |names: &[&str]| dirs.iter().any(|d| names.contains(d));
        if dir_is(&["vendor", "third_party", "third-party", "thirdparty", "node_modules", "external", "deps"]) {
            return PathClass::Vendored;
        }
        if is_generated_name(name) || dir_is(&["generated", "__generated__", "gen-src"]) {
            return PathClass::Generated;
        }
        if is_test_name(path.rsplit('/').next().unwrap_or(path), name)
            || dir_is(&["test", "tests", "__tests__", "spec", "specs", "testing", "testdata", "test_data", "fixtures"])
            || dirs.iter().any(|d| d.ends_with("_test") || d.ends_with("-test") || d.ends_with("tests"))
        {
            return PathClass::Test;
        }
        if dir_is(&["bench", "benches", "benchmark", "benchmarks", "jmh"]) || name.contains("_bench.") {
            return PathClass::Bench;
        }
        if dir_is(&["example", "examples", "_example", "_examples", "sample", "samples", "demo", "demos", "docs_src"]) {
            return PathClass::Example;
        }
        let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
        if matches!(ext, "md" | "mdx" | "rst" | "adoc" | "asciidoc" | "txt")
            || dir_is(&["doc", "docs", "documentation", "man"])
        {
            return PathClass::Docs;
        }
        PathClass::Source
    }
}

impl std::fmt::Display for PathClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for PathClass {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PATH_CLASSES.into_iter().find(|c| c.as_str() == s).ok_or_else(|| {
            let names: Vec<&str> = PATH_CLASSES.iter().map(|c| c.as_str()).collect();
            format!("unknown kind \"{s}\"; valid kinds: {}", names.join(", "))
        })
    }
}

/// Test file names: `test_x.py`, `x_test.go`, `x.test.ts`, `x.spec.js`,
/// `x_spec.rb`, `XTest.java`, `XTests.cs`, `XSpec.scala`, `XSuite.scala`,
/// `test_helper.rb`. `original` keeps the case that `FooTest` needs.
fn is_test_name(original: &str, lower: &str) -> bool {
    let stem = original.split('.').next().unwrap_or(original);
    let ext = lower.rsplit_once('.').map_or("", |(_, e)| e);
    let code = !matches!(ext, "md" | "txt" | "json" | "yaml" | "yml" | "toml" | "");
    code && (lower.starts_with("test_")
        || lower.starts_with("tests_")
        || lower.contains("_test.")
        || lower.contains("_tests.")
        || lower.contains("_spec.")
        || lower.contains(".test.")
        || lower.contains(".spec.")
        || lower.starts_with("test.")
        || lower.starts_with("conftest.")
        || (stem.len() > 4
            && (stem.ends_with("Test")
                || stem.ends_with("Tests")
                || stem.ends_with("Spec")
                || stem.ends_with("Suite")))
        || (stem.len() > 4 && stem.starts_with("Test") && stem[4..].starts_with(|c: char| c.is_ascii_uppercase())))
}

/// Names generated code conventionally carries.
fn is_generated_name(lower: &str) -> bool {
    lower.contains(".pb.")
        || lower.ends_with("_pb2.py")
        || lower.contains(".generated.")
        || lower.contains("_generated.")
        || lower.ends_with(".min.js")
        || lower.ends_with(".g.dart")
}

#[cfg(test)]
mod tests {
    use super::PathClass::{self, *};

    #[test]
    fn each_language_s_test_conventions_are_tests() {
        for path in [
            "internal/store/store_test.go",
            "tests/test_client.py",
            "aiohttp/test_utils.py",
            "src/test/java/com/acme/WidgetTest.java",
            "src/main/java/com/acme/WidgetTests.java",
            "lib/widget.test.ts",
            "src/__tests__/widget.tsx",
            "spec/widget_spec.rb",
            "tokio/tests/io_read.rs",
            "core/src/test/scala/CatsSuite.scala",
            "absl/status/status_test.cc",
            "test/mocha.opts.js",
            "conftest.py",
            "testing/helpers.go",
            "Tests/AlamofireTests/SessionTests.swift",
            "pkg/server_test/helpers.go",
        ] {
            assert_eq!(PathClass::of(path), Test, "{path}");
        }
    }

    #[test]
    fn source_stays_source() {
        for path in [
            "command.go",
            "aiohttp/web_request.py",
            "src/main/java/com/google/gson/JsonArray.java",
            "tokio/src/task/blocking.rs",
            "absl/status/status.h",
            "lib/testing_utils_are_not_here.rb",
            "src/contest.rs",
            "src/attestation.rs",
            "src/Latest.java",
            "packages/zod/src/types.ts",
        ] {
            assert_eq!(PathClass::of(path), Source, "{path}");
        }
    }

    #[test]
    fn the_other_classes() {
        assert_eq!(PathClass::of("examples/hello/main.go"), Example);
        assert_eq!(PathClass::of("docs_src/tutorial/first.py"), Example);
        assert_eq!(PathClass::of("benches/search.rs"), Bench);
        assert_eq!(PathClass::of("README.md"), Docs);
        assert_eq!(PathClass::of("docs/config.html"), Docs);
        assert_eq!(PathClass::of("api/v1/service.pb.go"), Generated);
        assert_eq!(PathClass::of("vendor/github.com/x/y.go"), Vendored);
        assert_eq!(PathClass::of("third_party/zlib/inflate.c"), Vendored);
    }

    #[test]
    fn kinds_parse_by_name_and_an_unknown_one_lists_the_valid_ones() {
        assert_eq!("test".parse::<PathClass>(), Ok(Test));
        assert_eq!(
            "tests".parse::<PathClass>().unwrap_err(),
            "unknown kind \"tests\"; valid kinds: source, test, example, bench, docs, generated, vendored"
        );
    }
}
