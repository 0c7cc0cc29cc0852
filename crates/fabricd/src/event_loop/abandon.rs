//! A generation given up or restarted half-way: the five-phase protocol's aborts and restarts
//! from Prepare. What the switches hold must stay known exactly: a stage upload that runs is
//! drained first ([`Stage::Draining`]), and what the completed stages wrote is folded into a
//! copy of the installed tables by a blocking task ([`Stage::Folding`]) before anything new is
//! computed.

use std::sync::Arc;

use tokio::time::Instant;

use super::install::{Fold, Install, Stage};
use super::internal::{Folded, Internal};
use super::EventLoop;
use crate::state::{Notice, Phase};
use crate::upload::UploadOutcome;

impl EventLoop {
    /// The five-phase protocol gave the generation up: keep the installed routing, retry later.
    pub(super) fn abort_generation(&mut self, reason: &str, base_touched: bool) {
        let Some(mut inst) = self.install.take() else {
            return;
        };
        // What waits before anything new is computed: the running upload of a stage, or the
        // fold of the escape stage into the installed tables.
        let wait = match inst.stage {
            Stage::Escape { .. } if inst.stages.escape_outcome.is_none() => Some(Stage::Draining {
                escape: true,
                restart: false,
            }),
            Stage::Escape { .. } => {
                let fold = inst.take_fold(None);
                self.start_fold(&mut inst, fold, false)
                    .then_some(Stage::Folding { restart: false })
            }
            Stage::Uploading { .. } => Some(Stage::Draining {
                escape: false,
                restart: false,
            }),
            Stage::Repath { .. } | Stage::Computing => None,
            Stage::Draining { escape, .. } => Some(Stage::Draining { escape, restart: false }),
            Stage::Folding { .. } => Some(Stage::Folding { restart: false }),
            Stage::Committing(_) => {
                // Already committed: nothing to give up.
                self.install = Some(inst);
                return;
            }
        };
        tracing::error!(
            reason,
            base_touched,
            "generation aborted; the previous routing stays installed"
        );
        self.give_back(&inst.flight);
        // The changes it covered are due again, after the failure backoff; the retry counts
        // them (a generation's `faults` are the changes it routes).
        self.schedule
            .requeue(Instant::now(), inst.flight.covered(), &self.settings.update);
        if base_touched {
            // The base entries may mix two generations: rewrite every switch.
            self.resync.extend(0..self.physical.num_switches() as u32);
            self.side.resync_all(self.physical.num_switches());
        }
        let number = self.next_generation();
        self.last_error = format!("generation {number} aborted: {reason}");
        self.io.telemetry.failed();
        let _ = self.io.notices.send(Notice::UpdateAborted {
            generation: number,
            reason: reason.to_string(),
        });
        self.set_phase(Phase::Idle);
        self.publish();
        self.waiters.failed(inst.flight.seq, reason);
        if let Some(stage) = wait {
            // Nothing new is computed before the running upload or fold has finished.
            inst.stage = stage;
            self.install = Some(inst);
        }
    }

    /// The protocol restarts the generation from Prepare: once no upload runs any more, the
    /// routing of the current topology (every change so far) is computed again.
    pub(super) fn begin_restart(&mut self) {
        let Some(mut inst) = self.install.take() else {
            return;
        };
        let drain = match inst.stage {
            // Escape stage still uploading (restart in Prepare) or base stage uploading
            // (restart in Update): wait for it.
            Stage::Escape { .. } if inst.stages.escape_outcome.is_none() => Some(true),
            Stage::Uploading { .. } => Some(false),
            Stage::Draining { escape, .. } => Some(escape),
            Stage::Escape { .. } => {
                // Escape stage installed (restart in Unpath).
                let fold = inst.take_fold(None);
                return self.fold_then(inst, fold, true);
            }
            // Both stages installed: `installed` holds the abandoned attempt's tables.
            Stage::Repath { .. } => return self.restart_compute(inst),
            Stage::Folding { .. } => {
                inst.stage = Stage::Folding { restart: true };
                None
            }
            Stage::Computing | Stage::Committing(_) => None,
        };
        if let Some(escape) = drain {
            inst.stage = Stage::Draining { escape, restart: true };
        }
        self.install = Some(inst);
    }

    /// Starts the computation of a restarted attempt (the abandoned attempt's changes and
    /// every change since).
    fn restart_compute(&mut self, abandoned: Install) {
        self.give_back(&abandoned.flight);
        if self.shutting_down.is_some() {
            // The progress file makes the next start finish the generation.
            return;
        }
        let start = self.schedule.restart(abandoned.flight.covered());
        drop(abandoned);
        self.start_compute(start, true);
        self.save_progress(self.protocol.attempt(), fabric_update::Phase::Prepare);
    }

    /// The upload of a given-up attempt finished (see [`Stage::Draining`]).
    pub(super) fn drained(&mut self, outcome: UploadOutcome) {
        let Some(mut inst) = self.install.take() else {
            return;
        };
        let Stage::Draining { escape, restart } = inst.stage else {
            self.install = Some(inst);
            return;
        };
        self.io
            .telemetry
            .blocks_written(outcome.blocks_written, outcome.retries);
        self.dirty.extend(outcome.failed.iter().copied());
        tracing::debug!(
            job = inst.flight.job,
            escape,
            restart,
            "upload of an abandoned attempt finished"
        );
        let fold = if escape {
            inst.stages.escape_outcome = Some(outcome);
            inst.take_fold(None)
        } else {
            inst.take_fold(Some(&outcome.failed))
        };
        self.fold_then(inst, fold, restart);
    }

    /// Folds what the stages of a given-up attempt wrote into the installed tables (a blocking
    /// task, see [`Stage::Folding`]), then computes the restarted attempt (`restart`) or goes
    /// on with what is due.
    fn fold_then(&mut self, mut inst: Install, fold: Fold, restart: bool) {
        if self.start_fold(&mut inst, fold, restart) {
            inst.stage = Stage::Folding { restart };
            self.install = Some(inst);
        } else {
            self.after_fold(inst, restart);
        }
    }

    /// Starts folding `fold` as the task `inst` waits for; false when there is nothing to fold.
    fn start_fold(&mut self, inst: &mut Install, fold: Fold, restart: bool) -> bool {
        if fold.is_empty() {
            return false;
        }
        let installed = self.installed.clone();
        let job = inst.flight.job;
        tracing::debug!(
            job,
            restart,
            "folding the stages of an abandoned attempt into the installed tables"
        );
        inst.wait_for(self.tasks.spawn_blocking(move || {
            let (lfts, dirty) = fold.apply(&installed);
            Internal::Folded(Folded { job, lfts, dirty })
        }));
        true
    }

    /// The installed tables hold what the switches hold again.
    pub(super) fn on_folded(&mut self, Folded { job, lfts, dirty }: Folded) {
        let folding = |i: &Install| i.flight.job == job && matches!(i.stage, Stage::Folding { .. });
        if !self.install.as_ref().is_some_and(folding) {
            tracing::error!(job, "folded tables for an unknown job");
            return;
        }
        let inst = self.take_install();
        let Stage::Folding { restart } = inst.stage else {
            unreachable!("checked above");
        };
        self.installed = Arc::new(lfts);
        self.dirty.extend(dirty);
        self.after_fold(inst, restart);
    }

    fn after_fold(&mut self, inst: Install, restart: bool) {
        if restart {
            self.restart_compute(inst);
        } else {
            drop(inst);
            self.maybe_start();
        }
    }

    /// Whether the generation in flight is `job` draining its `escape` (or base) stage.
    pub(super) fn draining(&self, job: u64, escape: bool) -> bool {
        self.install
            .as_ref()
            .is_some_and(|i| i.flight.job == job && matches!(i.stage, Stage::Draining { escape: e, .. } if e == escape))
    }
}
