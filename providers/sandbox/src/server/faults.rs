//! Fault rules: which misbehaviour the sandbox injects into `POST /messages` and into its
//! look-up (`GET /messages`), and when.
//!
//! Each send fault sits on one side of the moment the vendor processes a message, because that
//! is what decides whether the client may conclude anything: a fault *before* processing leaves
//! nothing delivered and says so; a fault *after* processing leaves a real delivery whose answer
//! is lost, late or wrong. The ledger counts the delivery either way. A look-up fault makes the
//! look-up prove nothing; it never lies about what was delivered.

use std::fmt;
use std::str::FromStr;

use rand::Rng;
use serde::{Deserialize, Serialize};

/// One injectable misbehaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// Process (deliver, store for replay), then close the connection without a byte of answer.
    AcceptThenDrop,
    /// Process, then hold the answer for the configured `delay` (longer than a client waits).
    Delay,
    /// Process, then answer 500 instead of 202.
    ErrorAfterProcessing,
    /// Answer 503 `{"code":"unavailable"}` without processing.
    UnavailableBeforeProcessing,
    /// Answer 429 with `Retry-After: 1` without processing.
    RateLimited,
    /// Answer a look-up with 500 instead of the list.
    LookupError,
    /// Hold a look-up's answer for the configured `delay`.
    LookupDelay,
}

impl Fault {
    pub const ALL: [Fault; 7] = [
        Fault::AcceptThenDrop,
        Fault::Delay,
        Fault::ErrorAfterProcessing,
        Fault::UnavailableBeforeProcessing,
        Fault::RateLimited,
        Fault::LookupError,
        Fault::LookupDelay,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Fault::AcceptThenDrop => "accept_then_drop",
            Fault::Delay => "delay",
            Fault::ErrorAfterProcessing => "error_after_processing",
            Fault::UnavailableBeforeProcessing => "unavailable_before_processing",
            Fault::RateLimited => "rate_limited",
            Fault::LookupError => "lookup_error",
            Fault::LookupDelay => "lookup_delay",
        }
    }

    /// Whether the fault applies to look-ups rather than to sends.
    pub fn is_lookup(self) -> bool {
        matches!(self, Fault::LookupError | Fault::LookupDelay)
    }

    /// Whether the fault answers instead of processing, so that nothing is delivered.
    pub fn is_before_processing(self) -> bool {
        matches!(
            self,
            Fault::UnavailableBeforeProcessing | Fault::RateLimited
        )
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Fault {
    type Err = ParseFaultError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Fault::ALL
            .into_iter()
            .find(|fault| fault.as_str() == s)
            .ok_or_else(|| ParseFaultError::UnknownFault(s.to_owned()))
    }
}

/// When a rule fires. Constructing a variant directly is allowed; an out-of-range value then
/// simply never (or always) fires, while the parsers refuse it with a clear error.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", try_from = "TriggerRepr")]
pub enum Trigger {
    /// Fires on each request independently with this probability, from 0 to 1.
    Probability(f64),
    /// Fires on exactly the Nth request of its kind (sends for a send fault, look-ups for a
    /// look-up fault) since start or the last ledger reset (1-based).
    Nth(u64),
}

impl Trigger {
    /// Checks the value range; the serde and CLI parsers both go through here.
    pub fn validated(self) -> Result<Trigger, TriggerError> {
        match self {
            Trigger::Probability(p) if !(0.0..=1.0).contains(&p) => {
                Err(TriggerError::Probability(p.to_string()))
            }
            Trigger::Nth(0) => Err(TriggerError::Nth("0".to_owned())),
            valid => Ok(valid),
        }
    }

    /// `request` is the 1-based number of this request among those of its kind.
    fn fires(self, request: u64, rng: &mut impl Rng) -> bool {
        match self {
            // A comparison rather than `random_bool`, which panics outside 0..=1.
            Trigger::Probability(p) => rng.random::<f64>() < p,
            Trigger::Nth(n) => request == n,
        }
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Trigger::Probability(p) => write!(f, "{p}"),
            Trigger::Nth(n) => write!(f, "nth={n}"),
        }
    }
}

/// Serde's view of a [`Trigger`] before its range is checked.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum TriggerRepr {
    Probability(f64),
    Nth(u64),
}

impl TryFrom<TriggerRepr> for Trigger {
    type Error = TriggerError;

    fn try_from(repr: TriggerRepr) -> Result<Self, Self::Error> {
        match repr {
            TriggerRepr::Probability(p) => Trigger::Probability(p),
            TriggerRepr::Nth(n) => Trigger::Nth(n),
        }
        .validated()
    }
}

/// A fault and when it fires. In JSON: `{"fault":"delay","when":{"nth":7}}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    pub fault: Fault,
    pub when: Trigger,
}

impl fmt::Display for FaultRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.fault, self.when)
    }
}

/// The first rule of its kind (look-up or send, by `lookup`) that fires for the `request`th
/// request of that kind, if any. Rules are tried in order and each probability is drawn
/// independently, so earlier rules take precedence.
pub(crate) fn draw(
    rules: &[FaultRule],
    lookup: bool,
    request: u64,
    rng: &mut impl Rng,
) -> Option<Fault> {
    rules
        .iter()
        .filter(|rule| rule.fault.is_lookup() == lookup)
        .find(|rule| rule.when.fires(request, rng))
        .map(|rule| rule.fault)
}

/// Parses the CLI syntax: comma-separated `<fault>:<probability>` or `<fault>:nth=<n>`, e.g.
/// `accept_then_drop:0.05,delay:nth=7,rate_limited:0.1`. An empty string means no faults.
pub fn parse_faults(spec: &str) -> Result<Vec<FaultRule>, ParseFaultError> {
    spec.split(',')
        .map(str::trim)
        .filter(|rule| !rule.is_empty())
        .map(parse_rule)
        .collect()
}

fn parse_rule(rule: &str) -> Result<FaultRule, ParseFaultError> {
    let (name, when) = rule
        .split_once(':')
        .ok_or_else(|| ParseFaultError::MissingTrigger(rule.to_owned()))?;
    let fault = name.trim().parse::<Fault>()?;
    let when = when.trim();
    let trigger = match when.strip_prefix("nth=") {
        Some(n) => n
            .trim()
            .parse::<u64>()
            .map(Trigger::Nth)
            .map_err(|_| TriggerError::Nth(n.to_owned())),
        None => when
            .parse::<f64>()
            .map(Trigger::Probability)
            .map_err(|_| TriggerError::Probability(when.to_owned())),
    }
    .and_then(Trigger::validated)
    .map_err(|reason| ParseFaultError::BadTrigger {
        rule: rule.to_owned(),
        reason,
    })?;
    Ok(FaultRule {
        fault,
        when: trigger,
    })
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseFaultError {
    #[error("fault rule `{0}` has no trigger: write `<fault>:<probability>` or `<fault>:nth=<n>`")]
    MissingTrigger(String),
    #[error(
        "unknown fault `{0}`: expected accept_then_drop, delay, error_after_processing, \
         unavailable_before_processing, rate_limited, lookup_error or lookup_delay"
    )]
    UnknownFault(String),
    #[error("fault rule `{rule}`: {reason}")]
    BadTrigger { rule: String, reason: TriggerError },
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TriggerError {
    #[error("a probability is a number from 0 to 1, not `{0}`")]
    Probability(String),
    #[error("nth counts requests from 1, so it takes a whole number of at least 1, not `{0}`")]
    Nth(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cli_syntax_parses_probabilities_and_nth_triggers_in_order() {
        let rules = parse_faults("accept_then_drop:0.05, delay:nth=7,rate_limited:0.1").unwrap();
        assert_eq!(
            rules,
            vec![
                FaultRule {
                    fault: Fault::AcceptThenDrop,
                    when: Trigger::Probability(0.05)
                },
                FaultRule {
                    fault: Fault::Delay,
                    when: Trigger::Nth(7)
                },
                FaultRule {
                    fault: Fault::RateLimited,
                    when: Trigger::Probability(0.1)
                },
            ]
        );
        let round_trip: Vec<String> = rules.iter().map(ToString::to_string).collect();
        assert_eq!(
            round_trip.join(","),
            "accept_then_drop:0.05,delay:nth=7,rate_limited:0.1"
        );
    }

    #[test]
    fn an_empty_fault_list_means_no_faults() {
        assert_eq!(parse_faults("").unwrap(), vec![]);
        assert_eq!(parse_faults(" , ").unwrap(), vec![]);
    }

    #[test]
    fn bad_fault_rules_are_refused_with_the_reason() {
        assert_eq!(
            parse_faults("delay").unwrap_err(),
            ParseFaultError::MissingTrigger("delay".into())
        );
        assert_eq!(
            parse_faults("explode:0.1").unwrap_err(),
            ParseFaultError::UnknownFault("explode".into())
        );
        for (spec, reason) in [
            ("delay:1.5", TriggerError::Probability("1.5".into())),
            ("delay:often", TriggerError::Probability("often".into())),
            ("delay:nth=0", TriggerError::Nth("0".into())),
            ("delay:nth=-1", TriggerError::Nth("-1".into())),
        ] {
            assert_eq!(
                parse_faults(spec).unwrap_err(),
                ParseFaultError::BadTrigger {
                    rule: spec.into(),
                    reason
                },
                "{spec}"
            );
        }
    }

    #[test]
    fn fault_rules_read_and_write_the_documented_json() {
        let json = r#"[{"fault":"accept_then_drop","when":{"probability":0.05}},
                       {"fault":"delay","when":{"nth":7}}]"#;
        let rules: Vec<FaultRule> = serde_json::from_str(json).unwrap();
        assert_eq!(
            rules,
            parse_faults("accept_then_drop:0.05,delay:nth=7").unwrap()
        );
        assert_eq!(
            serde_json::to_value(rules[1]).unwrap(),
            serde_json::json!({"fault": "delay", "when": {"nth": 7}})
        );
        let out_of_range = r#"[{"fault":"delay","when":{"probability":2}}]"#;
        assert!(serde_json::from_str::<Vec<FaultRule>>(out_of_range).is_err());
    }

    #[test]
    fn the_first_rule_that_fires_wins() {
        let rules = parse_faults("rate_limited:nth=2,delay:1,accept_then_drop:1").unwrap();
        let mut rng = rand::rng();
        assert_eq!(draw(&rules, false, 1, &mut rng), Some(Fault::Delay));
        assert_eq!(draw(&rules, false, 2, &mut rng), Some(Fault::RateLimited));
        assert_eq!(
            draw(&parse_faults("delay:0").unwrap(), false, 1, &mut rng),
            None
        );
    }

    #[test]
    fn look_up_faults_fire_on_look_ups_only_and_count_them_apart() {
        let rules = parse_faults("lookup_error:nth=1,delay:1").unwrap();
        let mut rng = rand::rng();
        assert_eq!(draw(&rules, true, 1, &mut rng), Some(Fault::LookupError));
        assert_eq!(draw(&rules, true, 2, &mut rng), None);
        assert_eq!(draw(&rules, false, 1, &mut rng), Some(Fault::Delay));
    }
}
