//! Mailjet's JSON, as far as the adapter writes and reads it.
//!
//! Requests borrow from herald's message. Answers keep only the fields a decision rests on, all
//! optional or defaulted: a missing field must lead to a cautious answer in the adapter, never
//! to a parse failure that hides a real acceptance. The fake writes its answers independently
//! of these types, from its own reading of the docs.

use std::collections::BTreeMap;

use herald_provider::split_mailbox;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `POST /v3.1/send`: always one message, so that its answer is about this notification only.
#[derive(Debug, Serialize)]
pub(crate) struct SendBody<'a> {
    #[serde(rename = "Messages")]
    pub messages: [OutMessage<'a>; 1],
}

#[derive(Debug, Serialize)]
pub(crate) struct OutMessage<'a> {
    #[serde(rename = "From")]
    pub from: Address<'a>,
    #[serde(rename = "To")]
    pub to: [Address<'a>; 1],
    #[serde(rename = "Cc", skip_serializing_if = "Vec::is_empty")]
    pub cc: Vec<Address<'a>>,
    #[serde(rename = "Bcc", skip_serializing_if = "Vec::is_empty")]
    pub bcc: Vec<Address<'a>>,
    #[serde(rename = "ReplyTo", skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<Address<'a>>,
    #[serde(rename = "Subject", skip_serializing_if = "Option::is_none")]
    pub subject: Option<&'a str>,
    #[serde(rename = "TextPart", skip_serializing_if = "Option::is_none")]
    pub text_part: Option<&'a str>,
    #[serde(rename = "HTMLPart", skip_serializing_if = "Option::is_none")]
    pub html_part: Option<&'a str>,
    #[serde(rename = "Attachments", skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment<'a>>,
    /// Herald's provider key: stable per notification, so every attempt carries the same one.
    #[serde(rename = "CustomID")]
    pub custom_id: &'a str,
    /// Custom headers, name → value.
    #[serde(rename = "Headers", skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: &'a BTreeMap<String, String>,
}

/// A file attached to the message (not inline: `InlinedAttachments` would be).
#[derive(Debug, Serialize)]
pub(crate) struct Attachment<'a> {
    #[serde(rename = "ContentType")]
    pub content_type: &'a str,
    #[serde(rename = "Filename")]
    pub filename: &'a str,
    /// herald's placeholder in the stored request, the content once a send expands it.
    #[serde(rename = "Base64Content")]
    pub base64_content: String,
}

#[derive(Debug, Serialize)]
pub(crate) struct Address<'a> {
    #[serde(rename = "Email")]
    pub email: &'a str,
    #[serde(rename = "Name", skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a str>,
}

impl<'a> Address<'a> {
    /// An address herald wrote as `address` or `Name <address>`.
    pub fn of_mailbox(mailbox: &'a str) -> Self {
        let (name, email) = split_mailbox(mailbox);
        Address { email, name }
    }

    pub fn list(mailboxes: &'a [String]) -> Vec<Self> {
        mailboxes.iter().map(|m| Address::of_mailbox(m)).collect()
    }
}

/// The answer to a send: a per-message result, or (at the top level) a global error.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct SendAnswer {
    #[serde(rename = "Messages", default)]
    pub messages: Vec<MessageResult>,
    /// Set on a global error (malformed JSON, authentication, …).
    #[serde(rename = "ErrorCode", default)]
    pub error_code: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct MessageResult {
    /// `success` or `error`.
    #[serde(rename = "Status", default)]
    pub status: String,
    #[serde(rename = "To", default)]
    pub to: Vec<Recipient>,
    #[serde(rename = "Errors", default)]
    pub errors: Vec<MessageError>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Recipient {
    /// A number in the docs (up to 17 digits); kept as JSON to print it exactly.
    #[serde(rename = "MessageID", default)]
    pub message_id: Option<Value>,
    #[serde(rename = "MessageUUID", default)]
    pub message_uuid: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct MessageError {
    #[serde(rename = "ErrorCode", default)]
    pub error_code: Option<String>,
    #[serde(rename = "StatusCode", default)]
    pub status_code: Option<u16>,
}

/// `GET /v3/REST/message?CustomID=…`: `{"Count", "Data", "Total"}`.
#[derive(Debug, Deserialize)]
pub(crate) struct MessageList {
    #[serde(rename = "Data")]
    pub data: Vec<ListedMessage>,
    /// All matches, of which `Data` holds one page.
    #[serde(rename = "Total", default)]
    pub total: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ListedMessage {
    #[serde(rename = "ID", default)]
    pub id: Option<Value>,
    /// Present when asked for with `ShowCustomID=true`.
    #[serde(rename = "CustomID", default)]
    pub custom_id: Option<String>,
    #[serde(rename = "Status", default)]
    pub status: Option<String>,
}

/// Mailjet's numeric IDs as text, exactly as sent (`MessageID`, `ID`).
pub(crate) fn id_text(value: &Value) -> Option<String> {
    match value {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_success_reads_with_its_message_id() {
        let answer: SendAnswer =
            serde_json::from_str(include_str!("../../../fixtures/mailjet/send_response.json"))
                .unwrap();
        assert_eq!(answer.messages[0].status, "success");
        let id = answer.messages[0].to[0].message_id.as_ref().unwrap();
        assert_eq!(id_text(id).as_deref(), Some("456"));
    }

    #[test]
    fn large_message_ids_keep_every_digit() {
        let answer: SendAnswer = serde_json::from_str(include_str!(
            "../../../fixtures/mailjet/send_response_partial_error.json"
        ))
        .unwrap();
        assert_eq!(answer.messages[0].status, "error");
        assert_eq!(
            answer.messages[0].errors[0].error_code.as_deref(),
            Some("send-0003")
        );
        assert_eq!(answer.messages[0].errors[0].status_code, Some(400));
        let id = answer.messages[1].to[0].message_id.as_ref().unwrap();
        assert_eq!(id_text(id).as_deref(), Some("70650219165027410"));
    }

    #[test]
    fn the_documented_errors_read_with_their_codes() {
        let global: SendAnswer = serde_json::from_str(include_str!(
            "../../../fixtures/mailjet/error_global_400.json"
        ))
        .unwrap();
        assert_eq!(global.error_code.as_deref(), Some("mj-0002"));
        let auth: SendAnswer =
            serde_json::from_str(include_str!("../../../fixtures/mailjet/error_401.json")).unwrap();
        assert_eq!(auth.error_code.as_deref(), Some("mj-0015"));
        let validation: SendAnswer = serde_json::from_str(include_str!(
            "../../../fixtures/mailjet/error_validation_400.json"
        ))
        .unwrap();
        let codes: Vec<_> = validation.messages[0]
            .errors
            .iter()
            .map(|e| e.error_code.as_deref().unwrap())
            .collect();
        assert_eq!(codes, ["mj-0004", "mj-0005"]);
    }

    #[test]
    fn the_message_list_reads_with_id_and_custom_id() {
        let list: MessageList = serde_json::from_str(include_str!(
            "../../../fixtures/mailjet/message_list_response.json"
        ))
        .unwrap();
        assert_eq!(list.total, Some(1));
        assert_eq!(
            id_text(list.data[0].id.as_ref().unwrap()).as_deref(),
            Some("70650219165027410")
        );
        assert_eq!(
            list.data[0].custom_id.as_deref(),
            Some("PassengerEticket1234")
        );
        let empty: MessageList = serde_json::from_str(include_str!(
            "../../../fixtures/mailjet/message_list_empty_response.json"
        ))
        .unwrap();
        assert!(empty.data.is_empty());
    }

    #[test]
    fn the_request_uses_the_documented_property_names() {
        let body = SendBody {
            messages: [OutMessage {
                from: Address {
                    email: "pilot@mailjet.com",
                    name: Some("Mailjet Pilot"),
                },
                to: [Address {
                    email: "passenger1@mailjet.com",
                    name: None,
                }],
                subject: Some("Your email flight plan!"),
                text_part: Some("text"),
                html_part: Some("<h3>html</h3>"),
                attachments: Vec::new(),
                custom_id: "PassengerEticket1234",
                cc: Vec::new(),
                bcc: Vec::new(),
                reply_to: None,
                headers: &BTreeMap::new(),
            }],
        };
        let ours = serde_json::to_value(&body).unwrap();
        let documented: Value =
            serde_json::from_str(include_str!("../../../fixtures/mailjet/send_request.json"))
                .unwrap();
        let keys = |v: &Value| {
            v["Messages"][0]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(keys(&ours), keys(&documented));
        assert_eq!(
            ours["Messages"][0]["From"],
            documented["Messages"][0]["From"]
        );
    }
}
