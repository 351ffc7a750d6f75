//! Turning chunks into records: document text, id and the 22 metadata fields.

use rr_core::{Chunk, Metadata};

use crate::IndexError;
use crate::chunking::{self, ChunkingOptions, ChunkingScheme};
use crate::classify::DecodedFile;
use crate::identity::{self, Identity};

pub use crate::schema::SCHEMA_VERSION;

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

/// The ids of the `chunks` records that [`chunk_file`] makes of a file of
/// `path` whose text hashes to `file_hash`, in chunk order: what a store
/// holds for a file it need not chunk again.
pub fn file_record_ids(
    namespace: &str,
    path: &str,
    file_hash: &str,
    scheme: ChunkingScheme,
    chunks: usize,
) -> Vec<String> {
    (0..chunks)
        .map(|index| match scheme {
            ChunkingScheme::Reference => identity::record_id(namespace, path, file_hash, index),
            scheme => identity::chunking_record_id(namespace, path, file_hash, scheme.version(), index),
        })
        .collect()
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
    let (chunks, strategy) = match options.scheme {
        ChunkingScheme::Reference => {
            chunking::chunk_document(&decoded.text, decoded.strategy, decoded.language, options, &prefix)
                .map(|chunks| (chunks, decoded.strategy.as_str()))
        }
        ChunkingScheme::Semantic => {
            chunking::chunk_semantic(&decoded.text, decoded.strategy, decoded.language, extension, options, &prefix)
                .map(|chunked| (chunked.chunks, chunked.strategy))
        }
    }
    .map_err(|source| IndexError::Chunk { path: path.to_owned(), source })?;
    let version = options.scheme.version();
    let count = chunks.len() as i64;
    let document_id = identity::document_id(&namespace, path);
    let file_name = path.rsplit('/').next().unwrap_or(path);
    Ok(chunks
        .into_iter()
        .enumerate()
        .map(|(index, chunk)| Chunk {
            id: match options.scheme {
                ChunkingScheme::Reference => identity::record_id(&namespace, path, &file_hash, index),
                scheme => identity::chunking_record_id(&namespace, path, &file_hash, scheme.version(), index),
            },
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
                chunking_strategy: strategy.to_owned(),
                chunking_version: version,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::classify;

    fn records(scheme: ChunkingScheme, path: &str, extension: &str, text: &str) -> Vec<Chunk> {
        let identity = Identity::new("acme", "widgets", "main", "");
        let decoded = classify(text.to_owned(), extension);
        let options = ChunkingOptions { scheme, ..ChunkingOptions::default() };
        chunk_file(&identity, path, extension, &decoded, options).unwrap()
    }

    #[test]
    fn semantic_records_carry_their_version_in_metadata_and_id() {
        let text = "//! Docs.\n\npub mod a;\n";
        let reference = records(ChunkingScheme::Reference, "src/lib.rs", ".rs", text);
        let semantic = records(ChunkingScheme::Semantic, "src/lib.rs", ".rs", text);
        assert_eq!(reference.iter().map(|r| r.metadata.chunking_version).collect::<Vec<_>>(), [2, 2]);
        assert_eq!(semantic.len(), 1);
        let record = &semantic[0];
        assert_eq!((record.metadata.chunking_version, record.metadata.chunking_strategy.as_str()), (3, "code"));
        let namespace = identity::namespace_id("acme", "widgets", "main");
        let file_hash = identity::sha256_hex(text);
        assert_eq!(record.id, identity::chunking_record_id(&namespace, "src/lib.rs", &file_hash, 3, 0));
        assert_ne!(record.id, reference[0].id);
        assert_eq!(
            record.document,
            "Source: acme/widgets@main:src/lib.rs\nType: rust\nSymbol: mod_item:a\n\n//! Docs.\n\npub mod a;\n"
        );
    }

    #[test]
    fn semantic_rst_records_have_sections() {
        let semantic = records(ChunkingScheme::Semantic, "docs/guide.rst", ".rst", "Guide\n=====\n\nText.\n");
        let m = &semantic[0].metadata;
        assert_eq!(
            (m.chunking_strategy.as_str(), m.section.as_str(), m.file_type.as_str()),
            ("sections", "Guide", "text")
        );
        assert!(
            semantic[0]
                .document
                .starts_with("Source: acme/widgets@main:docs/guide.rst\nType: text\nSection: Guide\n\n")
        );
        let reference = records(ChunkingScheme::Reference, "docs/guide.rst", ".rst", "Guide\n=====\n\nText.\n");
        assert_eq!(
            (reference[0].metadata.chunking_strategy.as_str(), reference[0].metadata.section.as_str()),
            ("generic", "")
        );
    }
}
