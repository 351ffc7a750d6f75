//! The four rerankers against a local fake of each API, and their registration.

use std::fmt::Debug;
use std::sync::Arc;

use rr_core::registry::FactoryContext;
use rr_core::{BackendError, CallContext, PluginKind, Registry, Reranker};
use rr_http::HttpClient;
use rr_http::test_util::{FakeServer, Recorded, Reply, instant_client, refused_url, settings};
use rr_rerank_apis::{
    CohereConfig, CohereReranker, Connection, JinaConfig, JinaReranker, TeiConfig, TeiReranker, VoyageConfig,
    VoyageReranker,
};
use serde_json::{Value, json};

const KEY: &str = "sk-live-0123456789";

#[derive(Debug, Clone, Copy)]
enum Provider {
    Cohere,
    Jina,
    Voyage,
    Tei,
}

const ALL: [Provider; 4] = [Provider::Cohere, Provider::Jina, Provider::Voyage, Provider::Tei];

impl Provider {
    fn name(self) -> &'static str {
        match self {
            Provider::Cohere => "cohere",
            Provider::Jina => "jina",
            Provider::Voyage => "voyage",
            Provider::Tei => "tei",
        }
    }

    fn reranker(self, url: &str, attempts: u32) -> Arc<dyn Reranker> {
        self.built(url, attempts).0
    }

    /// The provider's reranker, and what `Debug` shows of its config and of
    /// the reranker.
    fn built(self, url: &str, attempts: u32) -> (Arc<dyn Reranker>, String) {
        let connection = Connection { api_url: url.to_owned(), api_key: Some(KEY.to_owned()) };
        let http = instant_client(settings(attempts));
        match self {
            Provider::Cohere => debugged(
                CohereConfig { connection, model: "rerank-v3.5".into(), max_tokens_per_doc: None },
                CohereReranker::new,
                http,
            ),
            Provider::Jina => debugged(
                JinaConfig { connection, model: "jina-reranker-v2-base-multilingual".into() },
                JinaReranker::new,
                http,
            ),
            Provider::Voyage => debugged(
                VoyageConfig { connection, model: "rerank-2.5".into(), truncation: true },
                VoyageReranker::new,
                http,
            ),
            Provider::Tei => debugged(TeiConfig::new(connection), TeiReranker::new, http),
        }
    }

    /// A successful answer in the provider's real shape, results in the
    /// order given (the APIs sort by relevance).
    fn answer(self, results: &[(i64, f64)]) -> Value {
        let items = |score_key: &str| -> Vec<Value> {
            results.iter().map(|&(index, score)| json!({"index": index, score_key: score})).collect()
        };
        match self {
            Provider::Cohere => json!({
                "id": "07734bd2-2473-4f07-94e1-0d9f0e6843cf",
                "results": items("relevance_score"),
                "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}}
            }),
            Provider::Jina => json!({
                "model": "jina-reranker-v2-base-multilingual",
                "usage": {"total_tokens": 815},
                "results": items("relevance_score")
            }),
            Provider::Voyage => json!({
                "object": "list",
                "data": items("relevance_score"),
                "model": "rerank-2.5",
                "usage": {"total_tokens": 26}
            }),
            Provider::Tei => Value::Array(items("score")),
        }
    }

    /// An error body in the provider's real shape.
    fn error_body(self, message: &str) -> Value {
        match self {
            Provider::Cohere => json!({"message": message}),
            Provider::Jina | Provider::Voyage => json!({"detail": message}),
            Provider::Tei => json!({"error": message, "error_type": "validation"}),
        }
    }

    /// How the provider's message reads in our error.
    fn quoted(self, message: &str) -> String {
        match self {
            Provider::Tei => format!("{message} (validation)"),
            _ => message.to_owned(),
        }
    }
}

fn debugged<C: Debug, R: Reranker + Debug + 'static>(
    config: C,
    new: fn(C, HttpClient) -> R,
    http: HttpClient,
) -> (Arc<dyn Reranker>, String) {
    let config_shown = format!("{config:?}");
    let reranker = new(config, http);
    let shown = format!("{config_shown}\n{reranker:?}");
    (Arc::new(reranker), shown)
}

fn documents(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("Repository: Acme/widgets@main\nFile: file{i}.go\n\ncontent <{i}>")).collect()
}

/// Reranks `n` documents at `url`, each request tried at most `attempts` times.
async fn rerank_at(provider: Provider, url: &str, attempts: u32, n: usize) -> Result<Vec<f64>, BackendError> {
    provider.reranker(url, attempts).rerank("q", &documents(n), &CallContext::default()).await
}

async fn rerank(provider: Provider, server: &FakeServer, n: usize) -> Result<Vec<f64>, String> {
    rerank_at(provider, server.url(), 1, n).await.map_err(|e| e.to_string())
}

async fn rerank_with(provider: Provider, reply: Value, n: usize) -> Result<Vec<f64>, String> {
    let server = FakeServer::sequence(vec![Reply::json(reply)]).await;
    rerank(provider, &server, n).await
}

fn body(request: &Recorded) -> Value {
    serde_json::from_slice(&request.body).unwrap()
}

// --- the exact request of each provider ---

const DOCS_JSON: &str = concat!(
    r#"["Repository: Acme/widgets@main\nFile: file0.go\n\ncontent \u003c0\u003e","#,
    r#""Repository: Acme/widgets@main\nFile: file1.go\n\ncontent \u003c1\u003e"]"#
);

async fn sent(provider: Provider) -> Recorded {
    let server = FakeServer::sequence(vec![Reply::json(provider.answer(&[(0, 0.5), (1, 0.25)]))]).await;
    let ctx = CallContext { authorization: Some("Bearer the-mcp-client-token".into()) };
    let scores = provider.reranker(server.url(), 1).rerank("gogitup flags", &documents(2), &ctx).await.unwrap();
    assert_eq!(scores, vec![0.5, 0.25]);
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let request = requests[0].clone();
    assert_eq!(request.method, "POST");
    assert_eq!(request.header("authorization"), Some(format!("Bearer {KEY}").as_str()), "not the caller's token");
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(request.header("user-agent"), Some("repo-retriever/test"));
    request
}

#[tokio::test]
async fn each_provider_sends_its_documented_request() {
    let cases = [
        (
            Provider::Cohere,
            "/v2/rerank",
            // Every document requested: `top_n` is the document count.
            format!(r#"{{"model":"rerank-v3.5","query":"gogitup flags","documents":{DOCS_JSON},"top_n":2}}"#),
        ),
        (
            Provider::Jina,
            "/v1/rerank",
            // `return_documents` false: the documents are not echoed back.
            format!(
                r#"{{"model":"jina-reranker-v2-base-multilingual","query":"gogitup flags","documents":{DOCS_JSON},"top_n":2,"return_documents":false}}"#
            ),
        ),
        (
            Provider::Voyage,
            "/v1/rerank",
            format!(
                r#"{{"query":"gogitup flags","documents":{DOCS_JSON},"model":"rerank-2.5","top_k":2,"return_documents":false,"truncation":true}}"#
            ),
        ),
        (
            Provider::Tei,
            "/rerank",
            format!(
                r#"{{"query":"gogitup flags","texts":{DOCS_JSON},"raw_scores":false,"truncate":true,"return_text":false}}"#
            ),
        ),
    ];
    for (provider, path, body) in cases {
        let request = sent(provider).await;
        assert_eq!(request.path, path, "{provider:?}");
        // Equal as parsed JSON: the same fields and values, however the text is escaped.
        assert_eq!(request.json(), serde_json::from_str::<Value>(&body).unwrap(), "{provider:?}");
    }
}

/// The one request a reranker sends for one document; `build` gets the fake
/// server's URL.
async fn single_request<R: Reranker>(provider: Provider, build: impl FnOnce(&str) -> R) -> Recorded {
    let server = FakeServer::sequence(vec![Reply::json(provider.answer(&[(0, 0.5)]))]).await;
    let scores = build(server.url()).rerank("q", &["d".to_owned()], &CallContext::default()).await;
    assert_eq!(scores.unwrap(), vec![0.5], "{provider:?}");
    server.requests()[0].clone()
}

fn connection(url: &str, api_key: Option<&str>) -> Connection {
    Connection { api_url: url.to_owned(), api_key: api_key.map(str::to_owned) }
}

#[tokio::test]
async fn cohere_sends_max_tokens_per_doc_when_configured() {
    let request = single_request(Provider::Cohere, |url| {
        let config = CohereConfig {
            connection: connection(&format!("{url}/"), Some(KEY)),
            model: "rerank-v3.5".into(),
            max_tokens_per_doc: Some(512),
        };
        let reranker = CohereReranker::new(config, instant_client(settings(1)));
        assert_eq!(reranker.url(), format!("{url}/v2/rerank"), "a trailing / on api_url is dropped");
        reranker
    })
    .await;
    assert_eq!(
        request.body_text(),
        r#"{"model":"rerank-v3.5","query":"q","documents":["d"],"top_n":1,"max_tokens_per_doc":512}"#
    );
}

#[tokio::test]
async fn voyage_truncation_can_be_turned_off() {
    let request = single_request(Provider::Voyage, |url| {
        let config =
            VoyageConfig { connection: connection(url, Some(KEY)), model: "rerank-2.5-lite".into(), truncation: false };
        VoyageReranker::new(config, instant_client(settings(1)))
    })
    .await;
    assert_eq!(body(&request)["truncation"], json!(false));
}

#[tokio::test]
async fn tei_sends_no_authorization_without_a_key() {
    let request = single_request(Provider::Tei, |url| {
        let mut config = TeiConfig::new(connection(url, None));
        config.truncate = false;
        TeiReranker::new(config, instant_client(settings(1)))
    })
    .await;
    assert_eq!(request.header("authorization"), None);
    assert_eq!(body(&request)["truncate"], json!(false));
}

// --- answers ---

#[tokio::test]
async fn answers_sorted_by_relevance_come_back_in_document_order() {
    for provider in ALL {
        let reply = provider.answer(&[(3, 0.98), (0, 0.61), (4, 0.2), (1, 0.0123), (2, 0.0001)]);
        assert_eq!(
            rerank_with(provider, reply, 5).await.unwrap(),
            vec![0.61, 0.0123, 0.0001, 0.98, 0.2],
            "{provider:?}"
        );
    }
}

#[tokio::test]
async fn an_answer_that_does_not_score_each_document_once_is_an_error_naming_the_provider() {
    let cases = [
        (&[(4, 0.9), (0, 0.5), (2, 0.1)], 5, "returned 3 results for 5 documents"),
        (&[(0, 0.9), (1, 0.5), (1, 0.1)], 2, "returned 3 results for 2 documents"),
        (&[(1, 0.9), (0, 0.5), (1, 0.1)], 3, "returned index 1 twice"),
        (&[(0, 0.9), (3, 0.5), (1, 0.1)], 3, "returned index 3, out of range for 3 documents"),
        (&[(-1, 0.9), (0, 0.5), (1, 0.1)], 3, "returned index -1, out of range for 3 documents"),
    ];
    for provider in ALL {
        for (results, documents, expected) in cases {
            let err = rerank_with(provider, provider.answer(results), documents).await.unwrap_err();
            assert_eq!(err, format!("{} rerank {expected}", provider.name()));
        }
    }
}

#[tokio::test]
async fn missing_and_null_scores_or_indices_are_errors() {
    let cases = [
        (json!({"index": 1, "relevance_score": null}), "rerank returned no score for document 1"),
        (json!({"index": 1}), "rerank returned no score for document 1"),
        (json!({"relevance_score": 0.3}), "rerank result 1 has no index"),
        (Value::Null, "rerank result 1 has no index"),
    ];
    for (second, expected) in cases {
        let reply = json!({"results": [{"index": 0, "relevance_score": 0.5}, second]});
        assert_eq!(rerank_with(Provider::Cohere, reply, 2).await.unwrap_err(), format!("cohere {expected}"));
    }
    let tei = json!([{"index": 0, "score": 0.5}, {"index": 1, "score": null}]);
    assert_eq!(rerank_with(Provider::Tei, tei, 2).await.unwrap_err(), "tei rerank returned no score for document 1");
}

#[tokio::test]
async fn an_answer_in_another_providers_shape_is_not_taken_for_scores() {
    // Voyage says `data`; a `results` list there is no answer at all.
    let reply = json!({"results": [{"index": 0, "relevance_score": 0.5}]});
    assert_eq!(
        rerank_with(Provider::Voyage, reply, 1).await.unwrap_err(),
        "voyage rerank returned 0 results for 1 documents"
    );
    assert_eq!(
        rerank_with(Provider::Tei, json!(null), 1).await.unwrap_err(),
        "tei rerank returned 0 results for 1 documents"
    );
}

#[tokio::test]
async fn a_nan_score_is_a_decode_error() {
    for provider in [Provider::Cohere, Provider::Tei] {
        let text = match provider {
            Provider::Tei => r#"[{"index":0,"score":NaN}]"#,
            _ => r#"{"results":[{"index":0,"relevance_score":NaN}]}"#,
        };
        let server = FakeServer::sequence(vec![Reply::status(200, text)]).await;
        let err = rerank(provider, &server, 1).await.unwrap_err();
        let expected = format!("{} rerank: decode response: expected value at line 1 column ", provider.name());
        assert!(err.starts_with(&expected), "{err}");
    }
}

#[tokio::test]
async fn no_documents_means_no_request() {
    for provider in ALL {
        let server = FakeServer::sequence(vec![Reply::status(500, "unused")]).await;
        assert_eq!(rerank(provider, &server, 0).await.unwrap(), Vec::<f64>::new());
        assert_eq!(server.request_count(), 0, "{provider:?}");
    }
}

// --- failures ---

#[tokio::test]
async fn the_providers_own_error_message_is_surfaced() {
    for provider in ALL {
        let message = "invalid request: model 'rerank-v9' not found";
        let server = FakeServer::sequence(vec![Reply::status(400, provider.error_body(message).to_string())]).await;
        let err = rerank_at(provider, server.url(), 3, 2).await.unwrap_err();
        assert_eq!(err.backend(), provider.name());
        assert_eq!(
            err.to_string(),
            format!("{} rerank failed with HTTP 400: {}", provider.name(), provider.quoted(message))
        );
        assert_eq!(server.request_count(), 1, "a 400 is not retried");
    }
}

#[tokio::test]
async fn fastapi_validation_errors_read_as_field_and_message() {
    let detail =
        json!({"detail": [{"type": "missing", "loc": ["body", "query"], "msg": "Field required", "input": {}}]});
    let server = FakeServer::sequence(vec![Reply::status(422, detail.to_string())]).await;
    assert_eq!(
        rerank(Provider::Jina, &server, 1).await.unwrap_err(),
        "jina rerank failed with HTTP 422: body.query: Field required"
    );
}

#[tokio::test]
async fn a_body_that_is_not_the_providers_json_is_quoted_as_it_came() {
    let server = FakeServer::sequence(vec![Reply::status(403, "<html><body>Forbidden</body></html>\n")]).await;
    assert_eq!(
        rerank(Provider::Voyage, &server, 1).await.unwrap_err(),
        "voyage rerank failed with HTTP 403: <html><body>Forbidden</body></html>"
    );
    let server = FakeServer::sequence(vec![Reply::status(502, "")]).await;
    assert_eq!(rerank(Provider::Tei, &server, 1).await.unwrap_err(), "tei rerank failed with HTTP 502");
}

#[tokio::test]
async fn rate_limits_and_server_errors_are_retried() {
    for provider in ALL {
        let server = FakeServer::sequence(vec![
            Reply::status(429, provider.error_body("rate limit exceeded").to_string()),
            Reply::status(503, "upstream unavailable"),
            Reply::json(provider.answer(&[(1, 0.7), (0, 0.3)])),
        ])
        .await;
        assert_eq!(rerank_at(provider, server.url(), 3, 2).await.unwrap(), vec![0.3, 0.7], "{provider:?}");
        assert_eq!(server.request_count(), 3, "{provider:?}");
    }
}

#[tokio::test]
async fn a_rate_limit_that_outlasts_the_retries_is_reported() {
    let server =
        FakeServer::sequence(vec![Reply::status(429, json!({"message": "You are using a Trial key"}).to_string())])
            .await;
    let err = rerank_at(Provider::Cohere, server.url(), 2, 1).await.unwrap_err();
    assert_eq!(err.to_string(), "cohere rerank failed with HTTP 429: You are using a Trial key");
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn the_key_never_appears_in_an_error() {
    for provider in ALL {
        // An API that echoes the credential it was sent.
        let server = FakeServer::start(|r| {
            let auth = r.header("authorization").unwrap_or_default();
            Reply::status(401, json!({"message": format!("bad token {auth}")}).to_string())
        })
        .await;
        let text = rerank(provider, &server, 1).await.unwrap_err();
        assert!(!text.contains(KEY), "{provider:?}: {text}");
        assert_eq!(text, format!("{} rerank failed with HTTP 401: bad token Bearer <redacted>", provider.name()));

        // The same, JSON-escaped: the raw body does not contain the key,
        // the message read from it does.
        let escaped_only = FakeServer::start(|r| {
            let auth = r.header("authorization").unwrap_or_default().replace("sk-", "\\u0073k-");
            Reply::status(401, format!(r#"{{"detail":"bad token {auth}"}}"#))
        })
        .await;
        let text = rerank(provider, &escaped_only, 1).await.unwrap_err();
        assert_eq!(text, format!("{} rerank failed with HTTP 401: bad token Bearer <redacted>", provider.name()));
    }
}

#[tokio::test]
async fn an_unreachable_api_is_named_in_the_error() {
    let url = refused_url().await;
    let text = rerank_at(Provider::Jina, &url, 1, 1).await.unwrap_err().to_string();
    assert!(text.starts_with(&format!("jina rerank failed: Post \"{url}/v1/rerank\": ")), "{text}");
    assert!(!text.contains(KEY));
}

#[test]
fn debug_output_never_shows_the_key() {
    for provider in ALL {
        let (reranker, shown) = provider.built("https://api.example.com", 1);
        assert!(!shown.contains(KEY) && shown.contains("<redacted>"), "{provider:?}: {shown}");
        assert_eq!(reranker.name(), provider.name());
    }
}

// --- TEI batching ---

/// A TEI that scores `doc <i>` as `i / 100` and, like the real one, answers
/// sorted by score with indices relative to the request; it refuses more
/// than `limit` texts with its own 413.
async fn tei_server(limit: usize) -> FakeServer {
    FakeServer::start(move |r| {
        let texts: Vec<String> = serde_json::from_slice::<Value>(&r.body).unwrap()["texts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_owned())
            .collect();
        if texts.len() > limit {
            let error = format!("batch size {} > maximum allowed batch size {limit}", texts.len());
            return Reply::status(413, json!({"error": error, "error_type": "validation"}).to_string());
        }
        let mut ranks: Vec<(usize, f64)> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| (i, t.trim_start_matches("doc ").parse::<f64>().unwrap() / 100.0))
            .collect();
        ranks.sort_by(|a, b| b.1.total_cmp(&a.1));
        Reply::json(Value::Array(
            ranks.into_iter().map(|(index, score)| json!({"index": index, "score": score})).collect(),
        ))
    })
    .await
}

fn tei(server: &FakeServer, max_batch_size: usize, max_concurrent_batches: usize) -> TeiReranker {
    let mut config = TeiConfig::new(Connection { api_url: server.url().to_owned(), api_key: None });
    config.max_batch_size = max_batch_size;
    config.max_concurrent_batches = max_concurrent_batches;
    TeiReranker::new(config, instant_client(settings(3)))
}

fn numbered(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("doc {i}")).collect()
}

#[tokio::test]
async fn tei_splits_documents_into_batches_and_merges_scores_in_document_order() {
    for concurrency in [1, 4] {
        let server = tei_server(32).await;
        let scores = tei(&server, 32, concurrency).scores("q", &numbered(70)).await.unwrap();
        assert_eq!(scores, (0..70).map(|i| f64::from(i) / 100.0).collect::<Vec<_>>());
        let mut sizes: Vec<usize> =
            server.requests().iter().map(|r| body(r)["texts"].as_array().unwrap().len()).collect();
        sizes.sort_unstable();
        assert_eq!(sizes, [6, 32, 32], "concurrency {concurrency}");
        let mut firsts: Vec<String> =
            server.requests().iter().map(|r| body(r)["texts"][0].as_str().unwrap().to_owned()).collect();
        firsts.sort();
        assert_eq!(firsts, ["doc 0", "doc 32", "doc 64"]);
    }
}

#[tokio::test]
async fn tei_sends_one_request_when_the_documents_fit() {
    let server = tei_server(32).await;
    tei(&server, 32, 4).scores("q", &numbered(32)).await.unwrap();
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn tei_reports_a_server_batch_limit_below_max_batch_size() {
    let server = tei_server(16).await;
    let err = tei(&server, 32, 4).scores("q", &numbered(40)).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "tei rerank failed with HTTP 413: batch size 32 > maximum allowed batch size 16 (validation)"
    );
}

/// A TEI that answers `reply` to the batch starting at `doc 2`, and scores
/// every other batch of two.
async fn tei_failing_at_doc_2(reply: Reply) -> FakeServer {
    FakeServer::start(move |r| {
        if body(r)["texts"][0] == "doc 2" {
            return reply.clone();
        }
        Reply::json(json!([{"index": 1, "score": 0.2}, {"index": 0, "score": 0.1}]))
    })
    .await
}

#[tokio::test]
async fn one_failed_tei_batch_fails_the_whole_reranking() {
    let failure = json!({"error": "Inference failed", "error_type": "backend"});
    let server = tei_failing_at_doc_2(Reply::status(424, failure.to_string())).await;
    let err = tei(&server, 2, 1).scores("q", &numbered(6)).await.unwrap_err();
    assert_eq!(err.to_string(), "tei rerank failed with HTTP 424: Inference failed (backend)");
}

#[tokio::test]
async fn a_partial_tei_batch_is_reported_with_the_batch_counts() {
    let server = tei_failing_at_doc_2(Reply::json(json!([{"index": 0, "score": 0.1}]))).await;
    let err = tei(&server, 2, 2).scores("q", &numbered(4)).await.unwrap_err();
    assert_eq!(err.to_string(), "tei rerank returned 1 results for 2 documents");
}

#[tokio::test]
async fn tei_clamps_a_zero_batch_size_instead_of_panicking() {
    let server = tei_server(32).await;
    assert_eq!(tei(&server, 0, 0).scores("q", &numbered(3)).await.unwrap(), vec![0.0, 0.01, 0.02]);
    assert_eq!(server.request_count(), 3);
}

// --- registration ---

fn factory_context(retry_attempts: u32) -> FactoryContext {
    let mut ctx = FactoryContext::new("repo-retriever/test");
    ctx.retry_attempts = retry_attempts;
    ctx.env = Arc::new(|name| (name == "RERANK_KEY").then(|| KEY.to_owned()));
    ctx
}

fn build(kind: &str, config: Value) -> Result<Arc<dyn Reranker>, String> {
    Registry::builtin().unwrap().reranker(kind, &config, &factory_context(1)).map_err(|e| e.to_string())
}

#[test]
fn every_kind_is_registered_by_name() {
    let registry = Registry::builtin().unwrap();
    let names = registry.names(PluginKind::Reranker);
    for kind in ["cohere", "jina", "voyage", "tei"] {
        assert!(names.contains(&kind), "{kind} missing from {names:?}");
        let origin = &registry.entries().find(|e| e.name == kind).unwrap().origin;
        assert!(origin.starts_with("rr-rerank-apis "), "{origin}");
    }
    let hosted = json!({"model": "m", "api_key_env": "RERANK_KEY"});
    for kind in ["cohere", "jina", "voyage"] {
        assert_eq!(build(kind, hosted.clone()).unwrap().name(), kind);
    }
    assert_eq!(build("tei", json!({"api_url": "http://tei:8080"})).unwrap().name(), "tei");
}

#[test]
fn unknown_settings_keys_are_refused_by_name() {
    let cases = [
        (
            "cohere",
            json!({"model": "m", "api_key_env": "RERANK_KEY", "top_n": 5}),
            "reranker \"cohere\": unknown field `top_n`, expected one of `model`, `api_key_env`, `api_url`, `max_tokens_per_doc`",
        ),
        (
            "jina",
            json!({"model": "m", "api_key_env": "RERANK_KEY", "api_key": "inline"}),
            "reranker \"jina\": unknown field `api_key`, expected one of `model`, `api_key_env`, `api_url`",
        ),
        (
            "voyage",
            json!({"model": "m", "api_key_env": "RERANK_KEY", "truncate": false}),
            "reranker \"voyage\": unknown field `truncate`, expected one of `model`, `api_key_env`, `api_url`, `truncation`",
        ),
        (
            "tei",
            json!({"api_url": "http://tei:8080", "batch_size": 16}),
            "reranker \"tei\": unknown field `batch_size`, expected one of `api_url`, `api_key_env`, `truncate`, `max_batch_size`, `max_concurrent_batches`",
        ),
    ];
    for (kind, config, expected) in cases {
        assert_eq!(build(kind, config).err().unwrap(), expected);
    }
}

#[test]
fn bad_settings_are_refused_when_the_server_starts() {
    let cases = [
        ("cohere", json!({"model": "m"}), "reranker \"cohere\": missing field `api_key_env`"),
        (
            "jina",
            json!({"model": "m", "api_key_env": "NOPE"}),
            "reranker \"jina\": api_key_env: environment variable NOPE is not set or empty",
        ),
        ("voyage", json!({"api_key_env": "RERANK_KEY"}), "reranker \"voyage\": missing field `model`"),
        ("tei", json!({}), "reranker \"tei\": missing field `api_url`"),
        (
            "tei",
            json!({"api_url": "tei:8080"}),
            "reranker \"tei\": api_url: expected an http:// or https:// URL, got \"tei:8080\"",
        ),
        (
            "tei",
            json!({"api_url": "http://tei:8080", "max_batch_size": 0}),
            "reranker \"tei\": max_batch_size: must be at least 1",
        ),
        (
            "tei",
            json!({"api_url": "http://tei:8080", "max_concurrent_batches": 0}),
            "reranker \"tei\": max_concurrent_batches: must be at least 1",
        ),
        (
            "cohere",
            json!({"model": "m", "api_key_env": "RERANK_KEY", "max_tokens_per_doc": 0}),
            "reranker \"cohere\": max_tokens_per_doc: must be at least 1",
        ),
    ];
    for (kind, config, expected) in cases {
        assert_eq!(build(kind, config).err().unwrap(), expected);
    }
}

#[tokio::test]
async fn registered_rerankers_use_the_key_from_the_environment_and_the_retry_setting() {
    let server = FakeServer::sequence(vec![Reply::status(503, json!({"detail": "overloaded"}).to_string())]).await;
    let config =
        json!({"model": "rerank-2.5", "api_key_env": "RERANK_KEY", "api_url": server.url(), "truncation": false});
    let reranker = Registry::builtin().unwrap().reranker("voyage", &config, &factory_context(1)).unwrap();
    let err = reranker.rerank("q", &documents(1), &CallContext::default()).await.unwrap_err();
    assert_eq!(err.to_string(), "voyage rerank failed with HTTP 503: overloaded");
    assert_eq!(server.request_count(), 1, "retry_attempts = 1 from the factory context");
    let request = &server.requests()[0];
    assert_eq!(request.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    assert_eq!(request.header("user-agent"), Some("repo-retriever/test"));
    assert_eq!(body(request)["truncation"], json!(false));
}

#[tokio::test]
async fn registered_tei_uses_its_batch_settings() {
    let server = tei_server(32).await;
    let config = json!({"api_url": server.url(), "max_batch_size": 4, "max_concurrent_batches": 2, "truncate": false});
    let reranker = Registry::builtin().unwrap().reranker("tei", &config, &factory_context(1)).unwrap();
    let scores = reranker.rerank("q", &numbered(10), &CallContext::default()).await.unwrap();
    assert_eq!(scores, (0..10).map(|i| f64::from(i) / 100.0).collect::<Vec<_>>());
    assert_eq!(server.request_count(), 3);
    assert!(server.requests().iter().all(|r| body(r)["truncate"] == json!(false)));
}
