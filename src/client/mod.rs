//! The API client behind `herald send`, `herald status` and `herald review`: each command is
//! one or two requests to a running herald (`HERALD_URL`, `HERALD_TOKEN`), printed for a person
//! (or as the API's JSON with `--json`). An error answer becomes one line naming its cause.
//! `herald health` asks `/readyz` the same way, without a token. `review` holds the review
//! commands, `show` how answers are printed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use reqwest::Method;
use serde_json::{Map, Value, json};

use crate::cli::{ApiArgs, CancelArgs, HealthArgs, RoutesCommand, SendArgs};
use crate::config::Config;

mod review;
mod show;

pub use review::review;
use show::{text, timeline};

struct Api {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Api {
    fn new(args: &ApiArgs) -> anyhow::Result<Api> {
        if args.token.trim().is_empty() {
            bail!(
                "HERALD_TOKEN is empty: give the token `herald serve` printed, or a configured one"
            );
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .context("cannot build an HTTP client")?;
        Ok(Api {
            http,
            base: args.url.trim_end_matches('/').to_owned(),
            token: args.token.clone(),
        })
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        key: Option<&str>,
    ) -> anyhow::Result<(bool, Value)> {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(body);
        }
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        let response = request.send().await.map_err(|err| {
            anyhow::anyhow!("cannot reach herald at {}: {}", self.base, chain(&err))
        })?;
        let status = response.status();
        let replayed = response.headers().contains_key("idempotent-replayed");
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            let title = body["title"].as_str().unwrap_or("error");
            let detail = body["detail"].as_str().unwrap_or("");
            let field = body["field"]
                .as_str()
                .map(|f| format!(" (field `{f}`)"))
                .unwrap_or_default();
            bail!("{} {title}: {detail}{field}", status.as_u16());
        }
        Ok((replayed, body))
    }

    async fn get(&self, path: &str) -> anyhow::Result<Value> {
        Ok(self.call(Method::GET, path, None, None).await?.1)
    }

    async fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        Ok(self.call(Method::POST, path, Some(body), None).await?.1)
    }
}

fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    herald_provider::http::error_chain(err)
}

/// `herald send`.
pub async fn send(args: SendArgs) -> anyhow::Result<()> {
    let api = Api::new(&args.api)?;
    let mut body = match &args.file {
        None => Map::new(),
        Some(path) => {
            let text = if path.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin()).context("cannot read stdin")?
            } else {
                std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read {}", path.display()))?
            };
            match serde_json::from_str(&text)
                .with_context(|| format!("{} is not JSON", path.display()))?
            {
                Value::Object(map) => map,
                _ => bail!("{} must hold a JSON object", path.display()),
            }
        }
    };
    for (name, value) in [
        ("channel", &args.channel),
        ("to", &args.to),
        ("route", &args.route),
        ("subject", &args.subject),
        ("text", &args.text),
        ("html", &args.html),
        ("template", &args.template),
        ("delivery", &args.delivery),
        ("cancellation_key", &args.cancellation_key),
        ("expires_at", &args.expires_at),
        ("locale", &args.locale),
        ("category", &args.category),
    ] {
        if let Some(value) = value {
            body.insert(name.to_owned(), Value::String(value.clone()));
        }
    }
    if let Some(ttl) = args.ttl_seconds {
        body.insert("ttl_seconds".to_owned(), ttl.into());
    }
    if let Some(data) = &args.data {
        let data: Value = serde_json::from_str(data).context("--data is not JSON")?;
        body.insert("data".to_owned(), data);
    }
    if !args.attachments.is_empty() {
        let attachments = args
            .attachments
            .iter()
            .map(|given| attachment(given))
            .collect::<anyhow::Result<Vec<Value>>>()?;
        body.insert("attachments".to_owned(), Value::Array(attachments));
    }
    let (replayed, created) = api
        .call(
            Method::POST,
            "/v1/notifications",
            Some(&Value::Object(body)),
            Some(&args.idempotency_key),
        )
        .await?;
    println!(
        "{} {} ({})",
        created["id"].as_str().unwrap_or("?"),
        created["state"].as_str().unwrap_or("?"),
        if replayed { "replayed" } else { "accepted" }
    );
    Ok(())
}

/// One `--attach PATH[;type=MIME]` as the API takes it.
fn attachment(given: &str) -> anyhow::Result<Value> {
    use base64::Engine;
    let (path, content_type) = match given.rsplit_once(";type=") {
        Some((path, content_type)) => (Path::new(path), content_type.to_owned()),
        None => {
            // The type its extension opens as: the one herald holds the file to.
            let path = Path::new(given);
            let Some(guessed) = mime_guess::from_path(path).first_raw() else {
                bail!("--attach {given}: give its type as `{given};type=…`");
            };
            (path, guessed.to_owned())
        }
    };
    let filename = path
        .file_name()
        .and_then(|n| n.to_str())
        .with_context(|| format!("--attach {given}: not a file name"))?;
    let content = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(serde_json::json!({
        "filename": filename,
        "content_type": content_type,
        "content": base64::engine::general_purpose::STANDARD.encode(content),
    }))
}

/// `herald cancel (ID | --cancellation-key KEY | --idempotency-key KEY)`: one line per
/// notification, its id and where it stands.
pub async fn cancel(args: CancelArgs) -> anyhow::Result<()> {
    let api = Api::new(&args.api)?;
    if let Some(id) = &args.id {
        let (_, n) = api
            .call(
                Method::POST,
                &format!("/v1/notifications/{id}/cancel"),
                Some(&json!({})),
                None,
            )
            .await?;
        println!("{id} {}", n["state"].as_str().unwrap_or("?"));
        return Ok(());
    }
    let body = match (&args.cancellation_key, &args.idempotency_key) {
        (Some(key), _) => json!({"cancellation_key": key}),
        (None, Some(key)) => json!({"idempotency_key": key}),
        (None, None) => bail!("give an id, --cancellation-key or --idempotency-key"),
    };
    let (_, done) = api
        .call(Method::POST, "/v1/notifications/cancel", Some(&body), None)
        .await?;
    for id in done["cancelled"].as_array().into_iter().flatten() {
        println!("{} cancelled", id.as_str().unwrap_or("?"));
    }
    for n in done["not_cancelled"].as_array().into_iter().flatten() {
        println!(
            "{} not cancelled: {}",
            n["id"].as_str().unwrap_or("?"),
            n["state"].as_str().unwrap_or("?")
        );
    }
    Ok(())
}

/// `herald routes list|pause|resume`.
pub async fn routes(command: RoutesCommand) -> anyhow::Result<()> {
    let (api, change) = match &command {
        RoutesCommand::List { api } => (api, None),
        RoutesCommand::Pause {
            name,
            note,
            to_fallback,
            api,
        } => (
            api,
            Some((
                "pause",
                name,
                json!({ "note": note, "to_fallback": to_fallback }),
            )),
        ),
        RoutesCommand::Resume { name, note, api } => {
            (api, Some(("resume", name, json!({ "note": note }))))
        }
    };
    let api = Api::new(api)?;
    let Some((action, name, body)) = change else {
        let routes = api.get("/v1/routes").await?;
        for route in routes["data"].as_array().into_iter().flatten() {
            println!("{}", route_line(route));
        }
        return Ok(());
    };
    let (_, route) = api
        .call(
            Method::POST,
            &format!("/v1/routes/{name}/{action}"),
            Some(&body),
            None,
        )
        .await?;
    println!("{}", route_line(&route));
    Ok(())
}

/// One route as a line: name, provider, circuit, and who paused it and why (shown only to the
/// tenant that operates it).
fn route_line(route: &Value) -> String {
    let pause = &route["paused_by_operator"];
    let standing = if pause.is_object() {
        format!(
            "paused by {} at {}{}{}",
            pause["principal"].as_str().unwrap_or("its operator"),
            text(&pause["at"]),
            if pause["to_fallback"] == true {
                format!(", its work to {}", text(&route["fallback"]))
            } else {
                String::new()
            },
            pause["note"]
                .as_str()
                .map(|note| format!(": {note}"))
                .unwrap_or_default()
        )
    } else {
        "sending".to_owned()
    };
    format!(
        "{}  {}  circuit {}  {standing}",
        text(&route["name"]),
        text(&route["provider"]),
        text(&route["circuit"]["state"])
    )
}

/// `herald status ID`.
pub async fn status(api: &ApiArgs, id: &str) -> anyhow::Result<()> {
    let api = Api::new(api)?;
    let n = api.get(&format!("/v1/notifications/{id}")).await?;
    print!("{}", timeline(&n, None));
    Ok(())
}

/// `herald health`: one `GET /readyz`; `ready` on stdout when it answers 2xx, else an error
/// naming the answer (or why there was none), which exits 1.
pub async fn health(args: HealthArgs) -> anyhow::Result<()> {
    let base = match &args.url {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None => {
            // Only the listen address is wanted: the config's shape, not its secrets.
            let config = Config::load(args.config.config.as_deref(), std::env::vars())?;
            format!("http://{}", probe_address(config.server.listen))
        }
    };
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(args.timeout_seconds))
        // Asked from beside herald: a proxy set for the vendors must not stand in between.
        .no_proxy()
        .build()
        .context("cannot build an HTTP client")?;
    let url = format!("{base}/readyz");
    let response = http
        .get(&url)
        .send()
        .await
        .map_err(|err| anyhow::anyhow!("cannot reach herald at {base}: {}", chain(&err)))?;
    let status = response.status();
    if !status.is_success() {
        let body: Value = response.json().await.unwrap_or(Value::Null);
        let why = body["detail"]
            .as_str()
            .map(|detail| format!(": {detail}"))
            .unwrap_or_default();
        bail!("not ready: {url} answered {}{why}", status.as_u16());
    }
    println!("ready");
    Ok(())
}

/// Where a probe beside herald reaches a server listening on `listen`: a wildcard address
/// (every interface) on loopback, any other as it is.
fn probe_address(listen: SocketAddr) -> SocketAddr {
    let ip = match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, listen.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeline_names_every_attempt_its_evidence_and_its_settlement() {
        let n = json!({
            "id": "n-1", "channel": "email", "to": "ada@example.com", "route": "mail",
            "state": "delivered", "certainty": "known", "delivery": "at_most_once",
            "created_at": "2026-11-30T12:00:00Z", "updated_at": "2026-11-30T12:05:00Z",
            "attempts": [{"n": 1, "started_at": "2026-11-30T12:00:01Z", "finished_at": null,
                          "route": "mail", "result": "ambiguous", "provider_idempotency_key": "k",
                          "settled_by": "review",
                          "evidence": {"stage": "lease_expired", "detail": "crashed",
                                       "settlement": {"outcome": "accepted", "evidence": {"note": "seen"}}}},
                         {"n": 2, "started_at": "2026-11-30T12:00:02Z", "finished_at": null,
                          "route": "mail", "result": "rejected", "provider_idempotency_key": "k",
                          "evidence": {"stage": "response", "status": 503,
                                       "detail": {"message": "unavailable"},
                                       "failover": {"to": "backup", "because": "attempt 2 on `mail`: vendor_unavailable"}}},
                         {"n": 3, "started_at": "2026-11-30T12:00:03Z", "finished_at": null,
                          "route": "backup", "result": "rejected", "provider_idempotency_key": "k-f1",
                          "evidence": {"stage": "response", "status": 422,
                                       "detail": {"message": "bad number"}}}],
            "review": {"open": false, "resolutions": [{"at": "2026-11-30T12:05:00Z",
                "principal": "oncall", "outcome": "delivered", "then": null, "note": "seen",
                "forced": false, "key_renewed": false}]}
        });
        let text = timeline(&n, None);
        assert!(text.contains("delivered/known (at_most_once)"), "{text}");
        assert!(
            text.contains("#1 2026-11-30T12:00:01Z → -  on mail  ambiguous"),
            "{text}"
        );
        assert!(
            text.contains("then failed over to `backup`: attempt 2 on `mail`: vendor_unavailable"),
            "{text}"
        );
        assert!(text.contains("on backup  rejected"), "{text}");
        assert!(text.contains("key k-f1"), "{text}");
        assert!(text.contains("lease_expired: crashed"), "{text}");
        assert!(
            text.contains(r#"response 422: {"message":"bad number"}"#),
            "{text}"
        );
        assert!(text.contains("settled by review: accepted"), "{text}");
        assert!(text.contains("receipt    none"), "{text}");
        assert!(text.contains("oncall: delivered"), "{text}");
    }

    #[test]
    fn a_timeline_shows_the_receipt_history_and_why_a_send_failed() {
        let n = json!({
            "id": "n-2", "channel": "email", "to": "ada@example.com", "route": "mail",
            "state": "delivered", "certainty": "known", "delivery": "at_most_once",
            "created_at": "2026-11-30T12:00:00Z", "updated_at": "2026-11-30T12:05:00Z",
            "attempts": [{"n": 1, "started_at": "2026-11-30T12:00:01Z", "finished_at": null,
                          "route": "mail", "result": "ambiguous", "provider_idempotency_key": "k",
                          "settled_by": "callback",
                          "evidence": {"stage": "awaiting_response", "detail": "timed out",
                                       "settlement": {"outcome": "accepted"}}}],
            "receipt": {"status": "bounced", "at": "2026-11-30T12:02:00Z",
                        "source": "callback:mail", "vendor_status": "email.bounced"},
            "receipts": [{"status": "sent", "at": "2026-11-30T12:01:00Z",
                          "source": "callback:mail", "vendor_status": "email.sent"},
                         {"status": "bounced", "at": "2026-11-30T12:02:00Z",
                          "source": "callback:mail", "vendor_status": "email.bounced"}]
        });
        let text = timeline(&n, None);
        assert!(text.contains("receipt    bounced"), "{text}");
        assert!(text.contains("settled by callback: accepted"), "{text}");
        assert!(
            text.contains("2026-11-30T12:01:00Z sent  (callback:mail: email.sent)"),
            "{text}"
        );
        assert!(!text.contains("failed  "), "{text}");
        let failed = json!({"state": "failed", "certainty": "known", "failure_reason": "suppressed",
                            "attempts": [], "receipt": {"status": "none"}, "receipts": []});
        let text = timeline(&failed, None);
        assert!(text.contains("failed     suppressed"), "{text}");
        assert!(!text.contains("\nreceipts"), "{text}");
    }

    #[test]
    fn a_probe_asks_a_wildcard_listener_on_loopback() {
        let probe = |listen: &str| probe_address(listen.parse().unwrap()).to_string();
        assert_eq!(probe("0.0.0.0:8080"), "127.0.0.1:8080");
        assert_eq!(probe("[::]:8080"), "[::1]:8080");
        assert_eq!(probe("10.1.2.3:9000"), "10.1.2.3:9000");
    }
}
