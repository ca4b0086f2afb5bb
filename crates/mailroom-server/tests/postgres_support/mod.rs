//! What the PostgreSQL backend's tests share: a fresh database per test on the cluster
//! named by `MAILROOM_TEST_POSTGRES` (`scripts/postgres.sh start` prints one), brokers
//! over it, and requests through a broker's router.
//!
//! Without `MAILROOM_TEST_POSTGRES` the tests fail under `CI=true` (CI must run them)
//! and elsewhere say that they were not run.

#![allow(dead_code)] // each test file uses its own part of this

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, Method, Request};
use axum::Router;
use http_body_util::BodyExt as _;
use mailroom_server::backend::postgres::PgOptions;
use mailroom_server::backend::Postgres;
use mailroom_server::long_poll::LongPolls;
use mailroom_server::{app::router, state::AppState, Config};
use serde_json::Value;
use tower::ServiceExt as _;

/// The variable naming the test cluster's URL.
pub const URL_VARIABLE: &str = "MAILROOM_TEST_POSTGRES";

/// The cluster's URL, or `None` (after saying so) where the tests may be skipped.
///
/// # Panics
/// Under `CI=true` without the variable: CI must not skip these tests.
pub fn cluster_url() -> Option<String> {
    match std::env::var(URL_VARIABLE) {
        Ok(url) => Some(url),
        Err(_) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("{URL_VARIABLE} is not set under CI=true: start scripts/postgres.sh first")
        }
        Err(_) => {
            eprintln!("not run: {URL_VARIABLE} is not set (scripts/postgres.sh start DIR)");
            None
        }
    }
}

/// A session of the test's own on the database at `url` (not through a broker), for
/// what a test reads, writes or waits for directly.
pub async fn database(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect to the test database");
    tokio::spawn(connection);
    client
}

/// Waits until `condition`, a query answering one boolean, holds on `client`, reading
/// it again every 5 ms.
///
/// # Panics
/// If it has not held within `within`.
pub async fn until(client: &tokio_postgres::Client, condition: &str, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let row = client
            .query_one(condition, &[])
            .await
            .expect("read the condition");
        if row.get::<_, bool>(0) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "`{condition}` did not hold within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A new, empty database on the cluster; answers its URL.
pub async fn fresh_database(cluster: &str) -> String {
    let (client, connection) = tokio_postgres::connect(cluster, tokio_postgres::NoTls)
        .await
        .expect("connect to the test cluster");
    tokio::spawn(connection);
    let mut id = [0u8; 8];
    getrandom::fill(&mut id).unwrap();
    let name = format!("mailroom_test_{:016x}", u64::from_le_bytes(id));
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create a test database");
    match cluster.rsplit_once('/') {
        Some((base, _)) => format!("{base}/{name}"),
        None => panic!("the cluster URL {cluster} names no database"),
    }
}

/// A broker over the database at `url`: its backend and its router.
pub async fn broker(url: &str) -> (Arc<Postgres>, Router) {
    broker_with(url, PgOptions::default()).await
}

/// A broker over the database at `url` with `options`: its backend and its router.
pub async fn broker_with(url: &str, options: PgOptions) -> (Arc<Postgres>, Router) {
    let backend = Arc::new(
        Postgres::connect_with(url, Arc::new(LongPolls::default()), options)
            .await
            .expect("connect a broker"),
    );
    let state = AppState::with_backend(backend.clone(), Config::default());
    (backend, router(state))
}

/// Two brokers sharing one fresh database, or `None` where the tests may be skipped.
pub async fn two_brokers() -> Option<(Router, Router)> {
    let cluster = cluster_url()?;
    let url = fresh_database(&cluster).await;
    let (_, a) = broker(&url).await;
    let (_, b) = broker(&url).await;
    Some((a, b))
}

/// Sends a request and returns the status and the JSON body (`Null` for none).
pub async fn send(app: &Router, method: Method, uri: &str, body: &str) -> (u16, Value) {
    let mut request = Request::builder().method(method).uri(uri);
    if !body.is_empty() {
        request = request
            .header(header::CONTENT_LENGTH, body.len())
            .header(header::CONTENT_TYPE, "application/json");
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::from(body.to_owned())).unwrap())
        .await
        .unwrap();
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// Sends a request that must succeed (2xx) and returns its JSON body.
pub async fn ok(app: &Router, method: Method, uri: &str, body: &str) -> Value {
    let (status, value) = send(app, method.clone(), uri, body).await;
    assert!(status < 300, "{method} {uri} {body}: {status} {value}");
    value
}

/// Sends a raw request with `headers` and `body`; returns the status, the response's
/// headers and its body as bytes.
pub async fn send_raw(
    app: &Router,
    method: Method,
    uri: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, axum::http::HeaderMap, bytes::Bytes) {
    let mut request = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::from(body.to_owned())).unwrap())
        .await
        .unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, headers, bytes)
}
