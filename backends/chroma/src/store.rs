//! The store itself: its configuration, its errors, its URLs and the
//! collection id it caches (see the crate docs), shared by the query, write
//! and read sides.

use std::sync::{Mutex, OnceLock, PoisonError};

use rr_core::render::path_escape;
use rr_core::{CallContext, DistanceKind};
use rr_http::json::null_as_default;
use rr_http::{HttpClient, HttpError, bearer};
use serde::Deserialize;
use serde_json::Value;

/// The operation name of the collection lookup in errors and logs.
pub const LOOKUP_OPERATION: &str = "Chroma collection lookup";
/// The `name()` of the store, as a [`VectorStore`](rr_core::VectorStore) and as an index store.
pub const STORE_NAME: &str = "chroma";
/// Ids read per `get` request while listing a namespace.
pub const DEFAULT_PAGE_SIZE: usize = 1000;

/// Where the collection lives and how to authenticate.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ChromaConfig {
    /// Origin of the Chroma server, without a trailing `/`.
    pub server_url: String,
    pub tenant: String,
    pub database: String,
    pub collection_name: String,
    /// Sent as `Bearer <token>` (or as is when it already has the scheme).
    /// When absent, the caller's `Authorization` header is passed through.
    pub bearer_token: Option<String>,
}

impl std::fmt::Debug for ChromaConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChromaConfig")
            .field("server_url", &self.server_url)
            .field("tenant", &self.tenant)
            .field("database", &self.database)
            .field("collection_name", &self.collection_name)
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// What can go wrong talking to Chroma.
#[derive(Debug, thiserror::Error)]
pub enum ChromaError {
    #[error(transparent)]
    Http(#[from] HttpError),
    /// The lookup succeeded but named no collection.
    #[error("Chroma collection lookup returned no collection ID")]
    NoCollectionId,
    /// Creating (or getting) the collection succeeded but named no collection.
    #[error("Chroma collection creation returned no collection ID")]
    NoCreatedCollectionId,
}

impl ChromaError {
    /// The error without URLs or Chroma's reply text (see [`HttpError::summary`]).
    pub fn summary(&self) -> String {
        match self {
            ChromaError::Http(e) => e.summary(),
            other => other.to_string(),
        }
    }
}

/// A Chroma collection searched through the v2 API.
pub struct ChromaStore {
    pub(crate) http: HttpClient,
    /// `<server>/api/v2`.
    pub(crate) api_url: String,
    pub(crate) collection_url: String,
    pub(crate) collections_url: String,
    pub(crate) collection_name: String,
    pub(crate) authorization: Option<String>,
    pub(crate) collection_id: Mutex<Option<String>>,
    /// What the collection's distances measure, once looked up.
    pub(crate) distance_kind: Mutex<Option<DistanceKind>>,
    /// The server's `max_batch_size`, once asked (see the `index` module).
    pub(crate) max_batch_size: OnceLock<usize>,
    /// Ids per page when listing a namespace.
    pub(crate) page_size: usize,
}

impl std::fmt::Debug for ChromaStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChromaStore").field("collection_url", &self.collection_url).finish_non_exhaustive()
    }
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct CollectionResponse {
    #[serde(default, deserialize_with = "null_as_default")]
    pub(crate) id: String,
    // Unused, but Go decodes it too, so a malformed name fails the same way.
    #[serde(default, deserialize_with = "null_as_default")]
    #[allow(dead_code)]
    name: String,
    // Any shape: read only for the distance space, never refused.
    #[serde(default)]
    configuration_json: Value,
    #[serde(default)]
    metadata: Value,
    // The length of the vectors it holds (none before the first record).
    #[serde(default)]
    pub(crate) dimension: Option<u64>,
}

impl CollectionResponse {
    /// What the collection's distances measure: its index's `space`
    /// (`configuration_json`, or the older `hnsw:space` metadata key), or
    /// Chroma's default `l2` (squared Euclidean).
    pub(crate) fn distance_kind(&self) -> Option<DistanceKind> {
        let c = &self.configuration_json;
        let space = [&c["hnsw"]["space"], &c["spann"]["space"], &self.metadata["hnsw:space"]]
            .into_iter()
            .find_map(Value::as_str)
            .unwrap_or("l2");
        match space {
            "l2" => Some(DistanceKind::SquaredEuclidean),
            // `ip` is `1 − a·b`: the cosine distance of unit vectors.
            "cosine" | "ip" => Some(DistanceKind::Cosine),
            _ => None,
        }
    }
}

impl ChromaStore {
    /// A store for `config`, sending through `http`. The configured bearer
    /// token is added to the client's secrets.
    pub fn new(config: ChromaConfig, http: HttpClient) -> Self {
        let token = config.bearer_token.clone().unwrap_or_default();
        let server = config.server_url.trim_end_matches('/');
        let collections_url = format!(
            "{server}/api/v2/tenants/{}/databases/{}/collections",
            path_escape(&config.tenant),
            path_escape(&config.database)
        );
        ChromaStore {
            http: http.with_secret(&token),
            api_url: format!("{server}/api/v2"),
            collection_url: format!("{collections_url}/{}", path_escape(&config.collection_name)),
            collection_name: config.collection_name,
            collections_url,
            authorization: bearer(&token),
            collection_id: Mutex::new(None),
            distance_kind: Mutex::new(None),
            max_batch_size: OnceLock::new(),
            page_size: DEFAULT_PAGE_SIZE,
        }
    }

    /// The URL of the collection lookup.
    pub fn collection_name(&self) -> &str {
        &self.collection_name
    }

    /// The collection's URL (for messages).
    pub fn collection_url(&self) -> &str {
        &self.collection_url
    }

    /// The URL of a query against collection `id`.
    pub fn query_url(&self, id: &str) -> String {
        format!("{}/{}/query", self.collections_url, path_escape(id))
    }

    /// The configured token, else the caller's header verbatim; never empty.
    pub(crate) fn authorization<'a>(&'a self, ctx: &'a CallContext) -> Option<&'a str> {
        self.authorization.as_deref().or(ctx.authorization.as_deref()).filter(|a| !a.is_empty())
    }

    /// The cached collection id, if a lookup has succeeded and nothing has
    /// failed with it since.
    pub fn cached_collection_id(&self) -> Option<String> {
        self.collection_id.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Looks the collection up (always a request) and caches its id.
    /// The length of the vectors the collection holds: `None` when it holds
    /// none yet, or when the server does not say.
    pub async fn collection_dimension(&self) -> Result<Option<usize>, ChromaError> {
        let response: CollectionResponse = self
            .http
            .get_json(LOOKUP_OPERATION, &self.collection_url, self.authorization(&CallContext::default()))
            .await?;
        Ok(response.dimension.and_then(|d| usize::try_from(d).ok()).filter(|d| *d > 0))
    }

    pub async fn lookup_collection_id(&self, ctx: &CallContext) -> Result<String, ChromaError> {
        let response: CollectionResponse =
            self.http.get_json(LOOKUP_OPERATION, &self.collection_url, self.authorization(ctx)).await?;
        if response.id.is_empty() {
            return Err(ChromaError::NoCollectionId);
        }
        *self.collection_id.lock().unwrap_or_else(PoisonError::into_inner) = Some(response.id.clone());
        *self.distance_kind.lock().unwrap_or_else(PoisonError::into_inner) = response.distance_kind();
        Ok(response.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_collection_space_says_what_distances_measure() {
        let kind = |body: &str| serde_json::from_str::<CollectionResponse>(body).unwrap().distance_kind();
        assert_eq!(kind(r#"{"id":"x","name":"c"}"#), Some(DistanceKind::SquaredEuclidean));
        assert_eq!(kind(r#"{"id":"x","configuration_json":{"hnsw":{"space":"cosine"}}}"#), Some(DistanceKind::Cosine));
        assert_eq!(kind(r#"{"id":"x","configuration_json":{"spann":{"space":"ip"}}}"#), Some(DistanceKind::Cosine));
        assert_eq!(kind(r#"{"id":"x","metadata":{"hnsw:space":"l2"}}"#), Some(DistanceKind::SquaredEuclidean));
        assert_eq!(kind(r#"{"id":"x","configuration_json":{"hnsw":{"space":"manhattan"}}}"#), None);
        // Any other shape is not refused.
        assert_eq!(kind(r#"{"id":"x","configuration_json":7,"metadata":null}"#), Some(DistanceKind::SquaredEuclidean));
    }

    #[test]
    fn config_debug_hides_the_token() {
        let config = ChromaConfig { bearer_token: Some("tok-123".into()), ..Default::default() };
        assert!(!format!("{config:?}").contains("tok-123"));
    }
}
