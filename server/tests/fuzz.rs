//! A JSON-RPC fuzz suite over stdio and Streamable HTTP.
//!
//! Valid MCP messages (every method the server answers, tool calls with good and bad arguments)
//! are mutated, seeded and deterministic: bytes flipped, inserted and cut (invalid UTF-8
//! included), values swapped for hostile ones (ids beyond 64 bits and fractional, lone
//! surrogates, `1e400`, deep nesting, long strings, wrong types), keys dropped, duplicated and
//! renamed, messages wrapped into batches. The properties, checked for every message:
//! - the server never crashes (the process is alive at the end, nothing panicked on stderr);
//! - it never hangs (a ping after every batch is answered within a bound);
//! - every request is answered: each mutated message that is a JSON object with a string or
//!   numeric id and a method (not a notification) gets a response carrying that id;
//! - stdout carries only JSON-RPC frames; HTTP never answers 5xx.
//!
//! The backends point at a closed port, so tool calls fail fast inside the server: the fuzz is of
//! the protocol layer, not of the search.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::support::Server;
use serde_json::{Value, json};

/// Messages per transport.
const MESSAGES: usize = 10_000;
/// Messages between two liveness pings.
const BATCH: usize = 200;
/// The whole suite's bound (a debug build on a shared 2-core machine).
const DEADLINE: Duration = Duration::from_secs(150);
const SEED: u64 = 0x5eed_2026_0010;

fn seeds() -> Vec<Value> {
    let call = |args: Value| json!({"name": "search", "arguments": args});
    let params = [
        (
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "f", "version": "1"}}),
        ),
        ("ping", json!({})),
        ("tools/list", json!({})),
        ("tools/list", json!({"cursor": "x"})),
        ("tools/call", call(json!({"query": "retry with backoff", "limit": 3}))),
        ("tools/call", call(json!({"query": "x", "source": "acme/widgets@main", "path": "docs/*"}))),
        ("tools/call", call(json!({"query": "", "limit": 99}))),
        ("tools/call", call(json!({"query": 5, "extra": true}))),
        ("tools/call", json!({"name": "nope", "arguments": {}})),
        ("resources/list", json!({})),
        ("resources/templates/list", json!({})),
        ("resources/read", json!({"uri": "repo-retriever://repositories"})),
        ("prompts/list", json!({})),
        ("logging/setLevel", json!({"level": "debug"})),
        (
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "x"}, "argument": {"name": "a", "value": "b"}}),
        ),
        ("foo/bar", json!([1, 2])),
    ];
    let mut out: Vec<Value> =
        params.into_iter().map(|(m, p)| json!({"jsonrpc": "2.0", "id": 1, "method": m, "params": p})).collect();
    out.push(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    out.push(json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}));
    out.push(json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
    out
}

/// Hostile replacements for any value.
fn hostile(rng: &mut fastrand::Rng) -> String {
    let choices = [
        "123456789012345678901234567890".to_string(),
        "18446744073709551616".into(),
        "-9223372036854775809".into(),
        "1.5".into(),
        "6.0".into(),
        "1e400".into(),
        "-0".into(),
        "null".into(),
        "true".into(),
        "[]".into(),
        "{}".into(),
        r#""\ud800""#.into(),
        r#""\udc00\ud800x""#.into(),
        r#""a\u0000b""#.into(),
        format!("\"{}\"", "x".repeat(rng.usize(0..5000))),
        format!("{}1{}", "[".repeat(rng.usize(1..300)), "]".repeat(rng.usize(0..300))),
        "\"notifications/cancelled\"".into(),
        "\"2.0\"".into(),
        "\"1.0\"".into(),
        rng.i64(..).to_string(),
        format!("{}", rng.f64() * 1e10),
    ];
    choices[rng.usize(..choices.len())].clone()
}

/// Ids of fuzzed messages start here, above the ids the test client gives its own pings.
const FIRST_ID: usize = 1_000_000;

/// One mutation of `seed`, with `id` as its id when the mutation keeps one. Returns bytes.
fn mutate(rng: &mut fastrand::Rng, seed: &Value, id: usize) -> Vec<u8> {
    let id = FIRST_ID + id;
    let mut msg = seed.clone();
    if msg.get("id").is_some() {
        msg["id"] = if rng.bool() { json!(id) } else { json!(format!("f-{id}")) };
    }
    let mut text = msg.to_string();
    let rounds = rng.usize(1..4);
    for _ in 0..rounds {
        match rng.u8(0..10) {
            // Swap one value (after a `:`) for a hostile one.
            0..=2 => {
                let colons: Vec<usize> = text.match_indices(':').map(|(i, _)| i).collect();
                if let Some(&at) = colons.get(rng.usize(..colons.len().max(1))) {
                    let rest = &text[at + 1..];
                    let end = rest.find([',', '}']).unwrap_or(rest.len());
                    text = format!("{}{}{}", &text[..at + 1], hostile(rng), &rest[end..]);
                }
            }
            // Flip, insert or delete one byte (anywhere: invalid UTF-8 and broken JSON).
            3 | 4 => {
                let mut bytes = text.into_bytes();
                let at = rng.usize(..bytes.len().max(1)).min(bytes.len().saturating_sub(1));
                match rng.u8(0..3) {
                    0 if !bytes.is_empty() => bytes[at] ^= 1 << rng.u8(0..8),
                    1 => bytes.insert(at, rng.u8(..)),
                    _ if !bytes.is_empty() => {
                        bytes.remove(at);
                    }
                    _ => {}
                }
                return bytes.into_iter().map(|b| if b == b'\n' { b' ' } else { b }).collect();
            }
            // Cut the message short.
            5 if !text.is_empty() => {
                let mut cut = rng.usize(..text.len());
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text.truncate(cut);
            }
            // A key renamed, dropped or duplicated.
            6 => {
                let key =
                    ["\"jsonrpc\"", "\"id\"", "\"method\"", "\"params\"", "\"arguments\"", "\"name\""][rng.usize(..6)];
                text = match rng.u8(0..3) {
                    0 => text.replacen(key, "\"x\"", 1),
                    1 => text.replacen(&format!("{key}:"), "\"dropped\":", 1),
                    _ => text.replacen('{', &format!("{{{key}:{},", hostile(rng)), 1),
                };
            }
            // A batch of it, or an empty one.
            7 => text = if rng.bool() { format!("[{text},{text}]") } else { "[]".into() },
            // The method swapped for another (or for nonsense).
            8 => {
                let methods = [
                    "initialize",
                    "tools/call",
                    "notifications/cancelled",
                    "",
                    "x".repeat(300).leak(),
                    "resources/read",
                ];
                if let Some(v) = msg.get("method") {
                    text = text.replacen(&v.to_string(), &format!("\"{}\"", methods[rng.usize(..methods.len())]), 1);
                }
            }
            // Whitespace and a BOM around it.
            _ => text = format!("\u{feff} \t{text}\r"),
        }
    }
    text.replace('\n', " ").into_bytes()
}

/// The id a conforming server must answer, when `bytes` is a request with a readable id.
fn expected_id(bytes: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(bytes).ok()?;
    let v: Value = serde_json::from_str(text.trim_matches(|c: char| c.is_ascii_whitespace())).ok()?;
    let obj = v.as_object()?;
    let id = obj.get("id")?;
    let method = obj.get("method")?.as_str()?;
    if method.starts_with("notifications/") || !(id.is_string() || id.is_number()) {
        return None;
    }
    Some(id.clone())
}

#[derive(Debug, Default)]
struct Tally {
    sent: usize,
    expected: usize,
    answered: usize,
    errors: usize,
}

fn server() -> Server {
    Server::with_backends("http://127.0.0.1:9", "fuzz-collection", "http://127.0.0.1:9")
        .args(["--retry-attempts", "1"])
        .timeout(Duration::from_secs(30))
}

#[tokio::test]
async fn fuzz_stdio() {
    let started = Instant::now();
    let mut rng = fastrand::Rng::with_seed(SEED);
    let seeds = seeds();
    let mut s = server().raw_stdio().await;
    s.initialize().await;
    let mut tally = Tally::default();
    let mut expected = HashSet::new();
    for batch in 0..MESSAGES / BATCH {
        for i in 0..BATCH {
            let id = batch * BATCH + i;
            let seed = &seeds[rng.usize(..seeds.len())];
            let bytes = mutate(&mut rng, seed, id);
            if let Some(id) = expected_id(&bytes) {
                expected.insert(id.to_string());
            }
            s.send_bytes(&bytes).await;
            tally.sent += 1;
        }
        // Alive and not stuck: the ping after the batch is answered.
        let pong = s.request("ping", json!({})).await;
        assert_eq!(pong["result"], json!({}), "batch {batch}: {pong}");
        assert!(started.elapsed() < DEADLINE, "the stdio fuzz took longer than {DEADLINE:?}");
    }
    // A ping can overtake the tool calls sent before it (they run concurrently), so the last
    // batch's answers may still be on their way: wait for them, within the response bound.
    let waited = Instant::now();
    loop {
        let answered = answered_ids(&s.stdout_lines());
        if expected.iter().all(|id| answered.contains(id)) || waited.elapsed() > Duration::from_secs(30) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let waited = waited.elapsed();
    let mut answered = HashSet::new();
    for line in s.stdout_lines() {
        // An id the client wrote as `1e400` comes back so: valid JSON that serde_json cannot hold.
        serde_json::from_str::<serde::de::IgnoredAny>(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        let Ok(frame) = serde_json::from_str::<Value>(&line) else { continue };
        assert_eq!(frame["jsonrpc"], "2.0", "{line}");
        if frame.get("error").is_some() {
            tally.errors += 1;
        }
        if let Some(id) = frame.get("id") {
            answered.insert(id.to_string());
        }
    }
    let missing: Vec<&String> = expected.iter().filter(|id| !answered.contains(*id)).collect();
    assert!(missing.is_empty(), "{} requests not answered, e.g. {:?}", missing.len(), &missing[..missing.len().min(5)]);
    tally.expected = expected.len();
    tally.answered = expected.len() - missing.len();
    assert!(s.close().await.success(), "exit after EOF");
    assert!(!s.stderr().contains("panicked"), "{}", s.stderr());
    eprintln!(
        "stdio fuzz: {tally:?}, 0 crashes, 0 hangs, in {:?} ({:?} waiting for the last answers)",
        started.elapsed(),
        waited
    );
}

/// The ids of the response frames among `lines`, as JSON text.
fn answered_ids(lines: &[String]) -> HashSet<String> {
    lines
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|frame| frame.get("id").map(Value::to_string))
        .collect()
}

#[tokio::test]
async fn fuzz_http() {
    let started = Instant::now();
    let mut rng = fastrand::Rng::with_seed(SEED ^ 0x4854_5450);
    let seeds = seeds();
    let h = server().http().await;
    let client = reqwest::Client::new();
    let mut tally = Tally::default();
    for i in 0..MESSAGES {
        let seed = &seeds[rng.usize(..seeds.len())];
        let bytes = mutate(&mut rng, seed, i);
        let expected = expected_id(&bytes);
        let reply = client
            .post(h.url())
            .timeout(Duration::from_secs(30))
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(bytes.clone())
            .send()
            .await
            .unwrap_or_else(|e| panic!("message {i} got no answer ({e}): {}", String::from_utf8_lossy(&bytes)));
        let status = reply.status().as_u16();
        let body = reply.text().await.unwrap_or_default();
        assert!(status < 500, "message {i}: HTTP {status} {body}: {}", String::from_utf8_lossy(&bytes));
        tally.sent += 1;
        if status >= 400 {
            tally.errors += 1;
        }
        if let Some(id) = expected {
            tally.expected += 1;
            let frame: Value = serde_json::from_str(&body)
                .unwrap_or_else(|e| panic!("message {i}: no JSON-RPC answer ({e}, HTTP {status}): {body}"));
            assert_eq!(frame["id"], id, "message {i}: {}", String::from_utf8_lossy(&bytes));
            tally.answered += 1;
        }
        if i % BATCH == 0 {
            assert!(started.elapsed() < DEADLINE, "the HTTP fuzz took longer than {DEADLINE:?}");
        }
    }
    let mut h = h;
    // And a client still gets through.
    h.client().await.ping().await;
    assert!(!h.stderr().contains("panicked"), "{}", h.stderr());
    h.kill().await;
    eprintln!("HTTP fuzz: {tally:?}, 0 crashes, 0 hangs, in {:?}", started.elapsed());
}
