//! The container image (`Containerfile`) as it runs, and the compose start (`compose.yaml`) as
//! far as it can be checked without a registry.
//!
//! No image registry is reachable from where this runs, so the image is the Containerfile's
//! `prebuilt` stage, built by podman over a base made here: a minimal Debian bookworm root
//! (`debootstrap --variant=minbase`, Debian's own packages) imported as
//! `localhost/herald-base:bookworm`, made once (about a minute) and reused while it exists. The
//! stage puts this test build's `herald` on that base exactly as the image's last stage puts the
//! release build on `debian:bookworm-slim`. The container then runs as compose runs herald (the
//! same config, the same environment, hosts swapped for this machine's PostgreSQL and NATS): it
//! migrates, serves, delivers a notification, publishes its events, passes its health check,
//! runs as its non-root user and stops cleanly on SIGTERM.
//!
//! `compose.yaml` cannot start here (its PostgreSQL and NATS images come from a registry), so
//! it is validated by docker-compose 1.29 (Debian's, which checks the file against the Compose
//! specification's schema), its references are checked against each other, and herald's own
//! config check runs with exactly the environment and config file compose gives it.
//!
//! The PostgreSQL Kubernetes overlay runs too, under `podman kube play`: its migration Job's
//! pod, then its Deployment's, as the manifests confine them, on this machine's PostgreSQL.
//!
//! Needs root, podman with runc (and catatonit for kube play's pause image), debootstrap (only
//! while the base image is missing) and docker-compose; `.ci/run` installs them. Without them each test says loudly that it was
//! skipped; without `HERALD_ALLOW_SKIP=1` it fails instead.

mod support;

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use support::binary::free_port;
use support::{Backend, TempDir, TestDb, eventually, must_run};

/// The runtime's base, made here from Debian's packages when missing (see [`base_image`]).
/// A bare bookworm root, without CA roots: the image's own build must install them, as it does
/// over Docker Hub's slim base.
const BASE_IMAGE: &str = "localhost/herald-base:bookworm-bare";
const DEBIAN_MIRROR: &str = "http://deb.debian.org/debian";
/// The config compose mounts, and where.
const CONFIG_IN_REPO: &str = "examples/sandbox.toml";
const CONFIG_IN_CONTAINER: &str = "/etc/herald/herald.toml";
/// The secret examples/sandbox.toml reads its one token from.
const TOKEN: &str = "container-test-token-0123456789abcdef";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_migrates_serves_and_delivers_as_its_non_root_user_and_passes_its_health_check() {
    if !podman_here() {
        return;
    }
    let Some(db) = TestDb::new(Backend::Postgres).await else {
        return;
    };
    let Some(nats) = support::nats::shared().await else {
        return;
    };
    let started = Instant::now();
    base_image();
    let image = Image::build();
    eprintln!("image built in {:.1?}", started.elapsed());

    let config = podman(&["image", "inspect", "--format", "{{json .Config}}", &image.0]);
    let config: Value = serde_json::from_slice(&config.stdout).expect("the image's config");
    assert_eq!(config["User"], "10001:10001", "{config}");
    assert_eq!(config["Entrypoint"], json!(["herald"]));
    assert_eq!(config["Cmd"], json!(["serve"]));
    assert_eq!(config["WorkingDir"], "/data");
    assert!(config["Volumes"]["/data"].is_object(), "{config}");
    let health = podman(&[
        "image",
        "inspect",
        "--format",
        "{{json .HealthCheck}}",
        &image.0,
    ]);
    let health: Value = serde_json::from_slice(&health.stdout).expect("the image's health check");
    assert_eq!(
        health["Test"],
        json!(["CMD", "herald", "health"]),
        "built with --format docker, the image keeps its HEALTHCHECK"
    );

    // With nothing configured, the database is SQLite in /data, readable by herald's user
    // alone.
    let sqlite = podman(&[
        "run",
        "--rm",
        "--network",
        "host",
        "--no-healthcheck",
        "--ulimit",
        &nofile(),
        "--ulimit",
        NPROC,
        "--entrypoint",
        "sh",
        &image.0,
        "-c",
        "herald migrate && stat -c '%u %a %n' \"$PWD/herald.db\" \
         && test -s /etc/ssl/certs/ca-certificates.crt && echo 'CA roots present'",
    ]);
    let said = stdout(&sqlite);
    assert!(
        said.contains("migrations applied to sqlite://herald.db")
            && said.contains("10001 600 /data/herald.db"),
        "{said}"
    );
    assert!(
        said.contains("CA roots present"),
        "the image installed its CA roots over a base without them: {said}"
    );

    // compose's herald: its config and environment, on this machine's PostgreSQL and NATS.
    let port = free_port();
    let names = support::nats::Names::new();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let env = [
        ("HERALD_CONFIG", CONFIG_IN_CONTAINER.to_owned()),
        ("HERALD_DATABASE__URL", db.url.clone()),
        ("HERALD_SINKS__BUS__KIND", "nats".to_owned()),
        (
            "HERALD_SINKS__BUS__URL",
            support::nats::SHARED_URL.to_owned(),
        ),
        ("HERALD_SINKS__BUS__STREAM", names.stream.clone()),
        ("HERALD_SINKS__BUS__SUBJECT_PREFIX", names.prefix.clone()),
        ("HERALD_EXAMPLE_TOKEN", TOKEN.to_owned()),
        ("HERALD_SERVER__LISTEN", format!("0.0.0.0:{port}")),
    ];
    // Run as the manifests run it: a read-only root, a small writable /tmp.
    let mut run: Vec<String> = [
        "--read-only",
        "--tmpfs",
        "/tmp:size=64m",
        "--network",
        "host",
        "--ulimit",
        &nofile(),
        "--ulimit",
        NPROC,
        "-v",
        &format!(
            "{}:{CONFIG_IN_CONTAINER}:ro",
            repo.join(CONFIG_IN_REPO).display()
        ),
    ]
    .map(str::to_owned)
    .to_vec();
    for (name, value) in &env {
        run.extend(["-e".to_owned(), format!("{name}={value}")]);
    }
    let run: Vec<&str> = run.iter().map(String::as_str).collect();

    let migrate = podman(
        &[
            &["run", "--rm", "--no-healthcheck"][..],
            &run,
            &[image.0.as_str(), "migrate"],
        ]
        .concat(),
    );
    assert!(
        stdout(&migrate).contains("migrations applied to postgres://"),
        "{}",
        stdout(&migrate)
    );

    // No systemd here to run the health check's timer: the test runs the check itself.
    let container = Container::new();
    podman(
        &[
            &[
                "run",
                "--detach",
                "--name",
                &container.0,
                "--health-interval",
                "disable",
            ][..],
            &run,
            &[image.0.as_str()],
        ]
        .concat(),
    );
    let base = format!("http://127.0.0.1:{port}");
    let http = support::http_client();
    eventually(
        "the container to serve /readyz",
        Duration::from_secs(60),
        || {
            let (http, base) = (http.clone(), base.clone());
            let container = &container;
            async move {
                let ready = http.get(format!("{base}/readyz")).send().await;
                if ready.is_ok_and(|r| r.status() == StatusCode::OK) {
                    return Some(());
                }
                assert!(container.running(), "herald stopped:\n{}", container.logs());
                None
            }
        },
    )
    .await;

    let created = http
        .post(format!("{base}/v1/notifications"))
        .bearer_auth(TOKEN)
        .header("Idempotency-Key", "container-1")
        .json(&support::email("ada@example.com"))
        .send()
        .await
        .expect("POST /v1/notifications");
    assert_eq!(created.status(), StatusCode::ACCEPTED);
    let id = created.json::<Value>().await.unwrap()["id"]
        .as_str()
        .expect("an id")
        .to_owned();
    let shown = eventually(
        "the notification to be delivered",
        Duration::from_secs(30),
        || {
            let (http, url) = (http.clone(), format!("{base}/v1/notifications/{id}"));
            async move {
                let n: Value = http
                    .get(url)
                    .bearer_auth(TOKEN)
                    .send()
                    .await
                    .ok()?
                    .json()
                    .await
                    .ok()?;
                (n["state"] == "delivered").then_some(n)
            }
        },
    )
    .await;
    assert_eq!(shown["certainty"], "known", "{shown}");
    let published = eventually(
        "the delivered event on NATS",
        Duration::from_secs(30),
        || {
            let (nats, stream, id) = (nats.clone(), names.stream.clone(), id.clone());
            async move {
                let events = support::nats::stored(&nats, &stream).await;
                events.into_iter().find(|e| {
                    e.event["type"] == "dev.herald.notification.delivered"
                        && e.event["subject"] == id
                })
            }
        },
    )
    .await;
    assert_eq!(
        published.subject,
        format!("{}.notification.delivered", names.prefix)
    );

    let checked = podman(&["healthcheck", "run", &container.0]);
    assert!(checked.status.success(), "{}", stderr(&checked));
    let probe = podman(&["exec", &container.0, "herald", "health"]);
    assert_eq!(stdout(&probe), "ready\n");
    let pid = stdout(&podman(&[
        "inspect",
        "--format",
        "{{.State.Pid}}",
        &container.0,
    ]));
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid.trim()))
        .expect("the serving process's status");
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .expect("a Uid line");
    assert_eq!(
        uid.split_whitespace().collect::<Vec<_>>(),
        ["10001"; 4],
        "herald serves as its own user, not root"
    );

    // herald is PID 1: it takes SIGTERM itself and exits 0, well before podman's SIGKILL.
    let stopping = Instant::now();
    podman(&["stop", "--time", "20", &container.0]);
    let code = stdout(&podman(&[
        "inspect",
        "--format",
        "{{.State.ExitCode}}",
        &container.0,
    ]));
    assert_eq!(code.trim(), "0", "{}", container.logs());
    assert!(
        stopping.elapsed() < Duration::from_secs(15),
        "stopped in {:?}",
        stopping.elapsed()
    );
    drop(container);
    let _ = async_nats::jetstream::new(nats)
        .delete_stream(&names.stream)
        .await;
    eprintln!("container test done in {:.1?}", started.elapsed());
}

/// The PostgreSQL overlay's manifests as podman runs Kubernetes objects (`podman kube play`),
/// against this machine's PostgreSQL: the migration Job's pod migrates and exits 0, then the
/// Deployment's pod serves, ready, as the manifests confine it (read-only root, its own user,
/// every capability dropped, the memory limit). What the test changes is only what a cluster
/// would give and this machine has not: the image is this build's, each Secret's value is a
/// stand-in (the database's URL is the test database's), the pods share the host's network
/// (no cluster network reaches loopback's PostgreSQL; the server listens on a free port, where
/// its probes look, and declares no port, which host networking cannot map), the Job runs as a
/// pod of its own template (podman has no Job), one replica, and no more open files than the
/// machine allows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_postgresql_overlay_runs_under_podman_kube_play() {
    if !podman_here() {
        return;
    }
    let Some(python) = compose_tools() else {
        return;
    };
    let Some(db) = TestDb::new(Backend::Postgres).await else {
        return;
    };
    base_image();
    let image = Image::build();
    let rendered = Command::new("kubectl")
        .args(["kustomize"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/postgres"))
        .output()
        .expect("run kubectl kustomize");
    assert!(rendered.status.success(), "{}", stderr(&rendered));
    let objects = yaml_to_json(&python, &rendered.stdout);
    let objects = objects.as_array().expect("the overlay's objects");
    let of = |kind: &str| {
        objects
            .iter()
            .find(|o| o["kind"] == kind)
            .unwrap_or_else(|| panic!("the overlay has a {kind}"))
            .clone()
    };
    let port = free_port();
    let token = "kube-play-oncall-token-0123456789abcdef";
    let here = |spec: &mut Value| {
        spec["hostNetwork"] = json!(true);
        for container in spec["containers"].as_array_mut().unwrap() {
            container["image"] = json!(image.0);
            let env = container["env"].as_array_mut().unwrap();
            for var in env.iter_mut() {
                if var["valueFrom"]["secretKeyRef"].is_object() {
                    let value = match var["name"].as_str().unwrap() {
                        "HERALD_DATABASE__URL" => db.url.clone(),
                        "HERALD_TOKEN_ONCALL" => token.to_owned(),
                        name => format!("stand-in-for-{name}-at-least-32-characters"),
                    };
                    *var = json!({"name": var["name"], "value": value});
                }
            }
            env.push(
                json!({"name": "HERALD_SERVER__LISTEN", "value": format!("127.0.0.1:{port}")}),
            );
            if let Some(container) = container.as_object_mut() {
                container.remove("ports");
            }
            for probe in ["livenessProbe", "readinessProbe"] {
                if container[probe].is_object() {
                    container[probe]["httpGet"]["port"] = json!(port);
                }
            }
        }
    };
    let config = of("ConfigMap");
    let job = of("Job");
    let mut migrate = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("herald-migrate-{port}")},
        "spec": job["spec"]["template"]["spec"],
    });
    here(&mut migrate["spec"]);
    let mut server = of("Deployment");
    server["metadata"]["name"] = json!(format!("herald-{port}"));
    server["spec"]["replicas"] = json!(1);
    here(&mut server["spec"]["template"]["spec"]);

    let dir = TempDir::new("herald-kube-play");
    // JSON is YAML: each file is the ConfigMap and one workload.
    let write = |name: &str, workload: &Value| {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("{config}\n---\n{workload}\n")).unwrap();
        path
    };
    let (migrate_file, server_file) = (
        write("migrate.yaml", &migrate),
        write("server.yaml", &server),
    );
    let limits = dir.path().join("containers.conf");
    std::fs::write(
        &limits,
        format!(
            "[containers]\ndefault_ulimits = [\"{}\", \"{NPROC}\"]\n",
            nofile()
        ),
    )
    .unwrap();
    let play = |file: &Path, verb: &str| {
        let out = podman_command()
            .env("CONTAINERS_CONF", &limits)
            .args(["kube", verb])
            .arg(file)
            .stdin(Stdio::null())
            .output()
            .expect("run podman kube");
        (
            out.status.success(),
            format!("{}{}", stdout(&out), stderr(&out)),
        )
    };
    let _down = Down(vec![
        (limits.clone(), migrate_file.clone()),
        (limits.clone(), server_file.clone()),
    ]);

    let (played, said) = play(&migrate_file, "play");
    assert!(played, "podman kube play of the migration: {said}");
    let migration = format!(
        "herald-migrate-{port}-{}",
        job["spec"]["template"]["spec"]["containers"][0]["name"]
            .as_str()
            .unwrap()
    );
    let exited = eventually("the migration to end", Duration::from_secs(60), || async {
        let out = podman(&[
            "inspect",
            "--format",
            "{{.State.Status}} {{.State.ExitCode}}",
            &migration,
        ]);
        let state = stdout(&out).trim().to_owned();
        state.starts_with("exited").then_some(state)
    })
    .await;
    let logs = stdout(&podman(&["logs", &migration])) + &stderr(&podman(&["logs", &migration]));
    assert_eq!(exited, "exited 0", "{logs}");
    assert!(logs.contains("migrations applied to postgres://"), "{logs}");

    let (played, said) = play(&server_file, "play");
    assert!(played, "podman kube play of the Deployment: {said}");
    let base = format!("http://127.0.0.1:{port}");
    let http = support::http_client();
    eventually("the pod to be ready", Duration::from_secs(60), || {
        let (http, base) = (http.clone(), base.clone());
        async move {
            let ready = http.get(format!("{base}/readyz")).send().await.ok()?;
            (ready.status() == StatusCode::OK).then_some(())
        }
    })
    .await;
    let routes = http
        .get(format!("{base}/v1/routes"))
        .bearer_auth(token)
        .send()
        .await
        .expect("GET /v1/routes");
    assert_eq!(routes.status(), StatusCode::OK, "the overlay's own token");

    let serving = format!(
        "herald-{port}-pod-0-{}",
        server["spec"]["template"]["spec"]["containers"][0]["name"]
            .as_str()
            .unwrap()
    );
    let confined = stdout(&podman(&[
        "inspect",
        "--format",
        "{{.HostConfig.ReadonlyRootfs}} {{.HostConfig.Memory}} {{.Config.User}} {{len .HostConfig.CapAdd}} {{.State.Pid}}",
        &serving,
    ]));
    let confined: Vec<&str> = confined.split_whitespace().collect();
    assert_eq!(
        confined[..4],
        ["true", "268435456", "10001:10001", "0"],
        "read-only root, the 256Mi limit, herald's user, no capability added"
    );
    let status = std::fs::read_to_string(format!("/proc/{}/status", confined[4])).unwrap();
    let caps = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .expect("a CapEff line");
    assert_eq!(caps.trim(), "0000000000000000", "every capability dropped");
}

/// Takes down what `podman kube play` started from each file, however the test ends.
struct Down(Vec<(PathBuf, PathBuf)>);

impl Drop for Down {
    fn drop(&mut self) {
        for (limits, file) in &self.0 {
            let _ = podman_command()
                .env("CONTAINERS_CONF", limits)
                .args(["kube", "down"])
                .arg(file)
                .output();
        }
    }
}

/// compose.yaml as Compose reads it (`docker-compose config`, against the Compose schema):
/// herald serves only after its migration completed, on a healthy PostgreSQL and NATS. No
/// Compose engine runs here (Docker's is not on this machine), so this starts nothing: the test
/// above runs compose's herald itself — its image, config and environment — on this machine's
/// PostgreSQL and NATS.
#[test]
fn compose_orders_herald_after_its_migration_and_a_healthy_postgresql_and_nats() {
    let Some(python) = compose_tools() else {
        return;
    };
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let compose = |env: &[(&str, &str)]| {
        let mut command = Command::new("docker-compose");
        command
            .args(["--file", "compose.yaml", "config"])
            .current_dir(repo)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default());
        for (name, value) in env {
            command.env(name, value);
        }
        command.output().expect("run docker-compose")
    };

    // Its secrets are the operator's to set: without them it does not start.
    let unset = compose(&[]);
    assert!(!unset.status.success());
    assert!(
        stderr(&unset).contains("set POSTGRES_PASSWORD"),
        "{}",
        stderr(&unset)
    );
    let resolved = compose(&[
        ("POSTGRES_PASSWORD", "container-test-password"),
        ("HERALD_EXAMPLE_TOKEN", TOKEN),
    ]);
    assert!(
        resolved.status.success(),
        "docker-compose finds compose.yaml invalid:\n{}",
        stderr(&resolved)
    );
    let file = yaml_to_json(&python, &resolved.stdout)[0].clone();
    let services = file["services"].as_object().expect("services");
    assert_eq!(
        services.keys().map(String::as_str).collect::<Vec<_>>(),
        ["herald", "migrate", "nats", "postgres"]
    );

    // Each service waits for what it needs, in a state that service can reach.
    for (name, service) in services {
        for (needed, how) in service["depends_on"].as_object().into_iter().flatten() {
            let target = &services
                .get(needed)
                .unwrap_or_else(|| panic!("{name} depends on {needed}, which is not a service"));
            match how["condition"].as_str() {
                Some("service_healthy") => assert!(
                    target["healthcheck"]["test"].is_array(),
                    "{name} waits for {needed} to be healthy, which has no health check"
                ),
                Some("service_completed_successfully") => assert_eq!(
                    target["restart"], "no",
                    "{name} waits for {needed} to finish, which restarts"
                ),
                other => panic!("{name} waits for {needed} to be {other:?}"),
            }
        }
    }
    let herald = &services["herald"];
    let migrate = &services["migrate"];
    assert_eq!(migrate["command"], json!(["migrate"]));
    assert_eq!(herald["command"], json!(["serve"]));
    assert_eq!(
        herald["depends_on"]["migrate"]["condition"],
        "service_completed_successfully"
    );
    assert_eq!(
        herald["healthcheck"]["test"],
        json!(["CMD", "herald", "health"])
    );
    for service in [herald, migrate] {
        assert_eq!(service["build"]["dockerfile"], "Containerfile");
        assert_eq!(
            Path::new(service["build"]["context"].as_str().unwrap()),
            repo,
            "built from this repository"
        );
        assert_eq!(service["image"], herald["image"], "one image for both");
    }
    // Every named volume is declared.
    let declared = file["volumes"].as_object().expect("volumes");
    for (name, service) in services {
        for volume in service["volumes"].as_array().into_iter().flatten() {
            let source = volume.as_str().unwrap().split(':').next().unwrap();
            assert!(
                source.starts_with('/') || declared.contains_key(source),
                "{name} mounts volume {source}, which is not declared"
            );
        }
    }

    // herald reaches PostgreSQL and NATS by their service names, and serves on the port compose
    // publishes, which is the one the image listens on.
    let image_env = containerfile_env();
    let listen = &image_env["HERALD_SERVER__LISTEN"];
    let port = listen.rsplit(':').next().unwrap();
    let published = herald["ports"][0]
        .as_str()
        .expect("herald publishes a port");
    assert!(
        published.ends_with(&format!(":{port}/tcp")) || published.ends_with(&format!(":{port}")),
        "compose publishes {published}, the image listens on {listen}"
    );
    let env = &herald["environment"];
    let database = url::Url::parse(env["HERALD_DATABASE__URL"].as_str().unwrap()).unwrap();
    assert!(
        services.contains_key(database.host_str().unwrap()),
        "{database}"
    );
    let bus = url::Url::parse(env["HERALD_SINKS__BUS__URL"].as_str().unwrap()).unwrap();
    assert!(services.contains_key(bus.host_str().unwrap()), "{bus}");
    assert_eq!(env["HERALD_SINKS__BUS__KIND"], "nats");
    assert!(
        services["nats"]["command"]
            .as_array()
            .unwrap()
            .contains(&json!("--jetstream")),
        "the sink publishes to JetStream"
    );

    // The config herald gets there is one herald takes: its check, with exactly that
    // environment (the image's and the service's) and the mounted file.
    for (name, service) in [("herald", herald), ("migrate", migrate)] {
        let mut check = Command::new(env!("CARGO_BIN_EXE_herald"));
        check.arg("check-config").env_clear();
        let mounted = mounted_config(service, repo);
        let set_by_service = service["environment"].as_object().unwrap().iter();
        let env = image_env.clone().into_iter().chain(
            set_by_service.map(|(key, value)| (key.clone(), value.as_str().unwrap().to_owned())),
        );
        for (key, value) in env {
            if key == "HERALD_CONFIG" {
                assert_eq!(value, CONFIG_IN_CONTAINER);
                check.env(key, &mounted);
            } else {
                check.env(key, value);
            }
        }
        let out = check.output().expect("run herald check-config");
        assert!(
            out.status.success() && stdout(&out).contains("config is valid"),
            "herald check-config with the {name} service's config and environment:\n{}{}",
            stdout(&out),
            stderr(&out)
        );
    }
}

/// Whether podman (and, for a missing base image, debootstrap) can run here as root; panics
/// under CI when not.
fn podman_here() -> bool {
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    let podman = Command::new("podman")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    let runc = Command::new("runc")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    let why = if !root {
        Some("needs root (rootful podman, debootstrap)".to_owned())
    } else if !(podman && runc) {
        Some(format!(
            "needs podman and runc (found podman {podman}, runc {runc})"
        ))
    } else if !base_exists() && !debootstrap_here() {
        Some(format!(
            "{BASE_IMAGE} is missing and debootstrap, which makes it, is not installed"
        ))
    } else {
        None
    };
    let Some(why) = why else {
        return true;
    };
    assert!(
        !must_run(),
        "HERALD_ALLOW_SKIP=1 is not set (CI=true never skips): {why}"
    );
    eprintln!("\n*** CONTAINER TEST SKIPPED: {why}\n");
    false
}

fn debootstrap_here() -> bool {
    Command::new("debootstrap")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success())
}

/// podman as root on a machine without systemd: runc, and cgroups managed by podman itself.
fn podman_command() -> Command {
    let mut command = Command::new("podman");
    command.args(["--runtime", "runc", "--cgroup-manager", "cgroupfs"]);
    command
}

/// Runs `podman ARGS`, which must succeed.
fn podman(args: &[&str]) -> Output {
    let out = podman_command()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run podman");
    assert!(
        out.status.success(),
        "podman {}:\n{}{}",
        args.join(" "),
        stdout(&out),
        stderr(&out)
    );
    out
}

/// podman as root asks runc for 1,048,576 open files and processes, which a root without
/// CAP_SYS_RESOURCE (such as these machines' own) may not set: the container gets at most what
/// this test has, which is plenty for one herald.
fn nofile() -> String {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let hard = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(4))
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(4096);
    let n = hard.min(65_536);
    format!("nofile={n}:{n}")
}

/// Below the limit podman's own monitor runs under (32,768 here), far above what herald uses.
const NPROC: &str = "nproc=4096:4096";

fn base_exists() -> bool {
    podman_command()
        .args(["image", "exists", BASE_IMAGE])
        .status()
        .is_ok_and(|s| s.success())
}

/// Makes [`BASE_IMAGE`] unless it exists: a minimal bookworm root, less the package cache and
/// index (as Debian's slim image is), imported as an image.
fn base_image() {
    if base_exists() {
        return;
    }
    let started = Instant::now();
    let dir = TempDir::new("herald-base");
    let root = dir.path().join("root");
    let out = Command::new("debootstrap")
        .args(["--variant=minbase", "bookworm"])
        .arg(&root)
        .arg(DEBIAN_MIRROR)
        .output()
        .expect("run debootstrap");
    assert!(
        out.status.success(),
        "debootstrap:\n{}{}",
        stdout(&out),
        stderr(&out)
    );
    for (dir, keep) in [
        ("var/cache/apt/archives", "lock"),
        ("var/lib/apt/lists", "lock"),
    ] {
        for entry in std::fs::read_dir(root.join(dir)).expect("the apt directories") {
            let path = entry.unwrap().path();
            if path.is_file() && !path.ends_with(keep) {
                std::fs::remove_file(path).unwrap();
            }
        }
    }
    let tar = dir.path().join("root.tar");
    let packed = Command::new("tar")
        .arg("-C")
        .arg(&root)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .expect("run tar");
    assert!(packed.success(), "tar the root");
    podman(&[
        "import",
        "--change",
        "CMD [\"/bin/bash\"]",
        tar.to_str().unwrap(),
        BASE_IMAGE,
    ]);
    eprintln!("made {BASE_IMAGE} in {:.1?}", started.elapsed());
}

/// The `prebuilt` stage with this test's `herald`, under a tag of its own; removed when dropped.
struct Image(String);

impl Image {
    fn build() -> Image {
        // The context is the binary alone: nothing else of the repository goes to podman.
        let context = TempDir::new("herald-image");
        std::fs::copy(env!("CARGO_BIN_EXE_herald"), context.path().join("herald"))
            .expect("copy herald into the build context");
        let tag = format!("localhost/herald-test:{}", uuid::Uuid::new_v4().simple());
        let containerfile = Path::new(env!("CARGO_MANIFEST_DIR")).join("Containerfile");
        podman(&[
            "build",
            // The OCI format, podman's default, has no HEALTHCHECK.
            "--format",
            "docker",
            "--target",
            "prebuilt",
            "--build-arg",
            &format!("BASE={BASE_IMAGE}"),
            // The runtime stage fetches CA roots from Debian's mirror.
            "--network",
            "host",
            "--file",
            containerfile.to_str().unwrap(),
            "--tag",
            &tag,
            context.path().to_str().unwrap(),
        ]);
        Image(tag)
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        let _ = podman_command().args(["rmi", "--force", &self.0]).output();
    }
}

/// A container name of the test's own; the container is removed when dropped.
struct Container(String);

impl Container {
    fn new() -> Container {
        Container(format!("herald-test-{}", uuid::Uuid::new_v4().simple()))
    }

    fn running(&self) -> bool {
        let out = podman(&["inspect", "--format", "{{.State.Running}}", &self.0]);
        stdout(&out).trim() == "true"
    }

    fn logs(&self) -> String {
        let out = podman_command()
            .args(["logs", &self.0])
            .output()
            .expect("run podman logs");
        format!("{}{}", stdout(&out), stderr(&out))
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = podman_command()
            .args(["rm", "--force", "--volumes", "--time", "1", &self.0])
            .output();
    }
}

/// The Python that runs docker-compose (it has PyYAML), if docker-compose 1.29 is here; panics
/// under CI when it is not.
fn compose_tools() -> Option<PathBuf> {
    let version = Command::new("docker-compose")
        .args(["version", "--short"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| stdout(&out).trim().to_owned());
    if let Some(version) = version.as_deref().filter(|v| v.starts_with("1.29.")) {
        let script = std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|dir| dir.join("docker-compose"))
            .find(|path| path.is_file())?;
        let text = std::fs::read_to_string(&script).ok()?;
        let python = text.lines().next()?.strip_prefix("#!")?.trim().to_owned();
        eprintln!("docker-compose {version} ({python})");
        return Some(PathBuf::from(python));
    }
    let why = format!("needs docker-compose 1.29 (Debian's; found {version:?})");
    assert!(
        !must_run(),
        "HERALD_ALLOW_SKIP=1 is not set (CI=true never skips): {why}"
    );
    eprintln!("\n*** COMPOSE TEST SKIPPED: {why}\n");
    None
}

fn yaml_to_json(python: &Path, yaml: &[u8]) -> Value {
    use std::io::Write;
    let mut child = Command::new(python)
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps([d for d in yaml.safe_load_all(sys.stdin) if d]))",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run python");
    child.stdin.take().unwrap().write_all(yaml).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "PyYAML could not read the YAML");
    serde_json::from_slice(&out.stdout).expect("the YAML's documents as JSON")
}

/// The Containerfile's `ENV NAME=VALUE` lines: what every container of the image starts with.
fn containerfile_env() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Containerfile"))
        .expect("read the Containerfile");
    let env: BTreeMap<String, String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("ENV "))
        .flat_map(str::split_whitespace)
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    assert!(env.contains_key("HERALD_SERVER__LISTEN"), "{env:?}");
    env
}

/// Where on this machine the file is that `service` mounts at its `HERALD_CONFIG`.
fn mounted_config(service: &Value, repo: &Path) -> PathBuf {
    let mount = service["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .find(|v| v.split(':').nth(1) == Some(CONFIG_IN_CONTAINER))
        .expect("the config file is mounted");
    let source = PathBuf::from(mount.split(':').next().unwrap());
    assert_eq!(source, repo.join(CONFIG_IN_REPO));
    source
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
