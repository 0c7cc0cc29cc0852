//! Computing and installing a generation: the computation on the rayon pool, the escape-VL
//! check, the direct upload or the stages of the five-phase update, and what the protocol's
//! restarts and aborts do to the generation in flight.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use fabric_routing::LftBlockDiff;
use fabric_topology::FabricEvent;
use fabric_update::{split_writes, EscapeMask, Input as UInput, Stages as StagedWrites};
use tokio::time::Instant;

use super::exclusion::Exclusion;
use super::install::{InFlight, Install, Stage};
use super::internal::{EscapeVlChecked, Internal, Routed, Uploaded};
use super::scheduler::Start;
use super::EventLoop;
use crate::compute::{compute, ComputeError, ComputeInput, Computed};
use crate::state::Phase;
use crate::upload::{upload, upload_side, SideWrites, UploadOutcome, UploadParams};

/// One WARN line per computed generation whose routing is not the engine's own or is still
/// invalid: the engine, the counts, a few example destinations and the fallback.
fn log_routing_check(job: u64, c: &fabric_routing::RoutingCheck) {
    if c.reason.is_empty() {
        return;
    }
    tracing::warn!(
        job,
        engine = %c.engine,
        failed_destinations = c.engine_failed_destinations,
        failed_pairs = c.engine_unreachable_pairs,
        fallback = %c.fallback.name(),
        fallback_destinations = c.fallback_destinations,
        unreachable_pairs = c.unreachable_pairs,
        escape_unreachable_pairs = c.escape_unreachable_pairs,
        disconnected_pairs = c.disconnected_pairs,
        valid = c.valid,
        "routing validity: {}",
        c.reason
    );
}

/// What the routing pool answers for one job: the computation and, when the generation may be
/// installed by the five-phase update, its writes split into the escape and the base stage
/// (both heavy: neither runs on the loop).
///
/// `[routing] topology = "auto"` ([`ComputeInput::detect_topology`]): the computation decides
/// from its own ranking whether the fabric is a fat-tree and, when it is none
/// ([`crate::topology_mode`]), routes its base LIDs by Up*/Down* instead of the configured
/// engine: the fallback would re-route every end port's LID anyway, but not the switches' own
/// LIDs (management traffic), which a fat-tree engine leaves unreachable on a direct topology
/// (measured on SLIMFLY(5;4) under ibsim: 2450 of 2500 switch-to-switch-LID walks failed).
fn compute_job(input: ComputeInput, stage_split: bool) -> Internal {
    let job = input.job;
    let installed = input.installed.clone();
    let result = compute(input);
    let stages = match &result {
        Ok(c) if stage_split => Some(split_writes(&installed, &c.writes, &EscapeMask::new(&c.lids))),
        _ => None,
    };
    Internal::ComputeDone(Box::new(Routed { job, result, stages }))
}

impl EventLoop {
    /// The computation of the current state (every physical change seen so far) with
    /// `exclusions` taken down; the upload-related parts as the next generation needs them
    /// (`restarted`: an attempt of a five-phase update already running).
    pub(super) fn compute_input(
        &self,
        job: u64,
        exclusions: Vec<FabricEvent>,
        dirty: Arc<BTreeSet<(u32, u32)>>,
        resync: Arc<BTreeSet<u32>>,
        restarted: bool,
    ) -> ComputeInput {
        ComputeInput {
            job,
            physical: self.physical.clone(),
            physical_events: self.pending_physical.clone(),
            exclusions,
            previous_lids: self.guid2lid.clone(),
            installed_lids: self.installed_lids.clone(),
            lids_reusable: self.installed_lids.is_some(),
            lmc: self.lmc,
            max_lid: self.max_lid,
            engine: self.settings.topology.engine(self.settings.engine),
            job_groups: self.job_groups(),
            rank_options: self.settings.rank_options.clone(),
            validate: self.settings.validate,
            installed: self.installed.clone(),
            dirty,
            resync,
            // Only a five-phase update classifies the changes arriving while it installs.
            ports_in_use: restarted || (self.lmc >= 1 && self.settings.update.five_phase && self.current.is_some()),
            installed_ports_in_use: self
                .installed_ports
                .as_ref()
                .filter(|(tables, _)| Arc::ptr_eq(tables, &self.installed))
                .map(|(_, ports)| ports.clone()),
            mcast_groups: if self.settings.multicast {
                self.io.sa_service.as_ref().map(|sa| sa.mcast_groups())
            } else {
                None
            },
            installed_mcast: self.side.installed_mcast.clone(),
            mft_resync: Arc::new(self.side.mft_resync.clone()),
            partitions: self.settings.partitions.config.clone(),
            previous_partitions: self.current.as_ref().map(|g| g.partitions.clone()),
            enforce_switch_ports: self.settings.partitions.enforce_switch_ports,
            sm_port: self.io.driver.sm_port_guid(),
            reuse_partitions: self.reusable_partitions(),
            installed_pkeys: self.side.installed_pkeys.clone(),
            pkey_resync: Arc::new(self.side.pkey_resync.clone()),
            previous_routing: self.routing_state.clone().filter(|_| self.settings.incremental),
            data_vl_capacity: self.io.driver.data_vl_capacity(),
            detect_topology: self.settings.topology == crate::topology_mode::TopologySetting::Auto,
            full: false,
        }
    }

    /// The running jobs' port GUIDs (jobs in id order, ports in mapping order) when routing is
    /// job-aware.
    fn job_groups(&self) -> Option<Arc<Vec<Vec<fabric_topology::Guid>>>> {
        (self.settings.job_aware && !self.jobs.is_empty()).then(|| {
            Arc::new(
                self.jobs
                    .values()
                    .map(|ports| ports.iter().map(super::super::persist::JobPort::port_guid).collect())
                    .collect(),
            )
        })
    }

    /// Sends a computation of the current state (every change so far) to the routing pool
    /// (`restarted`: see [`Install::restarted`]).
    pub(super) fn start_compute(&mut self, start: Start, restarted: bool) {
        let now = Instant::now();
        let job = start.job;
        let exclusions: Vec<Exclusion> = self.exclusions.iter().copied().collect();
        let dirty = Arc::new(std::mem::take(&mut self.dirty));
        let resync = Arc::new(std::mem::take(&mut self.resync));
        let mut input = self.compute_input(
            job,
            exclusions.iter().map(|x| x.down_event()).collect(),
            dirty.clone(),
            resync.clone(),
            restarted,
        );
        // A forced reroute is a full recomputation (the generation that covers it).
        input.full = std::mem::take(&mut self.recompute);
        self.side.routed_groups = input
            .mcast_groups
            .as_deref()
            .map(|g| super::side::routing_view(g))
            .unwrap_or_default();
        let flight = InFlight {
            job,
            seq: start.seq,
            first_seen: start.covered.first_seen,
            started: now,
            routed: None,
            faults: start.covered.faults,
            physical_events: self.pending_physical.len(),
            exclusions,
            dirty,
            resync,
        };
        tracing::debug!(job, faults = flight.faults, "computing a generation");
        let stage_split = self.lmc >= 1 && (self.settings.update.five_phase || restarted);
        let task = self.tasks.spawn_on_pool(
            &self.io.pool,
            move || compute_job(input, stage_split),
            move || {
                Internal::ComputeDone(Box::new(Routed {
                    job,
                    result: Err(ComputeError::Panicked),
                    stages: None,
                }))
            },
        );
        self.install = Some(Install::computing(flight, task, restarted));
        self.set_phase(Phase::Prepare);
        self.publish();
    }

    /// The generation in flight is `job` and still in Prepare.
    fn preparing(&self, job: u64) -> bool {
        self.install
            .as_ref()
            .is_some_and(|i| i.flight.job == job && matches!(i.stage, Stage::Computing))
    }

    /// Takes the generation in flight (the caller knows there is one).
    pub(super) fn take_install(&mut self) -> Install {
        self.install.take().expect("a generation in flight")
    }

    pub(super) fn on_compute_done(&mut self, Routed { job, result, stages }: Routed) {
        if !self.preparing(job) {
            // Superseded (counted as discarded when it was dropped).
            tracing::debug!(job, "discarding a stale computation");
            return;
        }
        self.schedule.computed();
        // A restarted attempt of a five-phase update is in Prepare: its result goes to the
        // protocol (an error, or a LID change that would forbid the protocol, aborts it).
        let restarted = self.install.as_ref().is_some_and(|i| i.restarted);
        if restarted {
            let refused = match &result {
                Err(e) => Some(e.to_string()),
                Ok(c) if c.lids_changed => Some("the LID plan changed during a restarted update".to_string()),
                Ok(_) => None,
            };
            if let Some(reason) = refused {
                let at = self.protocol.attempt();
                self.protocol_input(UInput::Computed {
                    at,
                    result: Err(reason),
                });
                return;
            }
        }
        match result {
            Err(e) => {
                tracing::error!(job, error = %e, "generation failed; keeping the installed routing");
                if matches!(e, ComputeError::Vl(_)) {
                    self.io.telemetry.vl_refused();
                }
                let inst = self.take_install();
                self.give_back(&inst.flight);
                self.last_error = e.to_string();
                self.io.telemetry.failed();
                self.set_phase(Phase::Idle);
                self.publish();
                self.waiters.failed(inst.flight.seq, &e.to_string());
                // Same input, same error: wait for the next change or reroute.
                self.maybe_start();
            }
            Ok(c) => {
                let mut inst = self.take_install();
                inst.flight.routed = Some(Instant::now());
                self.prepare_spare(c.routing_state.as_ref());
                log_routing_check(job, &c.routing_check);
                if let Some(v) = &c.validation {
                    if !v.deadlock_free {
                        tracing::warn!(job, "new routing has a cycle in its channel dependencies");
                    }
                }
                // The five-phase update needs escape LIDs and tables that already hold a
                // generation with the same LIDs (the first upload and a LID change carry no
                // traffic that could be kept consistent: direct upload).
                // A generation that changes no LFT entry (a multicast join, a partitions reload)
                // moves no unicast traffic: no Unpath/Repath for the subscribers.
                let five_phase = restarted
                    || (self.lmc >= 1
                        && self.settings.update.five_phase
                        && !c.lids_changed
                        && self.current.is_some()
                        && !c.writes.is_empty());
                if five_phase && !self.io.driver.escape_vl_status().ready {
                    // Still Prepare: the escape VL must be programmed before any traffic moves
                    // to the escape LIDs. The driver finishes (or retries) its SL-to-VL tables
                    // in the background; the answer comes back as `EscapeVlChecked`. A newer
                    // change meanwhile supersedes this computation as usual.
                    let driver = self.io.driver.clone();
                    tracing::info!(job, "five-phase update waits for the escape VL (SL-to-VL tables)");
                    inst.wait_for(self.tasks.spawn(async move {
                        let result = driver.escape_vl_ready().await.map_err(|e| e.to_string());
                        Internal::EscapeVlChecked(Box::new(EscapeVlChecked {
                            job,
                            computed: c,
                            stages,
                            result,
                        }))
                    }));
                    self.install = Some(inst);
                    return;
                }
                self.install_generation(inst, c, stages, five_phase, restarted);
            }
        }
    }

    /// The escape VL check of a five-phase generation came back. Ready: the five-phase update
    /// goes on. Not ready (a table could not be written): the generation must not move traffic
    /// to escape LIDs whose VL is not set up, so a first attempt falls back to a direct upload
    /// of the new routing (as the first generation after start; logged, and the driver's error
    /// stays in Status as `escape_vl_error`), and a restarted attempt (the protocol is already
    /// running) is given up like a failed computation (the protocol aborts it; the installed
    /// routing stays, the next change retries).
    pub(super) fn on_escape_vl_checked(&mut self, checked: EscapeVlChecked) {
        let EscapeVlChecked {
            job,
            computed: c,
            stages,
            result,
        } = checked;
        if !self.preparing(job) {
            // Superseded while waiting: a newer computation checks again.
            tracing::debug!(
                job,
                "discarding a computation superseded while it waited for the escape VL"
            );
            return;
        }
        let restarted = self.install.as_ref().is_some_and(|i| i.restarted);
        match result {
            Ok(()) => {
                tracing::info!(job, "escape VL ready");
                let inst = self.take_install();
                self.install_generation(inst, c, stages, true, restarted);
            }
            Err(e) if restarted => {
                tracing::error!(job, error = %e, "escape VL not ready: the restarted update is given up");
                let at = self.protocol.attempt();
                self.protocol_input(UInput::Computed {
                    at,
                    result: Err(format!("escape VL not ready: {e}")),
                });
            }
            Err(e) => {
                tracing::warn!(
                    job,
                    error = %e,
                    "escape VL not ready: this generation is a direct upload (no five-phase update)"
                );
                let inst = self.take_install();
                self.install_generation(inst, c, stages, false, false);
            }
        }
        self.publish();
    }

    /// After a commit, when later updates may be five-phase ones (LMC 1 and `five_phase`) and
    /// the driver's escape VL is not ready: asks the driver to program it now, in the background
    /// (umad: the SL-to-VL tables, after the first generation's LFTs so that they stay off the
    /// bring-up's critical path). One request at a time; a failure is logged and retried after
    /// the next commit, and the next five-phase update checks again (`EscapeVlChecked`).
    pub(super) fn prepare_escape_vl(&mut self) {
        if self.lmc == 0 || !self.settings.update.five_phase || self.io.driver.escape_vl_status().ready {
            return;
        }
        if self.escape_vl_prefetch.is_some() {
            return;
        }
        let driver = self.io.driver.clone();
        self.escape_vl_prefetch = Some(self.tasks.spawn(async move {
            Internal::EscapeVlPrepared(driver.escape_vl_ready().await.map_err(|e| e.to_string()))
        }));
    }

    pub(super) fn on_escape_vl_prepared(&mut self, result: Result<(), String>) {
        self.escape_vl_prefetch = None;
        match result {
            Ok(()) => tracing::info!("escape VL ready (SL-to-VL tables programmed)"),
            Err(e) => tracing::warn!(error = %e, "escape VL not ready; retried after the next commit"),
        }
    }

    /// Installs a computed generation: the five-phase update (escape stage first), or a direct
    /// upload.
    fn install_generation(
        &mut self,
        mut inst: Install,
        c: Computed,
        stages: Option<StagedWrites>,
        five_phase: bool,
        restarted: bool,
    ) {
        if five_phase {
            // Split on the pool with the computation; on the loop only if the settings changed
            // meanwhile (a reload enabling the five-phase update).
            let stages = stages.unwrap_or_else(|| split_writes(&self.installed, &c.writes, &EscapeMask::new(&c.lids)));
            tracing::debug!(
                job = inst.flight.job,
                escape_blocks = stages.escape.len(),
                base_blocks = stages.base.len(),
                "five-phase update"
            );
            inst.five_phase = true;
            inst.stages.escape_pending = stages.escape;
            inst.stage = Stage::Escape {
                c: Box::new(c),
                base: stages.base,
            };
            self.install = Some(inst);
            let now = Instant::now().into_std();
            let mut a = Vec::new();
            if !restarted {
                self.update_restarts.clear();
                a = self.protocol.on(
                    now,
                    UInput::Begin {
                        generation: self.next_generation(),
                    },
                );
            }
            let at = self.protocol.attempt();
            a.extend(self.protocol.on(now, UInput::Computed { at, result: Ok(()) }));
            self.drive(a);
            return;
        }
        self.set_phase(Phase::Update);
        let writes = c.writes.clone();
        inst.stage = Stage::Uploading { c: Box::new(c) };
        self.install = Some(inst);
        self.spawn_upload(writes, true, false);
    }

    /// Uploads `writes` of the generation in flight (configuring LIDs first when they
    /// changed and `lids_first`); answered by `EscapeDone` or `UploadDone`.
    ///
    /// Retries: the driver retries each block write by itself (`max_retries`); the upload
    /// retries a failed batch `upload_retries` times with backoff (transient errors end
    /// written); blocks still failing stay dirty and the next generation writes them again.
    fn spawn_upload(&mut self, writes: Vec<LftBlockDiff>, lids_first: bool, escape: bool) {
        // The MFT and P_Key blocks go with the final stage (direct upload or the base stage of
        // the five-phase update): multicast and partitions do not depend on the escape LIDs.
        let side = match self.install.as_ref().and_then(|i| i.computed()) {
            Some(c) if !escape => self.side_writes(&c.side),
            _ => SideWrites::default(),
        };
        // The final stage of a VL-layered generation: its SL-to-VL plan goes in first.
        let vl_plan = match self.install.as_ref().and_then(|i| i.computed()) {
            Some(c) if !escape => self.data_vls_to_program(c),
            _ => None,
        };
        let Some(inst) = self.install.as_mut() else {
            return;
        };
        let Some(c) = inst.computed() else {
            return;
        };
        let job = inst.flight.job;
        let driver = self.io.driver.clone();
        let fabric = c.physical.clone();
        let lids = c.lids.clone();
        let lids_changed = c.lids_changed && lids_first;
        let u = &self.settings.update;
        let params = UploadParams {
            batch_blocks: u.batch_blocks(driver.lft_blocks_per_call()),
            parallelism: u.upload_parallelism,
            retries: u.upload_retries,
            backoff: Duration::from_millis(u.retry_backoff_ms),
            sa: self.io.sa.clone(),
        };
        inst.wait_for(self.tasks.spawn(async move {
            let programmed = match crate::upload::program_before_upload(&driver, vl_plan, &writes).await {
                Ok(p) => p,
                Err(outcome) => {
                    let u = Uploaded { job, outcome };
                    return Internal::UploadDone(u);
                }
            };
            let mut outcome = if lids_changed {
                match driver.configure_lids(&fabric, &lids).await {
                    Ok(()) => upload(driver.clone(), fabric, writes, params.clone()).await,
                    Err(e) => UploadOutcome {
                        failed: writes.iter().map(|w| (w.switch.0, w.block)).collect(),
                        error: Some(format!("LID configuration failed: {e}")),
                        ..UploadOutcome::default()
                    },
                }
            } else {
                upload(driver.clone(), fabric, writes, params.clone()).await
            };
            outcome.data_vls_programmed = programmed;
            if !side.is_empty() {
                outcome.side = Box::new(upload_side(driver, side, params).await);
            }
            let u = Uploaded { job, outcome };
            if escape {
                Internal::EscapeDone(u)
            } else {
                Internal::UploadDone(u)
            }
        }));
    }

    /// The protocol's `UploadEscape`: the escape stage of the generation in flight.
    pub(super) fn upload_escape(&mut self) {
        let Some(inst) = self.install.as_mut() else {
            return;
        };
        if !matches!(inst.stage, Stage::Escape { .. }) {
            return;
        }
        let writes = std::mem::take(&mut inst.stages.escape_pending);
        inst.stages.escape_keys = writes.iter().map(|w| (w.switch.0, w.block)).collect();
        inst.stages.escape_outcome = None;
        inst.stages.escape_written = writes.clone();
        self.spawn_upload(writes, false, true);
    }

    /// The protocol's `UploadBase`: the base stage (its blocks written by the escape stage
    /// too are counted once).
    pub(super) fn upload_base(&mut self) {
        let Some(inst) = self.install.as_mut() else {
            return;
        };
        let Stage::Escape { c, base } = std::mem::replace(&mut inst.stage, Stage::Computing) else {
            return;
        };
        inst.stages.overlap = base
            .iter()
            .map(|w| (w.switch.0, w.block))
            .filter(|k| inst.stages.escape_keys.contains(k))
            .collect();
        inst.stage = Stage::Uploading { c };
        inst.stages.base_written = base.clone();
        self.spawn_upload(base, false, false);
    }

    pub(super) fn on_escape_done(&mut self, Uploaded { job, outcome }: Uploaded) {
        if self.draining(job, true) {
            return self.drained(outcome);
        }
        let Some(inst) = self
            .install
            .as_mut()
            .filter(|i| i.flight.job == job && matches!(i.stage, Stage::Escape { .. }))
        else {
            tracing::error!(job, "escape upload result for an unknown job");
            return;
        };
        // As with a direct upload, blocks that could not be written stay dirty and are
        // retried; the generation goes on (aborting would leave the fault un-routed on every
        // healthy switch). The base stage reports the failure in `last_error`.
        if let Some(e) = &outcome.error {
            tracing::error!(failed = outcome.failed.len(), error = %e, "escape stage incomplete");
            self.dirty.extend(outcome.failed.iter().copied());
        }
        inst.stages.escape_outcome = Some(outcome);
        let at = self.protocol.attempt();
        self.protocol_input(UInput::EscapeUploaded { at, result: Ok(()) });
    }

    pub(super) fn on_upload_done(&mut self, Uploaded { job, outcome }: Uploaded) {
        if self.draining(job, false) {
            return self.drained(outcome);
        }
        let uploading = |i: &Install| i.flight.job == job && matches!(i.stage, Stage::Uploading { .. });
        if !self.install.as_ref().is_some_and(uploading) {
            tracing::error!(job, "upload result for an unknown job");
            return;
        }
        let mut inst = self.take_install();
        let Stage::Uploading { c } = std::mem::replace(&mut inst.stage, Stage::Computing) else {
            unreachable!("checked above");
        };
        self.note_data_vls(&outcome);
        if inst.five_phase {
            // Base stage of the five-phase update: Repath, then Commit. Blocks that failed
            // stay dirty and are retried by the next generation, as with a direct upload.
            // Every selected block is now written with the new tables (escape-only blocks by
            // the escape stage): the switches hold `c.lfts`, but for the failed blocks and
            // those of dead switches, which stay dirty.
            self.set_installed(&c);
            self.dirty.extend(outcome.failed.iter().copied());
            self.dirty.extend(c.skipped.iter().copied());
            inst.stages.escape_written.clear();
            inst.stages.base_written.clear();
            let outcome = inst.merge_stage_outcomes(outcome);
            // The subscribers move back to the base LIDs next: PathRecords give the SLs of
            // the base routes now in.
            if outcome.blocks_written > 0 || outcome.failed.is_empty() {
                self.publish_path_sls(&c);
            }
            inst.stage = Stage::Repath { c, outcome };
            self.install = Some(inst);
            let at = self.protocol.attempt();
            self.protocol_input(UInput::BaseUploaded { at, result: Ok(()) });
            return;
        }
        self.commit(inst, *c, outcome, None);
    }

    /// The switches hold the tables of `c` (but for the blocks left dirty): they are the
    /// installed tables, with the ports they forward through when `c` computed them.
    pub(super) fn set_installed(&mut self, c: &Computed) {
        self.installed = c.lfts.clone();
        self.routing_state = c.routing_state.clone();
        self.prepare_spare(self.routing_state.as_ref());
        self.installed_ports =
            (c.ports_in_use.num_switches() == c.lfts.num_switches()).then(|| (c.lfts.clone(), c.ports_in_use.clone()));
    }

    /// After a full routing the next (incremental) one would copy every row into fresh memory
    /// on the fault path: the spare is promised at once (the next routing waits for it rather
    /// than copying) and made on the blocking pool while the generation is uploaded. Nothing
    /// happens when the state has its spare already (incremental routings) or it is promised.
    fn prepare_spare(&self, state: Option<&Arc<fabric_routing::incremental::RoutingState>>) {
        if !self.settings.incremental {
            return;
        }
        let (Some(job), Ok(rt)) = (
            state.and_then(fabric_routing::incremental::RoutingState::reserve_spare),
            tokio::runtime::Handle::try_current(),
        ) else {
            return;
        };
        rt.spawn_blocking(move || job.run());
    }

    /// The protocol's `Commit`: the generation in Repath is committed (the protocol hears
    /// `Committed` once its state files are written).
    pub(super) fn commit_update(&mut self, at: fabric_update::AttemptId) {
        match self.install.take() {
            Some(mut inst) if matches!(inst.stage, Stage::Repath { .. }) => {
                let Stage::Repath { c, outcome } = std::mem::replace(&mut inst.stage, Stage::Computing) else {
                    unreachable!("checked above");
                };
                self.commit(inst, *c, outcome, Some(at));
            }
            other => {
                self.install = other;
                self.clear_progress();
                self.protocol_input(UInput::Committed { at });
            }
        }
    }
}
