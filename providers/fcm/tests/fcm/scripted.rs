//! A stand-in for FCM whose answers a test scripts, for what the fake does not play: a token
//! endpoint that hangs or answers a body the adapter cannot use, a `messages:send` that answers
//! 401 `THIRD_PARTY_AUTH_ERROR`, holds its answer, or answers from a frozen process. Each
//! endpoint answers its n-th request with the n-th play of its script (the last one again after
//! that) and counts the requests it received, answered or not.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use herald_fcm::FcmAdapter;
use herald_fcm::fake::FakeConfig;
use herald_provider::fake::{FakeServer, serve};

use crate::support::adapter;

/// FCM's refusal of an expired or revoked access token.
pub const UNAUTHENTICATED: &str =
    include_str!("../../../../fixtures/fcm/errors/unauthenticated.401.json");
/// FCM's refusal for the project's APNs certificate or web push key, not the access token.
pub const THIRD_PARTY_AUTH_ERROR: &str =
    include_str!("../../../../fixtures/fcm/errors/third-party-auth-error.401.json");
/// FCM's answer to a message sent.
pub const SENT: &str = include_str!("../../../../fixtures/fcm/send.response.json");

/// How an endpoint answers one request.
#[derive(Debug, Clone)]
pub enum Play {
    /// At once, with this status and JSON body.
    Answer(u16, &'static str),
    /// The same, after holding it this long (the process keeps running meanwhile).
    After(Duration, u16, &'static str),
    /// The same, after the whole process stood still this long: the handler blocks the thread,
    /// so on a single-threaded runtime the client's timers cannot fire meanwhile either, as in
    /// a process frozen and woken with the answer waiting on its socket.
    Frozen(Duration, u16, &'static str),
    /// Never: the request is read and the answer never comes.
    Hang,
}

impl Play {
    /// A token the adapter takes: a bearer that lives an hour.
    pub fn token() -> Play {
        Play::Answer(
            200,
            r#"{"access_token": "ya29.scripted-token", "expires_in": 3599, "token_type": "Bearer"}"#,
        )
    }

    async fn answer(self) -> Response {
        let (status, body) = match self {
            Play::Answer(status, body) => (status, body),
            Play::After(wait, status, body) => {
                tokio::time::sleep(wait).await;
                (status, body)
            }
            Play::Frozen(wait, status, body) => {
                std::thread::sleep(wait);
                (status, body)
            }
            Play::Hang => std::future::pending().await,
        };
        let status = StatusCode::from_u16(status).expect("a status the script names");
        (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
    }
}

/// The running stand-in. Dropping it closes every connection, answered or not.
pub struct Scripted {
    server: FakeServer,
    exchanges: Arc<AtomicU64>,
    sends: Arc<AtomicU64>,
}

impl Scripted {
    /// Serves `token` at `/token` and `send` at the test project's `messages:send`.
    pub async fn start(token: Vec<Play>, send: Vec<Play>) -> Scripted {
        let exchanges = Arc::new(AtomicU64::new(0));
        let sends = Arc::new(AtomicU64::new(0));
        let project = FakeConfig::default().project_id;
        let router = Router::new()
            .route("/token", scripted(token, Arc::clone(&exchanges)))
            .route(
                &format!("/v1/projects/{project}/messages:send"),
                scripted(send, Arc::clone(&sends)),
            );
        let server = serve(router)
            .await
            .expect("the stand-in binds a loopback port");
        Scripted {
            server,
            exchanges,
            sends,
        }
    }

    /// An adapter with `timeout` whose sends and token exchanges both come here.
    pub fn adapter(&self, timeout: Duration) -> FcmAdapter {
        let base = self.server.base_url();
        let key = FakeConfig::default().service_account(&format!("{base}/token"));
        adapter(&base, &key, timeout)
    }

    /// Token exchanges received, answered or not.
    pub fn exchanges(&self) -> u64 {
        self.exchanges.load(Ordering::SeqCst)
    }

    /// `messages:send` requests received, answered or not.
    pub fn sends(&self) -> u64 {
        self.sends.load(Ordering::SeqCst)
    }
}

fn scripted(script: Vec<Play>, count: Arc<AtomicU64>) -> axum::routing::MethodRouter {
    assert!(!script.is_empty(), "a script plays at least one answer");
    post(move || {
        let n = usize::try_from(count.fetch_add(1, Ordering::SeqCst)).unwrap_or(usize::MAX);
        let play = script[n.min(script.len() - 1)].clone();
        play.answer()
    })
}
