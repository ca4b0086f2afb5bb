//! The example config file in `docs/` parses with the server's own loader and sets
//! every key, so it cannot drift from what the server reads.

use std::path::Path;

use mailroom_server::config::{Config, ConfigLayer, FsyncPolicy};

// Proves docs/mailroom.toml loads, names every key of `ConfigLayer` (the destructuring
// below has no `..`, so a new key fails to compile here until the example shows it),
// and resolves to a config.
#[test]
fn example_config_sets_every_key() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/mailroom.toml");
    let layer = ConfigLayer::from_file(&path).expect("docs/mailroom.toml parses");
    let ConfigLayer {
        listen,
        data,
        fsync,
        token,
        max_payload_bytes,
        header_read_timeout_ms,
        cors_origins,
        retention_max_age_ms,
        retention_max_bytes,
        retention_interval_ms,
        segment_bytes,
        max_topics,
        max_connections,
        socket_send_buffer_bytes,
        store,
        idempotency_window_messages,
        idempotency_window_ms,
    } = layer.clone();
    assert!(listen.is_some(), "listen");
    assert!(data.is_some(), "data");
    assert_eq!(fsync, Some(FsyncPolicy::Always));
    assert!(token.is_some(), "token");
    assert!(max_payload_bytes.is_some(), "max_payload_bytes");
    assert!(header_read_timeout_ms.is_some(), "header_read_timeout_ms");
    assert!(cors_origins.is_some(), "cors_origins");
    assert!(retention_max_age_ms.is_some(), "retention_max_age_ms");
    assert!(retention_max_bytes.is_some(), "retention_max_bytes");
    assert!(retention_interval_ms.is_some(), "retention_interval_ms");
    assert!(segment_bytes.is_some(), "segment_bytes");
    assert!(max_topics.is_some(), "max_topics");
    assert!(max_connections.is_some(), "max_connections");
    assert!(
        socket_send_buffer_bytes.is_some(),
        "socket_send_buffer_bytes"
    );
    // Shown commented out: an example that ran against a database nobody has would not
    // start; `store_key_names_a_database` below parses the line.
    assert!(store.is_none(), "store");
    assert!(
        idempotency_window_messages.is_some(),
        "idempotency_window_messages"
    );
    assert!(idempotency_window_ms.is_some(), "idempotency_window_ms");
    let config = Config::resolve(ConfigLayer::default(), Some(layer)).expect("resolves");
    assert_eq!(config.data_dir, Path::new("/var/lib/mailroom"));
}

// Proves the example's commented `store` line is a key the loader reads, with a URL the
// config check accepts.
#[test]
fn store_key_names_a_database() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/mailroom.toml");
    let text = std::fs::read_to_string(path).expect("docs/mailroom.toml reads");
    let line = text
        .lines()
        .find_map(|line| line.strip_prefix("# store = "))
        .expect("the example shows the store key");
    let layer = ConfigLayer::from_toml(&format!("store = {line}")).expect("the line parses");
    let config = Config::resolve(ConfigLayer::default(), Some(layer)).expect("resolves");
    assert!(config
        .store
        .is_some_and(|url| url.starts_with("postgres://")));
    let bad = ConfigLayer::from_toml(r#"store = "mysql://x""#).unwrap();
    assert!(Config::resolve(ConfigLayer::default(), Some(bad)).is_err());
}
