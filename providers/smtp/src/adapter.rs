//! Herald's adapter for an SMTP server (`provider = "smtp"`).
//!
//! lettre's `AsyncSmtpTransport::send` runs a whole transaction and reports a failure without
//! saying where it happened, so this adapter drives lettre's `AsyncSmtpConnection` one command
//! at a time (connect, TLS, greeting and EHLO, STARTTLS, AUTH, MAIL FROM, RCPT TO, DATA, the
//! content) and owns the stream beneath it (`wire`); `classify` then turns the step and the
//! stream's state into a result. One connection per send: the adapter keeps no pool, so a
//! failure never leaves a session in an unknown state for the next message.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use herald_provider::http::error_chain;
use herald_provider::settings::is_loopback_host;
use herald_provider::{
    Adapter, Capabilities, Evidence, Message, ProviderKey, Redactor, Request, SendResult,
};
use lettre::address::Envelope;
use lettre::message::Mailbox;
use lettre::transport::smtp::Error as LettreError;
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{
    AsyncSmtpConnection, AsyncTokioStream, Certificate, TlsParameters,
};
use lettre::transport::smtp::commands::{Data, Mail, Rcpt};
use lettre::transport::smtp::extension::{ClientId, Extension, MailBodyParameter, MailParameter};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use secrecy::{ExposeSecret, SecretString};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::TlsConnector;

use crate::classify::{Report, Stage};
use crate::compose::{compose, message_id};
use crate::wire::{Watch, Watched};

/// The [`Request::parts`] holding the envelope.
const MAIL_FROM: &str = "mail_from";
const RCPT_TO: &str = "rcpt_to";

/// How the connection is protected (`tls = "none" | "starttls" | "implicit"`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tls {
    /// Plain text throughout. Credentials are then refused unless the host is loopback.
    None,
    /// Plain text until STARTTLS (RFC 3207), which the server must offer.
    #[default]
    StartTls,
    /// TLS from the first byte (SMTPS, RFC 8314).
    Implicit,
}

impl Tls {
    /// The usual port for this mode: 25 (relay), 587 (submission), 465 (submissions).
    pub fn default_port(self) -> u16 {
        match self {
            Tls::None => 25,
            Tls::StartTls => 587,
            Tls::Implicit => 465,
        }
    }
}

/// A route's settings, already resolved by herald.
#[derive(Debug, Clone)]
pub struct SmtpRoute {
    pub host: String,
    pub port: u16,
    pub tls: Tls,
    /// AUTH PLAIN or LOGIN, whichever the server offers; set both or neither.
    pub username: Option<String>,
    pub password: Option<SecretString>,
    /// The envelope sender and the `From` header: `ops@example.com` or `Ops <ops@example.com>`.
    pub from: String,
    /// The whole exchange, connect to the reply after the final dot (lettre's own timeout
    /// covers only the connect).
    pub timeout: Duration,
    /// The EHLO name; the machine's host name when unset.
    pub hello_name: Option<String>,
    /// PEM certificates trusted as roots in addition to the public web PKI roots, for a
    /// server with a private CA. Verification itself is never switched off.
    pub extra_root_certificate_pem: Option<String>,
}

/// Why a route cannot be used; reported at start-up, before any send.
#[derive(Debug, thiserror::Error)]
pub enum SmtpError {
    #[error("the SMTP host is empty")]
    EmptyHost,
    #[error("the SMTP timeout must be longer than zero")]
    ZeroTimeout,
    #[error("`from` is not a mailbox: {0}")]
    From(String),
    #[error("`hello_name` `{0}` is not a host name or an IP address")]
    HelloName(String),
    #[error("`username` and `password` must be set together")]
    HalfCredentials,
    #[error(
        "credentials would cross the network in plain text to `{0}`; use tls = \"starttls\" or \"implicit\""
    )]
    CleartextCredentials(String),
    #[error("the extra root certificates hold no usable certificate: {0}")]
    Certificate(String),
    #[error("cannot set up TLS: {0}")]
    Tls(String),
}

/// How the adapter sets up TLS, prepared once from the route.
#[derive(Clone)]
enum Security {
    Plain,
    /// lettre runs STARTTLS and the handshake on the watched socket.
    StartTls(TlsParameters),
    /// The adapter runs the handshake and watches the decrypted stream above it.
    Implicit {
        connector: TlsConnector,
        server_name: ServerName<'static>,
    },
}

#[derive(Clone)]
pub struct SmtpAdapter {
    host: String,
    port: u16,
    tls: Tls,
    from: Mailbox,
    hello: ClientId,
    security: Security,
    credentials: Option<(String, SecretString)>,
    /// Scrubs the password, in every form AUTH sends it, from anything a server echoes.
    redactor: Redactor,
    timeout: Duration,
    capabilities: Capabilities,
}

impl fmt::Debug for SmtpAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SmtpAdapter")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("tls", &self.tls)
            .field("from", &self.from.to_string())
            .field("username", &self.credentials.as_ref().map(|(user, _)| user))
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl SmtpAdapter {
    /// Checks the route and prepares TLS. Needs no network and installs nothing: with no
    /// process-wide rustls provider, ring is used (as lettre does).
    pub fn new(route: SmtpRoute) -> Result<Self, SmtpError> {
        if route.host.trim().is_empty() {
            return Err(SmtpError::EmptyHost);
        }
        if route.timeout.is_zero() {
            return Err(SmtpError::ZeroTimeout);
        }
        if route.from.contains(['\r', '\n']) {
            return Err(SmtpError::From("it holds a line break".to_owned()));
        }
        let from: Mailbox = route
            .from
            .parse()
            .map_err(|err| SmtpError::From(format!("{err}")))?;
        let hello = match route.hello_name.as_deref() {
            None => ClientId::default(),
            Some(name) => client_id(name).ok_or_else(|| SmtpError::HelloName(name.to_owned()))?,
        };
        let credentials = match (route.username, route.password) {
            (Some(user), Some(password)) => Some((user, password)),
            (None, None) => None,
            _ => return Err(SmtpError::HalfCredentials),
        };
        if credentials.is_some() && route.tls == Tls::None && !is_loopback_host(&route.host) {
            return Err(SmtpError::CleartextCredentials(route.host));
        }
        let extra_roots = match route.extra_root_certificate_pem.as_deref() {
            Some(pem) => parse_pem(pem)?,
            None => Vec::new(),
        };
        let security = match route.tls {
            Tls::None => Security::Plain,
            Tls::StartTls => Security::StartTls(lettre_tls(&route.host, &extra_roots)?),
            Tls::Implicit => implicit_tls(&route.host, extra_roots)?,
        };
        let redactor = match &credentials {
            Some((user, password)) => Redactor::credentials(user, password.expose_secret()),
            None => Redactor::default(),
        };
        Ok(SmtpAdapter {
            redactor,
            host: route.host,
            port: route.port,
            tls: route.tls,
            from,
            hello,
            security,
            credentials,
            timeout: route.timeout,
            // SMTP has no idempotency key and no outcome query; the size limit is the server's
            // (EHLO SIZE) and a larger message is refused with a 552 (see the crate docs).
            // lettre writes attachments as MIME parts; SMTP keeps no tags.
            capabilities: Capabilities {
                attachments: true,
                ..Capabilities::default()
            },
        })
    }

    /// Connects and reads the greeting and the EHLO reply (one call in lettre).
    async fn open(
        &self,
        watch: &Watch,
        stage: &mut Stage,
        report: &Report<'_>,
    ) -> Result<AsyncSmtpConnection, SendResult> {
        *stage = Stage::Connect;
        let tcp = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|err| {
                report.rejected(
                    false,
                    "connect",
                    format!("cannot connect to {}:{}: {err}", self.host, self.port),
                )
            })?;
        // Commands are single short lines answered one at a time; Nagle would only delay them.
        let _ = tcp.set_nodelay(true);
        let peer = tcp
            .peer_addr()
            .map_err(|err| report.rejected(false, "connect", format!("no peer address: {err}")))?;
        let stream: Box<dyn AsyncTokioStream> = match &self.security {
            Security::Implicit {
                connector,
                server_name,
            } => {
                *stage = Stage::Tls;
                let tls = connector
                    .connect(server_name.clone(), tcp)
                    .await
                    .map_err(|err| {
                        report.rejected(
                            false,
                            "tls",
                            format!("TLS handshake failed: {}", error_chain(&err)),
                        )
                    })?;
                Box::new(Watched::new(tls, watch.clone(), peer))
            }
            Security::Plain | Security::StartTls(_) => {
                Box::new(Watched::new(tcp, watch.clone(), peer))
            }
        };
        *stage = Stage::Hello;
        AsyncSmtpConnection::connect_with_transport(stream, &self.hello)
            .await
            .map_err(|err| report.error(Stage::Hello, watch, &err))
    }

    /// Everything after EHLO, one command at a time so that `stage` always names the step in
    /// progress. `Ok` holds a classified outcome, `Err` a lettre error for the current stage.
    async fn transaction(
        &self,
        conn: &mut AsyncSmtpConnection,
        (envelope, content): (&Envelope, &[u8]),
        watch: &Watch,
        stage: &mut Stage,
        report: &Report<'_>,
    ) -> Result<SendResult, LettreError> {
        if let Security::StartTls(parameters) = &self.security {
            *stage = Stage::StartTls;
            conn.starttls(parameters.clone(), &self.hello).await?;
        }
        if let Some((user, password)) = &self.credentials {
            *stage = Stage::Auth;
            let credentials = Credentials::new(user.clone(), password.expose_secret().to_owned());
            conn.auth(&[Mechanism::Plain, Mechanism::Login], &credentials)
                .await?;
        }

        *stage = Stage::MailFrom;
        // What lettre's own `send` would add: SMTPUTF8 for a non-ASCII address and 8BITMIME
        // for non-ASCII content, refused up front when the server does not offer them.
        let mut parameters = Vec::new();
        let mut addresses = envelope.from().into_iter().chain(envelope.to());
        if addresses.any(|a: &lettre::Address| !AsRef::<str>::as_ref(a).is_ascii()) {
            if !conn.server_info().supports_feature(Extension::SmtpUtfEight) {
                return Ok(report.rejected(
                    true,
                    "mail_from",
                    "a non-ASCII address needs SMTPUTF8, which the server does not offer",
                ));
            }
            parameters.push(MailParameter::SmtpUtfEight);
        }
        if !content.is_ascii() {
            if !conn.server_info().supports_feature(Extension::EightBitMime) {
                return Ok(report.rejected(
                    true,
                    "mail_from",
                    "non-ASCII content needs 8BITMIME, which the server does not offer",
                ));
            }
            parameters.push(MailParameter::Body(MailBodyParameter::EightBitMime));
        }
        conn.command(Mail::new(envelope.from().cloned(), parameters))
            .await?;

        *stage = Stage::RcptTo;
        for to in envelope.to() {
            conn.command(Rcpt::new(to.clone(), Vec::new())).await?;
        }

        *stage = Stage::Data;
        let go_ahead = conn.command(Data).await?;
        if !go_ahead.has_code(354) {
            return Ok(report.rejected(
                false,
                "data",
                format!(
                    "DATA was answered {} instead of 354; no content was sent",
                    u16::from(go_ahead.code())
                ),
            ));
        }

        *stage = Stage::Content;
        watch.content_starts();
        let reply = conn.message(content).await?;
        Ok(report.reply_to_dot(&reply))
    }
}

#[async_trait::async_trait]
impl Adapter for SmtpAdapter {
    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    /// The formatted message (with its Date and Message-ID fixed from now on) and its
    /// envelope. SMTP has no idempotency key; what a resend carries instead is the Message-ID,
    /// which is derived from the notification id alone (as stable as `key`).
    fn prepare(&self, message: &Message, _key: &ProviderKey) -> Result<Request, Evidence> {
        let refused = |reason: String| Evidence::new("compose", reason);
        let email = compose(&self.from, message).map_err(refused)?;
        let content = String::from_utf8(email.formatted())
            .map_err(|err| refused(format!("the formatted message is not UTF-8: {err}")))?;
        let envelope = email.envelope();
        let mut request = Request::new(content);
        if let Some(from) = envelope.from() {
            request.parts.insert(MAIL_FROM.to_owned(), from.to_string());
        }
        let to: Vec<String> = envelope.to().iter().map(ToString::to_string).collect();
        request.parts.insert(RCPT_TO.to_owned(), to.join(","));
        Ok(request)
    }

    async fn send_prepared(
        &self,
        request: &Request,
        message: &Message,
        _key: &ProviderKey,
    ) -> SendResult {
        let id = message_id(&message.notification_id);
        let report = Report {
            message_id: &id,
            redactor: &self.redactor,
        };
        let envelope = match envelope_of(request) {
            Ok(envelope) => envelope,
            Err(reason) => return report.rejected(true, "compose", reason),
        };
        let email = (&envelope, request.body.as_bytes());

        // One deadline for the exchange and the goodbye, so that `send` returns within the
        // route timeout whatever the server does.
        let deadline = Instant::now() + self.timeout;
        let watch = Watch::default();
        let mut stage = Stage::Connect;
        let exchange = async {
            let mut conn = match self.open(&watch, &mut stage, &report).await {
                Ok(conn) => conn,
                Err(result) => return (result, None),
            };
            match self
                .transaction(&mut conn, email, &watch, &mut stage, &report)
                .await
            {
                Ok(result) => (result, Some(conn)),
                // The server answered, or lettre refused before writing: the session is sound
                // enough for a QUIT.
                Err(err) if err.status().is_some() || err.is_client() => {
                    (report.error(stage, &watch, &err), Some(conn))
                }
                // A broken stream is only dropped: after a failed STARTTLS handshake lettre
                // leaves no stream behind and would panic on the QUIT (lettre#678).
                Err(err) => (report.error(stage, &watch, &err), None),
            }
        };
        let outcome = tokio::time::timeout_at(deadline, exchange).await;
        let (result, conn) = match outcome {
            Ok(done) => done,
            Err(_elapsed) => return report.timeout(stage, &watch, self.timeout),
        };
        if let Some(mut conn) = conn {
            // QUIT (when the session is still sound) and close. The result is settled: a slow
            // or failed goodbye changes nothing, an accepted message stays accepted.
            let _ = tokio::time::timeout_at(deadline, conn.abort()).await;
        }
        result
    }
}

/// The envelope a prepared request names: its `mail_from` and comma-separated `rcpt_to`.
fn envelope_of(request: &Request) -> Result<Envelope, String> {
    let parse = |text: &str| {
        text.parse::<lettre::Address>()
            .map_err(|err| format!("the stored envelope address `{text}` is not one: {err}"))
    };
    let from = request.parts.get(MAIL_FROM).map(|f| parse(f)).transpose()?;
    let to = request
        .parts
        .get(RCPT_TO)
        .map(|to| to.split(',').map(parse).collect::<Result<Vec<_>, _>>())
        .transpose()?
        .unwrap_or_default();
    Envelope::new(from, to).map_err(|err| format!("the stored envelope is not one: {err}"))
}

/// The EHLO argument: an address literal for an IP, else a host name (letters, digits, `-`, `.`).
fn client_id(name: &str) -> Option<ClientId> {
    match name.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => Some(ClientId::Ipv4(ip)),
        Ok(IpAddr::V6(ip)) => Some(ClientId::Ipv6(ip)),
        Err(_) => {
            let ok = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
            ok.then(|| ClientId::Domain(name.to_owned()))
        }
    }
}

fn parse_pem(pem: &str) -> Result<Vec<CertificateDer<'static>>, SmtpError> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| SmtpError::Certificate(err.to_string()))?;
    if certs.is_empty() {
        return Err(SmtpError::Certificate("no CERTIFICATE block".to_owned()));
    }
    Ok(certs)
}

/// STARTTLS parameters for lettre: the web PKI roots plus the route's extra ones.
fn lettre_tls(host: &str, extra: &[CertificateDer<'static>]) -> Result<TlsParameters, SmtpError> {
    let mut builder = TlsParameters::builder(host.to_owned());
    for cert in extra {
        let cert = Certificate::from_der(cert.to_vec())
            .map_err(|err| SmtpError::Certificate(err.to_string()))?;
        builder = builder.add_root_certificate(cert);
    }
    builder
        .build_rustls()
        .map_err(|err| SmtpError::Tls(err.to_string()))
}

/// The implicit-TLS connector, with the same trust as [`lettre_tls`].
fn implicit_tls(host: &str, extra: Vec<CertificateDer<'static>>) -> Result<Security, SmtpError> {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    for cert in extra {
        roots
            .add(cert)
            .map_err(|err| SmtpError::Certificate(err.to_string()))?;
    }
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| SmtpError::Tls(err.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let server_name = ServerName::try_from(host.to_owned())
        .map_err(|err| SmtpError::Tls(format!("`{host}` is not a TLS server name: {err}")))?;
    Ok(Security::Implicit {
        connector: TlsConnector::from(Arc::new(config)),
        server_name,
    })
}
