//! Who waits for the loop: the subscribers of the five-phase update (their notices, acks and
//! missed deadlines) and the requests answered once a generation covering them is committed
//! (or fails).

use std::collections::BTreeMap;
use std::time::Duration;

use fabric_update::SubscriberId;
use tokio::sync::mpsc;

use super::request::{FaultAccepted, LoopError, Reply, UpdateNotice};
use crate::state::Phase;

/// A registered subscriber.
#[derive(Debug)]
struct SubscriberEntry {
    name: String,
    ports: usize,
    notices: mpsc::Sender<UpdateNotice>,
}

/// The subscribers of the five-phase update.
#[derive(Debug)]
pub(crate) struct Subscribers {
    entries: BTreeMap<SubscriberId, SubscriberEntry>,
    next: u64,
    /// `name (phase)` of the subscribers that missed a deadline in the last generation.
    missed_acks: Vec<String>,
}

impl Default for Subscribers {
    fn default() -> Self {
        Subscribers {
            entries: BTreeMap::new(),
            next: 1,
            missed_acks: Vec::new(),
        }
    }
}

impl Subscribers {
    /// Registers a subscriber speaking for `ports` end ports.
    pub(crate) fn register(&mut self, name: String, ports: usize, notices: mpsc::Sender<UpdateNotice>) -> SubscriberId {
        let id = SubscriberId(self.next);
        self.next += 1;
        tracing::info!(subscriber = id.0, name = %crate::logging::untrusted(&name), ports, "subscriber registered");
        self.entries.insert(id, SubscriberEntry { name, ports, notices });
        id
    }

    /// Forgets a subscriber; false when it was not registered.
    pub(crate) fn remove(&mut self, id: SubscriberId) -> bool {
        let Some(s) = self.entries.remove(&id) else {
            return false;
        };
        tracing::info!(subscriber = id.0, name = %crate::logging::untrusted(&s.name), ports = s.ports, "subscriber gone");
        true
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The phase an ack of `subscriber` is for, or why it is refused (unknown subscriber, a
    /// phase that is not acked).
    pub(crate) fn check_ack(&self, subscriber: SubscriberId, phase: Phase) -> Result<Phase, LoopError> {
        if !self.entries.contains_key(&subscriber) {
            return Err(LoopError::NotFound(format!("no subscriber {}", subscriber.0)));
        }
        if !matches!(phase, Phase::Unpath | Phase::Repath) {
            return Err(LoopError::InvalidArgument(format!(
                "only unpath and repath notices are acked, not {}",
                phase.name()
            )));
        }
        Ok(phase)
    }

    /// Sends an Unpath or Repath notice to `subscribers`.
    pub(crate) fn notify(&self, generation: u64, subscribers: &[SubscriberId], deadline: Duration, phase: Phase) {
        let notice = UpdateNotice {
            generation,
            phase,
            deadline_ms: u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX),
        };
        for id in subscribers {
            if let Some(s) = self.entries.get(id) {
                if s.notices.try_send(notice.clone()).is_err() {
                    // Full or closed: it misses the deadline, or its stream ends and
                    // Unsubscribe follows.
                    tracing::warn!(subscriber = id.0, name = %crate::logging::untrusted(&s.name), "cannot deliver an update notice");
                }
            }
        }
    }

    /// Records who missed a deadline of the generation `report` describes (the list Status
    /// shows until the next generation).
    pub(crate) fn record_misses(&mut self, report: &fabric_update::Report) -> &[String] {
        self.missed_acks = report
            .missed
            .iter()
            .map(|m| {
                let name = self
                    .entries
                    .get(&m.subscriber)
                    .map_or_else(|| format!("#{}", m.subscriber.0), |s| s.name.clone());
                format!("{name} ({})", m.phase)
            })
            .collect();
        &self.missed_acks
    }

    /// `name (phase)` of the subscribers that missed a deadline in the last generation.
    pub(crate) fn missed_acks(&self) -> &[String] {
        &self.missed_acks
    }
}

/// Requests answered when a generation covering their change is committed or fails.
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    reroutes: Vec<(u64, Reply<u64>)>,
    injections: Vec<(u64, String, Reply<FaultAccepted>)>,
}

impl Waiters {
    /// A reroute waiting for a generation covering change `seq`.
    pub(crate) fn reroute(&mut self, seq: u64, reply: Reply<u64>) {
        self.reroutes.push((seq, reply));
    }

    /// An injection (`event` its text) waiting for a generation covering change `seq`.
    pub(crate) fn injection(&mut self, seq: u64, event: String, reply: Reply<FaultAccepted>) {
        self.injections.push((seq, event, reply));
    }

    /// Generation `number`, covering the changes up to `seq`, is committed.
    pub(crate) fn committed(&mut self, seq: u64, number: u64) {
        let (done, keep): (Vec<_>, Vec<_>) = self.reroutes.drain(..).partition(|(s, _)| *s <= seq);
        self.reroutes = keep;
        for (_, r) in done {
            let _ = r.send(Ok(number));
        }
        let (done, keep): (Vec<_>, Vec<_>) = self.injections.drain(..).partition(|(s, _, _)| *s <= seq);
        self.injections = keep;
        for (_, event, r) in done {
            let _ = r.send(Ok(FaultAccepted {
                event,
                generation: number,
            }));
        }
    }

    /// The generation covering the changes up to `seq` failed with `msg`.
    pub(crate) fn failed(&mut self, seq: u64, msg: &str) {
        let (done, keep): (Vec<_>, Vec<_>) = self.reroutes.drain(..).partition(|(s, _)| *s <= seq);
        self.reroutes = keep;
        for (_, r) in done {
            let _ = r.send(Err(LoopError::Internal(format!("generation failed: {msg}"))));
        }
        let (done, keep): (Vec<_>, Vec<_>) = self.injections.drain(..).partition(|(s, _, _)| *s <= seq);
        self.injections = keep;
        for (_, _, r) in done {
            let _ = r.send(Err(LoopError::Internal(format!("generation failed: {msg}"))));
        }
    }

    /// The loop stops: every waiter gets [`LoopError::ShuttingDown`].
    pub(crate) fn shut_down(&mut self) {
        for (_, r) in self.reroutes.drain(..) {
            let _ = r.send(Err(LoopError::ShuttingDown));
        }
        for (_, _, r) in self.injections.drain(..) {
            let _ = r.send(Err(LoopError::ShuttingDown));
        }
    }
}
