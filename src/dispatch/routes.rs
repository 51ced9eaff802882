//! Routes at run time: each configured route's adapter, limits, pace and concurrency, and the
//! one way to call a route's vendor ([`Route::send`], [`Route::query`]). [`build_routes`] turns
//! each route's configuration into its vendor's adapter.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use herald_mailjet::{MailjetAdapter, MailjetRoute};
use herald_onesignal::{OneSignalAdapter, OneSignalRoute};
use herald_provider::{
    Adapter, Capabilities, Evidence, Message, ProviderKey, QueryResult, Request, SendResult,
};
use herald_resend::{ResendAdapter, ResendRoute};
use herald_sandbox::{SandboxAdapter, SandboxConfig, SandboxHandle, SandboxRoute};
use herald_smtp::{SmtpAdapter, SmtpRoute};
use herald_twilio::{TwilioAdapter, TwilioRoute};
use herald_webhook::{WebhookAdapter, WebhookRoute};
use tokio::sync::Semaphore;

use super::circuit::{Circuit, CircuitState};
use super::pacing::Pace;
use super::policy::Limits;
use crate::config::{Config, ProviderConfig, RouteConfig};
use crate::domain::AttemptResult;

pub struct Route {
    name: String,
    /// The `provider = "…"` of its configuration.
    provider: &'static str,
    adapter: Arc<dyn Adapter>,
    /// Where its notifications go when it is known not to have taken them.
    fallback: Option<String>,
    circuit: Circuit,
    /// Bounds this route's calls in flight, so that one slow vendor cannot take every worker.
    permits: Semaphore,
    concurrency: usize,
    /// Notifications of this route claimed by this process and not yet recorded.
    pending: Arc<AtomicUsize>,
    pace: Pace,
    timeout: Duration,
    limits: Limits,
}

/// The longest a claimed send waits for its route's pace: far inside any lease (which outlasts
/// the route's timeout by at least 2 s), so a held send is never mistaken for a crashed one.
const PACE_PATIENCE: Duration = Duration::from_secs(1);

impl Route {
    /// Whether new claims should leave this route out: it has as much work as it can run, or
    /// it must not call its vendor yet (an open circuit only where there is no fallback to
    /// hand its notifications to).
    pub fn saturated(&self, now: Instant) -> bool {
        self.pending.load(Ordering::Relaxed) >= self.concurrency
            || !self.pace.wait(now).is_zero()
            || (self.fallback.is_none() && self.circuit.resting(now).is_some())
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn provider(&self) -> &'static str {
        self.provider
    }

    pub fn concurrency(&self) -> usize {
        self.concurrency
    }

    /// Calls per second and burst of its own limit, and how much longer a vendor's "slow down"
    /// pauses it.
    pub fn pace(&self, now: Instant) -> (Option<(f64, u32)>, Duration) {
        (self.pace.limit(), self.pace.paused_for(now))
    }

    pub fn circuit(&self) -> (CircuitState, Option<u32>, Duration) {
        self.circuit.status()
    }

    pub fn fallback(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    pub fn capabilities(&self) -> &Capabilities {
        self.adapter.capabilities()
    }

    /// The request this route would send for `message`; see [`Adapter::prepare`].
    pub fn prepare(&self, message: &Message, key: &ProviderKey) -> Result<Request, Evidence> {
        self.adapter.prepare(message, key)
    }
    /// One provider call, within the route's concurrency limit and timeout. A timeout here is
    /// ambiguous: the adapter's own should have fired first, so the request may be out.
    pub async fn send(
        &self,
        request: &Result<Request, Evidence>,
        message: &Message,
        key: &ProviderKey,
    ) -> SendResult {
        let route = self;
        let request = match request {
            Ok(request) => request,
            Err(evidence) => return SendResult::refused(evidence.clone()),
        };
        // A resting route is refused before it waits for a permit or its pace: its work goes
        // to the fallback at once.
        if let Some(wait) = route.circuit.resting(Instant::now()) {
            return route.circuit_open(wait);
        }
        let _permit = route
            .permits
            .acquire()
            .await
            .expect("route semaphores are never closed");
        if let Err(wait) = route.pace.take(PACE_PATIENCE).await {
            return route.not_called(
                "paced",
                format!(
                    "not sent: the route is paused or at its rate limit for {} ms more",
                    wait.as_millis()
                ),
                wait,
            );
        }
        if let Err(wait) = route.circuit.admit(Instant::now()) {
            return route.circuit_open(wait);
        }
        let started = Instant::now();
        let result = match tokio::time::timeout(
            route.timeout + Duration::from_secs(1),
            route.adapter.send_prepared(request, message, key),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => SendResult::Ambiguous {
                evidence: Evidence::new(
                    "awaiting_response",
                    "the adapter did not return within the route's timeout",
                ),
            },
        };
        route.circuit.observe(&result, Instant::now());
        let label = match &result {
            SendResult::Accepted { .. } => AttemptResult::Accepted,
            SendResult::Rejected { .. } | SendResult::KeyReused { .. } => AttemptResult::Rejected,
            SendResult::Ambiguous { .. } => AttemptResult::Ambiguous,
        };
        let reason = result.reason();
        metrics::counter!("herald_attempts_total", "route" => route.name.clone(), "result" => label.as_str(), "reason" => reason).increment(1);
        if label != AttemptResult::Accepted {
            let evidence = result.evidence();
            tracing::warn!(
                result = label.as_str(),
                reason,
                stage = %evidence.stage,
                status = ?evidence.status,
                detail = %evidence.detail,
                "attempt not accepted"
            );
        }
        metrics::histogram!("herald_send_seconds", "route" => route.name.clone())
            .record(started.elapsed().as_secs_f64());
        if let SendResult::Rejected {
            permanent: false,
            retry_after: Some(wait),
            ..
        } = &result
        {
            // The vendor asked for a pause: it holds for the whole route, not this message only.
            route.pace.pause_until(std::time::Instant::now() + *wait);
        }
        result
    }

    /// Not sent: the route's recent sends failed, and it rests until its probe.
    fn circuit_open(&self, wait: Duration) -> SendResult {
        self.not_called(
            "circuit_open",
            format!(
                "not sent: the route's circuit is open after failures in a row, for {} ms more",
                wait.as_millis()
            ),
            wait,
        )
    }

    /// herald held the send back itself (its `stage` is also the attempt's metric reason): a
    /// rejection it can prove, due again after `wait`.
    fn not_called(&self, stage: &'static str, detail: String, wait: Duration) -> SendResult {
        metrics::counter!("herald_attempts_total", "route" => self.name.clone(), "result" => AttemptResult::Rejected.as_str(), "reason" => stage).increment(1);
        SendResult::Rejected {
            permanent: false,
            retry_after: Some(wait),
            evidence: Evidence::new(stage, detail),
        }
    }

    /// The route's outcome query about the stored request.
    pub async fn query(
        &self,
        request: &Result<Request, Evidence>,
        message: &Message,
        key: &ProviderKey,
    ) -> QueryResult {
        match request {
            Ok(request) => self.adapter.query_prepared(request, message, key).await,
            Err(evidence) => QueryResult::Unsupported {
                evidence: evidence.clone(),
            },
        }
    }
}

#[derive(Default)]
pub struct Routes(HashMap<String, Route>);

impl Routes {
    pub fn get(&self, name: &str) -> Option<&Route> {
        self.0.get(name)
    }

    /// Counts a claimed notification against its route until the guard is dropped.
    pub fn pending(&self, route: &str) -> Option<PendingGuard> {
        self.0.get(route).map(|r| {
            r.pending.fetch_add(1, Ordering::Relaxed);
            PendingGuard(r.pending.clone())
        })
    }

    /// The routes new claims may take work for: every configured route but the saturated ones
    /// (see [`Route::saturated`]).
    pub fn ready(&self) -> Vec<String> {
        let now = Instant::now();
        self.0
            .values()
            .filter(|r| !r.saturated(now))
            .map(|r| r.name.clone())
            .collect()
    }

    /// The provider request `n`'s route would send for it; `None` where the route is not
    /// configured here or cannot send the message (the send then says why).
    pub fn prepare(&self, n: &crate::domain::Notification) -> Option<Request> {
        let route = self.0.get(&n.route)?;
        let key = ProviderKey::new(n.provider_key());
        route.prepare(&super::message_of(n), &key).ok()
    }

    pub fn names(&self) -> Vec<String> {
        self.0.keys().cloned().collect()
    }

    pub fn all(&self) -> impl Iterator<Item = &Route> {
        self.0.values()
    }

    pub fn count(&self) -> usize {
        self.0.len()
    }

    pub fn longest_timeout(&self) -> Duration {
        self.0.values().map(|r| r.timeout).max().unwrap_or_default()
    }
}

pub struct PendingGuard(Arc<AtomicUsize>);

impl Drop for PendingGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Builds every configured route. Sandbox routes without a `base_url` get a sandbox vendor of
/// their own in this process; the handles keep them running and must outlive the dispatcher.
pub async fn build_routes(config: &Config) -> anyhow::Result<(Routes, Vec<SandboxHandle>)> {
    let mut routes = HashMap::new();
    let mut sandboxes = Vec::new();
    for (name, route) in &config.routes {
        let adapter = adapter(name, route, &mut sandboxes)
            .await
            .with_context(|| format!("route `{name}`"))?;
        // Reconciliation trusts what a route declares; a vendor that says otherwise is refused
        // here rather than settled against.
        adapter
            .verify()
            .await
            .map_err(|mismatch| anyhow::anyhow!("route `{name}`: {mismatch}"))?;
        routes.insert(
            name.clone(),
            Route {
                name: name.clone(),
                provider: route.provider.name(),
                adapter,
                fallback: route.fallback.clone(),
                circuit: Circuit::new(
                    name,
                    // 0 turns it off; a webhook route's sends go to many receivers, and one
                    // receiver's failures say nothing of the others'.
                    Some(route.circuit_failures).filter(|n| {
                        *n > 0 && !matches!(route.provider, ProviderConfig::Webhook { .. })
                    }),
                    route.circuit_open,
                    route.timeout + Duration::from_secs(2),
                ),
                permits: Semaphore::new(route.concurrency),
                concurrency: route.concurrency,
                pending: Arc::default(),
                pace: Pace::new(route.rate_limit_per_second, route.burst),
                timeout: route.timeout,
                limits: Limits {
                    max_attempts: route.max_attempts,
                    max_age: route.max_age,
                    retry_base: Duration::from_millis(config.dispatch.retry_base_ms),
                    retry_max: Duration::from_secs(config.dispatch.retry_max_seconds),
                    timeout: route.timeout,
                },
            },
        );
    }
    Ok((Routes(routes), sandboxes))
}

/// Builds route `name`'s adapter as `serve` would, without sending anything; with `connect`,
/// also asks the vendor to confirm what the route declares. An in-process sandbox is not
/// started: there is nothing to check until it is.
pub async fn check_route(name: &str, route: &RouteConfig, connect: bool) -> anyhow::Result<()> {
    if let ProviderConfig::Sandbox {
        base_url: None,
        profile,
        ..
    } = &route.provider
    {
        herald_sandbox::Profile::from_str(profile)?;
        return Ok(());
    }
    let adapter = adapter(name, route, &mut Vec::new()).await?;
    if connect {
        adapter.verify().await.map_err(anyhow::Error::msg)?;
    }
    Ok(())
}

async fn adapter(
    name: &str,
    route: &RouteConfig,
    sandboxes: &mut Vec<SandboxHandle>,
) -> anyhow::Result<Arc<dyn Adapter>> {
    match &route.provider {
        ProviderConfig::Sandbox {
            base_url,
            profile,
            idempotency_window_seconds,
            visibility_lag_ms,
            from,
        } => {
            let profile = herald_sandbox::Profile::from_str(profile)?;
            let idempotency_window = Duration::from_secs(*idempotency_window_seconds);
            let visibility_lag = Duration::from_millis(*visibility_lag_ms);
            let base_url = match base_url {
                Some(url) => url.clone(),
                None => {
                    let handle = herald_sandbox::spawn(SandboxConfig {
                        profile,
                        idempotency_window,
                        visibility_lag,
                        ..SandboxConfig::default()
                    })
                    .await
                    .context("cannot start the built-in sandbox vendor")?;
                    let url = handle.base_url();
                    tracing::info!(route = name, %url, profile = profile.as_str(), "built-in sandbox vendor started");
                    sandboxes.push(handle);
                    url
                }
            };
            let adapter = SandboxAdapter::try_new(SandboxRoute {
                base_url,
                from: from.clone(),
                profile,
                idempotency_window,
                visibility_lag,
                timeout: route.timeout,
            })?;
            Ok(Arc::new(adapter))
        }
        ProviderConfig::Webhook {
            secrets,
            allow_private_networks,
            max_payload_bytes,
        } => {
            let secrets = secrets
                .iter()
                .enumerate()
                .map(|(i, s)| s.resolve(&format!("routes.{name}.secrets[{i}]")))
                .collect::<anyhow::Result<_>>()?;
            Ok(Arc::new(WebhookAdapter::new(WebhookRoute {
                secrets,
                timeout: route.timeout,
                allow_private_networks: *allow_private_networks,
                max_payload_bytes: *max_payload_bytes,
                user_agent: None,
            })?))
        }
        ProviderConfig::Resend {
            base_url,
            api_key,
            from,
        } => Ok(Arc::new(ResendAdapter::new(ResendRoute {
            base_url: base_url
                .clone()
                .unwrap_or_else(|| herald_resend::DEFAULT_BASE_URL.into()),
            api_key: api_key.resolve(&format!("routes.{name}.api_key"))?,
            from: from.clone(),
            timeout: route.timeout,
        })?)),
        ProviderConfig::Smtp {
            host,
            port,
            tls,
            username,
            password,
            from,
            hello_name,
            root_certificate,
        } => {
            let tls = tls.tls();
            let extra_root_certificate_pem = match root_certificate {
                Some(path) => Some(std::fs::read_to_string(path).with_context(|| {
                    format!(
                        "cannot read routes.{name}.root_certificate {}",
                        path.display()
                    )
                })?),
                None => None,
            };
            let password = match password {
                Some(p) => Some(p.resolve(&format!("routes.{name}.password"))?),
                None => None,
            };
            Ok(Arc::new(SmtpAdapter::new(SmtpRoute {
                host: host.clone(),
                port: port.unwrap_or_else(|| tls.default_port()),
                tls,
                username: username.clone(),
                password,
                from: from.clone(),
                timeout: route.timeout,
                hello_name: hello_name.clone(),
                extra_root_certificate_pem,
            })?))
        }
        ProviderConfig::Twilio {
            base_url,
            account_sid,
            api_key_sid,
            auth_token,
            from,
            messaging_service_sid,
            status_callback,
            visibility_lag_ms,
        } => Ok(Arc::new(TwilioAdapter::new(TwilioRoute {
            base_url: base_url
                .clone()
                .unwrap_or_else(|| herald_twilio::DEFAULT_BASE_URL.into()),
            account_sid: account_sid.clone(),
            api_key_sid: api_key_sid.clone(),
            auth_token: auth_token.resolve(&format!("routes.{name}.auth_token"))?,
            from: from.clone(),
            messaging_service_sid: messaging_service_sid.clone(),
            status_callback: status_callback.clone(),
            visibility_lag: visibility_lag_ms
                .map_or(herald_twilio::DEFAULT_VISIBILITY_LAG, Duration::from_millis),
            timeout: route.timeout,
        })?)),
        ProviderConfig::Mailjet {
            base_url,
            api_key,
            api_secret,
            from,
            from_name,
            visibility_lag_ms,
        } => Ok(Arc::new(MailjetAdapter::new(MailjetRoute {
            base_url: base_url
                .clone()
                .unwrap_or_else(|| herald_mailjet::DEFAULT_BASE_URL.into()),
            api_key: api_key.clone(),
            api_secret: api_secret.resolve(&format!("routes.{name}.api_secret"))?,
            from: from.clone(),
            from_name: from_name.clone(),
            visibility_lag: visibility_lag_ms.map_or(
                herald_mailjet::DEFAULT_VISIBILITY_LAG,
                Duration::from_millis,
            ),
            timeout: route.timeout,
        })?)),
        ProviderConfig::Onesignal {
            base_url,
            app_id,
            api_key,
        } => Ok(Arc::new(OneSignalAdapter::new(OneSignalRoute {
            base_url: base_url
                .clone()
                .unwrap_or_else(|| herald_onesignal::DEFAULT_BASE_URL.into()),
            app_id: app_id.clone(),
            api_key: api_key.resolve(&format!("routes.{name}.api_key"))?,
            timeout: route.timeout,
        })?)),
    }
}
