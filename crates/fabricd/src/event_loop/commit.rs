//! Committing a generation: what "committed" means (every block on every live switch but the
//! ones listed as unprogrammed), a generation of which nothing could be written (not
//! committed, retried), and the state files written before a commit is announced (by a task;
//! the generation waits in [`Stage::Committing`] meanwhile). Also the progress file of the
//! five-phase update.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use fabric_topology::{fmt_guid, Fabric, Guid, PortNum, SwitchId};
use fabric_update::Input as UInput;
use tokio::time::Instant;

use super::exclusion::{remote_switch_end, Exclusion};
use super::install::{Committing, InFlight, Install, Stage};
use super::internal::{Internal, Persisted};
use super::EventLoop;
use crate::compute::Computed;
use crate::persist::{CommittedGeneration, UpdateProgress};
use crate::state::{Generation, Notice, Phase, RerouteTimings};
use crate::upload::UploadOutcome;

/// Test failpoint: `FABRICD_TEST_COMMIT_DELAY_MS=N` holds every commit N ms (on the blocking
/// thread, before its state files are written), so that a test can kill the daemon in the
/// Commit phase (`tests/ha_kill9.rs`). Logged at start; never in production.
pub const COMMIT_DELAY_ENV: &str = "FABRICD_TEST_COMMIT_DELAY_MS";

/// The failpoint's delay, read once.
pub fn commit_delay() -> Option<std::time::Duration> {
    static DELAY: std::sync::OnceLock<Option<std::time::Duration>> = std::sync::OnceLock::new();
    *DELAY.get_or_init(|| {
        std::env::var(COMMIT_DELAY_ENV)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|&ms| ms > 0)
            .map(std::time::Duration::from_millis)
    })
}

impl EventLoop {
    /// Persists the progress of the five-phase update (the phase just entered).
    pub(super) fn save_progress(&mut self, at: fabric_update::AttemptId, phase: fabric_update::Phase) {
        let Some(inst) = &self.install else {
            return;
        };
        let p = UpdateProgress {
            version: 1,
            generation: at.generation,
            attempt: at.attempt,
            phase,
            virtual_faults: inst.flight.exclusions.iter().map(|x| x.persisted()).collect(),
        };
        let r = self.io.state_dir.save_update_progress(&p).map_err(|e| e.to_string());
        self.note_persistence(r);
    }

    pub(super) fn clear_progress(&mut self) {
        self.recovering = None;
        let r = self.io.state_dir.clear_update_progress().map_err(|e| e.to_string());
        self.note_persistence(r);
    }

    /// Nothing of the generation could be written while something was due: it is not
    /// committed (no number used, waiters get an error, the installed generation stays what
    /// readers see) and is retried with backoff.
    fn not_committed(&mut self, flight: InFlight, outcome: UploadOutcome) {
        let err = outcome.error.clone().unwrap_or_else(|| "unknown error".into());
        let due = outcome.failed.len();
        // Its blocks are still to be written, the resync switches still to be rewritten.
        self.give_back(&flight);
        self.dirty.extend(outcome.failed.iter().copied());
        for (sid, (_, e)) in &mut self.unprogrammed {
            if let Some(x) = outcome.switch_errors.get(sid) {
                e.clone_from(x);
            }
        }
        // The changes it covered are still to be installed: the retry counts them.
        self.schedule
            .requeue(Instant::now(), flight.covered(), &self.settings.update);
        self.io.telemetry.failed();
        let msg = format!("no LFT block could be written ({due} due), nothing installed, retrying: {err}");
        if self.current.is_none() {
            tracing::error!(blocks_due = due, error = %err, "no generation installed: no LFT block could be written; retrying");
        } else {
            tracing::warn!(
                blocks_due = due,
                installed = self.generation(),
                error = %err,
                "generation not committed: no LFT block could be written; retrying"
            );
        }
        self.last_error = format!("generation {} not committed: {msg}", self.next_generation());
        self.set_phase(Phase::Idle);
        self.publish();
        // Waiters are answered once readers see the failure.
        self.waiters.failed(flight.seq, &msg);
        self.maybe_start();
    }

    /// The switches that did not take their blocks of the generation just committed (every
    /// dirty block of a live switch was part of its writes, so its failures are the whole
    /// list): logged when the list changes, INFO for each switch that is programmed again.
    pub(super) fn note_unprogrammed(&mut self, number: u64, physical: &Fabric, outcome: &UploadOutcome) {
        let mut now: BTreeMap<u32, (u64, String)> = BTreeMap::new();
        for &(sid, _) in &outcome.failed {
            if (sid as usize) >= physical.num_switches() || !physical.switch(SwitchId(sid)).up {
                continue;
            }
            let e = now.entry(sid).or_insert_with(|| {
                let err = outcome
                    .switch_errors
                    .get(&sid)
                    .or(outcome.error.as_ref())
                    .cloned()
                    .unwrap_or_default();
                (0, err)
            });
            e.0 += 1;
        }
        for sid in self.unprogrammed.keys() {
            if now.contains_key(sid) || (*sid as usize) >= physical.num_switches() {
                continue;
            }
            let sw = physical.switch(SwitchId(*sid));
            if sw.up {
                tracing::info!(switch = %fmt_guid(sw.guid), generation = number, "switch {} programmed", sw.desc);
            } else {
                tracing::info!(switch = %fmt_guid(sw.guid), "switch {} is down: no longer listed as unprogrammed", sw.desc);
            }
        }
        self.unprogrammed = now;
        if !self.unprogrammed.is_empty() {
            let list = self.installation().unprogrammed;
            tracing::error!(
                generation = number,
                switches = list.len(),
                blocks_pending = list.iter().map(|u| u.blocks_pending).sum::<u64>(),
                "generation {number} committed incomplete: unprogrammed switches: {}; retrying",
                crate::state::name_switches(&list)
            );
        }
    }

    /// Commit: fold the generation into the live state and write its state files (a task);
    /// [`EventLoop::on_persisted`] announces it. `protocol_at`: the five-phase attempt to
    /// report `Committed` for.
    ///
    /// Committed generation N means every block of N is on every live switch of the routed
    /// fabric except the switches listed as unprogrammed. A generation of which nothing could
    /// be written while something was due is not committed ([`EventLoop::not_committed`]).
    pub(super) fn commit(
        &mut self,
        mut inst: Install,
        c: Computed,
        outcome: UploadOutcome,
        protocol_at: Option<fabric_update::AttemptId>,
    ) {
        if outcome.error.is_some() && outcome.blocks_written == 0 && (!outcome.failed.is_empty() || c.lids_changed) {
            if outcome.side.mft_written > 0 || outcome.side.pkey_written > 0 {
                // Some side tables hold this generation's entries: rewrite them whole.
                self.side.resync_all(c.physical.num_switches());
            }
            self.not_committed(inst.flight, outcome);
            if let Some(at) = protocol_at {
                self.clear_progress();
                self.protocol_input(UInput::Committed { at });
            }
            return;
        }
        self.set_phase(Phase::Commit);
        if self.recovering.is_some() && outcome.error.is_none() {
            tracing::info!("the interrupted update is finished");
            self.clear_progress();
        }
        // Fold what the generation applied into the live state.
        self.physical = c.physical.clone();
        let k = inst.flight.physical_events.min(self.pending_physical.len());
        self.pending_physical.drain(..k);
        self.set_installed(&c);
        self.installed_lids = Some(c.lids.clone());
        self.dirty.extend(outcome.failed.iter().copied());
        self.dirty.extend(c.skipped.iter().copied());
        self.fold_side(&c, &outcome.side);
        self.publish_path_sls(&c);
        let number = self.next_generation();
        self.note_unprogrammed(number, &c.physical, &outcome);
        if let Some(err) = &outcome.error {
            self.schedule.retry_later(Instant::now(), &self.settings.update);
            self.io.telemetry.failed();
            self.last_error = format!(
                "generation {number} incomplete: {} LFT blocks not written on {} switches, retrying: {err}",
                outcome.failed.len(),
                self.unprogrammed.len().max(1)
            );
        } else {
            self.schedule.succeeded();
            self.last_error.clear();
        }

        let committed_at_unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));

        // Persist what changed (LIDs, virtual faults) and the generation number before
        // announcing the commit: a number announced as committed is never used again, even
        // after a crash right after the announcement. One blocking task, off the tokio workers;
        // each file on its own: one that cannot be written does not keep the others old.
        // The LIDs are written when they changed or their file is missing (checked by the task).
        let lids = c.guid2lid.clone();
        let lids_changed = !Arc::ptr_eq(&c.guid2lid, &self.guid2lid) && *c.guid2lid != *self.guid2lid;
        let faults = (inst.flight.exclusions != self.persisted_exclusions)
            .then(|| inst.flight.exclusions.iter().map(|x| x.persisted()).collect::<Vec<_>>());
        let record = CommittedGeneration {
            generation: number,
            committed_at_unix_ms,
        };
        let dir = self.io.state_dir.clone();
        let job = inst.flight.job;
        inst.wait_for(self.tasks.spawn_blocking(move || {
            if let Some(d) = commit_delay() {
                std::thread::sleep(d);
            }
            let mut errors = Vec::new();
            let mut faults_saved = false;
            if lids_changed || !dir.path().join(crate::persist::GUID2LID_FILE).exists() {
                if let Err(e) = dir.save_guid2lid(&lids) {
                    errors.push(e.to_string());
                }
            }
            if let Some(f) = faults {
                match dir.save_virtual_faults(&f) {
                    Ok(()) => faults_saved = true,
                    Err(e) => errors.push(e.to_string()),
                }
            }
            if let Err(e) = dir.save_last_generation(&record) {
                errors.push(e.to_string());
            }
            Internal::Persisted(Persisted {
                job,
                faults_saved,
                errors,
            })
        }));
        inst.stage = Stage::Committing(Box::new(Committing {
            c,
            outcome,
            number,
            committed_at_unix_ms,
            protocol_at,
        }));
        self.install = Some(inst);
    }

    /// The state files of the committing generation are written: publish it, answer the
    /// waiters, tell the protocol.
    pub(super) fn on_persisted(
        &mut self,
        Persisted {
            job,
            faults_saved,
            errors,
        }: Persisted,
    ) {
        let committing = |i: &Install| i.flight.job == job && matches!(i.stage, Stage::Committing(_));
        if !self.install.as_ref().is_some_and(committing) {
            tracing::error!(job, "state files written for an unknown job");
            return;
        }
        let inst = self.install.take().expect("checked above");
        let Stage::Committing(committing) = inst.stage else {
            unreachable!("checked above");
        };
        let Committing {
            c,
            outcome,
            number,
            committed_at_unix_ms,
            protocol_at,
        } = *committing;
        let flight = inst.flight;
        if faults_saved {
            self.persisted_exclusions = flight.exclusions.clone();
        }
        self.note_persistence(if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        });
        self.guid2lid = c.guid2lid.clone();

        let committed = Instant::now();
        let ms = |a: Instant, b: Instant| b.saturating_duration_since(a).as_secs_f64() * 1e3;
        let routed = flight.routed.unwrap_or(committed);
        let timings = RerouteTimings {
            generation: number,
            routed_ms: ms(flight.first_seen, routed),
            committed_ms: ms(flight.first_seen, committed),
            coalesce_ms: ms(flight.first_seen, flight.started),
            compute_ms: c.compute_ms,
            upload_ms: outcome.elapsed.as_secs_f64() * 1e3,
            blocks_written: outcome.blocks_written,
            retries: outcome.retries,
            faults: flight.faults,
            committed_at_unix_ms,
            driver_smps_sent: self.io.driver.driver_stats().smps_sent,
        };
        let excluded_links: HashSet<(Guid, PortNum)> = flight
            .exclusions
            .iter()
            .filter_map(|x| match *x {
                Exclusion::Link(s, p) => Some((s, p)),
                _ => None,
            })
            .flat_map(|(s, p)| {
                let mut v = vec![(s, p)];
                if let Some((rg, rp)) = remote_switch_end(&self.cabling, s, p) {
                    v.push((rg, rp));
                }
                v
            })
            .collect();
        let generation = Arc::new(Generation {
            number,
            fabric: c.fabric.clone(),
            ranking: c.ranking.clone(),
            lids: c.lids.clone(),
            lfts: c.lfts.clone(),
            engine: self.settings.topology.engine(self.settings.engine).to_string(),
            route_ms: c.route_ms,
            timings: timings.clone(),
            excluded_links: Arc::new(excluded_links),
            virtual_faults: flight.exclusions.len(),
            routing_check: c.routing_check.clone(),
            mcast: c.mcast.clone(),
            partitions: c.partitions.clone(),
            vl: c.vl.clone(),
            route_path: c.route_path.name(),
            full_recompute: c.full,
        });
        self.io.telemetry.routing_check(&c.routing_check);
        self.note_vl_layering(&generation);
        self.note_topology_mode(&generation);
        let first = self.current.is_none();
        self.current = Some(generation);
        tracing::info!(
            generation = number,
            faults = timings.faults,
            // Numbers (JSON logs keep them numbers), to 0.1 ms.
            routed_ms = (timings.routed_ms * 10.0).round() / 10.0,
            committed_ms = (timings.committed_ms * 10.0).round() / 10.0,
            // The computation's wall time and, of it, the computing thread's time on a CPU
            // and waiting for one (compute::sched; -1 where unknown), to 0.01 ms.
            compute_ms = (timings.compute_ms * 100.0).round() / 100.0,
            compute_cpu_ms = c.thread.map_or(-1.0, |t| (t.cpu_ms * 100.0).round() / 100.0),
            compute_runqueue_ms = c.thread.map_or(-1.0, |t| (t.runqueue_ms * 100.0).round() / 100.0),
            blocks_written = timings.blocks_written,
            // A forced reroute's full recomputation (nothing of the previous one reused).
            full_recompute = c.full,
            "generation committed"
        );
        self.io
            .telemetry
            .blocks_written(outcome.blocks_written, outcome.retries);
        self.io.telemetry.committed(
            number,
            timings.routed_ms / 1e3,
            timings.committed_ms / 1e3,
            timings.compute_ms / 1e3,
            timings.upload_ms / 1e3,
        );
        let _ = self.io.notices.send(Notice::GenerationCommitted {
            generation: number,
            timings: timings.clone(),
        });
        self.poll_topology_gaps();
        self.poll_configuration_warnings();
        let status = self.installation().status_line(number);
        if first {
            if let Some(f) = self.io.on_ready.take() {
                f(number, status.clone());
            }
        }
        let _ = self.io.notifier.status(&status);
        self.prepare_escape_vl();
        self.set_phase(Phase::Idle);
        self.publish();
        if let (Some(sa), Some(g)) = (&self.io.sa, &self.current) {
            sa.generation_committed(
                &self.physical,
                &self.pending_physical,
                g,
                &self.installation().unprogrammed,
            );
        }
        // Waiters are answered once readers see the committed generation.
        self.waiters.committed(flight.seq, number);
        if let Some(at) = protocol_at {
            self.clear_progress();
            self.protocol_input(UInput::Committed { at });
        }
        self.maybe_start();
    }
}
