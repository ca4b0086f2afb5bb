//! Every error status over raw HTTP, the token, and hostile input: each refused with the
//! JSON error shape, and none of it disturbing the server or its data.

mod common;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;

use common::{temp_dir, ServerProcess};
use mailroom_client::StartPosition;
use reqwest::{Method, StatusCode};
use serde_json::Value;

/// Sends a request and returns the status and the parsed JSON error body.
async fn call(
    http: &reqwest::Client,
    method: Method,
    url: String,
    body: &'static [u8],
) -> (u16, Value) {
    let response = http.request(method, url).body(body).send().await.unwrap();
    let status = response.status().as_u16();
    let content_type = response.headers().get("content-type").cloned();
    let text = response.text().await.unwrap();
    let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if status >= 400 {
        assert_eq!(
            content_type.unwrap(),
            "application/json",
            "{status}: {text}"
        );
        assert!(value["message"].is_string(), "{status}: {text}");
    }
    (status, value)
}

// Proves each documented error status and stable code for bad input, unknown resources,
// conflicts and oversized bodies, including the framework's own rejections, and that
// after all of it (and a request cut off mid-body) the server serves and the data is
// intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_status_and_the_server_survives() {
    let dir = temp_dir();
    let server = ServerProcess::start(dir.path(), &["--max-payload-bytes", "1024"]);
    let client = server.client();
    client.create_topic("t").await.unwrap();
    client
        .create_group("t", "g", 2, StartPosition::Earliest)
        .await
        .unwrap();
    client.publish("t", "kept").await.unwrap();
    let delivery = client.poll("t", "g").await.unwrap().unwrap();
    client.create_channel("c", 1, 1).await.unwrap();
    let _holder = client.subscribe("c").await.unwrap();

    let http = reqwest::Client::new();
    let at = |path: &str| server.at(path);
    let group = "/v1/topics/t/groups/g";
    let long_name = format!("/v1/topics/{}", "x".repeat(129));
    let cases: Vec<(Method, String, &'static [u8], u16, &str)> = vec![
        (
            Method::PUT,
            at("/v1/topics/bad%20name"),
            b"",
            400,
            "invalid_name",
        ),
        (Method::PUT, at(&long_name), b"", 400, "invalid_name"),
        (Method::PUT, at("/v1/topics/a%FF"), b"", 400, "bad_request"),
        (
            Method::PUT,
            at("/v1/topics/t/groups/h"),
            b"{\"max_attempts\":",
            400,
            "malformed_json",
        ),
        (
            Method::PUT,
            at("/v1/topics/t/groups/h"),
            b"{\"max_attempts\":\"3\"}",
            400,
            "invalid_body",
        ),
        (
            Method::PUT,
            at("/v1/topics/t/groups/h"),
            b"{\"max_attempts\":-1}",
            400,
            "invalid_body",
        ),
        (
            Method::PUT,
            at("/v1/topics/t/groups/h"),
            b"{\"max_attempts\":0}",
            400,
            "invalid_argument",
        ),
        (
            Method::PUT,
            at("/v1/topics/t/groups/h"),
            b"{\"max_attempts\":1,\"start\":99}",
            400,
            "invalid_argument",
        ),
        (
            Method::PUT,
            at("/v1/topics/t/groups/h"),
            b"{\"max_attempts\":1,\"colour\":1}",
            400,
            "invalid_body",
        ),
        (
            Method::PUT,
            at("/v1/topics/t/groups/h"),
            b"",
            400,
            "malformed_json",
        ),
        (
            Method::POST,
            at(&format!("{group}/ack")),
            b"[]",
            400,
            "invalid_body",
        ),
        (
            Method::POST,
            at(&format!("{group}/ack")),
            b"{\"offset\":\"0\",\"attempt\":1}",
            400,
            "invalid_body",
        ),
        (
            Method::POST,
            at("/v1/topics/t/messages/batch"),
            b"{\"messages\":[]}",
            400,
            "invalid_argument",
        ),
        (
            Method::POST,
            at("/v1/topics/t/messages/batch"),
            b"{\"messages\":[{\"base64\":\"!\"}]}",
            400,
            "invalid_argument",
        ),
        (
            Method::PUT,
            at("/v1/channels/d"),
            b"{\"max_subscribers\":0}",
            400,
            "invalid_argument",
        ),
        (
            Method::GET,
            at("/v1/channels/c/ws"),
            b"",
            400,
            "not_websocket",
        ),
        (
            Method::GET,
            at("/v1/topics/nope"),
            b"",
            404,
            "unknown_topic",
        ),
        (
            Method::POST,
            at("/v1/topics/nope/messages"),
            b"x",
            404,
            "unknown_topic",
        ),
        (
            Method::POST,
            at("/v1/topics/t/groups/nope/poll"),
            b"",
            404,
            "unknown_group",
        ),
        (
            Method::GET,
            at("/v1/topics/t/groups/nope/dead-letters"),
            b"",
            404,
            "unknown_group",
        ),
        (
            Method::POST,
            at("/v1/channels/nope/messages"),
            b"x",
            404,
            "unknown_channel",
        ),
        (
            Method::GET,
            at("/v1/channels/nope/events"),
            b"",
            404,
            "unknown_channel",
        ),
        (
            Method::DELETE,
            at("/v1/channels/nope"),
            b"",
            404,
            "unknown_channel",
        ),
        (Method::GET, at("/v2/anything"), b"", 404, "not_found"),
        (
            Method::DELETE,
            at("/v1/topics"),
            b"",
            405,
            "method_not_allowed",
        ),
        (
            Method::PUT,
            at("/v1/topics/t/groups/g"),
            b"{\"max_attempts\":2}",
            409,
            "group_exists",
        ),
        (
            Method::POST,
            at(&format!("{group}/ack")),
            b"{\"offset\":0,\"attempt\":2}",
            409,
            "not_owned",
        ),
        (
            Method::POST,
            at(&format!("{group}/nack")),
            b"{\"offset\":1,\"attempt\":1}",
            409,
            "not_owned",
        ),
        (
            Method::GET,
            at("/v1/channels/c/events"),
            b"",
            409,
            "subscriber_limit",
        ),
        (
            Method::PUT,
            at("/v1/channels/c"),
            b"{\"max_subscribers\":2}",
            409,
            "channel_exists",
        ),
        (
            Method::POST,
            at("/v1/topics/t/messages"),
            &[b'x'; 1025],
            413,
            "payload_too_large",
        ),
        (
            Method::POST,
            at("/v1/channels/c/messages"),
            &[b'x'; 1025],
            413,
            "payload_too_large",
        ),
        (
            Method::POST,
            at(&format!("{group}/ack")),
            &[b' '; 70_000],
            413,
            "payload_too_large",
        ),
    ];
    for (method, url, body, status, code) in cases {
        let (got, value) = call(&http, method.clone(), url.clone(), body).await;
        assert_eq!(
            (got, value["error"].as_str()),
            (status, Some(code)),
            "{method} {url}: {value}"
        );
    }
    // A batch message over the payload limit, inside a body under the batch limit.
    let big = format!("{{\"messages\":[\"{}\"]}}", "y".repeat(1025));
    let response = http
        .post(at("/v1/topics/t/messages/batch"))
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);

    // HTTP clients normalise `..` away, so this one goes over a raw socket.
    let dots = raw_request(
        &server.address(),
        b"PUT /v1/topics/.. HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(dots.starts_with("HTTP/1.1 400"), "{dots}");
    assert!(dots.contains("\"invalid_name\""), "{dots}");

    cut_off_requests(&server.address());

    // Still serving, and nothing above changed the data.
    client.health().await.unwrap();
    let info = client.topic_info("t").await.unwrap();
    assert_eq!((info.end, info.groups.len()), (1, 1));
    let group_info = client.group_info("t", "g").await.unwrap();
    assert_eq!(group_info.in_flight, Some(delivery.id()));
    assert_eq!(client.poll("t", "g").await.unwrap().unwrap(), delivery);
    client.ack("t", "g", delivery.id()).await.unwrap();
}

/// Sends raw bytes and returns everything the server answers before closing.
fn raw_request(address: &str, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.write_all(request).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

/// Requests that never finish: a body shorter than its Content-Length, then a hang-up;
/// garbage that is not HTTP; headers cut off mid-line.
fn cut_off_requests(address: &str) {
    let partial =
        b"POST /v1/topics/t/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nonly ten b";
    for request in [
        &partial[..],
        b"\x00\x01garbage\r\n\r\n",
        b"PUT /v1/topics/u HTTP/1.1\r\nHo",
    ] {
        let mut stream = TcpStream::connect(address).unwrap();
        stream.write_all(request).unwrap();
        stream.shutdown(std::net::Shutdown::Write).unwrap();
        // Wait for the server to give up on the connection (it answers or closes).
        let mut sink = Vec::new();
        let _ = stream.read_to_end(&mut sink);
    }
}

// Proves a token-protected server refuses every /v1 call without the exact bearer token
// (401, JSON, WWW-Authenticate), accepts it with the token, and leaves /healthz,
// /metrics and /openapi.json open. The token comes from a --config file, and the payload
// limit from an environment variable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_protected_server() {
    let dir = temp_dir();
    let config = dir.path().join("mailroom.toml");
    std::fs::write(&config, "token = \"s3cret\"\nfsync = \"interval:20\"\n").unwrap();
    let data = dir.path().join("data");
    let config_arg = config.to_str().unwrap();
    let server = ServerProcess::start_with_env(
        &data,
        &["--config", config_arg],
        &[("MAILROOM_MAX_PAYLOAD_BYTES", "16")],
    );
    let http = reqwest::Client::new();
    for (header, status) in [
        (None, 401),
        (Some("Bearer wrong"), 401),
        (Some("s3cret"), 401),
        (Some("Bearer s3cret"), 201),
    ] {
        let mut request = http.put(server.at("/v1/topics/secure"));
        if let Some(header) = header {
            request = request.header("authorization", header);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{header:?}");
        if status == 401 {
            assert_eq!(response.headers()["www-authenticate"], "Bearer");
            let body: Value = response.json().await.unwrap();
            assert_eq!(body["error"], "unauthorized");
        }
    }
    for open in ["/healthz", "/metrics", "/openapi.json"] {
        assert_eq!(
            http.get(server.at(open)).send().await.unwrap().status(),
            200,
            "{open}"
        );
    }
    let unauthorized = server.client();
    assert_eq!(
        unauthorized.list_topics().await.unwrap_err().status(),
        Some(401)
    );
    assert_eq!(
        unauthorized.subscribe("x").await.unwrap_err().status(),
        Some(401)
    );
    let client = server.client().with_token("s3cret");
    assert_eq!(client.list_topics().await.unwrap().len(), 1);
    assert_eq!(
        client
            .publish("secure", "x".repeat(17))
            .await
            .unwrap_err()
            .status(),
        Some(413)
    );
    assert_eq!(client.publish("secure", "x".repeat(16)).await.unwrap(), 0);
}
