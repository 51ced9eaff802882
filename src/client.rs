//! The API client behind `herald send`, `herald status` and `herald review`: each command is
//! one or two requests to a running herald (`HERALD_URL`, `HERALD_TOKEN`), printed for a person
//! (or as the API's JSON with `--json`). An error answer becomes one line naming its cause.
//! `herald health` asks `/readyz` the same way, without a token.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use reqwest::Method;
use serde_json::{Map, Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::cli::{
    ApiArgs, CancelArgs, HealthArgs, ResolveArgs, ReviewCommand, RoutesCommand, SendArgs,
};
use crate::config::Config;

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

/// `herald review …`.
pub async fn review(command: ReviewCommand) -> anyhow::Result<()> {
    match command {
        ReviewCommand::List {
            reason,
            route,
            json,
            api,
        } => {
            let api = Api::new(&api)?;
            let mut query = Vec::new();
            if let Some(reason) = reason {
                query.push(format!("reason={reason}"));
            }
            if let Some(route) = route {
                query.push(format!("route={route}"));
            }
            let mut items = Vec::new();
            let mut cursor: Option<String> = None;
            loop {
                let mut q = query.clone();
                q.push("limit=200".to_owned());
                if let Some(c) = &cursor {
                    q.push(format!("cursor={c}"));
                }
                let page = api.get(&format!("/v1/review?{}", q.join("&"))).await?;
                items.extend(page["data"].as_array().cloned().unwrap_or_default());
                match page["next_cursor"].as_str() {
                    Some(next) => cursor = Some(next.to_owned()),
                    None => break,
                }
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&items)?);
            } else {
                print!("{}", table(&items, OffsetDateTime::now_utc()));
            }
            Ok(())
        }
        ReviewCommand::Show { id, api } => {
            let api = Api::new(&api)?;
            let n = api.get(&format!("/v1/notifications/{id}")).await?;
            let review = &n["review"];
            let why = review["reason"]
                .as_str()
                .map(|reason| format!("{reason}: {}", review["why"].as_str().unwrap_or_default()));
            print!("{}", timeline(&n, why.as_deref()));
            Ok(())
        }
        ReviewCommand::Resolve(args) => resolve(args).await,
        ReviewCommand::Requery { id, api } => {
            let api = Api::new(&api)?;
            let answer = api
                .post(&format!("/v1/notifications/{id}/requery"), &json!({}))
                .await?;
            let n = &answer["notification"];
            println!(
                "{}: {} — the vendor answered: {}",
                if answer["settled"] == true {
                    "settled"
                } else {
                    "not settled"
                },
                state_of(n),
                Some(detail(&answer["answer"]["detail"]))
                    .filter(|d| !d.is_empty())
                    .unwrap_or_else(|| "(nothing)".to_owned())
            );
            Ok(())
        }
    }
}

async fn resolve(args: ResolveArgs) -> anyhow::Result<()> {
    let api = Api::new(&args.api)?;
    // Only what was given: a confirmation that names an outcome must name the previewed one.
    let mut body = Map::new();
    for (name, value) in [
        ("outcome", &args.outcome),
        ("then", &args.then),
        ("note", &args.note),
    ] {
        if let Some(value) = value {
            body.insert(name.to_owned(), json!(value));
        }
    }
    if args.force {
        body.insert("force".to_owned(), json!(true));
    }
    let many = !args.filter.is_empty() || args.items.is_some() || args.preview.is_some();
    if args.id.is_some() == many {
        bail!(
            "give the notification's id, or resolve many: --filter … or --items FILE with \
             --dry-run, then --preview"
        );
    }
    if args.dry_run && args.filter.is_empty() && args.items.is_none() {
        bail!("--dry-run goes with --filter or --items");
    }
    if let Some(id) = &args.id {
        if args.dry_run || args.max.is_some() {
            bail!("--dry-run and --max go with --filter, not with an id");
        }
        let n = api
            .post(
                &format!("/v1/notifications/{id}/resolve"),
                &Value::Object(body),
            )
            .await?;
        println!("{} is now {}", id, state_of(&n));
        return Ok(());
    }
    if args.preview.is_none() && !args.dry_run {
        bail!(
            "resolving many takes two steps: run with --dry-run to see what would change, then \
             confirm the preview it prints with --preview TOKEN --note …"
        );
    }
    if !args.filter.is_empty() {
        let mut filter = Map::new();
        for pair in &args.filter {
            let Some((key, value)) = pair.split_once('=') else {
                bail!("--filter takes KEY=VALUE, not `{pair}`");
            };
            filter.insert(key.to_owned(), Value::String(value.to_owned()));
        }
        body.insert("filter".to_owned(), Value::Object(filter));
    }
    if let Some(max) = args.max {
        body.insert("max".to_owned(), json!(max));
    }
    if let Some(path) = &args.items {
        let lines = if path.as_os_str() == "-" {
            std::io::read_to_string(std::io::stdin())?
        } else {
            std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?
        };
        body.insert("items".to_owned(), Value::Array(list_items(&lines)?));
    }
    body.insert("dry_run".to_owned(), json!(args.dry_run));
    if let Some(preview) = &args.preview {
        body.insert("preview".to_owned(), json!(preview));
    }
    let answer = api.post("/v1/review/resolve", &Value::Object(body)).await?;
    print!("{}", bulk_report(&answer, OffsetDateTime::now_utc()));
    Ok(())
}

/// The `items` of a list resolution from lines `ID OUTCOME [THEN] [force]`; the server checks
/// what they say, this only reads their shape.
fn list_items(lines: &str) -> anyhow::Result<Vec<Value>> {
    let mut items = Vec::new();
    for (n, line) in lines.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let (force, words) = match words.split_last() {
            Some((&"force", rest)) => (true, rest),
            _ => (false, &words[..]),
        };
        let mut item = match words {
            [id, outcome] => json!({"id": id, "outcome": outcome}),
            [id, outcome, then] => json!({"id": id, "outcome": outcome, "then": then}),
            _ => bail!(
                "line {}: `{line}` is not `ID OUTCOME [THEN] [force]` (e.g. `0190… not_delivered \
                 resend`)",
                n + 1
            ),
        };
        if force {
            item["force"] = json!(true);
        }
        items.push(item);
    }
    if items.is_empty() {
        bail!("--items lists no notification");
    }
    Ok(items)
}

/// What a bulk resolution would change (dry run) or changed, one item a line with its age,
/// reason, route, recipient and why; after a dry run, how to confirm it.
fn bulk_report(answer: &Value, now: OffsetDateTime) -> String {
    let dry_run = answer["dry_run"] == true;
    let items = answer["items"].as_array().cloned().unwrap_or_default();
    let mut out = format!(
        "{} {}:\n",
        if dry_run { "would resolve" } else { "resolved" },
        items.len()
    );
    for item in &items {
        out.push_str(&row(item, &item["waiting_since"], now));
        let _ = writeln!(out, "      -> {}", text(&item["resolution"]));
    }
    for refused in answer["refused"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "  not {}: {}",
            text(&refused["id"]),
            text(&refused["detail"])
        );
    }
    if answer["more"] == true {
        let _ = writeln!(out, "more items match; run again for the rest");
    }
    if let Some(preview) = answer["preview"].as_str() {
        let _ = writeln!(
            out,
            "\npreview {preview} (confirm once, before {})\nto resolve exactly these: \
             herald review resolve --preview {preview} --note \"…\"",
            text(&answer["expires_at"])
        );
    }
    out
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("?")
}

/// How long ago an RFC 3339 time was, as a person says it.
fn age(at: &Value, now: OffsetDateTime) -> String {
    at.as_str()
        .and_then(|t| OffsetDateTime::parse(t, &Rfc3339).ok())
        .map(|t| crate::review::age_in_words(now - t))
        .unwrap_or_else(|| "?".to_owned())
}

/// `state/certainty`, and whose word the certainty is where a person's (not herald's proof).
fn state_of(n: &Value) -> String {
    let state = match n["certainty"].as_str() {
        Some(c) => format!("{}/{c}", n["state"].as_str().unwrap_or("?")),
        None => n["state"].as_str().unwrap_or("?").to_owned(),
    };
    match n["settled_by"].as_str() {
        Some(by) => format!("{state} (settled by a {by})"),
        None => state,
    }
}

/// The review queue as a table: oldest first, with age, reason, route and recipient, and the
/// whole why on a line of its own (it names the vendor's evidence: never cut).
fn table(items: &[Value], now: OffsetDateTime) -> String {
    if items.is_empty() {
        return "nothing to review\n".to_owned();
    }
    let mut out = format!(
        "{:<36}  {:>5}  {:<18}  {:<12}  TO\n",
        "ID", "AGE", "REASON", "ROUTE"
    );
    for item in items {
        out.push_str(&row(item, &item["updated_at"], now));
    }
    out
}

/// One item in review on two lines: its id, how long it has waited since `since`, reason,
/// route and recipient; then the whole why.
fn row(item: &Value, since: &Value, now: OffsetDateTime) -> String {
    format!(
        "{:<36}  {:>5}  {:<18}  {:<12}  {}\n      {}\n",
        text(&item["id"]),
        age(since, now),
        text(&item["reason"]),
        text(&item["route"]),
        text(&item["to"]),
        text(&item["why"]),
    )
}

/// Evidence's `detail` on one line: text as it is, a vendor's JSON answer (which the API answers
/// as JSON) as compact JSON.
fn detail(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        json => json.to_string(),
    }
}

/// A notification's timeline, readable by a person.
fn timeline(n: &Value, why: Option<&str>) -> String {
    let text = |v: &Value| v.as_str().unwrap_or("-").to_owned();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} {} to {} via route `{}`",
        text(&n["id"]),
        text(&n["channel"]),
        text(&n["to"]),
        text(&n["route"])
    );
    let _ = writeln!(out, "state      {} ({})", state_of(n), text(&n["delivery"]));
    let _ = writeln!(out, "created    {}", text(&n["created_at"]));
    let _ = writeln!(out, "updated    {}", text(&n["updated_at"]));
    if let Some(next) = n["next_attempt_at"].as_str() {
        let _ = writeln!(out, "next try   {next}");
    }
    if let Some(expiry) = n["expires_at"].as_str() {
        let _ = writeln!(out, "expires    {expiry}");
    }
    for a in n["attachments"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "attached   {} ({}, {} bytes)",
            text(&a["filename"]),
            text(&a["content_type"]),
            a["size"]
        );
    }
    if let Some(reason) = n["failure_reason"].as_str() {
        let _ = writeln!(out, "failed     {reason}");
    }
    let _ = writeln!(
        out,
        "receipt    {}",
        n["receipt"]["status"].as_str().unwrap_or("none")
    );
    if let Some(why) = why {
        let _ = writeln!(out, "in review  {why}");
    }
    let _ = writeln!(out, "\nattempts");
    let attempts = n["attempts"].as_array().cloned().unwrap_or_default();
    if attempts.is_empty() {
        let _ = writeln!(out, "  none yet");
    }
    for a in &attempts {
        let _ = writeln!(
            out,
            "  #{} {} → {}  on {}  {}{}  key {}{}",
            a["n"],
            text(&a["started_at"]),
            text(&a["finished_at"]),
            text(&a["route"]),
            text(&a["result"]),
            match a["permanent"].as_bool() {
                Some(true) => " (permanent)",
                Some(false) => " (transient)",
                None => "",
            },
            text(&a["provider_idempotency_key"]),
            a["provider_ref"]
                .as_str()
                .map(|r| format!("  ref {r}"))
                .unwrap_or_default()
        );
        let evidence = &a["evidence"];
        let _ = writeln!(
            out,
            "      {}{}: {}",
            evidence["stage"].as_str().unwrap_or("?"),
            evidence["status"]
                .as_u64()
                .map(|s| format!(" {s}"))
                .unwrap_or_default(),
            detail(&evidence["detail"])
        );
        if let Some(by) = a["settled_by"].as_str() {
            let settlement = &evidence["settlement"];
            let _ = writeln!(
                out,
                "      settled by {by}: {} {}",
                settlement["outcome"].as_str().unwrap_or("?"),
                settlement["evidence"]
            );
        }
        if let Some(look_up) = evidence["look_up"].as_object() {
            let _ = writeln!(out, "      look-up: {}", Value::Object(look_up.clone()));
        }
        if let Some(to) = evidence["failover"]["to"].as_str() {
            let because = text(&evidence["failover"]["because"]);
            let _ = writeln!(out, "      then failed over to `{to}`: {because}");
        }
    }
    let receipts = n["receipts"].as_array().cloned().unwrap_or_default();
    if !receipts.is_empty() {
        let _ = writeln!(out, "\nreceipts");
        for r in &receipts {
            let _ = writeln!(
                out,
                "  {} {}  ({}: {})",
                text(&r["at"]),
                text(&r["status"]),
                text(&r["source"]),
                text(&r["vendor_status"])
            );
        }
    }
    let resolutions = n["review"]["resolutions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !resolutions.is_empty() {
        let _ = writeln!(out, "\nresolutions");
        for r in &resolutions {
            let _ = writeln!(
                out,
                "  {} {}: {}{}{}{} — {:?}",
                text(&r["at"]),
                text(&r["principal"]),
                text(&r["outcome"]),
                r["then"]
                    .as_str()
                    .map(|t| format!(" + {t}"))
                    .unwrap_or_default(),
                if r["forced"] == true { " (forced)" } else { "" },
                if r["key_renewed"] == true {
                    " (new provider key: duplicate risk accepted)"
                } else {
                    ""
                },
                text(&r["note"])
            );
        }
    }
    out
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
