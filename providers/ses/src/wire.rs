//! The JSON of SES v2's `SendEmail` and of SNS's messages, shared by the adapter and the fake so
//! that the two cannot drift apart. Field names are SES's and SNS's own.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `SendEmail`: <https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_SendEmail.html>.
pub const SEND_PATH: &str = "/v2/email/outbound-emails";

/// The message tag that carries herald's key; SES copies a message's tags into every event it
/// publishes about it (`mail.tags`).
pub const KEY_TAG: &str = "herald_key";

/// Where a REST-JSON AWS service names the error (`MessageRejected`, possibly followed by
/// `:` and a namespace URL).
pub const ERROR_TYPE: &str = "x-amzn-errortype";

/// The error types that mean "later": the account's sending rate or daily quota
/// (<https://docs.aws.amazon.com/ses/latest/dg/manage-sending-quotas-errors.html>).
pub const THROTTLED: [&str; 3] = [
    "TooManyRequestsException",
    "ThrottlingException",
    "LimitExceededException",
];

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct SendEmail<'a> {
    pub from_email_address: &'a str,
    pub destination: Destination<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reply_to_addresses: Vec<&'a str>,
    pub content: Content<'a>,
    pub email_tags: Vec<Tag<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configuration_set_name: Option<&'a str>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Destination<'a> {
    pub to_addresses: Vec<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cc_addresses: Vec<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bcc_addresses: Vec<&'a str>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Content<'a> {
    pub simple: Simple<'a>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Simple<'a> {
    pub subject: Text<'a>,
    pub body: Body<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<Header<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment<'a>>,
}

/// A file attached to a simple message
/// (<https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_Attachment.html>).
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Attachment<'a> {
    /// At most 255 characters; SES refuses some file extensions.
    pub file_name: &'a str,
    /// Base64, as the HTTPS interface takes a blob: herald's placeholder in the stored request,
    /// the content once a send expands it.
    pub raw_content: String,
    pub content_type: &'a str,
    /// [`BASE64`]: SES writes the part in the encoding named here, and its default,
    /// `SEVEN_BIT`, is for ASCII text rather than a binary file.
    pub content_transfer_encoding: &'a str,
}

/// The transfer encoding of every attachment's MIME part.
pub const BASE64: &str = "BASE64";

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Body<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<Text<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub html: Option<Text<'a>>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Text<'a> {
    pub data: &'a str,
    pub charset: &'a str,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Header<'a> {
    pub name: &'a str,
    pub value: &'a str,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Tag<'a> {
    pub name: &'a str,
    pub value: &'a str,
}

/// `SendEmail`'s answer.
#[derive(Debug, Serialize, Deserialize)]
pub struct Sent {
    #[serde(rename = "MessageId")]
    pub message_id: Option<String>,
}

/// A REST-JSON error body: the type in `__type` or `code` where the header lacks it.
#[derive(Debug, Default, Deserialize)]
pub struct Failure {
    #[serde(rename = "__type", alias = "code", alias = "Code")]
    pub kind: Option<String>,
}

/// One SNS message as SNS POSTs it to an HTTPS subscriber
/// (<https://docs.aws.amazon.com/sns/latest/dg/http-notification-json.html>,
/// `…/http-subscription-confirmation-json.html`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Envelope {
    #[serde(rename = "Type")]
    pub kind: String,
    #[serde(rename = "MessageId")]
    pub message_id: String,
    #[serde(rename = "TopicArn")]
    pub topic_arn: String,
    #[serde(rename = "Subject", default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(rename = "Message")]
    pub message: String,
    #[serde(rename = "Timestamp")]
    pub timestamp: String,
    #[serde(rename = "Token", default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(
        rename = "SubscribeURL",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub subscribe_url: Option<String>,
    #[serde(rename = "SignatureVersion")]
    pub signature_version: String,
    #[serde(rename = "Signature")]
    pub signature: String,
    #[serde(rename = "SigningCertURL")]
    pub signing_cert_url: String,
    #[serde(
        rename = "UnsubscribeURL",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub unsubscribe_url: Option<String>,
}

pub const NOTIFICATION: &str = "Notification";
pub const SUBSCRIPTION_CONFIRMATION: &str = "SubscriptionConfirmation";

impl Envelope {
    /// What SNS signed: the named fields, each as `name\nvalue\n`, in this order; a
    /// notification's `Subject` only when it has one
    /// (<https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message-verify-message-signature.html>).
    pub fn signed_text(&self) -> String {
        let mut fields: Vec<(&str, &str)> =
            vec![("Message", &self.message), ("MessageId", &self.message_id)];
        if self.kind == NOTIFICATION {
            if let Some(subject) = &self.subject {
                fields.push(("Subject", subject));
            }
        } else {
            fields.push(("SubscribeURL", self.subscribe_url.as_deref().unwrap_or("")));
        }
        fields.push(("Timestamp", &self.timestamp));
        if self.kind != NOTIFICATION {
            fields.push(("Token", self.token.as_deref().unwrap_or("")));
        }
        fields.push(("TopicArn", &self.topic_arn));
        fields.push(("Type", &self.kind));
        fields
            .into_iter()
            .map(|(name, value)| format!("{name}\n{value}\n"))
            .collect()
    }
}

/// An SES event as a configuration set's SNS destination publishes it: the `Message` of a
/// notification (<https://docs.aws.amazon.com/ses/latest/dg/event-publishing-retrieving-sns-contents.html>).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub event_type: String,
    pub mail: Mail,
    pub delivery: Option<Delivered>,
    pub bounce: Option<Bounce>,
    pub complaint: Option<Complaint>,
    pub open: Option<Stamped>,
    pub click: Option<Stamped>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Mail {
    pub timestamp: Option<String>,
    pub message_id: String,
    pub common_headers: Option<CommonHeaders>,
    #[serde(default)]
    pub tags: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CommonHeaders {
    #[serde(default)]
    pub to: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Stamped {
    pub timestamp: Option<String>,
}

/// A delivery names the recipients it was for: SES may report one message's recipients in
/// several deliveries.
#[derive(Debug, Clone, Deserialize)]
pub struct Delivered {
    pub timestamp: Option<String>,
    #[serde(default)]
    pub recipients: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bounce {
    pub bounce_type: String,
    #[serde(default)]
    pub bounced_recipients: Vec<Recipient>,
    pub timestamp: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Complaint {
    #[serde(default)]
    pub complained_recipients: Vec<Recipient>,
    pub complaint_feedback_type: Option<String>,
    pub timestamp: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recipient {
    pub email_address: String,
}
