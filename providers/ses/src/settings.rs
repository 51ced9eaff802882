//! An Amazon SES route's settings (`provider = "ses"`).

use std::sync::Arc;

use herald_provider::settings::{
    RouteContext, RouteSettings, SecretSource, SettingsError, endpoint_of,
};
use herald_provider::{Adapter, Channel};
use serde::Deserialize;
use url::Url;

use crate::adapter::{SesAdapter, SesError, SesRoute, default_base_url};
use crate::callback::SnsOrigin;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The account's region, e.g. `eu-west-1`.
    pub region: String,
    /// Default `https://email.<region>.amazonaws.com`.
    pub base_url: Option<String>,
    /// The access key id of an IAM identity allowed `ses:SendEmail`.
    pub access_key_id: String,
    pub secret_access_key: SecretSource,
    /// With temporary credentials, their session token.
    pub session_token: Option<SecretSource>,
    /// The sender, a verified identity, e.g. `Acme <noreply@acme.example>`.
    pub from: String,
    /// The configuration set whose event destination publishes to SNS.
    pub configuration_set: Option<String>,
    /// The SNS topic that configuration set publishes to, subscribed to herald's callback URL
    /// for the route; with it, herald reads SES's events.
    pub sns_topic_arn: Option<String>,
    /// Only for a local stand-in of SNS (LocalStack, tests): the one origin, such as
    /// `http://127.0.0.1:4566`, that signing certificates and subscription URLs may come from
    /// in place of SNS's own `https://sns.<region>.amazonaws.com`.
    pub sns_origin: Option<String>,
}

#[async_trait::async_trait]
impl RouteSettings for Settings {
    fn channels(&self) -> &'static [Channel] {
        &[Channel::Email]
    }

    fn secrets(&self) -> Vec<(String, &SecretSource)> {
        let mut secrets = vec![("secret_access_key".into(), &self.secret_access_key)];
        if let Some(token) = &self.session_token {
            secrets.push(("session_token".into(), token));
        }
        secrets
    }

    fn endpoint(&self) -> Option<String> {
        endpoint_of(self.base_url.as_deref(), &default_base_url(&self.region))
    }

    async fn adapter(&self, route: &RouteContext<'_>) -> Result<Arc<dyn Adapter>, SettingsError> {
        let sns_origin = match &self.sns_origin {
            None => SnsOrigin::Aws,
            Some(origin) => SnsOrigin::Local(
                Url::parse(origin)
                    .ok()
                    .filter(|url| matches!(url.scheme(), "http" | "https"))
                    .ok_or_else(|| SettingsError::new("sns_origin", "is not an http(s) URL"))?,
            ),
        };
        let adapter = SesAdapter::new(SesRoute {
            region: self.region.clone(),
            base_url: self
                .base_url
                .clone()
                .unwrap_or_else(|| default_base_url(&self.region)),
            access_key_id: self.access_key_id.clone(),
            secret_access_key: self.secret_access_key.resolve("secret_access_key")?,
            session_token: self
                .session_token
                .as_ref()
                .map(|token| token.resolve("session_token"))
                .transpose()?,
            from: self.from.clone(),
            configuration_set: self.configuration_set.clone(),
            timeout: route.timeout,
            sns_topic_arn: self.sns_topic_arn.clone(),
            sns_origin,
        })
        .map_err(|e| {
            let key = match e {
                SesError::BaseUrl { .. } => "base_url",
                SesError::Region => "region",
                SesError::Credentials(_) => "access_key_id",
                SesError::SnsTopic(_) => "sns_topic_arn",
                SesError::Client(_) => "",
            };
            SettingsError::new(key, e)
        })?;
        Ok(Arc::new(adapter))
    }
}
