//! Where a provider is reached: its URL, client and credentials, and the one
//! request every provider makes.

use std::fmt;

use rr_http::{HttpClient, HttpError, bearer};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{RerankError, provider_message};

/// Where a provider is reached, and with which key.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Connection {
    /// Origin of the API, e.g. `https://api.cohere.com`; the provider's path
    /// (`/v2/rerank`, `/v1/rerank`, `/rerank`) is appended.
    pub api_url: String,
    /// Sent as `Authorization: Bearer <key>` (as is when it already has the
    /// scheme).
    pub api_key: Option<String>,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("api_url", &self.api_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// One provider's rerank URL with its client and credentials.
#[derive(Clone)]
pub(crate) struct Endpoint {
    provider: &'static str,
    /// `<provider> rerank`, the operation the shared HTTP layer names.
    operation: String,
    http: HttpClient,
    url: String,
    authorization: Option<String>,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("provider", &self.provider)
            .field("url", &self.url)
            .field("authorization", &self.authorization.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// `path` appended to the connection's origin; the key is added to the
    /// client's secrets so no error can quote it.
    pub(crate) fn new(provider: &'static str, connection: Connection, path: &str, http: HttpClient) -> Self {
        let key = connection.api_key.unwrap_or_default();
        Endpoint {
            provider,
            operation: format!("{provider} rerank"),
            http: http.with_secret(&key),
            url: format!("{}{path}", connection.api_url.trim_end_matches('/')),
            authorization: bearer(&key),
        }
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    pub(crate) async fn post<B, T>(&self, body: &B) -> Result<T, RerankError>
    where
        B: Serialize + ?Sized,
        T: DeserializeOwned + Default,
    {
        self.http
            .post_json(&self.operation, &self.url, body, self.authorization.as_deref())
            .await
            .map_err(|e| self.error(e))
    }

    fn error(&self, error: HttpError) -> RerankError {
        match error {
            HttpError::Status { status, body, .. } => {
                // The body is redacted already, but unescaping its JSON can
                // reveal a key that was escaped in it, so redact once more.
                let message = provider_message(&body)
                    .map(|m| self.http.redact(&m, self.authorization.as_deref()))
                    .unwrap_or(body);
                RerankError::Status { provider: self.provider, status, message }
            }
            other => RerankError::Http(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_key() {
        let connection = Connection { api_url: "https://api.cohere.com".into(), api_key: Some("co-secret".into()) };
        let shown = format!("{connection:?}");
        assert!(!shown.contains("co-secret") && shown.contains("<redacted>"), "{shown}");
    }
}
