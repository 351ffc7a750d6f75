//! The search side: the query request, its filters and its reply, and
//! [`ChromaStore`] as a [`VectorStore`], with the cached-id retry the crate
//! docs describe.

use std::sync::PoisonError;

use async_trait::async_trait;
use rr_core::{BackendError, CallContext, Candidate, Chunk, DistanceKind, SearchFilter, VectorQuery, VectorStore};
use rr_http::HttpError;
use rr_http::json::{self, null_as_default};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::reply;
use crate::store::{ChromaError, ChromaStore, LOOKUP_OPERATION, STORE_NAME};

/// The operation name of the query in errors and logs.
pub const QUERY_OPERATION: &str = "Chroma query";

#[derive(Serialize)]
struct QueryBody<'a> {
    query_embeddings: [&'a [f32]; 1],
    n_results: usize,
    #[serde(rename = "where", skip_serializing_if = "Option::is_none")]
    where_clause: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    where_document: Option<Value>,
    include: [&'static str; 3],
}

/// Chroma answers one list per query embedding; we send one.
#[derive(Debug, Default, Deserialize)]
struct QueryResponse {
    #[serde(default, deserialize_with = "null_as_default")]
    ids: Vec<Option<Vec<Option<String>>>>,
    #[serde(default, deserialize_with = "null_as_default")]
    documents: Vec<Option<Vec<Option<String>>>>,
    #[serde(default, deserialize_with = "null_as_default")]
    metadatas: Vec<Option<Vec<Value>>>,
    #[serde(default, deserialize_with = "null_as_default")]
    distances: Vec<Option<Vec<Option<f64>>>>,
}

impl QueryResponse {
    /// Candidates in Chroma's order (closest first). The reply must hold one
    /// list per field (one query embedding was sent, and all three fields
    /// were asked for), all as long as the ids; a `null` document or distance
    /// inside a list reads as empty, as does a `null` metadata (a record
    /// written without one).
    fn into_candidates(self) -> Result<Vec<Candidate>, HttpError> {
        fn only<T>(name: &str, lists: Vec<Option<Vec<T>>>) -> Result<Vec<T>, HttpError> {
            let count = lists.len();
            match <[Option<Vec<T>>; 1]>::try_from(lists) {
                Ok([Some(list)]) => Ok(list),
                Ok([None]) => Err(reply::malformed(QUERY_OPERATION, format!("`{name}` holds null instead of a list"))),
                Err(_) => Err(reply::malformed(
                    QUERY_OPERATION,
                    format!("`{name}` holds {count} lists for 1 query embedding"),
                )),
            }
        }
        let ids = only("ids", self.ids)?;
        let documents = only("documents", self.documents)?;
        let metadatas = only("metadatas", self.metadatas)?;
        let distances = only("distances", self.distances)?;
        reply::same_lengths(
            QUERY_OPERATION,
            ids.len(),
            &[("documents", documents.len()), ("metadatas", metadatas.len()), ("distances", distances.len())],
        )?;
        ids.into_iter()
            .zip(documents)
            .zip(metadatas)
            .zip(distances)
            .enumerate()
            .map(|(i, (((id, document), metadata), distance))| {
                Ok(Candidate {
                    chunk: Chunk {
                        id: id.unwrap_or_default(),
                        document: document.unwrap_or_default(),
                        metadata: reply::metadata(QUERY_OPERATION, i, metadata)?,
                    },
                    distance,
                })
            })
            .collect()
    }
}

/// `where`: one `$eq` clause per non-empty field, alone or under `$and`.
pub fn where_clause(filter: &SearchFilter) -> Option<Value> {
    let mut clauses: Vec<Value> =
        filter.metadata_equalities().into_iter().map(|(field, value)| json!({ field: { "$eq": value } })).collect();
    match clauses.len() {
        0 => None,
        1 => clauses.pop(),
        _ => Some(json!({ "$and": clauses })),
    }
}

/// `where_document`: the path glob as a regular expression on the document's
/// `Source:` line.
pub fn where_document(filter: &SearchFilter) -> Option<Value> {
    filter.path.as_ref().map(|glob| json!({ "$regex": glob.document_regex() }))
}

impl ChromaStore {
    /// Forgets the cached id if it is still `id` (another search may have
    /// refreshed it meanwhile).
    fn forget(&self, id: &str) {
        let mut cached = self.collection_id.lock().unwrap_or_else(PoisonError::into_inner);
        if cached.as_deref() == Some(id) {
            *cached = None;
        }
    }

    async fn query_collection(
        &self,
        id: &str,
        query: &VectorQuery,
        ctx: &CallContext,
    ) -> Result<Vec<Candidate>, ChromaError> {
        // JSON has no NaN or infinity: serde_json would send null in their place.
        if let Some(detail) = json::non_finite(query.embedding.iter().copied()) {
            return Err(HttpError::Encode { operation: QUERY_OPERATION.to_owned(), detail }.into());
        }
        let body = QueryBody {
            query_embeddings: [&query.embedding],
            n_results: query.n_results,
            where_clause: where_clause(&query.filter),
            where_document: where_document(&query.filter),
            include: ["documents", "metadatas", "distances"],
        };
        let response: QueryResponse =
            self.http.post_json(QUERY_OPERATION, &self.query_url(id), &body, self.authorization(ctx)).await?;
        Ok(response.into_candidates()?)
    }

    /// Runs `query`, resolving (or reusing) the collection id as the crate
    /// docs describe.
    pub async fn search(&self, query: &VectorQuery, ctx: &CallContext) -> Result<Vec<Candidate>, ChromaError> {
        let Some(cached) = self.cached_collection_id() else {
            let id = self.lookup_collection_id(ctx).await?;
            return self.query_collection(&id, query, ctx).await;
        };
        let error = match self.query_collection(&cached, query, ctx).await {
            Ok(candidates) => return Ok(candidates),
            Err(error) => error,
        };
        tracing::debug!(collection_id = %cached, "query with the cached collection id failed; looking the collection up again");
        self.forget(&cached);
        let fresh = self.lookup_collection_id(ctx).await?;
        if fresh == cached {
            return Err(error);
        }
        tracing::debug!(old = %cached, new = %fresh, "the collection id changed; querying again");
        self.query_collection(&fresh, query, ctx).await
    }
}

#[async_trait]
impl VectorStore for ChromaStore {
    fn name(&self) -> &str {
        STORE_NAME
    }

    async fn query(&self, query: &VectorQuery, ctx: &CallContext) -> Result<Vec<Candidate>, BackendError> {
        self.search(query, ctx).await.map_err(|e| {
            let summary = e.summary();
            BackendError::new(STORE_NAME, e).with_summary(summary)
        })
    }

    /// Chroma reports `dimension` on the collection once it holds a vector.
    async fn dimension(&self, ctx: &CallContext) -> Result<Option<usize>, BackendError> {
        #[derive(Default, Deserialize)]
        struct CollectionDimension {
            #[serde(default)]
            dimension: Option<Value>,
        }
        let auth = self.authorization.as_deref().or(ctx.authorization.as_deref()).filter(|a| !a.is_empty());
        let c: CollectionDimension = self
            .http
            .get_json(LOOKUP_OPERATION, &self.collection_url, auth)
            .await
            .map_err(|e| BackendError::new(STORE_NAME, e))?;
        Ok(c.dimension.and_then(|d| d.as_u64()).map(|d| d as usize))
    }

    fn distance_kind(&self) -> Option<DistanceKind> {
        *self.distance_kind.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rr_core::Metadata;

    fn filter(org: &str, repo: &str, branch: &str, path: &str) -> SearchFilter {
        SearchFilter::scoped(org, repo, branch, path)
    }

    #[test]
    fn where_clauses_follow_the_reference() {
        assert_eq!(where_clause(&filter("", "", "", "")), None);
        assert_eq!(where_clause(&filter("", "", "main", "")), Some(json!({"branch": {"$eq": "main"}})));
        assert_eq!(
            where_clause(&filter("Acme", "widgets", "", "")),
            Some(json!({"$and": [{"organization": {"$eq": "Acme"}}, {"repository": {"$eq": "widgets"}}]}))
        );
        assert_eq!(where_document(&filter("", "", "", "")), None);
        assert_eq!(
            where_document(&filter("", "", "", "/docs/*")),
            Some(json!({"$regex": "^Source: [^\\n]+:docs/.*(?:\\n|$)"}))
        );
    }

    fn candidates(body: &str) -> Result<Vec<Candidate>, String> {
        let response: QueryResponse = json::decode(body.as_bytes()).map_err(|e| e.to_string())?;
        response.into_candidates().map_err(|e| e.to_string())
    }

    #[test]
    fn responses_tolerate_nulls_inside_the_lists() {
        let c = candidates(
            r#"{"ids":[["a","b",null]],"documents":[["doc a",null,"c"]],"metadatas":[[{"path":"x.go","start_line":3},null,{}]],
                "distances":[[0.25,null,0.5]],"embeddings":null,"included":["documents"]}"#,
        )
        .unwrap();
        assert_eq!(c.len(), 3);
        assert_eq!((c[0].chunk.id.as_str(), c[0].chunk.document.as_str()), ("a", "doc a"));
        assert_eq!((c[0].chunk.metadata.path.as_str(), c[0].chunk.metadata.start_line), ("x.go", 3));
        assert_eq!(c[0].distance, Some(0.25));
        assert_eq!((c[1].chunk.document.as_str(), c[1].distance), ("", None));
        assert_eq!(c[1].chunk.metadata, Metadata::default());
        assert_eq!(c[2].chunk.id, "");
        let empty = r#"{"ids":[[]],"documents":[[]],"metadatas":[[]],"distances":[[]]}"#;
        assert!(candidates(empty).unwrap().is_empty());
    }

    /// The malformed-reply table. Each reply a lenient reader
    /// turned into "no results" or a `/@` result is an error naming what
    /// was wrong.
    #[test]
    fn malformed_replies_are_errors() {
        let prefix = "Chroma query returned a malformed reply: ";
        let table = [
            ("{}", "`ids` holds 0 lists for 1 query embedding"),
            ("null", "`ids` holds 0 lists for 1 query embedding"),
            (r#"{"ids":[null]}"#, "`ids` holds null instead of a list"),
            (r#"{"ids":[["a"]]}"#, "`documents` holds 0 lists for 1 query embedding"),
            (
                r#"{"ids":[["a"],["b"]],"documents":[["d"]],"metadatas":[[{}]],"distances":[[1]]}"#,
                "`ids` holds 2 lists for 1 query embedding",
            ),
            (
                r#"{"ids":[["a","b"]],"documents":[["d"]],"metadatas":[[{},{}]],"distances":[[1,2]]}"#,
                "2 ids but 1 documents",
            ),
            (r#"{"ids":[["a"]],"documents":[["d"]],"metadatas":[[]],"distances":[[1]]}"#, "1 ids but 0 metadatas"),
            (r#"{"ids":[["a"]],"documents":[["d"]],"metadatas":[[{}]],"distances":[[1,2]]}"#, "1 ids but 2 distances"),
            (
                r#"{"ids":[["a"]],"documents":[["d"]],"metadatas":[["x"]],"distances":[[1]]}"#,
                "metadata 0 is a string, not an object",
            ),
            (
                r#"{"ids":[["a"]],"documents":[["d"]],"metadatas":[[{"organization":1,"repository":[],"branch":{}}]],"distances":[[1]]}"#,
                "metadata 0 field `organization` is a number, not a string",
            ),
            (
                r#"{"ids":[["a","b"]],"documents":[["d","e"]],"metadatas":[[{},{"end_line":true}]],"distances":[[1,2]]}"#,
                "metadata 1 field `end_line` is a boolean, not a number",
            ),
        ];
        for (body, detail) in table {
            assert_eq!(candidates(body).unwrap_err(), format!("{prefix}{detail}"), "{body}");
        }
    }
}
