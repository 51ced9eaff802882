//! herald as a separate process (the real `herald` binary), for tests that kill it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::eventually;

pub struct HeraldProcess {
    child: Child,
    pub base: String,
    config: PathBuf,
    log: PathBuf,
    env: Vec<(String, String)>,
}

/// `GET /v1/notifications/{id}` from the herald at `base`, as the tests' sender (`ACME`).
pub async fn show(http: &reqwest::Client, base: &str, id: &str) -> serde_json::Value {
    http.get(format!("{base}/v1/notifications/{id}"))
        .bearer_auth(super::ACME)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// A free loopback port (the kernel's choice, released for the child to take).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl HeraldProcess {
    /// Starts `herald serve` with `config_text` and waits until `/readyz` answers 200.
    pub async fn start(config_text: &str, dir: &Path, name: &str) -> HeraldProcess {
        Self::start_with_env(config_text, dir, name, &[]).await
    }

    /// As [`HeraldProcess::start`], with these environment variables for the child (and its
    /// restarts), e.g. secrets that the config names by env var.
    pub async fn start_with_env(
        config_text: &str,
        dir: &Path,
        name: &str,
        env: &[(&str, &str)],
    ) -> HeraldProcess {
        Self::start_joining(config_text, dir, name, env, None).await
    }

    /// As [`HeraldProcess::start_with_env`], the process joining the cgroup whose
    /// `cgroup.procs` is `procs` before it runs herald's first instruction, so that all it ever
    /// holds counts there.
    pub async fn start_in_cgroup(
        config_text: &str,
        dir: &Path,
        name: &str,
        env: &[(&str, &str)],
        procs: &Path,
    ) -> HeraldProcess {
        Self::start_joining(config_text, dir, name, env, Some(procs)).await
    }

    async fn start_joining(
        config_text: &str,
        dir: &Path,
        name: &str,
        env: &[(&str, &str)],
        cgroup: Option<&Path>,
    ) -> HeraldProcess {
        let config = dir.join(format!("{name}.toml"));
        std::fs::write(&config, config_text).expect("write config");
        let log = dir.join(format!("{name}.log"));
        let base = config_text
            .lines()
            .find_map(|l| l.strip_prefix("listen = \""))
            .map(|l| format!("http://{}", l.trim_end_matches('"')))
            .expect("the config names a listen address");
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut process = HeraldProcess {
            child: spawn(&config, &log, &env, cgroup),
            base,
            config,
            log,
            env,
        };
        process.wait_ready().await;
        process
    }

    async fn wait_ready(&mut self) {
        let http = super::http_client();
        let url = format!("{}/readyz", self.base);
        let log = self.log.clone();
        let child = &mut self.child;
        // Generous: under a full CI run four crash tests restart processes at once on two cores
        // (load average near 20), and a start that took over 30 s failed a run whose herald was
        // only slow. A process that is not ready in 90 s is broken.
        eventually("herald to become ready", Duration::from_secs(90), || {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "herald exited with {status} before it was ready:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            let http = http.clone();
            let url = url.clone();
            async move {
                let response = http.get(&url).send().await.ok()?;
                response.status().is_success().then_some(())
            }
        })
        .await;
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it is still running (not killed, not exited).
    pub fn running(&mut self) -> bool {
        self.child.try_wait().is_ok_and(|exited| exited.is_none())
    }

    /// SIGKILL: no shutdown code runs, exactly as in a crash.
    pub fn kill(&mut self) {
        self.child.kill().expect("SIGKILL herald");
        self.child.wait().expect("reap herald");
    }

    /// SIGTERM, then waits for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        self.signal("TERM");
        self.child.wait().expect("reap herald")
    }

    /// SIGSTOP: the process stands still, mid-send or mid-wait, as a stalled machine or a
    /// paused VM would; its leases run out meanwhile.
    pub fn freeze(&self) {
        self.signal("STOP");
    }

    /// SIGCONT after [`HeraldProcess::freeze`]: it goes on from where it stood.
    pub fn thaw(&self) {
        self.signal("CONT");
    }

    fn signal(&self, name: &str) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args([&format!("-{name}"), &pid])
            .status()
            .expect("run kill");
        assert!(sent.success(), "SIG{name} to herald {pid}");
    }

    /// Starts the same configuration again (after a kill).
    pub async fn restart(&mut self) {
        self.child = spawn(&self.config, &self.log, &self.env, None);
        self.wait_ready().await;
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// `herald serve` with `config`; where `cgroup` names a `cgroup.procs`, a shell first writes its
/// own pid there, then becomes herald (`exec`), so that herald runs inside it from the start.
fn spawn(config: &Path, log: &Path, env: &[(String, String)], cgroup: Option<&Path>) -> Child {
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("open the log");
    let mut command = match cgroup {
        None => Command::new(env!("CARGO_BIN_EXE_herald")),
        Some(procs) => {
            let mut shell = Command::new("sh");
            shell
                .args(["-c", "echo $$ > \"$0\" && exec \"$@\""])
                .arg(procs)
                .arg(env!("CARGO_BIN_EXE_herald"));
            shell
        }
    };
    command
        .args(["serve", "--config"])
        .arg(config)
        .env_remove("HERALD_CONFIG")
        .env("RUST_LOG", "info,sqlx=warn")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().expect("clone the log handle"))
        .stderr(log_file)
        .spawn()
        .expect("start the herald binary")
}

impl Drop for HeraldProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
