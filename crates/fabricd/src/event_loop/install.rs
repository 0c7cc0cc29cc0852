//! The generation in flight, as one value: [`Install`] owns what is being computed or
//! installed (the changes it covers, the computed result, the upload stages of the five-phase
//! update and the running task). Dropping it is the abort: its task is aborted with it, and
//! nothing of it stays behind in the loop.
//!
//! Where the generation is lives here only: its [`Stage`], whether the five-phase update
//! installs it and whether it is a restarted attempt. The loop never asks the five-phase
//! protocol for its phase; the published [`crate::state::Phase`] is what was last announced to
//! readers.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use fabric_routing::{LftBlockDiff, Lfts};
use tokio::time::Instant;

use super::exclusion::Exclusion;
use super::scheduler::Covered;
use super::tasks::Task;
use crate::compute::Computed;
use crate::upload::UploadOutcome;

/// What a generation in flight covers.
#[derive(Debug)]
pub(crate) struct InFlight {
    pub job: u64,
    /// Changes up to this number are included.
    pub seq: u64,
    pub first_seen: Instant,
    pub started: Instant,
    pub routed: Option<Instant>,
    pub faults: u32,
    /// Number of `pending_physical` events the job applied.
    pub physical_events: usize,
    pub exclusions: Vec<Exclusion>,
    /// Dirty blocks and resync switches handed to the job.
    pub dirty: Arc<BTreeSet<(u32, u32)>>,
    pub resync: Arc<BTreeSet<u32>>,
}

impl InFlight {
    /// What it covers, for the generation that replaces it.
    pub(crate) fn covered(&self) -> Covered {
        Covered {
            first_seen: self.first_seen,
            faults: self.faults,
        }
    }
}

/// Where the generation in flight is.
#[derive(Debug)]
pub(crate) enum Stage {
    /// Prepare: computing on the rayon pool, or (five-phase) waiting for the escape VL.
    Computing,
    /// Five-phase update: escape stage uploading or subscribers moving to the escape LIDs;
    /// the base stage waits here.
    Escape { c: Box<Computed>, base: Vec<LftBlockDiff> },
    /// The (base stage) upload runs.
    Uploading { c: Box<Computed> },
    /// Five-phase update: base stage uploaded, subscribers moving back.
    Repath { c: Box<Computed>, outcome: UploadOutcome },
    /// Five-phase update given up or restarted while a stage was uploading: the upload
    /// finishes (its blocks are folded into the installed tables) before anything else is
    /// computed, so what the switches hold is known exactly.
    Draining {
        /// The stage being uploaded: escape (true) or base.
        escape: bool,
        /// Then compute the restarted attempt (true), or go idle (abort).
        restart: bool,
    },
    /// Given up or restarted after a stage upload: what the stages wrote is being folded into
    /// a copy of the installed tables (a blocking task: a full copy of the tables), then the
    /// restarted attempt is computed (`restart`) or the loop goes idle.
    Folding { restart: bool },
    /// Uploaded; the commit's state files are being written (announced once they are).
    Committing(Box<Committing>),
}

/// A generation whose commit waits for its state files.
#[derive(Debug)]
pub(crate) struct Committing {
    pub c: Computed,
    pub outcome: UploadOutcome,
    pub number: u64,
    pub committed_at_unix_ms: i64,
    /// Five-phase update: the attempt to report `Committed` to the protocol for.
    pub protocol_at: Option<fabric_update::AttemptId>,
}

/// The upload stages of a five-phase update.
#[derive(Debug, Default)]
pub(crate) struct Stages {
    /// Escape stage, until its upload starts.
    pub escape_pending: Vec<LftBlockDiff>,
    /// Blocks of the escape stage, and its outcome once uploaded.
    pub escape_keys: HashSet<(u32, u32)>,
    pub escape_outcome: Option<UploadOutcome>,
    /// Blocks written by both stages.
    pub overlap: Vec<(u32, u32)>,
    /// The blocks of the escape and the base stage handed to the driver (folded into the
    /// installed tables as each stage completes).
    pub escape_written: Vec<LftBlockDiff>,
    pub base_written: Vec<LftBlockDiff>,
}

/// The generation in flight (see the module documentation).
#[derive(Debug)]
pub(crate) struct Install {
    pub flight: InFlight,
    pub stage: Stage,
    /// A restarted attempt of a running five-phase update (its computation's result goes to
    /// the protocol), or one superseding such an attempt.
    pub restarted: bool,
    /// Installed by the five-phase update (from its escape stage on), not by a direct upload.
    pub five_phase: bool,
    pub stages: Stages,
    /// The task the stage waits for (computation, escape-VL check, upload, state files).
    task: Option<Task>,
}

impl Install {
    /// A generation whose computation runs as `task` (`restarted`: see [`Install::restarted`]).
    pub(crate) fn computing(flight: InFlight, task: Task, restarted: bool) -> Self {
        Install {
            flight,
            stage: Stage::Computing,
            restarted,
            five_phase: false,
            stages: Stages::default(),
            task: Some(task),
        }
    }

    /// The stage now waits for `task` (the previous one, finished, is dropped).
    pub(crate) fn wait_for(&mut self, task: Task) {
        self.task = Some(task);
    }

    /// An upload (or a wait of the five-phase update) is in progress: the generation cannot
    /// be superseded any more.
    pub(crate) fn installing(&self) -> bool {
        !matches!(self.stage, Stage::Computing)
    }

    /// The computed generation, in the stages that hold it.
    pub(crate) fn computed(&self) -> Option<&Computed> {
        match &self.stage {
            Stage::Escape { c, .. } | Stage::Uploading { c } | Stage::Repath { c, .. } => Some(c),
            _ => None,
        }
    }

    /// Takes what the completed stages of a given-up or restarted attempt wrote, to fold into
    /// the installed tables (see [`Fold`]): the escape stage (its failed blocks from its
    /// outcome) and, with `base_failed`, the base stage. A completed generation needs no fold
    /// (it sets the installed tables to its own).
    pub(crate) fn take_fold(&mut self, base_failed: Option<&[(u32, u32)]>) -> Fold {
        let escape_failed = self
            .stages
            .escape_outcome
            .as_ref()
            .map(|o| o.failed.iter().copied().collect())
            .unwrap_or_default();
        let mut stages = vec![(std::mem::take(&mut self.stages.escape_written), escape_failed)];
        if let Some(failed) = base_failed {
            stages.push((
                std::mem::take(&mut self.stages.base_written),
                failed.iter().copied().collect(),
            ));
        }
        stages.retain(|(writes, _)| !writes.is_empty());
        Fold { stages }
    }

    /// The upload outcome of both stages: `blocks_written` counts distinct blocks (a block
    /// written by both stages once), times and retries add up.
    pub(crate) fn merge_stage_outcomes(&mut self, base: UploadOutcome) -> UploadOutcome {
        let Some(esc) = self.stages.escape_outcome.take() else {
            return base;
        };
        let twice = std::mem::take(&mut self.stages.overlap)
            .into_iter()
            .filter(|k| !esc.failed.contains(k) && !base.failed.contains(k))
            .count() as u64;
        let mut failed = base.failed;
        for k in esc.failed {
            if !failed.contains(&k) {
                failed.push(k);
            }
        }
        self.stages.escape_keys.clear();
        let mut switch_errors = esc.switch_errors;
        switch_errors.extend(base.switch_errors);
        UploadOutcome {
            blocks_written: (esc.blocks_written + base.blocks_written).saturating_sub(twice),
            retries: esc.retries + base.retries,
            failed,
            error: base.error.or(esc.error),
            switch_errors,
            elapsed: esc.elapsed + base.elapsed,
            side: base.side,
            data_vls_programmed: base.data_vls_programmed,
        }
    }
}

/// The writes of one completed upload stage and its blocks that failed (unknown on the
/// switches: they stay dirty).
type StageWrites = (Vec<LftBlockDiff>, HashSet<(u32, u32)>);

/// The writes of completed upload stages of a given-up or restarted attempt.
#[derive(Debug)]
pub(crate) struct Fold {
    stages: Vec<StageWrites>,
}

impl Fold {
    /// Nothing was written.
    pub(crate) fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }

    /// What the switches hold: a copy of `installed` with the writes applied, and the blocks
    /// that stay dirty (failed, or outside the tables). Heavy (a copy of every table): run it
    /// off the loop.
    pub(crate) fn apply(self, installed: &Lfts) -> (Lfts, Vec<(u32, u32)>) {
        let mut lfts = installed.clone();
        let mut dirty = Vec::new();
        for (writes, failed) in &self.stages {
            for w in writes {
                let key = (w.switch.0, w.block);
                if failed.contains(&key)
                    || w.switch.idx() >= lfts.num_switches()
                    || w.block as usize >= lfts.num_blocks()
                {
                    dirty.push(key);
                    continue;
                }
                lfts.block_mut(w.switch, w.block as usize).copy_from_slice(&w.entries);
            }
        }
        (lfts, dirty)
    }
}

#[cfg(test)]
mod tests {
    use fabric_routing::BLOCK_SIZE;
    use fabric_topology::SwitchId;

    use super::*;

    fn write(switch: u32, block: u32, v: u8) -> LftBlockDiff {
        LftBlockDiff {
            switch: SwitchId(switch),
            block,
            entries: [v; BLOCK_SIZE],
        }
    }

    fn install() -> Install {
        let flight = InFlight {
            job: 7,
            seq: 1,
            first_seen: Instant::now(),
            started: Instant::now(),
            routed: None,
            faults: 1,
            physical_events: 0,
            exclusions: Vec::new(),
            dirty: Arc::default(),
            resync: Arc::default(),
        };
        Install {
            flight,
            stage: Stage::Draining {
                escape: false,
                restart: true,
            },
            restarted: true,
            five_phase: true,
            stages: Stages::default(),
            task: None,
        }
    }

    #[test]
    fn a_fold_applies_what_the_stages_wrote_and_keeps_failed_blocks_dirty() {
        let installed = Lfts::new(2, 127);
        let mut i = install();
        i.stages.escape_written = vec![write(0, 0, 1), write(1, 1, 2)];
        i.stages.escape_outcome = Some(UploadOutcome {
            failed: vec![(1, 1)],
            ..UploadOutcome::default()
        });
        i.stages.base_written = vec![write(0, 0, 3), write(0, 1, 4), write(5, 0, 9)];
        let fold = i.take_fold(Some(&[(0, 1)]));
        assert!(i.stages.escape_written.is_empty() && i.stages.base_written.is_empty());
        let (lfts, mut dirty) = fold.apply(&installed);
        dirty.sort_unstable();
        // Base after escape: block (0, 0) holds the base stage's entries.
        assert_eq!(lfts.block(SwitchId(0), 0), &[3; BLOCK_SIZE]);
        // Failed blocks are unknown (kept as installed, dirty); a switch outside the tables too.
        assert_eq!(lfts.block(SwitchId(1), 1), installed.block(SwitchId(1), 1));
        assert_eq!(lfts.block(SwitchId(0), 1), installed.block(SwitchId(0), 1));
        assert_eq!(dirty, vec![(0, 1), (1, 1), (5, 0)]);
        assert!(i.take_fold(None).is_empty(), "nothing is folded twice");
    }

    #[test]
    fn both_stages_count_a_block_written_twice_once() {
        let mut i = install();
        i.stages.escape_outcome = Some(UploadOutcome {
            blocks_written: 3,
            retries: 1,
            failed: vec![(1, 0)],
            ..UploadOutcome::default()
        });
        i.stages.overlap = vec![(0, 0), (1, 0)];
        let merged = i.merge_stage_outcomes(UploadOutcome {
            blocks_written: 4,
            retries: 2,
            ..UploadOutcome::default()
        });
        // (0, 0) was written by both stages; (1, 0) failed in the escape stage.
        assert_eq!((merged.blocks_written, merged.retries), (6, 3));
        assert_eq!(merged.failed, vec![(1, 0)]);
        assert!(i.stages.escape_outcome.is_none());
    }
}
