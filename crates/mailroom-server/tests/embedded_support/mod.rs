//! What the in-process router tests share: a server over a fresh embedded store in a
//! temporary directory, opened as the server opens it, and the operations of the
//! OpenAPI document with their paths' names filled in (so a test that walks every route
//! covers a new route without a change).

#![allow(dead_code)] // each test file uses its own part of this

use axum::http::Method;
use axum::Router;
use mailroom_server::app::router;
use mailroom_server::config::FsyncPolicy;
use mailroom_server::state::AppState;
use mailroom_server::{server::store_options, Config};
use tempfile::TempDir;

/// The configuration the tests start from: the defaults without fsync, since a test's
/// temporary store needs no durability and syncs would only slow it down.
pub fn config() -> Config {
    Config {
        fsync: FsyncPolicy::Never,
        ..Config::default()
    }
}

/// A server state for `config` over a fresh store in a temporary directory, for tests
/// that change the state before they route to it. The directory must outlive the store.
pub fn state_over(config: Config) -> (TempDir, AppState) {
    let dir = tempfile::tempdir().unwrap();
    let store = mailroom_store::Store::open(dir.path(), store_options(&config)).unwrap();
    (dir, AppState::new(store, config))
}

/// The server's router for `config` over a fresh store (see [`state_over`]).
pub fn router_over(config: Config) -> (TempDir, Router) {
    let (dir, state) = state_over(config);
    (dir, router(state))
}

/// One operation of the OpenAPI document.
pub struct Operation {
    /// Its method.
    pub method: Method,
    /// Its path as the document writes it, such as `/v1/topics/{topic}`.
    pub path: String,
    /// The path with its names filled in: topic `t`, group `g`, channel `c`.
    pub uri: String,
}

/// Every GET, POST, PUT, PATCH and DELETE operation of the document, path by path.
pub fn operations() -> Vec<Operation> {
    let document = mailroom_server::openapi::document();
    let mut found = Vec::new();
    for (path, item) in &document.paths.paths {
        let uri = path
            .replace("{topic}", "t")
            .replace("{group}", "g")
            .replace("{channel}", "c");
        for (method, present) in [
            (Method::GET, item.get.is_some()),
            (Method::POST, item.post.is_some()),
            (Method::PUT, item.put.is_some()),
            (Method::PATCH, item.patch.is_some()),
            (Method::DELETE, item.delete.is_some()),
        ] {
            if present {
                found.push(Operation {
                    method,
                    path: path.clone(),
                    uri: uri.clone(),
                });
            }
        }
    }
    found
}
