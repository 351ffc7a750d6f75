//! Reading backend responses with serde_json, leniently where real servers
//! need it.
//!
//! Request bodies are plain `serde_json`: backends read them as JSON, and
//! the bytes of their escaping or number spelling carry nothing. Responses
//! are read as the reference reads them where a real server relies on it:
//! Chroma answers `null` for lists and values it has none of
//! ([`null_as_default`]), and invalid UTF-8 inside a string is replaced
//! instead of failing the whole answer.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};

/// Decodes a 2xx body; a top-level `null` is `T::default()`. The error is
/// serde_json's, with its line and column.
pub fn decode<T: DeserializeOwned + Default>(data: &[u8]) -> Result<T, String> {
    let parsed = match std::str::from_utf8(data) {
        Ok(text) => serde_json::from_str::<Option<T>>(text),
        Err(_) => serde_json::from_str::<Option<T>>(&String::from_utf8_lossy(data)),
    };
    parsed.map(Option::unwrap_or_default).map_err(|e| e.to_string())
}

/// Field helper: a JSON `null` (or an absent field, with `#[serde(default)]`)
/// reads as `T::default()`.
pub fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Field helper for an embedding: `null` is empty, and each number is
/// parsed from its text straight to `f32` (correctly rounded; going through
/// `f64` first can land one unit off, and the vector is sent on to the store
/// as it was read). A `null` element or a number outside the `f32` range is
/// an error.
pub fn f32_list<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<f32>, D::Error> {
    use serde::de::Error as _;
    let raw = Option::<Vec<Box<serde_json::value::RawValue>>>::deserialize(deserializer)?.unwrap_or_default();
    raw.iter()
        .map(|item| match item.get().parse::<f32>() {
            Ok(value) if value.is_finite() => Ok(value),
            _ => Err(D::Error::custom(format!("embedding value {} is not a finite 32-bit number", item.get()))),
        })
        .collect()
}

/// The first value that JSON cannot carry (NaN or an infinity), which
/// serde_json would silently write as `null`.
pub fn non_finite<I: IntoIterator<Item = f32>>(values: I) -> Option<String> {
    values.into_iter().find(|value| !value.is_finite()).map(|value| format!("non-finite value {value} in a vector"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, serde::Deserialize, PartialEq)]
    struct Body {
        #[serde(default, deserialize_with = "null_as_default")]
        ids: Vec<String>,
        #[serde(default, deserialize_with = "f32_list")]
        embedding: Vec<f32>,
    }

    #[test]
    fn nulls_read_as_defaults() {
        assert_eq!(decode::<Body>(b"null").unwrap(), Body::default());
        assert_eq!(decode::<Body>(br#"{"ids":null,"embedding":null}"#).unwrap(), Body::default());
        assert_eq!(decode::<Body>(br#"{"ids":["a"]}"#).unwrap().ids, ["a"]);
    }

    #[test]
    fn invalid_utf8_in_a_string_is_replaced() {
        assert_eq!(decode::<Body>(b"{\"ids\":[\"a\xffb\"]}").unwrap().ids, ["a\u{FFFD}b"]);
    }

    #[test]
    fn embeddings_are_read_as_f32_from_their_text() {
        let body: Body = decode(br#"{"embedding":[0.1,-2.5e-3,1]}"#).unwrap();
        assert_eq!(body.embedding, [0.1f32, -2.5e-3, 1.0]);
        assert!(decode::<Body>(br#"{"embedding":[1e40]}"#).unwrap_err().contains("1e40"));
        assert!(decode::<Body>(br#"{"embedding":["x"]}"#).is_err());
    }

    #[test]
    fn syntax_errors_name_line_and_column() {
        assert_eq!(decode::<Body>(b"<html>").unwrap_err(), "expected value at line 1 column 1");
        assert_eq!(decode::<Body>(b"").unwrap_err(), "EOF while parsing a value at line 1 column 0");
    }

    #[test]
    fn non_finite_values_are_found() {
        assert_eq!(non_finite([1.0, f32::NAN]).as_deref(), Some("non-finite value NaN in a vector"));
        assert_eq!(non_finite([1.0, 2.0]), None);
    }
}
