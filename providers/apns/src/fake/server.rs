//! The fake's server: HTTP/2 over TLS on 127.0.0.1, with a certificate from a test CA it makes
//! itself, and ALPN `h2` only, as APNs ("Use HTTP/2 and TLS 1.2 or later"). A client that
//! offers only `http/1.1` fails the TLS handshake (rustls answers `no_application_protocol`),
//! and one that offers no ALPN at all is dropped after it: whatever reaches a handler spoke
//! HTTP/2.
//!
//! herald-provider's fake server accepts the connections and stops them; each runs here (hyper's
//! HTTP/2 connection over a `tokio_rustls` stream), so that an `accept_then_drop` fault can
//! close a connection after processing without writing a byte of the answer: a handler asks for
//! that with the [`Kill`] request extension. Each connection's requests also carry its
//! [`ConnectionId`], since APNs judges token updates per connection.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::{Extension, Router};
use herald_provider::fake::{self, FakeServer, Kill};
use hyper::server::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpStream;
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

/// Binds 127.0.0.1 on a free port and serves `router` there over HTTP/2 and TLS, with
/// herald-provider's fake server (its lifecycle, and its [`Kill`] for faults that close a
/// connection unanswered, which here closes every other stream on it too, as a dead connection
/// does).
pub(crate) async fn start(router: Router, tls: ServerConfig) -> io::Result<FakeServer> {
    let acceptor = TlsAcceptor::from(Arc::new(tls));
    fake::serve_with(move |stream, peer, number| {
        run_connection(
            stream,
            peer,
            ConnectionId(number),
            acceptor.clone(),
            router.clone(),
        )
    })
    .await
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
    let kill = Kill::default();
    let router = router.layer(Extension(kill.clone())).layer(Extension(id));
    let service = TowerToHyperService::new(router);
    let connection =
        http2::Builder::new(TokioExecutor::new()).serve_connection(TokioIo::new(tls), service);
    tokio::select! {
        result = connection => {
            if let Err(err) = result {
                tracing::debug!(%peer, error = %err, "connection ended with an error");
            }
        }
        () = kill.requested() => {
            tracing::debug!(%peer, "closed the connection without answering");
        }
    }
}
