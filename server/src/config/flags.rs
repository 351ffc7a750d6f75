//! The drop-in's command line: the reference server's flags, parsed by clap.
//!
//! Scripts written for `mcp-chromadb-repo-search` spell its flags the way Go's `flag` package
//! reads them: one dash or two (`-tenant t`, `--tenant t`), `-flag=value`, a boolean alone
//! (`--debug`) or with `=` (`-debug=false`) but never with the next argument, and parsing that
//! stops at the first argument that is not a flag, or after `--`. [`clap_spellings`] rewrites
//! those spellings into clap's (two dashes, a boolean's value only after `=`, everything from the
//! first non-flag after a `--`), and clap does the rest: values, the last of repeated flags,
//! errors with exit status 2, and `--help`.

use clap::{CommandFactory, Parser};

/// The flags of the reference server. A field is `Some` only when its flag was given, even
/// with an empty value: `--tenant ""` overrides the environment, an absent flag does not.
#[derive(Debug, Clone, Default, PartialEq, Eq, Parser)]
#[command(
    name = "repo-retriever",
    about = "Repository search for AI agents over MCP.",
    disable_version_flag = true,
    disable_help_flag = true,
    args_override_self = true,
    next_help_heading = "Drop-in flags (mcp-chromadb-repo-search)"
)]
pub struct DropInFlags {
    /// full HTTP(S) Chroma server origin
    #[arg(long, value_name = "URL", allow_hyphen_values = true)]
    pub server_url: Option<String>,
    /// Chroma collection containing indexed repository content
    #[arg(long, value_name = "NAME", allow_hyphen_values = true)]
    pub collection_name: Option<String>,
    /// optional Chroma bearer token
    #[arg(long, value_name = "TOKEN", allow_hyphen_values = true)]
    pub bearer_token: Option<String>,
    /// Chroma tenant
    #[arg(long, value_name = "TENANT", allow_hyphen_values = true)]
    pub tenant: Option<String>,
    /// Chroma database
    #[arg(long, value_name = "DATABASE", allow_hyphen_values = true)]
    pub database: Option<String>,
    /// path to a chromadb-repo-indexer-compatible YAML configuration
    #[arg(long, value_name = "FILE", allow_hyphen_values = true)]
    pub config: Option<String>,
    /// attempts for transient Chroma and embedding failures
    #[arg(long, value_name = "INT", value_parser = parse_int, allow_hyphen_values = true)]
    pub retry_attempts: Option<i64>,
    /// OpenAI-compatible embeddings API origin
    #[arg(long, value_name = "URL", allow_hyphen_values = true)]
    pub embedding_api_url: Option<String>,
    /// embeddings model name
    #[arg(long, value_name = "MODEL", allow_hyphen_values = true)]
    pub embedding_model: Option<String>,
    /// optional embeddings API key
    #[arg(long, value_name = "KEY", allow_hyphen_values = true)]
    pub embedding_api_key: Option<String>,
    /// OpenAI-compatible reranking API origin; enables reranking with --rerank-model
    #[arg(long, value_name = "URL", allow_hyphen_values = true)]
    pub rerank_api_url: Option<String>,
    /// reranking model name; enables reranking with --rerank-api-url
    #[arg(long, value_name = "MODEL", allow_hyphen_values = true)]
    pub rerank_model: Option<String>,
    /// optional reranking API key
    #[arg(long, value_name = "KEY", allow_hyphen_values = true)]
    pub rerank_api_key: Option<String>,
    /// number of Chroma candidates per requested result when reranking (minimum 2)
    #[arg(long, value_name = "INT", value_parser = parse_int, allow_hyphen_values = true)]
    pub rerank_candidate_multiplier: Option<i64>,
    /// maximum candidates sent to the reranker
    #[arg(long, value_name = "INT", value_parser = parse_int, allow_hyphen_values = true)]
    pub rerank_max_candidates: Option<i64>,
    /// maximum UTF-8 bytes sent for one reranking document, including its source header
    #[arg(long, value_name = "INT", value_parser = parse_int, allow_hyphen_values = true)]
    pub rerank_max_document_bytes: Option<i64>,
    /// maximum UTF-8 bytes in the reranking request documents
    #[arg(long, value_name = "INT", value_parser = parse_int, allow_hyphen_values = true)]
    pub rerank_max_request_bytes: Option<i64>,
    /// run Streamable HTTP on an address or port (defaults to stdio)
    #[arg(long, value_name = "ADDR", allow_hyphen_values = true)]
    pub http: Option<String>,
    /// enable debug logging to stderr
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = parse_bool)]
    pub debug: Option<bool>,
    /// timeout for each backend request, e.g. 120s, 1m30s, 500ms
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_nanos, allow_hyphen_values = true)]
    pub request_timeout: Option<i64>,
    /// print version information
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = parse_bool)]
    pub version: Option<bool>,
    /// Print help (this text)
    #[arg(short, long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
    /// Arguments from the first one that is not a flag on (always after a `--`): ignored, as the
    /// reference ignores them.
    #[arg(hide = true)]
    pub rest: Vec<String>,
}

/// What the command line asks for, before any configuration is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    Flags(Box<DropInFlags>),
    /// `-h`, `-help`, `--help`: print [`help`] and exit 0.
    Help,
}

/// Flags that take no separate value: `-debug false` is `-debug` followed by a non-flag.
const BOOLEAN_FLAGS: [&str; 2] = ["debug", "version"];

/// Parses `args` (without the program name). `Err` is clap's message for a refused command
/// line, to print to stderr before exiting with status 2.
pub fn parse(args: &[String]) -> Result<Parsed, String> {
    let argv = std::iter::once("repo-retriever".to_owned()).chain(clap_spellings(args));
    match DropInFlags::try_parse_from(argv) {
        Ok(flags) => Ok(Parsed::Flags(Box::new(flags))),
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => Ok(Parsed::Help),
        Err(e) => Err(e.render().to_string()),
    }
}

/// The Go spellings of `args` in clap's syntax (see the module docs).
pub fn clap_spellings(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len() + 1);
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--" || arg == "-" || !arg.starts_with('-') {
            // Go stops here; what follows is not read, whatever it looks like.
            out.push("--".to_owned());
            if arg != "--" {
                out.push(arg.clone());
            }
            break;
        }
        let body = arg.strip_prefix("--").unwrap_or(&arg[1..]);
        if body.starts_with('-') {
            // `---flag` is not a flag in either syntax: clap refuses it.
            out.push(arg.clone());
            continue;
        }
        let (name, value) = match body.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (body, None),
        };
        if name == "h" || name == "help" {
            out.push("--help".to_owned());
            continue;
        }
        out.push(format!("--{body}"));
        if value.is_none()
            && !BOOLEAN_FLAGS.contains(&name)
            && let Some(next) = rest.next()
        {
            // The flag's value, taken as it is (`--tenant -x` sets the tenant to `-x`).
            out.push(next.clone());
        }
    }
    out.extend(rest.cloned());
    out
}

/// The text of `repo-retriever --help`: the subcommands of `cli`, one line each, then the drop-in
/// flags.
pub fn help(cli: &clap::Command) -> String {
    let commands: Vec<String> = cli
        .get_subcommands()
        .filter(|command| command.get_name() != "help")
        .map(|command| {
            let about = command.get_about().map(|about| about.to_string()).unwrap_or_default();
            format!("  {:<9}{about}", command.get_name())
        })
        .collect();
    let commands = format!(
        "Commands:\n{}\n\nRun `repo-retriever <COMMAND> --help` for the options of one.\n\n\
         Without a command, repo-retriever is a drop-in for mcp-chromadb-repo-search: it serves the\n\
         Chroma collection that the flags below, their CHROMA_REPO_SEARCH_* variables or a --config\n\
         YAML file describe. Go's spellings work as well: -flag value, -flag=value, -debug=false.",
        commands.join("\n")
    );
    DropInFlags::command()
        .override_usage("repo-retriever <COMMAND> [OPTIONS]\n       repo-retriever [DROP-IN FLAGS]")
        .help_template("{about-with-newline}\n{usage-heading} {usage}\n\n{before-help}\n{all-args}\n")
        .before_help(commands)
        .render_help()
        .to_string()
}

/// The booleans the reference takes, in flags and in `MCP_CHROMADB_REPO_SEARCH_DEBUG`.
pub fn parse_bool(text: &str) -> Result<bool, String> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err("expected true or false (also 1, t, T, TRUE, True, 0, f, F, FALSE, False)".to_owned()),
    }
}

/// An integer flag: decimal, or with a `0x`, `0o` or `0b` prefix, which the reference's flags
/// also take.
fn parse_int(text: &str) -> Result<i64, String> {
    let (sign, unsigned) = match text.strip_prefix('-') {
        Some(unsigned) => ("-", unsigned),
        None => ("", text.strip_prefix('+').unwrap_or(text)),
    };
    let (radix, digits) = match unsigned.get(..2) {
        Some("0x" | "0X") => (16, &unsigned[2..]),
        Some("0o" | "0O") => (8, &unsigned[2..]),
        Some("0b" | "0B") => (2, &unsigned[2..]),
        _ => (10, unsigned),
    };
    if digits.starts_with(['+', '-']) {
        return Err("invalid digit found in string".to_owned());
    }
    i64::from_str_radix(&format!("{sign}{digits}"), radix).map_err(|e| e.to_string())
}

/// A duration as operators write it (`120s`, `1m30s`, `500ms`, `1.5s`, `2h`), read by
/// `humantime`, in nanoseconds. A leading `-` makes it negative, which validation then refuses
/// as not positive rather than as not a duration, as the reference does.
pub fn parse_duration_nanos(text: &str) -> Result<i64, String> {
    let (negative, magnitude) = match text.strip_prefix('-') {
        Some(magnitude) => (true, magnitude),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let duration = humantime::parse_duration(magnitude).map_err(|e| e.to_string())?;
    let nanos = i64::try_from(duration.as_nanos()).map_err(|_| "duration out of range".to_owned())?;
    Ok(if negative { -nanos } else { nanos })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spell(args: &[&str]) -> Vec<String> {
        clap_spellings(&args.iter().map(|arg| (*arg).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn go_spellings_become_clap_spellings() {
        assert_eq!(
            spell(&["-tenant", "t", "--database=d", "-debug", "-version=false"]),
            ["--tenant", "t", "--database=d", "--debug", "--version=false"]
        );
        // A value is passed as it is, even when it looks like a flag.
        assert_eq!(spell(&["-tenant", "-x", "-retry-attempts", "-1"]), ["--tenant", "-x", "--retry-attempts", "-1"]);
        // Parsing stops at the first non-flag (a boolean never takes the next argument) and at `--`.
        assert_eq!(spell(&["-debug", "false", "-tenant", "t"]), ["--debug", "--", "false", "-tenant", "t"]);
        assert_eq!(spell(&["--", "-tenant", "t"]), ["--", "-tenant", "t"]);
        assert_eq!(spell(&["-h"]), ["--help"]);
        assert_eq!(spell(&["--h"]), ["--help"]);
        assert_eq!(spell(&["-help"]), ["--help"]);
        assert_eq!(spell(&["---tenant", "t"]), ["---tenant", "--", "t"]);
    }

    #[test]
    fn integers_and_durations() {
        assert_eq!(parse_int("42"), Ok(42));
        assert_eq!(parse_int("+7"), Ok(7));
        assert_eq!(parse_int("-1"), Ok(-1));
        assert_eq!(parse_int("0x40"), Ok(64));
        assert_eq!(parse_int("-0b11"), Ok(-3));
        assert!(parse_int("0x-1").is_err());
        assert!(parse_int("1e3").is_err());
        assert!(parse_int("18446744073709551616").is_err());
        for (text, nanos) in [
            ("120s", 120_000_000_000),
            ("1m30s", 90_000_000_000),
            ("500ms", 500_000_000),
            ("2h", 7_200_000_000_000),
            ("1.5s", 1_500_000_000),
            ("-5m", -300_000_000_000),
            ("0", 0),
        ] {
            assert_eq!(parse_duration_nanos(text), Ok(nanos), "{text}");
        }
        for bad in ["90", "abc", "1.5", "", "-"] {
            assert!(parse_duration_nanos(bad).is_err(), "{bad}");
        }
    }
}
