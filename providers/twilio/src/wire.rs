//! Twilio's JSON answers, as far as the adapter reads them.
//!
//! Only the fields a decision rests on are kept, and all of them are optional or defaulted:
//! Twilio adds fields over time, and a missing one must lead to a cautious answer in the
//! adapter (an unreadable success, a look-up that proves nothing), never to a parse failure that
//! hides a real acceptance. The fake writes its answers independently of these types, from its
//! own reading of the docs, so that a misread field cannot hide on both sides at once.

use serde::Deserialize;

/// The header that carries a status callback's signature: base64 of the HMAC-SHA1, keyed with
/// the account's Auth Token, of the URL Twilio requested followed by every POST parameter,
/// sorted by name, as name and value.
pub(crate) const SIGNATURE_HEADER: &str = "x-twilio-signature";
/// Present when a Webhooks Rule signed the request with a shared key instead of the Auth Token.
pub(crate) const SIGNATURE_SETTINGS_HEADER: &str = "x-twilio-webhooks-signature-settings";
/// The query parameter the adapter appends to `StatusCallback`: herald's provider key, which
/// Twilio echoes back in the URL of every status callback of the message.
pub(crate) const KEY_PARAM: &str = "herald_key";
/// Twilio's error code for a recipient who replied STOP (or another opt-out keyword).
pub(crate) const OPTED_OUT: &str = "21610";

/// A Message resource: the `201` answer to a create, and each entry of a list page.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct MessageResource {
    #[serde(default)]
    pub sid: String,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub direction: Option<String>,
    #[serde(default)]
    pub to: Option<String>,
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default)]
    pub messaging_service_sid: Option<String>,
    /// `None` or empty where Twilio redacted the text (content retention settings).
    #[serde(default)]
    pub body: Option<String>,
    /// RFC 2822, e.g. `Thu, 30 Jul 2015 20:12:31 +0000`.
    #[serde(default)]
    pub date_created: Option<String>,
}

/// One page of `GET …/Messages.json`.
#[derive(Debug, Deserialize)]
pub(crate) struct MessagePage {
    pub messages: Vec<MessageResource>,
    /// A path relative to the API host, or `null` on the last page.
    #[serde(default)]
    pub next_page_uri: Option<String>,
}

/// Twilio's error body: `{"code", "message", "more_info", "status"}`.
#[derive(Debug, Deserialize)]
pub(crate) struct ErrorBody {
    pub code: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_create_answer_reads_as_a_message() {
        let answer: MessageResource = serde_json::from_str(include_str!(
            "../../../fixtures/twilio/create_response.json"
        ))
        .unwrap();
        assert_eq!(answer.sid, "SMaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
        assert_eq!(answer.status.as_deref(), Some("queued"));
        assert_eq!(
            answer.date_created.as_deref(),
            Some("Thu, 30 Jul 2015 20:12:31 +0000")
        );
    }

    #[test]
    fn the_documented_list_pages_read_with_their_paging_link() {
        let full: MessagePage =
            serde_json::from_str(include_str!("../../../fixtures/twilio/list_response.json"))
                .unwrap();
        assert_eq!(full.messages.len(), 2);
        assert_eq!(full.messages[0].direction.as_deref(), Some("outbound-api"));
        assert_eq!(full.messages[1].direction.as_deref(), Some("inbound"));
        assert!(full.next_page_uri.unwrap().contains("PageToken="));

        let empty: MessagePage = serde_json::from_str(include_str!(
            "../../../fixtures/twilio/list_empty_response.json"
        ))
        .unwrap();
        assert!(empty.messages.is_empty());
        assert_eq!(empty.next_page_uri, None);
    }

    #[test]
    fn the_documented_error_bodies_carry_their_code() {
        for (body, code) in [
            (
                include_str!("../../../fixtures/twilio/error_21211.json"),
                21211,
            ),
            (
                include_str!("../../../fixtures/twilio/error_21610.json"),
                21610,
            ),
            (
                include_str!("../../../fixtures/twilio/error_20003.json"),
                20003,
            ),
            (
                include_str!("../../../fixtures/twilio/error_20429.json"),
                20429,
            ),
        ] {
            let error: ErrorBody = serde_json::from_str(body).unwrap();
            assert_eq!(error.code, Some(code));
        }
    }
}
