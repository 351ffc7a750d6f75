//! The pieces of Go's standard library that the reference server's command line goes through.
//!
//! `mcp-chromadb-repo-search` parses its arguments with Go's `flag` package and its environment
//! with `strconv` and `time`. A drop-in replacement has to accept exactly the same spellings and
//! fail with exactly the same text, so this module reproduces those functions rule by rule rather
//! than mapping them onto a Rust argument parser whose syntax and messages differ: `flag`'s
//! one-or-two-dash syntax, `-flag=value`, booleans that never take the next argument, parsing
//! that stops at the first non-flag, `-h`/`-help`, its error lines and its usage text;
//! `strconv.Atoi`, `ParseInt(s, 0, 64)`, `ParseBool` and `Quote`; and `time.ParseDuration`.
//!
//! `int` is taken to be 64 bits wide, as on every platform the reference server ships for except
//! 32-bit x86.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What a flag holds, which decides how its value is parsed and how usage names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagKind {
    /// `flag.StringVar`: any text, including the empty string.
    String,
    /// `flag.IntVar`: `strconv.ParseInt(value, 0, 64)`.
    Int,
    /// `flag.BoolVar`: `strconv.ParseBool`; `-name` alone means true.
    Bool,
    /// `flag.DurationVar`: `time.ParseDuration`.
    Duration,
}

/// One defined flag. Every flag of the reference server has the zero value as its default, so
/// usage never prints a `(default ...)` suffix and none is modelled.
#[derive(Debug, Clone, Copy)]
pub struct FlagDef {
    pub name: &'static str,
    pub kind: FlagKind,
    pub usage: &'static str,
}

/// A parsed flag value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlagValue {
    String(String),
    Int(i64),
    Bool(bool),
    /// Nanoseconds, as Go's `time.Duration`.
    Duration(i64),
}

/// The flags that were set on the command line (Go's `FlagSet.Visit` set) with their final
/// values, and the arguments left after parsing stopped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedFlags {
    values: BTreeMap<&'static str, FlagValue>,
    /// Arguments after the first non-flag argument or after `--`; the reference server ignores them.
    pub rest: Vec<String>,
}

impl ParsedFlags {
    /// The value of `name` when it was set explicitly, whatever the value (even `""`).
    pub fn get(&self, name: &str) -> Option<&FlagValue> {
        self.values.get(name)
    }

    pub fn string(&self, name: &str) -> Option<&str> {
        match self.values.get(name) {
            Some(FlagValue::String(value)) => Some(value),
            _ => None,
        }
    }

    pub fn int(&self, name: &str) -> Option<i64> {
        match self.values.get(name) {
            Some(FlagValue::Int(value)) => Some(*value),
            _ => None,
        }
    }

    pub fn bool(&self, name: &str) -> Option<bool> {
        match self.values.get(name) {
            Some(FlagValue::Bool(value)) => Some(*value),
            _ => None,
        }
    }

    pub fn duration_nanos(&self, name: &str) -> Option<i64> {
        match self.values.get(name) {
            Some(FlagValue::Duration(value)) => Some(*value),
            _ => None,
        }
    }
}

/// Why `flag.Parse` stopped. Under `ExitOnError` both end the process: `Help` with status 0 after
/// printing the usage, `Invalid` with status 2 after printing the message line and the usage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlagError {
    /// `-h`, `-help` (any number of dashes up to two, with or without `=value`).
    Help,
    /// The message line Go prints, without its newline, e.g.
    /// `flag provided but not defined: -x`.
    Invalid(String),
}

/// Go's `FlagSet.Parse` over `args` (which exclude the program name).
pub fn parse(defs: &[FlagDef], args: &[String]) -> Result<ParsedFlags, FlagError> {
    let mut parsed = ParsedFlags::default();
    let mut index = 0;
    while index < args.len() {
        let arg = &args[index];
        let bytes = arg.as_bytes();
        if bytes.len() < 2 || bytes[0] != b'-' {
            break;
        }
        let mut dashes = 1;
        if bytes[1] == b'-' {
            dashes = 2;
            if bytes.len() == 2 {
                // "--" ends the flags and is itself consumed.
                index += 1;
                break;
            }
        }
        let body = &arg[dashes..];
        if body.is_empty() || body.starts_with('-') || body.starts_with('=') {
            return Err(FlagError::Invalid(format!("bad flag syntax: {arg}")));
        }
        index += 1;
        // The name runs to the first '=' after its first byte.
        let (name, inline_value) = match body.bytes().skip(1).position(|byte| byte == b'=') {
            Some(at) => (&body[..at + 1], Some(&body[at + 2..])),
            None => (body, None),
        };
        let Some(def) = defs.iter().find(|def| def.name == name) else {
            if name == "help" || name == "h" {
                return Err(FlagError::Help);
            }
            return Err(FlagError::Invalid(format!("flag provided but not defined: -{name}")));
        };
        let value = if def.kind == FlagKind::Bool {
            match inline_value {
                Some(text) => match parse_bool(text) {
                    Some(value) => FlagValue::Bool(value),
                    None => {
                        return Err(FlagError::Invalid(format!(
                            "invalid boolean value {} for -{name}: parse error",
                            quote(text)
                        )));
                    }
                },
                None => FlagValue::Bool(true),
            }
        } else {
            let text = match inline_value {
                Some(text) => text,
                None if index < args.len() => {
                    index += 1;
                    args[index - 1].as_str()
                }
                None => return Err(FlagError::Invalid(format!("flag needs an argument: -{name}"))),
            };
            let parsed_value = match def.kind {
                FlagKind::String => Ok(FlagValue::String(text.to_owned())),
                FlagKind::Int => parse_int_base0(text).map(FlagValue::Int).map_err(|err| err.flag_reason()),
                FlagKind::Duration => parse_duration(text).map(FlagValue::Duration).ok_or("parse error"),
                FlagKind::Bool => unreachable!("bool flags are handled above"),
            };
            match parsed_value {
                Ok(value) => value,
                Err(reason) => {
                    return Err(FlagError::Invalid(format!(
                        "invalid value {} for flag -{name}: {reason}",
                        quote(text)
                    )));
                }
            }
        };
        parsed.values.insert(def.name, value);
    }
    parsed.rest = args[index..].to_vec();
    Ok(parsed)
}

/// The text Go's default `flag.Usage` prints: `Usage of <program>:` and, for each flag in
/// lexical order, `  -name type` then the description on the next line after four spaces and a
/// tab. Ends with a newline.
pub fn usage(program: &str, defs: &[FlagDef]) -> String {
    let mut sorted: Vec<&FlagDef> = defs.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(b.name));
    let mut out = format!("Usage of {program}:\n");
    for def in sorted {
        let mut line = format!("  -{}", def.name);
        let (type_name, description) = unquote_usage(def);
        if !type_name.is_empty() {
            line.push(' ');
            line.push_str(&type_name);
        }
        // A one-letter boolean keeps its description on the same line.
        if line.len() <= 4 {
            line.push('\t');
        } else {
            line.push_str("\n    \t");
        }
        line.push_str(&description.replace('\n', "\n    \t"));
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Go's `flag.UnquoteUsage`: a back-quoted word in the description names the value.
fn unquote_usage(def: &FlagDef) -> (String, String) {
    let usage = def.usage;
    if let Some(open) = usage.find('`')
        && let Some(len) = usage[open + 1..].find('`')
    {
        let name = &usage[open + 1..open + 1 + len];
        let text = format!("{}{}{}", &usage[..open], name, &usage[open + 2 + len..]);
        return (name.to_owned(), text);
    }
    let name = match def.kind {
        FlagKind::Bool => "",
        FlagKind::Duration => "duration",
        FlagKind::Int => "int",
        FlagKind::String => "string",
    };
    (name.to_owned(), usage.to_owned())
}

/// Go's `strconv.ParseBool`.
pub fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// How a Go integer parse failed (`strconv.ErrSyntax` or `strconv.ErrRange`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumError {
    Syntax,
    Range,
}

impl NumError {
    /// The reason `flag` gives after `invalid value "..." for flag -x: `.
    fn flag_reason(self) -> &'static str {
        match self {
            NumError::Syntax => "parse error",
            NumError::Range => "value out of range",
        }
    }
}

/// Go's `strconv.Atoi` on a 64-bit platform: an optional sign and decimal digits only.
pub fn atoi(text: &str) -> Result<i64, NumError> {
    parse_int(text, 10)
}

/// Go's `strconv.ParseInt(text, 0, 64)`, what `flag.IntVar` uses: `0x`, `0o`, `0b` and a
/// leading `0` (octal) select the base, and `_` may separate digits.
pub fn parse_int_base0(text: &str) -> Result<i64, NumError> {
    parse_int(text, 0)
}

/// Go's `strconv.ParseInt(text, base, 64)` for `base` 0 or 2 to 36.
pub fn parse_int(text: &str, base: u32) -> Result<i64, NumError> {
    if text.is_empty() {
        return Err(NumError::Syntax);
    }
    let (negative, digits) = match text.as_bytes()[0] {
        b'+' => (false, &text[1..]),
        b'-' => (true, &text[1..]),
        _ => (false, text),
    };
    let magnitude = parse_uint(digits, base)?;
    const CUTOFF: u64 = 1 << 63;
    if !negative && magnitude >= CUTOFF {
        return Err(NumError::Range);
    }
    if negative && magnitude > CUTOFF {
        return Err(NumError::Range);
    }
    Ok(if negative { (magnitude as i64).wrapping_neg() } else { magnitude as i64 })
}

/// Go's `strconv.ParseUint(text, base, 64)` for `base` 0 or 2 to 36.
pub fn parse_uint(text: &str, base: u32) -> Result<u64, NumError> {
    if text.is_empty() {
        return Err(NumError::Syntax);
    }
    let base_prefixed = base == 0;
    let bytes = text.as_bytes();
    let (base, digits): (u64, &[u8]) = if base_prefixed {
        if bytes[0] == b'0' {
            let second = bytes.get(1).map(u8::to_ascii_lowercase);
            match second {
                Some(b'b') if bytes.len() >= 3 => (2, &bytes[2..]),
                Some(b'o') if bytes.len() >= 3 => (8, &bytes[2..]),
                Some(b'x') if bytes.len() >= 3 => (16, &bytes[2..]),
                _ => (8, &bytes[1..]),
            }
        } else {
            (10, bytes)
        }
    } else {
        (u64::from(base), bytes)
    };
    // Smallest value that overflows when multiplied by the base.
    let cutoff = u64::MAX / base + 1;
    let mut value: u64 = 0;
    let mut underscores = false;
    for &byte in digits {
        let digit = match byte {
            b'_' if base_prefixed => {
                underscores = true;
                continue;
            }
            b'0'..=b'9' => u64::from(byte - b'0'),
            _ if byte.to_ascii_lowercase().is_ascii_lowercase() => u64::from(byte.to_ascii_lowercase() - b'a') + 10,
            _ => return Err(NumError::Syntax),
        };
        if digit >= base {
            return Err(NumError::Syntax);
        }
        if value >= cutoff {
            return Err(NumError::Range);
        }
        value *= base;
        value = value.checked_add(digit).ok_or(NumError::Range)?;
    }
    if underscores && !underscore_ok(text) {
        return Err(NumError::Syntax);
    }
    Ok(value)
}

/// Go's `strconv.underscoreOK`: underscores only between digits (a base prefix counts as one).
fn underscore_ok(text: &str) -> bool {
    let mut bytes = text.as_bytes();
    if let Some(b'+' | b'-') = bytes.first() {
        bytes = &bytes[1..];
    }
    // What was seen last: '^' start, '0' digit or prefix, '_' underscore, '!' anything else.
    let mut saw = b'^';
    let mut index = 0;
    let mut hex = false;
    if bytes.len() >= 2 && bytes[0] == b'0' && matches!(bytes[1].to_ascii_lowercase(), b'b' | b'o' | b'x') {
        index = 2;
        saw = b'0';
        hex = bytes[1].eq_ignore_ascii_case(&b'x');
    }
    while index < bytes.len() {
        let byte = bytes[index];
        index += 1;
        if byte.is_ascii_digit() || (hex && matches!(byte.to_ascii_lowercase(), b'a'..=b'f')) {
            saw = b'0';
            continue;
        }
        if byte == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
            continue;
        }
        if saw == b'_' {
            return false;
        }
        saw = b'!';
    }
    saw != b'_'
}

/// Go's `time.ParseDuration`, in nanoseconds: a sign, then one or more decimal numbers each with
/// an optional fraction and a unit (`ns`, `us`, `µs`, `μs`, `ms`, `s`, `m`, `h`); `0` alone needs
/// no unit. `None` where Go returns an error.
pub fn parse_duration(text: &str) -> Option<i64> {
    const LIMIT: u64 = 1 << 63;
    let mut rest = text.as_bytes();
    let mut negative = false;
    if let Some(&sign @ (b'-' | b'+')) = rest.first() {
        negative = sign == b'-';
        rest = &rest[1..];
    }
    if rest == b"0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        if !(rest[0] == b'.' || rest[0].is_ascii_digit()) {
            return None;
        }
        // Integer part, failing on overflow.
        let before = rest.len();
        let mut whole: u64 = 0;
        while let Some(&digit) = rest.first().filter(|byte| byte.is_ascii_digit()) {
            if whole > LIMIT / 10 {
                return None;
            }
            whole = whole * 10 + u64::from(digit - b'0');
            if whole > LIMIT {
                return None;
            }
            rest = &rest[1..];
        }
        let has_whole = rest.len() != before;
        // Fraction, which stops gaining precision instead of overflowing.
        let mut fraction: u64 = 0;
        let mut scale: f64 = 1.0;
        let mut has_fraction = false;
        if rest.first() == Some(&b'.') {
            rest = &rest[1..];
            let before = rest.len();
            let mut overflow = false;
            while let Some(&digit) = rest.first().filter(|byte| byte.is_ascii_digit()) {
                rest = &rest[1..];
                if overflow {
                    continue;
                }
                if fraction > (LIMIT - 1) / 10 {
                    overflow = true;
                    continue;
                }
                let next = fraction * 10 + u64::from(digit - b'0');
                if next > LIMIT {
                    overflow = true;
                    continue;
                }
                fraction = next;
                scale *= 10.0;
            }
            has_fraction = rest.len() != before;
        }
        if !has_whole && !has_fraction {
            return None;
        }
        let unit_len = rest.iter().position(|byte| *byte == b'.' || byte.is_ascii_digit()).unwrap_or(rest.len());
        if unit_len == 0 {
            return None;
        }
        let unit: u64 = match &rest[..unit_len] {
            b"ns" => 1,
            // "µs" (U+00B5 micro sign) and "μs" (U+03BC Greek mu).
            b"us" | b"\xc2\xb5s" | b"\xce\xbcs" => 1_000,
            b"ms" => 1_000_000,
            b"s" => 1_000_000_000,
            b"m" => 60_000_000_000,
            b"h" => 3_600_000_000_000,
            _ => return None,
        };
        rest = &rest[unit_len..];
        if whole > LIMIT / unit {
            return None;
        }
        let mut value = whole * unit;
        if fraction > 0 {
            // Go computes the fractional part in float64; truncation matches its conversion.
            value += (fraction as f64 * (unit as f64 / scale)) as u64;
            if value > LIMIT {
                return None;
            }
        }
        total += value;
        if total > LIMIT {
            return None;
        }
    }
    if negative {
        return Some((total as i64).wrapping_neg());
    }
    if total > LIMIT - 1 {
        return None;
    }
    Some(total as i64)
}

/// Go's `strconv.Quote`, which `%q` uses in `flag`'s messages: double quotes, with `"` and `\`
/// escaped, the C escapes for `\a \b \f \n \r \t \v`, `\xNN` for other ASCII controls and
/// `\uNNNN`/`\UNNNNNNNN` for runes that are not printable.
pub fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for ch in text.chars() {
        match ch {
            '"' | '\\' => {
                out.push('\\');
                out.push(ch);
            }
            _ if is_go_print(ch) => out.push(ch),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            _ if ch < ' ' || ch == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", ch as u32);
            }
            _ if (ch as u32) < 0x10000 => {
                let _ = write!(out, "\\u{:04x}", ch as u32);
            }
            _ => {
                let _ = write!(out, "\\U{:08x}", ch as u32);
            }
        }
    }
    out.push('"');
    out
}

/// Go's `strconv.IsPrint`: letters, marks, numbers, punctuation, symbols and the ASCII space.
///
/// Rust's standard library has no general-category tables, so this rejects what it can name:
/// controls, every space but U+0020, the format characters (Cf), private-use code points and
/// noncharacters. Unassigned code points, which Go also rejects, are accepted here; they do not
/// occur in real flag values.
fn is_go_print(ch: char) -> bool {
    if ch == ' ' {
        return true;
    }
    if ch.is_control() || ch.is_whitespace() {
        return false;
    }
    let code = ch as u32;
    let format = matches!(
        code,
        0xAD | 0x600..=0x605
            | 0x61C
            | 0x6DD
            | 0x70F
            | 0x890..=0x891
            | 0x8E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    );
    let private_use = matches!(code, 0xE000..=0xF8FF | 0xF0000..=0xFFFFD | 0x100000..=0x10FFFD);
    let noncharacter = matches!(code, 0xFDD0..=0xFDEF) || code & 0xFFFE == 0xFFFE;
    !(format || private_use || noncharacter)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFS: &[FlagDef] = &[
        FlagDef { name: "name", kind: FlagKind::String, usage: "a name" },
        FlagDef { name: "count", kind: FlagKind::Int, usage: "how many" },
        FlagDef { name: "debug", kind: FlagKind::Bool, usage: "debug it" },
        FlagDef { name: "wait", kind: FlagKind::Duration, usage: "how long" },
        FlagDef { name: "x", kind: FlagKind::Bool, usage: "one letter" },
        FlagDef { name: "dir", kind: FlagKind::String, usage: "search `directory` for files" },
    ];

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|arg| (*arg).to_owned()).collect()
    }

    fn run(list: &[&str]) -> Result<ParsedFlags, FlagError> {
        parse(DEFS, &args(list))
    }

    fn invalid(message: &str) -> Result<ParsedFlags, FlagError> {
        Err(FlagError::Invalid(message.to_owned()))
    }

    #[test]
    fn accepts_every_go_spelling_of_a_flag() {
        for form in [&["-name", "v"][..], &["--name", "v"], &["-name=v"], &["--name=v"], &["-name", "x", "-name", "v"]]
        {
            assert_eq!(run(form).unwrap().string("name"), Some("v"), "{form:?}");
        }
        assert_eq!(run(&["-name="]).unwrap().string("name"), Some(""));
        assert_eq!(run(&["-name", "-count"]).unwrap().string("name"), Some("-count"));
        assert_eq!(run(&["-name=a=b"]).unwrap().string("name"), Some("a=b"));
    }

    #[test]
    fn booleans_never_take_the_next_argument() {
        let parsed = run(&["-debug", "false", "-name", "v"]).unwrap();
        assert_eq!(parsed.bool("debug"), Some(true));
        assert_eq!(parsed.string("name"), None);
        assert_eq!(parsed.rest, args(&["false", "-name", "v"]));
        assert_eq!(run(&["-debug=false"]).unwrap().bool("debug"), Some(false));
        assert_eq!(run(&["--debug=T"]).unwrap().bool("debug"), Some(true));
        assert_eq!(run(&["-debug=yes"]), invalid("invalid boolean value \"yes\" for -debug: parse error"));
    }

    #[test]
    fn parsing_stops_at_the_first_non_flag_or_double_dash() {
        let parsed = run(&["-debug", "serve", "-count", "x"]).unwrap();
        assert_eq!(parsed.rest, args(&["serve", "-count", "x"]));
        let parsed = run(&["--", "-count", "x"]).unwrap();
        assert_eq!(parsed.rest, args(&["-count", "x"]));
        assert_eq!(parsed.get("count"), None);
        assert_eq!(run(&["-", "-count"]).unwrap().rest, args(&["-", "-count"]));
    }

    #[test]
    fn reports_errors_as_go_does() {
        assert_eq!(run(&["-nope"]), invalid("flag provided but not defined: -nope"));
        assert_eq!(run(&["--nope=1"]), invalid("flag provided but not defined: -nope"));
        assert_eq!(run(&["-name"]), invalid("flag needs an argument: -name"));
        assert_eq!(run(&["-count", "abc"]), invalid("invalid value \"abc\" for flag -count: parse error"));
        assert_eq!(
            run(&["-count", "99999999999999999999"]),
            invalid("invalid value \"99999999999999999999\" for flag -count: value out of range")
        );
        assert_eq!(run(&["-wait", "5"]), invalid("invalid value \"5\" for flag -wait: parse error"));
        assert_eq!(run(&["---x"]), invalid("bad flag syntax: ---x"));
        assert_eq!(run(&["-=x"]), invalid("bad flag syntax: -=x"));
        assert_eq!(
            run(&["-count", "a\tb\"\u{1}"]),
            invalid(r#"invalid value "a\tb\"\x01" for flag -count: parse error"#)
        );
    }

    #[test]
    fn help_is_recognised_only_when_not_defined() {
        for form in ["-h", "-help", "--help", "--h", "-help=1"] {
            assert_eq!(run(&[form]), Err(FlagError::Help), "{form}");
        }
    }

    #[test]
    fn int_flags_take_go_literals() {
        for (text, want) in [
            ("10", 10),
            ("-10", -10),
            ("+7", 7),
            ("0x1f", 31),
            ("0X1F", 31),
            ("0o17", 15),
            ("017", 15),
            ("0b101", 5),
            ("1_000", 1000),
            ("0x_1f", 31),
            ("0", 0),
            ("9223372036854775807", i64::MAX),
            ("-9223372036854775808", i64::MIN),
        ] {
            assert_eq!(parse_int_base0(text), Ok(want), "{text}");
        }
        for (text, want) in [
            ("", NumError::Syntax),
            ("1_", NumError::Syntax),
            ("_1", NumError::Syntax),
            ("1__0", NumError::Syntax),
            ("08", NumError::Syntax),
            ("0x", NumError::Syntax),
            ("1.5", NumError::Syntax),
            (" 1", NumError::Syntax),
            ("9223372036854775808", NumError::Range),
            ("-9223372036854775809", NumError::Range),
            ("99999999999999999999x", NumError::Range),
        ] {
            assert_eq!(parse_int_base0(text), Err(want), "{text}");
        }
    }

    #[test]
    fn atoi_is_decimal_only() {
        assert_eq!(atoi("42"), Ok(42));
        assert_eq!(atoi("+42"), Ok(42));
        assert_eq!(atoi("-42"), Ok(-42));
        assert_eq!(atoi("007"), Ok(7));
        for text in ["", "+", "-", "0x10", "1_000", "4 2", "4.0", "abc"] {
            assert!(atoi(text).is_err(), "{text}");
        }
        assert_eq!(atoi("9223372036854775808"), Err(NumError::Range));
    }

    #[test]
    fn parse_bool_matches_strconv() {
        for text in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_bool(text), Some(true));
        }
        for text in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_bool(text), Some(false));
        }
        for text in ["", "yes", "no", "tRUE", "on", " true"] {
            assert_eq!(parse_bool(text), None);
        }
    }

    #[test]
    fn parse_duration_matches_go() {
        const S: i64 = 1_000_000_000;
        for (text, want) in [
            ("0", 0),
            ("-0", 0),
            ("+0", 0),
            ("90s", 90 * S),
            ("2m", 120 * S),
            ("1h30m", 5400 * S),
            ("1.5s", 1_500_000_000),
            ("300ms", 300_000_000),
            ("1us", 1_000),
            ("1µs", 1_000),
            ("1μs", 1_000),
            ("10ns", 10),
            ("-1s", -S),
            ("+5s", 5 * S),
            (".5s", 500_000_000),
            ("5.s", 5 * S),
            ("1h1m1s1ms1us1ns", 3_661_001_001_001),
            ("0s", 0),
            ("0.000000001s", 1),
            ("1.0000000001s", S),
            ("2562047h47m16.854775807s", i64::MAX),
            ("-2562047h47m16.854775808s", i64::MIN),
        ] {
            assert_eq!(parse_duration(text), Some(want), "{text}");
        }
        for text in [
            "",
            "-",
            "+",
            "1",
            "10",
            "s",
            ".s",
            "-.s",
            "1x",
            "1S",
            "1 s",
            " 1s",
            "1s ",
            "1d",
            "0x",
            "1e3s",
            "--1s",
            "2562047h47m16.854775808s",
            "9999999999999999999h",
        ] {
            assert_eq!(parse_duration(text), None, "{text}");
        }
    }

    #[test]
    fn quote_matches_strconv() {
        assert_eq!(quote("abc"), "\"abc\"");
        assert_eq!(quote(""), "\"\"");
        assert_eq!(quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(quote("\u{7}\u{8}\u{c}\n\r\t\u{b}\u{0}\u{7f}"), r#""\a\b\f\n\r\t\v\x00\x7f""#);
        assert_eq!(quote("héllo ✓ 日本"), "\"héllo ✓ 日本\"");
        assert_eq!(quote("\u{a0}\u{200b}\u{feff}"), r#""\u00a0\u200b\ufeff""#);
        assert_eq!(quote("\u{e0001}\u{85}"), r#""\U000e0001\u0085""#);
    }

    #[test]
    fn usage_matches_go_layout() {
        let text = usage("prog", DEFS);
        assert_eq!(
            text,
            "Usage of prog:\n  -count int\n    \thow many\n  -debug\n    \tdebug it\n  -dir directory\n    \t\
             search directory for files\n  -name string\n    \ta name\n  -wait duration\n    \thow long\n  -x\tone letter\n"
        );
    }
}
