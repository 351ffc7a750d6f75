//! The settings checks both rerankers share, and the error they give the operator.

/// Settings a reranker refuses, worded for the operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SettingsError(pub String);

/// A setting that must lie in `[0, 1]`.
pub(crate) fn unit_interval(key: &str, value: f64) -> Result<(), SettingsError> {
    if (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(SettingsError(format!("{key} must be between 0 and 1, not {value}")))
    }
}

/// A setting that must be a finite number `> 0` (`>= 0` when `zero_ok`).
pub(crate) fn positive(key: &str, value: f64, zero_ok: bool) -> Result<(), SettingsError> {
    if value.is_finite() && (value > 0.0 || (zero_ok && value == 0.0)) {
        Ok(())
    } else if zero_ok {
        Err(SettingsError(format!("{key} must be a non-negative number, not {value}")))
    } else {
        Err(SettingsError(format!("{key} must be a positive number, not {value}")))
    }
}
