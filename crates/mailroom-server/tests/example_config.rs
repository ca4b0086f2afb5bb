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
    assert!(
        idempotency_window_messages.is_some(),
        "idempotency_window_messages"
    );
    assert!(idempotency_window_ms.is_some(), "idempotency_window_ms");
    let config = Config::resolve(ConfigLayer::default(), Some(layer)).expect("resolves");
    assert_eq!(config.data_dir, Path::new("/var/lib/mailroom"));
}
