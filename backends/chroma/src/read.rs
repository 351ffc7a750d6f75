//! Reading a whole collection back: every record id, or every record with
//! its document and metadata, page by page (`POST .../collections/<id>/get`
//! with `limit`/`offset`, no `where`).
//!
//! The navigation tools use it to rebuild files from the chunks a Chroma
//! collection holds: the ids alone are a cheap fingerprint (a record's id
//! names its namespace, document and file hash, so any change of content
//! changes the set), and the full read happens only when that set changed.
//! Reads send the configured token, as writes do: there is no caller whose
//! header could be passed through.

use rr_core::{Chunk, EmbeddedChunk};
use rr_http::json::null_as_default;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::reply;
use crate::store::{ChromaError, ChromaStore};

/// The operation name of a page of a whole-collection read.
pub const READ_OPERATION: &str = "Chroma collection read";

#[derive(Serialize)]
struct ReadBody<'a> {
    limit: usize,
    offset: usize,
    include: &'a [&'a str],
}

#[derive(Serialize)]
struct ReadByIdBody<'a> {
    ids: &'a [String],
    include: &'a [&'a str],
}

#[derive(Debug, Default, Deserialize)]
struct ReadResponse {
    #[serde(default, deserialize_with = "null_as_default")]
    ids: Vec<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    documents: Vec<Option<String>>,
    #[serde(default, deserialize_with = "null_as_default")]
    metadatas: Vec<Value>,
    #[serde(default, deserialize_with = "null_as_default")]
    embeddings: Vec<Vec<f32>>,
}

impl ChromaStore {
    /// Every record id of the collection, in Chroma's order; `None` when the
    /// collection does not exist.
    pub async fn all_ids(&self) -> Result<Option<Vec<String>>, ChromaError> {
        Ok(self.read_all(&[]).await?.map(|pages| pages.into_iter().flat_map(|p| p.ids).collect()))
    }

    /// Every record of the collection with its document and metadata (a
    /// `null` one reads as empty), in Chroma's order; `None` when the
    /// collection does not exist. A page whose lists do not line up, or
    /// whose metadata has the wrong types, is an error (see `reply`).
    pub async fn all_records(&self) -> Result<Option<Vec<Chunk>>, ChromaError> {
        let Some(pages) = self.read_all(&["documents", "metadatas"]).await? else {
            return Ok(None);
        };
        let mut out = Vec::new();
        for page in pages {
            reply::same_lengths(
                READ_OPERATION,
                page.ids.len(),
                &[("documents", page.documents.len()), ("metadatas", page.metadatas.len())],
            )?;
            for (i, ((id, document), metadata)) in
                page.ids.into_iter().zip(page.documents).zip(page.metadatas).enumerate()
            {
                let metadata = reply::metadata(READ_OPERATION, i, metadata)?;
                out.push(Chunk { id, document: document.unwrap_or_default(), metadata });
            }
        }
        Ok(Some(out))
    }

    /// The records `ids` names that the collection holds, each with its
    /// document, metadata and vector, read `page_size` ids per request (in
    /// no promised order; an id it does not hold is left out). `None` when
    /// the collection does not exist.
    pub async fn records_with_vectors(&self, ids: &[String]) -> Result<Option<Vec<EmbeddedChunk>>, ChromaError> {
        let Some(collection) = self.find_collection().await? else {
            return Ok(None);
        };
        let url = self.collection_operation_url(&collection, "get");
        let mut out = Vec::with_capacity(ids.len());
        for batch in ids.chunks(self.page_size) {
            let body = ReadByIdBody { ids: batch, include: &["documents", "metadatas", "embeddings"] };
            let page: ReadResponse =
                self.http.post_json(READ_OPERATION, &url, &body, self.write_authorization()).await?;
            reply::same_lengths(
                READ_OPERATION,
                page.ids.len(),
                &[
                    ("documents", page.documents.len()),
                    ("metadatas", page.metadatas.len()),
                    ("embeddings", page.embeddings.len()),
                ],
            )?;
            let rows = page.ids.into_iter().zip(page.documents).zip(page.metadatas).zip(page.embeddings);
            for (i, (((id, document), metadata), embedding)) in rows.enumerate() {
                let metadata = reply::metadata(READ_OPERATION, i, metadata)?;
                let chunk = Chunk { id, document: document.unwrap_or_default(), metadata };
                out.push(EmbeddedChunk { chunk, embedding });
            }
        }
        Ok(Some(out))
    }

    async fn read_all(&self, include: &[&str]) -> Result<Option<Vec<ReadResponse>>, ChromaError> {
        let Some(id) = self.find_collection().await? else {
            return Ok(None);
        };
        let url = self.collection_operation_url(&id, "get");
        let mut pages = Vec::new();
        let mut offset = 0;
        loop {
            let body = ReadBody { limit: self.page_size, offset, include };
            let page: ReadResponse =
                self.http.post_json(READ_OPERATION, &url, &body, self.write_authorization()).await?;
            let full = page.ids.len() >= self.page_size;
            offset += page.ids.len();
            pages.push(page);
            if !full {
                return Ok(Some(pages));
            }
        }
    }
}
