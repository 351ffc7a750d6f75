//! The reference server's YAML file, decoded as `gopkg.in/yaml.v3` v3.0.1 decodes it.
//!
//! The Go server reads the file with `yaml.NewDecoder(...).KnownFields(true).Decode(&file)` into
//! a fixed struct, and whatever goes wrong becomes part of the start-up error text. Matching that
//! text needs more than a YAML parser: yaml.v3 builds a node tree with its own tag resolution
//! (YAML 1.2 core schema plus 1.1 leftovers such as `0777` octals and timestamps), then walks the
//! tree with reflection, collecting type errors, unknown and duplicate keys line by line instead
//! of stopping at the first. This module keeps the three layers of yaml.v3 apart:
//!
//! 1. Reading and parsing. yaml.v3 is a Go port of libyaml, so the event stream and the syntax
//!    errors come from `libyaml-safer`, a Rust port of the same C code; the problem texts are the
//!    same and yaml.v3's odd choice of line number (the context mark, 0-based, before the problem
//!    mark, 1-based only for scanner errors) is reproduced in [`syntax_error`]. Where yaml.v3's
//!    scanner departs from libyaml's, [`compose`] makes up the difference: it looks two tokens
//!    further for scanner errors (yaml.v3 queues them for comments), rewrites the few spots libyaml
//!    rejects and yaml.v3 reads (`:` before a flow indicator in a flow scalar, `,[]` in tags,
//!    the `\'` escape), and rejects what libyaml reads and yaml.v3 does not (`?` inside a flow
//!    scalar, the `\/` escape, `%YAML 1.2`). The input is decoded first with yaml.v3's reader
//!    rules and messages, in the 512-byte chunks the Go reader uses, because which error wins
//!    depends on how far the reader had read.
//! 2. Composing events into nodes, as yaml.v3's `parser` does: tags resolved at parse time, anchors
//!    and aliases, lines.
//! 3. Decoding nodes into the reference struct, as yaml.v3's `decoder` does for the kinds that
//!    struct has (`int`, `string`, `[]string` and nested structs), including merge keys (`<<`),
//!    `!!binary`, alias cycles and yaml.v3's float-to-int truncation (`version: 1.9` is 1).
//!
//! Checked against the Go decoder on a few hundred hand-written files and a few thousand mutated
//! ones. Known residual differences, all on malformed or contrived input:
//! - an implicit key that runs past its line (an unclosed quote in a key, say): libyaml reports
//!   `could not find expected ':'` as soon as the line ends, yaml.v3 only when it next checks the
//!   key, so the two may name different errors;
//! - a value quoted in a type error is cut after 7 bytes even inside a multi-byte character, which
//!   Go prints as raw bytes and this module as U+FFFD; `!!binary` data that is not UTF-8 is decoded
//!   lossily; merge keys whose parent mapping has collection keys (Go's decoder panics on those);
//!   the 10000-level indentation limit (the flow-level limit is reproduced); and which of a reader
//!   error and a syntax error wins when both lie beyond the first 512 bytes is decided within a few
//!   characters.

use std::collections::{HashMap, HashSet};

use libyaml_safer::{Event, EventData, Mark, Parser, ScalarStyle};

use crate::goflag::{self, quote};

/// The fields of the reference server's `yamlConfig` that configuration uses.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct File {
    pub version: i64,
    pub chroma_server_url: String,
    pub chroma_collection_name: String,
    pub chroma_tenant: String,
    pub chroma_database: String,
    pub sync_retry_attempts: i64,
    pub embedding_api_url: String,
    pub embedding_model: String,
    pub embedding_api_key: String,
}

/// Decodes the first document of `data`. The error is the text of Go's error: `EOF` for a file
/// without a document, otherwise starting with `yaml: `.
pub fn decode(data: &[u8]) -> Result<File, String> {
    let tree = compose(data)?;
    let Some(root) = tree.root else {
        return Err("EOF".to_owned());
    };
    let mut decoder = Decoder::new(&tree.nodes);
    let mut value = Value::zero(Ty::Struct(&ROOT));
    decoder.unmarshal(root, Ty::Struct(&ROOT), &mut value).map_err(|message| format!("yaml: {message}"))?;
    if !decoder.type_errors.is_empty() {
        return Err(format!("yaml: unmarshal errors:\n  {}", decoder.type_errors.join("\n  ")));
    }
    Ok(File {
        version: value.field(&["version"]).int(),
        chroma_server_url: value.field(&["chroma", "server_url"]).string(),
        chroma_collection_name: value.field(&["chroma", "collection_name"]).string(),
        chroma_tenant: value.field(&["chroma", "tenant"]).string(),
        chroma_database: value.field(&["chroma", "database"]).string(),
        sync_retry_attempts: value.field(&["sync", "retry_attempts"]).int(),
        embedding_api_url: value.field(&["embedding", "api_url"]).string(),
        embedding_model: value.field(&["embedding", "model"]).string(),
        embedding_api_key: value.field(&["embedding", "api_key"]).string(),
    })
}

// ---------------------------------------------------------------------------------------------
// The target struct, with the names Go's reflection prints for its types.

#[derive(Debug, Clone, Copy)]
enum Ty {
    Int,
    Str,
    StrList,
    Struct(&'static StructTy),
}

impl Ty {
    fn go_name(self) -> &'static str {
        match self {
            Ty::Int => "int",
            Ty::Str => "string",
            Ty::StrList => "[]string",
            Ty::Struct(structure) => structure.go_name,
        }
    }
}

#[derive(Debug)]
struct StructTy {
    go_name: &'static str,
    fields: &'static [(&'static str, Ty)],
}

static CHROMA: StructTy = StructTy {
    go_name: r#"struct { ServerURL string "yaml:\"server_url\""; CollectionName string "yaml:\"collection_name\""; Tenant string "yaml:\"tenant\""; Database string "yaml:\"database\"" }"#,
    fields: &[("server_url", Ty::Str), ("collection_name", Ty::Str), ("tenant", Ty::Str), ("database", Ty::Str)],
};

static FILES: StructTy = StructTy {
    go_name: r#"struct { IncludePaths []string "yaml:\"include_paths\""; ExcludePaths []string "yaml:\"exclude_paths\""; IncludeExtensions []string "yaml:\"include_extensions\""; ExcludeExtensions []string "yaml:\"exclude_extensions\"" }"#,
    fields: &[
        ("include_paths", Ty::StrList),
        ("exclude_paths", Ty::StrList),
        ("include_extensions", Ty::StrList),
        ("exclude_extensions", Ty::StrList),
    ],
};

static CHUNKING: StructTy = StructTy {
    go_name: r#"struct { ChunkSize int "yaml:\"chunk_size\""; ChunkOverlap int "yaml:\"chunk_overlap\"" }"#,
    fields: &[("chunk_size", Ty::Int), ("chunk_overlap", Ty::Int)],
};

static SYNC: StructTy = StructTy {
    go_name: r#"struct { BatchSize int "yaml:\"batch_size\""; RetryAttempts int "yaml:\"retry_attempts\"" }"#,
    fields: &[("batch_size", Ty::Int), ("retry_attempts", Ty::Int)],
};

static EMBEDDING: StructTy = StructTy {
    go_name: r#"struct { APIURL string "yaml:\"api_url\""; Model string "yaml:\"model\""; APIKey string "yaml:\"api_key\"" }"#,
    fields: &[("api_url", Ty::Str), ("model", Ty::Str), ("api_key", Ty::Str)],
};

static ROOT: StructTy = StructTy {
    go_name: "content.yamlConfig",
    fields: &[
        ("version", Ty::Int),
        ("chroma", Ty::Struct(&CHROMA)),
        ("files", Ty::Struct(&FILES)),
        ("chunking", Ty::Struct(&CHUNKING)),
        ("sync", Ty::Struct(&SYNC)),
        ("embedding", Ty::Struct(&EMBEDDING)),
    ],
};

/// A decoded value of a [`Ty`], starting as Go's zero value.
#[derive(Debug, Clone)]
enum Value {
    Int(i64),
    Str(String),
    List(Vec<String>),
    Struct(&'static StructTy, Vec<Value>),
}

impl Value {
    fn zero(ty: Ty) -> Value {
        match ty {
            Ty::Int => Value::Int(0),
            Ty::Str => Value::Str(String::new()),
            Ty::StrList => Value::List(Vec::new()),
            Ty::Struct(structure) => {
                Value::Struct(structure, structure.fields.iter().map(|(_, ty)| Value::zero(*ty)).collect())
            }
        }
    }

    fn field(&self, path: &[&str]) -> &Value {
        let mut value = self;
        for name in path {
            let Value::Struct(structure, fields) = value else {
                unreachable!("paths follow the static schema");
            };
            let index = structure.fields.iter().position(|(field, _)| field == name).expect("field in schema");
            value = &fields[index];
        }
        value
    }

    fn int(&self) -> i64 {
        match self {
            Value::Int(value) => *value,
            _ => 0,
        }
    }

    fn string(&self) -> String {
        match self {
            Value::Str(value) => value.clone(),
            _ => String::new(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tags.

const NULL_TAG: &str = "!!null";
const BOOL_TAG: &str = "!!bool";
const STR_TAG: &str = "!!str";
const INT_TAG: &str = "!!int";
const FLOAT_TAG: &str = "!!float";
const TIMESTAMP_TAG: &str = "!!timestamp";
const SEQ_TAG: &str = "!!seq";
const MAP_TAG: &str = "!!map";
const BINARY_TAG: &str = "!!binary";
const MERGE_TAG: &str = "!!merge";
const LONG_TAG_PREFIX: &str = "tag:yaml.org,2002:";

fn short_tag(tag: &str) -> String {
    match tag.strip_prefix(LONG_TAG_PREFIX) {
        Some(rest) => format!("!!{rest}"),
        None => tag.to_owned(),
    }
}

// ---------------------------------------------------------------------------------------------
// Reading: yaml.v3's reader, for its error texts and its chunking.

/// Size of the Go reader's raw buffer: input is read and decoded in chunks of this many bytes.
const RAW_CHUNK: usize = 512;

/// The input decoded up to the first reader error, if any.
struct Decoded {
    text: String,
    error: Option<ReaderError>,
}

struct ReaderError {
    problem: &'static str,
    /// How far the scanner has read (in bytes of the decoded text, as libyaml-safer's marks
    /// count) when Go's reader decodes the chunk with the error.
    trigger: usize,
}

/// Decodes `data` with yaml.v3's reader rules (BOM detection, UTF-8 or UTF-16, allowed
/// characters), stopping at the first error.
fn read_input(data: &[u8]) -> Decoded {
    let (encoding, start) = if data.starts_with(b"\xff\xfe") {
        (Encoding::Utf16Le, 2)
    } else if data.starts_with(b"\xfe\xff") {
        (Encoding::Utf16Be, 2)
    } else if data.starts_with(b"\xef\xbb\xbf") {
        (Encoding::Utf8, 3)
    } else {
        (Encoding::Utf8, 0)
    };
    let mut text = String::with_capacity(data.len());
    // The chunk being decoded: [chunk_start, chunk_start + RAW_CHUNK), and how many characters
    // had been decoded when it was read.
    let mut chunk_end = RAW_CHUNK;
    let mut chunk_trigger = 0;
    let mut pos = start;
    while pos < data.len() {
        let (width, decoded) = decode_char(&data[pos..], encoding);
        // A character that does not fit in the chunk waits for the next one.
        if pos + width.max(1) > chunk_end {
            chunk_end = pos + RAW_CHUNK;
            chunk_trigger = text.len();
        }
        let value = match decoded {
            Ok(value) => value,
            Err(problem) => return Decoded { text, error: Some(ReaderError { problem, trigger: chunk_trigger }) },
        };
        let allowed = matches!(value, 0x09 | 0x0A | 0x0D | 0x20..=0x7E | 0x85 | 0xA0..=0xD7FF | 0xE000..=0xFFFD)
            || (0x10000..=0x10FFFF).contains(&value);
        if !allowed {
            return Decoded {
                text,
                error: Some(ReaderError { problem: "control characters are not allowed", trigger: chunk_trigger }),
            };
        }
        text.push(char::from_u32(value).expect("checked range"));
        pos += width;
    }
    Decoded { text, error: None }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Utf8,
    Utf16Le,
    Utf16Be,
}

/// One character at the start of `bytes` (which is not empty): its width and value, or the
/// problem yaml.v3 reports. A sequence cut short by the end of the input reports its "incomplete"
/// problem.
fn decode_char(bytes: &[u8], encoding: Encoding) -> (usize, Result<u32, &'static str>) {
    match encoding {
        Encoding::Utf8 => {
            let lead = bytes[0];
            let (width, initial) = match lead {
                _ if lead & 0x80 == 0 => (1, u32::from(lead)),
                _ if lead & 0xE0 == 0xC0 => (2, u32::from(lead & 0x1F)),
                _ if lead & 0xF0 == 0xE0 => (3, u32::from(lead & 0x0F)),
                _ if lead & 0xF8 == 0xF0 => (4, u32::from(lead & 0x07)),
                _ => return (1, Err("invalid leading UTF-8 octet")),
            };
            if width > bytes.len() {
                return (width, Err("incomplete UTF-8 octet sequence"));
            }
            let mut value = initial;
            for &byte in &bytes[1..width] {
                if byte & 0xC0 != 0x80 {
                    return (width, Err("invalid trailing UTF-8 octet"));
                }
                value = (value << 6) + u32::from(byte & 0x3F);
            }
            let shortest = match width {
                1 => true,
                2 => value >= 0x80,
                3 => value >= 0x800,
                _ => value >= 0x10000,
            };
            if !shortest {
                return (width, Err("invalid length of a UTF-8 sequence"));
            }
            if (0xD800..=0xDFFF).contains(&value) || value > 0x10FFFF {
                return (width, Err("invalid Unicode character"));
            }
            (width, Ok(value))
        }
        Encoding::Utf16Le | Encoding::Utf16Be => {
            let unit = |at: usize| {
                let pair = [bytes[at], bytes[at + 1]];
                u32::from(if encoding == Encoding::Utf16Le {
                    u16::from_le_bytes(pair)
                } else {
                    u16::from_be_bytes(pair)
                })
            };
            if bytes.len() < 2 {
                return (2, Err("incomplete UTF-16 character"));
            }
            let first = unit(0);
            if first & 0xFC00 == 0xDC00 {
                return (2, Err("unexpected low surrogate area"));
            }
            if first & 0xFC00 != 0xD800 {
                return (2, Ok(first));
            }
            if bytes.len() < 4 {
                return (4, Err("incomplete UTF-16 surrogate pair"));
            }
            let second = unit(2);
            if second & 0xFC00 != 0xDC00 {
                return (4, Err("expected low surrogate area"));
            }
            (4, Ok(0x10000 + ((first & 0x3FF) << 10) + (second & 0x3FF)))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing and composing: yaml.v3's `parser` over libyaml events.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Document,
    Sequence,
    Mapping,
    Scalar,
    Alias,
}

#[derive(Debug)]
struct Node {
    kind: Kind,
    tag: String,
    value: String,
    /// Single- or double-quoted, literal or folded.
    quoted: bool,
    line: usize,
    content: Vec<usize>,
    alias: Option<usize>,
}

impl Node {
    /// yaml.v3's `Node.indicatedString`.
    fn indicated_string(&self) -> bool {
        self.kind == Kind::Scalar
            && (short_tag(&self.tag) == STR_TAG || ((self.tag.is_empty() || self.tag == "!") && self.quoted))
    }

    /// yaml.v3's `isMerge`.
    fn is_merge(&self) -> bool {
        self.kind == Kind::Scalar
            && self.value == "<<"
            && (self.tag.is_empty() || self.tag == "!" || short_tag(&self.tag) == MERGE_TAG)
    }
}

struct Tree {
    nodes: Vec<Node>,
    root: Option<usize>,
}

/// yaml.v3 limits flow nesting to this depth.
const MAX_FLOW_DEPTH: usize = 10_000;

/// Why composing stopped: a Go error text and the input position (in characters) the parser
/// had reached, to be weighed against scanner errors just ahead and a reader error further on.
struct Stop {
    message: String,
    /// libyaml's problem and context texts, for a syntax error.
    problem: &'static str,
    context: &'static str,
    index: u64,
    /// A scanner error already: yaml.v3 would have met it at the same point.
    scanner: bool,
}

/// How many tokens yaml.v3's scanner keeps queued beyond the one the parser looks at (for
/// comments); libyaml keeps none, so a scanner error this close ahead is yaml.v3's error.
const GO_TOKEN_LOOKAHEAD: usize = 2;

fn compose(data: &[u8]) -> Result<Tree, String> {
    let decoded = read_input(data);
    // libyaml-safer detects the encoding itself and would misread a file whose first character
    // starts with 0xEF; a UTF-8 byte order mark, which it removes, settles the question.
    let mut input: Vec<char> = Vec::with_capacity(decoded.text.len() + 1);
    input.push('\u{feff}');
    input.extend(decoded.text.chars());
    // Two spots where libyaml's scanner rejects what yaml.v3's reads on are rewritten so that
    // libyaml reads them as yaml.v3 does:
    // - in a flow collection libyaml rejects a ':' that a flow indicator follows inside a plain
    //   scalar, where yaml.v3 keeps it in the scalar: it becomes a character the input lacks,
    //   restored in the scalar values;
    // - yaml.v3 allows ',', '[' and ']' in any tag, libyaml only in verbatim ones (and panics on a
    //   tag that a ',' ends in a flow collection): they become their %-escapes, which libyaml
    //   decodes back into the tag;
    // - yaml.v3 knows the escape `\'` in double quotes, libyaml does not: it becomes `\x27`.
    let stand_in = ['\u{fdd0}', '\u{fdd1}', '\u{fdd2}', '\u{fdd3}']
        .into_iter()
        .find(|candidate| !input.contains(candidate))
        .unwrap_or('\u{fdd0}');
    let mut rewrites = 0;
    // libyaml-safer also panics on a block scalar that ends the input without a line break; it
    // then gets one, which is taken off that scalar's value again.
    let mut newline_added = false;
    let (mut nodes, mut result, text) = loop {
        let mut text: String = input.iter().collect();
        if newline_added {
            text.push('\n');
        }
        let eof = newline_added.then(|| (text.len() - '\u{feff}'.len_utf8() - 1) as u64);
        let Some((nodes, result)) = without_panics(|| compose_text(&text, &input, eof)) else {
            if !newline_added && input.last() != Some(&'\n') {
                newline_added = true;
                continue;
            }
            match comma_ending_a_tag(&input) {
                Some(at) if rewrites < MAX_REWRITES => {
                    input.splice(at..=at, "%2C".chars());
                    rewrites += 1;
                    newline_added = false;
                    continue;
                }
                _ => return Err("yaml: did not find expected whitespace or line break".to_owned()),
            }
        };
        // The scanner stops on the offending character.
        let at = match &result {
            Err(stop) if stop.scanner => char_position(&input, stop.index),
            _ => break (nodes, result, text),
        };
        let problem = result.as_ref().err().map(|stop| (stop.problem, stop.context)).unwrap_or_default();
        match (problem, input.get(at)) {
            (("found unexpected ':'", _), Some(':')) if rewrites < MAX_REWRITES => input[at] = stand_in,
            (("found unknown escape character", _), Some('\\'))
                if input.get(at + 1) == Some(&'\'') && rewrites < MAX_REWRITES =>
            {
                input.splice(at..at + 2, "\\x27".chars());
            }
            (("did not find expected whitespace or line break", "while scanning a tag"), Some(&ch))
                if matches!(ch, ',' | '[' | ']') && rewrites < MAX_REWRITES =>
            {
                let escape = match ch {
                    ',' => "%2C",
                    '[' => "%5B",
                    _ => "%5D",
                };
                input.splice(at..=at, escape.chars());
            }
            _ => break (nodes, result, text),
        }
        rewrites += 1;
    };
    for node in &mut nodes {
        if node.kind == Kind::Scalar && node.value.contains(stand_in) {
            node.value = node.value.replace(stand_in, ":");
        }
    }

    // Where the parser stopped, and whether yaml.v3's longer scanner lookahead changes the outcome.
    let stop = match &result {
        Ok(document) => Some(document.stop),
        Err(stop) if !stop.scanner => Some(stop.index),
        Err(_) => None,
    };
    if let Some(stop) = stop
        && let Some(error) = scanner_error_ahead(&text, stop)
    {
        result = Err(error);
    }

    if let Some(error) = decoded.error {
        let reached = match &result {
            Ok(document) if document.root.is_some() => document.reach,
            Ok(_) => u64::MAX,
            Err(stop) => stop.index,
        };
        if reached.saturating_add(4) >= error.trigger as u64 {
            return Err(format!("yaml: {}", error.problem));
        }
    }
    match result {
        Ok(document) => Ok(Tree { nodes, root: document.root }),
        Err(stop) => Err(stop.message),
    }
}

/// The index in `input` (the byte order mark first) of the character at `byte_index` of the text
/// after the mark, which is how libyaml-safer's marks count.
fn char_position(input: &[char], byte_index: u64) -> usize {
    let mut bytes = 0u64;
    for (at, ch) in input.iter().enumerate().skip(1) {
        if bytes >= byte_index {
            return at;
        }
        bytes += ch.len_utf8() as u64;
    }
    input.len()
}

/// Bound on the rewrites [`compose`] makes, each costing a parse.
const MAX_REWRITES: usize = 64;

/// Runs `f`, turning a panic into `None` without printing it. libyaml-safer panics on some
/// inputs libyaml accepts ("TODO: What is expected here?" for a tag a ',' ends); configuration
/// loading must fail with a message instead.
fn without_panics<T>(f: impl FnOnce() -> T + std::panic::UnwindSafe) -> Option<T> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(f);
    std::panic::set_hook(hook);
    result.ok()
}

/// The ',' that makes libyaml-safer's scanner panic: the first one such that the input up to it
/// panics (the scanner meets it right after a tag).
fn comma_ending_a_tag(input: &[char]) -> Option<usize> {
    let commas: Vec<usize> = (0..input.len()).filter(|&at| input[at] == ',').collect();
    let panics = |end: usize| {
        // A line break keeps the other panic, on a block scalar cut off by the end, away.
        let mut text: String = input[..=end].iter().collect();
        text.push('\n');
        without_panics(|| {
            let mut bytes = text.as_bytes();
            let mut scanner = libyaml_safer::Scanner::new();
            scanner.set_input_string(&mut bytes);
            while let Ok(token) = libyaml_safer::Scanner::scan(&mut scanner) {
                if matches!(token.data, libyaml_safer::TokenData::StreamEnd) {
                    break;
                }
            }
        })
        .is_none()
    };
    let first = commas.partition_point(|&at| !panics(at));
    commas.get(first).copied()
}

/// Composes the first document of `text` (which starts with a byte order mark); `chars` are its
/// characters. `eof` is the position of a line break added at the end, if one was.
fn compose_text(text: &str, chars: &[char], eof: Option<u64>) -> (Vec<Node>, Result<Document, Stop>) {
    let mut bytes = text.as_bytes();
    let mut parser = Parser::new();
    parser.set_input_string(&mut bytes);
    let mut composer = Composer {
        parser,
        source: chars,
        eof,
        peeked: None,
        nodes: Vec::new(),
        anchors: HashMap::new(),
        flows: Vec::new(),
    };
    let result = composer.document();
    (composer.nodes, result)
}

/// The scanner error yaml.v3 reports instead of stopping at `stop`: the first scanner error of
/// the input, when it comes within [`GO_TOKEN_LOOKAHEAD`] tokens of the token at `stop`.
fn scanner_error_ahead(input: &str, stop: u64) -> Option<Stop> {
    without_panics(|| first_scanner_error_ahead(input, stop)).flatten()
}

fn first_scanner_error_ahead(input: &str, stop: u64) -> Option<Stop> {
    let mut bytes = input.as_bytes();
    let mut scanner = libyaml_safer::Scanner::new();
    scanner.set_input_string(&mut bytes);
    // Each token's start and whether the parser has consumed it by the time it stops at that
    // position: STREAM-START, and BLOCK-END, which shares its start with the token after it.
    let mut tokens = Vec::new();
    let err = loop {
        match libyaml_safer::Scanner::scan(&mut scanner) {
            Ok(token) => {
                if matches!(token.data, libyaml_safer::TokenData::StreamEnd) {
                    return None;
                }
                let consumed = matches!(
                    token.data,
                    libyaml_safer::TokenData::BlockEnd | libyaml_safer::TokenData::StreamStart { .. }
                );
                tokens.push((token.start_mark.index, consumed));
            }
            Err(err) => break err,
        }
    };
    let head = tokens
        .iter()
        .position(|(start, consumed)| *start >= stop && !consumed)
        .or_else(|| tokens.iter().position(|(start, _)| *start >= stop))
        .unwrap_or(tokens.len());
    (tokens.len() <= head + GO_TOKEN_LOOKAHEAD).then(|| syntax_error(&err))
}

/// The first document as composed: its root, the input position of the token the parser looked
/// at when the document ended, and how far the scanner had read by then.
struct Document {
    root: Option<usize>,
    stop: u64,
    reach: u64,
}

struct Composer<'s, R> {
    parser: Parser<R>,
    /// The input's characters, with the byte order mark at index 0.
    source: &'s [char],
    /// Where a line break was added after the input.
    eof: Option<u64>,
    peeked: Option<Event>,
    nodes: Vec<Node>,
    anchors: HashMap<String, usize>,
    /// The open flow collections: their kind and where they start.
    flows: Vec<(Kind, Mark)>,
}

impl<R: std::io::BufRead> Composer<'_, R> {
    fn peek(&mut self) -> Result<&Event, Stop> {
        if self.peeked.is_none() {
            let event = self.parser.parse().map_err(|err| syntax_error(&err))?;
            self.peeked = Some(event);
        }
        Ok(self.peeked.as_ref().expect("just filled"))
    }

    fn next(&mut self) -> Result<Event, Stop> {
        self.peek()?;
        Ok(self.peeked.take().expect("just peeked"))
    }

    /// The first document (without a root for a stream without documents).
    fn document(&mut self) -> Result<Document, Stop> {
        let start = self.next()?;
        debug_assert!(matches!(start.data, EventData::StreamStart { .. }));
        let event = self.next()?;
        match event.data {
            EventData::StreamEnd => {
                Ok(Document { root: None, stop: event.start_mark.index, reach: event.end_mark.index })
            }
            EventData::DocumentStart { version_directive, .. } => {
                // yaml.v3 accepts only `%YAML 1.1`; libyaml also takes 1.2.
                if version_directive.is_some_and(|version| (version.major, version.minor) != (1, 1)) {
                    let message =
                        go_parse_failure(false, Mark::default(), event.start_mark, "found incompatible YAML document");
                    return Err(Stop {
                        message,
                        problem: "",
                        context: "",
                        index: event.start_mark.index,
                        scanner: false,
                    });
                }
                let document = self.push(Kind::Document, String::new(), String::new(), false, &event);
                let child = self.node()?;
                self.nodes[document].content.push(child);
                let end = self.next()?;
                Ok(Document { root: Some(document), stop: end.start_mark.index, reach: end.end_mark.index })
            }
            _ => Err(Stop {
                message: "yaml: unexpected event at the start of a document".to_owned(),
                problem: "",
                context: "",
                index: event.start_mark.index,
                scanner: false,
            }),
        }
    }

    fn node(&mut self) -> Result<usize, Stop> {
        let event = self.next()?;
        match event.data {
            EventData::Scalar { ref anchor, ref tag, ref value, style, .. } => {
                let quoted = matches!(
                    style,
                    ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted | ScalarStyle::Literal | ScalarStyle::Folded
                );
                let default_tag = if quoted {
                    STR_TAG
                } else if value == "<<" {
                    MERGE_TAG
                } else {
                    ""
                };
                if style == ScalarStyle::DoubleQuoted
                    && let Some(stop) = self.slash_escape(&event)
                {
                    return Err(stop);
                }
                if style == ScalarStyle::Plain
                    && let (Some(&(flow, flow_start)), Some(offset)) = (self.flows.last(), value.find('?'))
                {
                    return Err(self.question_mark_in_flow(flow, flow_start, &event, &value[..offset]));
                }
                let mut value = value.clone();
                let block = matches!(style, ScalarStyle::Literal | ScalarStyle::Folded);
                if block && self.eof.is_some_and(|eof| event.end_mark.index > eof) && value.ends_with('\n') {
                    value.pop();
                }
                let tag = node_tag(Kind::Scalar, default_tag, tag.as_deref(), &value);
                let id = self.push(Kind::Scalar, tag, value, quoted, &event);
                if let Some(anchor) = anchor {
                    self.anchors.insert(anchor.clone(), id);
                }
                Ok(id)
            }
            EventData::Alias { ref anchor } => {
                let id = self.push(Kind::Alias, String::new(), anchor.clone(), false, &event);
                match self.anchors.get(anchor) {
                    Some(&target) => self.nodes[id].alias = Some(target),
                    None => {
                        return Err(Stop {
                            message: format!("yaml: unknown anchor '{anchor}' referenced"),
                            problem: "",
                            context: "",
                            index: event.start_mark.index,
                            scanner: false,
                        });
                    }
                }
                Ok(id)
            }
            EventData::SequenceStart { ref anchor, ref tag, style, .. } => {
                let flow = style == libyaml_safer::SequenceStyle::Flow;
                self.collection(Kind::Sequence, SEQ_TAG, anchor.clone(), tag.as_deref(), flow, &event)
            }
            EventData::MappingStart { ref anchor, ref tag, style, .. } => {
                let flow = style == libyaml_safer::MappingStyle::Flow;
                self.collection(Kind::Mapping, MAP_TAG, anchor.clone(), tag.as_deref(), flow, &event)
            }
            _ => Err(Stop {
                message: "yaml: unexpected event in a document".to_owned(),
                problem: "",
                context: "",
                index: event.start_mark.index,
                scanner: false,
            }),
        }
    }

    fn collection(
        &mut self,
        kind: Kind,
        default_tag: &str,
        anchor: Option<String>,
        tag: Option<&str>,
        flow: bool,
        event: &Event,
    ) -> Result<usize, Stop> {
        if flow {
            self.flows.push((kind, event.start_mark));
            if self.flows.len() > MAX_FLOW_DEPTH {
                // yaml.v3's scanner refuses the opening bracket, marking it as the context.
                let message = go_parse_failure(
                    true,
                    event.start_mark,
                    event.start_mark,
                    &format!("exceeded max depth of {MAX_FLOW_DEPTH}"),
                );
                return Err(Stop { message, problem: "", context: "", index: event.start_mark.index, scanner: true });
            }
        }
        let tag = node_tag(kind, default_tag, tag, "");
        let id = self.push(kind, tag, String::new(), false, event);
        if let Some(anchor) = anchor {
            self.anchors.insert(anchor, id);
        }
        loop {
            if matches!(self.peek()?.data, EventData::SequenceEnd | EventData::MappingEnd) {
                self.next()?;
                break;
            }
            let child = self.node()?;
            self.nodes[id].content.push(child);
        }
        if flow {
            self.flows.pop();
        }
        Ok(id)
    }

    /// libyaml reads the escape `\/` in a double-quoted scalar, yaml.v3 rejects it: its scanner
    /// error for the scalar of `event`, if it has one.
    fn slash_escape(&self, event: &Event) -> Option<Stop> {
        let start = char_position(self.source, event.start_mark.index);
        let end = char_position(self.source, event.end_mark.index).min(self.source.len());
        let body = self.source.get(start + 1..end)?;
        let mut at = 0;
        while at + 1 < body.len() {
            if body[at] == '\\' {
                if body[at + 1] == '/' {
                    let mut problem = event.start_mark;
                    let before = &body[..at];
                    let lines = before.iter().filter(|ch| **ch == '\n').count() as u64;
                    problem.line += lines;
                    problem.index += 1 + before.iter().map(|ch| ch.len_utf8() as u64).sum::<u64>();
                    let problem_text = "found unknown escape character";
                    let message = go_parse_failure(true, event.start_mark, problem, problem_text);
                    return Some(Stop {
                        message,
                        problem: problem_text,
                        context: "while parsing a quoted scalar",
                        index: problem.index,
                        scanner: true,
                    });
                }
                at += 2;
            } else {
                at += 1;
            }
        }
        None
    }

    /// yaml.v3 ends a plain scalar in a flow collection at '?', which then starts a key where
    /// the collection wants ',' or its end: the parser error yaml.v3 gives for the scalar that
    /// libyaml read whole.
    fn question_mark_in_flow(&self, flow: Kind, flow_start: Mark, scalar: &Event, before: &str) -> Stop {
        let mut at = scalar.start_mark;
        if !before.contains('\n') {
            at.index += before.len() as u64;
            at.column += before.chars().count() as u64;
        } else {
            at = scalar.end_mark;
        }
        // The context ("while parsing a flow mapping") is not part of the text, its mark is.
        let problem =
            if flow == Kind::Mapping { "did not find expected ',' or '}'" } else { "did not find expected ',' or ']'" };
        let message = go_parse_failure(false, flow_start, at, problem);
        Stop { message, problem, context: "", index: at.index, scanner: false }
    }

    fn push(&mut self, kind: Kind, tag: String, value: String, quoted: bool, event: &Event) -> usize {
        self.nodes.push(Node {
            kind,
            tag,
            value,
            quoted,
            line: event.start_mark.line as usize + 1,
            content: Vec::new(),
            alias: None,
        });
        self.nodes.len() - 1
    }
}

/// yaml.v3's `parser.node`: an explicit tag (other than `!`) in short form, else the default tag,
/// else for a scalar the tag its plain value resolves to.
fn node_tag(kind: Kind, default_tag: &str, tag: Option<&str>, value: &str) -> String {
    match tag {
        Some(tag) if !tag.is_empty() && tag != "!" => short_tag(tag),
        _ if !default_tag.is_empty() => default_tag.to_owned(),
        _ if kind == Kind::Scalar => resolve_plain(value),
        _ => String::new(),
    }
}

/// The text yaml.v3's `parser.fail` makes of a libyaml scanner or parser error.
fn syntax_error(err: &libyaml_safer::Error) -> Stop {
    let scanner = err.kind() == libyaml_safer::ErrorKind::Scanner;
    let problem_mark = err.problem_mark().unwrap_or_default();
    // A scanner error always records its context mark (the problem mark when there is no
    // context); a parser error records one only with a context.
    let context_mark = err.context_mark().unwrap_or(if scanner { problem_mark } else { Mark::default() });
    let message = go_parse_failure(scanner, context_mark, problem_mark, err.problem());
    Stop { message, problem: err.problem(), context: err.context().unwrap_or(""), index: problem_mark.index, scanner }
}

fn go_parse_failure(scanner: bool, context_mark: Mark, problem_mark: Mark, problem: &str) -> String {
    let line = if context_mark.line != 0 {
        context_mark.line + u64::from(scanner)
    } else if problem_mark.line != 0 {
        problem_mark.line + u64::from(scanner)
    } else {
        0
    };
    let problem = if problem.is_empty() { "unknown problem parsing YAML content" } else { problem };
    if line == 0 { format!("yaml: {problem}") } else { format!("yaml: line {line}: {problem}") }
}

// ---------------------------------------------------------------------------------------------
// Resolving scalars: yaml.v3's `resolve`.

#[derive(Debug, Clone, PartialEq)]
enum Resolved {
    Null,
    Bool,
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(String),
    Timestamp,
}

/// The tag a plain scalar gets at parse time (`resolve("", value)`), which cannot fail.
fn resolve_plain(value: &str) -> String {
    resolve("", value).map(|(tag, _)| tag).unwrap_or_else(|_| STR_TAG.to_owned())
}

fn resolvable(tag: &str) -> bool {
    matches!(tag, "" | STR_TAG | BOOL_TAG | INT_TAG | FLOAT_TAG | NULL_TAG | TIMESTAMP_TAG)
}

/// yaml.v3's `resolve(tag, in)`; the error is its `failf` text.
fn resolve(tag: &str, input: &str) -> Result<(String, Resolved), String> {
    let tag = short_tag(tag);
    if !resolvable(&tag) {
        return Ok((tag, Resolved::Str(input.to_owned())));
    }
    let (resolved_tag, value) = resolve_value(&tag, input);
    if tag.is_empty() || tag == resolved_tag || tag == STR_TAG || tag == BINARY_TAG {
        return Ok((resolved_tag.to_owned(), value));
    }
    if tag == FLOAT_TAG
        && resolved_tag == INT_TAG
        && let Resolved::Int(int) = value
    {
        return Ok((FLOAT_TAG.to_owned(), Resolved::Float(int as f64)));
    }
    Err(format!("cannot decode {} `{input}` as a {}", short_tag(resolved_tag), short_tag(&tag)))
}

fn resolve_value(tag: &str, input: &str) -> (&'static str, Resolved) {
    let hint = match input.as_bytes().first() {
        None => b'N',
        Some(b'+' | b'-') => b'S',
        Some(b'0'..=b'9') => b'D',
        Some(b'y' | b'Y' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'o' | b'O' | b'~') => b'M',
        Some(b'.') => b'.',
        Some(_) => 0,
    };
    if hint == 0 || tag == STR_TAG || tag == BINARY_TAG {
        return (STR_TAG, Resolved::Str(input.to_owned()));
    }
    match input {
        "true" | "True" | "TRUE" | "false" | "False" | "FALSE" => return (BOOL_TAG, Resolved::Bool),
        "" | "~" | "null" | "Null" | "NULL" => return (NULL_TAG, Resolved::Null),
        ".nan" | ".NaN" | ".NAN" => return (FLOAT_TAG, Resolved::Float(f64::NAN)),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => return (FLOAT_TAG, Resolved::Float(f64::INFINITY)),
        "-.inf" | "-.Inf" | "-.INF" => return (FLOAT_TAG, Resolved::Float(f64::NEG_INFINITY)),
        _ => {}
    }
    match hint {
        b'.' => {
            if let Some(float) = go_parse_float(input) {
                return (FLOAT_TAG, Resolved::Float(float));
            }
        }
        b'D' | b'S' => {
            if (tag.is_empty() || tag == TIMESTAMP_TAG) && is_timestamp(input) {
                return (TIMESTAMP_TAG, Resolved::Timestamp);
            }
            let plain = input.replace('_', "");
            if let Ok(int) = goflag::parse_int(&plain, 0) {
                return (INT_TAG, Resolved::Int(int));
            }
            if let Ok(uint) = goflag::parse_uint(&plain, 0) {
                return (INT_TAG, Resolved::Uint(uint));
            }
            if is_yaml_style_float(&plain)
                && let Some(float) = go_parse_float(&plain)
            {
                return (FLOAT_TAG, Resolved::Float(float));
            }
            for (prefix, base) in [("0b", 2), ("0o", 8)] {
                if let Some(digits) = plain.strip_prefix(prefix) {
                    if let Ok(int) = goflag::parse_int(digits, base) {
                        return (INT_TAG, Resolved::Int(int));
                    }
                    if let Ok(uint) = goflag::parse_uint(digits, base) {
                        return (INT_TAG, Resolved::Uint(uint));
                    }
                } else if let Some(digits) = plain.strip_prefix('-').and_then(|rest| rest.strip_prefix(prefix))
                    && let Ok(int) = goflag::parse_int(&format!("-{digits}"), base)
                {
                    return (INT_TAG, Resolved::Int(int));
                }
            }
        }
        _ => {}
    }
    (STR_TAG, Resolved::Str(input.to_owned()))
}

/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`
fn is_yaml_style_float(text: &str) -> bool {
    let mut rest = text.as_bytes();
    if let Some(b'+' | b'-') = rest.first() {
        rest = &rest[1..];
    }
    let digits = |bytes: &[u8]| bytes.iter().take_while(|byte| byte.is_ascii_digit()).count();
    let whole = digits(rest);
    rest = &rest[whole..];
    if whole == 0 {
        let Some(b'.') = rest.first() else {
            return false;
        };
        let fraction = digits(&rest[1..]);
        if fraction == 0 {
            return false;
        }
        rest = &rest[1 + fraction..];
    } else if let Some(b'.') = rest.first() {
        rest = &rest[1 + digits(&rest[1..])..];
    }
    if let Some(b'e' | b'E') = rest.first() {
        rest = &rest[1..];
        if let Some(b'+' | b'-') = rest.first() {
            rest = &rest[1..];
        }
        let exponent = digits(rest);
        if exponent == 0 {
            return false;
        }
        rest = &rest[exponent..];
    }
    rest.is_empty()
}

/// Go's `strconv.ParseFloat(text, 64)` for decimal text (the only kind resolution passes it):
/// digits with at most one `.`, an optional exponent, `_` between digits; out of range fails.
fn go_parse_float(text: &str) -> Option<f64> {
    let bytes = text.as_bytes();
    let mut index = 0;
    if let Some(b'+' | b'-') = bytes.first() {
        index = 1;
    }
    if bytes.len() >= index + 2 && bytes[index] == b'0' && bytes[index + 1].eq_ignore_ascii_case(&b'x') {
        return None;
    }
    let mut saw_dot = false;
    let mut saw_digits = false;
    let mut underscores = false;
    while index < bytes.len() {
        match bytes[index] {
            b'_' => underscores = true,
            b'.' if !saw_dot => saw_dot = true,
            b'0'..=b'9' => saw_digits = true,
            _ => break,
        }
        index += 1;
    }
    if !saw_digits {
        return None;
    }
    if index < bytes.len() && bytes[index].eq_ignore_ascii_case(&b'e') {
        index += 1;
        if let Some(b'+' | b'-') = bytes.get(index) {
            index += 1;
        }
        if !bytes.get(index).is_some_and(u8::is_ascii_digit) {
            return None;
        }
        while index < bytes.len() && (bytes[index].is_ascii_digit() || bytes[index] == b'_') {
            underscores |= bytes[index] == b'_';
            index += 1;
        }
    }
    if index != bytes.len() || (underscores && !float_underscores_ok(text)) {
        return None;
    }
    let value: f64 = text.replace('_', "").parse().ok()?;
    value.is_finite().then_some(value)
}

/// Go's `strconv.underscoreOK` for a decimal float: each `_` between two digits.
fn float_underscores_ok(text: &str) -> bool {
    let mut saw = b'^';
    for &byte in text.as_bytes() {
        if byte.is_ascii_digit() {
            saw = b'0';
        } else if byte == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else {
            if saw == b'_' {
                return false;
            }
            saw = b'!';
        }
    }
    saw != b'_'
}

/// yaml.v3's `parseTimestamp`: `YYYY-` then one of Go's layouts `2006-1-2T15:4:5.999999999Z07:00`,
/// the same with `t`, `2006-1-2 15:4:5.999999999` and `2006-1-2`, as `time.Parse` reads them.
fn is_timestamp(text: &str) -> bool {
    let bytes = text.as_bytes();
    let year_digits = bytes.iter().take_while(|byte| byte.is_ascii_digit()).count();
    if year_digits != 4 || bytes.get(4) != Some(&b'-') {
        return false;
    }
    [Layout::DateTimeZone(b'T'), Layout::DateTimeZone(b't'), Layout::DateTime, Layout::Date]
        .into_iter()
        .any(|layout| parses_as(bytes, layout))
}

#[derive(Clone, Copy)]
enum Layout {
    DateTimeZone(u8),
    DateTime,
    Date,
}

fn parses_as(bytes: &[u8], layout: Layout) -> bool {
    let mut rest = bytes;
    // time.Parse's getnum: one or two digits.
    let number = |rest: &mut &[u8]| -> Option<u32> {
        let first = *rest.first().filter(|byte| byte.is_ascii_digit())?;
        match rest.get(1).filter(|byte| byte.is_ascii_digit()) {
            Some(&second) => {
                *rest = &rest[2..];
                Some(u32::from(first - b'0') * 10 + u32::from(second - b'0'))
            }
            None => {
                *rest = &rest[1..];
                Some(u32::from(first - b'0'))
            }
        }
    };
    let literal =
        |rest: &mut &[u8], byte: u8| -> Option<()> { (rest.first() == Some(&byte)).then(|| *rest = &rest[1..]) };
    let result = (|| -> Option<()> {
        let year: u32 = std::str::from_utf8(&rest[..4]).ok()?.parse().ok()?;
        rest = &rest[4..];
        literal(&mut rest, b'-')?;
        let month = number(&mut rest).filter(|month| (1..=12).contains(month))?;
        literal(&mut rest, b'-')?;
        let day = number(&mut rest)?;
        if let Layout::DateTimeZone(_) | Layout::DateTime = layout {
            match layout {
                Layout::DateTimeZone(separator) => literal(&mut rest, separator)?,
                _ => {
                    // A layout space matches one or more spaces.
                    if rest.first() != Some(&b' ') {
                        return None;
                    }
                    while rest.first() == Some(&b' ') {
                        rest = &rest[1..];
                    }
                }
            }
            number(&mut rest).filter(|hour| *hour < 24)?;
            literal(&mut rest, b':')?;
            number(&mut rest).filter(|minute| *minute < 60)?;
            literal(&mut rest, b':')?;
            number(&mut rest).filter(|second| *second < 60)?;
            // Optional fraction: ',' or '.' and any number of digits.
            if rest.len() >= 2 && matches!(rest[0], b'.' | b',') && rest[1].is_ascii_digit() {
                let digits = rest[1..].iter().take_while(|byte| byte.is_ascii_digit()).count();
                rest = &rest[1 + digits..];
            }
            if let Layout::DateTimeZone(_) = layout {
                if rest.first() == Some(&b'Z') {
                    rest = &rest[1..];
                } else {
                    if rest.len() < 6 || rest[3] != b':' || !matches!(rest[0], b'+' | b'-') {
                        return None;
                    }
                    let two = |pair: &[u8]| pair.iter().all(u8::is_ascii_digit).then_some(());
                    two(&rest[1..3])?;
                    two(&rest[4..6])?;
                    let hours = u32::from(rest[1] - b'0') * 10 + u32::from(rest[2] - b'0');
                    let minutes = u32::from(rest[4] - b'0') * 10 + u32::from(rest[5] - b'0');
                    if hours > 24 || minutes > 60 {
                        return None;
                    }
                    rest = &rest[6..];
                }
            }
        }
        if !rest.is_empty() {
            return None;
        }
        let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
        let days = match month {
            2 if leap => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        };
        (1..=days).contains(&day).then_some(())
    })();
    result.is_some()
}

/// Go's `base64.StdEncoding.DecodeString`: padded, `\r` and `\n` ignored.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let symbols: Vec<u8> = text.bytes().filter(|byte| !matches!(byte, b'\r' | b'\n')).collect();
    if !symbols.len().is_multiple_of(4) {
        return None;
    }
    let sextet = |byte: u8| -> Option<u32> {
        Some(u32::from(match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        }))
    };
    let mut out = Vec::with_capacity(symbols.len() / 4 * 3);
    let quanta = symbols.len() / 4;
    for (index, quantum) in symbols.chunks(4).enumerate() {
        let last = index + 1 == quanta;
        let padding = quantum.iter().rev().take_while(|byte| **byte == b'=').count();
        if padding > 2 || (padding > 0 && !last) {
            return None;
        }
        let mut bits = 0;
        for &byte in &quantum[..4 - padding] {
            bits = bits << 6 | sextet(byte)?;
        }
        bits <<= 6 * padding as u32;
        let bytes = [(bits >> 16) as u8, (bits >> 8) as u8, bits as u8];
        out.extend_from_slice(&bytes[..3 - padding]);
    }
    Some(out)
}

// ---------------------------------------------------------------------------------------------
// Decoding: yaml.v3's `decoder` for the kinds the reference struct has.

/// A `failf` inside the decoder: the text after `yaml: `.
type Fatal = String;

struct Decoder<'n> {
    nodes: &'n [Node],
    type_errors: Vec<String>,
    active_aliases: HashSet<usize>,
    decode_count: u64,
    alias_count: u64,
    alias_depth: u32,
    /// Keys already set while merging (`<<`), the string-typed ones: the only ones a struct's
    /// field names can match.
    merged_fields: Option<HashSet<String>>,
}

impl<'n> Decoder<'n> {
    fn new(nodes: &'n [Node]) -> Self {
        Decoder {
            nodes,
            type_errors: Vec::new(),
            active_aliases: HashSet::new(),
            decode_count: 0,
            alias_count: 0,
            alias_depth: 0,
            merged_fields: None,
        }
    }

    fn count_decode(&mut self) -> Result<(), Fatal> {
        self.decode_count += 1;
        if self.alias_depth > 0 {
            self.alias_count += 1;
        }
        if self.alias_count > 100 && self.decode_count > 1000 {
            let ratio = self.alias_count as f64 / self.decode_count as f64;
            let allowed = match self.decode_count {
                0..=400_000 => 0.99,
                4_000_000.. => 0.10,
                count => 0.99 - 0.89 * ((count - 400_000) as f64 / 3_600_000.0),
            };
            if ratio > allowed {
                return Err("document contains excessive aliasing".to_owned());
            }
        }
        Ok(())
    }

    fn unmarshal(&mut self, id: usize, ty: Ty, out: &mut Value) -> Result<bool, Fatal> {
        self.count_decode()?;
        let node = &self.nodes[id];
        match node.kind {
            Kind::Document => {
                if node.content.len() == 1 {
                    self.unmarshal(node.content[0], ty, out)?;
                    return Ok(true);
                }
                Ok(false)
            }
            Kind::Alias => self.alias(id, |decoder, target| decoder.unmarshal(target, ty, out)),
            Kind::Scalar => self.scalar(id, ty, out),
            Kind::Mapping => self.mapping(id, ty, out),
            Kind::Sequence => self.sequence(id, ty, out),
        }
    }

    fn alias<T>(&mut self, id: usize, decode: impl FnOnce(&mut Self, usize) -> Result<T, Fatal>) -> Result<T, Fatal> {
        let node = &self.nodes[id];
        if !self.active_aliases.insert(id) {
            return Err(format!("anchor '{}' value contains itself", node.value));
        }
        let target = node.alias.expect("aliases are resolved while composing");
        self.alias_depth += 1;
        let result = decode(self, target);
        self.alias_depth -= 1;
        self.active_aliases.remove(&id);
        result
    }

    /// yaml.v3's `terror`: the node's own tag wins over the one passed.
    fn type_error(&mut self, id: usize, tag: &str, ty: Ty) {
        let node = &self.nodes[id];
        let tag = if node.tag.is_empty() { tag } else { node.tag.as_str() };
        let value = if tag == SEQ_TAG || tag == MAP_TAG {
            String::new()
        } else if node.value.len() > 10 {
            format!(" `{}...`", String::from_utf8_lossy(&node.value.as_bytes()[..7]))
        } else {
            format!(" `{}`", node.value)
        };
        let message = format!("line {}: cannot unmarshal {}{} into {}", node.line, short_tag(tag), value, ty.go_name());
        self.type_errors.push(message);
    }

    /// The tag and value a scalar node decodes to (`!!binary` already decoded).
    fn scalar_value(&self, id: usize) -> Result<(String, Resolved), Fatal> {
        let node = &self.nodes[id];
        if node.indicated_string() {
            return Ok((STR_TAG.to_owned(), Resolved::Str(node.value.clone())));
        }
        let (tag, resolved) = resolve(&node.tag, &node.value)?;
        if tag == BINARY_TAG {
            let Resolved::Str(text) = resolved else {
                unreachable!("binary values resolve to their text");
            };
            let data = decode_base64(&text).ok_or("!!binary value contains invalid base64 data")?;
            return Ok((tag, Resolved::Str(String::from_utf8_lossy(&data).into_owned())));
        }
        Ok((tag, resolved))
    }

    fn scalar(&mut self, id: usize, ty: Ty, out: &mut Value) -> Result<bool, Fatal> {
        let (tag, resolved) = self.scalar_value(id)?;
        if resolved == Resolved::Null {
            // Go's `null` resets only pointers, maps, slices and interfaces.
            if let Value::List(list) = out {
                list.clear();
                return Ok(true);
            }
            return Ok(false);
        }
        match (ty, out) {
            (Ty::Str, Value::Str(text)) => {
                *text = match resolved {
                    Resolved::Str(decoded) if tag == BINARY_TAG => decoded,
                    _ => self.nodes[id].value.clone(),
                };
                return Ok(true);
            }
            (Ty::Int, Value::Int(int)) => {
                const LIMIT: f64 = 9_223_372_036_854_775_807.0;
                let value = match resolved {
                    Resolved::Int(value) => Some(value),
                    Resolved::Uint(value) => i64::try_from(value).ok(),
                    // Go's int64(float) on amd64: truncation, and i64::MIN where out of range.
                    Resolved::Float(value) if value <= LIMIT => {
                        Some(if value >= LIMIT || value < i64::MIN as f64 { i64::MIN } else { value as i64 })
                    }
                    _ => None,
                };
                if let Some(value) = value {
                    *int = value;
                    return Ok(true);
                }
            }
            _ => {}
        }
        self.type_error(id, &tag, ty);
        Ok(false)
    }

    fn sequence(&mut self, id: usize, ty: Ty, out: &mut Value) -> Result<bool, Fatal> {
        let (Ty::StrList, Value::List(list)) = (ty, &mut *out) else {
            self.type_error(id, SEQ_TAG, ty);
            return Ok(false);
        };
        list.clear();
        for item in self.nodes[id].content.clone() {
            let mut text = Value::Str(String::new());
            if self.unmarshal(item, Ty::Str, &mut text)?
                && let (Value::List(list), Value::Str(text)) = (&mut *out, text)
            {
                list.push(text);
            }
        }
        Ok(true)
    }

    fn mapping(&mut self, id: usize, ty: Ty, out: &mut Value) -> Result<bool, Fatal> {
        let content = &self.nodes[id].content;
        let before = self.type_errors.len();
        for (index, &first) in content.iter().enumerate().step_by(2) {
            for &later in content[index + 2..].iter().step_by(2) {
                let (first, later) = (&self.nodes[first], &self.nodes[later]);
                if first.kind == later.kind && first.value == later.value {
                    let message = format!(
                        "line {}: mapping key {} already defined at line {}",
                        later.line,
                        quote(&later.value),
                        first.line
                    );
                    self.type_errors.push(message);
                }
            }
        }
        if self.type_errors.len() > before {
            return Ok(false);
        }
        match ty {
            Ty::Struct(structure) => self.mapping_struct(id, structure, out),
            _ => {
                self.type_error(id, MAP_TAG, ty);
                Ok(false)
            }
        }
    }

    fn mapping_struct(&mut self, id: usize, structure: &'static StructTy, out: &mut Value) -> Result<bool, Fatal> {
        let Value::Struct(_, fields) = out else {
            unreachable!("struct types decode into struct values");
        };
        let mut merged = self.merged_fields.take();
        let mut done = vec![false; structure.fields.len()];
        let mut merge_node = None;
        let content = self.nodes[id].content.clone();
        let mut name = Value::Str(String::new());
        for pair in content.chunks(2) {
            let (key, value) = (pair[0], pair[1]);
            if self.nodes[key].is_merge() {
                merge_node = Some(value);
                continue;
            }
            if !self.unmarshal(key, Ty::Str, &mut name)? {
                continue;
            }
            let Value::Str(key_name) = &name else { unreachable!("keys decode into strings") };
            let key_name = key_name.clone();
            if let Some(merged) = merged.as_mut()
                && !merged.insert(key_name.clone())
            {
                continue;
            }
            let line = self.nodes[key].line;
            match structure.fields.iter().position(|(field, _)| *field == key_name) {
                Some(index) => {
                    if done[index] {
                        let message =
                            format!("line {line}: field {key_name} already set in type {}", structure.go_name);
                        self.type_errors.push(message);
                        continue;
                    }
                    done[index] = true;
                    self.unmarshal(value, structure.fields[index].1, &mut fields[index])?;
                }
                None => {
                    let message = format!("line {line}: field {key_name} not found in type {}", structure.go_name);
                    self.type_errors.push(message);
                }
            }
        }
        self.merged_fields = merged;
        if let Some(merge_node) = merge_node {
            self.merge(id, merge_node, structure, out)?;
        }
        Ok(true)
    }

    /// yaml.v3's `merge`: the parent's own keys win, then earlier merged mappings.
    fn merge(
        &mut self,
        parent: usize,
        merge: usize,
        structure: &'static StructTy,
        out: &mut Value,
    ) -> Result<(), Fatal> {
        let saved = self.merged_fields.clone();
        if self.merged_fields.is_none() {
            let mut keys = HashSet::new();
            for &key in self.nodes[parent].content.clone().iter().step_by(2) {
                if let Some(text) = self.key_as_interface(key)? {
                    keys.insert(text);
                }
            }
            self.merged_fields = Some(keys);
        }
        let want_map = || "map merge requires map or sequence of maps as the value".to_owned();
        let ty = Ty::Struct(structure);
        let node = &self.nodes[merge];
        match node.kind {
            Kind::Mapping => {
                self.unmarshal(merge, ty, out)?;
            }
            Kind::Alias => {
                if node.alias.is_some_and(|target| self.nodes[target].kind != Kind::Mapping) {
                    return Err(want_map());
                }
                self.unmarshal(merge, ty, out)?;
            }
            Kind::Sequence => {
                for item in node.content.clone() {
                    let item_node = &self.nodes[item];
                    let is_map = match item_node.kind {
                        Kind::Alias => item_node.alias.is_none_or(|target| self.nodes[target].kind == Kind::Mapping),
                        kind => kind == Kind::Mapping,
                    };
                    if !is_map {
                        return Err(want_map());
                    }
                    self.unmarshal(item, ty, out)?;
                }
            }
            _ => return Err(want_map()),
        }
        self.merged_fields = saved;
        Ok(())
    }

    /// A parent key decoded into `interface{}` as `merge` does, when the result is a Go string.
    fn key_as_interface(&mut self, id: usize) -> Result<Option<String>, Fatal> {
        self.count_decode()?;
        match self.nodes[id].kind {
            Kind::Alias => self.alias(id, |decoder, target| decoder.key_as_interface(target)),
            Kind::Scalar => match self.scalar_value(id)? {
                (_, Resolved::Str(text)) => Ok(Some(text)),
                _ => Ok(None),
            },
            Kind::Sequence => {
                for item in self.nodes[id].content.clone() {
                    self.key_as_interface(item)?;
                }
                Ok(None)
            }
            Kind::Mapping | Kind::Document => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(yaml: &str) -> String {
        decode(yaml.as_bytes()).expect_err("should fail")
    }

    #[test]
    fn decodes_the_reference_file() {
        let file = decode(
            b"version: 1\nchroma:\n  server_url: https://c.example.com\n  collection_name: repo\n  tenant: t\n  \
              database: d\nfiles:\n  include_paths: [\"**/*.go\"]\n  exclude_paths: []\nchunking:\n  chunk_size: 512\n  \
              chunk_overlap: 64\nsync:\n  batch_size: 100\n  retry_attempts: 4\nembedding:\n  api_url: https://e\n  \
              model: m\n  api_key: \"\"\n",
        )
        .unwrap();
        assert_eq!(file.version, 1);
        assert_eq!(file.chroma_server_url, "https://c.example.com");
        assert_eq!(file.chroma_collection_name, "repo");
        assert_eq!(file.chroma_tenant, "t");
        assert_eq!(file.chroma_database, "d");
        assert_eq!(file.sync_retry_attempts, 4);
        assert_eq!(file.embedding_api_url, "https://e");
        assert_eq!(file.embedding_model, "m");
        assert_eq!(file.embedding_api_key, "");
    }

    #[test]
    fn empty_input_is_eof() {
        assert_eq!(error(""), "EOF");
        assert_eq!(error("# only a comment\n"), "EOF");
    }

    #[test]
    fn unknown_fields_are_listed_with_go_type_names() {
        assert_eq!(
            error("version: 1\nchroma:\n  bearer_token: x\nbar: 2\n"),
            "yaml: unmarshal errors:\n  line 3: field bearer_token not found in type struct { ServerURL string \
             \"yaml:\\\"server_url\\\"\"; CollectionName string \"yaml:\\\"collection_name\\\"\"; Tenant string \
             \"yaml:\\\"tenant\\\"\"; Database string \"yaml:\\\"database\\\"\" }\n  line 4: field bar not found in \
             type content.yamlConfig"
        );
    }

    #[test]
    fn type_errors_cut_long_values() {
        assert_eq!(
            error("version: abcdefghijkl\nsync:\n  retry_attempts: [1]\n"),
            "yaml: unmarshal errors:\n  line 1: cannot unmarshal !!str `abcdefg...` into int\n  line 3: cannot \
             unmarshal !!seq into int"
        );
    }

    #[test]
    fn duplicate_keys_stop_that_mapping() {
        assert_eq!(
            error("version: 1\nbogus: 1\nversion: 2\n"),
            "yaml: unmarshal errors:\n  line 3: mapping key \"version\" already defined at line 1"
        );
    }

    #[test]
    fn yaml_v3_number_rules() {
        let version = |text: &str| decode(format!("version: {text}\n").as_bytes()).map(|file| file.version);
        assert_eq!(version("1"), Ok(1));
        assert_eq!(version("1.9"), Ok(1));
        assert_eq!(version("0x1"), Ok(1));
        assert_eq!(version("0o1"), Ok(1));
        assert_eq!(version("01"), Ok(1));
        assert_eq!(version("1_0"), Ok(10));
        assert_eq!(version("1e1"), Ok(10));
        assert_eq!(version("!!float 1"), Ok(1));
        assert_eq!(version("~"), Ok(0));
        assert_eq!(version(""), Ok(0));
        assert_eq!(
            version("\"1\"").unwrap_err(),
            "yaml: unmarshal errors:\n  line 1: cannot unmarshal !!str `1` into int"
        );
        assert_eq!(
            version("2001-12-14").unwrap_err(),
            "yaml: unmarshal errors:\n  line 1: cannot unmarshal !!timestamp `2001-12-14` into int"
        );
        assert_eq!(
            version("true").unwrap_err(),
            "yaml: unmarshal errors:\n  line 1: cannot unmarshal !!bool `true` into int"
        );
        assert_eq!(version("!!bool 1").unwrap_err(), "yaml: cannot decode !!int `1` as a !!bool");
    }

    #[test]
    fn strings_keep_their_source_text() {
        let file = decode(b"chroma:\n  tenant: 0x10\n  database: !!binary aGVsbG8=\n").unwrap();
        assert_eq!(file.chroma_tenant, "0x10");
        assert_eq!(file.chroma_database, "hello");
        assert_eq!(error("chroma:\n  tenant: !!binary abc\n"), "yaml: !!binary value contains invalid base64 data");
    }

    #[test]
    fn merge_keys_and_aliases() {
        let file = decode(b"base: &b\n  tenant: t\nchroma:\n  <<: *b\n  database: d\n").unwrap_err();
        assert_eq!(file, "yaml: unmarshal errors:\n  line 1: field base not found in type content.yamlConfig");
        let file = decode(b"version: 1\nchroma: &c {tenant: t}\nembedding:\n  model: *x\n").unwrap_err();
        assert_eq!(file, "yaml: unknown anchor 'x' referenced");
        let file = decode(b"chroma:\n  <<: [{tenant: a}, {tenant: b, database: d}]\n  tenant: own\n").unwrap();
        assert_eq!((file.chroma_tenant.as_str(), file.chroma_database.as_str()), ("own", "d"));
        assert_eq!(error("chroma:\n  <<: 1\n"), "yaml: map merge requires map or sequence of maps as the value");
    }

    #[test]
    fn syntax_errors_use_yaml_v3_lines() {
        assert_eq!(error("version: 1\n  bad: x\n"), "yaml: line 2: mapping values are not allowed in this context");
        assert_eq!(error("a: [1, 2\n"), "yaml: line 1: did not find expected ',' or ']'");
    }

    /// Each expectation is what the Go server prints for the same file.
    #[test]
    fn where_yaml_v3_and_libyaml_scanners_part() {
        // A block scalar ending the file without a line break (libyaml-safer panics on it).
        assert_eq!(decode(b"chroma:\n  tenant: |\n    x").unwrap().chroma_tenant, "x");
        assert_eq!(decode(b"chroma:\n  tenant: >\n    x\n    y").unwrap().chroma_tenant, "x y");
        // A tag a ',' ends in a flow collection (libyaml-safer panics on it too).
        assert_eq!(
            error("version: 1\nchroma: {tenant: !foo, database: d}\n"),
            "yaml: line 1: did not find expected ',' or '}'"
        );
        assert_eq!(
            error("version: 1\nsync:\n  retry_attempts: !a[b] 3\n"),
            "yaml: unmarshal errors:\n  line 3: cannot unmarshal !a[b] `3` into int"
        );
        assert_eq!(error("version: 1\nchroma:\n  tenant: \"a\\/b\"\n"), "yaml: line 3: found unknown escape character");
        assert_eq!(decode(b"chroma:\n  tenant: \"it\\'s\"\n").unwrap().chroma_tenant, "it's");
        assert_eq!(
            error("version: 1\nembedding: {api_url: https://e?x=1, model: m}\n"),
            "yaml: line 1: did not find expected ',' or '}'"
        );
        assert_eq!(
            error("version: 1\nembedding: {model:}\n"),
            "yaml: unmarshal errors:\n  line 2: field model: not found in type struct { APIURL string \
             \"yaml:\\\"api_url\\\"\"; Model string \"yaml:\\\"model\\\"\"; APIKey string \"yaml:\\\"api_key\\\"\" }"
        );
        assert_eq!(error("%YAML 1.2\n---\nversion: 1\n"), "yaml: found incompatible YAML document");
        // yaml.v3 scans two tokens ahead, so it meets this scanner error before the parser error.
        assert_eq!(error("}version: 1\n"), "yaml: mapping values are not allowed in this context");
    }

    #[test]
    fn reader_errors_in_the_first_chunk_win() {
        assert_eq!(error("version: 1\n\u{1}\n"), "yaml: control characters are not allowed");
        assert_eq!(decode(b"version: [\xff").unwrap_err(), "yaml: invalid leading UTF-8 octet");
        assert_eq!(decode(b"a: \xc3").unwrap_err(), "yaml: incomplete UTF-8 octet sequence");
    }

    #[test]
    fn timestamps() {
        for text in [
            "2001-12-14",
            "2001-1-2",
            "2001-12-14T21:59:43Z",
            "2001-12-14t21:59:43.10+05:00",
            "2001-12-14 21:59:43.10",
            "2000-02-29",
        ] {
            assert!(is_timestamp(text), "{text}");
        }
        for text in [
            "2001-13-01",
            "2001-02-29",
            "2001-12-14 21:59:43.10 -5",
            "2001-12-14T21:59:43",
            "20011-12-14",
            "2001-12-14x",
        ] {
            assert!(!is_timestamp(text), "{text}");
        }
    }
}
