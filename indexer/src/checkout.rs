//! The identity of a local folder: what its git checkout says about itself,
//! under the flags a user gives.
//!
//! A folder that is the top level of a git work tree is indexed as the
//! repository its `origin` remote names, at `HEAD`'s branch and commit; the
//! facts come from the `git` command (as the user's own git would report
//! them, `url.*.insteadOf` included), not from a reimplementation of its
//! file formats. A subfolder of a checkout is not the repository: its paths
//! would not be the repository's paths, so it is treated like any folder.
//!
//! The remote decides where source links go ([`Identity::source_host`]):
//! GitHub records are the reference's, other hosts are named in the record,
//! and a folder with neither a remote nor a user-given organization says
//! its host is unknown, so that no link to a repository that does not exist
//! is ever rendered.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::Identity;

/// A repository as a remote URL names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remote {
    /// Lower-case host of the web interface (`github.com`, `gitlab.com`; a
    /// port only for an `http(s)` URL that has one).
    pub host: String,
    /// Everything before the last path segment: `owner`, or `group/subgroup`.
    pub owner: String,
    /// The last path segment without `.git`.
    pub name: String,
}

/// Parses a remote URL: `https://[user@]host[:port]/owner/name[.git]`,
/// `http://`, `ssh://[user@]host[:port]/owner/name[.git]`, `git://`,
/// `git+ssh://`, and the scp-like `[user@]host:owner/name[.git]`. Credentials
/// are dropped. GitLab's nested groups keep every group in `owner`; GitHub
/// paths must be exactly `owner/name`. `None` for local paths, `file://` and
/// anything without an `owner/name` path.
pub fn parse_remote_url(url: &str) -> Option<Remote> {
    let url = url.trim();
    let (host, keep_port, path) = match url.split_once("://") {
        Some((scheme, rest)) => {
            let scheme = scheme.to_ascii_lowercase();
            let web = matches!(scheme.as_str(), "https" | "http");
            if !web && !matches!(scheme.as_str(), "ssh" | "git" | "git+ssh" | "ssh+git") {
                return None;
            }
            let (authority, path) = rest.split_once('/')?;
            (authority.rsplit_once('@').map_or(authority, |(_, host)| host), web, path)
        }
        None => {
            let (before, path) = url.split_once(':')?;
            // `C:\repo` and `./a:b` are paths, not hosts.
            if before.contains(['/', '\\']) || before.len() < 2 {
                return None;
            }
            (before.rsplit_once('@').map_or(before, |(_, host)| host), false, path)
        }
    };
    let (bare, port) = match host.strip_prefix('[') {
        Some(v6) => {
            let (inner, after) = v6.split_once(']')?;
            (format!("[{inner}]"), after.strip_prefix(':'))
        }
        None => match host.rsplit_once(':') {
            Some((h, p)) => (h.to_owned(), Some(p)),
            None => (host.to_owned(), None),
        },
    };
    let bare = bare.to_ascii_lowercase().trim_end_matches('.').to_owned();
    let valid_host = |h: &str| {
        !h.is_empty() && h.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'))
    };
    if !valid_host(&bare) || port.is_some_and(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit())) {
        return None;
    }
    let bare = match bare.as_str() {
        // SSH endpoints of the big hosts, whose web pages live on the main name.
        "ssh.github.com" | "www.github.com" => "github.com".to_owned(),
        "altssh.gitlab.com" | "www.gitlab.com" => "gitlab.com".to_owned(),
        "altssh.bitbucket.org" | "www.bitbucket.org" => "bitbucket.org".to_owned(),
        _ => bare,
    };
    let host = match port {
        Some(p) if keep_port && bare != "github.com" => format!("{bare}:{p}"),
        _ => bare,
    };
    let path = path.trim_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path).trim_end_matches('/');
    let segments: Vec<&str> = path.split('/').collect();
    let valid = segments.len() >= 2
        && (host != "github.com" || segments.len() == 2)
        && segments.iter().all(|s| !s.is_empty() && *s != "." && *s != ".." && !s.contains(char::is_whitespace));
    if !valid {
        return None;
    }
    let (name, owner) = segments.split_last()?;
    Some(Remote { host, owner: owner.join("/"), name: (*name).to_owned() })
}

/// What a checkout's git reports; each part `None` when git has no answer
/// (no `origin`, a detached or unborn `HEAD`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checkout {
    /// The `origin` remote, when its URL names a repository.
    pub remote: Option<Remote>,
    pub branch: Option<String>,
    pub commit_sha: Option<String>,
}

/// Runs `git -C <dir> <args>`; its trimmed stdout on success.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

/// The checkout whose top level is `root`; `None` when `root` is not the top
/// of a git work tree (or git is not installed, or refuses the folder).
pub fn read_checkout(root: &Path) -> Option<Checkout> {
    let root = std::fs::canonicalize(root).ok()?;
    let top = git(&root, &["rev-parse", "--show-toplevel"])?;
    if std::fs::canonicalize(top).ok()? != root {
        return None;
    }
    Some(Checkout {
        remote: git(&root, &["remote", "get-url", "origin"]).as_deref().and_then(parse_remote_url),
        branch: git(&root, &["symbolic-ref", "--quiet", "--short", "HEAD"]),
        commit_sha: git(&root, &["rev-parse", "--quiet", "--verify", "HEAD^{commit}"]),
    })
}

/// What the user said on the command line; each set value wins over the checkout.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdentityFlags {
    pub organization: Option<String>,
    pub repository: Option<String>,
    pub branch: Option<String>,
    pub commit_sha: Option<String>,
}

/// The identity `root` is indexed as: each field from its flag, else from
/// the checkout, else `local`, the folder's name, `main` and no commit.
///
/// The host is the `origin` remote's (GitHub writes no `source_host`, so its
/// records are the reference's). Without a remote, a user-given organization
/// names a GitHub repository as it does for the reference indexer; otherwise
/// the host is unknown and no source link is rendered.
pub fn local_identity(root: &Path, flags: &IdentityFlags) -> Identity {
    let checkout = read_checkout(root).unwrap_or_default();
    let remote = checkout.remote.as_ref();
    let folder = std::fs::canonicalize(root)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "repository".into());
    let source_host = match remote {
        Some(r) if r.host == "github.com" => None,
        Some(r) => Some(r.host.clone()),
        None if flags.organization.is_some() => None,
        None => Some(String::new()),
    };
    Identity {
        organization: flags
            .organization
            .clone()
            .or_else(|| remote.map(|r| r.owner.clone()))
            .unwrap_or_else(|| "local".into()),
        repository: flags.repository.clone().or_else(|| remote.map(|r| r.name.clone())).unwrap_or(folder),
        branch: flags.branch.clone().or(checkout.branch).unwrap_or_else(|| "main".into()),
        commit_sha: flags.commit_sha.clone().or(checkout.commit_sha).unwrap_or_default(),
        source_host,
    }
}

#[cfg(test)]
mod tests {
    use rr_testkit::git;

    use super::*;

    fn remote(host: &str, owner: &str, name: &str) -> Option<Remote> {
        Some(Remote { host: host.into(), owner: owner.into(), name: name.into() })
    }

    #[test]
    fn remote_urls() {
        let gh = remote("github.com", "octo", "demo");
        for url in [
            "https://github.com/octo/demo.git",
            "https://github.com/octo/demo",
            "https://github.com/octo/demo/",
            "https://x-access-token:secret@github.com/octo/demo.git",
            "http://GitHub.com/octo/demo",
            "git@github.com:octo/demo.git",
            "git@github.com:octo/demo",
            "github.com:octo/demo.git",
            "ssh://git@github.com/octo/demo.git",
            "ssh://git@ssh.github.com:443/octo/demo.git",
            "git+ssh://git@github.com/octo/demo",
            "git://github.com/octo/demo.git",
            "https://github.com:443/octo/demo",
            "  https://github.com/octo/demo.git\n",
        ] {
            assert_eq!(parse_remote_url(url), gh, "{url}");
        }
        let gl = remote("gitlab.com", "group/sub", "project");
        for url in [
            "git@gitlab.com:group/sub/project.git",
            "https://gitlab.com/group/sub/project.git",
            "ssh://git@altssh.gitlab.com:443/group/sub/project.git",
        ] {
            assert_eq!(parse_remote_url(url), gl, "{url}");
        }
        assert_eq!(
            parse_remote_url("https://git.example.com:8443/team/tool.git"),
            remote("git.example.com:8443", "team", "tool")
        );
        assert_eq!(
            parse_remote_url("ssh://git@git.example.com:2222/team/tool"),
            remote("git.example.com", "team", "tool")
        );
        assert_eq!(parse_remote_url("git@bitbucket.org:team/repo.git"), remote("bitbucket.org", "team", "repo"));
        assert_eq!(
            parse_remote_url("https://codeberg.org/forgejo/forgejo"),
            remote("codeberg.org", "forgejo", "forgejo")
        );
        for url in [
            "/srv/git/demo.git",
            "../demo",
            "file:///srv/git/octo/demo.git",
            "C:\\repos\\demo",
            "https://github.com/octo",
            "https://github.com/octo/demo/extra",
            "https://gitlab.com/solo",
            "https://gitlab.com/a//b",
            "https://gitlab.com/a/../b",
            "https://git lab.com/a/b",
            "https://host:port/a/b",
            "ftp://example.com/a/b",
            "",
        ] {
            assert_eq!(parse_remote_url(url), None, "{url}");
        }
    }

    #[test]
    fn a_folder_outside_git_is_local_with_an_unknown_host() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("widgets");
        std::fs::create_dir(&folder).unwrap();
        let identity = local_identity(&folder, &IdentityFlags::default());
        assert_eq!(
            identity,
            Identity {
                organization: "local".into(),
                repository: "widgets".into(),
                branch: "main".into(),
                commit_sha: String::new(),
                source_host: Some(String::new()),
            }
        );
        // An organization given by the user names a GitHub repository, as for the reference.
        let flags = IdentityFlags { organization: Some("acme".into()), ..Default::default() };
        let identity = local_identity(&folder, &flags);
        assert_eq!((identity.organization.as_str(), identity.source_host), ("acme", None));
    }

    #[test]
    fn a_checkout_names_itself() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("clone");
        std::fs::create_dir(&root).unwrap();
        git(&root, &["init", "--quiet", "--initial-branch", "feature/x"]);
        // Unborn HEAD, no remote: the branch is known, nothing else.
        let identity = local_identity(&root, &IdentityFlags::default());
        assert_eq!((identity.branch.as_str(), identity.commit_sha.as_str()), ("feature/x", ""));
        assert_eq!((identity.organization.as_str(), identity.source_host.as_deref()), ("local", Some("")));
        std::fs::write(root.join("a.txt"), "a").unwrap();
        git(&root, &["add", "a.txt"]);
        git(&root, &["commit", "--quiet", "-m", "a"]);
        let sha = git(&root, &["rev-parse", "HEAD"]);
        git(&root, &["remote", "add", "origin", "https://token:secret@github.com/octo/demo.git"]);
        let identity = local_identity(&root, &IdentityFlags::default());
        assert_eq!(identity, Identity::new("octo", "demo", "feature/x", sha.clone()));
        git(&root, &["remote", "set-url", "origin", "git@gitlab.com:group/sub/project.git"]);
        let identity = local_identity(&root, &IdentityFlags::default());
        assert_eq!(
            (identity.organization.as_str(), identity.repository.as_str(), identity.source_host.as_deref()),
            ("group/sub", "project", Some("gitlab.com"))
        );
        // Every flag wins over the checkout; the host stays the remote's.
        let flags = IdentityFlags {
            organization: Some("acme".into()),
            repository: Some("widgets".into()),
            branch: Some("main".into()),
            commit_sha: Some(String::new()),
        };
        let identity = local_identity(&root, &flags);
        assert_eq!(identity.source_host.as_deref(), Some("gitlab.com"));
        assert_eq!(
            (identity.organization, identity.repository, identity.branch, identity.commit_sha),
            ("acme".into(), "widgets".into(), "main".into(), String::new())
        );
        // Detached HEAD: the commit, and the default branch name.
        git(&root, &["checkout", "--quiet", "--detach"]);
        let identity = local_identity(&root, &IdentityFlags::default());
        assert_eq!((identity.branch.as_str(), identity.commit_sha.as_str()), ("main", sha.as_str()));
        // A subfolder of the checkout is not the repository.
        std::fs::create_dir(root.join("sub")).unwrap();
        let identity = local_identity(&root.join("sub"), &IdentityFlags::default());
        assert_eq!((identity.organization.as_str(), identity.repository.as_str()), ("local", "sub"));
        assert_eq!(identity.source_host.as_deref(), Some(""));
    }
}
