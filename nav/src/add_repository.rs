//! `add_repository`: validate an https URL, check it with `git ls-remote`,
//! then clone (`--depth 1`) and index it in the background:
//! `pending → processing → completed | failed`.
//!
//! Refused before anything is created: other schemes, credentials, ports,
//! query or fragment, `localhost`/`*.localhost`, IP literals that are not
//! public, and host names that resolve to any non-public address (see
//! [`super::address`] for what is public). git is then pinned to the checked
//! addresses (`http.curloptResolve`), so a DNS answer that changes between
//! the check and the clone cannot redirect it, and never follows an HTTP
//! redirect, which would lead it to a host nobody checked.
//! The operator setting `allow_loopback_git` (off by default; tests only)
//! lets a loopback host through, with a port and `http://` or `git://`.

use std::net::IpAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::process::Command;

use super::catalog::NewRepository;
use super::schema::Args;
use super::{NavService, ToolResult, pretty};

/// Indexing keeps at most this many files…
pub const MAX_FILES: usize = 1000;
/// …and this many bytes…
pub const MAX_TOTAL_BYTES: u64 = 100 * 1024 * 1024;
/// …and skips files of this size or more.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

pub const STARTED: &str = "Indexing started; check list_repositories for progress.";

/// A URL that passed validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoUrl {
    /// `https` (or, with the loopback setting, `http`/`git`).
    pub scheme: String,
    /// Lower-case host as the URL spells it (an IPv6 address in brackets),
    /// with `:port` only in loopback test mode.
    pub host: String,
    /// The host without brackets or port: a DNS name or an address.
    pub bare_host: String,
    /// `owner/repo` or `group/sub/project`, without `.git`.
    pub path: String,
    /// A branch named in the URL (`/tree/<b>`, `/-/tree/<b>`, `/src/<b>`).
    pub branch: Option<String>,
}

impl RepoUrl {
    pub fn url(&self) -> String {
        format!("{}://{}/{}", self.scheme, self.host, self.path)
    }
    pub fn is_github(&self) -> bool {
        self.bare_host == "github.com"
    }
    /// `owner/name` on GitHub, `<host>/<path>` elsewhere.
    pub fn name(&self) -> String {
        if self.is_github() { self.path.clone() } else { format!("{}/{}", self.host, self.path) }
    }
}

pub use super::address::is_public;
use super::address::{self, is_loopback as is_loopback_ip};

/// The literal address a URL host spells, IPv6 in brackets or IPv4 in any
/// form the resolver reads; `Err` for a host that is neither an address nor
/// a valid DNS name.
fn literal_address(bracketed: bool, bare: &str) -> Result<Option<IpAddr>, ()> {
    if bracketed {
        return bare.parse::<std::net::Ipv6Addr>().map(|v6| Some(IpAddr::V6(v6))).map_err(|_| ());
    }
    match address::ipv4_host(bare) {
        Some(v4) => v4.map(|v4| Some(IpAddr::V4(v4))),
        None if address::valid_host_name(bare) => Ok(None),
        None => Err(()),
    }
}

/// Validates and normalises the `url` argument. Errors are the text after
/// `url: `.
pub fn parse_url(input: &str, allow_loopback: bool) -> Result<RepoUrl, String> {
    let raw = input.trim();
    let invalid = || format!("Invalid repository URL (only https is supported): {raw}");
    let (scheme, rest) = if let Some(rest) = raw.strip_prefix("https://") {
        ("https", rest.to_owned())
    } else if let Some(rest) = raw.strip_prefix("http://") {
        ("http", rest.to_owned())
    } else if let Some(rest) = raw.strip_prefix("git://") {
        ("git", rest.to_owned())
    } else if let Some(rest) = raw.strip_prefix("git@") {
        let (host, path) = rest.split_once(':').ok_or_else(invalid)?;
        ("https", format!("{host}/{path}"))
    } else {
        return Err(invalid());
    };
    if rest.contains('?') || rest.contains('#') {
        return Err("Repository URLs must not include a query or fragment".into());
    }
    let (authority, path) = rest.split_once('/').unwrap_or((rest.as_str(), ""));
    if authority.contains('@') {
        return Err("Repository URLs must not include credentials".into());
    }
    if authority.is_empty() || authority.contains(char::is_whitespace) {
        return Err(invalid());
    }
    let bracketed = authority.starts_with('[');
    let (bare, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or_else(invalid)?;
        if !(after.is_empty() || after.starts_with(':')) {
            return Err(invalid());
        }
        (h.to_owned(), after.strip_prefix(':').map(str::to_owned))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_owned(), Some(p.to_owned())),
            None => (authority.to_owned(), None),
        }
    };
    let bare = bare.to_ascii_lowercase().trim_end_matches('.').to_owned();
    let literal = literal_address(bracketed, &bare).map_err(|()| invalid())?;
    // An address in its canonical text (IPv6 goes inside the brackets a URL
    // needs), so that git is given the very address that was checked.
    let bare = literal.map_or(bare, |ip| ip.to_string());
    let loopback_host = bare == "localhost" || literal.is_some_and(is_loopback_ip);
    let test_mode = allow_loopback && loopback_host;
    if !test_mode {
        if scheme == "git" {
            return Err(invalid());
        }
        if port.is_some() {
            return Err("Repository URLs must not include a port".into());
        }
        if bare == "localhost" || bare.ends_with(".localhost") {
            return Err("localhost URLs are not allowed".into());
        }
        if let Some(refusal) = literal.and_then(address::refusal) {
            tracing::debug!(host = %bare, %refusal, "add_repository address refused");
            return Err("Private or loopback addresses are not allowed".into());
        }
    }
    let scheme = if test_mode { scheme } else { "https" };
    let url_host = if matches!(literal, Some(IpAddr::V6(_))) { format!("[{bare}]") } else { bare.clone() };
    let host = match (&port, test_mode) {
        (Some(p), true) => format!("{url_host}:{p}"),
        _ => url_host,
    };
    let path = path.trim_end_matches('/');
    let segments: Vec<&str> = path.split('/').collect();
    let mut branch = None;
    let mut repo_segments: Vec<&str> = segments.clone();
    for marker in [["-", "tree"].as_slice(), ["tree"].as_slice(), ["src"].as_slice()] {
        if let Some(pos) = segments.windows(marker.len()).position(|w| w == marker)
            && pos >= 2
            && pos + marker.len() < segments.len()
        {
            branch = Some(segments[pos + marker.len()..].join("/"));
            repo_segments = segments[..pos].to_vec();
            break;
        }
    }
    let mut repo_path = repo_segments.join("/");
    if let Some(stripped) = repo_path.strip_suffix(".git") {
        repo_path = stripped.to_owned();
    }
    let parts: Vec<&str> = repo_path.split('/').collect();
    let github = bare == "github.com";
    let ok_shape = parts.len() >= 2
        && (!github || parts.len() == 2)
        && parts.iter().all(|p| !p.is_empty() && *p != "." && *p != ".." && !p.starts_with('-'));
    if !ok_shape {
        return Err(format!("Invalid repository URL (expected https://<host>/<owner>/<repo>): {raw}"));
    }
    Ok(RepoUrl { scheme: scheme.to_owned(), host, bare_host: bare, path: repo_path, branch })
}

/// Branch names: at most 100 characters, no `..` segment, no NUL, no leading `-`.
pub fn valid_branch(branch: &str) -> bool {
    !(branch.is_empty()
        || branch.chars().count() > 100
        || branch.contains('\0')
        || branch.starts_with('-')
        || branch.split('/').any(|s| s == ".."))
}

#[derive(Serialize)]
struct Output {
    repository_id: i64,
    name: String,
    status: &'static str,
    message: &'static str,
}

/// The pre-flight failure messages, from git's exit and stderr.
pub fn preflight_error(url: &RepoUrl, stderr: &str, timed_out: bool) -> String {
    let name = url.name();
    let host = &url.bare_host;
    let github = url.is_github();
    if timed_out {
        return if github {
            "GitHub did not respond in time; try again.".into()
        } else {
            format!("{host} did not respond in time; try again.")
        };
    }
    let s = stderr.to_ascii_lowercase();
    if github {
        if s.contains("error: 429") || s.contains("rate limit") {
            return "GitHub's API rate limit was reached; try again in about 2 minutes.".into();
        }
        if s.contains("error: 401") && s.contains("token") {
            return "GitHub rejected the server's GITHUB_TOKEN; check the token configured on the repo-retriever server."
                .into();
        }
        if s.contains("error: 403") {
            return format!("GitHub denied access to {name}.");
        }
        if s.contains("not found") || s.contains("error: 404") || s.contains("could not read username") {
            return format!(
                "GitHub repository {name} was not found. Check the URL; if it's private, the server's GITHUB_TOKEN needs access."
            );
        }
        return "Could not reach GitHub; try again.".into();
    }
    if s.contains("not found")
        || s.contains("error: 404")
        || s.contains("error: 401")
        || s.contains("error: 403")
        || s.contains("could not read username")
        || s.contains("not appear to be a git repository")
        || s.contains("no such repository")
        || s.contains("not exported")
    {
        return format!("{name} was not found or is private; only public repositories are supported on {host}.");
    }
    format!("Could not reach {host}; try again.")
}

/// Runs git with a time limit; `Err(true)` on timeout.
async fn git(args: &[String], dir: Option<&Path>, limit: Duration) -> Result<std::process::Output, bool> {
    let mut cmd = Command::new("git");
    cmd.args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "true")
        .env("GCM_INTERACTIVE", "never")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    match tokio::time::timeout(limit, cmd.output()).await {
        Err(_) => Err(true),
        Ok(Err(_)) => Err(false),
        Ok(Ok(out)) => Ok(out),
    }
}

/// Which of a host name's addresses git may not connect to; every one must
/// pass, since curl may pick any of them.
pub fn check_resolved(addrs: &[IpAddr], allow_loopback: bool) -> Result<(), address::Refusal> {
    for &ip in addrs {
        if let Some(refusal) = address::refusal(ip)
            && !(allow_loopback && is_loopback_ip(ip))
        {
            return Err(refusal);
        }
    }
    Ok(())
}

/// The `-c` options every git run gets: no redirects (a redirect would lead
/// to a host nobody checked), only the URL's own protocol, and for a host
/// name `http.curloptResolve` pinning it to the checked addresses, so a DNS
/// answer that changes between the check and the connection is never used.
pub fn git_guard(url: &RepoUrl, addrs: &[IpAddr]) -> Vec<String> {
    let mut args = vec![
        "-c".to_owned(),
        "http.followRedirects=false".to_owned(),
        "-c".to_owned(),
        "protocol.allow=never".to_owned(),
        "-c".to_owned(),
        format!("protocol.{}.allow=always", url.scheme),
    ];
    if url.scheme == "https" && !addrs.is_empty() && url.bare_host.parse::<IpAddr>().is_err() {
        let pinned: Vec<String> = addrs
            .iter()
            .map(|ip| match ip {
                IpAddr::V6(v6) => format!("[{v6}]"),
                v4 => v4.to_string(),
            })
            .collect();
        args.extend(["-c".to_owned(), format!("http.curloptResolve={}:443:{}", url.bare_host, pinned.join(","))]);
    }
    args
}

pub async fn call(nav: Arc<NavService>, args: Args) -> ToolResult {
    let allow = nav.config().allow_loopback_git;
    let url = parse_url(&args.str("url").unwrap_or_default(), allow).map_err(|e| format!("url: {e}"))?;
    let branch = args.str("branch").or_else(|| url.branch.clone());
    if let Some(b) = &branch
        && !valid_branch(b)
    {
        return Err("branch: Invalid branch name".into());
    }
    let name = url.name();
    let canonical = url.url().to_lowercase();
    let existing = nav.catalogue().repositories().map_err(|e| e.to_string())?;
    if let Some(r) = existing
        .iter()
        .find(|r| r.url.as_deref().is_some_and(|u| u.to_lowercase().trim_end_matches(".git") == canonical))
    {
        return Err(format!("{} is already added as repository {}.", r.name, r.id));
    }
    // Resolve the host and check every address it has.
    let addrs: Vec<IpAddr> = match url.bare_host.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => {
            let mut addrs: Vec<IpAddr> = match tokio::time::timeout(
                nav.config().preflight_timeout,
                tokio::net::lookup_host((url.bare_host.as_str(), 443)),
            )
            .await
            {
                Ok(Ok(a)) => a.map(|s| s.ip()).collect(),
                _ => Vec::new(),
            };
            let mut seen = std::collections::HashSet::new();
            addrs.retain(|ip| seen.insert(*ip));
            if addrs.is_empty() {
                return Err(format!("Can't index {name}: {} could not be resolved.", url.bare_host));
            }
            if let Err(refusal) = check_resolved(&addrs, allow) {
                tracing::debug!(host = %url.bare_host, %refusal, "add_repository address refused");
                return Err(format!(
                    "Can't index {name}: {} resolves to a private or loopback address.",
                    url.bare_host
                ));
            }
            addrs
        }
    };
    // Pre-flight: the repository exists, is not empty, and has the branch.
    let mut ls = git_guard(&url, &addrs);
    ls.extend(["ls-remote".into(), "--symref".into(), "--".into(), url.url()]);
    let out = match git(&ls, None, nav.config().preflight_timeout).await {
        Ok(o) => o,
        Err(timed_out) => return Err(preflight_error(&url, "", timed_out)),
    };
    if !out.status.success() {
        return Err(preflight_error(&url, &String::from_utf8_lossy(&out.stderr), false));
    }
    let listing = String::from_utf8_lossy(&out.stdout);
    if !listing.lines().any(|l| l.contains("\trefs/heads/") || l.ends_with("\tHEAD")) {
        return Err(format!("{name} is empty; there is nothing to index."));
    }
    let default_branch = listing
        .lines()
        .find_map(|l| l.strip_prefix("ref: refs/heads/").and_then(|r| r.strip_suffix("\tHEAD")))
        .map(str::to_owned);
    let index_branch = match &branch {
        Some(b) => {
            if !listing.lines().any(|l| l.ends_with(&format!("\trefs/heads/{b}"))) {
                return Err(format!("Branch '{b}' does not exist in {name}."));
            }
            b.clone()
        }
        None => default_branch.clone().unwrap_or_else(|| "main".into()),
    };
    // In the embedded store the records of another host than GitHub name the
    // owner path and carry the host as `source_host`, as `index` of a checkout
    // of the same URL writes them, so their source links follow the host. A
    // Chroma record holds the reference's fields only, so there the host stays
    // in the organization, where every reader of the collection finds it.
    let records_source_host = nav.source().indexer().is_some_and(|i| i.records_source_host());
    let source_host = (!url.is_github() && records_source_host).then(|| url.host.clone());
    let owner_path = if source_host.is_some() { &url.path } else { &name };
    let (organization, repository) = match owner_path.rsplit_once('/') {
        Some((o, r)) => (o.to_owned(), r.to_owned()),
        None => (owner_path.clone(), owner_path.clone()),
    };
    let namespace_id = rr_indexer::namespace_id(&organization, &repository, &index_branch);
    if let Some(r) = nav.catalogue().by_namespace(&namespace_id).map_err(|e| e.to_string())? {
        return Err(format!("{} is already added as repository {}.", r.name, r.id));
    }
    let id = nav
        .catalogue()
        .insert(&NewRepository {
            namespace_id,
            organization: organization.clone(),
            repository: repository.clone(),
            index_branch: index_branch.clone(),
            name: name.clone(),
            url: Some(url.url()),
            branch: branch.clone(),
            description: args.str("description"),
            status: "pending".into(),
            managed: true,
        })
        .map_err(|e| e.to_string())?;
    let job = Job { nav, id, url, addrs, branch, index_branch, organization, repository, source_host };
    tokio::spawn(async move {
        let (nav, id) = (job.nav.clone(), job.id);
        if let Err(e) = job.run().await {
            tracing::warn!(repository = id, error = %e, "add_repository indexing failed");
            let _ = nav.catalogue().set_status(id, "failed", Some(&e));
        }
    });
    Ok(pretty(&Output { repository_id: id, name, status: "pending", message: STARTED }))
}

struct Job {
    nav: Arc<NavService>,
    id: i64,
    url: RepoUrl,
    addrs: Vec<IpAddr>,
    branch: Option<String>,
    index_branch: String,
    organization: String,
    repository: String,
    source_host: Option<String>,
}

impl Job {
    async fn run(self) -> Result<(), String> {
        let nav = &self.nav;
        nav.catalogue().set_status(self.id, "processing", None).map_err(|e| e.to_string())?;
        let tmp = tempfile::Builder::new().prefix("rr-clone-").tempdir().map_err(|e| e.to_string())?;
        let dir = tmp.path().join("repo");
        let mut clone = git_guard(&self.url, &self.addrs);
        clone.extend(["clone".into(), "--depth".into(), "1".into(), "--single-branch".into()]);
        if let Some(b) = &self.branch {
            clone.extend(["--branch".into(), b.clone()]);
        }
        clone.extend(["--".into(), self.url.url(), dir.display().to_string()]);
        let host = if self.url.is_github() { "GitHub".to_owned() } else { self.url.bare_host.clone() };
        let out = git(&clone, None, nav.config().clone_timeout).await.map_err(|timed_out| {
            if timed_out {
                format!("{host} did not respond in time; try again.")
            } else {
                "git could not be run".into()
            }
        })?;
        if !out.status.success() {
            return Err(format!("Could not clone {}; try again.", self.url.name()));
        }
        let sha = git(&["rev-parse".into(), "HEAD".into()], Some(&dir), Duration::from_secs(10))
            .await
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
        nav.catalogue().set_commit(self.id, sha.as_deref(), &self.index_branch).map_err(|e| e.to_string())?;
        let _ = std::fs::remove_dir_all(dir.join(".git"));
        let (kept, note) = apply_limits(&dir)?;
        nav.catalogue().set_progress(self.id, 0, kept as i64).map_err(|e| e.to_string())?;
        let progress_nav = nav.clone();
        let id = self.id;
        let Some(indexer) = nav.source().indexer() else { return Err(super::ADD_UNAVAILABLE.into()) };
        let identity = rr_indexer::Identity {
            organization: self.organization.clone(),
            repository: self.repository.clone(),
            branch: self.index_branch.clone(),
            commit_sha: sha.clone().unwrap_or_default(),
            source_host: self.source_host.clone(),
        };
        let progress = Arc::new(move |p: rr_indexer::sync::SyncProgress| {
            if p.total > 0 {
                let done = (p.done * kept).checked_div(p.total).unwrap_or(0);
                let _ = progress_nav.catalogue().set_progress(id, done as i64, kept as i64);
            }
        });
        let namespace_id = indexer.index(dir.clone(), identity, progress).await?;
        let nav2 = nav.clone();
        tokio::task::spawn_blocking(move || {
            // A source read in snapshots takes a new one here, with the records just written.
            nav2.source().namespaces()?;
            nav2.rebuild(id, &namespace_id, note.as_deref())
        })
        .await
        .map_err(|e| e.to_string())??;
        Ok(())
    }
}

/// Deletes what the limits leave out: files of 1 MB or more, then, by
/// path, files past the 1,000th or past 100 MB in total. Returns the files
/// kept and a `Partially indexed: …` note when something was left out.
pub fn apply_limits(dir: &Path) -> Result<(usize, Option<String>), String> {
    let scan = rr_indexer::scan(dir, &rr_indexer::SelectionOptions::default()).map_err(|e| e.to_string())?;
    let mut files: Vec<(String, std::path::PathBuf, u64)> = scan
        .files
        .iter()
        .map(|f| (f.relative_path.clone(), f.path.clone(), std::fs::metadata(&f.path).map(|m| m.len()).unwrap_or(0)))
        .collect();
    files.sort();
    let (mut large, mut over_count, mut over_size, mut kept, mut total) = (0, 0, 0, 0usize, 0u64);
    for (_, path, size) in &files {
        let drop = if *size >= MAX_FILE_BYTES {
            large += 1;
            true
        } else if kept >= MAX_FILES {
            over_count += 1;
            true
        } else if total + size > MAX_TOTAL_BYTES {
            over_size += 1;
            true
        } else {
            kept += 1;
            total += size;
            false
        };
        if drop {
            std::fs::remove_file(path).map_err(|e| e.to_string())?;
        }
    }
    let mut parts = Vec::new();
    if large > 0 {
        parts.push(format!("{large} files of 1 MB or more skipped"));
    }
    if over_count > 0 {
        parts.push(format!("{over_count} files over the {MAX_FILES}-file limit left out"));
    }
    if over_size > 0 {
        parts.push(format!("{over_size} files over the 100 MB limit left out"));
    }
    Ok((kept, (!parts.is_empty()).then(|| format!("Partially indexed: {}", parts.join("; ")))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_normalised() {
        let u = parse_url("http://GitHub.com/octo/demo.git", false).unwrap();
        assert_eq!((u.url(), u.name()), ("https://github.com/octo/demo".to_owned(), "octo/demo".to_owned()));
        let u = parse_url("git@gitlab.com:group/sub/project.git", false).unwrap();
        assert_eq!(u.name(), "gitlab.com/group/sub/project");
        let u = parse_url("https://gitlab.com/group/project/-/tree/dev", false).unwrap();
        assert_eq!((u.path.as_str(), u.branch.as_deref()), ("group/project", Some("dev")));
        let u = parse_url("https://github.com/octo/demo/tree/feature/x", false).unwrap();
        assert_eq!(u.branch.as_deref(), Some("feature/x"));
        let u = parse_url("https://bitbucket.org/team/repo/src/dev", false).unwrap();
        assert_eq!(u.branch.as_deref(), Some("dev"));
    }

    #[test]
    fn public_addresses() {
        for ip in ["8.8.8.8", "2606:4700::1111"] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.1.1",
            "172.16.0.1",
            "169.254.169.254",
            "::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "0.0.0.0",
            "100.64.0.1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn branch_names() {
        assert!(valid_branch("feature/x"));
        for b in ["-x", "a/../b", "..", "a\0b", &"x".repeat(101)] {
            assert!(!valid_branch(b), "{b}");
        }
    }
}
