//! The checks a config passes after it is read: each problem named with its key.

use std::ops::RangeInclusive;
use std::time::Duration;

use super::load::Loader;
use super::sections::{MAX_RATE, MAX_RETENTION_SECONDS, MIN_IDEMPOTENCY_SECONDS, MIN_RATE};
use super::{Config, RouteConfig, SinkConfig};
use crate::domain::Templates;

/// Safety margin between a route's timeout and the lease (see [`DispatchConfig::lease_seconds`]).
const LEASE_MARGIN: Duration = Duration::from_secs(2);

impl Config {
    /// Each fallback is a configured route that carries every channel of the route it serves,
    /// lets in every tenant and sender that route lets in, and never leads back to where it
    /// started.
    fn check_fallbacks(&self, loader: &mut Loader) {
        for (name, route) in &self.routes {
            let Some(fallback) = &route.fallback else {
                continue;
            };
            let key = format!("routes.{name}.fallback");
            if !route.provider.settings().one_destination() {
                // What one receiver answers says nothing of the route, and a receiver must not
                // be able to move a send onto another route: one that reaches private networks
                // (only webhook routes do), say.
                loader.push(
                    &key,
                    "a route whose sends each go to their own receiver (a webhook route) never \
                     fails over: a receiver's answer must not choose the route",
                );
                continue;
            }
            let Some(target) = self.routes.get(fallback) else {
                if loader.unknown_route(&self.routes, fallback) {
                    loader.push(&key, format!("names unknown route `{fallback}`"));
                }
                continue;
            };
            let missing: Vec<&str> = route
                .provider
                .settings()
                .channels()
                .iter()
                .filter(|c| !target.provider.settings().channels().contains(c))
                .map(|c| c.as_str())
                .collect();
            if !missing.is_empty() {
                loader.push(
                    &key,
                    format!(
                        "route `{fallback}` does not carry {} as `{name}` does",
                        missing.join(", ")
                    ),
                );
            }
            if let Some(allowed) = &target.tenants {
                let shut_out = match &route.tenants {
                    None => true,
                    Some(tenants) => tenants.iter().any(|t| !allowed.contains(t)),
                };
                if shut_out {
                    loader.push(
                        &key,
                        format!(
                            "route `{fallback}` names its tenants; it must allow every tenant \
                             `{name}` allows"
                        ),
                    );
                }
            }
            let unlisted: Vec<&str> = route
                .allowed_from
                .iter()
                .filter(|sender| !crate::domain::grants_sender(&target.allowed_from, sender))
                .map(String::as_str)
                .collect();
            if !unlisted.is_empty() {
                loader.push(
                    &key,
                    format!(
                        "route `{fallback}` must also list in allowed_from what `{name}` lists: {}",
                        unlisted.join(", ")
                    ),
                );
            }
            let mut seen = vec![name.as_str()];
            let mut next = Some(fallback);
            while let Some(hop) = next {
                if seen.contains(&hop.as_str()) {
                    seen.push(hop);
                    loader.push(&key, format!("the chain loops: {}", seen.join(" → ")));
                    break;
                }
                seen.push(hop);
                next = self.routes.get(hop).and_then(|r| r.fallback.as_ref());
            }
        }
    }

    /// Which tenants may use which routes: tokens name their routes where tenants share one
    /// herald, and a route that may reach private networks names its tenants.
    fn check_route_grants(&self, loader: &mut Loader) {
        let tenants: std::collections::BTreeSet<&str> =
            self.tokens.iter().map(|t| t.tenant.as_str()).collect();
        for (i, token) in self.tokens.iter().enumerate() {
            let key = format!("tokens[{i}].routes");
            match &token.routes {
                None if tenants.len() > 1 => loader.push(
                    &key,
                    format!(
                        "token `{}`: with several tenants, each token names the routes it may \
                         send through (routes = [\"mail\", …], or [\"*\"] for every route)",
                        token.name
                    ),
                ),
                None => {}
                Some(routes) => {
                    for route in routes.iter().filter(|r| *r != "*") {
                        if loader.unknown_route(&self.routes, route) {
                            loader.push(
                                &key,
                                format!("token `{}` names unknown route `{route}`", token.name),
                            );
                        }
                    }
                }
            }
        }
        for (name, route) in &self.routes {
            let private = route.provider.settings().reaches_private_networks();
            if private && route.tenants.is_none() && !self.tokens.is_empty() {
                loader.push(
                    &format!("routes.{name}.tenants"),
                    "the route may reach private networks: name the tenants allowed to use it \
                     (tenants = [\"…\"])",
                );
            }
            for tenant in route.tenants.iter().flatten() {
                if !tenants.contains(tenant.as_str()) && !self.tokens.is_empty() {
                    loader.push(
                        &format!("routes.{name}.tenants"),
                        format!("names `{tenant}`, which no token has"),
                    );
                }
            }
            if let Some(operator) = &route.operated_by {
                let key = format!("routes.{name}.operated_by");
                if !tenants.contains(operator.as_str()) && !self.tokens.is_empty() {
                    loader.push(&key, format!("names `{operator}`, which no token has"));
                } else if route
                    .tenants
                    .as_ref()
                    .is_some_and(|t| !t.contains(operator))
                {
                    loader.push(
                        &key,
                        format!("names `{operator}`, which is not among the route's tenants"),
                    );
                }
            }
        }
    }

    /// Every duration and count within a range herald can run with: a time added to now, or
    /// a count of slots, that overflows or is zero panics or stops serving long after
    /// `check-config` said the file was valid.
    fn check_bounds(&self, loader: &mut Loader) {
        let sinks = self.sinks.iter().filter_map(|(name, sink)| match sink {
            SinkConfig::Nats {
                timeout_seconds, ..
            }
            | SinkConfig::Webhook {
                timeout_seconds, ..
            } => Some(Bound::new(
                format!("sinks.{name}.timeout_seconds"),
                *timeout_seconds,
                1..=HOUR,
            )),
            _ => None,
        });
        let routes = self
            .routes
            .iter()
            .flat_map(|(name, route)| route_bounds(name, route));
        for bound in self.setting_bounds().into_iter().chain(sinks).chain(routes) {
            if !bound.range.contains(&bound.value) {
                loader.push(
                    &bound.key,
                    format!(
                        "{} is out of range: must be from {} to {}",
                        bound.value,
                        bound.range.start(),
                        bound.range.end()
                    ),
                );
            }
        }
    }

    /// The bounds of the settings outside routes and sinks.
    fn setting_bounds(&self) -> Vec<Bound> {
        let (d, r, s) = (&self.dispatch, &self.relay, &self.server);
        [
            ("dispatch.lease_seconds", d.lease_seconds, 1..=DAY),
            (
                "dispatch.poll_interval_ms",
                d.poll_interval_ms,
                1..=HOUR * 1000,
            ),
            ("dispatch.retry_base_ms", d.retry_base_ms, 1..=DAY * 1000),
            (
                "dispatch.retry_max_seconds",
                d.retry_max_seconds,
                1..=30 * DAY,
            ),
            ("relay.lease_seconds", r.lease_seconds, 1..=DAY),
            (
                "relay.poll_interval_ms",
                r.poll_interval_ms,
                1..=HOUR * 1000,
            ),
            ("relay.retry_base_ms", r.retry_base_ms, 1..=DAY * 1000),
            ("relay.retry_max_seconds", r.retry_max_seconds, 1..=30 * DAY),
            (
                "relay.retention_seconds",
                r.retention_seconds,
                0..=MAX_RETENTION_SECONDS,
            ),
            (
                "server.header_timeout_seconds",
                s.header_timeout_seconds,
                1..=HOUR,
            ),
            (
                "server.body_timeout_seconds",
                s.body_timeout_seconds,
                1..=HOUR,
            ),
            (
                "server.shutdown_grace_seconds",
                s.shutdown_grace_seconds,
                0..=HOUR,
            ),
            (
                "server.max_connections",
                s.max_connections as u64,
                1..=1_000_000,
            ),
            ("dispatch.concurrency", d.concurrency as u64, 1..=100_000),
            ("dispatch.batch_size", d.batch_size.into(), 1..=100_000),
            ("dispatch.max_attempts", d.max_attempts.into(), 1..=1000),
            ("relay.batch_size", r.batch_size.into(), 1..=100_000),
            ("relay.prune_batch", r.prune_batch.into(), 1..=1_000_000),
            (
                "server.max_body_bytes",
                s.max_body_bytes as u64,
                1024..=1 << 30,
            ),
            (
                "database.max_connections",
                self.database.max_connections.into(),
                1..=10_000,
            ),
        ]
        .into_iter()
        .map(|(key, value, range)| Bound::new(key.to_owned(), value, range))
        .collect()
    }

    /// Category names a path and a header can carry; links where a category has them.
    fn check_categories(&self, loader: &mut Loader) {
        for name in self.categories.keys() {
            let fits = (1..=64).contains(&name.len())
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
            if !fits {
                loader.push(
                    &format!("categories.{name}"),
                    "a category's name is 1 to 64 of a-z, 0-9, `_` and `-`",
                );
            }
        }
        let Some(first) = self.categories.iter().find(|(_, c)| c.unsubscribe) else {
            return;
        };
        let u = &self.unsubscribe;
        match u.public_url.as_deref().map(url::Url::parse) {
            None => loader.push(
                "unsubscribe.public_url",
                format!(
                    "is required: category `{}` has unsubscribe links, which start with it",
                    first.0
                ),
            ),
            Some(Ok(url)) if matches!(url.scheme(), "https" | "http") && url.host().is_some() => {}
            Some(_) => loader.push(
                "unsubscribe.public_url",
                "must be an http(s) URL, e.g. https://herald.example.com",
            ),
        }
        if u.secrets.is_empty() {
            loader.push(
                "unsubscribe.secrets",
                format!(
                    "at least one is required: category `{}` has unsubscribe links, signed with it",
                    first.0
                ),
            );
        }
    }

    /// Every check, in the order `check-config` lists their problems.
    pub(super) fn check(&self, loader: &mut Loader) {
        self.check_channels(loader);
        self.check_fallbacks(loader);
        self.check_bounds(loader);
        // Each template compiles, and each of its locales renders from the default's data.
        if let Err(problem) = Templates::new(self.templates.clone()).check() {
            loader.push("templates", problem);
        }
        self.check_categories(loader);
        self.attachments.check(loader);
        self.check_timeouts(loader);
        self.check_tokens(loader);
        self.check_route_grants(loader);
        self.check_retention(loader);
        self.check_sinks(loader);
        self.check_inbox(loader);
    }

    /// Each channel's default route exists and carries that channel.
    fn check_channels(&self, loader: &mut Loader) {
        for (channel, route) in &self.channels {
            let key = format!("channels.{channel}");
            match self.routes.get(route) {
                None if loader.unknown_route(&self.routes, route) => {
                    loader.push(&key, format!("names unknown route `{route}`"));
                }
                None => {}
                Some(r) if !r.provider.settings().channels().contains(channel) => {
                    loader.push(&key, format!("route `{route}` does not carry {channel}"));
                }
                Some(_) => {}
            }
        }
    }

    /// A route's send ends before its lease does, so no other process claims it while it runs.
    fn check_timeouts(&self, loader: &mut Loader) {
        let lease = Duration::from_secs(self.dispatch.lease_seconds);
        for (name, route) in &self.routes {
            if route.timeout.saturating_add(LEASE_MARGIN) > lease {
                loader.push(
                    &format!("routes.{name}.timeout_seconds"),
                    format!(
                        "{} must be at least {} s below dispatch.lease_seconds ({})",
                        route.timeout.as_secs(),
                        LEASE_MARGIN.as_secs(),
                        lease.as_secs()
                    ),
                );
            }
        }
    }

    /// Each token can do something, and its rate limit is one herald can keep.
    fn check_tokens(&self, loader: &mut Loader) {
        for (i, token) in self.tokens.iter().enumerate() {
            if token.scopes.is_empty() {
                loader.push(
                    &format!("tokens[{i}].scopes"),
                    format!("token `{}` has no scopes", token.name),
                );
            }
            if let Some(rate) = token.rate_limit_per_second
                && !(MIN_RATE..=MAX_RATE).contains(&rate)
            {
                loader.push(
                    &format!("tokens[{i}].rate_limit_per_second"),
                    format!("{rate} is out of range: must be from {MIN_RATE} to {MAX_RATE}"),
                );
            }
            match token.burst {
                Some(_) if token.rate_limit_per_second.is_none() => loader.push(
                    &format!("tokens[{i}].burst"),
                    "is only used with rate_limit_per_second",
                ),
                Some(burst) if !(1..=1_000_000).contains(&burst) => loader.push(
                    &format!("tokens[{i}].burst"),
                    format!("{burst} is out of range: must be from 1 to 1000000"),
                ),
                _ => {}
            }
        }
    }

    /// A key is answered for its whole window, and nothing is kept past what a time can hold.
    fn check_retention(&self, loader: &mut Loader) {
        let retention = &self.retention;
        if retention.idempotency_seconds < MIN_IDEMPOTENCY_SECONDS {
            loader.push(
                "retention.idempotency_seconds",
                format!("must be at least {MIN_IDEMPOTENCY_SECONDS}"),
            );
        }
        if retention.finished_seconds != 0
            && retention.finished_seconds < retention.idempotency_seconds
        {
            loader.push(
                "retention.finished_seconds",
                "must be 0 (keep for ever) or at least retention.idempotency_seconds, so that \
                 a key is answered for its whole window",
            );
        }
        for (key, seconds) in [
            ("idempotency_seconds", retention.idempotency_seconds),
            ("finished_seconds", retention.finished_seconds),
        ] {
            if seconds > MAX_RETENTION_SECONDS {
                loader.push(
                    &format!("retention.{key}"),
                    format!("must be at most {MAX_RETENTION_SECONDS} (3650 days)"),
                );
            }
        }
        if retention.batch_size == 0 {
            loader.push("retention.batch_size", "must be at least 1");
        }
    }

    /// A NATS sink publishes to subjects it may, and a webhook sink has a secret to sign with.
    fn check_sinks(&self, loader: &mut Loader) {
        for (name, sink) in &self.sinks {
            if let SinkConfig::Nats { subject_prefix, .. } = sink
                && (subject_prefix.is_empty()
                    || subject_prefix
                        .split('.')
                        .any(|t| t.is_empty() || t.contains(['*', '>', ' '])))
            {
                loader.push(
                    &format!("sinks.{name}.subject_prefix"),
                    "must be NATS subject tokens without wildcards",
                );
            }
            if let SinkConfig::Webhook {
                secret, secrets, ..
            } = sink
                && secret.is_none()
                && secrets.is_empty()
            {
                loader.push(
                    &format!("sinks.{name}"),
                    "needs a `secret` (whsec_ followed by base64) to sign with",
                );
            }
        }
    }

    /// The NATS inbox listens somewhere and knows whose notifications it receives.
    fn check_inbox(&self, loader: &mut Loader) {
        if let Some(nats) = &self.inbox.nats {
            if nats.subjects.is_empty() {
                loader.push("inbox.nats.subjects", "must name at least one subject");
            }
            if nats.tenant.is_none()
                && let Err(err) = self.inbox_tenant()
            {
                loader.push("inbox.nats.tenant", err);
            }
        }
    }
}

const HOUR: u64 = 3600;
const DAY: u64 = 24 * HOUR;

/// A setting's value and the range herald runs with.
struct Bound {
    key: String,
    value: u64,
    range: RangeInclusive<u64>,
}

impl Bound {
    fn new(key: String, value: u64, range: RangeInclusive<u64>) -> Self {
        Bound { key, value, range }
    }
}

/// The bounds of one route's settings.
fn route_bounds(name: &str, route: &RouteConfig) -> [Bound; 8] {
    let key = |setting: &str| format!("routes.{name}.{setting}");
    [
        Bound::new(key("timeout_seconds"), route.timeout.as_secs(), 1..=HOUR),
        Bound::new(key("concurrency"), route.concurrency as u64, 1..=100_000),
        Bound::new(key("max_attempts"), route.max_attempts.into(), 1..=1000),
        Bound::new(key("burst"), route.burst.into(), 1..=1_000_000),
        Bound::new(
            key("max_age_seconds"),
            route.max_age.as_secs(),
            1..=MAX_RETENTION_SECONDS,
        ),
        Bound::new(
            key("circuit_open_seconds"),
            route.circuit_open.as_secs(),
            1..=DAY,
        ),
        Bound::new(
            key("callback_rate_limit_per_second"),
            route.callback_rate_limit_per_second.into(),
            1..=1_000_000,
        ),
        Bound::new(
            key("callback_burst"),
            route.callback_burst.into(),
            1..=1_000_000,
        ),
    ]
}
