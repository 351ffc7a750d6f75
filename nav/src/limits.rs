//! Every cap on what one tool call may ask for, in one place.
//!
//! A call is bounded before any work starts: each string argument has a
//! length cap (checked without quoting the input back), and the scans that
//! remain (glob and pattern matching in `find_patterns`) share one time
//! budget. The `search` tool's caps live in [`rr_core::ArgLimits`] because the
//! pipeline's validation owns them; they come after the reference's checks,
//! so the drop-in keeps its messages for every call the reference accepts.
//!
//! | argument | tool | cap |
//! |---|---|---|
//! | `query` | `search` | 4 MiB ([`rr_core::request::MAX_ARGUMENT_BYTES`]; `REPO_RETRIEVER_MAX_QUERY_BYTES`, `serve --max-query-bytes`) |
//! | `source` | `search` | 4 MiB |
//! | `path` | `search` | cost 340,000 ([`rr_core::filter::MAX_PATH_COST`]) |
//! | `query` | `search_code` | 512 bytes (seed 003) |
//! | `repository` | every navigation tool | [`MAX_REPOSITORY_CHARS`] |
//! | `path`, `path_prefix` | `get_file`, `list_definitions` | [`MAX_PATH_CHARS`] |
//! | `name`, `language` | `list_definitions`, `search_code` | [`MAX_NAME_CHARS`] |
//! | `pattern` | `find_patterns` | 200 characters (seed 003) |
//! | `path_glob` | `find_patterns` | [`MAX_GLOB_CHARS`], matched inside the call's time budget |
//! | `url` | `add_repository` | [`MAX_URL_CHARS`] |
//! | `description` | `add_repository` | [`MAX_DESCRIPTION_CHARS`] |
//! | `uri` | `resources/read` | [`MAX_URL_CHARS`] |

/// Characters of a `repository` argument: a name, `<host>/<path>` or a URL.
pub const MAX_REPOSITORY_CHARS: usize = 2048;
/// Characters of a repository-relative path or path prefix (Linux `PATH_MAX`).
pub const MAX_PATH_CHARS: usize = 4096;
/// Characters of a definition name or language label filter.
pub const MAX_NAME_CHARS: usize = 512;
/// Characters of a `find_patterns` path glob.
pub const MAX_GLOB_CHARS: usize = 1024;
/// Characters of a repository URL or resource URI.
pub const MAX_URL_CHARS: usize = 2048;
/// Characters of an `add_repository` description.
pub const MAX_DESCRIPTION_CHARS: usize = 2000;

/// How an error message quotes an argument (cut after [`SHOWN_CHARS`]).
pub use rr_core::{SHOWN_CHARS, shown};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_shown_as_a_prefix() {
        assert_eq!(shown("short"), "short");
        let long = "é".repeat(5000);
        let cut = shown(&long);
        assert_eq!(cut.chars().count(), SHOWN_CHARS + 1);
        assert!(cut.ends_with('…'));
    }
}
