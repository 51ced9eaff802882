//! An attempt's evidence as the API shows it, and its schema.
//!
//! herald stores evidence as it wrote it: the vendor's answer (or the error) as a text excerpt
//! in `detail`, cut to 512 bytes, and what later settlements, look-ups and late results added.
//! Most vendors answer JSON, so that text is often JSON: the API answers such a `detail` as the
//! JSON itself, so that a client reads the vendor's answer without parsing a string inside a
//! string. A `detail` that is plain text, or JSON cut short by the excerpt, stays text; the
//! stored form never changes.
//!
//! JSON with escapes stays text too. Credentials were scrubbed from the text in the forms they
//! travelled in, not in their JSON-escaped forms (`\u0061bc`, `a\/b`): decoding escapes could
//! spell out a credential that the scrubbed text only hid. Without a backslash, every string the
//! JSON holds is in the text as it is, so decoding shows nothing the text did not.

use serde_json::Value;
use utoipa::openapi::schema::{
    AdditionalProperties, ObjectBuilder, Schema, SchemaFormat, SchemaType, Type,
};
use utoipa::openapi::{KnownFormat, Ref, RefOr};

use super::Attempt;

/// The component's name in the OpenAPI document.
pub const SCHEMA_NAME: &str = "Evidence";

/// Set on an ambiguous attempt's evidence where its call ended after the moment its send
/// deadline promised every proof of absence (the deadline, the route's timeout and the call's
/// slack): its worker was held up (frozen, say) somewhere between its last look at the clock
/// and the answer, and cannot tell whether its request left before that moment or after it,
/// when another worker may have looked the send up and found nothing.
pub const MAY_HAVE_LEFT_LATE: &str = "may_have_left_late";

/// Set on a look-up's settlement evidence: the attempts whose worker had already said (in its
/// `late_result`) that its request may have left late, and whose requests the look-up waited
/// out before it found nothing. That absence covers those requests too: a send it lists no
/// longer holds its notification open. A worker's word that comes after the look-up is listed
/// nowhere, and still does.
pub const COVERS_LATE: &str = "covers_late";

/// Set on a sent attempt's evidence: when its worker last read the clock before writing the
/// request, then before its send deadline. A request its vendor saw after the deadline can only
/// be the residue no deadline closes — a worker stopped right after this moment — never a wait
/// that forgot to look at the clock.
pub const CHECKED_AT: &str = "checked_at";

/// Whether `evidence` (an attempt's, or the `late_result` kept on it) says its request may have
/// left after its send deadline's promise.
pub fn may_have_left_late(evidence: &Value) -> bool {
    evidence[MAY_HAVE_LEFT_LATE] == true
}

/// `evidence` with every `detail` that holds a JSON object or array without escapes turned into
/// that JSON, at any depth (a settlement quotes the answer that settled it, with its own
/// `detail`).
pub fn for_api(mut evidence: Value) -> Value {
    decode_details(&mut evidence);
    evidence
}

fn decode_details(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                match item {
                    Value::String(text) if key == "detail" && !text.contains('\\') => {
                        if let Ok(json @ (Value::Object(_) | Value::Array(_))) =
                            serde_json::from_str::<Value>(text)
                        {
                            *item = json;
                        }
                    }
                    _ => decode_details(item),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(decode_details),
        _ => {}
    }
}

/// A reference to the component, for fields that hold evidence.
pub fn schema_ref() -> Ref {
    Ref::from_schema_name(SCHEMA_NAME)
}

/// The component: every member herald writes, each optional (an attempt in flight has none
/// yet), and open to members a later version adds.
pub fn schema() -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(
            "What the provider's answer (or its absence) showed, and what settled it later. \
             Every member is optional.",
        ))
        .property(
            "stage",
            text(
                "Where the exchange stood when it ended, e.g. `connect`, `awaiting_response`, \
                 `response`, `query`, `lease_expired`.",
            ),
        )
        .property(
            "status",
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0))
                .description(Some("The provider's HTTP status or SMTP reply code.")),
        )
        .property("vendor_code", text("The provider's own error code."))
        .property(
            "detail",
            ObjectBuilder::new()
                .schema_type(SchemaType::AnyValue)
                .description(Some(
                    "Any JSON value: the provider's answer as JSON when it was a JSON object or \
                 array; otherwise text: an error, an answer that is not JSON, or a JSON answer \
                 that was cut at 512 bytes or holds escaped characters (kept as sent).",
                )),
        )
        .property(
            MAY_HAVE_LEFT_LATE,
            ObjectBuilder::new()
                .schema_type(Type::Boolean)
                .description(Some(
                    "Present (true) where this ambiguous call ended after the moment its send \
                 deadline promised (the deadline, the route's timeout and 1 s): its worker was \
                 held up, and its request may have reached the vendor after another worker \
                 looked it up and found nothing. Held against the record like an acceptance \
                 that may have been.",
                )),
        )
        .property(
            "late_result_reviewed",
            ObjectBuilder::new()
                .schema_type(Type::Boolean)
                .description(Some(
                    "Present (true) once a person resolved the notification after a `late_result` \
                 that said its request may have left late: that possibility was theirs to weigh, \
                 and is not held against their resolution again.",
                )),
        )
        .property(
            CHECKED_AT,
            time(
                "When the worker last read the clock before writing the request (then before \
                 the send deadline); absent where herald refused it without a call.",
            ),
        )
        .property("at", time("When herald wrote this evidence."))
        .property("settlement", settlement())
        .property("look_up", look_up())
        .property("late_result", late_result())
        .additional_properties(Some(AdditionalProperties::FreeForm(true)))
        .into()
}

fn text(description: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(description))
}

fn time(description: &str) -> ObjectBuilder {
    text(description).format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
}

fn free_form(description: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(AdditionalProperties::FreeForm(true)))
        .description(Some(description))
}

/// `settlement`: what settled an ambiguous attempt later.
fn settlement() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(
            "Added when a later step settled this ambiguous attempt.",
        ))
        .property("by", Ref::from_schema_name("SettledBy"))
        .property(
            "outcome",
            text("Whether the provider had accepted the message.")
                .enum_values(Some(["accepted", "not_accepted"])),
        )
        .property(
            "evidence",
            free_form(
                "What settled it: the replayed answer (`attempt`, `answer`), the outcome \
                 query's look-up (`look_alikes`, `query`, …), or a person's `principal` and \
                 `note`.",
            ),
        )
        .property("at", time("When it was settled."))
}

/// `look_up`: what an outcome query found that settles nothing.
fn look_up() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(
            "Added when an outcome query found something that settles nothing on its own \
             (look-alike messages it cannot attribute, a failed query).",
        ))
        .property("findings", free_form("What the look-up found."))
        .property("at", time("When it looked."))
}

/// `late_result`: a result that came after its lease ended.
fn late_result() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(
            "The result of this attempt that arrived after its lease had ended: kept as \
             evidence only, never as the result.",
        ))
        .property("result", Ref::from_schema_name("AttemptResult"))
        .property(
            "provider_ref",
            ObjectBuilder::new().schema_type(SchemaType::from_iter([Type::String, Type::Null])),
        )
        .property("evidence", schema_ref())
        .property("at", time("When it came."))
}

/// A lost call that outlived its send deadline's promise: its request may have left after
/// another worker's look-up found nothing (see [`MAY_HAVE_LEFT_LATE`]),
/// no look-up has waited it out since ([`COVERS_LATE`]), and no person has resolved the
/// notification since.
pub fn left_late(a: &Attempt) -> bool {
    may_have_left_late(&a.evidence["late_result"]["evidence"])
        && a.evidence[REVIEWED] != true
        && !a.evidence["settlement"]["evidence"][COVERS_LATE]
            .as_array()
            .is_some_and(|covered| covered.contains(&a.n.into()))
}

/// Set on an attempt's evidence, beside its left-late `late_result`, once a person resolved
/// its notification. (A key of its own: evidence only ever gains top-level keys, which both
/// databases merge alike.)
pub const REVIEWED: &str = "late_result_reviewed";

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_json_detail_is_answered_as_json_and_text_stays_text() {
        let stored = json!({
            "stage": "response", "status": 200,
            "detail": "{\"id\":\"msg-1\",\"status\":\"accepted\"}",
            "settlement": {"evidence": {"attempt": 1, "answer": {"detail": "[1, 2]"}}},
            "late_result": {"evidence": {"detail": "connection reset"}},
        });
        let shown = for_api(stored);
        assert_eq!(
            shown["detail"],
            json!({"id": "msg-1", "status": "accepted"})
        );
        assert_eq!(
            shown["settlement"]["evidence"]["answer"]["detail"],
            json!([1, 2])
        );
        assert_eq!(
            shown["late_result"]["evidence"]["detail"],
            "connection reset"
        );
    }

    #[test]
    fn a_cut_scalar_or_escaped_json_detail_stays_text() {
        for detail in [
            "{\"id\":\"msg-1\",\"sta…",
            "42",
            "\"quoted\"",
            "true",
            r#"{"echo":"\u0073ecret"}"#,
        ] {
            let shown = for_api(json!({"detail": detail}));
            assert_eq!(shown["detail"], detail);
        }
    }
}
