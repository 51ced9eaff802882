//! Twilio's status callbacks: the `StatusCallback` URL the adapter sends, stamped with herald's
//! provider key, and the reader of what Twilio posts to it. The crate docs state the mapping.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use herald_provider::ProviderKey;
use herald_provider::callback::{
    CallbackError, CallbackEvent, CallbackRef, CallbackRequest, Callbacks, ReceiptStatus,
};
use hmac::{Hmac, KeyInit, Mac};
use secrecy::{ExposeSecret, SecretString};
use sha1::Sha1;
use url::Url;

use crate::wire::{KEY_PARAM, OPTED_OUT, SIGNATURE_HEADER, SIGNATURE_SETTINGS_HEADER};

/// The route's `status_callback`: where Twilio posts a message's status changes, herald's own
/// public URL for this route.
#[derive(Debug, Clone)]
pub(crate) struct StatusCallback {
    /// As configured, sent with `herald_key` appended to its query.
    configured: String,
    /// The configured URL without its query: what Twilio's signature starts with, before the
    /// query herald receives (which is the configured one plus `herald_key`).
    signed_base: String,
    /// `signed_base` with its port written out or left out: Twilio's own validators accept both
    /// forms, because Twilio does not always sign the URL as it was given.
    other_base: String,
}

impl StatusCallback {
    /// Checks the configured URL. Twilio takes only an absolute `http(s)` URL with a host, and
    /// the query must not already name `herald_key`, which the adapter appends.
    pub(crate) fn parse(configured: &str) -> Result<StatusCallback, String> {
        let url = Url::parse(configured).map_err(|err| err.to_string())?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "the scheme `{}` is not http or https",
                url.scheme()
            ));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err("it names no host".to_owned());
        }
        // A fragment is not sent, so Twilio would request another URL than the one signed here.
        if url.fragment().is_some() {
            return Err("it has a fragment (`#…`)".to_owned());
        }
        if url.query_pairs().any(|(name, _)| name == KEY_PARAM) {
            return Err(format!(
                "its query already has `{KEY_PARAM}`, which herald appends"
            ));
        }
        // The string as configured, not the parsed URL: Twilio requests (and signs) exactly what
        // it was sent, and `Url` normalises (a trailing `/`, a default port, letter case).
        let signed_base = configured
            .split_once('?')
            .map_or(configured, |(base, _)| base)
            .to_owned();
        let other_base = toggle_port(&signed_base, url.scheme())
            .ok_or_else(|| "it has no `scheme://host` part".to_owned())?;
        Ok(StatusCallback {
            configured: configured.to_owned(),
            signed_base,
            other_base,
        })
    }

    /// The `StatusCallback` for a send under `key`: the configured URL with `herald_key=<key>`
    /// in its query, so that every status callback of the message names its key.
    pub(crate) fn for_key(&self, key: &ProviderKey) -> String {
        let separator = match self.configured.find('?') {
            None => "?",
            Some(_) if self.configured.ends_with(['?', '&']) => "",
            Some(_) => "&",
        };
        let value: String = url::form_urlencoded::byte_serialize(key.as_str().as_bytes()).collect();
        format!("{}{separator}{KEY_PARAM}={value}", self.configured)
    }
}

/// `base` (`scheme://authority/path`) with its port removed if it has one, or the scheme's
/// default port added if it has none, as Twilio's helper libraries try both.
fn toggle_port(base: &str, scheme: &str) -> Option<String> {
    let (prefix, rest) = base.split_once("://")?;
    let end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    // The port follows the last `:` unless that `:` is inside an IPv6 literal (`[…]`).
    let host_start = authority.rfind('@').map_or(0, |at| at + 1);
    let port_colon = authority[host_start..]
        .rfind(':')
        .map(|i| host_start + i)
        .filter(|&i| !authority[i..].contains(']'));
    let authority = match port_colon {
        Some(colon) => authority[..colon].to_owned(),
        None => format!("{authority}:{}", if scheme == "https" { 443 } else { 80 }),
    };
    Some(format!("{prefix}://{authority}{path}"))
}

/// Reads Twilio's status callbacks for one route.
#[derive(Debug, Clone)]
pub(crate) struct TwilioCallbacks {
    pub(crate) url: StatusCallback,
    /// The account's Auth Token: Twilio signs every callback with it, also for an account that
    /// sends with an API key.
    auth_token: SecretString,
}

impl TwilioCallbacks {
    pub(crate) fn new(url: StatusCallback, auth_token: SecretString) -> Self {
        TwilioCallbacks { url, auth_token }
    }

    /// Checks `X-Twilio-Signature` and returns the POST parameters it covers.
    fn authenticate(
        &self,
        request: &CallbackRequest<'_>,
    ) -> Result<Vec<(String, String)>, CallbackError> {
        let unauthenticated = |why: &str| Err(CallbackError::Unauthenticated(why.to_owned()));
        if request.headers.contains_key(SIGNATURE_SETTINGS_HEADER) {
            // A Webhooks Rule's shared key signed it; herald holds only the Auth Token.
            return unauthenticated(
                "signed with a Webhooks Rule's shared key (`X-Twilio-Webhooks-Signature-Settings`); \
                 herald checks Twilio's Auth Token signature only",
            );
        }
        let Some(signature) = request.headers.get(SIGNATURE_HEADER) else {
            return unauthenticated("header `X-Twilio-Signature` is missing");
        };
        let Ok(signature) = STANDARD.decode(signature.as_bytes().trim_ascii()) else {
            return unauthenticated("`X-Twilio-Signature` is not base64");
        };
        // Sorted by name (then value, and each pair once), as Twilio's helper libraries sign.
        let mut params: Vec<(String, String)> = url::form_urlencoded::parse(request.body)
            .into_owned()
            .collect();
        params.sort();
        params.dedup();
        let query = if request.query.is_empty() {
            String::new()
        } else {
            format!("?{}", request.query)
        };
        let verifies = |base: &str| {
            let mut mac = Hmac::<Sha1>::new_from_slice(self.auth_token.expose_secret().as_bytes())
                .expect("HMAC-SHA1 accepts keys of any length");
            mac.update(base.as_bytes());
            mac.update(query.as_bytes());
            for (name, value) in &params {
                mac.update(name.as_bytes());
                mac.update(value.as_bytes());
            }
            // Constant time, so that a forger learns nothing from how long a refusal took.
            mac.verify_slice(&signature).is_ok()
        };
        if !(verifies(&self.url.signed_base) || verifies(&self.url.other_base)) {
            return unauthenticated(
                "`X-Twilio-Signature` does not match this route's Auth Token and status_callback",
            );
        }
        Ok(params)
    }
}

impl Callbacks for TwilioCallbacks {
    fn read(&self, request: &CallbackRequest<'_>) -> Result<Vec<CallbackEvent>, CallbackError> {
        let params = self.authenticate(request)?;
        let param = |name: &str| {
            params
                .iter()
                .find(|(n, v)| n == name && !v.is_empty())
                .map(|(_, v)| v.as_str())
        };
        let malformed = |name: &str| {
            CallbackError::Malformed(format!("a Twilio status callback without `{name}`"))
        };
        let sid = param("MessageSid").ok_or_else(|| malformed("MessageSid"))?;
        let message_status = param("MessageStatus").ok_or_else(|| malformed("MessageStatus"))?;
        let status = match message_status {
            // Handed to the carrier.
            "sent" => ReceiptStatus::Sent,
            // The carrier's delivery receipt; `read` is a read receipt (WhatsApp, RCS), later still.
            "delivered" | "read" => ReceiptStatus::Delivered,
            // Twilio or the carrier gave up on it.
            "undelivered" | "failed" => ReceiptStatus::Undeliverable,
            // `queued`, `accepted`, `scheduled`, `sending`, `canceled`, `partially_delivered`,
            // inbound statuses: nothing a receipt records.
            _ => return Ok(Vec::new()),
        };
        let error_code = param("ErrorCode");
        let key = url::form_urlencoded::parse(request.query.as_bytes())
            .find(|(name, value)| name == KEY_PARAM && !value.is_empty())
            .map(|(_, value)| value.into_owned());
        Ok(vec![CallbackEvent {
            // Twilio reports each status at most once per message, so the pair names the event.
            event_id: format!("{sid}:{message_status}"),
            reference: match key {
                Some(key) => CallbackRef::Key(key),
                // Sent before herald stamped its key (or by another sender): the message's SID.
                None => CallbackRef::ProviderRef(sid.to_owned()),
            },
            message: Some(sid.to_owned()),
            status,
            vendor_status: match error_code {
                Some(code) => format!("{message_status}/{code}"),
                None => message_status.to_owned(),
            },
            // Status callbacks carry no time of the event.
            at: None,
            // 21610: the recipient replied STOP, and Twilio will not send to them again.
            suppress: error_code == Some(OPTED_OUT),
        }])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_appended_to_the_query_whatever_the_configured_url_has() {
        let key = ProviderKey::new("01970000-0000-7000-8000-000000000001-f1");
        let url = |configured: &str| StatusCallback::parse(configured).unwrap().for_key(&key);
        assert_eq!(
            url("https://herald.example.com/v1/callbacks/twilio-main"),
            "https://herald.example.com/v1/callbacks/twilio-main\
             ?herald_key=01970000-0000-7000-8000-000000000001-f1"
        );
        assert_eq!(
            url("https://herald.example.com/cb?route=a"),
            "https://herald.example.com/cb?route=a&herald_key=01970000-0000-7000-8000-000000000001-f1"
        );
        assert_eq!(
            url("https://herald.example.com/cb?"),
            "https://herald.example.com/cb?herald_key=01970000-0000-7000-8000-000000000001-f1"
        );
        assert_eq!(
            StatusCallback::parse("https://h.example/cb")
                .unwrap()
                .for_key(&ProviderKey::new("a b&c")),
            "https://h.example/cb?herald_key=a+b%26c"
        );
    }

    #[test]
    fn unusable_status_callbacks_are_refused() {
        for bad in [
            "not a url",
            "ftp://herald.example.com/cb",
            "https://herald.example.com/cb#part",
            "https://herald.example.com/cb?herald_key=x",
        ] {
            assert!(StatusCallback::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_signed_base_is_tried_with_and_without_its_port() {
        let parsed = StatusCallback::parse("https://herald.example.com/cb?x=1").unwrap();
        assert_eq!(parsed.signed_base, "https://herald.example.com/cb");
        assert_eq!(parsed.other_base, "https://herald.example.com:443/cb");
        let parsed = StatusCallback::parse("http://user@herald.example.com:8080").unwrap();
        assert_eq!(parsed.other_base, "http://user@herald.example.com");
        let parsed = StatusCallback::parse("http://[::1]/cb").unwrap();
        assert_eq!(parsed.other_base, "http://[::1]:80/cb");
    }
}
