//! Identifier-aware tokenisation, identical to the reference test server's
//! `sub_tokens` (`testdata/embed_server.py`).
//!
//! Python's regular expressions there are written by hand here: the camelCase
//! expression needs a lookahead, which the `regex` crate does not have, and a
//! hand-written scanner over ASCII bytes is both exact and faster.

/// Words that never become features.
const STOP: [&str; 25] = [
    "the", "a", "an", "and", "or", "of", "to", "in", "is", "it", "for", "on", "with", "as", "by", "be", "at", "this",
    "that", "are", "was", "from", "how", "what", "which",
];

/// Suffixes folded by [`stem`], tried in this order.
const SUFFIXES: [&str; 8] = ["ations", "ation", "ings", "ing", "ies", "ed", "es", "s"];

/// Folds applied after stemming so abbreviations meet their long forms.
const ALIAS: [(&str, &str); 11] = [
    ("configur", "config"),
    ("cfg", "config"),
    ("conf", "config"),
    ("repo", "repository"),
    ("repositori", "repository"),
    ("env", "environment"),
    ("environ", "environment"),
    ("auth", "authent"),
    ("authentic", "authent"),
    ("init", "initializ"),
    ("initial", "initializ"),
];

/// Removes one leading `query: ` or `passage: `.
pub fn strip_prefix(text: &str) -> &str {
    text.strip_prefix("query: ").or_else(|| text.strip_prefix("passage: ")).unwrap_or(text)
}

/// The tiny suffix folding of the reference, so "loaded", "loading" and
/// "loads" all meet "load".
pub fn stem(token: &str) -> String {
    let mut out = token.to_owned();
    stem_in_place(&mut out);
    out
}

fn stem_in_place(token: &mut String) {
    for suffix in SUFFIXES {
        if token.len() > suffix.len() + 2 && token.ends_with(suffix) {
            token.truncate(token.len() - suffix.len());
            if suffix == "ies" {
                token.push('y');
            }
            return;
        }
    }
}

fn alias_in_place(token: &mut String) {
    if let Some((_, to)) = ALIAS.iter().find(|(from, _)| *from == token.as_str()) {
        token.clear();
        token.push_str(to);
    }
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The sub-tokens of `text`, in order, with repeats: every run of
/// `[A-Za-z0-9_]` is split on `_` and at camelCase / digit boundaries, each
/// part lower-cased, parts shorter than two characters and stop words dropped,
/// then stemmed and aliased.
pub fn sub_tokens(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !is_word_byte(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_word_byte(bytes[i]) {
            i += 1;
        }
        for piece in bytes[start..i].split(|&b| b == b'_') {
            camel_parts(piece, |part| {
                // ASCII only, so byte length is Python's `len` and
                // `to_ascii_lowercase` is Python's `str.lower`.
                if part.len() < 2 {
                    return;
                }
                let mut token: String = part.iter().map(|b| char::from(b.to_ascii_lowercase())).collect();
                if STOP.contains(&token.as_str()) {
                    return;
                }
                stem_in_place(&mut token);
                alias_in_place(&mut token);
                out.push(token);
            });
        }
    }
    out
}

/// `re.findall(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+", piece)`
/// for a piece made only of ASCII letters and digits.
fn camel_parts(piece: &[u8], mut emit: impl FnMut(&[u8])) {
    let run = |from: usize, pred: fn(&u8) -> bool| from + piece[from..].iter().take_while(|b| pred(b)).count();
    let mut i = 0;
    while i < piece.len() {
        let c = piece[i];
        if c.is_ascii_uppercase() {
            let end = run(i, u8::is_ascii_uppercase);
            // `[A-Z]+(?=[A-Z][a-z])`: backtracking can only succeed by giving
            // up the last capital, and only when a lower-case letter follows.
            if end - i >= 2 && end < piece.len() && piece[end].is_ascii_lowercase() {
                emit(&piece[i..end - 1]);
                i = end - 1;
            } else if i + 1 < piece.len() && piece[i + 1].is_ascii_lowercase() {
                // `[A-Z]?[a-z]+` with the capital.
                let end = run(i + 1, u8::is_ascii_lowercase);
                emit(&piece[i..end]);
                i = end;
            } else {
                // `[A-Z]+`.
                emit(&piece[i..end]);
                i = end;
            }
        } else if c.is_ascii_lowercase() {
            let end = run(i, u8::is_ascii_lowercase);
            emit(&piece[i..end]);
            i = end;
        } else if c.is_ascii_digit() {
            let end = run(i, u8::is_ascii_digit);
            emit(&piece[i..end]);
            i = end;
        } else {
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn camel(s: &str) -> Vec<String> {
        let mut out = Vec::new();
        camel_parts(s.as_bytes(), |p| out.push(String::from_utf8(p.to_vec()).unwrap()));
        out
    }

    #[test]
    fn camel_matches_python_findall() {
        // Expected values printed by Python's `_CAMEL.findall`.
        assert_eq!(camel("HTTPServer"), ["HTTP", "Server"]);
        assert_eq!(camel("parseJSONConfig2Go"), ["parse", "JSON", "Config", "2", "Go"]);
        assert_eq!(camel("ABC"), ["ABC"]);
        assert_eq!(camel("AB1c"), ["AB", "1", "c"]);
        assert_eq!(camel("aB"), ["a", "B"]);
        assert_eq!(camel("Ab"), ["Ab"]);
        assert_eq!(camel("ABc"), ["A", "Bc"]);
        assert_eq!(camel("x9Y"), ["x", "9", "Y"]);
        assert_eq!(camel(""), Vec::<String>::new());
    }

    #[test]
    fn stems_and_aliases_like_the_reference() {
        assert_eq!(stem("loading"), "load");
        assert_eq!(stem("loaded"), "load");
        assert_eq!(stem("loads"), "load");
        assert_eq!(stem("libraries"), "library");
        assert_eq!(stem("configurations"), "configur");
        assert_eq!(stem("is"), "is");
        assert_eq!(stem("uses"), "use");
        assert_eq!(stem("bus"), "bus");
        assert_eq!(
            sub_tokens(strip_prefix("query: Load the repoConfig (cfg_file) from ENV_VARS in HTTPServer, é42x")),
            ["load", "repository", "config", "config", "file", "environment", "var", "http", "server", "42"]
        );
    }

    #[test]
    fn strips_one_prefix() {
        assert_eq!(strip_prefix("query: passage: x"), "passage: x");
        assert_eq!(strip_prefix("passage: x"), "x");
        assert_eq!(strip_prefix(" query: x"), " query: x");
    }
}
