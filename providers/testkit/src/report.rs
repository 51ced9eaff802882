//! What a run found, case by case.

use std::fmt;

/// One failed check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The case's name: the table's, a [`Derived::name`](crate::Derived::name), or one of the
    /// key and look-up checks.
    pub case: String,
    pub expected: String,
    pub got: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}`: expected {}; got {}",
            self.case, self.expected, self.got
        )
    }
}

/// What a run found: every case played, and every check that failed.
#[derive(Debug, Clone)]
pub struct Report {
    pub(crate) vendor: String,
    pub(crate) played: Vec<String>,
    pub(crate) failures: Vec<Failure>,
}

impl Report {
    /// The cases played, in order.
    pub fn played(&self) -> &[String] {
        &self.played
    }

    pub fn failures(&self) -> &[Failure] {
        &self.failures
    }

    /// Whether a check of `case` failed.
    pub fn failed(&self, case: &str) -> bool {
        self.failures.iter().any(|failure| failure.case == case)
    }

    /// Panics with every failure, unless there is none.
    #[track_caller]
    pub fn assert_honest(&self) {
        assert!(self.failures.is_empty(), "{self}");
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` against the conformance kit: checks failed: {} (of {} cases played)",
            self.vendor,
            self.failures.len(),
            self.played.len()
        )?;
        for failure in &self.failures {
            write!(f, "\n- {failure}")?;
        }
        Ok(())
    }
}
