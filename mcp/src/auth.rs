//! Who may use the Streamable HTTP endpoint of `serve`: bearer tokens, each
//! read-only or admin, and the browser origins allowed to call it.
//!
//! The check runs before anything of the request is read as MCP: a request
//! without a valid token gets 401 with `WWW-Authenticate: Bearer` (RFC 6750),
//! a request whose `Origin` the operator did not allow gets 403. Tokens are
//! kept as SHA-256 digests and a presented token is compared with every one
//! of them in constant time (`subtle`), so neither the time of an answer
//! nor its length depends on how much of a token a guess got right. A
//! token never appears in an error, a log line or a result: errors in a
//! token list name the line, not its text.
//!
//! The drop-in server has none of this: it passes the client's
//! `Authorization` through to Chroma, as the reference does.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The environment variable a token list can come in (same format as a
/// token file; entries may also be separated by commas).
pub const TOKENS_ENV: &str = "REPO_RETRIEVER_TOKENS";

/// The shortest token accepted: a guessable token is no protection.
pub const MIN_TOKEN_CHARS: usize = 16;

/// What a token allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Every tool marked read-only (search, navigation), resources.
    ReadOnly,
    /// Everything, including the tools that change the index (`add_repository`).
    Admin,
}

impl Role {
    fn parse(word: &str) -> Option<Role> {
        match word.to_ascii_lowercase().as_str() {
            "admin" => Some(Role::Admin),
            "read-only" | "readonly" | "read" => Some(Role::ReadOnly),
            _ => None,
        }
    }
}

/// A set of tokens and their roles, each with where it was listed (for
/// the error that names a token listed twice with two roles).
#[derive(Clone, Default)]
pub struct Tokens(Vec<([u8; 32], Role, String)>);

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens").field("count", &self.0.len()).finish()
    }
}

/// RFC 6750's `b64token`: what may follow `Bearer ` in a header.
fn is_b64token(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    !body.is_empty()
        && body.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/'))
}

fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

impl Tokens {
    /// Reads a token list: one `TOKEN [ROLE]` entry per line (ROLE is
    /// `admin` or `read-only`, read-only when absent), blank lines and `#`
    /// comments ignored. `separators` also split entries (the environment
    /// variable takes commas). `source` names the list in errors.
    pub fn parse(text: &str, source: &str, separators: &[char]) -> Result<Tokens, String> {
        let mut tokens = Tokens::default();
        // A file saved by an editor that writes a byte-order mark is still a token list.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        for (n, line) in text.lines().enumerate() {
            let line = line.split_once('#').map_or(line, |(before, _)| before);
            for entry in line.split(separators) {
                let mut words = entry.split_whitespace();
                let Some(token) = words.next() else { continue };
                let at = format!("{source}, line {}", n + 1);
                let role = match words.next() {
                    None => Role::ReadOnly,
                    Some(word) => Role::parse(word)
                        .ok_or_else(|| format!("{at}: the role must be admin or read-only, not {word:?}"))?,
                };
                if words.next().is_some() {
                    return Err(format!("{at}: an entry is a token and a role, nothing more"));
                }
                if !is_b64token(token) {
                    return Err(format!(
                        "{at}: a token may hold only letters, digits and - . _ ~ + / (then = padding)"
                    ));
                }
                if token.len() < MIN_TOKEN_CHARS {
                    return Err(format!("{at}: a token must be at least {MIN_TOKEN_CHARS} characters long"));
                }
                tokens.push(digest(token.as_bytes()), role, at)?;
            }
        }
        Ok(tokens)
    }

    /// Adds one token; the same token with another role is refused: which
    /// of the two was meant cannot be told, and the wider one would win.
    fn push(&mut self, digest: [u8; 32], role: Role, at: String) -> Result<(), String> {
        if let Some((_, other, first)) = self.0.iter().find(|(d, _, _)| *d == digest) {
            if *other != role {
                return Err(format!(
                    "{at}: this token is listed before ({first}) with another role; list each token once"
                ));
            }
            return Ok(());
        }
        self.0.push((digest, role, at));
        Ok(())
    }

    /// Adds the tokens of `other`; a token both list with different roles is refused.
    pub fn extend(&mut self, other: Tokens) -> Result<(), String> {
        for (digest, role, at) in other.0 {
            self.push(digest, role, at)?;
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The role of `presented`, compared with every token in constant time
    /// (a token is listed once, with one role).
    pub fn role(&self, presented: &str) -> Option<Role> {
        let presented = digest(presented.as_bytes());
        let (mut read, mut admin) = (subtle::Choice::from(0), subtle::Choice::from(0));
        for (token, role, _) in &self.0 {
            let equal = token.ct_eq(&presented);
            match role {
                Role::ReadOnly => read |= equal,
                Role::Admin => admin |= equal,
            }
        }
        if bool::from(admin) {
            Some(Role::Admin)
        } else if bool::from(read) {
            Some(Role::ReadOnly)
        } else {
            None
        }
    }
}

/// The browser origins allowed to call the endpoint; a request without an
/// `Origin` header (any non-browser client) is not concerned.
#[derive(Debug, Clone, Default)]
pub struct Origins {
    /// Normalised origins (`scheme://host[:port]`, lower case).
    allowed: Vec<String>,
    /// `*` was listed.
    any: bool,
}

fn normalise_origin(origin: &str) -> String {
    origin.trim().trim_end_matches('/').to_ascii_lowercase()
}

/// `http://` or `https://` and a loopback host (`localhost`, 127.0.0.0/8, `[::1]`).
fn is_loopback_origin(origin: &str) -> bool {
    let Some(rest) = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) else {
        return false;
    };
    !rest.contains(['/', '@', '?', '#']) && is_loopback_host(rest)
}

impl Origins {
    /// Loopback origins, and those listed (`*`: any). A listed origin must be
    /// `scheme://host[:port]`.
    pub fn new(listed: &[String]) -> Result<Origins, String> {
        let mut origins = Origins::default();
        for origin in listed {
            if origin.trim() == "*" {
                origins.any = true;
                continue;
            }
            let normalised = normalise_origin(origin);
            let valid = normalised.split_once("://").is_some_and(|(scheme, host)| {
                !scheme.is_empty() && !host.is_empty() && !host.contains(['/', '?', '#'])
            });
            if !valid {
                return Err(format!(
                    "--allow-origin {origin:?}: an origin is scheme://host[:port], e.g. https://ide.example.com"
                ));
            }
            origins.allowed.push(normalised);
        }
        Ok(origins)
    }

    /// Whether a request carrying `Origin: origin` may be served.
    pub fn allows(&self, origin: &str) -> bool {
        let origin = normalise_origin(origin);
        self.any || is_loopback_origin(&origin) || self.allowed.contains(&origin)
    }
}

/// The access rules of one HTTP endpoint.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// `None`: no authentication (`--allow-unauthenticated`, or no tokens on a loopback address).
    pub tokens: Option<Tokens>,
    pub origins: Origins,
}

/// Why a request was refused before MCP: the status, the
/// `WWW-Authenticate` challenge (401 only) and the text of the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub challenge: Option<&'static str>,
    pub message: &'static str,
}

const REALM_CHALLENGE: &str = "Bearer realm=\"repo-retriever\"";
const INVALID_CHALLENGE: &str =
    "Bearer realm=\"repo-retriever\", error=\"invalid_token\", error_description=\"the token is not valid\"";

impl Access {
    /// The role of a request with these `Origin` and `Authorization`
    /// headers (`None`: no authentication configured), or why it is refused.
    pub fn check(&self, origin: Option<&[u8]>, authorization: Option<&[u8]>) -> Result<Option<Role>, Refusal> {
        if let Some(origin) = origin
            && !std::str::from_utf8(origin).is_ok_and(|o| self.origins.allows(o))
        {
            return Err(Refusal { status: 403, challenge: None, message: "Forbidden: this Origin is not allowed" });
        }
        let Some(tokens) = &self.tokens else { return Ok(None) };
        let Some(authorization) = authorization else {
            return Err(Refusal {
                status: 401,
                challenge: Some(REALM_CHALLENGE),
                message: "Unauthorized: a bearer token is required (Authorization: Bearer <token>)",
            });
        };
        // RFC 9110 separates the scheme from its credentials by spaces, and
        // clients put tabs there too: any run of either.
        let presented = std::str::from_utf8(authorization).ok().and_then(|value| {
            let (scheme, token) = value.trim().split_once([' ', '\t'])?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        });
        match presented.and_then(|token| tokens.role(token)) {
            Some(role) => Ok(Some(role)),
            None => Err(Refusal {
                status: 401,
                challenge: Some(INVALID_CHALLENGE),
                message: "Unauthorized: the bearer token is not valid",
            }),
        }
    }
}

/// Whether `host` (`name`, `name:port`, `[v6]:port`) is a loopback host.
pub(crate) fn is_loopback_host(host: &str) -> bool {
    let bare = if let Some(rest) = host.strip_prefix('[') {
        rest.split_once(']').map_or(rest, |(h, _)| h)
    } else if host.matches(':').count() == 1 {
        host.split_once(':').map_or(host, |(h, _)| h)
    } else {
        host
    };
    // An IPv4-mapped IPv6 address counts as its IPv4 address, as in Go's netip.
    bare.eq_ignore_ascii_case("localhost")
        || bare.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.to_canonical().is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADMIN: &str = "admin-token-0123456789";
    const READER: &str = "reader-token-0123456789";

    fn tokens() -> Tokens {
        let text = format!("# team tokens\n{ADMIN} admin   # alice\n\n  {READER} read-only\n");
        Tokens::parse(&text, "tokens.txt", &[]).unwrap()
    }

    #[test]
    fn a_token_file_lists_tokens_and_roles() {
        let tokens = tokens();
        assert_eq!(tokens.len(), 2);
        assert_eq!(tokens.role(ADMIN), Some(Role::Admin));
        assert_eq!(tokens.role(READER), Some(Role::ReadOnly));
        assert_eq!(tokens.role("admin-token-012345678"), None);
        assert_eq!(tokens.role(""), None);
        let env = Tokens::parse(&format!("{ADMIN} admin,{READER}"), TOKENS_ENV, &[',']).unwrap();
        assert_eq!((env.role(ADMIN), env.role(READER)), (Some(Role::Admin), Some(Role::ReadOnly)));
    }

    #[test]
    fn token_list_errors_name_the_line_never_the_token() {
        for (text, expected) in [
            ("short admin", "tokens.txt, line 1: a token must be at least 16 characters long"),
            (
                "\nsecret-secret-secret-1 owner",
                "tokens.txt, line 2: the role must be admin or read-only, not \"owner\"",
            ),
            ("secret-secret-secret-1 admin x", "tokens.txt, line 1: an entry is a token and a role, nothing more"),
            ("secret\"secret-secret-1", "tokens.txt, line 1: a token may hold only letters, digits"),
        ] {
            let error = Tokens::parse(text, "tokens.txt", &[]).unwrap_err();
            assert!(error.starts_with(expected), "{error}");
            assert!(!error.contains("secret-secret") && !error.contains("short"), "{error}");
        }
    }

    #[test]
    fn a_token_listed_twice_with_two_roles_is_refused() {
        for text in [format!("{ADMIN} admin\n{ADMIN} read-only\n"), format!("{ADMIN} read-only\n{ADMIN} admin\n")] {
            let error = Tokens::parse(&text, "tokens.txt", &[]).unwrap_err();
            assert_eq!(
                error,
                "tokens.txt, line 2: this token is listed before (tokens.txt, line 1) with another role; list each \
                 token once"
            );
        }
        // Across the file and the environment too.
        let mut tokens = Tokens::parse(&format!("{ADMIN} read-only"), "tokens.txt", &[]).unwrap();
        let env = Tokens::parse(&format!("{READER},{ADMIN} admin"), TOKENS_ENV, &[',']).unwrap();
        let error = tokens.extend(env).unwrap_err();
        assert!(error.starts_with("REPO_RETRIEVER_TOKENS, line 1: this token is listed before (tokens.txt, line 1)"));
        assert!(!error.contains(ADMIN), "{error}");
        // The same role twice is only a repetition.
        let twice = Tokens::parse(&format!("{ADMIN} admin\n{ADMIN} admin"), "tokens.txt", &[]).unwrap();
        assert_eq!((twice.len(), twice.role(ADMIN)), (1, Some(Role::Admin)));
    }

    #[test]
    fn a_token_file_may_start_with_a_byte_order_mark() {
        let tokens = Tokens::parse(&format!("\u{feff}{ADMIN} admin\n"), "tokens.txt", &[]).unwrap();
        assert_eq!(tokens.role(ADMIN), Some(Role::Admin));
    }

    #[test]
    fn a_tab_may_separate_bearer_from_the_token() {
        let access = Access { tokens: Some(tokens()), origins: Origins::default() };
        assert_eq!(access.check(None, Some(format!("Bearer\t{ADMIN}").as_bytes())), Ok(Some(Role::Admin)));
        assert_eq!(access.check(None, Some(format!("Bearer \t {READER}").as_bytes())), Ok(Some(Role::ReadOnly)));
    }

    #[test]
    fn requests_need_a_valid_bearer_token() {
        let access = Access { tokens: Some(tokens()), origins: Origins::default() };
        let bearer = |t: &str| format!("Bearer {t}");
        assert_eq!(access.check(None, Some(bearer(ADMIN).as_bytes())), Ok(Some(Role::Admin)));
        assert_eq!(access.check(None, Some(format!("bearer  {READER}").as_bytes())), Ok(Some(Role::ReadOnly)));
        let missing = access.check(None, None).unwrap_err();
        assert_eq!((missing.status, missing.challenge), (401, Some("Bearer realm=\"repo-retriever\"")));
        for wrong in [bearer("nope-nope-nope-nope"), format!("Basic {ADMIN}"), ADMIN.to_owned(), bearer("")] {
            let refusal = access.check(None, Some(wrong.as_bytes())).unwrap_err();
            assert_eq!(refusal.status, 401, "{wrong}");
            assert!(refusal.challenge.unwrap().contains("invalid_token"), "{wrong}");
        }
        let open = Access::default();
        assert_eq!(open.check(None, None), Ok(None));
    }

    #[test]
    fn origins_are_loopback_or_listed() {
        let origins = Origins::new(&["https://IDE.example.com/".into()]).unwrap();
        for allowed in [
            "http://localhost:3000",
            "http://127.0.0.1",
            "https://[::1]:8443",
            "https://ide.example.com",
            "HTTP://LOCALHOST",
        ] {
            assert!(origins.allows(allowed), "{allowed}");
        }
        for refused in [
            "http://evil.com",
            "null",
            "http://localhost.evil.com",
            "http://ide.example.com",
            "file://",
            "http://10.0.0.1",
        ] {
            assert!(!origins.allows(refused), "{refused}");
        }
        assert!(Origins::new(&["*".into()]).unwrap().allows("http://evil.com"));
        assert!(Origins::new(&["example.com".into()]).is_err());
        let access = Access { tokens: None, origins: Origins::default() };
        assert_eq!(access.check(Some(b"http://evil.com"), None).unwrap_err().status, 403);
        assert_eq!(access.check(Some(b"http://localhost:1"), None), Ok(None));
    }
}
