//! `mailroom`: run the broker (`mailroom serve`) and talk to it.
//!
//! Every command except `serve` is a client of a running server (`--server`, default
//! `http://127.0.0.1:7070`). `--json` prints one JSON document per result for scripts.
//! `--timeout` bounds how long any request waits for the server.

mod api;
mod commands;
mod dates;
#[cfg(test)]
mod fake;
mod metadata;
mod names;
mod output;
mod report;
mod timeout;
mod units;

use std::time::Duration;

use clap::{Parser, Subcommand};
use mailroom_client::Client;

use crate::output::Output;

/// The server's requests allocate and free small buffers on every call (hyper's header
/// maps, axum's boxed futures and extractors, the JSON answer), often on another worker
/// than the one that allocated them; glibc's allocator spent about 30% of the server's
/// user-space instructions on them in a relaxed publish profile, mimalloc a third of
/// that (BENCHMARKS.md, "The server's allocator and its access log"); `mailroom-allocator`
/// says why it is not `mimalloc::MiMalloc` as such.
#[global_allocator]
static ALLOCATOR: mailroom_allocator::Allocator = mailroom_allocator::Allocator;

/// The mailroom message broker.
#[derive(Debug, Parser)]
#[command(name = "mailroom", version, about)]
struct Cli {
    /// The server to talk to (every command but serve).
    #[arg(
        long,
        global = true,
        env = "MAILROOM_URL",
        default_value = "http://127.0.0.1:7070"
    )]
    server: String,
    /// The bearer token: the one `serve` requires, and the one other commands present.
    #[arg(long, global = true, env = "MAILROOM_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Print JSON instead of text; a failure is then one JSON object on stdout too.
    #[arg(long, global = true)]
    json: bool,
    /// Seconds a request may wait for the server's answer (connecting: at most 5 of
    /// them); a long poll's wait is added.
    #[arg(
        long,
        global = true,
        env = "MAILROOM_TIMEOUT",
        value_name = "SECONDS",
        default_value = "30",
        value_parser = timeout::seconds
    )]
    timeout: Duration,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the broker server.
    Serve(Box<commands::serve::Args>),
    /// Create, list and inspect topics.
    #[command(subcommand)]
    Topic(commands::topic::TopicCommand),
    /// Create and inspect consumer groups.
    #[command(subcommand)]
    Group(commands::group::GroupCommand),
    /// Publish one message, or one message per line of stdin or a file.
    Publish(commands::publish::Args),
    /// Poll a group, print each message, and ack it (or run a command and ack or nack).
    Consume(commands::consume::Args),
    /// Print messages of a topic's log without a group (nothing moves), from an offset
    /// or a time.
    Read(commands::read::Args),
    /// Print the last messages of a topic's log; --follow keeps printing new ones.
    Tail(commands::tail::Args),
    /// List a group's dead letters (offset, attempts, reason, time, payload), a page at a
    /// time with --limit.
    DeadLetters(commands::dead_letters::Args),
    /// Live channels: create, publish, subscribe, close.
    #[command(subcommand)]
    Channel(commands::channel::ChannelCommand),
    /// Topics, groups and channels at a glance.
    Stats,
    /// Repair a damaged topic in a store no server has open (`--data DIR --topic T`).
    Repair(commands::repair::Args),
    /// The live-channel scenario: driver locations to three subscribers, one slow.
    Demo(commands::demo::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::try_parse().unwrap_or_else(|error| usage_failure(&error));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("mailroom: cannot start the async runtime: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let server = cli.server.clone();
    let output = Output { json: cli.json };
    match runtime.block_on(run(cli)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            let line = report::one_line(&error, &server);
            eprintln!("mailroom: {line}");
            // Bad usage found after parsing (nothing was sent) exits 2, like clap's own.
            let usage = error.downcast_ref::<BadServer>().is_some();
            if output.json {
                let code = if usage { "usage" } else { report::code(&error) };
                output.emit_error(code, report::status(&error), &line);
            }
            if usage {
                std::process::ExitCode::from(2)
            } else {
                std::process::ExitCode::FAILURE
            }
        }
    }
}

/// Reports a command line clap refused (exit 2) or a help or version request (exit 0).
/// With `--json` a refusal is also one JSON error on stdout, as every other failure.
fn usage_failure(error: &clap::Error) -> ! {
    let json_requested = std::env::args_os()
        .skip(1)
        .take_while(|arg| arg != "--")
        .any(|arg| arg == "--json");
    if error.use_stderr() && json_requested {
        let rendered = error.render().to_string();
        let first = rendered.lines().next().unwrap_or_default();
        let message = first.strip_prefix("error: ").unwrap_or(first);
        Output { json: true }.emit_error("usage", None, message);
    }
    error.exit()
}

/// A `--server` value that is not a server URL: bad usage, exit 2 as the README says.
#[derive(Debug)]
struct BadServer(String, String);

impl std::fmt::Display for BadServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid --server {:?}: {}", self.0, self.1)
    }
}

impl std::error::Error for BadServer {}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let output = Output { json: cli.json };
    let command = match cli.command {
        Command::Serve(args) => return commands::serve::run(*args, cli.token).await,
        // Offline: works on the data directory, talks to no server.
        Command::Repair(args) => {
            init_logging("warn");
            return commands::repair::run(args, output);
        }
        command => command,
    };
    init_logging("warn");
    let mut client = Client::with_timeouts(&cli.server, timeout::timeouts(cli.timeout))
        .map_err(|error| BadServer(cli.server.clone(), error.to_string()))?;
    if let Some(token) = cli.token {
        check_token(&token)?;
        client = client.with_token(token);
    }
    match command {
        Command::Serve(_) | Command::Repair(_) => unreachable!("handled above"),
        Command::Topic(command) => commands::topic::run(&client, command, output).await,
        Command::Group(command) => commands::group::run(&client, command, output).await,
        Command::Publish(args) => commands::publish::run(&client, args, output).await,
        // The stream is a WebSocket of the concrete client, outside the `Api` trait.
        Command::Consume(args) if args.stream => {
            commands::consume::consume_stream(&client, &args, output)
                .await
                .map(|_| ())
        }
        Command::Consume(args) => commands::consume::run(&client, args, output).await,
        Command::Read(args) => commands::read::run(&client, args, output).await,
        Command::Tail(args) => commands::tail::run(&client, args, output).await,
        Command::DeadLetters(args) => commands::dead_letters::run(&client, args, output).await,
        Command::Channel(command) => commands::channel::run(&client, command, output).await,
        Command::Stats => commands::stats::run(&client, output).await,
        Command::Demo(args) => commands::demo::run(&client, args, output).await,
    }
}

/// Checks a bearer token with the rule `mailroom serve` applies to its own: one or more
/// printable ASCII characters, no spaces (anything else cannot travel in a header).
///
/// # Errors
/// A message that names the flag and the rule, never the token itself (it is a secret).
fn check_token(token: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        !token.is_empty() && token.bytes().all(|b| b.is_ascii_graphic()),
        "invalid token (--token or MAILROOM_TOKEN): it must be non-empty printable ASCII \
         without spaces (to send none, leave both unset)"
    );
    Ok(())
}

/// Logs to stderr; `RUST_LOG` overrides the default level.
fn init_logging(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;

    /// The flags only the client commands read. They are global, so `mailroom --json
    /// topic list` and `mailroom topic list --json` both work, but `serve` declares them
    /// itself, hidden, which keeps clap from propagating them into its help.
    const CLIENT_FLAGS: [&str; 3] = ["server", "json", "timeout"];

    // Proves the clap definition is consistent (no clashing flags or names).
    #[test]
    fn cli_definition_is_valid() {
        Cli::command().debug_assert();
    }

    // Proves `serve --help` lists the server's flags and none of the client's, which
    // every client command still lists.
    #[test]
    fn serve_help_leaves_out_the_client_flags() {
        let mut command = Cli::command();
        // Building propagates the global flags, as parsing does.
        command.build();
        let serve = command
            .find_subcommand_mut("serve")
            .expect("serve")
            .render_long_help()
            .to_string();
        assert!(
            serve.contains("--listen") && serve.contains("--token"),
            "{serve}"
        );
        for flag in CLIENT_FLAGS {
            assert!(!serve.contains(&format!("--{flag}")), "--{flag} in {serve}");
        }
        let publish = command
            .find_subcommand_mut("publish")
            .expect("publish")
            .render_long_help()
            .to_string();
        for flag in CLIENT_FLAGS {
            assert!(
                publish.contains(&format!("--{flag}")),
                "no --{flag} in {publish}"
            );
        }
    }

    // Proves a token that cannot be sent in a header is refused without echoing it.
    #[test]
    fn tokens_must_be_printable() {
        assert!(check_token("s3cret-token").is_ok());
        for bad in ["", "has space", "new\nline", "tab\t"] {
            let error = check_token(bad).unwrap_err().to_string();
            assert!(error.contains("--token"), "{error}");
            assert!(bad.is_empty() || !error.contains(bad), "{error}");
        }
    }
}
