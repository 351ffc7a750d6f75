//! Who a record belongs to, and the deterministic ids and hashes derived from it.

use sha2::{Digest, Sha256};

use crate::IndexError;
use crate::pytext;

/// The repository a folder is indexed as: `organization/repository@branch`,
/// plus the commit it was read at (may be empty).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    pub organization: String,
    pub repository: String,
    pub branch: String,
    pub commit_sha: String,
    /// Where the repository is hosted, when that is not GitHub: written as
    /// the record's `source_host` metadata, which source links follow
    /// (`rr_core::render::source_url`, key [`rr_core::render::SOURCE_HOST`]). `None` writes no key, as the
    /// reference does, and links go to GitHub; `Some("")` says the host is
    /// unknown, and no link is rendered.
    pub source_host: Option<String>,
}

impl Identity {
    pub fn new(
        organization: impl Into<String>,
        repository: impl Into<String>,
        branch: impl Into<String>,
        commit_sha: impl Into<String>,
    ) -> Self {
        Identity {
            organization: organization.into(),
            repository: repository.into(),
            branch: branch.into(),
            commit_sha: commit_sha.into(),
            source_host: None,
        }
    }

    /// Organization, repository and branch must be non-empty, free of NUL and
    /// of leading or trailing whitespace (the reference's rule).
    pub fn validate(&self) -> Result<(), IndexError> {
        for (field, value) in
            [("organization", &self.organization), ("repository", &self.repository), ("branch", &self.branch)]
        {
            if value.is_empty() || pytext::strip(value) != value || value.contains('\0') {
                return Err(IndexError::InvalidIdentity { field });
            }
        }
        Ok(())
    }

    /// The namespace of this identity: see [`namespace_id`].
    pub fn namespace_id(&self) -> String {
        namespace_id(&self.organization, &self.repository, &self.branch)
    }
}

/// Lowercase hex SHA-256 of the UTF-8 bytes of `text`.
pub fn sha256_hex(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let mut out = String::with_capacity(64);
    for byte in digest {
        out.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
        out.push(char::from_digit(u32::from(byte & 0xf), 16).unwrap_or('0'));
    }
    out
}

/// SHA-256 of the canonical JSON array `[organization, repository, branch]`:
/// no spaces, non-ASCII characters kept as they are.
pub fn namespace_id(organization: &str, repository: &str, branch: &str) -> String {
    let mut canonical = String::from("[");
    for (i, part) in [organization, repository, branch].into_iter().enumerate() {
        if i > 0 {
            canonical.push(',');
        }
        pytext::json_string(part, &mut canonical);
    }
    canonical.push(']');
    sha256_hex(&canonical)
}

/// `repodoc:v1:<namespace_id>:<sha256(path)>`.
pub fn document_id(namespace: &str, path: &str) -> String {
    format!("repodoc:v1:{namespace}:{}", sha256_hex(path))
}

/// `repochunk:v1:<namespace_id>:<sha256(path)>:<file_hash>:<chunk_index, 8 digits>`.
pub fn record_id(namespace: &str, path: &str, file_hash: &str, index: usize) -> String {
    format!("repochunk:v1:{namespace}:{}:{file_hash}:{index:08}", sha256_hex(path))
}

/// The id of a record of another chunking than the reference's:
/// `repochunk:v1:<namespace_id>:<sha256(path)>:<file_hash>:c<chunking_version>:<chunk_index, 8 digits>`.
///
/// The chunking is part of the id because a sync diffs by id: records of one
/// chunking must never pass for the other's, or re-indexing an unchanged file
/// with another chunking would keep the old records as "unchanged".
pub fn chunking_record_id(namespace: &str, path: &str, file_hash: &str, chunking_version: i64, index: usize) -> String {
    format!("repochunk:v1:{namespace}:{}:{file_hash}:c{chunking_version}:{index:08}", sha256_hex(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_empty_text() {
        assert_eq!(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    #[test]
    fn namespace_id_is_sha256_of_canonical_json() {
        // Values from Python: sha256(json.dumps([o, r, b], ensure_ascii=False, separators=(",", ":"))).
        assert_eq!(
            namespace_id("acme", "widgets", "main"),
            "ba357c58ec6dbc82c5d1e39f86be7ec68de3cabc037821f6653a2bbd7cd8c2f0"
        );
        // Non-ASCII characters are hashed as UTF-8, not as \u escapes.
        assert_eq!(
            namespace_id("Ünïcode-Org", "répo", "feature/ß-日本"),
            "e0186095fd7960c0309a0a3195451942161154d908497cdd69b9f99b63d6da6c"
        );
        assert_eq!(
            namespace_id("we\"ird\\org", "tab\there", "ctl\u{1}"),
            "b413d2c7e087e378103e43105c4e3ff25b6e5511772979a44a6386f4593ea4e7"
        );
    }

    #[test]
    fn ids_have_the_reference_layout() {
        let ns = namespace_id("acme", "widgets", "main");
        let path_hash = sha256_hex("docs/café.md");
        assert_eq!(document_id(&ns, "docs/café.md"), format!("repodoc:v1:{ns}:{path_hash}"));
        assert_eq!(record_id(&ns, "docs/café.md", "ff", 7), format!("repochunk:v1:{ns}:{path_hash}:ff:00000007"));
        assert_eq!(
            chunking_record_id(&ns, "docs/café.md", "ff", 3, 7),
            format!("repochunk:v1:{ns}:{path_hash}:ff:c3:00000007")
        );
    }

    #[test]
    fn identity_validation() {
        assert!(Identity::new("acme", "widgets", "main", "").validate().is_ok());
        for bad in [
            Identity::new("", "w", "main", ""),
            Identity::new("acme ", "w", "main", ""),
            Identity::new("acme", "w\u{a0}", "main", ""),
            Identity::new("acme", "w", "ma\0in", ""),
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
