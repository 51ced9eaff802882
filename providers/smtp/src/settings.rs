//! An SMTP route's settings (`provider = "smtp"`).

use std::path::PathBuf;
use std::sync::Arc;

use herald_provider::settings::{RouteContext, RouteSettings, SecretSource, SettingsError};
use herald_provider::{Adapter, Channel};
use serde::Deserialize;

use crate::adapter::{SmtpAdapter, SmtpError, SmtpRoute, Tls};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub host: String,
    /// Default: 25, 587 or 465 by `tls`.
    pub port: Option<u16>,
    #[serde(default)]
    pub tls: Tls,
    pub username: Option<String>,
    pub password: Option<SecretSource>,
    /// The envelope and header sender.
    pub from: String,
    /// The EHLO name; default: this host's name.
    pub hello_name: Option<String>,
    /// A PEM file of extra CA certificates to trust (a private relay's CA).
    pub root_certificate: Option<PathBuf>,
}

impl Settings {
    fn port(&self) -> u16 {
        self.port.unwrap_or_else(|| self.tls.default_port())
    }
}

#[async_trait::async_trait]
impl RouteSettings for Settings {
    fn channels(&self) -> &'static [Channel] {
        &[Channel::Email]
    }

    fn secrets(&self) -> Vec<(String, &SecretSource)> {
        let password = self.password.iter();
        password.map(|p| ("password".to_owned(), p)).collect()
    }

    fn endpoint(&self) -> Option<String> {
        Some(format!("{}:{}", self.host, self.port()))
    }

    async fn adapter(&self, route: &RouteContext<'_>) -> Result<Arc<dyn Adapter>, SettingsError> {
        let extra_root_certificate_pem = match &self.root_certificate {
            Some(path) => Some(std::fs::read_to_string(path).map_err(|e| {
                SettingsError::new(
                    "root_certificate",
                    format!("cannot read {}: {e}", path.display()),
                )
            })?),
            None => None,
        };
        let password = match &self.password {
            Some(p) => Some(p.resolve("password")?),
            None => None,
        };
        let adapter = SmtpAdapter::new(SmtpRoute {
            host: self.host.clone(),
            port: self.port(),
            tls: self.tls,
            username: self.username.clone(),
            password,
            from: self.from.clone(),
            timeout: route.timeout,
            hello_name: self.hello_name.clone(),
            extra_root_certificate_pem,
        })
        .map_err(|e| {
            let key = match e {
                SmtpError::EmptyHost => "host",
                SmtpError::ZeroTimeout => "timeout_seconds",
                SmtpError::From(_) => "from",
                SmtpError::HelloName(_) => "hello_name",
                SmtpError::HalfCredentials | SmtpError::CleartextCredentials(_) => "password",
                SmtpError::Certificate(_) => "root_certificate",
                SmtpError::Tls(_) => "tls",
            };
            SettingsError::new(key, e)
        })?;
        Ok(Arc::new(adapter))
    }
}
