//! Reading a config: the file, the environment's overrides, every unknown key named.

use std::collections::BTreeMap;
use std::path::Path;

use super::{Config, ConfigProblems, DispatchConfig, EventMapping, Origins, RouteConfig};
use crate::domain::Channel;

/// Collects problems while a config is read, each with its key and origin.
pub(super) struct Loader {
    pub(super) origins: Origins,
    pub(super) problems: Vec<String>,
    /// Routes named in the config whose own problems left them out: a reference to one is not
    /// a second problem.
    pub(super) broken_routes: Vec<String>,
}

impl Loader {
    /// Whether `route` names no route at all (not one left out for its own problems).
    pub(super) fn unknown_route(
        &self,
        routes: &BTreeMap<String, RouteConfig>,
        route: &str,
    ) -> bool {
        !routes.contains_key(route) && !self.broken_routes.iter().any(|r| r == route)
    }
}

impl Loader {
    pub(super) fn push(&mut self, key: &str, message: impl std::fmt::Display) {
        let mut message = message.to_string().trim_end().replace('\n', " ");
        // toml ends some messages with " in `port`": the key already says it.
        if let Some((head, field)) = message.rsplit_once(" in `")
            && key.ends_with(field.trim_end_matches('`'))
        {
            message = head.to_owned();
        }
        // serde quotes a string of the wrong type, and the key may hold a secret (an API key
        // given where a table was expected): say what it is, never what it says.
        if let Some(start) = message.find("string \"")
            && let Some(end) = message.rfind("\", expected")
            && end > start
        {
            message.replace_range(start..=end, "a string");
        }
        let origin = self.origins.of(key);
        self.problems.push(format!("{key}: {message} ({origin})"));
    }

    /// Deserializes `value` found at `key`, naming the inner key at fault if it fails, and every
    /// unknown key in it, each with the nearest valid one.
    pub(super) fn parse<T: serde::de::DeserializeOwned>(
        &mut self,
        key: &str,
        value: toml::Value,
    ) -> Option<T> {
        let problems = match read_naming_every_unknown_key(value) {
            Ok(parsed) => return Some(parsed),
            Err(problems) => problems,
        };
        for (path, message) in problems {
            let key = match path.as_str() {
                "." => key.to_owned(),
                path => format!("{key}.{path}"),
            };
            self.push(&key, nearest_key(message, &[]));
        }
        None
    }

    /// Like [`Loader::parse`] for a table whose key `tag` names its kind (`provider = "smtp"`):
    /// serde loses the path inside internally tagged enums, so the kind is taken out and the
    /// rest read as the externally tagged `{ smtp = { … } }`, which keeps it. `common` are the
    /// keys every kind takes (read apart), which an unknown key's hint weighs too.
    pub(super) fn parse_tagged<T: serde::de::DeserializeOwned>(
        &mut self,
        key: &str,
        tag: &str,
        mut table: toml::Table,
        common: &[&str],
    ) -> Option<T> {
        let Some(toml::Value::String(kind)) = table.remove(tag) else {
            self.push(key, format!("needs `{tag} = \"…\"`"));
            return None;
        };
        let mut tagged = toml::Table::new();
        tagged.insert(kind.clone(), table.into());
        let problems = match read_naming_every_unknown_key(toml::Value::from(tagged)) {
            Ok(parsed) => return Some(parsed),
            Err(problems) => problems,
        };
        for (path, message) in problems {
            // The path starts with the kind, which is not a key the user wrote.
            let inner = path
                .strip_prefix(kind.as_str())
                .map(|rest| rest.trim_start_matches('.'))
                .unwrap_or_default();
            let key = match inner {
                "" => key.to_owned(),
                inner => format!("{key}.{inner}"),
            };
            let message = match message.strip_prefix("unknown variant ") {
                Some(rest) if inner.is_empty() => format!("unknown {tag} {rest}"),
                _ => nearest_key(message, common),
            };
            self.push(&key, message);
        }
        None
    }

    /// Removes section `key` from `table` and parses it; a missing or broken one is its default
    /// (a broken one is also a problem, so the config is refused anyway).
    fn section<T: serde::de::DeserializeOwned + Default>(
        &mut self,
        table: &mut toml::Table,
        key: &str,
    ) -> T {
        table
            .remove(key)
            .and_then(|value| self.parse(key, value))
            .unwrap_or_default()
    }

    /// Removes section `key`, which must be a table of named items.
    fn named(&mut self, table: &mut toml::Table, key: &str) -> toml::Table {
        match table.remove(key) {
            Some(toml::Value::Table(items)) => items,
            Some(_) => {
                self.push(key, "must be a table");
                toml::Table::new()
            }
            None => toml::Table::new(),
        }
    }
}

/// Takes `strict_locales` out of `[templates]`, whose other keys name templates: a boolean
/// there is the setting, a table a template that happens to bear its name.
fn strict_locales(table: &mut toml::Table, loader: &mut Loader) -> bool {
    let Some(toml::Value::Table(templates)) = table.get_mut("templates") else {
        return false;
    };
    match templates.remove("strict_locales") {
        None => false,
        Some(toml::Value::Boolean(strict)) => strict,
        Some(template @ toml::Value::Table(_)) => {
            templates.insert("strict_locales".into(), template);
            false
        }
        Some(_) => {
            loader.push("templates.strict_locales", "must be true or false");
            false
        }
    }
}

/// A config holding more unknown keys than this is not worth reading on: the rest are left for
/// the next run.
const MAX_UNKNOWN_KEYS: usize = 64;

/// Deserializes `value`; where serde stops at an unknown key (it names only the first), takes
/// that key out and reads again, so that one run names every unknown key of every table. Each
/// problem is its path inside `value` (`.` for the value itself) and serde's message.
fn read_naming_every_unknown_key<T: serde::de::DeserializeOwned>(
    mut value: toml::Value,
) -> Result<T, Vec<(String, String)>> {
    let mut problems = Vec::new();
    while problems.len() < MAX_UNKNOWN_KEYS {
        let err = match serde_path_to_error::deserialize(value.clone()) {
            Ok(parsed) if problems.is_empty() => return Ok(parsed),
            Ok(_) => break,
            Err(err) => err,
        };
        let message = err.inner().to_string();
        let path = err.path().to_string();
        // A required key missing from a table that held an unknown key near its name is that
        // key misspelt, which is already named with it.
        let missing = message
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split_once('`'))
            .map(|(field, _)| field);
        let misspelt = missing.is_some_and(|missing| {
            problems.iter().any(|(unknown, _): &(String, String)| {
                let (table, key) = unknown.rsplit_once('.').unwrap_or((".", unknown));
                table == path && strsim::jaro_winkler(key, missing) >= NEAR
            })
        });
        if !misspelt {
            problems.push((path, message.clone()));
        }
        if !message.starts_with("unknown field `") || !remove_at(&mut value, err.path()) {
            break;
        }
    }
    Err(problems)
}

/// Removes the key `path` ends with from `value`; false if the path does not lead to a table
/// holding it.
fn remove_at(value: &mut toml::Value, path: &serde_path_to_error::Path) -> bool {
    use serde_path_to_error::Segment;
    let segments: Vec<&Segment> = path.iter().collect();
    let Some((Segment::Map { key: last }, parents)) = segments.split_last() else {
        return false;
    };
    let mut at = value;
    for segment in parents {
        let next = match (segment, at) {
            (Segment::Map { key } | Segment::Enum { variant: key }, toml::Value::Table(table)) => {
                table.get_mut(key)
            }
            (Segment::Seq { index }, toml::Value::Array(items)) => items.get_mut(*index),
            _ => None,
        };
        let Some(next) = next else {
            return false;
        };
        at = next;
    }
    match at {
        toml::Value::Table(table) => table.remove(last).is_some(),
        _ => false,
    }
}

/// How alike an unknown key and a valid one must be (Jaro–Winkler, 0 to 1) for the valid one to
/// be offered as what was meant; below it, every valid key is listed instead.
const NEAR: f64 = 0.8;

/// serde's "unknown field `x`, expected one of `a`, `b`" lists the keys of the kind's own type
/// alphabetically: say the nearest of those and `common` (the keys every kind takes) instead,
/// or list them all where none is near.
fn nearest_key(message: String, common: &[&str]) -> String {
    let Some((field, expected)) = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split_once("`, "))
    else {
        return message;
    };
    // The kind's keys are the quoted words of "expected `a`", "expected `a` or `b`" and
    // "expected one of `a`, `b`" ("there are no fields" quotes none).
    let mut keys: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    keys.extend(common);
    keys.sort_unstable();
    keys.dedup();
    let nearest = keys
        .iter()
        .map(|key| (strsim::jaro_winkler(field, key), *key))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match nearest {
        Some((likeness, key)) if likeness >= NEAR => {
            format!("unknown field `{field}`, did you mean `{key}`?")
        }
        Some(_) => {
            let keys: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
            format!(
                "unknown field `{field}`, expected one of {}",
                keys.join(", ")
            )
        }
        None => message,
    }
}

impl Config {
    /// Reads `path` (if any), applies `HERALD_<SECTION>__<KEY>` overrides from `env`, fills
    /// defaults and checks the result: every problem at once, not the first.
    pub fn load(
        path: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config, ConfigProblems> {
        let (config, problems) = Config::read(path, env)?;
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(ConfigProblems(problems))
        }
    }

    /// [`Config::load`] that keeps going past problems: the config as far as it could be read
    /// (a broken part left out or at its default), and every problem found. Fails at once only
    /// where there is nothing to read (no such file, not TOML).
    pub fn read(
        path: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<(Config, Vec<String>), ConfigProblems> {
        let mut table = read_table(path)?;
        let mut loader = Loader {
            origins: Origins {
                file: path.map(Path::to_path_buf),
                env: BTreeMap::new(),
            },
            problems: Vec::new(),
            broken_routes: Vec::new(),
        };
        apply_env_overrides(&mut table, env, &mut loader);
        let dispatch: DispatchConfig = loader.section(&mut table, "dispatch");
        let strict_locales = strict_locales(&mut table, &mut loader);
        let mut config = Config {
            server: loader.section(&mut table, "server"),
            database: loader.section(&mut table, "database"),
            tokens: Vec::new(),
            routes: BTreeMap::new(),
            channels: loader.section(&mut table, "channels"),
            dispatch,
            templates: loader.section(&mut table, "templates"),
            strict_locales,
            categories: loader.section(&mut table, "categories"),
            unsubscribe: loader.section(&mut table, "unsubscribe"),
            attachments: loader.section(&mut table, "attachments"),
            relay: loader.section(&mut table, "relay"),
            retention: loader.section(&mut table, "retention"),
            review: loader.section(&mut table, "review"),
            sinks: BTreeMap::new(),
            inbox: loader.section(&mut table, "inbox"),
            events: BTreeMap::new(),
            origins: Origins::default(),
        };
        config.read_listed(&mut table, &mut loader);
        for unknown in table.keys() {
            loader.push(
                unknown,
                "unknown section (expected server, database, tokens, routes, channels, \
                 dispatch, templates, categories, unsubscribe, attachments, relay, retention, review, \
                 sinks, inbox or events)",
            );
        }
        if config.routes.is_empty() && !loader.problems.iter().any(|p| p.starts_with("routes.")) {
            config.route_all_to_sandbox();
        }
        config.check(&mut loader);
        config.origins = loader.origins;
        Ok((config, loader.problems))
    }

    /// Tokens, routes, sinks and events, one by one: each names its own problems, and a
    /// broken one leaves the others read.
    fn read_listed(&mut self, table: &mut toml::Table, loader: &mut Loader) {
        match table.remove("tokens") {
            Some(toml::Value::Array(tokens)) => {
                for (i, token) in tokens.into_iter().enumerate() {
                    self.tokens
                        .extend(loader.parse(&format!("tokens[{i}]"), token));
                }
            }
            Some(_) => loader.push("tokens", "must be an array of tables ([[tokens]])"),
            None => {}
        }
        for (name, route) in loader.named(table, "routes") {
            let toml::Value::Table(route) = route else {
                loader.push(&format!("routes.{name}"), "must be a table");
                continue;
            };
            match RouteConfig::from_table(&name, route, &self.dispatch, loader) {
                Some(route) => {
                    self.routes.insert(name, route);
                }
                None => loader.broken_routes.push(name),
            }
        }
        for (name, sink) in loader.named(table, "sinks") {
            let key = format!("sinks.{name}");
            let toml::Value::Table(sink) = sink else {
                loader.push(&key, "must be a table");
                continue;
            };
            if let Some(sink) = loader.parse_tagged(&key, "kind", sink, &[]) {
                self.sinks.insert(name, sink);
            }
        }
        for (event_type, mappings) in loader.named(table, "events") {
            let mappings = match mappings {
                toml::Value::Array(many) => many,
                one => vec![one],
            };
            let key = format!("events.\"{event_type}\"");
            let parsed: Vec<EventMapping> = mappings
                .into_iter()
                .filter_map(|m| loader.parse(&key, m))
                .collect();
            self.events.insert(event_type, parsed);
        }
    }

    /// With no routes configured, every channel goes to the built-in sandbox: `herald serve`
    /// runs from nothing.
    fn route_all_to_sandbox(&mut self) {
        self.routes.insert(
            "sandbox".into(),
            RouteConfig::builtin_sandbox(&self.dispatch),
        );
        for channel in Channel::ALL {
            self.channels
                .entry(channel)
                .or_insert_with(|| "sandbox".into());
        }
    }
}

/// The file's table, or an empty one where there is no file.
fn read_table(path: Option<&Path>) -> Result<toml::Table, ConfigProblems> {
    let Some(path) = path else {
        return Ok(toml::Table::new());
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigProblems(vec![format!("cannot read {}: {e}", path.display())]))?;
    toml::from_str::<toml::Table>(&text).map_err(|e| {
        ConfigProblems(vec![format!(
            "{} is not valid TOML: {}",
            path.display(),
            e.to_string().trim_end()
        )])
    })
}

/// `HERALD_DATABASE__URL=…` sets `database.url`; `HERALD_ROUTES__MAIL__PORT=2525` sets
/// `routes.mail.port`. A value that parses as a TOML value (a number, a boolean, an array) is
/// taken as one; anything else is a string.
fn apply_env_overrides(
    table: &mut toml::Table,
    env: impl IntoIterator<Item = (String, String)>,
    loader: &mut Loader,
) {
    'vars: for (name, raw) in env {
        let Some(path) = name.strip_prefix("HERALD_") else {
            continue;
        };
        if !path.contains("__") {
            continue; // HERALD_CONFIG, HERALD_DEV_TOKEN, HERALD_URL … are not config keys
        }
        let keys: Vec<String> = path.split("__").map(str::to_lowercase).collect();
        loader.origins.env.insert(keys.join("."), name.clone());
        let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or(toml::Value::String(raw));
        let (last, parents) = keys.split_last().expect("split yields at least one key");
        let mut node = &mut *table;
        for (depth, key) in parents.iter().enumerate() {
            let entry = node
                .entry(key.clone())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            let Some(inner) = entry.as_table_mut() else {
                loader.push(
                    &keys[..=depth].join("."),
                    "is not a table, so it has no keys to set",
                );
                continue 'vars;
            };
            node = inner;
        }
        node.insert(last.clone(), value);
    }
}
