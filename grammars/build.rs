//! Compiles each vendored grammar's generated parser (and external scanner) as its own C library,
//! with its own `tree_sitter/` headers: the headers differ between the tree-sitter versions that
//! generated the parsers.

use std::path::Path;

/// The folders under `grammars/` that hold a `src/parser.c`.
const GRAMMARS: [&str; 3] = ["kotlin", "python", "vue"];

fn main() {
    for grammar in GRAMMARS {
        let src = Path::new(grammar).join("src");
        let mut build = cc::Build::new();
        // C11 as the grammars' own build scripts; warnings in generated and upstream code are not ours to fix.
        build.std("c11").include(&src).warnings(false).extra_warnings(false).flag_if_supported("-w");
        for file in ["parser.c", "scanner.c"] {
            let path = src.join(file);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
                build.file(path);
            }
        }
        build.compile(&format!("tree-sitter-{grammar}"));
    }
}
