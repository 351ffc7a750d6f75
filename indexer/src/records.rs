//! Turning chunks into records: document text, id and the 22 metadata fields.

use rr_core::{Chunk, Metadata};

use crate::IndexError;
use crate::chunking::{self, CHUNKING_VERSION, ChunkingOptions};
use crate::classify::DecodedFile;
use crate::identity::{self, Identity};

/// The record schema version (metadata `schema_version`).
pub const SCHEMA_VERSION: i64 = 1;

/// The context prefix of a document: `Source:` and `Type:` lines, optional
/// `Section:` and `Symbol:` lines, then a blank line.
pub fn context_prefix(identity: &Identity, path: &str, file_type: &str, section: &str, symbol: &str) -> String {
    let mut prefix = format!(
        "Source: {}/{}@{}:{path}\nType: {file_type}\n",
        identity.organization, identity.repository, identity.branch
    );
    if !section.is_empty() {
        prefix.push_str("Section: ");
        prefix.push_str(section);
        prefix.push('\n');
    }
    if !symbol.is_empty() {
        prefix.push_str("Symbol: ");
        prefix.push_str(symbol);
        prefix.push('\n');
    }
    prefix.push('\n');
    prefix
}

/// The records of one decoded file, in chunk order.
///
/// `path` is the POSIX path relative to the repository root and `extension`
/// its lowercase extension with the dot (see [`crate::extension_of`]).
pub fn chunk_file(
    identity: &Identity,
    path: &str,
    extension: &str,
    decoded: &DecodedFile,
    options: ChunkingOptions,
) -> Result<Vec<Chunk>, IndexError> {
    let namespace = identity.namespace_id();
    let file_hash = identity::sha256_hex(&decoded.text);
    let prefix = |section: &str, symbol: &str| context_prefix(identity, path, decoded.file_type, section, symbol);
    let chunks = chunking::chunk_document(&decoded.text, decoded.strategy, decoded.language, options, &prefix)
        .map_err(|source| IndexError::Chunk { path: path.to_owned(), source })?;
    let count = chunks.len() as i64;
    let document_id = identity::document_id(&namespace, path);
    let file_name = path.rsplit('/').next().unwrap_or(path);
    Ok(chunks
        .into_iter()
        .enumerate()
        .map(|(index, chunk)| Chunk {
            id: identity::record_id(&namespace, path, &file_hash, index),
            document: prefix(&chunk.section, &chunk.symbol) + &chunk.excerpt,
            metadata: Metadata {
                schema_version: SCHEMA_VERSION,
                namespace_id: namespace.clone(),
                organization: identity.organization.clone(),
                repository: identity.repository.clone(),
                branch: identity.branch.clone(),
                path: path.to_owned(),
                file_name: file_name.to_owned(),
                file_extension: extension.to_owned(),
                file_type: decoded.file_type.to_owned(),
                language: decoded.language.to_owned(),
                document_id: document_id.clone(),
                file_hash: file_hash.clone(),
                chunk_hash: identity::sha256_hex(&chunk.excerpt),
                chunk_index: index as i64,
                chunk_count: count,
                chunking_strategy: decoded.strategy.as_str().to_owned(),
                chunking_version: CHUNKING_VERSION,
                start_line: chunk.start_line as i64,
                end_line: chunk.end_line as i64,
                section: chunk.section,
                symbol: chunk.symbol,
                indexed_commit_sha: identity.commit_sha.clone(),
                extra: identity
                    .source_host
                    .iter()
                    .map(|host| (rr_core::render::SOURCE_HOST.to_owned(), host.clone().into()))
                    .collect(),
            },
        })
        .collect())
}
