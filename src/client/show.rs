//! How the CLI prints what the API answers: tables, ages, a notification's timeline.

use std::fmt::Write as _;

use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

pub(super) fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("?")
}

/// How long ago an RFC 3339 time was, as a person says it.
pub(super) fn age(at: &Value, now: OffsetDateTime) -> String {
    at.as_str()
        .and_then(|t| OffsetDateTime::parse(t, &Rfc3339).ok())
        .map(|t| crate::review::age_in_words(now - t))
        .unwrap_or_else(|| "?".to_owned())
}

/// `state/certainty`, and whose word the certainty is where a person's (not herald's proof).
pub(super) fn state_of(n: &Value) -> String {
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
pub(super) fn table(items: &[Value], now: OffsetDateTime) -> String {
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
pub(super) fn row(item: &Value, since: &Value, now: OffsetDateTime) -> String {
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
pub(super) fn detail(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        json => json.to_string(),
    }
}

/// A notification's timeline, readable by a person.
pub(super) fn timeline(n: &Value, why: Option<&str>) -> String {
    let mut out = String::new();
    summary(&mut out, n, why);
    attempts(&mut out, n);
    receipts(&mut out, n);
    resolutions(&mut out, n);
    out
}

/// A field as the timeline prints it: `-` where it is absent.
fn or_dash(v: &Value) -> &str {
    v.as_str().unwrap_or("-")
}

/// What the notification is and where it stands.
fn summary(out: &mut String, n: &Value, why: Option<&str>) {
    let _ = writeln!(
        out,
        "{} {} to {} via route `{}`",
        or_dash(&n["id"]),
        or_dash(&n["channel"]),
        or_dash(&n["to"]),
        or_dash(&n["route"])
    );
    let _ = writeln!(
        out,
        "state      {} ({})",
        state_of(n),
        or_dash(&n["delivery"])
    );
    let _ = writeln!(out, "created    {}", or_dash(&n["created_at"]));
    let _ = writeln!(out, "updated    {}", or_dash(&n["updated_at"]));
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
            or_dash(&a["filename"]),
            or_dash(&a["content_type"]),
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
}

/// Every attempt, with its evidence, settlement, look-up and failover.
fn attempts(out: &mut String, n: &Value) {
    let _ = writeln!(out, "\nattempts");
    let attempts = n["attempts"].as_array().cloned().unwrap_or_default();
    if attempts.is_empty() {
        let _ = writeln!(out, "  none yet");
    }
    for a in &attempts {
        attempt(out, a);
    }
}

fn attempt(out: &mut String, a: &Value) {
    let _ = writeln!(
        out,
        "  #{} {} → {}  on {}  {}{}  key {}{}",
        a["n"],
        or_dash(&a["started_at"]),
        or_dash(&a["finished_at"]),
        or_dash(&a["route"]),
        or_dash(&a["result"]),
        match a["permanent"].as_bool() {
            Some(true) => " (permanent)",
            Some(false) => " (transient)",
            None => "",
        },
        or_dash(&a["provider_idempotency_key"]),
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
        let because = or_dash(&evidence["failover"]["because"]);
        let _ = writeln!(out, "      then failed over to `{to}`: {because}");
    }
}

/// The vendor's delivery receipts, where it sent any.
fn receipts(out: &mut String, n: &Value) {
    let receipts = n["receipts"].as_array().cloned().unwrap_or_default();
    if !receipts.is_empty() {
        let _ = writeln!(out, "\nreceipts");
        for r in &receipts {
            let _ = writeln!(
                out,
                "  {} {}  ({}: {})",
                or_dash(&r["at"]),
                or_dash(&r["status"]),
                or_dash(&r["source"]),
                or_dash(&r["vendor_status"])
            );
        }
    }
}

/// What people said about it, with their notes.
fn resolutions(out: &mut String, n: &Value) {
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
                or_dash(&r["at"]),
                or_dash(&r["principal"]),
                or_dash(&r["outcome"]),
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
                or_dash(&r["note"])
            );
        }
    }
}
