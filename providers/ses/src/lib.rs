//! Herald's adapter for [Amazon SES](https://aws.amazon.com/ses/) v2 (channel `email`).
//!
//! One `POST https://email.<region>.amazonaws.com/v2/email/outbound-emails` (`SendEmail`,
//! <https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_SendEmail.html>) per send,
//! signed with AWS Signature Version 4 by AWS's own `aws-sigv4` crate (service `ses`, the
//! route's region, its access key), with a JSON body of `FromEmailAddress` (the route's
//! sender), `Destination` (`ToAddresses` the one recipient, `CcAddresses`, `BccAddresses`),
//! `ReplyToAddresses`, `Content.Simple` (`Subject`, `Body.Text` and/or `Body.Html`, UTF-8,
//! `Headers`, and `Attachments` when the email has any: `FileName`, base64 `RawContent`,
//! `ContentType` and `ContentTransferEncoding` `BASE64` each), `ConfigurationSetName` and
//! `EmailTags` — the message's tags and `herald_key`, herald's
//! [`ProviderKey`](herald_provider::ProviderKey), which SES copies into every event it
//! publishes about the message. A message's own tag named `herald_key` is refused before
//! any I/O. SES answers `{"MessageId"}`, which becomes the `provider_ref`, and errors with the
//! error's type in the `x-amzn-ErrorType` header (or the body's `__type`), which becomes
//! `Evidence::vendor_code`.
//!
//! Credentials are static: an access key id and secret key (and a session token for
//! temporary ones), resolved at start-up like every secret of herald's. The AWS credential
//! chain (instance profiles, IRSA, SSO) would need the AWS SDK and is not built in.
//!
//! # Capabilities
//! | capability | value | source |
//! |---|---|---|
//! | idempotency window | none: `SendEmail` takes no idempotency or client token, so a resend is a second email | <https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_SendEmail.html> (no such field) |
//! | outcome query | none: SES v2 has no look-up of a sent message by a tag or by anything herald chose (message insights search by recipient and time only, for Virtual Deliverability Manager accounts); an ambiguous send stays `unknown` until an event names its key | same API reference |
//! | payload limit | 40 MB per message, after encoding (read as 40 000 000 bytes) | <https://docs.aws.amazon.com/ses/latest/dg/quotas.html> |
//! | attachments | yes: `Content.Simple.Attachments: [{FileName, RawContent, ContentType, ContentTransferEncoding, …}]`, `FileName` at most 255 characters, `RawContent` base64 over HTTPS; "multiple attachments per email, up to the 40MB total message size limit"; SES refuses attachments with some file extensions (its "Unsupported attachment types") | <https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_Message.html>, <https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_Attachment.html>, <https://docs.aws.amazon.com/ses/latest/dg/attachments.html> |
//! | rate limit | the account's maximum send rate: `TooManyRequestsException` (429) or a `ThrottlingException`/`LimitExceededException` for the rate or the daily quota | <https://docs.aws.amazon.com/ses/latest/dg/manage-sending-quotas-errors.html> |
//! | delivery callbacks | SES event publishing to an SNS topic, the topic's HTTPS subscription pointing at herald, when `sns_topic_arn` is set; SNS signs each message with RSA (SignatureVersion 1: SHA1, 2: SHA256) | <https://docs.aws.amazon.com/ses/latest/dg/event-publishing-add-event-destination-sns.html>, <https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html> |
//!
//! # Classification
//! Errors: <https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_SendEmail.html#API_SendEmail_Errors>
//! and <https://docs.aws.amazon.com/ses/latest/APIReference-V2/CommonErrors.html>.
//!
//! | SES's answer | herald's result |
//! |---|---|
//! | 200 `{"MessageId"}` | `Accepted`, `provider_ref` = the `MessageId` |
//! | 2xx with a body that is unreadable or has no `MessageId` | `Ambiguous`: SES probably sent it |
//! | 400 `MessageRejected`, `BadRequestException`, `MailFromDomainNotVerifiedException`, `AccountSuspendedException`, `SendingPausedException`; 403 (`AccessDeniedException`, a signature or key refused, an expired token); 404 `NotFoundException` (no such configuration set) | `Rejected` permanent |
//! | 429 `TooManyRequestsException`, and a 4xx `ThrottlingException` or `LimitExceededException` (the sending rate or the daily quota) | `Rejected` transient, with `Retry-After` if sent |
//! | 408, 425 | `Rejected` transient (shared table) |
//! | 500 `InternalFailure`, 503 `ServiceUnavailable`, any other 5xx | `Ambiguous`: AWS does not document a 5xx of SES as "not processed", so it may have sent the email |
//! | connection or TLS failure before the request was written | `Rejected` transient (stage `connect`) |
//! | timeout or reset after the request was written | `Ambiguous` (stage `awaiting_response`) |
//!
//! The secret key is never sent (it only signs) and never logged or part of evidence, errors or
//! `Debug` output; the `Authorization` header is marked sensitive; anything SES echoes is
//! scrubbed of the secret key and the session token before it becomes evidence.
//!
//! # Events
//! With `sns_topic_arn` set, the route reads the HTTPS subscription of that topic, to which the
//! configuration set's event destination publishes
//! (<https://docs.aws.amazon.com/ses/latest/dg/event-publishing-retrieving-sns-contents.html>).
//! Each POST is one SNS message (<https://docs.aws.amazon.com/sns/latest/dg/http-notification-json.html>),
//! taken only if:
//!
//! - its `TopicArn` is the route's topic (checked first: nothing is fetched for another topic);
//! - its `Timestamp` (when SNS published it, signed) is at most 65 minutes old and at most 5
//!   ahead: SNS retries an HTTP/S delivery for at most an hour, so an older one is a replay;
//! - its `SigningCertURL` is `https://sns.<region>.amazonaws.com[.cn]/SimpleNotificationService-….pem`
//!   with the topic ARN's own region — narrower than the pattern AWS's validators check, which
//!   also admits hosts of other AWS services — fetched over TLS, without following redirects,
//!   and kept (a handful per route, by URL); a route with `sns_origin` takes them from that one
//!   origin instead (a local SNS, for tests);
//! - its `Signature` verifies under that certificate's RSA key over the fields SNS signs
//!   (`Message`, `MessageId`, `Subject` if any, `Timestamp`, `TopicArn`, `Type` for a
//!   notification; `Message`, `MessageId`, `SubscribeURL`, `Timestamp`, `Token`, `TopicArn`,
//!   `Type` for a subscription's messages), SHA1 for `SignatureVersion` 1, SHA256 for 2.
//!
//! A message that fails a check is refused as unauthenticated (401) and nothing is stored. A
//! certificate URL SNS answers with a 4xx, or with something that is no certificate (more than
//! 64 KiB is not read further), makes the message a forgery (401), and that URL is refused
//! without asking again for ten minutes; a certificate SNS could not hand over now (a network
//! failure, a 5xx) answers 503, so SNS sends the message again, and so does a route past ten
//! certificate fetches in a minute (SNS uses one certificate per region, so more are a
//! forger's, each naming a new URL). A
//! `SubscriptionConfirmation`, once verified, is confirmed by fetching its `SubscribeURL` (on
//! the same host; one elsewhere is malformed, 400, and a confirmation that cannot be fetched
//! answers 503); an `UnsubscribeConfirmation` is verified and left alone. SNS sends a
//! message again until a 2xx, and herald takes each once by its SNS `MessageId`, the event id.
//! Within its hour, a repeat changes nothing.
//!
//! | SES `eventType` | receipt | suppresses the recipient |
//! |---|---|---|
//! | `Send` | `sent` | no |
//! | `Delivery` naming the message's `To` among its `recipients` | `delivered` | no |
//! | `Open`, `Click` (the email arrived) | `delivered` | no |
//! | `Bounce`, `bounceType` `Permanent` | `bounced` | yes |
//! | `Bounce`, `Transient` (SES reports a soft bounce once it stops retrying) | `undeliverable` | no |
//! | `Bounce`, `Undetermined` | `bounced` | no |
//! | `Complaint` | `complained` | yes, unless its `complaintFeedbackType` is `not-spam` |
//! | `Reject` (a virus), `Rendering Failure` | `undeliverable` | no |
//! | `DeliveryDelay`, `Subscription`, any other | left out | |
//!
//! A delivery, bounce or complaint that names only other recipients than the message's `To`
//! (a copy's) is left out: SES reports each recipient's apart. The event names its notification by `mail.tags.herald_key`, or, for an email
//! sent without it, by `mail.messageId`. `vendor_status` is the `eventType` (with
//! `/<bounceType>` for a bounce), and `at` is the event's own time.
//!
//! # Modules
//! - [`adapter`]: [`SesAdapter`] and its [`SesRoute`].
//! - `fake` (feature `fake`): a local stand-in for SES's `SendEmail` that checks each
//!   request's signature, and for SNS's side: signed notifications, the signing certificate
//!   and subscription confirmation.
//!
//! The JSON shapes both sides share live in one private module so that they cannot drift apart.
#![forbid(unsafe_code)]

pub mod adapter;
mod callback;
#[cfg(feature = "fake")]
pub mod fake;
mod settings;
mod wire;

pub use adapter::{MAX_MESSAGE_BYTES, SesAdapter, SesError, SesRoute, default_base_url};
pub use callback::SnsOrigin;
pub use settings::Settings;
