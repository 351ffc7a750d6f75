//! JSON as Go's `encoding/json` writes and reads it.
//!
//! The reference server marshals request bodies and unmarshals responses with
//! Go's standard library, and both leave visible traces: the bytes a backend
//! receives (`<` sent as `\u003c`, `1` instead of serde's `1.0`) and the text of
//! a decode error that reaches the client (`invalid character '<' looking for
//! beginning of value`). This module reproduces both, so a backend cannot tell
//! the two servers apart and neither can a client reading an error.
//!
//! Reading is also as lenient as Go's: a JSON `null` leaves a value at its zero
//! value instead of failing ([`null_as_default`]), invalid UTF-8 inside strings
//! becomes U+FFFD, and numbers are parsed from their text straight into the
//! target width ([`f32_list`], [`f64_or_zero`]) as `strconv.ParseFloat` does,
//! rather than through serde's `f64` detour.

use std::io;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::ser::Formatter;
use serde_json::value::RawValue;

/// Go's maximum nesting depth for `json.Unmarshal`.
const MAX_NESTING_DEPTH: usize = 10_000;

/// Serializes `value` exactly as Go's `json.Marshal` would.
///
/// Non-finite floats are written as `null` by serde before they reach the
/// formatter; callers that can hold them must reject them first (Go refuses
/// to marshal them), see [`unsupported_float`].
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(256);
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, GoFormatter);
    value.serialize(&mut serializer)?;
    Ok(out)
}

/// Go's `json: unsupported value: <v>` text for a float it refuses to marshal,
/// or `None` when the value is finite.
pub fn unsupported_float(value: f64) -> Option<String> {
    if value.is_nan() {
        Some("json: unsupported value: NaN".to_owned())
    } else if value.is_infinite() {
        Some(format!("json: unsupported value: {}Inf", if value > 0.0 { "+" } else { "-" }))
    } else {
        None
    }
}

struct GoFormatter;

impl Formatter for GoFormatter {
    fn write_f32<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        writer.write_all(format_f32(value).as_bytes())
    }

    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        writer.write_all(format_f64(value).as_bytes())
    }

    // Go escapes these even outside HTML so a body can be pasted into a page.
    fn write_string_fragment<W: ?Sized + io::Write>(&mut self, writer: &mut W, fragment: &str) -> io::Result<()> {
        let bytes = fragment.as_bytes();
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            let escaped = match c {
                '<' => "\\u003c",
                '>' => "\\u003e",
                '&' => "\\u0026",
                '\u{2028}' => "\\u2028",
                '\u{2029}' => "\\u2029",
                _ => continue,
            };
            writer.write_all(&bytes[start..i])?;
            writer.write_all(escaped.as_bytes())?;
            start = i + c.len_utf8();
        }
        writer.write_all(&bytes[start..])
    }
}

/// A finite `f32` as Go's encoder writes a `float32`: the shortest text that
/// reads back to the same value, in exponent form only below 1e-6 or from
/// 1e21 up, with a signed, unpadded exponent.
pub fn format_f32(value: f32) -> String {
    let abs = value.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) { exponent_form(format!("{value:e}")) } else { format!("{value}") }
}

/// A finite `f64` as Go's encoder writes a `float64` (see [`format_f32`]).
pub fn format_f64(value: f64) -> String {
    let abs = value.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) { exponent_form(format!("{value:e}")) } else { format!("{value}") }
}

/// Rust writes `1e21` and `1.5e-7`; Go writes `1e+21` and `1.5e-7`.
fn exponent_form(rust: String) -> String {
    match rust.split_once('e') {
        Some((mantissa, exponent)) if !exponent.starts_with('-') => format!("{mantissa}e+{exponent}"),
        _ => rust,
    }
}

/// Decodes a response body as Go's `json.Unmarshal` into a zero-valued target
/// would: syntax is checked first with Go's messages, a top-level `null`
/// leaves the target at its default, and invalid UTF-8 inside strings becomes
/// U+FFFD instead of an error.
pub fn decode<T: DeserializeOwned + Default>(data: &[u8]) -> Result<T, String> {
    // Well-formed UTF-8 JSON that serde accepts is also valid for Go, so the
    // Go scanner (a second pass over every byte) only runs to word a failure.
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(parsed) = serde_json::from_str::<Option<T>>(text)
    {
        return Ok(parsed.unwrap_or_default());
    }
    check_syntax(data)?;
    let parsed = match std::str::from_utf8(data) {
        Ok(text) => serde_json::from_str::<Option<T>>(text),
        // Syntax is valid, so every invalid byte sits inside a string literal.
        Err(_) => serde_json::from_str::<Option<T>>(&lossy_per_byte(data)),
    };
    parsed.map(Option::unwrap_or_default).map_err(|e| e.to_string())
}

/// `bytes` as text with every byte that is not part of a valid UTF-8 sequence
/// replaced by its own U+FFFD, as Go does when it writes or reads a string
/// (Rust's `from_utf8_lossy` would merge a broken sequence into one).
pub fn lossy_per_byte(mut bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    loop {
        match std::str::from_utf8(bytes) {
            Ok(valid) => {
                out.push_str(valid);
                return out;
            }
            Err(e) => {
                let (valid, rest) = bytes.split_at(e.valid_up_to());
                // `valid_up_to` guarantees this prefix is UTF-8, so nothing is lost here.
                out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                out.push('\u{FFFD}');
                bytes = &rest[1..];
            }
        }
    }
}

/// Field helper: a JSON `null` (or an absent field, with `#[serde(default)]`)
/// reads as `T::default()`, as Go leaves a field untouched on `null`.
pub fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Field helper for a Go `[]float32`: `null` is empty, a `null` element is 0,
/// and each number is parsed from its text straight to `f32` (correctly
/// rounded, as `strconv.ParseFloat(s, 32)`); a number outside the `f32` range
/// is an error, as in Go.
pub fn f32_list<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<f32>, D::Error> {
    let raw = Option::<Vec<Option<Box<RawValue>>>>::deserialize(deserializer)?.unwrap_or_default();
    raw.iter()
        .map(|item| match item {
            None => Ok(0.0),
            Some(raw) => parse_number::<f32, D::Error>(raw.get(), "float32"),
        })
        .collect()
}

/// Field helper for a Go `float64`: `null` is 0, the number is parsed from its
/// text (correctly rounded, unlike serde_json's default fast path).
pub fn f64_or_zero<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    match Option::<Box<RawValue>>::deserialize(deserializer)? {
        None => Ok(0.0),
        Some(raw) => parse_number::<f64, D::Error>(raw.get(), "float64"),
    }
}

fn parse_number<F, E>(text: &str, go_type: &str) -> Result<F, E>
where
    F: std::str::FromStr + Into<f64> + Copy,
    E: serde::de::Error,
{
    let kind = match text.as_bytes().first() {
        Some(b'"') => "string",
        Some(b'{') => "object",
        Some(b'[') => "array",
        Some(b't' | b'f') => "bool",
        _ => "number",
    };
    let parsed = if kind == "number" { text.parse::<F>().ok() } else { None };
    match parsed {
        Some(value) if value.into().is_finite() => Ok(value),
        Some(_) => Err(E::custom(format!("cannot unmarshal number {text} into a value of type {go_type}"))),
        None => Err(E::custom(format!("cannot unmarshal {kind} into a value of type {go_type}"))),
    }
}

/// Validates `data` as Go's `json.Unmarshal` does before decoding anything,
/// returning Go's `SyntaxError` text on failure.
pub fn check_syntax(data: &[u8]) -> Result<(), String> {
    let mut scanner = Scanner { step: Step::BeginValue, stack: Vec::new(), end_top: false };
    for &c in data {
        scanner.step(c)?;
    }
    // Go feeds one space at the end so that a number can finish.
    if !scanner.end_top {
        scanner.step(b' ')?;
    }
    if scanner.end_top { Ok(()) } else { Err("unexpected end of JSON input".to_owned()) }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Parse {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

#[derive(Clone, Copy)]
enum Step {
    BeginValue,
    BeginValueOrEmpty,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    /// After `\u` and this many hex digits.
    InStringEscU(u8),
    Neg,
    One,
    Zero,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    /// Inside `true`, `false` or `null`, expecting `word[next]`.
    Literal {
        word: &'static str,
        next: usize,
    },
}

struct Scanner {
    step: Step,
    stack: Vec<Parse>,
    end_top: bool,
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn syntax_error(c: u8, context: &str) -> Result<(), String> {
    Err(format!("invalid character {} {context}", quote_char(c)))
}

impl Scanner {
    fn push(&mut self, c: u8, state: Parse) -> Result<(), String> {
        self.stack.push(state);
        if self.stack.len() > MAX_NESTING_DEPTH { syntax_error(c, "exceeded max depth") } else { Ok(()) }
    }

    fn pop(&mut self) {
        self.stack.pop();
        if self.stack.is_empty() {
            self.step = Step::EndTop;
            self.end_top = true;
        } else {
            self.step = Step::EndValue;
        }
    }

    fn step(&mut self, c: u8) -> Result<(), String> {
        match self.step {
            Step::BeginValueOrEmpty => {
                if is_space(c) {
                    return Ok(());
                }
                if c == b']' {
                    return self.end_value(c);
                }
                self.begin_value(c)
            }
            Step::BeginValue => self.begin_value(c),
            Step::BeginStringOrEmpty => {
                if is_space(c) {
                    return Ok(());
                }
                if c == b'}' {
                    if let Some(top) = self.stack.last_mut() {
                        *top = Parse::ObjectValue;
                    }
                    return self.end_value(c);
                }
                self.begin_string(c)
            }
            Step::BeginString => self.begin_string(c),
            Step::EndValue => self.end_value(c),
            Step::EndTop => {
                if is_space(c) {
                    Ok(())
                } else {
                    syntax_error(c, "after top-level value")
                }
            }
            Step::InString => {
                match c {
                    b'"' => self.step = Step::EndValue,
                    b'\\' => self.step = Step::InStringEsc,
                    c if c < 0x20 => return syntax_error(c, "in string literal"),
                    _ => {}
                }
                Ok(())
            }
            Step::InStringEsc => match c {
                b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => {
                    self.step = Step::InString;
                    Ok(())
                }
                b'u' => {
                    self.step = Step::InStringEscU(0);
                    Ok(())
                }
                _ => syntax_error(c, "in string escape code"),
            },
            Step::InStringEscU(digits) => {
                if c.is_ascii_hexdigit() {
                    self.step = if digits == 3 { Step::InString } else { Step::InStringEscU(digits + 1) };
                    Ok(())
                } else {
                    syntax_error(c, "in \\u hexadecimal character escape")
                }
            }
            Step::Neg => match c {
                b'0' => {
                    self.step = Step::Zero;
                    Ok(())
                }
                b'1'..=b'9' => {
                    self.step = Step::One;
                    Ok(())
                }
                _ => syntax_error(c, "in numeric literal"),
            },
            Step::One => {
                if c.is_ascii_digit() {
                    return Ok(());
                }
                self.zero(c)
            }
            Step::Zero => self.zero(c),
            Step::Dot => {
                if c.is_ascii_digit() {
                    self.step = Step::Dot0;
                    Ok(())
                } else {
                    syntax_error(c, "after decimal point in numeric literal")
                }
            }
            Step::Dot0 => {
                if c.is_ascii_digit() {
                    Ok(())
                } else if c == b'e' || c == b'E' {
                    self.step = Step::E;
                    Ok(())
                } else {
                    self.end_value(c)
                }
            }
            Step::E => {
                if c == b'+' || c == b'-' {
                    self.step = Step::ESign;
                    return Ok(());
                }
                self.e_sign(c)
            }
            Step::ESign => self.e_sign(c),
            Step::E0 => {
                if c.is_ascii_digit() {
                    Ok(())
                } else {
                    self.end_value(c)
                }
            }
            Step::Literal { word, next } => {
                let expected = word.as_bytes()[next];
                if c != expected {
                    return syntax_error(c, &format!("in literal {word} (expecting '{}')", expected as char));
                }
                self.step =
                    if next + 1 == word.len() { Step::EndValue } else { Step::Literal { word, next: next + 1 } };
                Ok(())
            }
        }
    }

    fn begin_value(&mut self, c: u8) -> Result<(), String> {
        if is_space(c) {
            return Ok(());
        }
        match c {
            b'{' => {
                self.step = Step::BeginStringOrEmpty;
                self.push(c, Parse::ObjectKey)
            }
            b'[' => {
                self.step = Step::BeginValueOrEmpty;
                self.push(c, Parse::ArrayValue)
            }
            b'"' => {
                self.step = Step::InString;
                Ok(())
            }
            b'-' => {
                self.step = Step::Neg;
                Ok(())
            }
            b'0' => {
                self.step = Step::Zero;
                Ok(())
            }
            b't' => {
                self.step = Step::Literal { word: "true", next: 1 };
                Ok(())
            }
            b'f' => {
                self.step = Step::Literal { word: "false", next: 1 };
                Ok(())
            }
            b'n' => {
                self.step = Step::Literal { word: "null", next: 1 };
                Ok(())
            }
            b'1'..=b'9' => {
                self.step = Step::One;
                Ok(())
            }
            _ => syntax_error(c, "looking for beginning of value"),
        }
    }

    fn begin_string(&mut self, c: u8) -> Result<(), String> {
        if is_space(c) {
            return Ok(());
        }
        if c == b'"' {
            self.step = Step::InString;
            return Ok(());
        }
        syntax_error(c, "looking for beginning of object key string")
    }

    fn zero(&mut self, c: u8) -> Result<(), String> {
        match c {
            b'.' => {
                self.step = Step::Dot;
                Ok(())
            }
            b'e' | b'E' => {
                self.step = Step::E;
                Ok(())
            }
            _ => self.end_value(c),
        }
    }

    fn e_sign(&mut self, c: u8) -> Result<(), String> {
        if c.is_ascii_digit() {
            self.step = Step::E0;
            Ok(())
        } else {
            syntax_error(c, "in exponent of numeric literal")
        }
    }

    fn end_value(&mut self, c: u8) -> Result<(), String> {
        let Some(&top) = self.stack.last() else {
            self.step = Step::EndTop;
            self.end_top = true;
            return self.step(c);
        };
        if is_space(c) {
            self.step = Step::EndValue;
            return Ok(());
        }
        match top {
            Parse::ObjectKey => {
                if c == b':' {
                    if let Some(t) = self.stack.last_mut() {
                        *t = Parse::ObjectValue;
                    }
                    self.step = Step::BeginValue;
                    return Ok(());
                }
                syntax_error(c, "after object key")
            }
            Parse::ObjectValue => match c {
                b',' => {
                    if let Some(t) = self.stack.last_mut() {
                        *t = Parse::ObjectKey;
                    }
                    self.step = Step::BeginString;
                    Ok(())
                }
                b'}' => {
                    self.pop();
                    Ok(())
                }
                _ => syntax_error(c, "after object key:value pair"),
            },
            Parse::ArrayValue => match c {
                b',' => {
                    self.step = Step::BeginValue;
                    Ok(())
                }
                b']' => {
                    self.pop();
                    Ok(())
                }
                _ => syntax_error(c, "after array element"),
            },
        }
    }
}

/// Go's `quoteChar`: the byte read as a Latin-1 rune, quoted like a Go rune
/// literal.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => "'\\''".to_owned(),
        b'"' => "'\"'".to_owned(),
        _ => format!("'{}'", quote_rune_body(c as char)),
    }
}

/// The inside of `strconv.Quote` for one rune of U+0000..U+00FF.
fn quote_rune_body(r: char) -> String {
    let code = r as u32;
    match r {
        '\\' => "\\\\".to_owned(),
        '\x07' => "\\a".to_owned(),
        '\x08' => "\\b".to_owned(),
        '\x0c' => "\\f".to_owned(),
        '\n' => "\\n".to_owned(),
        '\r' => "\\r".to_owned(),
        '\t' => "\\t".to_owned(),
        '\x0b' => "\\v".to_owned(),
        // Go's IsPrint over Latin-1: ASCII graphics and space, and U+00A1..U+00FF
        // except the soft hyphen; NBSP is not "printable" for Go.
        _ if (0x20..0x7f).contains(&code) || ((0xa1..=0xff).contains(&code) && code != 0xad) => r.to_string(),
        _ if code < 0x20 || code == 0x7f => format!("\\x{code:02x}"),
        _ => format!("\\u{code:04x}"),
    }
}

/// Go's `strconv.Quote` for text that appears in an error (a URL).
pub fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x0b' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_are_written_like_go() {
        assert_eq!(format_f32(1.0), "1");
        assert_eq!(format_f32(0.0), "0");
        assert_eq!(format_f32(-0.0), "-0");
        assert_eq!(format_f32(0.1), "0.1");
        assert_eq!(format_f32(-0.25), "-0.25");
        assert_eq!(format_f32(1e-7), "1e-7");
        assert_eq!(format_f32(1.5e-7), "1.5e-7");
        // Go compares in float32, so 1e-6 itself is not "below 1e-6".
        assert_eq!(format_f32(1e-6), "0.000001");
        assert_eq!(format_f32(9.99e-7), "9.99e-7");
        assert_eq!(format_f32(1e20), "100000000000000000000");
        assert_eq!(format_f32(1e21), "1e+21");
        assert_eq!(format_f32(3.4028235e38), "3.4028235e+38");
        assert_eq!(format_f32(1e-45), "1e-45");
        assert_eq!(format_f32(0.123_456_79), "0.12345679");
        assert_eq!(format_f64(0.1), "0.1");
        assert_eq!(format_f64(1e-7), "1e-7");
        assert_eq!(format_f64(1e300), "1e+300");
        assert_eq!(format_f64(12.0), "12");
    }

    #[test]
    fn strings_are_escaped_like_go() {
        let body = json!({"q": "a<b>&c\u{2028}\u{2029}\n\t\u{1}\u{8}\u{c}\"\\/é\u{7f}"});
        let text = String::from_utf8(to_vec(&body).unwrap()).unwrap();
        assert_eq!(text, r#"{"q":"a\u003cb\u003e\u0026c\u2028\u2029\n\t\u0001\b\f\"\\/é"#.to_owned() + "\u{7f}\"}");
    }

    #[test]
    fn unsupported_floats_name_the_value() {
        assert_eq!(unsupported_float(f64::NAN).unwrap(), "json: unsupported value: NaN");
        assert_eq!(unsupported_float(f64::INFINITY).unwrap(), "json: unsupported value: +Inf");
        assert_eq!(unsupported_float(f64::NEG_INFINITY).unwrap(), "json: unsupported value: -Inf");
        assert!(unsupported_float(1.0).is_none());
    }

    fn syntax(input: &str) -> String {
        check_syntax(input.as_bytes()).err().unwrap_or_else(|| "ok".to_owned())
    }

    #[test]
    fn syntax_errors_read_like_go() {
        assert_eq!(syntax(""), "unexpected end of JSON input");
        assert_eq!(syntax("   "), "unexpected end of JSON input");
        assert_eq!(syntax("<html>"), "invalid character '<' looking for beginning of value");
        assert_eq!(syntax("{\"a\":1"), "unexpected end of JSON input");
        assert_eq!(syntax("{\"a\" 1}"), "invalid character '1' after object key");
        assert_eq!(syntax("{\"a\":1 2}"), "invalid character '2' after object key:value pair");
        assert_eq!(syntax("[1 2]"), "invalid character '2' after array element");
        assert_eq!(syntax("{1:2}"), "invalid character '1' looking for beginning of object key string");
        assert_eq!(syntax("{} x"), "invalid character 'x' after top-level value");
        assert_eq!(syntax("{}}"), "invalid character '}' after top-level value");
        assert_eq!(syntax("\"a\nb\""), "invalid character '\\n' in string literal");
        assert_eq!(syntax("\"\\x\""), "invalid character 'x' in string escape code");
        assert_eq!(syntax("\"\\u12g4\""), "invalid character 'g' in \\u hexadecimal character escape");
        assert_eq!(syntax("-"), "invalid character ' ' in numeric literal");
        assert_eq!(syntax("-a"), "invalid character 'a' in numeric literal");
        assert_eq!(syntax("1."), "invalid character ' ' after decimal point in numeric literal");
        assert_eq!(syntax("1e"), "invalid character ' ' in exponent of numeric literal");
        assert_eq!(syntax("01"), "invalid character '1' after top-level value");
        assert_eq!(syntax("tru"), "invalid character ' ' in literal true (expecting 'e')");
        assert_eq!(syntax("fals3"), "invalid character '3' in literal false (expecting 'e')");
        assert_eq!(syntax("nul"), "invalid character ' ' in literal null (expecting 'l')");
        assert_eq!(syntax("nUll"), "invalid character 'U' in literal null (expecting 'u')");
        assert_eq!(syntax("'x'"), "invalid character '\\'' looking for beginning of value");
        assert_eq!(syntax("[\"a\",]"), "invalid character ']' looking for beginning of value");
        assert_eq!(syntax("\u{1}"), "invalid character '\\x01' looking for beginning of value");
        assert_eq!(syntax("\\"), "invalid character '\\\\' looking for beginning of value");
        assert_eq!(syntax("{\"a\":1,}"), "invalid character '}' looking for beginning of object key string");
        assert_eq!(syntax("\"abc"), "unexpected end of JSON input");
        assert_eq!(syntax(" [1, 2.5e+3, -0, true, false, null, {\"k\": \"\\u00e9\\n\"}] \n"), "ok");
        assert_eq!(syntax("[]"), "ok");
        assert_eq!(syntax("{}"), "ok");
        assert_eq!(syntax("5"), "ok");
    }

    #[test]
    fn non_ascii_bytes_are_quoted_as_latin1_runes() {
        assert_eq!(
            check_syntax(&[0xef, 0xbb, 0xbf, b'{', b'}']).unwrap_err(),
            "invalid character 'ï' looking for beginning of value"
        );
        assert_eq!(check_syntax(&[0x80]).unwrap_err(), "invalid character '\\u0080' looking for beginning of value");
        assert_eq!(check_syntax(&[0xa0]).unwrap_err(), "invalid character '\\u00a0' looking for beginning of value");
        assert_eq!(check_syntax(&[0xad]).unwrap_err(), "invalid character '\\u00ad' looking for beginning of value");
        assert_eq!(check_syntax(&[0x7f]).unwrap_err(), "invalid character '\\x7f' looking for beginning of value");
    }

    #[test]
    fn nesting_is_capped_like_go() {
        let deep = "[".repeat(MAX_NESTING_DEPTH + 1);
        assert_eq!(check_syntax(deep.as_bytes()).unwrap_err(), "invalid character '[' exceeded max depth");
        let ok = format!("{}{}", "[".repeat(MAX_NESTING_DEPTH), "]".repeat(MAX_NESTING_DEPTH));
        assert!(check_syntax(ok.as_bytes()).is_ok());
    }

    #[derive(Debug, Default, serde::Deserialize)]
    struct Sample {
        #[serde(default, deserialize_with = "null_as_default")]
        name: String,
        #[serde(default, deserialize_with = "f32_list")]
        values: Vec<f32>,
        #[serde(default, deserialize_with = "f64_or_zero")]
        score: f64,
    }

    #[test]
    fn decoding_is_as_lenient_as_go() {
        let s: Sample = decode(b"null").unwrap();
        assert_eq!((s.name.as_str(), s.values.len(), s.score), ("", 0, 0.0));
        let s: Sample = decode(br#"{"name":null,"values":[0.1,null,1e-3],"score":null,"extra":[1]}"#).unwrap();
        assert_eq!(s.values, vec![0.1, 0.0, 0.001]);
        let s: Sample = decode(b"{\"name\":\"a\xffb\"}").unwrap();
        assert_eq!(s.name, "a\u{FFFD}b");
        assert!(decode::<Sample>(br#"{"values":[1e39]}"#).unwrap_err().contains("cannot unmarshal number 1e39"));
        assert!(decode::<Sample>(br#"{"values":["1"]}"#).unwrap_err().contains("cannot unmarshal string"));
        assert_eq!(decode::<Sample>(b"{").unwrap_err(), "unexpected end of JSON input");
    }

    #[test]
    fn f32_is_parsed_without_a_double_rounding_detour() {
        // Halfway between two f32 values plus a hair: f64 first would round to
        // the even neighbour, the correctly rounded f32 is the upper one.
        let text = "1.000000059604644775390625000000000001";
        let s: Sample = decode(format!("{{\"values\":[{text}]}}").as_bytes()).unwrap();
        assert_eq!(s.values[0], text.parse::<f32>().unwrap());
        assert_eq!(s.values[0].to_bits(), 1.0f32.to_bits() + 1);
    }

    #[test]
    fn lossy_conversion_replaces_each_invalid_byte() {
        assert_eq!(lossy_per_byte(b"ok"), "ok");
        assert_eq!(lossy_per_byte(&[b'a', 0xe2, 0x82]), "a\u{FFFD}\u{FFFD}");
        assert_eq!(lossy_per_byte(&[0xf0, 0x9f, 0x98, b'x']), "\u{FFFD}\u{FFFD}\u{FFFD}x");
        assert_eq!(lossy_per_byte(&[0xed, 0xa0, 0x80]), "\u{FFFD}\u{FFFD}\u{FFFD}");
        assert_eq!(lossy_per_byte("é€".as_bytes()), "é€");
    }

    #[test]
    fn quote_matches_strconv() {
        assert_eq!(quote("http://h/a b"), "\"http://h/a b\"");
        assert_eq!(quote("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\x01\"");
    }
}
