//! The settings' layering and checks.

use super::*;

// Proves every fsync spelling round-trips and every malformed one is refused.
#[test]
fn fsync_policy_parses_and_refuses() {
    for text in ["always", "never", "interval:1", "interval:3600000"] {
        assert_eq!(text.parse::<FsyncPolicy>().unwrap().to_string(), text);
    }
    for text in [
        "",
        "Always",
        "interval:",
        "interval:0",
        "interval:-5",
        "interval:3600001",
        "sometimes",
    ] {
        assert!(
            text.parse::<FsyncPolicy>().is_err(),
            "{text:?} was accepted"
        );
    }
}

// Proves flags beat the file, the file beats the defaults, and bad values are refused.
#[test]
fn resolve_layers_and_checks() {
    let file = ConfigLayer::from_toml("fsync = \"never\"\nlisten = \"127.0.0.1:9\"").unwrap();
    let flags = ConfigLayer {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        ..Default::default()
    };
    let config = Config::resolve(flags, Some(file)).unwrap();
    assert_eq!(config.listen.port(), 0);
    assert_eq!(config.fsync, FsyncPolicy::Never);
    assert_eq!(config.payload_bytes_max, PAYLOAD_BYTES_MAX_DEFAULT);

    let zero = ConfigLayer {
        max_payload_bytes: Some(0),
        ..Default::default()
    };
    assert!(Config::resolve(zero, None).is_err());
    let spaced = ConfigLayer {
        token: Some("a b".into()),
        ..Default::default()
    };
    assert!(Config::resolve(spaced, None).is_err());
    for millis in [0, HEADER_READ_TIMEOUT_MS_MAX + 1] {
        let timeout = ConfigLayer {
            header_read_timeout_ms: Some(millis),
            ..Default::default()
        };
        assert!(
            Config::resolve(timeout, None).is_err(),
            "{millis} ms was accepted"
        );
    }
    let file = ConfigLayer::from_toml("header_read_timeout_ms = 250").unwrap();
    let config = Config::resolve(ConfigLayer::default(), Some(file)).unwrap();
    assert_eq!(config.header_read_timeout_ms, 250);
    assert!(ConfigLayer::from_toml("colour = \"blue\"").is_err());
}

// Proves CORS origins come from flags or the file, split at commas and normalized,
// and that a malformed one is refused.
#[test]
fn cors_origins_resolve() {
    let file = ConfigLayer::from_toml(r#"cors_origins = ["https://a.example"]"#).unwrap();
    let config = Config::resolve(ConfigLayer::default(), Some(file.clone())).unwrap();
    assert_eq!(config.cors_origins, ["https://a.example"]);
    let flags = ConfigLayer {
        cors_origins: Some(vec![
            "http://B.example:8080/, http://c.example".into(),
            "http://c.example".into(),
        ]),
        ..Default::default()
    };
    let config = Config::resolve(flags, Some(file)).unwrap();
    assert_eq!(
        config.cors_origins,
        ["http://b.example:8080", "http://c.example"]
    );
    assert!(Config::default().cors_origins.is_empty());
    let bad = ConfigLayer {
        cors_origins: Some(vec!["*".into()]),
        ..Default::default()
    };
    assert!(Config::resolve(bad, None).is_err());
}

// Proves the retention settings layer like the others and are refused out of range.
#[test]
fn retention_settings_resolve_and_check() {
    let file = ConfigLayer::from_toml(
        "retention_max_age_ms = 60000\nretention_max_bytes = 4096\nretention_interval_ms = 50",
    )
    .unwrap();
    let flags = ConfigLayer {
        retention_max_bytes: Some(8192),
        ..Default::default()
    };
    let config = Config::resolve(flags, Some(file)).unwrap();
    assert_eq!(config.retention_max_age_ms, Some(60_000));
    assert_eq!(config.retention_max_bytes, Some(8192));
    assert_eq!(config.retention_interval_ms, 50);
    let defaults = Config::resolve(ConfigLayer::default(), None).unwrap();
    assert_eq!(defaults.retention_max_bytes, None);
    assert_eq!(
        defaults.retention_interval_ms,
        RETENTION_INTERVAL_MS_DEFAULT
    );
    for layer in [
        ConfigLayer {
            retention_max_age_ms: Some(0),
            ..Default::default()
        },
        ConfigLayer {
            retention_max_bytes: Some(RETENTION_BYTES_MAX + 1),
            ..Default::default()
        },
        ConfigLayer {
            retention_interval_ms: Some(1),
            ..Default::default()
        },
    ] {
        assert!(
            Config::resolve(layer.clone(), None).is_err(),
            "{layer:?} accepted"
        );
    }
}

// Proves the token never appears in debug output, where logs would keep it.
#[test]
fn debug_hides_the_token() {
    let config = Config {
        token: Some("hunter2".into()),
        ..Config::default()
    };
    assert!(!format!("{config:?}").contains("hunter2"));
}

// Proves the resource limits layer like the others (unset caps stay open, to be sized
// from the open-file limit at start) and are refused out of range, naming the setting.
#[test]
fn resource_limits_resolve_and_check() {
    let file = ConfigLayer::from_toml("max_topics = 50\nsocket_send_buffer_bytes = 8192").unwrap();
    let flags = ConfigLayer {
        max_connections: Some(7),
        ..Default::default()
    };
    let config = Config::resolve(flags, Some(file)).unwrap();
    assert_eq!(config.topics_max, Some(50));
    assert_eq!(config.connections_max, Some(7));
    assert_eq!(config.socket_send_buffer_bytes, 8192);
    let defaults = Config::resolve(ConfigLayer::default(), None).unwrap();
    assert_eq!(
        (defaults.topics_max, defaults.connections_max),
        (None, None)
    );
    assert_eq!(
        defaults.socket_send_buffer_bytes,
        SOCKET_SEND_BUFFER_BYTES_DEFAULT
    );
    let bad = [
        (
            "max-topics",
            ConfigLayer {
                max_topics: Some(0),
                ..Default::default()
            },
        ),
        (
            "max-topics",
            ConfigLayer {
                max_topics: Some(TOPICS_MAX_LIMIT + 1),
                ..Default::default()
            },
        ),
        (
            "max-connections",
            ConfigLayer {
                max_connections: Some(0),
                ..Default::default()
            },
        ),
        (
            "socket-send-buffer-bytes",
            ConfigLayer {
                socket_send_buffer_bytes: Some(100),
                ..Default::default()
            },
        ),
    ];
    for (setting, layer) in bad {
        let error = Config::resolve(layer, None).unwrap_err();
        assert!(error.to_string().contains(setting), "{error}");
    }
}
