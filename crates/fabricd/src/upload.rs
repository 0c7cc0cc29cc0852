//! LFT upload: the changed blocks of a generation go to the driver in batches, with bounded
//! parallelism (at most `parallelism` driver calls in flight) and retry with exponential
//! backoff of transient failures (on top of the driver's own per-block retries).
//!
//! A batch that finally fails is reported block by block so that the event loop keeps those
//! blocks dirty and writes them again with the next generation. A failed batch that spans
//! several switches is written again switch by switch first: one switch that cannot be reached
//! fails only its own blocks (`UploadOutcome::switch_errors` keeps each switch's error).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric_routing::LftBlockDiff;
use fabric_southbound::{LftBlockWrite, SouthboundDriver};
use fabric_topology::Fabric;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Upload tuning (from `[update]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadParams {
    pub batch_blocks: usize,
    pub parallelism: usize,
    pub retries: u32,
    pub backoff: Duration,
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
    /// Per switch (id) whose blocks failed: the error of its first failed batch (it names the
    /// switch's GUID).
    pub switch_errors: BTreeMap<u32, String>,
    pub elapsed: Duration,
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
    for chunk in writes.chunks(p.batch_blocks.max(1)) {
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
        set.spawn(async move {
            // The semaphore is never closed; a failure to acquire would only mean shutdown.
            let _permit = sem.acquire_owned().await.ok();
            let mut parts = Vec::new();
            match write_batch(driver.as_ref(), &batch, &p).await {
                Err((msg, retries)) if spans_switches(&batch) => {
                    // A batch spans switches: one switch that failed (its agent is down) must
                    // not fail the blocks of the others. Each switch's blocks again, on their
                    // own (block writes are idempotent); only the failing switch's stay failed.
                    tracing::debug!(error = %msg, "LFT batch failed, writing it switch by switch");
                    let mut first_retries = retries;
                    let mut from = 0;
                    while from < batch.len() {
                        let to = from
                            + batch[from..]
                                .iter()
                                .take_while(|w| w.switch == batch[from].switch)
                                .count();
                        let mut r = write_batch(driver.as_ref(), &batch[from..to], &p).await;
                        match &mut r {
                            Ok((_, x)) | Err((_, x)) => *x += std::mem::take(&mut first_retries),
                        }
                        parts.push((ids[from..to].to_vec(), r));
                        from = to;
                    }
                }
                r => parts.push((ids, r)),
            }
            parts
        });
    }
    while let Some(res) = set.join_next().await {
        match res {
            Ok(parts) => {
                for (ids, r) in parts {
                    match r {
                        Ok((written, retries)) => {
                            out.blocks_written += written;
                            out.retries += retries;
                        }
                        Err((msg, retries)) => {
                            out.retries += retries;
                            if let Some(&(switch, _)) = ids.first() {
                                out.switch_errors.entry(switch).or_insert_with(|| msg.clone());
                            }
                            out.failed.extend(ids);
                            out.error.get_or_insert(msg);
                        }
                    }
                }
            }
            Err(join) => {
                // A panicking driver: the batch's blocks are unknown, but we lost their ids.
                out.error.get_or_insert(format!("upload task failed: {join}"));
            }
        }
    }
    out.failed.sort_unstable();
    out.elapsed = t0.elapsed();
    out
}

/// One driver call for `batch`, retrying transient failures with backoff: blocks written and
/// retries, or the error and the retries.
async fn write_batch(
    driver: &dyn SouthboundDriver,
    batch: &[LftBlockWrite],
    p: &UploadParams,
) -> Result<(u64, u64), (String, u64)> {
    let mut retries = 0u64;
    let mut attempt = 0u32;
    loop {
        match driver.write_lft_blocks(batch).await {
            Ok(r) => return Ok((r.blocks_written as u64, retries + r.retries as u64)),
            Err(e) if e.is_transient() && attempt < p.retries => {
                attempt += 1;
                retries += 1;
                tracing::debug!(error = %e, attempt, "LFT batch failed, retrying");
                tokio::time::sleep(p.backoff.saturating_mul(1 << (attempt - 1).min(10))).await;
            }
            Err(e) => return Err((e.to_string(), retries)),
        }
    }
}

/// Whether a (switch-major) batch holds blocks of more than one switch.
fn spans_switches(batch: &[LftBlockWrite]) -> bool {
    batch
        .first()
        .is_some_and(|f| batch.iter().any(|w| w.switch != f.switch))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fabric_routing::BLOCK_SIZE;
    use fabric_southbound::{MockConfig, MockFabric};
    use fabric_topology::{FabricBuilder, SwitchId};

    fn two_switches() -> Fabric {
        let mut b = FabricBuilder::new();
        let a = b.add_switch(0x10, "a", 8).unwrap();
        let c = b.add_switch(0x11, "b", 8).unwrap();
        b.connect_switches(a, 1, c, 1).unwrap();
        b.build()
    }

    fn writes(n: u32) -> Vec<LftBlockDiff> {
        (0..n)
            .map(|i| LftBlockDiff {
                switch: SwitchId(i % 2),
                block: i / 2,
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
        // Two batches, each retried twice by the upload layer; the first spans both switches
        // (blocks (0,0) (1,0) (0,1)), so its three one-switch runs are tried again on their own,
        // each retried twice too: 2 + 3 * 2 + 2.
        assert_eq!(out.retries, 10);
        assert_eq!(out.switch_errors.keys().copied().collect::<Vec<_>>(), vec![0, 1]);
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

    #[tokio::test]
    async fn a_switch_that_fails_fails_only_its_own_blocks() {
        // The driver knows 0x10 and 0x11 only: every write to 0x12 fails (as to a switch whose
        // agent is down), in a batch that also holds the other switches' blocks.
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
