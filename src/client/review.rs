//! `herald review`: the queue, one resolution, and bulk resolution with its dry run.

use std::fmt::Write as _;

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use super::Api;
use super::show::{detail, row, state_of, table, text, timeline};
use crate::cli::{ResolveArgs, ReviewCommand};

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

pub(super) async fn resolve(args: ResolveArgs) -> anyhow::Result<()> {
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
pub(super) fn list_items(lines: &str) -> anyhow::Result<Vec<Value>> {
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
pub(super) fn bulk_report(answer: &Value, now: OffsetDateTime) -> String {
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
