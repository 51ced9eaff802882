//! JSON as herald reads what it is handed: every object names each key once. RFC 8259 leaves a
//! repeated name's meaning to the reader, and readers disagree (serde_json keeps the last, many
//! keep the first): a body whose `to` is read one way by the service that signed or checked it
//! and another way by herald is refused instead, naming the key.

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// `bytes` as one JSON value; an error where any object repeats a key.
pub fn from_slice(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    serde_json::from_slice::<Unique>(bytes).map(|unique| unique.0)
}

/// A JSON value whose objects name each key once.
struct Unique(Value);

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueVisitor).map(Unique)
    }
}

struct UniqueVisitor;

impl<'de> Visitor<'de> for UniqueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("a number JSON cannot hold"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(Unique(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "the key `{key}` appears twice in one object"
                )));
            }
            let value = map.next_value_seed(UniqueSeed)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

struct UniqueSeed;

impl<'de> DeserializeSeed<'de> for UniqueSeed {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(UniqueVisitor)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::from_slice;

    #[test]
    fn reads_what_serde_json_reads_and_refuses_a_repeated_key_at_any_depth() {
        let body = br#"{"to": "ada@example.com", "n": [1, -2, 3.5, true, null, {"a": {}}], "s": "\u00e9"}"#;
        assert_eq!(
            from_slice(body).unwrap(),
            serde_json::from_slice::<serde_json::Value>(body).unwrap()
        );
        assert_eq!(
            from_slice(b"18446744073709551615").unwrap(),
            json!(u64::MAX)
        );
        for repeated in [
            &br#"{"to": "ada@example.com", "to": "eve@example.com"}"#[..],
            br#"{"data": {"items": [{"id": 1, "id": 2}]}}"#,
        ] {
            let err = from_slice(repeated).unwrap_err().to_string();
            assert!(err.contains("appears twice"), "{err}");
            assert!(err.contains("line 1 column"), "where: {err}");
        }
        // The same key in two objects is two keys.
        assert!(from_slice(br#"[{"id": 1}, {"id": 1}]"#).is_ok());
    }
}
