//! Builds herald from a [`Config`] and runs it until a shutdown token fires. Tests build the
//! same `App` on port 0, so what they exercise is what `herald serve` runs.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use secrecy::{ExposeSecret, SecretString};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::api::{self, AppState, NewToken, Tokens};
use crate::config::{Config, DEV_TENANT};
use crate::dispatch::{self, Dispatcher};
use crate::domain::{Categories, RouteInfo, Routing, Scope, Templates, operator_of};
use crate::inbox::Inbox;
use crate::inbox::nats::NatsInbox;
use crate::relay::Relay;
use crate::store::{self, GroupCommit, Store};
use crate::telemetry;

pub struct App {
    listener: TcpListener,
    router: axum::Router,
    limits: crate::server::Limits,
    store: Arc<dyn Store>,
    dispatcher: Option<Dispatcher>,
    /// Publishes the outbox (`[relay] enabled`, the default).
    relay: Option<Relay>,
    retention: crate::retention::Settings,
    /// Consumes upstream events from NATS (`[inbox.nats]`).
    nats_inbox: Option<NatsInbox>,
    /// The development token, when no token is configured and `HERALD_DEV_TOKEN` is not set:
    /// `serve` prints it once.
    pub generated_dev_token: Option<SecretString>,
}

impl App {
    pub async fn build(config: Config) -> anyhow::Result<App> {
        // First: the built-in sandbox vendors take ports the kernel picks, and must not take
        // the one this listener is configured to.
        let listener = TcpListener::bind(config.server.listen)
            .await
            .with_context(|| format!("cannot listen on {}", config.server.listen))?;
        let store = store::connect(&config.database.url, config.database.max_connections).await?;
        let (tokens, generated_dev_token) = tokens(&config)?;
        let templates =
            Templates::new(config.templates.clone()).strict_locales(config.strict_locales);
        templates
            .check()
            .map_err(|e| anyhow::anyhow!("config: {e}"))?;
        // Installed before anything records: each route's circuit publishes its state at once.
        let metrics = telemetry::metrics_handle();
        let budget = Arc::new(dispatch::Budget::new(config.attachments.memory_bytes));
        let routes = dispatch::build_routes(&config, budget.clone()).await?;
        let routing = routing(&config, &routes, &tokens)?;
        let wake = Arc::new(tokio::sync::Notify::new());
        let routes = Arc::new(routes);
        let dispatcher = config.dispatch.enabled.then(|| {
            Dispatcher::new(
                store.clone(),
                routes.clone(),
                dispatch::Settings::from(&config.dispatch),
                wake.clone(),
            )
        });
        let routing = Arc::new(routing);
        let templates = Arc::new(templates);
        let inbox = Arc::new(Inbox::new(
            store.clone(),
            routing.clone(),
            templates.clone(),
            &config.events,
        )?);
        let relay = if config.relay.enabled {
            Some(Relay::build(&config, store.clone()).await?)
        } else {
            None
        };
        let nats_inbox = match &config.inbox.nats {
            Some(nats) => Some(NatsInbox::new(inbox.clone(), nats, config.inbox_tenant()?)),
            None => None,
        };
        let state = AppState {
            store: store.clone(),
            enqueue: GroupCommit::start(store.clone()),
            tokens: Arc::new(tokens),
            routing,
            routes,
            templates,
            inbox,
            wake,
            metrics,
            sessions: Arc::default(),
            review: config.review.policy(),
            attachments: budget,
            max_body_bytes: config.server.max_body_bytes,
        };
        telemetry::preregister(&config, &state.routing, |route| {
            state
                .routes
                .get(route)
                .is_some_and(|r| r.callbacks().is_some())
        });
        let router = api::router(
            state,
            Duration::from_secs(config.server.body_timeout_seconds),
        );
        Ok(App {
            listener,
            router,
            limits: crate::server::Limits::from(&config.server),
            store,
            dispatcher,
            relay,
            retention: crate::retention::Settings::from(&config),
            nats_inbox,
            generated_dev_token,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    pub fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    /// Takes the dispatcher out, so that `run` serves the API only and the caller steps it
    /// (tests do, with [`Dispatcher::drain`]).
    pub fn take_dispatcher(&mut self) -> Option<Dispatcher> {
        self.dispatcher.take()
    }

    /// Serves, dispatches, relays and consumes until `shutdown` fires; then lets requests in
    /// progress finish, sends in flight be recorded (see [`Dispatcher::run`]) and batches in
    /// flight be marked.
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        tracing::info!(listen = %self.local_addr(), dispatch = self.dispatcher.is_some(),
            relay = ?self.relay.as_ref().map(|r| r.sink_names().to_vec()),
            nats_inbox = self.nats_inbox.is_some(), "herald is serving");
        let dispatcher = self
            .dispatcher
            .map(|d| tokio::spawn(d.run(shutdown.clone())));
        let relay = self.relay.map(|r| tokio::spawn(r.run(shutdown.clone())));
        let retention = tokio::spawn(crate::retention::run(
            self.store.clone(),
            self.retention,
            shutdown.clone(),
        ));
        let nats_inbox = self
            .nats_inbox
            .map(|n| tokio::spawn(n.run(shutdown.clone())));
        let readiness = tokio::spawn(report_readiness(self.store.clone(), shutdown.clone()));
        crate::server::serve(self.listener, self.router, self.limits, shutdown.clone()).await;
        // Whatever ended the server ends the dispatcher too.
        shutdown.cancel();
        if let Some(dispatcher) = dispatcher {
            dispatcher.await.context("the dispatcher panicked")?;
        }
        if let Some(relay) = relay {
            relay.await.context("the relay panicked")?;
        }
        retention.await.context("retention panicked")?;
        readiness.await.context("the readiness check panicked")?;
        if let Some(nats_inbox) = nats_inbox {
            nats_inbox.await.context("the NATS inbox panicked")?;
        }
        self.store.close().await;
        Ok(())
    }
}

/// How often `herald_ready` is checked.
const READINESS_INTERVAL: Duration = Duration::from_secs(10);

/// Keeps `herald_ready` at what `/readyz` would answer, so that an alert sees a herald that is
/// up but cannot work (its database away, full or read-only, its schema behind) without
/// anything probing it.
async fn report_readiness(store: Arc<dyn Store>, shutdown: CancellationToken) {
    loop {
        let ready = store
            .check_ready(time::OffsetDateTime::now_utc())
            .await
            .is_ok();
        metrics::gauge!("herald_ready").set(if ready { 1.0 } else { 0.0 });
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(READINESS_INTERVAL) => {}
        }
    }
}

/// `herald relay`: the relay alone, on the configured database and sinks, until `shutdown`.
pub async fn relay(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    let store = store::connect(&config.database.url, config.database.max_connections).await?;
    // Alone, it hears of no commit: it polls.
    let relay = Relay::build(&config, store.clone()).await?;
    tracing::info!(sinks = ?relay.sink_names(), "herald relay is running");
    relay.run(shutdown).await;
    // As `serve` does: SQLite's lock goes only once every connection has closed.
    store.close().await;
    Ok(())
}

/// The shortest configured token secret: 32 characters, about 190 bits as a random
/// base64 or hex string, and far beyond guessing.
pub const MIN_TOKEN_CHARS: usize = 32;
/// The development token may be shorter (it serves one developer on loopback), but not empty.
pub const MIN_DEV_TOKEN_CHARS: usize = 8;

/// The shortest unsubscribe secret: 32 bytes, HMAC-SHA256's own output.
pub const MIN_UNSUBSCRIBE_SECRET_BYTES: usize = 32;

/// What the API checks a notification against: each route's channels, tenants, senders and
/// capabilities, the channels' default routes, the categories and the attachment rules.
fn routing(config: &Config, routes: &dispatch::Routes, tokens: &Tokens) -> anyhow::Result<Routing> {
    let serves = tokens.tenants();
    Ok(Routing::new(
        config
            .routes
            .iter()
            .map(|(name, route)| {
                let info = RouteInfo {
                    channels: route.provider.settings().channels().to_vec(),
                    delivery: route.delivery,
                    tenants: route.tenants.clone(),
                    allowed_from: route.allowed_from.clone(),
                    tags: routes.get(name).is_some_and(|r| r.capabilities().tags),
                    attachments: routes
                        .get(name)
                        .is_some_and(|r| r.capabilities().attachments),
                    operator: operator_of(
                        route.operated_by.as_deref(),
                        route.tenants.as_deref(),
                        &serves,
                    ),
                };
                (name.clone(), info)
            })
            .collect::<BTreeMap<_, _>>(),
        config
            .channels
            .iter()
            .map(|(c, r)| (*c, r.clone()))
            .collect(),
    )
    .with_categories(categories(config)?)
    .with_attachments(config.attachments.rules()))
}

/// The configured categories, with their unsubscribe secrets resolved and checked: long
/// enough once blanks are left out, and none a token's secret too (one signs links anybody may
/// read; the other opens the API).
pub(crate) fn categories(config: &Config) -> anyhow::Result<Categories> {
    // A token whose secret does not resolve is reported by the token check.
    let token_secrets: Vec<(&str, SecretString)> = config
        .tokens
        .iter()
        .filter_map(|t| Some((t.name.as_str(), t.secret.resolve("").ok()?)))
        .collect();
    let secrets = config
        .unsubscribe
        .secrets
        .iter()
        .enumerate()
        .map(|(i, source)| {
            let key = format!("unsubscribe.secrets[{i}]");
            let secret = source.resolve(&key)?;
            let length = secret.expose_secret().trim().len();
            if length < MIN_UNSUBSCRIBE_SECRET_BYTES {
                anyhow::bail!(
                    "{key}: the secret has {length} bytes besides blanks; use at least \
                     {MIN_UNSUBSCRIBE_SECRET_BYTES} random ones (e.g. `openssl rand -hex 32`)"
                );
            }
            if let Some((token, _)) = token_secrets
                .iter()
                .find(|(_, t)| t.expose_secret() == secret.expose_secret())
            {
                anyhow::bail!(
                    "{key}: the secret is token `{token}`'s too; give unsubscribe links a \
                     secret of their own"
                );
            }
            Ok(secret)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Categories::new(
        config
            .categories
            .iter()
            .map(|(name, c)| (name.clone(), c.unsubscribe))
            .collect(),
        config.unsubscribe.public_url.as_deref(),
        secrets,
    ))
}

/// The configured tokens, or, with none, the development token for tenant `dev`.
pub(crate) fn tokens(config: &Config) -> anyhow::Result<(Tokens, Option<SecretString>)> {
    if !config.tokens.is_empty() {
        let resolved = config
            .tokens
            .iter()
            .map(|t| {
                let secret = t.secret.resolve(&format!("token `{}`", t.name))?;
                let length = secret.expose_secret().trim().chars().count();
                if length < MIN_TOKEN_CHARS {
                    anyhow::bail!(
                        "token `{}`: its secret has {length} characters; use at least \
                         {MIN_TOKEN_CHARS} random ones (e.g. `openssl rand -hex 32`)",
                        t.name
                    );
                }
                let routes = t
                    .routes
                    .as_ref()
                    .filter(|r| !r.iter().any(|name| name == "*"))
                    .map(|r| r.iter().cloned().collect());
                Ok(NewToken {
                    name: t.name.clone(),
                    tenant: t.tenant.clone(),
                    scopes: t.scopes.clone(),
                    routes,
                    secret,
                    rate_limit: t.rate_limit(),
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        for (i, token) in resolved.iter().enumerate() {
            if let Some(other) = resolved[..i]
                .iter()
                .find(|o| o.secret.expose_secret() == token.secret.expose_secret())
            {
                anyhow::bail!(
                    "tokens `{}` and `{}` share a secret: each principal needs its own",
                    other.name,
                    token.name
                );
            }
        }
        return Ok((Tokens::new(resolved), None));
    }
    let (secret, generated) = match std::env::var("HERALD_DEV_TOKEN") {
        Ok(token) if token.trim().chars().count() < MIN_DEV_TOKEN_CHARS => anyhow::bail!(
            "HERALD_DEV_TOKEN has fewer than {MIN_DEV_TOKEN_CHARS} characters; set a longer one, \
             or unset it to get a random token"
        ),
        Ok(token) => (SecretString::from(token), None),
        _ => {
            let token = SecretString::from(format!(
                "hrld_dev_{}",
                hex::encode(rand::random::<[u8; 24]>())
            ));
            (token.clone(), Some(token))
        }
    };
    let all = Scope::ALL.to_vec();
    let tokens = Tokens::new([NewToken {
        name: "dev".to_owned(),
        tenant: DEV_TENANT.to_owned(),
        scopes: all,
        routes: None,
        secret,
        rate_limit: None,
    }]);
    Ok((tokens, generated))
}
