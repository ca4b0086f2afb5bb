//! `mailroom serve`: run the broker until Ctrl-C or SIGTERM.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;

use mailroom_server::config::{Config, ConfigLayer, FsyncPolicy};
use mailroom_server::server::{shutdown_signal, Server};

/// Flags of `serve`. Each has an environment variable; the `--config` TOML file fills in
/// what neither sets, and the defaults the rest.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on; port 0 picks a free one [default: 127.0.0.1:7070].
    #[arg(long, env = "MAILROOM_LISTEN")]
    listen: Option<SocketAddr>,
    /// Data directory [default: ./mailroom-data].
    #[arg(long, env = "MAILROOM_DATA")]
    data: Option<PathBuf>,
    /// When to fsync: always, never or interval:MS [default: always].
    #[arg(long, env = "MAILROOM_FSYNC")]
    fsync: Option<FsyncPolicy>,
    /// Largest message body in bytes [default: 1048576].
    #[arg(long, env = "MAILROOM_MAX_PAYLOAD_BYTES")]
    max_payload_bytes: Option<u64>,
    /// Milliseconds a connection may take to send a request's head, or stay idle between
    /// requests, before it is closed [default: 10000].
    #[arg(long, env = "MAILROOM_HEADER_READ_TIMEOUT_MS")]
    header_read_timeout_ms: Option<u64>,
    /// An origin (http(s)://HOST[:PORT]) browsers may call from; repeat it or separate
    /// origins with commas [default: none, CORS off].
    #[arg(
        long = "cors-origin",
        env = "MAILROOM_CORS_ORIGIN",
        value_name = "ORIGIN"
    )]
    cors_origin: Vec<String>,
    /// Default retention age of every topic without its own, in milliseconds
    /// [default: unlimited].
    #[arg(long, env = "MAILROOM_RETENTION_MAX_AGE_MS")]
    retention_max_age_ms: Option<u64>,
    /// Default retention size of every topic without its own, in bytes
    /// [default: unlimited].
    #[arg(long, env = "MAILROOM_RETENTION_MAX_BYTES")]
    retention_max_bytes: Option<u64>,
    /// How often retention runs, in milliseconds [default: 10000].
    #[arg(long, env = "MAILROOM_RETENTION_INTERVAL_MS")]
    retention_interval_ms: Option<u64>,
    /// Size at which a log starts a new segment, in bytes; retention removes whole
    /// segments [default: 67108864].
    #[arg(long, env = "MAILROOM_SEGMENT_BYTES")]
    segment_bytes: Option<u64>,
    /// Most topics the store holds; past it creating one answers 409 topic_limit
    /// [default: sized from the open-file limit].
    #[arg(long, env = "MAILROOM_MAX_TOPICS")]
    max_topics: Option<usize>,
    /// Most connections served at once; past it a connection is answered 503
    /// connection_limit and closed [default: sized from the open-file limit, at most
    /// 10000].
    #[arg(long, env = "MAILROOM_MAX_CONNECTIONS")]
    max_connections: Option<usize>,
    /// Kernel send buffer (SO_SNDBUF) of every connection, in bytes [default: 262144].
    #[arg(long, env = "MAILROOM_SOCKET_SEND_BUFFER_BYTES")]
    socket_send_buffer_bytes: Option<usize>,
    /// Keep everything in this PostgreSQL database (postgres://USER[:PASSWORD]@HOST:PORT/DB)
    /// instead of the data directory; brokers sharing one database serve the same topics
    /// [default: the embedded store in --data].
    #[arg(long, env = "MAILROOM_STORE")]
    store: Option<String>,
    /// How many of a topic's newest messages its idempotency window covers: a repeated
    /// Idempotency-Key among them is answered as a duplicate [default: 10000; at most
    /// 1000000].
    #[arg(long, env = "MAILROOM_IDEMPOTENCY_WINDOW_MESSAGES")]
    idempotency_window_messages: Option<u64>,
    /// How long a topic's idempotency window remembers a key, in milliseconds
    /// [default: 120000; at most 604800000].
    #[arg(long, env = "MAILROOM_IDEMPOTENCY_WINDOW_MS")]
    idempotency_window_ms: Option<u64>,
    /// A TOML file with any of: listen, data, fsync, token, max_payload_bytes,
    /// header_read_timeout_ms, cors_origins, retention_max_age_ms, retention_max_bytes,
    /// retention_interval_ms, segment_bytes, max_topics, max_connections,
    /// socket_send_buffer_bytes, idempotency_window_messages, idempotency_window_ms,
    /// store.
    #[arg(long, env = "MAILROOM_CONFIG")]
    config: Option<PathBuf>,
    /// The client flags (`--server`, `--json`, `--timeout`), declared here hidden so that clap does
    /// not propagate the global ones into `serve --help`. Given, they are ignored, as
    /// before (`mailroom --server URL serve` in a shell set up for the client works).
    #[command(flatten)]
    client: ClientFlags,
}

/// The client-only flags as `serve` sees them: hidden, and of the global flags' types
/// (clap copies the global values, defaults included, into a subcommand's matches).
#[derive(Debug, clap::Args)]
struct ClientFlags {
    #[arg(long, hide = true)]
    server: Option<String>,
    #[arg(long, hide = true)]
    json: bool,
    #[arg(long, hide = true, value_parser = crate::timeout::seconds)]
    timeout: Option<std::time::Duration>,
}

/// Resolves the settings, starts the server, prints the bound address, and serves.
///
/// The line `mailroom listening on http://ADDR` goes to stdout (flushed) once the socket
/// is bound, so scripts and tests can find a port picked with `--listen 127.0.0.1:0`.
pub async fn run(args: Args, token: Option<String>) -> anyhow::Result<()> {
    // The access log is off unless RUST_LOG asks for it (`info` does): a line per
    // request is a `write(2)` and its formatting on every request, about 14% of a
    // relaxed publish's instructions (BENCHMARKS.md, "The server's allocator and its
    // access log"); brokers do not log every message by default.
    crate::init_logging("info,mailroom::access=off");
    let file = args
        .config
        .as_deref()
        .map(ConfigLayer::from_file)
        .transpose()?;
    let flags = ConfigLayer {
        listen: args.listen,
        data: args.data,
        fsync: args.fsync,
        token,
        max_payload_bytes: args.max_payload_bytes,
        header_read_timeout_ms: args.header_read_timeout_ms,
        cors_origins: Some(args.cors_origin).filter(|origins| !origins.is_empty()),
        retention_max_age_ms: args.retention_max_age_ms,
        retention_max_bytes: args.retention_max_bytes,
        retention_interval_ms: args.retention_interval_ms,
        segment_bytes: args.segment_bytes,
        max_topics: args.max_topics,
        max_connections: args.max_connections,
        socket_send_buffer_bytes: args.socket_send_buffer_bytes,
        store: args.store,
        idempotency_window_messages: args.idempotency_window_messages,
        idempotency_window_ms: args.idempotency_window_ms,
    };
    let config = Config::resolve(flags, file)?;
    tracing::info!(?config, "starting");
    let server = Server::start(config.clone()).await?;
    let address = server.local_addr()?;
    tracing::info!(%address, data = %config.data_dir.display(), fsync = %config.fsync, "listening");
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "mailroom listening on http://{address}")?;
    stdout.flush()?;
    drop(stdout);
    server.serve(shutdown_signal()).await?;
    Ok(())
}
