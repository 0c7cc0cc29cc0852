//! The manager epoch (write fencing of a high-availability manager pair, see `agent.proto`):
//! what an agent checks before it applies a write.
//!
//! Every request may carry the request metadata [`EPOCH_METADATA`] (decimal u64; absent = 0).
//! The agent keeps the highest epoch it has seen; any request that passed the management key
//! check raises it (reads included). A write whose epoch is lower is refused with
//! FAILED_PRECONDITION (`stale manager epoch N: this switch follows epoch M`, response metadata
//! [`EPOCH_METADATA`]` = M`), counted and logged; writes that pass are counted too
//! (`SimControl.GetEpochStats`). A value that is not a decimal u64 is INVALID_ARGUMENT naming
//! the entry.
//!
//! The epoch lives in the simulator's memory: it survives `kill`/`restore` of an agent (as a
//! real agent keeping it in non-volatile memory would), is forgotten when the simulator
//! restarts, and `epoch-forget` resets it (an agent that restarted without persisting it).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use fabric_topology::fmt_guid;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Status};

use super::state::{lock, AgentCtl};

/// Request (and refusal response) metadata entry carrying the manager epoch.
pub(super) const EPOCH_METADATA: &str = fabric_oob::MANAGER_EPOCH_METADATA;

/// The manager epoch state of one agent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct ManagerEpoch {
    /// The highest epoch seen (0: none).
    pub(super) highest: u64,
    /// Write calls that passed the epoch check.
    pub(super) accepted: u64,
    /// Write calls refused for a stale epoch.
    pub(super) refused: u64,
    /// Epoch of the last refused write (0: none).
    pub(super) last_refused: u64,
}

impl ManagerEpoch {
    /// A request (read or write that passed) with `epoch`: raises the highest seen.
    pub(super) fn observe(&mut self, epoch: u64) {
        self.highest = self.highest.max(epoch);
    }

    /// A write with `epoch`: `Err(highest)` (counted) when stale, else raises the highest seen
    /// and, with `count`, counts the write accepted.
    pub(super) fn write(&mut self, epoch: u64, count: bool) -> Result<(), u64> {
        if epoch < self.highest {
            self.refused += 1;
            self.last_refused = epoch;
            return Err(self.highest);
        }
        self.highest = epoch;
        if count {
            self.accepted += 1;
        }
        Ok(())
    }
}

/// The epoch of a request: 0 when the metadata entry is absent, INVALID_ARGUMENT naming the
/// entry (and the switch) when it is not a decimal u64.
pub(super) fn request_epoch(a: &AgentCtl, what: &str, md: &MetadataMap) -> Result<u64, Status> {
    let Some(v) = md.get(EPOCH_METADATA) else { return Ok(0) };
    let bad = |shown: String| {
        Status::invalid_argument(format!(
            "switch {}: {what}: request metadata `{EPOCH_METADATA}` = {shown} is not a manager epoch (a decimal \
             number below 2^64)",
            fmt_guid(a.guid)
        ))
    };
    let s = v.to_str().map_err(|_| bad("<not text>".into()))?;
    let shown = || format!("{:?}", s.chars().take(40).collect::<String>());
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(shown()));
    }
    s.parse::<u64>().map_err(|_| bad(shown()))
}

/// A read (or `Describe`) with `epoch` that passed the key check: raises the agent's epoch.
/// Answers the highest epoch after it.
pub(super) fn observe(a: &AgentCtl, epoch: u64) -> u64 {
    let mut m = lock(&a.manager);
    m.observe(epoch);
    m.highest
}

/// A write with `epoch` that passed the key check: refused (FAILED_PRECONDITION, counted,
/// logged) when stale. `count`: this is the last check before the write is applied (counted
/// as accepted when it passes); a write whose check is repeated after a delay checks first
/// with `count = false`.
pub(super) fn check_write_epoch(
    a: &AgentCtl,
    log: &RefusalLog,
    what: &str,
    epoch: u64,
    count: bool,
) -> Result<(), Status> {
    let r = lock(&a.manager).write(epoch, count);
    let Err(highest) = r else { return Ok(()) };
    log.refused(a, what, epoch, highest);
    let mut md = MetadataMap::new();
    md.insert(EPOCH_METADATA, MetadataValue::from(highest));
    Err(Status::with_metadata(
        Code::FailedPrecondition,
        format!(
            "stale manager epoch {epoch}: this switch follows epoch {highest} (switch {}: {what} refused)",
            fmt_guid(a.guid)
        ),
        md,
    ))
}

/// At most this many refusal lines per [`LOG_WINDOW`]; the others are counted and summed up in
/// the next line.
const LOG_LINES: u32 = 20;
const LOG_WINDOW: Duration = Duration::from_secs(1);

/// The refusal log (stderr, one line per refusal, at most [`LOG_LINES`] per second).
#[derive(Debug, Default)]
pub(super) struct RefusalLog {
    inner: Mutex<LogWindow>,
}

#[derive(Debug, Default)]
struct LogWindow {
    start: Option<Instant>,
    lines: u32,
    suppressed: u64,
}

impl LogWindow {
    /// Whether a line may be written at `now`, and how many were suppressed before it.
    fn admit(&mut self, now: Instant) -> Option<u64> {
        if self.start.is_none_or(|s| now.duration_since(s) >= LOG_WINDOW) {
            self.start = Some(now);
            self.lines = 0;
        }
        if self.lines >= LOG_LINES {
            self.suppressed += 1;
            return None;
        }
        self.lines += 1;
        Some(std::mem::take(&mut self.suppressed))
    }
}

impl RefusalLog {
    fn refused(&self, a: &AgentCtl, what: &str, epoch: u64, highest: u64) {
        let Some(suppressed) = lock(&self.inner).admit(Instant::now()) else {
            return;
        };
        let more = if suppressed > 0 {
            format!(" ({suppressed} earlier refusals not logged)")
        } else {
            String::new()
        };
        eprintln!(
            "warning: switch {}: {what} refused: stale manager epoch {epoch}, the switch follows epoch {highest}{more}",
            fmt_guid(a.guid)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_raise_writes_below_are_refused_and_counted() {
        let mut m = ManagerEpoch::default();
        assert_eq!(m.write(0, true), Ok(()));
        m.observe(7);
        m.observe(3);
        assert_eq!(m.highest, 7);
        assert_eq!(m.write(5, true), Err(7));
        assert_eq!(m.write(7, false), Ok(()));
        assert_eq!(m.write(9, true), Ok(()));
        assert_eq!(m.write(7, true), Err(9));
        assert_eq!(
            m,
            ManagerEpoch {
                highest: 9,
                accepted: 2,
                refused: 2,
                last_refused: 7
            }
        );
    }

    #[test]
    fn the_log_is_rated() {
        let mut w = LogWindow::default();
        let t0 = Instant::now();
        for _ in 0..LOG_LINES {
            assert_eq!(w.admit(t0), Some(0));
        }
        assert_eq!(w.admit(t0), None);
        assert_eq!(w.admit(t0 + Duration::from_millis(500)), None);
        assert_eq!(w.admit(t0 + LOG_WINDOW), Some(2));
        assert_eq!(w.admit(t0 + LOG_WINDOW), Some(0));
    }
}
