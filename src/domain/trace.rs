//! The W3C Trace Context a notification was enqueued in (`traceparent`): kept with it, so that
//! the attempts made minutes later, and the events published about it, can point back to the
//! trace that asked for it.

use std::fmt;

/// A `traceparent` value (W3C Trace Context, version 00): `00-<trace id>-<parent id>-<flags>`,
/// lowercase hex, neither id all zeros. Parsing is the only way to make one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceParent(String);

impl TraceParent {
    /// The header's value, or `None` where it is not a valid version-00 `traceparent`. A later
    /// version is read by its first four fields, as the recommendation asks of a version-00
    /// reader; `ff` is no version.
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        let mut parts = s.split('-');
        let (version, trace_id, parent_id, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let lower_hex = |part: &str, len: usize| {
            part.len() == len && part.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        };
        let valid = lower_hex(version, 2)
            && version != "ff"
            && (version != "00" || parts.next().is_none())
            && lower_hex(trace_id, 32)
            && trace_id.bytes().any(|b| b != b'0')
            && lower_hex(parent_id, 16)
            && parent_id.bytes().any(|b| b != b'0')
            && lower_hex(flags, 2);
        valid.then(|| TraceParent(format!("00-{trace_id}-{parent_id}-{flags}")))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The 32 hex digits of the trace.
    pub fn trace_id(&self) -> &str {
        &self.0[3..35]
    }

    /// The 16 hex digits of the span that is the parent.
    pub fn parent_id(&self) -> &str {
        &self.0[36..52]
    }

    /// Whether the caller sampled its trace (flag bit 0).
    pub fn sampled(&self) -> bool {
        u8::from_str_radix(&self.0[53..55], 16).is_ok_and(|flags| flags & 1 == 1)
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_version_00_traceparent_is_read_with_its_ids_and_flags() {
        let parent = TraceParent::parse(GOOD).unwrap();
        assert_eq!(parent.as_str(), GOOD);
        assert_eq!(parent.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(parent.parent_id(), "00f067aa0ba902b7");
        assert!(parent.sampled());
        let unsampled = TraceParent::parse(&GOOD.replace("-01", "-00")).unwrap();
        assert!(!unsampled.sampled());
    }

    #[test]
    fn a_later_version_is_read_by_its_first_four_fields() {
        let later = format!("cc{}-what-comes-next", &GOOD[2..]);
        assert_eq!(TraceParent::parse(&later).unwrap().as_str(), GOOD);
    }

    #[test]
    fn anything_else_is_no_traceparent() {
        for bad in [
            "",
            "garbage",
            &GOOD.to_uppercase(),
            &GOOD.replace("4bf92f3577b34da6a3ce929d0e0e4736", &"0".repeat(32)),
            &GOOD.replace("00f067aa0ba902b7", &"0".repeat(16)),
            &GOOD.replacen("00", "ff", 1),
            &format!("{GOOD}-extra"),
            &GOOD[..GOOD.len() - 1],
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad:?}");
        }
    }
}
