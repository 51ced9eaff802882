//! CloudEvents 1.0: the events herald publishes (its outbox) and the ones it takes from upstream
//! (the inbox), in the JSON event format and in the two modes of the HTTP and NATS bindings:
//! *structured* (the whole event is a JSON document, `application/cloudevents+json`) and
//! *binary* (attributes in `ce-` headers, the body is the data, its `Content-Type` the event's
//! `datacontenttype`).
//!
//! Parsing checks what the spec requires of a consumer: `specversion` is `1.0`; `id`,
//! `source` and `type` are non-empty strings; `time` is RFC 3339. An error names the attribute.

use serde_json::{Map, Value};

use super::FieldError;

/// The media type of a structured-mode event in JSON.
pub const STRUCTURED_JSON: &str = "application/cloudevents+json";
/// The media type of a batch of events, which herald does not take.
pub const BATCH_JSON: &str = "application/cloudevents-batch+json";
/// The one version herald speaks.
pub const SPEC_VERSION: &str = "1.0";
/// The prefix of binary-mode attribute headers (HTTP and NATS bindings alike).
pub const HEADER_PREFIX: &str = "ce-";
/// The `Content-Type` HTTP clients put on a body when their caller set none (Python's urllib,
/// `curl -d`): not what a producer says of its data. An event without `datacontenttype` sent
/// by the CloudEvents SDK in binary mode arrives with it.
const CLIENTS_DEFAULT: &str = "application/x-www-form-urlencoded";

/// The context attributes this module reads by name; everything else is an extension.
const KNOWN: [&str; 10] = [
    "specversion",
    "id",
    "source",
    "type",
    "subject",
    "time",
    "datacontenttype",
    "dataschema",
    "data",
    "data_base64",
];

/// One CloudEvent, its attributes checked.
#[derive(Debug, Clone, PartialEq)]
pub struct CloudEvent {
    pub id: String,
    pub source: String,
    pub event_type: String,
    pub subject: Option<String>,
    /// As the producer wrote it (RFC 3339, checked).
    pub time: Option<String>,
    pub datacontenttype: Option<String>,
    pub dataschema: Option<String>,
    /// Extension attributes, by name.
    pub extensions: Map<String, Value>,
    pub data: Option<Data>,
}

/// An event's data: JSON where its content type is JSON (or not given), else the bytes.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    Json(Value),
    Binary(Vec<u8>),
}

impl CloudEvent {
    /// A structured-mode event: the body is the event as a JSON object.
    pub fn from_structured(body: &[u8]) -> Result<CloudEvent, FieldError> {
        let value = super::json::from_slice(body)
            .map_err(|e| FieldError::new("body", format!("is not a JSON event: {e}")))?;
        let Value::Object(mut attributes) = value else {
            return Err(FieldError::new("body", "must be a JSON object (one event)"));
        };
        let data = match (attributes.remove("data"), attributes.remove("data_base64")) {
            (Some(_), Some(_)) => {
                return Err(FieldError::new(
                    "data_base64",
                    "must not be given together with data",
                ));
            }
            (Some(data), None) => Some(Data::Json(data)),
            (None, Some(Value::String(encoded))) => {
                use base64::Engine;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(encoded.trim())
                    .map_err(|_| FieldError::new("data_base64", "is not base64"))?;
                Some(Data::Binary(bytes))
            }
            (None, Some(_)) => return Err(FieldError::new("data_base64", "must be a string")),
            (None, None) => None,
        };
        let mut event = Self::from_attributes(attributes)?;
        event.data = match data {
            Some(Data::Binary(bytes)) if is_json(event.datacontenttype.as_deref()) => {
                Some(Data::Json(serde_json::from_slice(&bytes).map_err(|e| {
                    FieldError::new("data_base64", format!("is not the JSON its type says: {e}"))
                })?))
            }
            data => data,
        };
        event.checked()
    }

    /// A binary-mode event: attributes from the `ce-` headers (percent-encoded, as the HTTP
    /// binding says), `content_type` as `datacontenttype`, the body as data. A body that is
    /// JSON under a client's default type (no type given by the producer) is taken as JSON,
    /// the data's default.
    pub fn from_binary<'h>(
        headers: impl IntoIterator<Item = (&'h str, &'h str)>,
        content_type: Option<&str>,
        body: &[u8],
    ) -> Result<CloudEvent, FieldError> {
        let content_type = content_type.filter(|t| {
            media_type(t) != CLIENTS_DEFAULT || serde_json::from_slice::<Value>(body).is_err()
        });
        let mut attributes = Map::new();
        for (name, value) in headers {
            let lower = name.to_ascii_lowercase();
            let Some(attribute) = lower.strip_prefix(HEADER_PREFIX) else {
                continue;
            };
            if attribute == "datacontenttype" {
                // The binding carries it in Content-Type, never in a ce- header.
                continue;
            }
            let decoded = percent_decode(value).ok_or_else(|| {
                FieldError::new(
                    format!("{HEADER_PREFIX}{attribute}"),
                    "is not valid percent-encoded UTF-8",
                )
            })?;
            attributes.insert(attribute.to_owned(), Value::String(decoded));
        }
        if let Some(content_type) = content_type {
            attributes.insert("datacontenttype".into(), content_type.into());
        }
        let mut event = Self::from_attributes(attributes)?;
        if !body.is_empty() {
            event.data = Some(if is_json(event.datacontenttype.as_deref()) {
                Data::Json(serde_json::from_slice(body).map_err(|e| {
                    FieldError::new(
                        "data",
                        format!("is not the JSON its content type says: {e}"),
                    )
                })?)
            } else {
                Data::Binary(body.to_vec())
            });
        }
        event.checked()
    }

    /// PostgreSQL cannot store U+0000, and SQLite would: refused in JSON data as in every
    /// body, so that both backends (and both transports) answer the same.
    fn checked(self) -> Result<CloudEvent, FieldError> {
        if let Some(Data::Json(data)) = &self.data {
            super::without_nul(data, "data")?;
        }
        Ok(self)
    }

    fn from_attributes(mut attributes: Map<String, Value>) -> Result<CloudEvent, FieldError> {
        for (name, value) in &attributes {
            if value.as_str().is_some_and(|v| v.contains('\0')) {
                return Err(FieldError::new(
                    name.clone(),
                    "must not contain the NUL character (U+0000)",
                ));
            }
        }
        match attributes.get("specversion") {
            None => return Err(missing("specversion")),
            Some(Value::String(v)) if v == SPEC_VERSION => {}
            Some(other) => {
                return Err(FieldError::new(
                    "specversion",
                    format!(
                        "must be \"{SPEC_VERSION}\" (herald speaks CloudEvents 1.0), not {other}"
                    ),
                ));
            }
        }
        let required = |attributes: &Map<String, Value>, name: &str| match attributes.get(name) {
            None => Err(missing(name)),
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            Some(_) => Err(FieldError::new(name, "must be a non-empty string")),
        };
        let optional = |attributes: &Map<String, Value>, name: &str| match attributes.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
            Some(_) => Err(FieldError::new(name, "must be a non-empty string")),
        };
        let id = required(&attributes, "id")?;
        let source = required(&attributes, "source")?;
        let event_type = required(&attributes, "type")?;
        let time = optional(&attributes, "time")?;
        if let Some(time) = &time {
            super::parse_time("time", time)?;
        }
        let event = CloudEvent {
            id,
            source,
            event_type,
            subject: optional(&attributes, "subject")?,
            time,
            datacontenttype: optional(&attributes, "datacontenttype")?,
            dataschema: optional(&attributes, "dataschema")?,
            extensions: Map::new(),
            data: None,
        };
        attributes.retain(|name, _| !KNOWN.contains(&name.as_str()));
        for (name, value) in &attributes {
            let valid_name = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
            if !valid_name {
                return Err(FieldError::new(
                    name.clone(),
                    "is not a valid attribute name (lower-case letters and digits only)",
                ));
            }
            if !matches!(value, Value::String(_) | Value::Number(_) | Value::Bool(_)) {
                return Err(FieldError::new(
                    name.clone(),
                    "an extension attribute must be a string, a number or a boolean",
                ));
            }
        }
        Ok(CloudEvent {
            extensions: attributes,
            ..event
        })
    }

    /// The context attributes as one JSON object (what a mapping sees as `event`).
    pub fn attributes(&self) -> Map<String, Value> {
        let mut out = Map::new();
        out.insert("specversion".into(), SPEC_VERSION.into());
        out.insert("id".into(), self.id.clone().into());
        out.insert("source".into(), self.source.clone().into());
        out.insert("type".into(), self.event_type.clone().into());
        let optional = [
            ("subject", &self.subject),
            ("time", &self.time),
            ("datacontenttype", &self.datacontenttype),
            ("dataschema", &self.dataschema),
        ];
        for (name, value) in optional {
            if let Some(value) = value {
                out.insert(name.into(), value.clone().into());
            }
        }
        for (name, value) in &self.extensions {
            out.insert(name.clone(), value.clone());
        }
        out
    }

    /// The event in the JSON format (structured mode).
    pub fn to_json(&self) -> Value {
        let mut out = self.attributes();
        match &self.data {
            Some(Data::Json(data)) => {
                out.insert("data".into(), data.clone());
            }
            Some(Data::Binary(bytes)) => {
                use base64::Engine;
                let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
                out.insert("data_base64".into(), encoded.into());
            }
            None => {}
        }
        Value::Object(out)
    }

    /// What a mapping renders from: the event's `data` (a JSON object) at the top, as `data`
    /// is on `POST /v1/notifications`, and the attributes under `event`.
    pub fn template_context(&self) -> Result<Map<String, Value>, FieldError> {
        let mut context = match &self.data {
            None => Map::new(),
            Some(Data::Json(Value::Object(data))) => data.clone(),
            Some(Data::Json(_)) => {
                return Err(FieldError::new(
                    "data",
                    "must be a JSON object for a mapping to render from it",
                ));
            }
            Some(Data::Binary(_)) => {
                return Err(FieldError::new(
                    "data",
                    format!(
                        "must be a JSON object for a mapping to render from it, and came as \
                         `{}`: in binary mode the Content-Type header is the data's type; send \
                         `Content-Type: application/json` (or none) with JSON data",
                        self.datacontenttype.as_deref().unwrap_or_default()
                    ),
                ));
            }
        };
        context.insert("event".into(), Value::Object(self.attributes()));
        Ok(context)
    }
}

fn missing(attribute: &str) -> FieldError {
    FieldError::new(
        attribute,
        "is a required CloudEvents attribute and is missing",
    )
}

/// Whether a `datacontenttype` is JSON: `application/json`, any `+json` type, or none at all
/// (the JSON format's default).
pub fn is_json(content_type: Option<&str>) -> bool {
    let Some(content_type) = content_type else {
        return true;
    };
    let essence = media_type(content_type);
    essence == "application/json" || essence.ends_with("+json") || essence == "text/json"
}

/// The media type of a `Content-Type` value, lower-cased, without parameters.
pub fn media_type(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// Decodes `%XX` escapes; `None` on a broken escape or bytes that are not UTF-8.
fn percent_decode(value: &str) -> Option<String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = value.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn structured(value: Value) -> Result<CloudEvent, FieldError> {
        CloudEvent::from_structured(value.to_string().as_bytes())
    }

    #[test]
    fn a_structured_event_keeps_its_attributes_data_and_extensions() {
        let event = structured(json!({
            "specversion": "1.0", "id": "evt-90", "source": "academy.exports",
            "type": "ExportCompleted", "time": "2026-11-30T10:00:00Z",
            "tenantid": "t1", "data": {"email": "ada@example.com"}
        }))
        .unwrap();
        assert_eq!(event.id, "evt-90");
        assert_eq!(event.extensions["tenantid"], "t1");
        assert_eq!(
            event.data,
            Some(Data::Json(json!({"email": "ada@example.com"})))
        );
        let context = event.template_context().unwrap();
        assert_eq!(context["email"], "ada@example.com");
        assert_eq!(context["event"]["source"], "academy.exports");
        assert_eq!(event.to_json()["type"], "ExportCompleted");
    }

    #[test]
    fn each_bad_attribute_is_named() {
        let base = json!({"specversion": "1.0", "id": "1", "source": "s", "type": "t"});
        let with = |key: &str, value: Value| {
            let mut v = base.clone();
            v[key] = value;
            v
        };
        let without = |key: &str| {
            let mut v = base.clone();
            v.as_object_mut().unwrap().remove(key);
            v
        };
        let cases = [
            (without("specversion"), "specversion"),
            (with("specversion", json!("0.3")), "specversion"),
            (without("id"), "id"),
            (with("id", json!("")), "id"),
            (without("source"), "source"),
            (with("type", json!(7)), "type"),
            (with("time", json!("yesterday")), "time"),
            (with("Bad-Name", json!("x")), "Bad-Name"),
            (with("ext", json!({"a": 1})), "ext"),
        ];
        for (body, field) in cases {
            assert_eq!(structured(body.clone()).unwrap_err().field, field, "{body}");
        }
    }

    #[test]
    fn a_nul_in_an_attribute_or_the_data_is_refused_by_name() {
        let event = json!({"specversion": "1.0", "id": "e1", "source": "s", "type": "T",
                           "data": {"k": "v"}});
        for (attribute, value) in [
            ("id", json!("e\u{0}1")),
            ("subject", json!("s\u{0}")),
            ("tenantid", json!("\u{0}")),
            ("data", json!({"k": "v\u{0}"})),
        ] {
            let mut bad = event.clone();
            bad[attribute] = value;
            let err = structured(bad).unwrap_err();
            assert!(err.field.starts_with(attribute), "{attribute}: {err:?}");
            assert!(err.message.contains("NUL"), "{err:?}");
        }
        let headers = [
            ("ce-specversion", "1.0"),
            ("ce-id", "e%001"),
            ("ce-source", "s"),
            ("ce-type", "T"),
        ];
        let err = CloudEvent::from_binary(headers, None, b"").unwrap_err();
        assert_eq!(err.field, "id");
    }

    #[test]
    fn a_binary_event_reads_ce_headers_and_the_body_as_data() {
        let headers = [
            ("ce-specversion", "1.0"),
            ("ce-id", "evt-1"),
            ("CE-Source", "academy.exports"),
            ("ce-type", "ExportCompleted"),
            ("ce-subject", "caf%C3%A9"),
            ("x-other", "ignored"),
        ];
        let event = CloudEvent::from_binary(
            headers,
            Some("application/json; charset=utf-8"),
            br#"{"email":"a@b.io"}"#,
        )
        .unwrap();
        assert_eq!(event.source, "academy.exports");
        assert_eq!(event.subject.as_deref(), Some("café"));
        assert_eq!(event.data, Some(Data::Json(json!({"email": "a@b.io"}))));
        let err = CloudEvent::from_binary([("ce-id", "1")], None, b"").unwrap_err();
        assert_eq!(err.field, "specversion");
    }

    #[test]
    fn json_under_a_clients_default_content_type_is_json_and_other_data_is_named() {
        let headers = [
            ("ce-specversion", "1.0"),
            ("ce-id", "evt-1"),
            ("ce-source", "s"),
            ("ce-type", "t"),
        ];
        let form = Some("application/x-www-form-urlencoded");
        let event = CloudEvent::from_binary(headers, form, br#"{"email":"a@b.io"}"#).unwrap();
        assert_eq!(event.datacontenttype, None, "the producer gave no type");
        assert_eq!(event.data, Some(Data::Json(json!({"email": "a@b.io"}))));
        assert!(event.template_context().is_ok());

        let text = CloudEvent::from_binary(headers, Some("text/plain"), b"hello").unwrap();
        let err = text.template_context().unwrap_err();
        assert_eq!(err.field, "data");
        assert!(err.message.contains("`text/plain`"), "{err}");
        assert!(err.message.contains("Content-Type"), "{err}");
    }

    #[test]
    fn data_that_is_not_an_object_cannot_be_rendered() {
        let event = structured(json!({"specversion": "1.0", "id": "1", "source": "s",
                                      "type": "t", "data": [1, 2]}))
        .unwrap();
        assert_eq!(event.template_context().unwrap_err().field, "data");
    }
}
