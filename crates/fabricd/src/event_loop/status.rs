//! What the loop tells the world: the published snapshot, the phase (telemetry, systemd
//! status, notices), the readiness and the log lines of state changes.

use std::sync::Arc;

use fabric_topology::{fmt_guid, SwitchId};

use super::EventLoop;
use crate::state::{Installation, Notice, Phase, Published, UnprogrammedSwitch};

impl EventLoop {
    /// The snapshot readers see.
    pub(super) fn publish(&self) {
        let p = Published {
            cabling: self.cabling.clone(),
            current: self.current.clone(),
            phase: self.phase,
            phase_generation: if self.phase == Phase::Idle {
                0
            } else {
                self.next_generation()
            },
            pending_faults: self.schedule.pending_faults(),
            last_error: self.last_error.clone(),
            discarded_generations: self.discarded,
            jobs: self.jobs.clone(),
            engine: self.settings.topology.engine(self.settings.engine).to_string(),
            topology: self.settings.topology,
            job_aware: self.settings.job_aware,
            driver: self.driver_name,
            lmc: self.lmc,
            started: self.started,
            virtual_faults: self.exclusions.len(),
            subscribers: self.subscribers.len(),
            missed_acks: self.subscribers.missed_acks().to_vec(),
            update_restarts: self.update_restarts.clone(),
            installation: self.installation(),
            side: crate::state::SideStatus {
                multicast: self.settings.multicast,
                partitions: self.settings.partitions.clone(),
                mft_unsupported: self.side.mft_unsupported.clone(),
                pkey_unsupported: self.side.pkey_unsupported.clone(),
                mft_pending: self.side.mft_not_programmed(),
                pkey_pending: self.side.pkey_not_programmed(),
            },
        };
        self.io.telemetry.set_readiness(p.installation.not_ready.clone());
        self.io
            .telemetry
            .set_unprogrammed_switches(p.installation.unprogrammed.len());
        self.io.telemetry.set_persistence_ok(self.persistence_error.is_empty());
        self.io.published.store(Arc::new(p));
        self.io.telemetry.set_pending(self.schedule.pending_faults());
        self.published_version.send_modify(|v| *v += 1);
        self.io.telemetry.set_subscribers(self.subscribers.len());
    }

    /// What is guaranteed about the installed routing (see `docs/operations.md`, "Failure
    /// semantics").
    pub(super) fn installation(&self) -> Installation {
        let unprogrammed: Vec<UnprogrammedSwitch> = self
            .unprogrammed
            .iter()
            .map(|(&sid, (blocks, err))| {
                let sw = (sid as usize) < self.cabling.num_switches();
                let (guid, name) = if sw {
                    let s = self.cabling.switch(SwitchId(sid));
                    (s.guid, s.desc.clone())
                } else {
                    (0, String::new())
                };
                UnprogrammedSwitch {
                    guid,
                    name,
                    blocks_pending: *blocks,
                    last_error: err.clone(),
                }
            })
            .collect();
        let mut not_ready = Installation::readiness(
            self.generation(),
            &self.last_error,
            &unprogrammed,
            &self.topology_incomplete,
            &self.persistence_error,
        );
        // Multicast and P_Key tables the driver could program but did not take.
        let side_pending = if self.generation() > 0 {
            self.side.not_programmed()
        } else {
            Vec::new()
        };
        if !side_pending.is_empty() {
            let side = side_pending.join("; ");
            not_ready = Some(match not_ready {
                Some(why) => format!("{why}; {side}"),
                None => format!("not ready: {side}"),
            });
        }
        Installation {
            blocks_pending: self.unprogrammed.values().map(|(b, _)| b).sum(),
            unprogrammed,
            persistence_error: self.persistence_error.clone(),
            topology_incomplete: self.topology_incomplete.clone(),
            side_pending,
            not_ready,
        }
    }

    /// Takes the driver's topology gaps ([`fabric_southbound::SouthboundDriver::topology_gaps`]): an ERROR per
    /// switch when it is first listed (the operator must restart fabricd to route what it
    /// lists), an INFO when none is left. Returns whether the list changed.
    pub(super) fn poll_topology_gaps(&mut self) -> bool {
        let gaps = self.io.driver.topology_gaps();
        let lines: Vec<String> = gaps.iter().map(ToString::to_string).collect();
        if lines == self.topology_incomplete {
            return false;
        }
        for (g, line) in gaps.iter().zip(&lines) {
            if !self.topology_incomplete.contains(line) {
                tracing::error!(
                    switch = %fmt_guid(g.switch),
                    name = %g.name,
                    end_ports = g.end_ports.len(),
                    links = g.links.len(),
                    "{line}: they are not routed; restart fabricd (systemctl restart fabricd) to discover and route them"
                );
            }
        }
        if lines.is_empty() {
            tracing::info!("topology complete again: every end port and cable the switches list is routed");
        }
        self.topology_incomplete = lines;
        true
    }

    /// Records the result of writing state files: an ERROR once when persistence starts
    /// failing, an INFO when it works again (`fabricd_persistence_ok`, Status, `/ready`).
    pub(super) fn note_persistence(&mut self, result: Result<(), String>) {
        match result {
            Ok(()) if !self.persistence_error.is_empty() => {
                tracing::info!(previous_error = %self.persistence_error, "state directory writable again");
                self.persistence_error.clear();
            }
            Ok(()) => {}
            Err(e) => {
                if self.persistence_error.is_empty() {
                    tracing::error!(
                        dir = %self.io.state_dir.path().display(),
                        error = %e,
                        "cannot persist state: the daemon keeps serving, but a restart would lose what is not written"
                    );
                } else if self.persistence_error != e {
                    tracing::debug!(error = %e, "cannot persist state (still)");
                }
                self.persistence_error = e;
            }
        }
    }

    /// The generation installed by this process; 0 before its first commit (whatever the
    /// numbering continues from: see [`EventLoop::next_generation`]).
    pub(super) fn generation(&self) -> u64 {
        self.current.as_ref().map_or(0, |g| g.number)
    }

    /// Number of the generation being prepared or installed (the next one to commit): the
    /// installed one + 1, or, before this process has installed any, the last number of the
    /// previous run + 1.
    pub(super) fn next_generation(&self) -> u64 {
        self.current
            .as_ref()
            .map_or(self.previous_generation, |g| g.number)
            .saturating_add(1)
    }

    pub(super) fn set_phase(&mut self, phase: Phase) {
        if self.phase == phase {
            return;
        }
        self.phase = phase;
        self.io.telemetry.set_phase(phase);
        if phase != Phase::Idle {
            let installed = match self.generation() {
                0 => String::new(),
                g => format!("generation {g} installed; "),
            };
            let _ = self.io.notifier.status(&format!(
                "{installed}installing {}: {} ({} subscribers)",
                self.next_generation(),
                phase.name(),
                self.subscribers.len()
            ));
        }
        self.publish();
        // Idle names the installed generation (none is being prepared any more).
        let _ = self.io.notices.send(Notice::PhaseChanged {
            generation: if phase == Phase::Idle {
                self.generation()
            } else {
                self.next_generation()
            },
            phase,
        });
    }

    /// Polls the driver's topology gaps; when they changed, says so (status line, snapshot).
    pub(super) fn note_topology_gaps(&mut self) {
        if self.poll_topology_gaps() {
            if self.generation() > 0 {
                let _ = self
                    .io
                    .notifier
                    .status(&self.installation().status_line(self.generation()));
            }
            self.publish();
        }
    }

    /// Records who missed a deadline of the generation `report` describes.
    pub(super) fn record_misses(&mut self, report: &fabric_update::Report) {
        let missed = self.subscribers.record_misses(report).to_vec();
        for m in &report.missed {
            self.io.telemetry.missed_ack(m.phase.name());
        }
        if !report.missed.is_empty() {
            tracing::warn!(generation = report.generation, missed = ?missed, "subscribers missed a deadline");
            let _ = self.io.notices.send(Notice::AcksMissed {
                generation: report.generation,
                subscribers: missed,
            });
        }
        self.io.telemetry.update_timings(report);
        self.publish();
    }

    /// The protocol restarts the generation from Prepare: status and notices say so.
    pub(super) fn note_restart(&mut self, from: fabric_update::AttemptId, reason: String) {
        let attempt = from.attempt + 1;
        tracing::warn!(
            generation = from.generation,
            attempt,
            reason = %crate::logging::untrusted(&reason),
            "update restarts from prepare with the new topology"
        );
        self.io.telemetry.update_restarted();
        self.update_restarts.push(format!("attempt {attempt}: {reason}"));
        let _ = self.io.notices.send(Notice::UpdateRestarted {
            generation: from.generation,
            attempt,
            reason,
        });
        self.publish();
    }
}
