//! PostgreSQL clusters driven by the tests themselves: the test cluster's files (to stop
//! and start it), and clusters of a test's own (a primary and a streaming standby) made
//! with the same binaries and the same owner, and stopped when dropped.

use std::os::unix::fs::MetadataExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The test cluster's data directory and `pg_ctl`, as the cluster itself tells them.
pub async fn cluster_files(url: &str) -> (PathBuf, PathBuf) {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let data: String = client
        .query_one("SHOW data_directory", &[])
        .await
        .unwrap()
        .get(0);
    let bin: String = client
        .query_one("SELECT setting FROM pg_config WHERE name = 'BINDIR'", &[])
        .await
        .unwrap()
        .get(0);
    (PathBuf::from(data), Path::new(&bin).join("pg_ctl"))
}

/// This process's user id, read from `/proc` (no libc call needed).
pub fn own_uid() -> u32 {
    std::fs::metadata("/proc/self").expect("/proc/self").uid()
}

/// Makes `command` run as the owner of `path` (PostgreSQL refuses root, and under CI the
/// test cluster belongs to another user, whom `scripts/postgres.sh` made for it).
pub fn as_owner_of<'a>(command: &'a mut Command, path: &Path) -> &'a mut Command {
    let metadata = std::fs::metadata(path).expect("the owner's path");
    if metadata.uid() != own_uid() {
        command.uid(metadata.uid()).gid(metadata.gid());
    }
    command
}

/// Runs `pg_ctl` on `data` with `args`, as the data directory's owner.
pub fn pg_ctl(pg_ctl: &Path, data: &Path, args: &[&str]) {
    let output = run(as_owner_of(
        Command::new(pg_ctl).arg("-D").arg(data).args(args),
        data,
    ));
    assert!(output.status.success(), "pg_ctl {args:?}: {output:?}");
}

fn run(command: &mut Command) -> Output {
    command.output().expect("run a PostgreSQL program")
}

/// The newest installed PostgreSQL's `bin` directory, found as `scripts/postgres.sh`
/// finds it (the highest version under `/usr/lib/postgresql` that has `initdb`).
pub fn bin_dir() -> PathBuf {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL is installed (scripts/postgres.sh installs it)")
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().expect("a PostgreSQL with initdb").1
}

/// A loopback port free when asked (PostgreSQL may still lose it to another process:
/// [`Node::start`] tries again on another).
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().unwrap().port()
}

/// One PostgreSQL server of a test's own, in `dir/name`, on a loopback port.
pub struct Node {
    bin: PathBuf,
    /// The data directory.
    pub data: PathBuf,
    /// Its server log.
    pub log: PathBuf,
    /// Its port once started.
    pub port: u16,
    /// The options it was started with, to start it again alike.
    options: String,
}

impl Node {
    /// A node whose data directory will be `dir/name` (`dir` belongs to the cluster's
    /// owner).
    pub fn new(bin: &Path, dir: &Path, name: &str) -> Node {
        Node {
            bin: bin.to_owned(),
            data: dir.join(name),
            log: dir.join(format!("{name}.log")),
            port: 0,
            options: String::new(),
        }
    }

    /// A command of the PostgreSQL binaries, as the owner of `owned`.
    pub fn program(&self, program: &str, owned: &Path) -> Command {
        let mut command = Command::new(self.bin.join(program));
        as_owner_of(&mut command, owned);
        command
    }

    /// `initdb`: the superuser `mailroom`, trusted on loopback (replication included).
    pub fn init(&self, dir: &Path) {
        let output = run(self.program("initdb", dir).arg("-D").arg(&self.data).args([
            "-U",
            "mailroom",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-instructions",
        ]));
        assert!(output.status.success(), "initdb: {output:?}");
    }

    /// Starts the server on a free port with `settings` (`-c name=value` pairs) beside
    /// the loopback ones, trying other ports if one is taken meanwhile.
    pub fn start(&mut self, settings: &str) {
        let dir = self.data.parent().unwrap().to_owned();
        for _ in 0..5 {
            self.port = free_port();
            let options = format!(
                "-c listen_addresses=127.0.0.1 -c port={} -c unix_socket_directories={} {settings}",
                self.port,
                dir.display()
            );
            self.options = options;
            if self.start_again() {
                return;
            }
        }
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        panic!("{} did not start:\n{log}", self.data.display());
    }

    /// Starts the server again on its port with its settings, after a stop; whether it
    /// started.
    pub fn start_again(&self) -> bool {
        let dir = self.data.parent().unwrap();
        let started = run(self
            .program("pg_ctl", dir)
            .arg("-D")
            .arg(&self.data)
            .arg("-l")
            .arg(&self.log)
            .args(["-w", "-t", "60", "-o", &self.options, "start"]));
        started.status.success()
    }

    /// `pg_ctl` with `args` on this node.
    pub fn pg_ctl(&self, args: &[&str]) {
        pg_ctl(&self.bin.join("pg_ctl"), &self.data, args);
    }

    /// `host:port`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The URL of its `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://mailroom@{}/postgres", self.host())
    }
}

impl Drop for Node {
    /// Stops the server hard, whatever the test did: a failed test leaves no cluster.
    fn drop(&mut self) {
        if self.data.join("postmaster.pid").exists() {
            let _ = self
                .program("pg_ctl", &self.data)
                .arg("-D")
                .arg(&self.data)
                .args(["-m", "immediate", "-w", "stop"])
                .output();
        }
    }
}
