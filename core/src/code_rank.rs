//! The code ranking: a store's candidates ordered again by what a reader of
//! code knows and a text ranking does not.
//!
//! Any store's list can be read this way: every record carries its path and
//! text. Each candidate starts from its rank in the store's list,
//! `1 / (K + rank)`, and then
//!
//! 1. **a symbol query finds its definition**: when the query is a bare
//!    identifier (`Command`, `spawn_blocking`, `Sinatra::Base`), a chunk
//!    that defines it (`class Command`, `fn spawn_blocking`, `func (c *Command)
//!    Execute`, `typedef struct uv_loop_s`) gains [`CodeRank::definition`]
//!    times the best base score, half again when its file is named after it;
//!    an identifier inside a question (`how does safeParse handle errors`)
//!    gains half of that;
//! 2. **a file named by the query's words** gains [`CodeRank::file_name`]
//!    times the best score, times the share of the query's words its file
//!    name and folder hold (`JSON array` → `JsonArray.java`);
//! 3. **a file with several matching chunks** has its best chunk lifted by
//!    [`CodeRank::coherence`] in proportion to the file's summed score;
//! 4. **source before the rest**: tests, examples, benchmarks, generated
//!    and vendored code are scaled by [`CodeRank::other_class`] (unless the
//!    query asks for that class: `tests for the router`), documentation by
//!    [`CodeRank::docs`], re-export files (`__init__.py`, `mod.rs`,
//!    `index.ts`) by [`CodeRank::reexport`];
//! 5. **one file does not fill the list**: taken best first, a file's second
//!    chunk counts [`CodeRank::saturation`] of its score, its third that
//!    squared, and so on.
//!
//! The weights were chosen on the `dev` half of the semble suite and kept
//! because its `test` half agreed (docs/evaluation.md).

use std::collections::HashMap;

use crate::paths::PathClass;
use crate::record::Candidate;
use crate::select::clean_document;
use crate::text::{self, words};

/// The code ranking's weights (see the module docs).
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct CodeRank {
    /// `K` of the base score `1 / (K + rank)`.
    pub rank_k: f64,
    pub definition: f64,
    pub file_name: f64,
    pub coherence: f64,
    pub other_class: f64,
    pub docs: f64,
    pub reexport: f64,
    pub saturation: f64,
}

impl Default for CodeRank {
    fn default() -> Self {
        CodeRank {
            rank_k: 5.0,
            definition: 1.5,
            file_name: 1.0,
            coherence: 0.2,
            other_class: 0.3,
            docs: 0.6,
            reexport: 0.5,
            saturation: 0.7,
        }
    }
}

/// Candidates the code ranking reads for each result asked for, and at most:
/// a definition or a well-named file is often below the first thirty of a
/// text ranking.
pub const CANDIDATES_PER_RESULT: usize = 10;
pub const MAX_CANDIDATES: usize = 100;

/// What a query is, for the code ranking.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct QueryShape {
    /// The identifier a symbol query names (its last part when qualified).
    pub symbol: Option<String>,
    /// Identifiers written inside a natural-language query.
    pub identifiers: Vec<String>,
    /// Lower-cased words of three letters or more that are not stopwords.
    pub keywords: Vec<String>,
    /// The keywords written in lower case: words spelled out, which a
    /// file's shorter name may abbreviate (`configuration` → `config.go`),
    /// unlike an identifier's glued parts (`ParseWidget` is not `parse.go`).
    pub spelled_out: Vec<String>,
    /// Classes the query asks for by name (`test`, `example`, …).
    pub asks_for: Vec<PathClass>,
}

impl QueryShape {
    pub fn of(query: &str) -> QueryShape {
        let trimmed = query.trim();
        let symbol = symbol_query(trimmed);
        let identifiers = if symbol.is_some() {
            Vec::new()
        } else {
            words(trimmed).filter(|w| looks_like_identifier(w) || is_type_name(w)).map(str::to_owned).collect()
        };
        let mut keywords: Vec<String> = Vec::new();
        let mut spelled_out: Vec<String> = Vec::new();
        for word in words(trimmed) {
            let lower = word.to_ascii_lowercase();
            if lower.len() > 2 && !text::is_stopword(&lower) && !keywords.contains(&lower) {
                if lower == word {
                    spelled_out.push(lower.clone());
                }
                keywords.push(lower);
            }
        }
        let mut asks_for = Vec::new();
        for k in &keywords {
            let class = match k.as_str() {
                "test" | "tests" | "testing" | "spec" | "specs" | "fixture" | "fixtures" | "mock" | "mocks" => {
                    PathClass::Test
                }
                "example" | "examples" | "demo" | "sample" => PathClass::Example,
                "bench" | "benchmark" | "benchmarks" => PathClass::Bench,
                "doc" | "docs" | "documentation" | "readme" | "guide" => PathClass::Docs,
                _ => continue,
            };
            if !asks_for.contains(&class) {
                asks_for.push(class);
            }
        }
        QueryShape { symbol, identifiers, keywords, spelled_out, asks_for }
    }
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// camelCase, PascalCase with an inner capital, or snake_case: written as code.
fn looks_like_identifier(word: &str) -> bool {
    let first = word.chars().next().unwrap_or(' ');
    if !(first.is_alphabetic() || first == '_') || word.len() < 3 {
        return false;
    }
    let inner_upper = word.chars().skip(1).any(|c| c.is_uppercase());
    let has_lower = word.chars().any(|c| c.is_lowercase());
    (inner_upper && has_lower) || (word.contains('_') && word.trim_matches('_').contains('_'))
}

/// A capitalised word that is not an acronym and not a question's first
/// word (`Functor`, `Job`, `Router`): in a question about code, most often
/// a type's name.
fn is_type_name(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next().is_some_and(char::is_uppercase)
        && word.len() >= 3
        && chars.any(char::is_lowercase)
        && !text::is_stopword(&word.to_lowercase())
        && !QUESTION_WORDS.contains(&word.to_ascii_lowercase().as_str())
}

/// Words that open a question rather than name a type, besides the stop
/// words (`how`, `what`, `does`, …).
const QUESTION_WORDS: &[&str] = &["find", "show", "list", "get"];

/// The identifier of a query that is one (possibly qualified: `a.b`, `a::b`,
/// `a->b`, `A\B`): one that is written as code (a capital, an underscore,
/// a qualifier). A lower-case word alone (`session`) is a question.
fn symbol_query(query: &str) -> Option<String> {
    if query.is_empty() || query.contains(char::is_whitespace) {
        return None;
    }
    let parts: Vec<&str> =
        query.split(['.', ':', '\\']).flat_map(|p| p.split("->")).filter(|p| !p.is_empty()).collect();
    let valid =
        |p: &str| p.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_') && p.chars().all(is_ident_char);
    if parts.is_empty() || !parts.iter().all(|p| valid(p)) {
        return None;
    }
    let last = parts[parts.len() - 1];
    let code_like = parts.len() > 1 || last.contains('_') || last.chars().any(char::is_uppercase);
    code_like.then(|| last.to_owned())
}

/// Keywords that introduce a definition of the name after them.
const DEFINITION_KEYWORDS: &[&str] = &[
    "class",
    "struct",
    "enum",
    "union",
    "interface",
    "trait",
    "type",
    "typedef",
    "fn",
    "func",
    "fun",
    "def",
    "defp",
    "defmacro",
    "defmodule",
    "defprotocol",
    "function",
    "module",
    "object",
    "protocol",
    "record",
    "namespace",
    "package",
    "impl",
    "macro_rules!",
    "extension",
    "actor",
    "alias",
    "typealias",
];

/// Keywords that define a name only when a value or type follows (`const x =`).
const BINDING_KEYWORDS: &[&str] = &["const", "let", "var", "val", "static"];

/// Whether `document` defines `name`: a definition keyword before it (past
/// qualifiers, Go receivers and upper-case macros), or a C-style function
/// head (`int uv_run(uv_loop_t* loop, …) {`).
pub fn defines(document: &str, name: &str) -> bool {
    if name.is_empty() {
        return false;
    }
    for line in document.lines() {
        let mut from = 0;
        while let Some(found) = line[from..].find(name) {
            let at = from + found;
            from = at + name.len();
            let before = line[..at].chars().next_back();
            let after = line[from..].chars().next();
            if before.is_some_and(is_ident_char) || after.is_some_and(is_ident_char) {
                continue;
            }
            if defines_at(line, at, &line[from..]) {
                return true;
            }
        }
    }
    false
}

fn defines_at(line: &str, at: usize, rest: &str) -> bool {
    let next = rest.trim_start().chars().next();
    if !matches!(next, None | Some('<' | '(' | '{' | ':' | '[' | ';' | '=' | ',' | '|' | '\'' | '"'))
        && !rest.starts_with(char::is_whitespace)
    {
        return false;
    }
    // Qualifiers before the name: `Phoenix.Router`, `Status::Status`.
    let mut prefix = line[..at].strip_suffix('$').unwrap_or(&line[..at]).trim_end();
    loop {
        let stripped = prefix.strip_suffix("::").or_else(|| prefix.strip_suffix('.'));
        let Some(stripped) = stripped else { break };
        let start = stripped.rfind(|c: char| !is_ident_char(c)).map_or(0, |i| i + 1);
        prefix = stripped[..start].trim_end();
        if stripped[start..].is_empty() {
            break;
        }
    }
    // A Go method's receiver: `func (c *Command) Execute`.
    if prefix.ends_with(')')
        && let Some(open) = prefix.rfind('(')
        && prefix[..open].trim_end().ends_with("func")
    {
        return true;
    }
    let mut tokens: Vec<&str> = prefix.split(|c: char| c.is_whitespace()).filter(|t| !t.is_empty()).collect();
    // Upper-case macros between keyword and name: `class ABSL_MUST_USE_RESULT Status`.
    while tokens.last().is_some_and(|t| t.len() > 1 && t.chars().all(|c| c.is_ascii_uppercase() || c == '_')) {
        tokens.pop();
    }
    if let Some(last) = tokens.last() {
        let last = last.trim_start_matches('@');
        if DEFINITION_KEYWORDS.contains(&last) {
            return true;
        }
        if BINDING_KEYWORDS.contains(&last) {
            return matches!(next, Some('=' | ':'));
        }
    }
    // A C-style function head at the start of a line.
    if next == Some('(') && !line.starts_with(char::is_whitespace) {
        let head = line.trim_end();
        let typed = !tokens.is_empty()
            && prefix.chars().all(|c| is_ident_char(c) || " *&<>:,".contains(c))
            && !tokens.iter().any(|t| matches!(*t, "return" | "else" | "new" | "delete" | "throw" | "case"));
        return typed && !head.ends_with(';') && !head.ends_with(',');
    }
    false
}

/// The lower-cased parts of an identifier: `JsonArray` → `json`, `array`;
/// `bash_completions` → `bash`, `completions`.
fn parts(identifier: &str) -> Vec<String> {
    words(identifier).flat_map(text::parts).map(str::to_lowercase).collect()
}

/// The file name's stem and its folder's name, as lower-case parts.
fn name_parts(path: &str) -> Vec<String> {
    let mut segments = path.rsplit('/');
    let file = segments.next().unwrap_or(path);
    let stem = file.split('.').next().unwrap_or(file);
    let mut out = parts(stem);
    if let Some(folder) = segments.next() {
        out.extend(parts(folder));
    }
    out
}

/// Whether the query's keyword `k` is the name part `n`: the same word, a
/// prefix of three letters or more (`dependency` ~ `dependencies`), or a
/// name of four letters or more that abbreviates a word spelled out, or is
/// such an abbreviation's plural (`config` ~ `configuration`, `auth` ~
/// `authentication`, `args` ~ `arguments`): names are written short,
/// questions spelled out.
fn word_names(shape: &QueryShape, k: &str, n: &str) -> bool {
    let (short, long) = if k.len() <= n.len() { (k, n) } else { (n, k) };
    let spelled = || shape.spelled_out.iter().any(|w| w == k);
    let abbreviates = n.len() >= 4 && short == n && spelled();
    // An abbreviation's plural: `args` ~ `arguments`, `utils` ~ `utilities`.
    let plural =
        n.len() >= 4 && k.len() > n.len() && n.strip_suffix('s').is_some_and(|stem| k.starts_with(stem)) && spelled();
    plural
        || short == long
        || (short.len() >= 3 && long.starts_with(short) && (long.len() - short.len() <= 3 || abbreviates))
}

/// How many of the query's keywords the name parts hold.
fn name_overlap(shape: &QueryShape, names: &[String]) -> usize {
    shape.keywords.iter().filter(|k| names.iter().any(|n| word_names(shape, k, n))).count()
}

/// How strongly the query names the file at `path`: the share of its
/// keywords the file's name and folder hold, half as much again when the
/// query says the file's name of two words or more as a phrase (`JSON
/// array operations` names `JsonArray.java` more than `JsonElement.java`).
fn name_share(shape: &QueryShape, path: &str) -> f64 {
    let share = name_overlap(shape, &name_parts(path)) as f64 / shape.keywords.len() as f64;
    let file = path.rsplit('/').next().unwrap_or(path);
    let stem = parts(file.split('.').next().unwrap_or(file));
    let said = |window: &[String]| window.iter().zip(&stem).all(|(k, n)| word_names(shape, k, n));
    if share > 0.0 && stem.len() >= 2 && shape.keywords.windows(stem.len()).any(said) { share * 1.5 } else { share }
}

/// Whether the file is named after `symbol` (`Status` → `status.h`,
/// `JsonArray` → `JsonArray.java`, `spawn_blocking` → `blocking.rs` no).
fn named_after(path: &str, symbol: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    let stem = file.split('.').next().unwrap_or(file).to_lowercase().replace(['_', '-'], "");
    let symbol = symbol.to_lowercase().replace('_', "");
    stem == symbol || stem.strip_suffix('s') == Some(symbol.as_str())
}

fn is_reexport(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    matches!(file, "__init__.py" | "package-info.java")
}

/// Files a store should add to its candidates for the code ranking, when
/// its text ranking may have missed them: how strongly the query names the
/// file at `path`, from 0 (not at all) to 1. A symbol query names the file
/// named after it (`Status` → `status.h`) or a prefix of it of four letters
/// or more (`StateManager` → `state.ts`); a question of two or more words
/// names a file whose name and folder hold at least half of them
/// (`JSON object with named fields` → `JsonObject.java`).
pub fn names_file(shape: &QueryShape, path: &str) -> f64 {
    if let Some(symbol) = &shape.symbol {
        let file = path.rsplit('/').next().unwrap_or(path);
        let stem = file.split('.').next().unwrap_or(file).to_lowercase().replace(['_', '-'], "");
        let wanted = symbol.to_lowercase().replace('_', "");
        let named = named_after(path, symbol) || (stem.len() >= 4 && wanted.starts_with(&stem));
        return if named { 1.0 } else { 0.0 };
    }
    if shape.identifiers.iter().any(|name| named_after(path, name)) {
        return 0.75;
    }
    if shape.keywords.len() < 2 {
        return 0.0;
    }
    let share = name_share(shape, path);
    if share >= 0.5 { share } else { 0.0 }
}

/// Most files [`names_file`] adds to a store's candidates, and most chunks
/// of each.
pub const NAMED_FILES: usize = 5;
pub const CHUNKS_PER_NAMED_FILE: usize = 40;

impl CodeRank {
    /// `candidates` (best first, as the store ranked them) in the code
    /// ranking's order.
    pub fn rank(&self, shape: &QueryShape, candidates: Vec<Candidate>) -> Vec<Candidate> {
        if candidates.len() < 2 {
            return candidates;
        }
        let n = candidates.len();
        let mut scores: Vec<f64> = (0..n).map(|i| 1.0 / (self.rank_k + 1.0 + i as f64)).collect();
        let best = scores[0];
        let bodies: Vec<&str> = candidates.iter().map(|c| clean_document(&c.chunk.document)).collect();
        let paths: Vec<&str> = candidates.iter().map(|c| c.chunk.metadata.path.as_str()).collect();

        // 1. Definitions of the symbol asked for.
        let (names, scale): (Vec<&str>, f64) = match &shape.symbol {
            Some(symbol) => (vec![symbol.as_str()], 1.0),
            None => (shape.identifiers.iter().map(String::as_str).collect(), 0.5),
        };
        if !names.is_empty() && self.definition > 0.0 {
            for i in 0..n {
                let symbol = &candidates[i].chunk.metadata.symbol;
                let defined = names
                    .iter()
                    .find(|name| symbol.rsplit([' ', '.', ':']).next() == Some(**name) || defines(bodies[i], name));
                if let Some(name) = defined {
                    let tier = if named_after(paths[i], name) { 1.5 } else { 1.0 };
                    scores[i] += self.definition * scale * tier * best;
                }
            }
        }
        // 2. Files named by the query's words.
        if shape.symbol.is_none() && !shape.keywords.is_empty() && self.file_name > 0.0 {
            let mut cache: HashMap<&str, f64> = HashMap::new();
            for i in 0..n {
                let share = *cache.entry(paths[i]).or_insert_with(|| name_share(shape, paths[i]));
                if share >= 0.1 {
                    scores[i] += self.file_name * share * best;
                }
            }
        }
        // 3. Files with several matching chunks.
        if self.coherence > 0.0 {
            let mut files: HashMap<&str, (f64, usize)> = HashMap::new();
            for i in 0..n {
                let entry = files.entry(paths[i]).or_insert((0.0, i));
                entry.0 += scores[i];
                if scores[i] > scores[entry.1] {
                    entry.1 = i;
                }
            }
            let top = files.values().map(|f| f.0).fold(0.0, f64::max);
            if top > 0.0 {
                for (sum, i) in files.into_values() {
                    scores[i] += self.coherence * best * sum / top;
                }
            }
        }
        // 4. Source before the rest.
        for i in 0..n {
            let class = PathClass::of(paths[i]);
            let mut factor = match class {
                PathClass::Source => 1.0,
                _ if shape.asks_for.contains(&class) => 1.0,
                PathClass::Docs => self.docs,
                _ => self.other_class,
            };
            if is_reexport(paths[i]) {
                factor *= self.reexport;
            }
            if paths[i].ends_with(".d.ts") {
                factor *= 0.7;
            }
            scores[i] *= factor;
        }
        // 5. One file does not fill the list.
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
        let mut taken: HashMap<&str, i32> = HashMap::new();
        let mut effective = vec![0.0; n];
        for &i in &order {
            let count = taken.entry(paths[i]).or_insert(0);
            effective[i] = scores[i] * self.saturation.powi(*count);
            *count += 1;
        }
        order.sort_by(|&a, &b| effective[b].total_cmp(&effective[a]));
        let mut slots: Vec<Option<Candidate>> = candidates.into_iter().map(Some).collect();
        order.into_iter().filter_map(|i| slots[i].take()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Chunk, Metadata};

    fn cand(path: &str, body: &str) -> Candidate {
        Candidate {
            chunk: Chunk {
                id: format!("{path}:{body}"),
                document: body.into(),
                metadata: Metadata { path: path.into(), ..Default::default() },
            },
            distance: None,
        }
    }

    fn order(list: &[Candidate]) -> Vec<&str> {
        list.iter().map(|c| c.chunk.metadata.path.as_str()).collect()
    }

    #[test]
    fn queries_are_told_apart() {
        assert_eq!(QueryShape::of("Command").symbol.as_deref(), Some("Command"));
        assert_eq!(QueryShape::of("spawn_blocking").symbol.as_deref(), Some("spawn_blocking"));
        assert_eq!(QueryShape::of("Sinatra::Base").symbol.as_deref(), Some("Base"));
        assert_eq!(QueryShape::of("session").symbol, None);
        let question = QueryShape::of("how does safeParse report errors in tests");
        assert_eq!(question.symbol, None);
        assert_eq!(question.identifiers, ["safeParse"]);
        assert_eq!(QueryShape::of("How the Functor type class maps").identifiers, ["Functor"]);
        assert_eq!(question.keywords, ["safeparse", "report", "errors", "tests"]);
        assert_eq!(question.asks_for, [PathClass::Test]);
    }

    #[test]
    fn definitions_are_found_in_each_language_s_form() {
        assert!(defines("pub fn spawn_blocking<F, R>(f: F)", "spawn_blocking"));
        assert!(defines("func (c *Command) Execute() error {", "Execute"));
        assert!(defines("type Command struct {", "Command"));
        assert!(defines("class ABSL_MUST_USE_RESULT Status final {", "Status"));
        assert!(defines("defmodule Phoenix.Router do", "Router"));
        assert!(defines("export const initTRPC = new TRPCBuilder();", "initTRPC"));
        assert!(defines("int uv_run(uv_loop_t* loop, uv_run_mode mode) {", "uv_run"));
        assert!(defines("public final class JsonArray extends JsonElement {", "JsonArray"));
        assert!(defines("export interface $ZodError<T = unknown> {", "ZodError"));
        assert!(!defines("let handle = spawn_blocking(move || work());", "spawn_blocking"));
        assert!(!defines("int uv_run(uv_loop_t* loop, uv_run_mode mode);", "uv_run"));
        assert!(!defines("    return Status(code, msg);", "Status"));
        assert!(!defines("const Status& status = s;", "Status"));
        assert!(!defines("class Commander {", "Command"));
    }

    #[test]
    fn a_symbol_query_puts_the_definition_first() {
        let list = vec![
            cand("tokio/tests/blocking.rs", "spawn_blocking(|| 1);"),
            cand("tokio/src/runtime/handle.rs", "handle.spawn_blocking(f)"),
            cand("tokio/src/task/blocking.rs", "pub fn spawn_blocking<F, R>(f: F) -> JoinHandle<R>"),
        ];
        let ranked = CodeRank::default().rank(&QueryShape::of("spawn_blocking"), list);
        assert_eq!(order(&ranked)[0], "tokio/src/task/blocking.rs");
        assert_eq!(order(&ranked)[2], "tokio/tests/blocking.rs", "a test after source");
    }

    #[test]
    fn tests_go_after_source_unless_asked_for() {
        let list = vec![cand("args_test.go", "func TestArgs"), cand("args.go", "func ExactArgs(n int)")];
        assert_eq!(
            order(&CodeRank::default().rank(&QueryShape::of("positional argument validators"), list.clone())),
            ["args.go", "args_test.go"]
        );
        assert_eq!(
            order(&CodeRank::default().rank(&QueryShape::of("tests of argument validators"), list)),
            ["args_test.go", "args.go"]
        );
    }

    #[test]
    fn one_file_does_not_fill_the_list() {
        let list = vec![cand("a.go", "x1"), cand("a.go", "x2"), cand("a.go", "x3"), cand("b.go", "y")];
        let ranked = CodeRank { coherence: 0.0, ..CodeRank::default() }.rank(&QueryShape::of("some words"), list);
        assert_eq!(order(&ranked), ["a.go", "b.go", "a.go", "a.go"]);
    }

    #[test]
    fn a_file_named_by_the_query_rises() {
        let list = vec![
            cand("gson/src/main/java/com/google/gson/JsonElement.java", "a"),
            cand("gson/src/main/java/com/google/gson/Gson.java", "b"),
            cand("gson/src/main/java/com/google/gson/JsonArray.java", "c"),
        ];
        let ranked = CodeRank::default().rank(&QueryShape::of("JSON array operations"), list);
        assert_eq!(order(&ranked)[0], "gson/src/main/java/com/google/gson/JsonArray.java");
    }

    #[test]
    fn a_short_name_abbreviates_the_word_it_stands_for() {
        let shape = QueryShape::of("where is the configuration loaded and validated");
        assert!(names_file(&shape, "internal/config/config.go") == 0.0, "one word of three is not half");
        let share = |path: &str| name_overlap(&shape, &name_parts(path));
        assert_eq!(share("internal/config/config.go"), 1);
        assert_eq!(share("docs/guides/configuration.md"), 1);
        // A name shorter than four letters abbreviates nothing; a longer word is not a name's abbreviation.
        assert_eq!(share("src/con/mod.rs"), 0);
        assert_eq!(name_overlap(&QueryShape::of("config values"), &name_parts("docs/configuration.md")), 0);
        let validators = QueryShape::of("positional argument validators");
        assert_eq!(name_overlap(&validators, &name_parts("args.go")), 1);
        assert_eq!(name_overlap(&validators, &name_parts("arg.go")), 0, "three letters abbreviate nothing");
        // An identifier's glued parts are not spelled out.
        assert_eq!(name_overlap(&QueryShape::of("tests of ParseWidget"), &name_parts("widget/parse.go")), 0);
        let list = vec![
            cand("docs/guides/configuration.md", "## Troubleshooting"),
            cand("internal/config/config.go", "func Load(flags *Flags) (Config, error)"),
        ];
        assert_eq!(order(&CodeRank::default().rank(&shape, list))[0], "internal/config/config.go");
    }

    #[test]
    fn a_name_said_as_a_phrase_names_its_file_more() {
        let shape = QueryShape::of("JSON array operations and element access");
        let array = name_share(&shape, "gson/src/main/java/com/google/gson/JsonArray.java");
        let element = name_share(&shape, "gson/src/main/java/com/google/gson/JsonElement.java");
        assert_eq!((array, element), (0.6000000000000001, 0.4));
        let list = vec![
            cand("gson/src/main/java/com/google/gson/JsonElement.java", "a"),
            cand("gson/src/main/java/com/google/gson/JsonArray.java", "b"),
        ];
        assert_eq!(
            order(&CodeRank::default().rank(&shape, list))[0],
            "gson/src/main/java/com/google/gson/JsonArray.java"
        );
        // Only the whole name, in order, is a phrase.
        assert_eq!(name_share(&QueryShape::of("array of json values"), "gson/JsonArray.java"), 2.0 / 3.0);
    }
}
