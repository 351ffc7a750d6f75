//! The stored files the tools read, and the facts measured on them.

use std::collections::BTreeMap;

/// One stored file with the facts the tools report.
#[derive(Debug, Clone)]
pub struct FileText {
    pub path: String,
    pub language: String,
    pub content: String,
    pub line_count: usize,
    /// Inclusive 1-based line ranges no chunk covered (a file rebuilt from
    /// a Chroma collection's chunks); their lines are empty in `content`.
    pub missing_lines: Vec<(i64, i64)>,
}

/// The language label of a file without chunks, from its extension.
pub fn extension_language(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    let ext = name.rfind('.').map(|i| name[i..].to_ascii_lowercase()).unwrap_or_default();
    match ext.as_str() {
        ".md" | ".markdown" | ".mdx" => "markdown".into(),
        ".txt" | ".rst" => "text".into(),
        _ => rr_indexer::language_for_extension(&ext).map(str::to_owned).unwrap_or_else(|| "unknown".into()),
    }
}

/// Counts for resources and tools: a sorted map of `label → count`.
pub fn counts<I: IntoIterator<Item = String>>(items: I) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for i in items {
        *out.entry(i).or_insert(0) += 1;
    }
    out
}

/// Languages that are not programming languages, for [`primary_language`].
const NOT_CODE: [&str; 10] = ["markdown", "text", "json", "yaml", "toml", "xml", "html", "css", "unknown", "csv"];

/// The most common programming language among the files.
pub fn primary_language(files: &[FileText]) -> Option<String> {
    let c = counts(files.iter().filter(|f| !NOT_CODE.contains(&f.language.as_str())).map(|f| f.language.clone()));
    c.into_iter().max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0))).map(|(l, _)| l)
}

/// A framework guessed from `package.json` dependencies or Python imports.
pub fn framework(files: &[FileText]) -> Option<String> {
    const JS: [&str; 8] = ["next", "nuxt", "@angular/core", "svelte", "vue", "react", "express", "fastify"];
    const PY: [&str; 4] = ["django", "fastapi", "flask", "starlette"];
    for f in files.iter().filter(|f| f.path == "package.json" || f.path.ends_with("/package.json")) {
        for name in JS {
            if f.content.contains(&format!("\"{name}\"")) {
                return Some(name.trim_start_matches('@').split('/').next().unwrap_or(name).to_owned());
            }
        }
    }
    for name in PY {
        let import = format!("import {name}");
        let from = format!("from {name}");
        if files.iter().any(|f| f.language == "python" && (f.content.contains(&import) || f.content.contains(&from))) {
            return Some(name.to_owned());
        }
    }
    None
}
