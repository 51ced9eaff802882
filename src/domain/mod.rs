//! herald's vocabulary as types (the words the API and docs use): states, certainty, delivery policy, identifiers and
//! parsed values. No I/O lives here; everything that crosses the API or the store is parsed into
//! these types first, so the rest of herald cannot hold an invalid value.

mod attachment;
mod category;
pub mod certainty;
pub mod cloudevent;
mod contradiction;
mod decision;
mod email;
pub mod evidence;
pub mod json;
mod notification;
mod receipt;
mod routing;
mod scope;
mod states;
mod trace;
pub mod transitions;
mod values;

pub use attachment::{AttachmentRules, File, MAX_ATTACHMENTS, NewAttachment};
pub use category::{Categories, LIST_UNSUBSCRIBE, LIST_UNSUBSCRIBE_POST, Unsubscribe};
pub use cloudevent::CloudEvent;
pub use contradiction::{Reopen, reopen};
pub use decision::{AttemptOutcome, Decision, Next, Settlement};
pub use email::grants_sender;
pub use evidence::{REVIEWED, left_late};
pub use herald_provider::Channel;
pub use notification::{
    Attempt, CHANNEL_SCHEMA, Content, Contradiction, Notification, NotificationRequest, Resolution,
    Sibling, channel_component, check_metadata_key, parse_channel, parse_recipient,
};
pub use receipt::{
    Receipt, ReceiptStatus, Reported, Suppression, SuppressionReason, messages_proven,
    settled_by_callback, suppression_recipient,
};
pub use routing::{Localized, RouteInfo, RoutePause, Routing, Template, Templates, operator_of};
pub use scope::Scope;
pub use states::{AttemptResult, Certainty, Delivery, HoldReason, SettledBy, State};
pub use trace::TraceParent;
pub use values::{
    ChatTarget, EmailAddress, FieldError, IdempotencyKey, NotificationId, PhoneNumber, PushTarget,
    WebhookUrl, in_range, parse_time, text_without_nul, without_nul,
};
