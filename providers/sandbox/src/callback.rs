//! The sandbox's delivery reports, read: Standard Webhooks signatures (`webhook-id`,
//! `webhook-timestamp`, `webhook-signature`) over a [`CallbackBody`] that names the message by
//! herald's provider key.

use herald_provider::callback::{
    CallbackError, CallbackEvent, CallbackRef, CallbackRequest, Callbacks, ReceiptStatus,
    verify_standard_webhook,
};
use herald_provider::signature::SigningSecret;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::wire::CallbackBody;

#[derive(Debug, Clone)]
pub struct SandboxCallbacks {
    pub(crate) secret: SigningSecret,
}

impl Callbacks for SandboxCallbacks {
    fn read(&self, request: &CallbackRequest<'_>) -> Result<Vec<CallbackEvent>, CallbackError> {
        let event_id =
            verify_standard_webhook(request, "webhook", std::slice::from_ref(&self.secret))?;
        let body: CallbackBody = serde_json::from_slice(request.body).map_err(|err| {
            CallbackError::Malformed(format!("not a sandbox delivery report: {err}"))
        })?;
        let (status, suppress) = match body.status.as_str() {
            "sent" => (ReceiptStatus::Sent, false),
            "delivered" => (ReceiptStatus::Delivered, false),
            "bounced" => (ReceiptStatus::Bounced, true),
            "complained" => (ReceiptStatus::Complained, true),
            // A report this adapter does not know moves nothing.
            _ => return Ok(Vec::new()),
        };
        if body.reference.is_empty() {
            return Err(CallbackError::Malformed("`reference` is empty".into()));
        }
        Ok(vec![CallbackEvent {
            event_id,
            reference: CallbackRef::Key(body.reference),
            message: Some(body.message_id).filter(|id| !id.is_empty()),
            status,
            vendor_status: body.status,
            at: OffsetDateTime::parse(&body.at, &Rfc3339).ok(),
            suppress,
        }])
    }
}
