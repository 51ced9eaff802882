//! The Kubernetes manifests (`deploy/kubernetes`) as a cluster would take them: each overlay
//! renders with `kubectl kustomize`; every object validates against Kubernetes' own schemas with
//! kubernetes-validate (a published validator nobody at herald wrote), strictly, so an unknown
//! field fails too; each container runs the shipped config with the environment it sets
//! (`herald migrate` for the Job, then `herald check-config` for the servers, on a PostgreSQL
//! database of the test's own for the PostgreSQL overlay); and the validator is shown to refuse
//! a broken object, so its passing means something.
//!
//! Needs `kubectl` and `kubernetes-validate==1.37.0` (`.ci/run` installs the latter, with the
//! PyYAML it brings, which reads the rendered objects here). Without them the test says loudly
//! that it was skipped; without `HERALD_ALLOW_SKIP=1` it fails instead.

mod support;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use support::{Backend, TempDir, TestDb, must_run};

const VALIDATOR_VERSION: &str = "1.37.0";
/// The Kubernetes version the objects are held to: the oldest still supported upstream when
/// the manifests were written.
const KUBERNETES_VERSION: &str = "1.32.0";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_overlay_renders_validates_and_runs_its_config() {
    let Some(python) = tools() else {
        return;
    };
    let dir = TempDir::new("herald-deploy");
    // The PostgreSQL overlay's Job and servers run against PostgreSQL, as in the cluster.
    let Some(db) = TestDb::new(Backend::Postgres).await else {
        return;
    };

    let postgres = render("postgres");
    assert_valid(&dir, "postgres", &postgres);
    let objects = parse(&python, &postgres);
    assert_eq!(
        kinds(&objects),
        [
            "ConfigMap",
            "Deployment",
            "Job",
            "NetworkPolicy",
            "PodDisruptionBudget",
            "Service"
        ]
        .into(),
        "the PostgreSQL overlay"
    );
    let server = &find(&objects, "Deployment")["spec"]["template"];
    assert_serves(&objects, server);
    let job = &find(&objects, "Job")["spec"]["template"];
    assert!(
        !selects(&find(&objects, "Service")["spec"]["selector"], job),
        "the Service must not send requests to the migration Job: {job}"
    );
    assert_restricted(job);
    runs_its_config(&dir, &objects, job, "migrate", &db.url);
    runs_its_config(&dir, &objects, server, "check-config", &db.url);
    assert!(
        db.count("notifications").await == 0,
        "the Job's migration made herald's tables in PostgreSQL"
    );

    let sqlite = render("sqlite");
    assert_valid(&dir, "sqlite", &sqlite);
    let objects = parse(&python, &sqlite);
    assert_eq!(
        kinds(&objects),
        ["ConfigMap", "NetworkPolicy", "Service", "StatefulSet"].into(),
        "the SQLite overlay"
    );
    let set = find(&objects, "StatefulSet");
    assert_eq!(set["spec"]["replicas"], 1, "SQLite has one writer");
    assert_serves(&objects, &set["spec"]["template"]);
    let sqlite = format!("sqlite://{}", dir.path().join("herald.db").display());
    runs_its_config(
        &dir,
        &objects,
        &set["spec"]["template"],
        "check-config",
        &sqlite,
    );

    // The validator refuses what a cluster would: a count written as a word.
    let broken = postgres.replacen("replicas: 2", "replicas: two", 1);
    assert_ne!(
        broken, postgres,
        "the rendered Deployment has `replicas: 2`"
    );
    let refused = validate(&dir, "broken", &broken);
    assert!(
        !refused.status.success(),
        "kubernetes-validate passed a Deployment with `replicas: two`:\n{}",
        String::from_utf8_lossy(&refused.stdout)
    );
}

/// The Python that runs kubernetes-validate (it has PyYAML), if the pinned validator and
/// kubectl are here; panics under CI when they are not.
fn tools() -> Option<PathBuf> {
    let validator = Command::new("kubernetes-validate")
        .arg("--version")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned());
    let kubectl = Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|out| out.status.success());
    if validator.as_deref() == Some(VALIDATOR_VERSION) && kubectl {
        // The script's own interpreter: a venv's, where `.ci/run` installs it.
        let script = which("kubernetes-validate")?;
        let first = std::fs::read_to_string(&script).ok()?;
        let python = first.lines().next()?.strip_prefix("#!")?.trim().to_owned();
        return Some(PathBuf::from(python));
    }
    let why = format!(
        "needs kubectl and kubernetes-validate {VALIDATOR_VERSION} (found {validator:?}, kubectl {kubectl})"
    );
    assert!(
        !must_run(),
        "HERALD_ALLOW_SKIP=1 is not set (CI=true never skips): {why}"
    );
    eprintln!("\n*** DEPLOY TEST SKIPPED: {why}\n");
    None
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
}

fn render(overlay: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/kubernetes")
        .join(overlay);
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(&path)
        .output()
        .expect("run kubectl kustomize");
    assert!(
        out.status.success(),
        "kubectl kustomize {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 manifests")
}

fn validate(dir: &TempDir, name: &str, yaml: &str) -> Output {
    let file = dir.path().join(format!("{name}.yaml"));
    std::fs::write(&file, yaml).expect("write the rendered overlay");
    Command::new("kubernetes-validate")
        .args(["--strict", "--kubernetes-version", KUBERNETES_VERSION])
        .arg(&file)
        .output()
        .expect("run kubernetes-validate")
}

fn assert_valid(dir: &TempDir, overlay: &str, yaml: &str) {
    let out = validate(dir, overlay, yaml);
    assert!(
        out.status.success(),
        "the {overlay} overlay does not validate against Kubernetes {KUBERNETES_VERSION}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The rendered objects, as JSON.
fn parse(python: &Path, yaml: &str) -> Vec<Value> {
    let mut child = Command::new(python)
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(sys.stdin))))",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run python");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(yaml.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "PyYAML could not read the manifests");
    serde_json::from_slice(&out.stdout).expect("objects as JSON")
}

fn kinds(objects: &[Value]) -> BTreeSet<&str> {
    objects.iter().filter_map(|o| o["kind"].as_str()).collect()
}

fn find<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}"))
}

/// Whether a label selector picks the pods of `template`.
fn selects(selector: &Value, template: &Value) -> bool {
    let labels = &template["metadata"]["labels"];
    selector
        .as_object()
        .is_some_and(|s| !s.is_empty() && s.iter().all(|(k, v)| &labels[k] == v))
}

/// The Service and the workload's own selector reach its pods, the probes ask herald's health
/// routes on the port the Service targets, the pod is locked down, and only its HTTP port takes
/// connections.
fn assert_serves(objects: &[Value], template: &Value) {
    let service = find(objects, "Service");
    assert!(
        selects(&service["spec"]["selector"], template),
        "the Service does not select the workload's pods: {template}"
    );
    let container = &template["spec"]["containers"][0];
    assert_eq!(container["args"], serde_json::json!(["serve"]));
    assert_eq!(
        container["ports"][0]["name"],
        service["spec"]["ports"][0]["targetPort"]
    );
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_restricted(template);
    let policy = find(objects, "NetworkPolicy");
    assert!(
        selects(&policy["spec"]["podSelector"]["matchLabels"], template),
        "the network policy does not cover the workload's pods: {policy}"
    );
    assert_eq!(
        policy["spec"]["ingress"],
        serde_json::json!([{"ports": [{"port": "http", "protocol": "TCP"}]}]),
        "only herald's HTTP port takes connections"
    );
}

/// What Pod Security's "restricted" level asks of a pod, and what herald adds: no service-account
/// token, bounded scratch space, and the image of a release rather than `latest`.
fn assert_restricted(template: &Value) {
    let spec = &template["spec"];
    assert_eq!(spec["automountServiceAccountToken"], false, "{spec}");
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true, "{spec}");
    assert_eq!(
        spec["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
        "{spec}"
    );
    for container in spec["containers"].as_array().unwrap() {
        let context = &container["securityContext"];
        assert_eq!(context["allowPrivilegeEscalation"], false, "{container}");
        assert_eq!(context["capabilities"]["drop"], serde_json::json!(["ALL"]));
        assert_eq!(context["readOnlyRootFilesystem"], true, "{container}");
        assert_eq!(
            container["image"],
            format!("herald:{}", env!("CARGO_PKG_VERSION")),
            "a release's image"
        );
    }
    for volume in spec["volumes"].as_array().unwrap() {
        if volume.get("emptyDir").is_some() {
            assert!(volume["emptyDir"]["sizeLimit"].is_string(), "{volume}");
        }
    }
}

/// Runs `herald <command>` with the pod's config file and exactly the environment its first
/// container sets: literal values as they are, the database Secret's URL as `database` (the
/// database the overlay is for), every other Secret's key as a stand-in value. A config that
/// needs a variable the pod does not set fails here as it would in the cluster.
fn runs_its_config(
    dir: &TempDir,
    objects: &[Value],
    template: &Value,
    command: &str,
    database: &str,
) {
    let config = find(objects, "ConfigMap")["data"]["herald.toml"]
        .as_str()
        .expect("herald.toml in the ConfigMap")
        .to_owned();
    let container = &template["spec"]["containers"][0];
    let mount = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "config")
        .expect("the config volume is mounted");
    let in_pod = Path::new(mount["mountPath"].as_str().unwrap()).join("herald.toml");
    let here = dir.path().join(format!("{command}-herald.toml"));
    std::fs::write(&here, config).unwrap();
    let mut run = Command::new(env!("CARGO_BIN_EXE_herald"));
    run.arg(command).env_clear();
    for var in container["env"].as_array().unwrap() {
        let name = var["name"].as_str().unwrap();
        let value = match (name, var["value"].as_str()) {
            ("HERALD_CONFIG", Some(path)) => {
                assert_eq!(
                    Path::new(path),
                    in_pod,
                    "HERALD_CONFIG names the mounted file"
                );
                here.display().to_string()
            }
            (_, Some(value)) => value.to_owned(),
            ("HERALD_DATABASE__URL", None) => database.to_owned(),
            (_, None) => {
                assert!(var["valueFrom"]["secretKeyRef"].is_object(), "{var}");
                format!("stand-in-for-{name}-at-least-32-characters-long")
            }
        };
        run.env(name, value);
    }
    let out = run.output().expect("run herald");
    assert!(
        out.status.success(),
        "herald {command} with the pod's config and environment:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
