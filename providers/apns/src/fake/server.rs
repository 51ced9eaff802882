//! The fake's server: HTTP/2 over TLS on 127.0.0.1, with a certificate from a test CA it makes
//! itself, and ALPN `h2` only, as APNs ("Use HTTP/2 and TLS 1.2 or later"). A client that
//! offers only `http/1.1` fails the TLS handshake (rustls answers `no_application_protocol`),
//! and one that offers no ALPN at all is dropped after it: whatever reaches a handler spoke
//! HTTP/2.
//!
//! It runs each connection itself (hyper's HTTP/2 connection over a `tokio_rustls` stream), as
//! herald-provider's HTTP/1 harness does, so that an `accept_then_drop` fault can close a
//! connection after processing without writing a byte of the answer: a handler asks for that
//! with the [`Hangup`] request extension. Each connection's requests also carry its
//! [`ConnectionId`], since APNs judges token updates per connection.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::{Extension, Router};
use hyper::server::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, oneshot};
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;

/// A TLS handshake that takes longer than this is not one a test makes.
const HANDSHAKE_AT_MOST: Duration = Duration::from_secs(10);

/// A test CA and the server certificate it issued for `127.0.0.1` and `localhost`.
pub(crate) struct TestCa {
    /// The CA's certificate, PEM: what a client trusts (`root_certificate`).
    pub ca_pem: String,
    /// The server's certificate chain (its own, then the CA's) and key.
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl TestCa {
    pub(crate) fn generate() -> io::Result<TestCa> {
        let ca_key = KeyPair::generate().map_err(io::Error::other)?;
        let mut ca_params =
            CertificateParams::new(Vec::<String>::new()).map_err(io::Error::other)?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "herald fake APNs test CA");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_cert = ca_params.self_signed(&ca_key).map_err(io::Error::other)?;
        let issuer = Issuer::new(ca_params, ca_key);

        let server_key = KeyPair::generate().map_err(io::Error::other)?;
        let mut server_params =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
                .map_err(io::Error::other)?;
        server_params
            .distinguished_name
            .push(DnType::CommonName, "api.push.apple.com (fake)");
        let server_cert = server_params
            .signed_by(&server_key, &issuer)
            .map_err(io::Error::other)?;
        Ok(TestCa {
            ca_pem: ca_cert.pem(),
            chain: vec![server_cert.der().clone(), ca_cert.der().clone()],
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der())),
        })
    }

    /// rustls' server side: this certificate, ALPN `h2` alone, ring as the provider (whatever
    /// the process installed).
    pub(crate) fn server_config(&self) -> io::Result<ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(io::Error::other)?
            .with_no_client_auth()
            .with_single_cert(self.chain.clone(), self.key.clone_key())
            .map_err(io::Error::other)?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(config)
    }
}

/// Which TLS connection a request came on, numbered from 1 in the order they were accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnectionId(pub u64);

/// Lets a request handler close the connection it arrived on without a byte of answer (and
/// with it every other stream on it, as a dead connection does).
///
/// Protocol: [`Hangup::hang_up`] signals the task that owns the connection and never completes;
/// that task waits on the signal alongside the connection and drops it, which closes the socket
/// and drops the pending handler. `Notify` keeps a signal sent before the owner waits.
#[derive(Clone, Default)]
pub(crate) struct Hangup(Arc<Notify>);

impl Hangup {
    /// Closes this request's connection without answering. Never returns.
    pub(crate) async fn hang_up<T>(&self) -> T {
        self.0.notify_one();
        std::future::pending().await
    }
}

/// The running server. Dropping it stops the server and closes every connection at once.
pub(crate) struct TlsServer {
    addr: SocketAddr,
    connections: Arc<AtomicU64>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl TlsServer {
    /// Binds 127.0.0.1 on a free port and serves `router` there over HTTP/2 and TLS.
    pub(crate) async fn start(router: Router, tls: ServerConfig) -> io::Result<TlsServer> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let connections = Arc::new(AtomicU64::new(0));
        let (stop, stopped) = oneshot::channel();
        let acceptor = TlsAcceptor::from(Arc::new(tls));
        let task = tokio::spawn(accept_loop(
            listener,
            acceptor,
            router,
            Arc::clone(&connections),
            stopped,
        ));
        Ok(TlsServer {
            addr,
            connections,
            stop: Some(stop),
            task: Some(task),
        })
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// TCP connections accepted so far, TLS or not.
    pub(crate) fn connections(&self) -> u64 {
        self.connections.load(Ordering::SeqCst)
    }

    /// Stops the server, closes its connections and waits until it has.
    pub(crate) async fn shutdown(mut self) {
        self.stop();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    router: Router,
    connections: Arc<AtomicU64>,
    stopped: oneshot::Receiver<()>,
) {
    let mut running = JoinSet::new();
    let mut stopped = std::pin::pin!(stopped);
    loop {
        tokio::select! {
            biased;
            _ = &mut stopped => break,
            Some(_) = running.join_next() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let id = ConnectionId(connections.fetch_add(1, Ordering::SeqCst) + 1);
                    running.spawn(run_connection(stream, peer, id, acceptor.clone(), router.clone()));
                }
                Err(err) => {
                    tracing::warn!(error = %err, "accept failed; retrying shortly");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
    running.shutdown().await;
}

async fn run_connection(
    stream: TcpStream,
    peer: SocketAddr,
    id: ConnectionId,
    acceptor: TlsAcceptor,
    router: Router,
) {
    let tls = match tokio::time::timeout(HANDSHAKE_AT_MOST, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(err)) => {
            tracing::debug!(%peer, error = %err, "TLS handshake refused");
            return;
        }
        Err(_) => return,
    };
    if tls.get_ref().1.alpn_protocol() != Some(b"h2".as_slice()) {
        tracing::debug!(%peer, "no ALPN h2: APNs speaks HTTP/2 only; closing");
        return;
    }
    let hangup = Hangup::default();
    let router = router.layer(Extension(hangup.clone())).layer(Extension(id));
    let service = TowerToHyperService::new(router);
    let connection =
        http2::Builder::new(TokioExecutor::new()).serve_connection(TokioIo::new(tls), service);
    tokio::select! {
        result = connection => {
            if let Err(err) = result {
                tracing::debug!(%peer, error = %err, "connection ended with an error");
            }
        }
        () = hangup.0.notified() => {
            tracing::debug!(%peer, "closed the connection without answering");
        }
    }
}
