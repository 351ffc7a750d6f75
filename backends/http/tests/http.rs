//! rr-http against a scripted local server: retries, timeouts, error texts,
//! redaction and the headers a backend sees.

use std::time::Duration;

use rr_http::test_util::{FakeServer, Reply, instant_client, recording_sleeper, refused_url, settings};
use rr_http::{HttpClient, HttpError, HttpSettings};
use serde::Deserialize;
use serde_json::json;

#[derive(Debug, Default, Deserialize, PartialEq)]
struct Answer {
    #[serde(default)]
    ok: bool,
}

fn client_with_delays(attempts: u32) -> (HttpClient, std::sync::Arc<std::sync::Mutex<Vec<Duration>>>) {
    let (sleeper, delays) = recording_sleeper();
    (HttpClient::new(settings(attempts)).unwrap().with_sleeper(sleeper), delays)
}

async fn get(client: &HttpClient, url: &str) -> Result<Answer, HttpError> {
    client.get_json("test operation", url, None).await
}

#[tokio::test]
async fn retries_429_then_succeeds() {
    let server = FakeServer::sequence(vec![Reply::status(429, "slow down"), Reply::json(json!({"ok": true}))]).await;
    let (client, delays) = client_with_delays(3);
    let answer = get(&client, &format!("{}/x", server.url())).await.unwrap();
    assert_eq!(answer, Answer { ok: true });
    assert_eq!(server.request_count(), 2);
    assert_eq!(*delays.lock().unwrap(), vec![Duration::from_millis(500)]);
}

#[tokio::test]
async fn gives_up_on_5xx_after_all_attempts_with_the_last_body() {
    let server = FakeServer::sequence(vec![Reply::status(502, "first"), Reply::status(500, "  boom \n")]).await;
    let (client, delays) = client_with_delays(4);
    let err = get(&client, &format!("{}/x", server.url())).await.unwrap_err();
    assert_eq!(err.to_string(), "test operation failed with HTTP 500: boom");
    assert_eq!(err.status(), Some(500));
    assert_eq!(server.request_count(), 4);
    let expected: Vec<Duration> = [500, 1000, 2000].into_iter().map(Duration::from_millis).collect();
    assert_eq!(*delays.lock().unwrap(), expected);
}

#[tokio::test]
async fn does_not_retry_other_4xx() {
    let server = FakeServer::sequence(vec![Reply::status(401, "unauthorized")]).await;
    let (client, delays) = client_with_delays(3);
    let err = get(&client, &format!("{}/x", server.url())).await.unwrap_err();
    assert_eq!(err.to_string(), "test operation failed with HTTP 401: unauthorized");
    assert_eq!(server.request_count(), 1);
    assert!(delays.lock().unwrap().is_empty());
}

#[tokio::test]
async fn an_empty_error_body_keeps_the_trailing_space() {
    let server = FakeServer::sequence(vec![Reply::status(404, "")]).await;
    let err = get(&instant_client(settings(1)), &format!("{}/x", server.url())).await.unwrap_err();
    assert_eq!(err.to_string(), "test operation failed with HTTP 404: ");
}

#[tokio::test]
async fn a_hung_server_times_out_each_attempt() {
    let server = FakeServer::sequence(vec![Reply::Hang]).await;
    let mut s = settings(2);
    s.request_timeout = Duration::from_millis(150);
    let client = instant_client(s);
    let url = format!("{}/hang", server.url());
    let err = client.post_json::<_, Answer>("Chroma query", &url, &json!({}), None).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "Chroma query failed: Post \"{url}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
        )
    );
    assert_eq!(server.request_count(), 2, "a timeout is retried");
}

#[tokio::test]
async fn a_stalled_body_is_a_read_error_and_not_retried() {
    let server = FakeServer::sequence(vec![Reply::StallBody { status: 200, first: b"{\"ok\":".to_vec() }]).await;
    let mut s = settings(3);
    // Long enough for the headers to arrive on a loaded machine: the deadline must hit the body.
    s.request_timeout = Duration::from_millis(1000);
    let client = instant_client(s);
    let err = get(&client, &format!("{}/x", server.url())).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "test operation: read response: context deadline exceeded (Client.Timeout or context cancellation while reading body)"
    );
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn invalid_json_fails_at_once_naming_where() {
    let server = FakeServer::sequence(vec![Reply::status(200, "<html>oops</html>")]).await;
    let client = instant_client(settings(3));
    let err = get(&client, &format!("{}/x", server.url())).await.unwrap_err();
    assert_eq!(err.to_string(), "test operation: decode response: expected value at line 1 column 1");
    assert_eq!(server.request_count(), 1);

    let server = FakeServer::sequence(vec![Reply::status(200, "")]).await;
    let err = get(&client, &format!("{}/x", server.url())).await.unwrap_err();
    assert_eq!(err.to_string(), "test operation: decode response: EOF while parsing a value at line 1 column 0");
}

#[tokio::test]
async fn null_leaves_the_target_at_its_default() {
    let server = FakeServer::sequence(vec![Reply::status(200, "null")]).await;
    let answer = get(&instant_client(settings(1)), &format!("{}/x", server.url())).await.unwrap();
    assert_eq!(answer, Answer::default());
}

#[tokio::test]
async fn long_bodies_are_cut_at_1000_bytes() {
    let body = format!("{}{}", "x".repeat(1000), "tail");
    let server = FakeServer::sequence(vec![Reply::status(400, body)]).await;
    let err = get(&instant_client(settings(1)), &format!("{}/x", server.url())).await.unwrap_err();
    assert_eq!(err.to_string(), format!("test operation failed with HTTP 400: {}", "x".repeat(1000)));
}

#[tokio::test]
async fn a_cut_through_a_multibyte_character_leaves_a_replacement_character() {
    // '€' is three bytes; the cut at 1000 keeps two of them.
    let body = format!("{}€€", "y".repeat(998));
    let server = FakeServer::sequence(vec![Reply::status(400, body)]).await;
    let err = get(&instant_client(settings(1)), &format!("{}/x", server.url())).await.unwrap_err();
    assert_eq!(err.to_string(), format!("test operation failed with HTTP 400: {}\u{FFFD}", "y".repeat(998)));
}

#[tokio::test]
async fn configured_and_passed_through_secrets_are_redacted_from_echoed_bodies() {
    let server = FakeServer::start(|request| {
        let echo = format!(
            "  bad key sk-configured-key, header was {:?}; token alone: incoming-token \n",
            request.header("authorization").unwrap_or_default()
        );
        Reply::status(403, echo)
    })
    .await;
    let mut s = settings(1);
    s.secrets = vec!["sk-configured-key".into()];
    let client = instant_client(s);
    let err = client
        .get_json::<Answer>("Chroma collection lookup", &format!("{}/x", server.url()), Some("Bearer incoming-token"))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert_eq!(
        text,
        "Chroma collection lookup failed with HTTP 403: bad key <redacted>, header was \"Bearer <redacted>\"; token alone: <redacted>"
    );
    // And a bare pass-through token (no scheme) is redacted as a whole.
    let err =
        client.get_json::<Answer>("op", &format!("{}/x", server.url()), Some("incoming-token")).await.unwrap_err();
    assert!(!err.to_string().contains("incoming-token"), "{err}");
}

#[tokio::test]
async fn secrets_are_redacted_from_decode_errors_too() {
    let server = FakeServer::sequence(vec![Reply::json(json!({"ok": "sk-configured-key"}))]).await;
    let mut s = settings(1);
    s.secrets = vec!["sk-configured-key".into()];
    let err = get(&instant_client(s), &format!("{}/x", server.url())).await.unwrap_err();
    assert!(err.to_string().starts_with("test operation: decode response: "), "{err}");
    assert!(!err.to_string().contains("sk-configured-key"), "{err}");
}

#[tokio::test]
async fn connection_refused_is_retried_then_reported_like_go() {
    let url = format!("{}/api/v2/x", refused_url().await);
    let (client, delays) = client_with_delays(2);
    let err = get(&client, &url).await.unwrap_err();
    let host_port = url.trim_start_matches("http://").split('/').next().unwrap().to_owned();
    assert_eq!(
        err.to_string(),
        format!("test operation failed: Get \"{url}\": dial tcp {host_port}: connect: connection refused")
    );
    assert_eq!(delays.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn every_request_carries_user_agent_and_authorization() {
    let server = FakeServer::sequence(vec![Reply::json(json!({"ok": true}))]).await;
    let mut s = HttpSettings::new("repo-retriever/9.9.9");
    s.retry_attempts = 1;
    let client = HttpClient::new(s).unwrap();
    let url = format!("{}/p", server.url());
    client.get_json::<Answer>("op", &url, Some("Bearer abc")).await.unwrap();
    client.post_json::<_, Answer>("op", &url, &json!({"a": 1}), None).await.unwrap();
    client.get_json::<Answer>("op", &url, Some("")).await.unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    for r in &requests {
        assert_eq!(r.header("user-agent"), Some("repo-retriever/9.9.9"));
    }
    assert_eq!(requests[0].method, "GET");
    assert_eq!(requests[0].header("authorization"), Some("Bearer abc"));
    assert_eq!(requests[0].header("content-type"), None);
    assert_eq!(requests[1].method, "POST");
    assert_eq!(requests[1].header("authorization"), None);
    assert_eq!(requests[1].header("content-type"), Some("application/json"));
    assert_eq!(requests[2].header("authorization"), None, "an empty value is not sent");
}

#[tokio::test]
async fn post_bodies_are_json_with_the_same_values() {
    #[derive(serde::Serialize)]
    struct Body<'a> {
        text: &'a str,
        values: Vec<f32>,
    }
    let server = FakeServer::sequence(vec![Reply::json(json!({}))]).await;
    let client = instant_client(settings(1));
    let body = Body { text: "a<b && c>d", values: vec![1.0, 0.5, 1e-7, -0.0] };
    client.post_json::<_, Answer>("op", &format!("{}/p", server.url()), &body, None).await.unwrap();
    let sent: serde_json::Value = serde_json::from_str(&server.requests()[0].body_text()).unwrap();
    assert_eq!(sent, json!({"text": "a<b && c>d", "values": [1.0, 0.5, 1e-7, -0.0]}));
}

#[tokio::test]
async fn an_invalid_authorization_value_is_a_request_error() {
    let server = FakeServer::sequence(vec![Reply::json(json!({}))]).await;
    let client = instant_client(settings(2));
    let url = format!("{}/p", server.url());
    let err = client.get_json::<Answer>("op", &url, Some("Bearer a\nb")).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("op failed: Get \"{url}\": net/http: invalid header field value for \"Authorization\"")
    );
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn bodies_are_read_up_to_16_mib_only() {
    // A valid JSON document longer than the cap is not decoded cut (the
    // reference would say "unexpected end of JSON input").
    let big = format!("{{\"ok\":true,\"pad\":\"{}\"}}", "z".repeat(rr_http::MAX_RESPONSE_BYTES));
    let server = FakeServer::sequence(vec![Reply::status(200, big)]).await;
    let err = get(&instant_client(settings(1)), &format!("{}/x", server.url())).await.unwrap_err();
    assert_eq!(err.to_string(), "test operation: read response: the reply is larger than the 16777216-byte limit");
}

#[tokio::test]
async fn an_unparsable_url_fails_before_any_attempt() {
    let err = get(&instant_client(settings(3)), "http://[::1/x").await.unwrap_err();
    assert!(err.to_string().starts_with("test operation: create request: parse \"http://[::1/x\": "), "{err}");
}

fn retry_after(status: u16, value: &str) -> Reply {
    Reply::WithHeaders { status, headers: vec![("retry-after".into(), value.into())], body: b"busy".to_vec() }
}

/// `Retry-After` on a 429 or 503 is waited (up to the cap), never
/// less than the schedule; on other statuses it is ignored.
#[tokio::test]
async fn retry_after_is_honoured_up_to_the_cap() {
    let server = FakeServer::sequence(vec![
        retry_after(429, "3"),
        retry_after(503, "86400"),
        retry_after(500, "20"),
        retry_after(429, "soon"),
        Reply::json(json!({"ok": true})),
    ])
    .await;
    let (client, delays) = client_with_delays(5);
    assert_eq!(get(&client, &format!("{}/x", server.url())).await.unwrap(), Answer { ok: true });
    let expected: Vec<Duration> = [3000, 30_000, 2000, 4000].into_iter().map(Duration::from_millis).collect();
    assert_eq!(*delays.lock().unwrap(), expected);
}

/// A reply over the 16 MiB read limit is named as such, and the
/// rest of it is not read.
#[tokio::test]
async fn an_oversized_reply_is_named_as_such() {
    let server = FakeServer::sequence(vec![Reply::Huge { len: rr_http::MAX_RESPONSE_BYTES + 1, byte: b' ' }]).await;
    let client = instant_client(settings(3));
    let err = get(&client, &format!("{}/x", server.url())).await.unwrap_err();
    assert_eq!(err.to_string(), "test operation: read response: the reply is larger than the 16777216-byte limit");
    assert_eq!(server.request_count(), 1, "not retried");
    // Exactly at the limit is still read and decoded.
    let head = br#"{"ok":true}"#;
    let mut exact = head.to_vec();
    exact.resize(rr_http::MAX_RESPONSE_BYTES, b' ');
    let server = FakeServer::sequence(vec![Reply::status(200, exact)]).await;
    assert_eq!(get(&client, &format!("{}/x", server.url())).await.unwrap(), Answer { ok: true });
}

/// A body that trickles forever ends at the attempt's deadline.
#[tokio::test]
async fn a_slow_body_ends_at_the_deadline() {
    let server =
        FakeServer::sequence(vec![Reply::Trickle { chunk: b" ".to_vec(), every: Duration::from_millis(50) }]).await;
    let mut s = settings(1);
    // Long enough for the headers to arrive on a loaded machine: the deadline must hit the body.
    s.request_timeout = Duration::from_millis(1000);
    let client = instant_client(s);
    let started = std::time::Instant::now();
    let err = get(&client, &format!("{}/x", server.url())).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10), "returned before the budget ran out");
    assert_eq!(
        err.to_string(),
        "test operation: read response: context deadline exceeded (Client.Timeout or context cancellation while reading body)"
    );
    assert_eq!(err.summary(), "test operation: reading the reply timed out");
}

/// The summary a client outside the drop-in sees names the
/// operation and status, never the body or the URL.
#[tokio::test]
async fn summaries_keep_urls_and_bodies_out() {
    let server = FakeServer::sequence(vec![Reply::status(500, "internal detail at http://10.0.0.7:8000")]).await;
    let client = instant_client(settings(1));
    let err = get(&client, &format!("{}/x", server.url())).await.unwrap_err();
    assert_eq!(err.summary(), "test operation failed with HTTP 500");
    let down = refused_url().await;
    let err = get(&client, &format!("{down}/x")).await.unwrap_err();
    assert!(err.to_string().contains(&down));
    assert_eq!(err.summary(), "test operation failed: the request got no response");
    let server = FakeServer::sequence(vec![Reply::status(200, r#"{"ok": "secret-ish text"}"#)]).await;
    let err = get(&client, &format!("{}/x", server.url())).await.unwrap_err();
    assert!(err.to_string().contains("decode response"), "{err}");
    assert_eq!(err.summary(), "test operation: the reply is not the expected JSON");
}

/// An `http://` backend never builds the TLS client (which reads the whole system
/// certificate store); the first `https://` request does, and a clone shares it.
#[tokio::test]
async fn tls_is_set_up_on_the_first_https_request_only() {
    let server = FakeServer::sequence(vec![Reply::json(json!({"ok": true}))]).await;
    let client = instant_client(settings(1));
    assert!(!client.tls_ready());
    assert_eq!(get(&client, &format!("{}/x", server.url())).await.unwrap(), Answer { ok: true });
    assert!(!client.tls_ready(), "an http:// request set up TLS");
    let clone = client.clone();
    // Nothing listens there; the request fails after the TLS client is built.
    let https = refused_url().await.replacen("http://", "https://", 1);
    assert!(matches!(get(&clone, &format!("{https}/x")).await, Err(HttpError::Transport { .. })));
    assert!(client.tls_ready());
}
