//! A PostgreSQL cluster of the test's own, on a free port, for tests that stop and start the
//! database. The machine's shared server serves every other test running in parallel, so it is
//! never the one a test takes down.
//!
//! The cluster lives in a directory under `/tmp` owned by user `postgres` (initdb and the
//! server refuse to run as root, and tests usually run as root in CI). It is stopped and its
//! directory removed when the [`PgCluster`] is dropped, also when the test panics.

use std::path::{Path, PathBuf};
use std::process::Output;

use tokio::process::Command;

use super::binary::free_port;
use super::must_run;

pub struct PgCluster {
    /// The directory of `initdb`, `pg_ctl` and `postgres`.
    bin: PathBuf,
    /// Holds `data/`, the Unix socket and `server.log`; owned by the user the server runs as.
    dir: PathBuf,
    pub port: u16,
    /// Root runs the tools through `runuser -u postgres`; anyone else runs them directly.
    as_postgres: bool,
}

/// The newest `/usr/lib/postgresql/<version>/bin` holding `initdb`, or `HERALD_TEST_PG_BIN`.
fn find_bin_dir() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("HERALD_TEST_PG_BIN") {
        return Some(PathBuf::from(dir)).filter(|d| d.join("initdb").is_file());
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry
                .file_name()
                .to_str()?
                .split('.')
                .next()?
                .parse()
                .ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

fn running_as_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl PgCluster {
    /// Creates and starts a cluster. `None` (after a loud message) when PostgreSQL's server
    /// binaries are not installed; without `HERALD_ALLOW_SKIP=1` that is a failure instead.
    pub async fn start() -> Option<PgCluster> {
        let Some(bin) = find_bin_dir() else {
            assert!(
                !must_run(),
                "HERALD_ALLOW_SKIP=1 is not set (CI=true never skips) and no PostgreSQL server binaries (initdb) under /usr/lib/postgresql/*/bin \
                 or HERALD_TEST_PG_BIN"
            );
            eprintln!(
                "\n*** TEST SKIPPED: it needs a PostgreSQL cluster of its own, and no initdb was found \
                 under /usr/lib/postgresql/*/bin (set HERALD_TEST_PG_BIN); without HERALD_ALLOW_SKIP=1 this fails\n"
            );
            return None;
        };
        // Not `std::env::temp_dir()`: TMPDIR may point somewhere user `postgres` cannot enter.
        let dir = PathBuf::from(format!("/tmp/herald-pg-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("create the cluster directory");
        let as_postgres = running_as_root();
        let cluster = PgCluster {
            bin,
            dir,
            port: free_port(),
            as_postgres,
        };
        if as_postgres {
            let chown = std::process::Command::new("chown")
                .args(["postgres:postgres"])
                .arg(&cluster.dir)
                .status()
                .expect("run chown");
            assert!(chown.success(), "chown postgres {}", cluster.dir.display());
        }
        // -N: no fsync while creating the cluster; it is thrown away after the test anyway.
        let data = cluster.data_dir();
        let init = cluster
            .tool("initdb")
            .arg("-D")
            .arg(&data)
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "-N",
                "-E",
                "UTF8",
                "--locale=C",
            ])
            .output()
            .await
            .expect("run initdb");
        check("initdb", &init);
        cluster.start_server().await;
        Some(cluster)
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// A connection string for the cluster's `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// A command for one of the PostgreSQL tools, run as the cluster's owner.
    fn tool(&self, name: &str) -> Command {
        let mut command = Command::from(self.tool_std(name));
        command.kill_on_drop(true);
        command
    }

    fn tool_std(&self, name: &str) -> std::process::Command {
        let program = self.bin.join(name);
        let mut command = if self.as_postgres {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        } else {
            std::process::Command::new(program)
        };
        // The tools must not pick up the caller's PG* settings (a PGPORT would win over -p).
        for var in ["PGPORT", "PGHOST", "PGDATA", "PGUSER", "PGDATABASE"] {
            command.env_remove(var);
        }
        command.current_dir(&self.dir);
        command
    }

    fn pg_ctl(&self, args: &[&str]) -> Command {
        let mut command = self.tool("pg_ctl");
        command.arg("-D").arg(self.data_dir()).args(args);
        command
    }

    /// Starts the server and waits until it accepts connections (`pg_ctl -w`).
    pub async fn start_server(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.dir.display()
        );
        let output = self
            .pg_ctl(&["-w", "-t", "60", "-o", &options, "-l"])
            .arg(self.log_path())
            .arg("start")
            .output()
            .await
            .expect("run pg_ctl start");
        if !output.status.success() {
            panic!(
                "pg_ctl start failed: {}\nserver log:\n{}",
                describe(&output),
                self.log()
            );
        }
    }

    /// Stops the server (`-m fast`: open sessions are cut, as in an outage), and waits for it.
    pub async fn stop_server(&self) {
        let output = self
            .pg_ctl(&["-w", "-t", "60", "-m", "fast", "stop"])
            .output()
            .await
            .expect("run pg_ctl stop");
        check("pg_ctl stop", &output);
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

fn describe(output: &Output) -> String {
    format!(
        "{}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn check(what: &str, output: &Output) {
    assert!(
        output.status.success(),
        "{what} failed: {}",
        describe(output)
    );
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        // Immediate: nothing in the cluster is worth a checkpoint. Errors are ignored: the
        // server may already be stopped, and a failing test must show its own panic.
        let _ = self
            .tool_std("pg_ctl")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-w", "-t", "30", "-m", "immediate", "stop"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
