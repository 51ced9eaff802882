//! Categories of message (`transactional`, `digest`, …) and the one-click unsubscribe (RFC 8058)
//! of those a recipient may leave: the signed link an email carries, and reading it back.
//!
//! A link names its tenant, recipient and category in the clear and is signed with HMAC-SHA256
//! under the first configured secret; any configured secret verifies it, so a secret can be
//! rotated by adding the new one first and removing the old one once its mail has aged out. The
//! link never expires: RFC 8058 asks that it work for as long as the mail may be read.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use super::FieldError;

/// The header that carries the link, and the one that says a POST to it is a one-click
/// unsubscribe (RFC 8058): herald writes both, so a request may not.
pub const LIST_UNSUBSCRIBE: &str = "List-Unsubscribe";
pub const LIST_UNSUBSCRIBE_POST: &str = "List-Unsubscribe-Post";

/// The configured categories, and how their unsubscribe links are made.
#[derive(Clone, Default)]
pub struct Categories {
    /// Name → whether a recipient may unsubscribe from it.
    unsubscribable: BTreeMap<String, bool>,
    links: Option<Links>,
}

/// herald's public base URL and the secrets links are signed with (the first) and checked by.
#[derive(Clone)]
struct Links {
    public_url: String,
    secrets: Vec<SecretString>,
}

impl std::fmt::Debug for Categories {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Categories")
            .field("unsubscribable", &self.unsubscribable)
            .finish_non_exhaustive()
    }
}

/// Who left which category, as a verified link says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unsubscribe {
    #[serde(rename = "t")]
    pub tenant: String,
    #[serde(rename = "r")]
    pub recipient: String,
    #[serde(rename = "c")]
    pub category: String,
}

impl Categories {
    /// `secrets` sign links (the first) and check them (each); links need `public_url` and at
    /// least one secret, which the config check asks for where a category is unsubscribable.
    pub fn new(
        unsubscribable: BTreeMap<String, bool>,
        public_url: Option<&str>,
        secrets: Vec<SecretString>,
    ) -> Self {
        let links = public_url.filter(|_| !secrets.is_empty()).map(|url| Links {
            public_url: url.trim_end_matches('/').to_owned(),
            secrets,
        });
        Categories {
            unsubscribable,
            links,
        }
    }

    /// `name` as a configured category, or why not (naming `category`).
    pub fn parse(&self, name: &str) -> Result<String, FieldError> {
        if self.unsubscribable.contains_key(name) {
            return Ok(name.to_owned());
        }
        let known: Vec<&str> = self.unsubscribable.keys().map(String::as_str).collect();
        Err(FieldError::new(
            "category",
            match known.as_slice() {
                [] => format!("unknown category `{name}`: none is configured"),
                known => format!("unknown category `{name}`: one of {}", known.join(", ")),
            },
        ))
    }

    /// `name` as a configured category recipients may leave, or why not (naming `category`):
    /// only those take a suppression of their own, so that a transactional send is never
    /// stopped by one.
    pub fn leavable(&self, name: &str) -> Result<String, FieldError> {
        let name = self.parse(name)?;
        if self.unsubscribable[&name] {
            Ok(name)
        } else {
            Err(FieldError::new(
                "category",
                format!("recipients cannot leave `{name}` (its unsubscribe is false)"),
            ))
        }
    }

    /// The headers an email of `category` to `recipient` carries, where the category is one a
    /// recipient may leave: the signed link, and the one-click marker.
    pub fn headers(
        &self,
        tenant: &str,
        recipient: &str,
        category: &str,
    ) -> Option<[(&'static str, String); 2]> {
        if !self.unsubscribable.get(category).copied().unwrap_or(false) {
            return None;
        }
        let links = self.links.as_ref()?;
        let payload = serde_json::to_vec(&Unsubscribe {
            tenant: tenant.to_owned(),
            recipient: recipient.to_owned(),
            category: category.to_owned(),
        })
        .expect("three strings serialize");
        let tag = sign(&links.secrets[0], &payload);
        let token = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(&payload),
            URL_SAFE_NO_PAD.encode(tag.as_ref())
        );
        Some([
            (
                LIST_UNSUBSCRIBE,
                format!("<{}/v1/unsubscribe/{token}>", links.public_url),
            ),
            (
                LIST_UNSUBSCRIBE_POST,
                "List-Unsubscribe=One-Click".to_owned(),
            ),
        ])
    }

    /// What a link's token says, if one of the secrets signed it and its category is still one
    /// recipients may leave.
    pub fn verify(&self, token: &str) -> Option<Unsubscribe> {
        let links = self.links.as_ref()?;
        let (payload, tag) = token.split_once('.')?;
        let payload = URL_SAFE_NO_PAD.decode(payload).ok()?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        links.secrets.iter().find(|secret| {
            let key =
                ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.expose_secret().as_bytes());
            ring::hmac::verify(&key, &payload, &tag).is_ok()
        })?;
        let link: Unsubscribe = serde_json::from_slice(&payload).ok()?;
        self.leavable(&link.category).ok()?;
        Some(link)
    }
}

fn sign(secret: &SecretString, payload: &[u8]) -> ring::hmac::Tag {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.expose_secret().as_bytes());
    ring::hmac::sign(&key, payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn categories(secrets: &[&str]) -> Categories {
        Categories::new(
            BTreeMap::from([("digest".into(), true), ("transactional".into(), false)]),
            Some("https://herald.example/"),
            secrets
                .iter()
                .map(|s| SecretString::from(s.to_string()))
                .collect(),
        )
    }

    fn token(headers: &[(&str, String); 2]) -> String {
        let link = &headers[0].1;
        let start = link.find("/v1/unsubscribe/").unwrap() + "/v1/unsubscribe/".len();
        link[start..link.len() - 1].to_owned()
    }

    #[test]
    fn a_link_names_who_left_what_and_survives_a_rotation_but_not_a_change() {
        let old = categories(&["old-secret-0123456789abcdef0123456789"]);
        let headers = old.headers("acme", "ada@example.com", "digest").unwrap();
        assert!(
            headers[0]
                .1
                .starts_with("<https://herald.example/v1/unsubscribe/")
        );
        assert_eq!(
            headers[1],
            (LIST_UNSUBSCRIBE_POST, "List-Unsubscribe=One-Click".into())
        );
        let token = token(&headers);
        let ada = Unsubscribe {
            tenant: "acme".into(),
            recipient: "ada@example.com".into(),
            category: "digest".into(),
        };
        assert_eq!(old.verify(&token), Some(ada.clone()));
        // A new secret first: old links still verify, new ones are signed with it.
        let rotated = categories(&[
            "new-secret-0123456789abcdef0123456789",
            "old-secret-0123456789abcdef0123456789",
        ]);
        assert_eq!(rotated.verify(&token), Some(ada));
        assert_ne!(
            rotated
                .headers("acme", "ada@example.com", "digest")
                .unwrap()[0],
            headers[0]
        );
        // Once the old secret is gone, so are its links; an edited payload never verifies.
        let new_only = categories(&["new-secret-0123456789abcdef0123456789"]);
        assert_eq!(new_only.verify(&token), None);
        let (_, tag) = token.split_once('.').unwrap();
        let forged = URL_SAFE_NO_PAD.encode(br#"{"t":"acme","r":"eve@example.com","c":"digest"}"#);
        assert_eq!(old.verify(&format!("{forged}.{tag}")), None);
        assert_eq!(old.verify("not-a-token"), None);
    }

    #[test]
    fn only_an_unsubscribable_category_gets_a_link() {
        let c = categories(&["secret-0123456789abcdef0123456789ab"]);
        assert!(
            c.headers("acme", "ada@example.com", "transactional")
                .is_none()
        );
        assert_eq!(
            c.leavable("transactional").unwrap_err().message,
            "recipients cannot leave `transactional` (its unsubscribe is false)"
        );
        // A link signed while a category could be left stops working once it cannot.
        let headers = c.headers("acme", "ada@example.com", "digest").unwrap();
        let now_transactional = Categories::new(
            BTreeMap::from([("digest".into(), false)]),
            Some("https://herald.example/"),
            vec![SecretString::from("secret-0123456789abcdef0123456789ab")],
        );
        assert_eq!(now_transactional.verify(&token(&headers)), None);
        assert_eq!(c.parse("digest"), Ok("digest".to_owned()));
        assert_eq!(
            c.parse("news").unwrap_err().message,
            "unknown category `news`: one of digest, transactional"
        );
    }
}
