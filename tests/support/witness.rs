//! The vendor's clock as the witness of when a request was sent. herald's own `started_at` is
//! claim time, not send time; a fake vendor stamps each request as it arrives, and each attempt
//! promises that its request starts by the attempt's `send_deadline` and is cut at the route's
//! timeout. So every request a vendor saw for a notification must fall inside the window of one
//! of its attempts — `[started_at, send_deadline + timeout]`, one request each — or it was sent
//! late. The design admits one residue: a process frozen between its last look at the clock and
//! the write. A late request is excused only as that, named with its evidence: the process that
//! made it was frozen across its deadline, and the request arrived shortly after that process
//! thawed.

use std::time::Duration;

use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// How long after a thaw a request written by the thawed process may still arrive (its write
/// resumes at once; the rest is the machine's scheduling and loopback).
pub const AFTER_THAW: Duration = Duration::from_secs(2);
/// How long before the test sent its process SIGSTOP a worker's last look at the clock may lie,
/// for the look to be the one the freeze cut off from its write (the step from the look to the
/// write, on a loaded machine).
pub const AT_FREEZE: Duration = Duration::from_millis(500);

/// One attempt's promise: its request arrives no earlier than `from` (its start) and no later
/// than `until` (its send `deadline` and the route's timeout); `checked_at`, where its worker
/// recorded it (on the attempt, or on the answer it read after its lease), is when the worker
/// last read the clock before writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub from: OffsetDateTime,
    pub deadline: OffsetDateTime,
    pub until: OffsetDateTime,
    pub checked_at: Option<OffsetDateTime>,
}

/// A process stopped (SIGSTOP) from `from` to `to`. Each signal is sent by a `kill` the test
/// spawns, which on a loaded machine takes a while to start: the process stopped somewhere
/// between `from` (the test began sending) and `stopped` (`kill` had returned, so the signal
/// had landed), and ran again somewhere between `thawing` (the test began sending SIGCONT) and
/// `to` (that `kill` had returned). A look at the clock in the first gap came before the stop;
/// a request that arrived in the second was written after the thaw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Freeze {
    pub process: String,
    pub from: OffsetDateTime,
    pub stopped: OffsetDateTime,
    pub thawing: OffsetDateTime,
    pub to: OffsetDateTime,
}

fn time_of(value: &Value) -> OffsetDateTime {
    OffsetDateTime::parse(value.as_str().expect("a time"), &Rfc3339).expect("RFC 3339")
}

/// Each attempt's window, from a notification as the API shows it, for a route whose calls
/// are cut at `timeout`.
pub fn windows(n: &Value, timeout: Duration) -> Vec<Window> {
    n["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .map(|a| {
            let deadline = time_of(&a["send_deadline"]);
            let evidence = &a["evidence"];
            let checked = [
                &evidence["checked_at"],
                &evidence["late_result"]["evidence"]["checked_at"],
            ];
            Window {
                from: time_of(&a["started_at"]),
                deadline,
                until: deadline + timeout,
                checked_at: checked.into_iter().find(|t| t.is_string()).map(time_of),
            }
        })
        .collect()
}

/// The arrivals that no window accounts for, each window taking at most one: arrivals in time
/// order, each given the open window that contains it and closes first (which accounts for as
/// many as any assignment can). A request sent late into another attempt's window still shows:
/// that window has two arrivals for its one request.
pub fn unaccounted(windows: &[Window], arrivals: &[OffsetDateTime]) -> Vec<OffsetDateTime> {
    // herald stores times to the microsecond; the vendor's stamps are finer.
    let tick = time::Duration::microseconds(1);
    let mut open: Vec<Window> = windows.to_vec();
    let mut arrivals = arrivals.to_vec();
    arrivals.sort();
    let mut late = Vec::new();
    for at in arrivals {
        let fitting = open
            .iter()
            .enumerate()
            .filter(|(_, w)| w.from - tick <= at && at <= w.until)
            .min_by_key(|(_, w)| w.until)
            .map(|(i, _)| i);
        match fitting {
            Some(i) => {
                open.remove(i);
            }
            None => late.push(at),
        }
    }
    late
}

/// Why a late arrival is the design's residue, if it is: the freeze that cut one of the
/// notification's attempts (`windows`) off between its worker's last look at the clock (before
/// its deadline) and its write, and whose thaw began before the request arrived, within
/// [`AFTER_THAW`] of its end.
pub fn excused<'a>(
    at: OffsetDateTime,
    windows: &[Window],
    freezes: &'a [Freeze],
) -> Option<&'a Freeze> {
    freezes.iter().find(|f| {
        f.thawing <= at
            && at <= f.to + AFTER_THAW
            && windows.iter().any(|w| {
                w.checked_at.is_some_and(|checked| {
                    checked <= w.deadline && f.from - AT_FREEZE <= checked && checked <= f.stopped
                })
            })
    })
}
