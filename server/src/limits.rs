//! The `search` caps an operator sets: the query cap in bytes, from
//! `REPO_RETRIEVER_MAX_QUERY_BYTES` (the drop-in) or `serve
//! --max-query-bytes`, which reads the same variable.

use rr_core::ArgLimits;

/// The environment variable that sets the `search` query cap in bytes.
pub const ENV_MAX_QUERY_BYTES: &str = "REPO_RETRIEVER_MAX_QUERY_BYTES";

/// The `search` caps, with the query cap from [`ENV_MAX_QUERY_BYTES`] when
/// it is set (a positive integer, in bytes).
pub fn search_limits(env: &dyn Fn(&str) -> Option<String>) -> Result<ArgLimits, String> {
    let mut limits = ArgLimits::default();
    if let Some(value) = env(ENV_MAX_QUERY_BYTES).filter(|v| !v.is_empty()) {
        limits.max_query_bytes = value
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("{ENV_MAX_QUERY_BYTES} must be a positive integer"))?;
    }
    Ok(limits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_cap_is_read_from_the_environment() {
        let none = |_: &str| None;
        assert_eq!(search_limits(&none).unwrap(), ArgLimits::default());
        let set = |_: &str| Some("1024".to_owned());
        assert_eq!(search_limits(&set).unwrap().max_query_bytes, 1024);
        let bad = |_: &str| Some("-1".to_owned());
        assert_eq!(search_limits(&bad).unwrap_err(), "REPO_RETRIEVER_MAX_QUERY_BYTES must be a positive integer");
        let zero = |_: &str| Some("0".to_owned());
        assert!(search_limits(&zero).is_err());
    }
}
