//! LFT upload: the changed blocks of a generation go to the driver in batches, with bounded
//! parallelism (at most `parallelism` driver calls in flight).
//!
//! **The retry policy is owned here.** A batch the driver reports failed with a transient
//! error is retried `retries` times (`[update] upload_retries`) with exponential backoff from
//! `backoff` (`retry_backoff_ms`), so transient errors, including an outage of a few seconds,
//! end written. Inside one `write_lft_blocks` call a driver may resend a request that got no
//! answer, a bounded number of times (the mock's `max_retries`, umad's SMP resends, oob's
//! `max_retries`): that is part of the one attempt, like a transport's retransmission, and is
//! counted in `WriteReport::retries` (added to the outcome's `retries`); whether a failed
//! batch is tried again, when, and how often is decided here only. A batch that still fails,
//! or whose task panicked (a driver bug), is reported block by block, so that the event loop
//! keeps those blocks dirty and the next generation writes them again.
//!
//! A batch never mixes switches, so that a batch that fails names one switch.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric_routing::LftBlockDiff;
use fabric_southbound::{
    DataVlPlan, DriverError, LftBlockWrite, MftBlockWrite, PkeyBlockWrite, PkeyPort, SouthboundDriver,
};
use fabric_topology::{Fabric, Guid};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Upload tuning (from `[update]`), and who follows the acknowledged writes.
#[derive(Clone, Debug)]
pub struct UploadParams {
    pub batch_blocks: usize,
    pub parallelism: usize,
    pub retries: u32,
    pub backoff: Duration,
    /// The SA snapshots the daemon keeps (mock, oob): told every batch a switch acknowledged,
    /// as soon as it is, so that SA answers follow the switches during an update.
    pub sa: Option<Arc<crate::sa::SaPublisher>>,
}

/// What an upload did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UploadOutcome {
    /// Blocks confirmed written.
    pub blocks_written: u64,
    /// Retries (driver-internal plus ours).
    pub retries: u64,
    /// Blocks (switch id, block) whose batch failed.
    pub failed: Vec<(u32, u32)>,
    /// First error message, when something failed.
    pub error: Option<String>,
    /// Error of each switch (dense id) with failed blocks.
    pub switch_errors: BTreeMap<u32, String>,
    pub elapsed: Duration,
    /// The MFT and P_Key blocks written after the LFT blocks (final upload stage only).
    pub side: Box<SideOutcome>,
    /// The data-VL plan programmed before the LFT blocks (a VL-layered generation's base
    /// stage, see `event_loop::vl`).
    pub data_vls_programmed: Option<fabric_southbound::DataVlPlan>,
}

/// Programs `plan` (when given) before `writes` are uploaded; `Err`: the outcome of an upload
/// of which nothing was written, naming the driver's error.
pub async fn program_before_upload(
    driver: &Arc<dyn SouthboundDriver>,
    plan: Option<DataVlPlan>,
    writes: &[LftBlockDiff],
) -> Result<Option<DataVlPlan>, UploadOutcome> {
    let Some(plan) = plan else {
        return Ok(None);
    };
    let t = std::time::Instant::now();
    match driver.program_data_vls(&plan).await {
        Ok(()) => {
            tracing::info!(
                data_vls = plan.data_vls,
                ms = t.elapsed().as_secs_f64() * 1e3,
                "data VLs programmed (SL-to-VL tables of every port)"
            );
            Ok(Some(plan))
        }
        Err(e) => {
            let error = format!(
                "data VLs not programmed ({} VLs needed by the routing's VL layering): {e}; no base table of this \
                 generation written",
                plan.data_vls
            );
            tracing::error!(data_vls = plan.data_vls, error = %e, "{error}");
            Err(UploadOutcome {
                failed: writes.iter().map(|w| (w.switch.0, w.block)).collect(),
                error: Some(error),
                elapsed: t.elapsed(),
                ..UploadOutcome::default()
            })
        }
    }
}

/// Uploads `writes` (switch-major) through `driver`.
pub async fn upload(
    driver: Arc<dyn SouthboundDriver>,
    fabric: Arc<Fabric>,
    writes: Vec<LftBlockDiff>,
    p: UploadParams,
) -> UploadOutcome {
    let t0 = Instant::now();
    let mut out = UploadOutcome::default();
    if writes.is_empty() {
        return out;
    }
    let sem = Arc::new(Semaphore::new(p.parallelism.max(1)));
    let mut set = JoinSet::new();
    let acks = p.sa.clone().map(SaAcks::start);
    // Block ids of each task, to report a panicked task's blocks as failed.
    let mut task_ids: HashMap<tokio::task::Id, Vec<(u32, u32)>> = HashMap::new();
    // Batches never mix switches: a failed batch is one switch's failure.
    let per_switch = writes.chunk_by(|a, b| a.switch == b.switch);
    for chunk in per_switch.flat_map(|s| s.chunks(p.batch_blocks.max(1))) {
        let batch: Vec<LftBlockWrite> = chunk
            .iter()
            .map(|d| LftBlockWrite {
                switch: fabric.switch(d.switch).guid,
                block: d.block,
                entries: d.entries,
            })
            .collect();
        let ids: Vec<(u32, u32)> = chunk.iter().map(|d| (d.switch.0, d.block)).collect();
        let driver = driver.clone();
        let sem = sem.clone();
        let p = p.clone();
        let acked = acks.as_ref().map(|a| a.tx.clone());
        let task_ids_entry = ids.clone();
        let handle = set.spawn(async move {
            // The semaphore is never closed; a failure to acquire would only mean shutdown.
            let _permit = sem.acquire_owned().await.ok();
            let r = with_retries(&p, "LFT", || driver.write_lft_blocks(&batch))
                .await
                .map_err(|(e, n)| (e.to_string(), n));
            if let (Ok(_), Some(tx)) = (&r, acked) {
                // The applier outlives every batch task (it ends when their senders are gone).
                let _ = tx.send(batch);
            }
            (ids, r)
        });
        task_ids.insert(handle.id(), task_ids_entry);
    }
    let fail = |out: &mut UploadOutcome, ids: Vec<(u32, u32)>, msg: String| {
        if let Some(&(switch, _)) = ids.first() {
            out.switch_errors.entry(switch).or_insert_with(|| msg.clone());
        }
        out.failed.extend(ids);
        out.error.get_or_insert(msg);
    };
    while let Some(res) = set.join_next_with_id().await {
        match res {
            Ok((id, (_, Ok((written, retries))))) => {
                task_ids.remove(&id);
                out.blocks_written += written;
                out.retries += retries;
            }
            Ok((id, (ids, Err((msg, retries))))) => {
                task_ids.remove(&id);
                out.retries += retries;
                fail(&mut out, ids, msg);
            }
            Err(join) => {
                // A panicking driver: what the batch wrote is unknown, so every block of it is
                // failed (kept dirty and written again).
                let ids = task_ids.remove(&join.id()).unwrap_or_default();
                tracing::error!(blocks = ids.len(), error = %join, "LFT upload task failed");
                fail(&mut out, ids, format!("upload task failed: {join}"));
            }
        }
    }
    if let Some(acks) = acks {
        acks.finish().await;
    }
    out.failed.sort_unstable();
    out.elapsed = t0.elapsed();
    out
}

/// The batches the switches acknowledged, on their way to the SA snapshots: one task applies
/// them in acknowledgement order, each time all that are queued at once. Applying makes a new SA
/// snapshot (copy-on-write of the chunks written, `fabric_sa::LftTable`), so it runs on the blocking pool
/// (the event loop, the other batches and the subscribers' acks keep the runtime's workers);
/// one hand-off to that pool per acknowledged batch (~10 000 one-switch batches per fault at
/// 65 536 nodes) cost a thread wake-up each, one per round of the applier does not (issue #17).
/// The SA follows the switches during the update; every acknowledged block is applied before
/// the upload returns.
struct SaAcks {
    tx: tokio::sync::mpsc::UnboundedSender<Vec<LftBlockWrite>>,
    applier: tokio::task::JoinHandle<()>,
}

impl SaAcks {
    fn start(sa: Arc<crate::sa::SaPublisher>) -> Self {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<LftBlockWrite>>();
        let applier = tokio::spawn(async move {
            while let Some(mut acked) = rx.recv().await {
                while let Ok(more) = rx.try_recv() {
                    acked.extend(more);
                }
                let sa = sa.clone();
                if tokio::task::spawn_blocking(move || sa.lft_blocks_acknowledged(&acked))
                    .await
                    .is_err()
                {
                    tracing::error!("applying acknowledged LFT blocks to the SA snapshot failed");
                }
            }
        });
        SaAcks { tx, applier }
    }

    /// Waits until every batch acknowledged so far is applied (the batch tasks are done).
    async fn finish(self) {
        drop(self.tx);
        if self.applier.await.is_err() {
            tracing::error!("the task applying acknowledged LFT blocks to the SA snapshot failed");
        }
    }
}

/// One driver write call under the upload's retry policy: a transient error is retried
/// `retries` times with a backoff doubling from `backoff`. `Ok((written, retries))`, or the
/// last error with the retries spent.
async fn with_retries<F, Fut>(p: &UploadParams, what: &str, mut call: F) -> Result<(u64, u64), (DriverError, u64)>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<fabric_southbound::WriteReport, DriverError>>,
{
    let mut retries = 0u64;
    let mut attempt = 0u32;
    loop {
        match call().await {
            Ok(r) => return Ok((r.blocks_written as u64, retries + r.retries as u64)),
            Err(e) if e.is_transient() && attempt < p.retries => {
                attempt += 1;
                retries += 1;
                tracing::debug!(error = %e, attempt, "{what} batch failed, retrying");
                tokio::time::sleep(p.backoff.saturating_mul(1 << (attempt - 1).min(10))).await;
            }
            Err(e) => return Err((e, retries)),
        }
    }
}

/// The multicast forwarding table and P_Key table blocks of a generation, addressed by GUID.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SideWrites {
    pub mft: Vec<MftBlockWrite>,
    pub pkey: Vec<PkeyBlockWrite>,
}

impl SideWrites {
    pub fn is_empty(&self) -> bool {
        self.mft.is_empty() && self.pkey.is_empty()
    }
}

/// What [`upload_side`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SideOutcome {
    pub mft_written: u64,
    /// Switches (node GUID) with an MFT block that was not written.
    pub mft_failed: BTreeSet<Guid>,
    /// The first MFT error.
    pub mft_error: Option<String>,
    pub pkey_written: u64,
    /// Ports whose P_Key table was not (wholly) written.
    pub pkey_failed: BTreeSet<PkeyPort>,
    /// The first P_Key table error.
    pub pkey_error: Option<String>,
    pub retries: u64,
    /// The driver does not program MFTs at all (its error).
    pub mft_unsupported: Option<String>,
    /// The driver does not program P_Key tables at all (its error).
    pub pkey_unsupported: Option<String>,
}

/// Uploads the MFT blocks (one batch per switch) and the P_Key blocks (one batch per port)
/// with the same parallelism and retry policy as the LFT blocks. A driver that does not
/// support one kind fails all of its writes (named in the error, never retried).
pub async fn upload_side(driver: Arc<dyn SouthboundDriver>, writes: SideWrites, p: UploadParams) -> SideOutcome {
    let mut out = SideOutcome::default();
    let sem = Arc::new(Semaphore::new(p.parallelism.max(1)));
    type Key = Result<Guid, PkeyPort>;
    type Written = Result<(u64, u64), (DriverError, u64)>;
    let mut set: JoinSet<(Key, Written)> = JoinSet::new();
    let mut tasks: HashMap<tokio::task::Id, Key> = HashMap::new();
    for chunk in writes.mft.chunk_by(|a, b| a.switch == b.switch) {
        for batch in chunk.chunks(p.batch_blocks.max(1)) {
            let batch = batch.to_vec();
            let key = Ok(batch[0].switch);
            let (driver, sem, p) = (driver.clone(), sem.clone(), p.clone());
            let h = set.spawn(async move {
                let _permit = sem.acquire_owned().await.ok();
                (key, with_retries(&p, "MFT", || driver.write_mft_blocks(&batch)).await)
            });
            tasks.insert(h.id(), key);
        }
    }
    for chunk in writes.pkey.chunk_by(|a, b| a.port == b.port) {
        let batch = chunk.to_vec();
        let key = Err(batch[0].port);
        let (driver, sem, p) = (driver.clone(), sem.clone(), p.clone());
        let h = set.spawn(async move {
            let _permit = sem.acquire_owned().await.ok();
            (
                key,
                with_retries(&p, "P_Key", || driver.write_pkey_blocks(&batch)).await,
            )
        });
        tasks.insert(h.id(), key);
    }
    while let Some(res) = set.join_next_with_id().await {
        let (key, r) = match res {
            Ok((id, (key, r))) => {
                tasks.remove(&id);
                (key, r)
            }
            Err(join) => {
                let Some(key) = tasks.remove(&join.id()) else {
                    continue;
                };
                let e = DriverError::Protocol {
                    guid: None,
                    message: format!("upload task failed: {join}"),
                };
                (key, Err((e, 0)))
            }
        };
        match (key, r) {
            (Ok(_), Ok((w, r))) => {
                out.mft_written += w;
                out.retries += r;
            }
            (Err(_), Ok((w, r))) => {
                out.pkey_written += w;
                out.retries += r;
            }
            (Ok(sw), Err((e, r))) => {
                out.retries += r;
                out.mft_failed.insert(sw);
                if matches!(e, DriverError::Unsupported(_)) {
                    out.mft_unsupported.get_or_insert_with(|| e.to_string());
                }
                out.mft_error.get_or_insert_with(|| e.to_string());
            }
            (Err(port), Err((e, r))) => {
                out.retries += r;
                out.pkey_failed.insert(port);
                if matches!(e, DriverError::Unsupported(_)) {
                    out.pkey_unsupported.get_or_insert_with(|| e.to_string());
                }
                out.pkey_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use fabric_mock::{MockConfig, MockFabric};
    use fabric_routing::BLOCK_SIZE;
    use fabric_topology::{FabricBuilder, SwitchId};

    fn two_switches() -> Fabric {
        let mut b = FabricBuilder::new();
        let a = b.add_switch(0x10, "a", 8).unwrap();
        let c = b.add_switch(0x11, "b", 8).unwrap();
        b.connect_switches(a, 1, c, 1).unwrap();
        b.build()
    }

    /// `n` blocks, switch-major (as the event loop hands them over): half on each switch.
    fn writes(n: u32) -> Vec<LftBlockDiff> {
        (0..n)
            .map(|i| LftBlockDiff {
                switch: SwitchId(u32::from(i >= n / 2)),
                block: i % (n / 2),
                entries: [(i % 7) as u8; BLOCK_SIZE],
            })
            .collect()
    }

    fn params() -> UploadParams {
        UploadParams {
            batch_blocks: 3,
            parallelism: 2,
            retries: 2,
            backoff: Duration::from_millis(1),
            sa: None,
        }
    }

    #[tokio::test]
    async fn writes_every_block_in_batches() {
        let f = two_switches();
        let mock = Arc::new(MockFabric::new(f.clone()));
        let out = upload(mock.clone(), Arc::new(f), writes(10), params()).await;
        assert_eq!(out.blocks_written, 10);
        assert!(out.failed.is_empty() && out.error.is_none());
        let lfts = mock.installed_lfts();
        assert_eq!(lfts[&0x10].len(), 5 * BLOCK_SIZE);
        assert_eq!(lfts[&0x11][4 * BLOCK_SIZE], 9 % 7);
        assert_eq!(mock.counters().write_batches, 4);
    }

    #[tokio::test]
    async fn failures_are_reported_per_block() {
        let f = two_switches();
        let cfg = MockConfig {
            error_rate: 1.0,
            max_retries: 0,
            ..MockConfig::default()
        };
        let mock = Arc::new(MockFabric::new(f.clone()).with_config(cfg).unwrap());
        let out = upload(mock, Arc::new(f), writes(4), params()).await;
        assert_eq!(out.blocks_written, 0);
        assert_eq!(out.failed, vec![(0, 0), (0, 1), (1, 0), (1, 1)]);
        // Two batches, each retried twice by the upload layer.
        assert_eq!(out.retries, 4);
        assert!(out.error.unwrap().contains("transient failure"));
    }

    #[tokio::test]
    async fn transient_errors_are_retried_to_success() {
        let f = two_switches();
        let cfg = MockConfig {
            error_rate: 0.3,
            max_retries: 10,
            seed: 7,
            ..MockConfig::default()
        };
        let mock = Arc::new(MockFabric::new(f.clone()).with_config(cfg).unwrap());
        let out = upload(mock.clone(), Arc::new(f), writes(40), params()).await;
        assert_eq!(out.blocks_written, 40);
        assert!(out.retries > 0, "a 30 % error rate over 40 blocks retries something");
        assert_eq!(mock.counters().blocks_written, 40);
    }

    /// The mock fabric whose first LFT batch write panics (a driver bug).
    struct PanicsOnce {
        mock: Arc<MockFabric>,
        panicked: std::sync::atomic::AtomicBool,
    }

    #[async_trait::async_trait]
    impl SouthboundDriver for PanicsOnce {
        fn caps(&self) -> fabric_southbound::DriverCaps {
            self.mock.caps()
        }
        async fn discover(&self) -> Result<Fabric, fabric_southbound::DriverError> {
            self.mock.discover().await
        }
        fn subscribe_events(&self) -> tokio::sync::mpsc::UnboundedReceiver<fabric_topology::FabricEvent> {
            self.mock.subscribe_events()
        }
        async fn configure_lids(
            &self,
            f: &Fabric,
            l: &fabric_routing::LidPlan,
        ) -> Result<(), fabric_southbound::DriverError> {
            self.mock.configure_lids(f, l).await
        }
        async fn write_lft_blocks(
            &self,
            b: &[LftBlockWrite],
        ) -> Result<fabric_southbound::WriteReport, fabric_southbound::DriverError> {
            if !self.panicked.swap(true, std::sync::atomic::Ordering::SeqCst) {
                panic!("driver bug: first batch");
            }
            self.mock.write_lft_blocks(b).await
        }
        async fn read_lft_block(
            &self,
            s: fabric_topology::Guid,
            b: u32,
        ) -> Result<[u8; BLOCK_SIZE], fabric_southbound::DriverError> {
            self.mock.read_lft_block(s, b).await
        }
        async fn set_port_state(
            &self,
            s: fabric_topology::Guid,
            p: fabric_topology::PortNum,
            up: bool,
        ) -> Result<(), fabric_southbound::DriverError> {
            self.mock.set_port_state(s, p, up).await
        }
        async fn set_switch_state(
            &self,
            s: fabric_topology::Guid,
            up: bool,
        ) -> Result<(), fabric_southbound::DriverError> {
            self.mock.set_switch_state(s, up).await
        }
    }

    #[tokio::test]
    async fn a_panicked_batch_is_reported_failed_and_its_blocks_are_retried() {
        let f = two_switches();
        let mock = Arc::new(MockFabric::new(f.clone()));
        let driver = Arc::new(PanicsOnce {
            mock: mock.clone(),
            panicked: false.into(),
        });
        // One task at a time: the first batch to run (3 blocks of one switch) panics.
        let p = UploadParams {
            parallelism: 1,
            ..params()
        };
        let all = writes(10);
        let out = upload(driver.clone(), Arc::new(f.clone()), all.clone(), p.clone()).await;
        assert_eq!(out.failed.len(), 3, "the panicked batch's ids are failed: {out:?}");
        assert_eq!(out.blocks_written, 7);
        assert!(out.error.as_deref().unwrap().contains("upload task failed"), "{out:?}");
        let (sw, _) = out.failed[0];
        assert!(out.switch_errors[&sw].contains("panic"), "{out:?}");
        // The event loop keeps them dirty and writes them again: the retry writes them.
        let again: Vec<LftBlockDiff> = all
            .into_iter()
            .filter(|d| out.failed.contains(&(d.switch.0, d.block)))
            .collect();
        let retry = upload(driver, Arc::new(f), again, p).await;
        assert_eq!((retry.blocks_written, retry.failed.len()), (3, 0), "{retry:?}");
        let lfts = mock.installed_lfts();
        for (i, d) in writes(10).iter().enumerate() {
            let row = &lfts[&[0x10, 0x11][d.switch.idx()]];
            let at = d.block as usize * BLOCK_SIZE;
            assert_eq!(row[at..at + BLOCK_SIZE], d.entries, "block {i} holds its entries");
        }
    }

    #[tokio::test]
    async fn a_batch_holds_the_blocks_of_one_switch() {
        let f = two_switches();
        let cfg = MockConfig {
            unreachable_switches: vec![0x11],
            max_retries: 0,
            ..MockConfig::default()
        };
        let mock = Arc::new(MockFabric::new(f.clone()).with_config(cfg).unwrap());
        let out = upload(mock, Arc::new(f), writes(10), params()).await;
        assert_eq!(out.blocks_written, 5, "every block of the reachable switch is written");
        assert_eq!(out.failed, (0..5).map(|b| (1, b)).collect::<Vec<_>>());
        assert_eq!(out.switch_errors.keys().copied().collect::<Vec<_>>(), vec![1]);
    }

    #[tokio::test]
    async fn the_sa_follows_exactly_the_blocks_a_switch_acknowledged() {
        let f = two_switches();
        let cfg = MockConfig {
            unreachable_switches: vec![0x11],
            max_retries: 0,
            ..MockConfig::default()
        };
        let mock = Arc::new(MockFabric::new(f.clone()).with_config(cfg).unwrap());
        let service = Arc::new(fabric_sa::SaService::new(
            fabric_sa::registry::Registry::default(),
            None,
        ));
        let sa = Arc::new(crate::sa::SaPublisher::new(service, crate::sa::local_sm(), None));
        // A snapshot build pending: what the switches acknowledge is kept for it.
        sa.request_build();
        let p = UploadParams {
            sa: Some(sa.clone()),
            ..params()
        };
        let out = upload(mock, Arc::new(f), writes(10), p).await;
        assert_eq!(out.blocks_written, 5);
        let mut kept = sa.kept_for_replay();
        kept.sort_unstable();
        assert_eq!(
            kept,
            (0..5).map(|b| (0x10, b)).collect::<Vec<_>>(),
            "only 0x10 took its blocks"
        );
    }

    #[tokio::test]
    async fn a_switch_that_fails_fails_only_its_own_blocks() {
        // The driver knows 0x10 and 0x11 only: every write to 0x12 fails (as to a switch whose
        // agent is down), next to the other switches' blocks: they are written, its own fail.
        let mut b = FabricBuilder::new();
        for g in [0x10, 0x11, 0x12] {
            b.add_switch(g, format!("s{g:x}"), 8).unwrap();
        }
        let three = b.build();
        let mock = Arc::new(MockFabric::new(two_switches()));
        let writes: Vec<LftBlockDiff> = (0..6)
            .map(|i| LftBlockDiff {
                switch: SwitchId(i / 2),
                block: i % 2,
                entries: [1; BLOCK_SIZE],
            })
            .collect();
        let p = UploadParams {
            batch_blocks: 6,
            ..params()
        };
        let out = upload(mock.clone(), Arc::new(three), writes, p).await;
        assert_eq!(out.blocks_written, 4);
        assert_eq!(out.failed, vec![(2, 0), (2, 1)]);
        assert_eq!(out.switch_errors.len(), 1);
        assert!(
            out.switch_errors[&2].contains("0x0000000000000012"),
            "{:?}",
            out.switch_errors
        );
        assert_eq!(mock.counters().blocks_written, 4);
    }
}
