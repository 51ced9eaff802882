//! Every number herald's own config takes is bounded by `check-config`: a value no clock or
//! counter can keep (zero where zero means nothing, negative, NaN, infinite, astronomically
//! large or small) is refused by name, never taken to panic or stall long after the check said
//! the file was valid. The walk sets each numeric key of the reference config,
//! `herald.example.toml`, to each extreme in turn. A vendor's own keys (a route's `port`,
//! `visibility_lag_ms`) are its adapter's to check when the route is built.

use std::panic::AssertUnwindSafe;

use herald::config::{Config, RouteConfig};

/// Keys where 0 is a documented setting, not a mistake: with why.
const ZERO_MEANS: &[(&str, &str)] = &[
    (
        "relay.retention_seconds",
        "published events are deleted at once",
    ),
    (
        "retention.finished_seconds",
        "finished notifications are kept for ever",
    ),
    (
        "server.shutdown_grace_seconds",
        "open connections are closed at once on SIGTERM",
    ),
    (".rate_limit_per_second", "the route has no pace of its own"),
    (".circuit_failures", "the route's circuit never opens"),
];

/// Every numeric leaf of `value`, by its dotted path (`routes.mail.timeout_seconds`,
/// `tokens[0]…`).
fn numbers(value: &toml::Value, path: &str, out: &mut Vec<String>) {
    match value {
        toml::Value::Table(table) => {
            for (key, item) in table {
                let path = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                numbers(item, &path, out);
            }
        }
        toml::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                numbers(item, &format!("{path}[{i}]"), out);
            }
        }
        toml::Value::Integer(_) | toml::Value::Float(_) => out.push(path.to_owned()),
        _ => {}
    }
}

/// Whether herald's config owns `key`, rather than a route's adapter.
fn herald_owns(key: &str) -> bool {
    match key.strip_prefix("routes.") {
        Some(rest) => {
            let field = rest.split_once('.').map_or("", |(_, field)| field);
            RouteConfig::COMMON_KEYS.contains(&field)
        }
        None => true,
    }
}

fn set(value: &mut toml::Value, path: &str, new: toml::Value) {
    let mut slot = value;
    for part in path.split('.') {
        slot = match part.split_once('[') {
            Some((key, index)) => {
                let index: usize = index.trim_end_matches(']').parse().unwrap();
                &mut slot[key][index]
            }
            None => &mut slot[part],
        };
    }
    *slot = new;
}

#[test]
fn every_number_herald_takes_is_refused_by_name_where_no_clock_or_counter_can_keep_it() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut reference: toml::Value =
        toml::from_str(&std::fs::read_to_string(root.join("herald.example.toml")).unwrap())
            .unwrap();
    // Every numeric key a route takes from herald, at a usual value, on the reference's first.
    let usual = [
        ("concurrency", 16),
        ("timeout_seconds", 5),
        ("max_attempts", 8),
        ("max_age_seconds", 86_400),
        ("rate_limit_per_second", 2),
        ("burst", 1),
        ("circuit_failures", 5),
        ("circuit_open_seconds", 30),
        ("callback_rate_limit_per_second", 500),
        ("callback_burst", 2000),
    ];
    for (key, value) in usual {
        assert!(RouteConfig::COMMON_KEYS.contains(&key), "{key}");
        let sandbox = reference["routes"]["sandbox"].as_table_mut().unwrap();
        sandbox.insert(key.to_owned(), toml::Value::Integer(value));
    }
    let mut keys = Vec::new();
    numbers(&reference, "", &mut keys);
    keys.retain(|key| herald_owns(key));
    assert!(
        keys.len() > 30,
        "the walk reaches herald's numbers: {keys:?}"
    );

    let never = [
        toml::Value::Integer(-1),
        toml::Value::Integer(i64::MAX),
        toml::Value::Float(f64::NAN),
        toml::Value::Float(f64::INFINITY),
        toml::Value::Float(f64::NEG_INFINITY),
        toml::Value::Float(1e300),
        toml::Value::Float(-1.0),
    ];
    let zero = [
        toml::Value::Integer(0),
        toml::Value::Float(0.0),
        toml::Value::Float(1e-300),
    ];
    let dir = std::env::temp_dir().join(format!("herald-bounds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("herald.toml");
    let mut wrong = Vec::new();
    for key in &keys {
        let zero_means = ZERO_MEANS.iter().any(|(k, _)| key.ends_with(k));
        for (extreme, may_pass) in never.iter().map(|v| (v, false)).chain(
            zero.iter()
                .map(|v| (v, zero_means && *v != toml::Value::Float(1e-300))),
        ) {
            let mut config = reference.clone();
            set(&mut config, key, extreme.clone());
            std::fs::write(&path, toml::to_string(&config).unwrap()).unwrap();
            let loaded = std::panic::catch_unwind(AssertUnwindSafe(|| {
                Config::load(Some(&path), std::iter::empty())
            }));
            match loaded {
                Err(_) => wrong.push(format!("{key} = {extreme}: panicked")),
                Ok(Ok(_)) if !may_pass => wrong.push(format!("{key} = {extreme}: taken")),
                Ok(Err(problems)) if !problems.0.iter().any(|p| p.starts_with(key.as_str())) => {
                    wrong.push(format!(
                        "{key} = {extreme}: refused without naming it: {problems}"
                    ))
                }
                Ok(_) => {}
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// What a route's adapter declares about its vendor (how long a send takes to show in the
/// look-up, how long keys are kept) is added to times too: past what herald can count, the route
/// is refused by name when it is built, by `check-config` as by `serve`.
#[tokio::test]
async fn a_vendors_lag_or_key_window_past_what_herald_counts_refuses_the_route() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = std::env::temp_dir().join(format!("herald-lag-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("herald.toml");
    for (setting, key) in [
        (
            "profile = \"queryable\"\nvisibility_lag_ms",
            "visibility_lag_ms",
        ),
        (
            "profile = \"idempotent\"\nidempotency_window_seconds",
            "idempotency_window_seconds",
        ),
    ] {
        std::fs::write(
            &path,
            format!(
                "[routes.box]\nprovider = \"sandbox\"\nbase_url = \"http://127.0.0.1:9\"\n\
                 {setting} = {}\n",
                i64::MAX
            ),
        )
        .unwrap();
        let refused = herald::check::load(Some(&path), std::iter::empty(), false)
            .await
            .expect_err("refused");
        assert!(
            refused
                .to_string()
                .contains(&format!("routes.box.{key}: must be at most")),
            "{refused}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
