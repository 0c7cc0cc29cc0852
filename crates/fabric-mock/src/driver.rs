//! The [`SouthboundDriver`] implementation of the simulated fabric: discovery from the physical
//! state, LID configuration, LFT block writes with injected errors and latency, drills.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use async_trait::async_trait;
use fabric_routing::{LidPlan, BLOCK_SIZE, NO_ROUTE};
use fabric_southbound::{
    CounterPort, CountersReading, DataVlPlan, DriverCaps, DriverError, LftBlockWrite, MftBlockWrite, PkeyBlockWrite,
    PkeyPort, SouthboundDriver, WriteReport, MFT_BLOCK_SIZE, PKEY_BLOCK_SIZE,
};
use fabric_topology::{fmt_guid, Fabric, FabricEvent, Guid, Lid, LinkState, PortNum, Remote, SwitchId};
use rand::Rng;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use crate::trace::LidTable;
use crate::{bump, lock, read, write, BlockWritten, MockConfig, MockFabric};

impl MockFabric {
    /// Performs a batch of `n` block writes the way every table write of the mock goes: in
    /// waves of at most [`MockConfig::max_parallel`] attempts, each wave costing one
    /// [`MockConfig::op_latency`]; an attempt that fails transiently (`Ok(false)`) is re-queued
    /// behind the rest of the batch up to [`MockConfig::max_retries`] times, then the batch
    /// fails with [`DriverError::Transient`] naming `guid_of(i)`. An `Err` of an attempt ends the
    /// batch at once.
    pub(crate) async fn run_batch(
        &self,
        cfg: &MockConfig,
        n: usize,
        op: &'static str,
        guid_of: impl Fn(usize) -> Guid + Send + Sync,
        mut attempt: impl FnMut(usize) -> Result<bool, DriverError> + Send,
    ) -> Result<WriteReport, DriverError> {
        let mut queue: VecDeque<(usize, u32)> = (0..n).map(|i| (i, 0)).collect();
        let mut report = WriteReport::default();
        while !queue.is_empty() {
            if !cfg.op_latency.is_zero() {
                tokio::time::sleep(cfg.op_latency).await;
            }
            for _ in 0..cfg.max_parallel.min(queue.len()) {
                let Some((i, failures)) = queue.pop_front() else { break };
                if attempt(i)? {
                    report.blocks_written += 1;
                } else if failures >= cfg.max_retries {
                    return Err(DriverError::Transient {
                        guid: guid_of(i),
                        op,
                        attempts: failures + 1,
                    });
                } else {
                    report.retries += 1;
                    queue.push_back((i, failures + 1));
                }
            }
        }
        Ok(report)
    }

    /// The physical state as a list of events to apply to the cabling snapshot.
    fn state_events(&self) -> Vec<FabricEvent> {
        let mut evs = Vec::new();
        for (i, s) in self.topo.switches().iter().enumerate() {
            let sid = SwitchId(i as u32);
            let up = self.switch_up[i].load(Ordering::SeqCst);
            if up != s.up {
                evs.push(if up {
                    FabricEvent::SwitchUp(s.guid)
                } else {
                    FabricEvent::SwitchDown(s.guid)
                });
            }
            for (pn, p) in s.external_ports() {
                if p.remote == Remote::None {
                    continue;
                }
                let up = self.port_up[self.port_idx(sid, pn)].load(Ordering::SeqCst);
                let this_end = p.state == LinkState::Up;
                let other_end = match p.remote {
                    Remote::Switch { sw, port } => self.topo.switch(sw).ports[port as usize].state == LinkState::Up,
                    _ => this_end,
                };
                // A link event sets both recorded ends; emit one wherever they differ from `up`.
                let (switch, port) = (s.guid, pn);
                if up && !(this_end && other_end) {
                    evs.push(FabricEvent::LinkUp { switch, port });
                } else if !up && (this_end || other_end) {
                    evs.push(FabricEvent::LinkDown { switch, port });
                }
            }
        }
        for (i, e) in self.topo.end_ports().iter().enumerate() {
            let up = self.end_port_up[i].load(Ordering::SeqCst);
            if up != e.up {
                evs.push(if up {
                    FabricEvent::EndPortUp(e.port_guid)
                } else {
                    FabricEvent::EndPortDown(e.port_guid)
                });
            }
        }
        evs
    }

    /// One attempt at writing one block: `Ok(true)` written, `Ok(false)` injected failure.
    fn write_block_once(&self, sw: SwitchId, w: &LftBlockWrite, cfg: &MockConfig) -> Result<bool, DriverError> {
        let error_rate = cfg.error_rate;
        if !self.switch_up[sw.idx()].load(Ordering::SeqCst) || cfg.unreachable_switches.contains(&w.switch) {
            return Err(DriverError::Unreachable { guid: w.switch });
        }
        bump(&self.counters.write_attempts, 1);
        let mut cell = write(&self.cells[sw.idx()]);
        if error_rate > 0.0 && cell.rng.gen::<f64>() < error_rate {
            bump(&self.counters.write_failures, 1);
            return Ok(false);
        }
        let start = w.block as usize * BLOCK_SIZE;
        if cell.lft.len() < start + BLOCK_SIZE {
            cell.lft.resize(start + BLOCK_SIZE, NO_ROUTE);
        }
        cell.lft[start..start + BLOCK_SIZE].copy_from_slice(&w.entries);
        let seq = self.counters.blocks_written.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(observe) = read(&self.observer).as_ref() {
            observe(&BlockWritten {
                switch: sw,
                guid: w.switch,
                block: w.block,
                entries: &w.entries,
                seq,
            });
        }
        Ok(true)
    }
}

#[async_trait]
impl SouthboundDriver for MockFabric {
    fn caps(&self) -> DriverCaps {
        let cfg = read(&self.config);
        DriverCaps {
            name: "mock",
            max_lid: cfg.max_lid,
            max_lft_blocks: Some(cfg.max_lft_blocks()),
            escape_vl: cfg.escape_vl,
        }
    }

    async fn discover(&self) -> Result<Fabric, DriverError> {
        self.sleep_op().await;
        bump(&self.counters.sweeps, 1);
        let evs = {
            let _g = lock(&self.drill);
            self.state_events()
        };
        if evs.is_empty() {
            return Ok(self.topo.clone());
        }
        self.topo
            .apply(&evs)
            .map(|f| f.with_generation(0))
            .map_err(|e| DriverError::Protocol {
                guid: None,
                message: format!("simulated sweep: {e}"),
            })
    }

    fn subscribe_events(&self) -> UnboundedReceiver<FabricEvent> {
        let (tx, rx) = unbounded_channel();
        lock(&self.subscribers).push(tx);
        rx
    }

    async fn configure_lids(&self, fabric: &Fabric, plan: &LidPlan) -> Result<(), DriverError> {
        self.sleep_op().await;
        let max = read(&self.config).max_lid;
        plan.check_covers(fabric)
            .map_err(|e| DriverError::InvalidLidPlan(e.to_string()))?;
        if plan.lmc > 7 {
            return Err(DriverError::InvalidLidPlan(format!("LMC {} is above 7", plan.lmc)));
        }
        let span: Lid = 1 << plan.lmc;
        let mut table = LidTable::unassigned(self.topo.num_switches(), self.topo.num_end_ports());
        table.lmc = plan.lmc;
        let mut owner: HashMap<Lid, Guid> = HashMap::new();
        let mut claim = |lid: Lid, guid: Guid| -> Result<(), DriverError> {
            if lid > max {
                return Err(DriverError::InvalidLidPlan(format!(
                    "LID {lid} of {} is above the highest unicast LID {max}",
                    fmt_guid(guid)
                )));
            }
            match owner.insert(lid, guid) {
                Some(first) => Err(DriverError::LidConflict {
                    lid,
                    first,
                    second: guid,
                }),
                None => Ok(()),
            }
        };
        for (s, &lid) in fabric.switches().iter().zip(&plan.switch_lid) {
            let sw = self.switch_id(s.guid)?;
            if lid != 0 {
                claim(lid, s.guid)?;
                table.switch_lid[sw.idx()] = lid;
            }
        }
        for (e, &base) in fabric.end_ports().iter().zip(&plan.end_port_base) {
            let ep = self
                .topo
                .end_port_by_guid(e.port_guid)
                .ok_or(DriverError::UnknownEndPort(e.port_guid))?;
            if base == 0 {
                continue;
            }
            if base % span != 0 {
                return Err(DriverError::InvalidLidPlan(format!(
                    "base LID {base} of {} is not aligned to 2^LMC = {span}",
                    fmt_guid(e.port_guid)
                )));
            }
            for lid in base..base.saturating_add(span) {
                claim(lid, e.port_guid)?;
            }
            table.end_port_base[ep.idx()] = base;
        }
        *write(&self.lids) = Arc::new(table);
        bump(&self.counters.lid_configs, 1);
        Ok(())
    }

    async fn write_lft_blocks(&self, blocks: &[LftBlockWrite]) -> Result<WriteReport, DriverError> {
        let cfg = self.config();
        let max_blocks = cfg.max_lft_blocks();
        bump(&self.counters.write_batches, 1);
        // Reject bad addresses before writing anything.
        let mut ids = Vec::with_capacity(blocks.len());
        for w in blocks {
            ids.push(self.switch_id(w.switch)?);
            if w.block >= max_blocks {
                return Err(DriverError::BlockOutOfRange {
                    guid: w.switch,
                    block: w.block,
                    max_blocks,
                });
            }
        }
        self.run_batch(
            &cfg,
            blocks.len(),
            "LFT block write",
            |i| blocks[i].switch,
            |i| self.write_block_once(ids[i], &blocks[i], &cfg),
        )
        .await
    }

    async fn read_lft_block(&self, switch: Guid, block: u32) -> Result<[u8; BLOCK_SIZE], DriverError> {
        self.sleep_op().await;
        let sw = self.switch_id(switch)?;
        let max_blocks = read(&self.config).max_lft_blocks();
        if block >= max_blocks {
            return Err(DriverError::BlockOutOfRange {
                guid: switch,
                block,
                max_blocks,
            });
        }
        if !self.switch_up[sw.idx()].load(Ordering::SeqCst) {
            return Err(DriverError::Unreachable { guid: switch });
        }
        let mut out = [NO_ROUTE; BLOCK_SIZE];
        let cell = read(&self.cells[sw.idx()]);
        let start = block as usize * BLOCK_SIZE;
        if let Some(src) = cell.lft.get(start..start + BLOCK_SIZE) {
            out.copy_from_slice(src);
        }
        bump(&self.counters.blocks_read, 1);
        Ok(out)
    }

    async fn write_mft_blocks(&self, blocks: &[MftBlockWrite]) -> Result<WriteReport, DriverError> {
        self.write_mft_batch(blocks).await
    }

    async fn read_mft_block(
        &self,
        switch: Guid,
        block: u32,
        position: u8,
    ) -> Result<[u16; MFT_BLOCK_SIZE], DriverError> {
        self.read_mft(switch, block, position).await
    }

    async fn write_pkey_blocks(&self, blocks: &[PkeyBlockWrite]) -> Result<WriteReport, DriverError> {
        self.write_pkey_batch(blocks).await
    }

    async fn read_pkey_block(&self, port: PkeyPort, block: u16) -> Result<[u16; PKEY_BLOCK_SIZE], DriverError> {
        self.read_pkey(port, block).await
    }

    async fn read_port_counters(&self, ports: &[CounterPort]) -> Result<Vec<CountersReading>, DriverError> {
        Ok(self.read_counters(ports).await)
    }

    async fn set_port_state(&self, switch: Guid, port: PortNum, up: bool) -> Result<(), DriverError> {
        self.sleep_op().await;
        let sw = self.switch_id(switch)?;
        let s = self.topo.switch(sw);
        if port == 0 || port > s.nports {
            return Err(DriverError::InvalidPort {
                guid: switch,
                port,
                reason: "no such external port",
            });
        }
        let remote = s.ports[port as usize].remote;
        if remote == Remote::None {
            return Err(DriverError::InvalidPort {
                guid: switch,
                port,
                reason: "not cabled",
            });
        }
        let _g = lock(&self.drill);
        if self.port_up[self.port_idx(sw, port)].swap(up, Ordering::SeqCst) == up {
            return Ok(());
        }
        if let Remote::Switch { sw: r, port: rp } = remote {
            self.port_up[self.port_idx(r, rp)].store(up, Ordering::SeqCst);
        }
        if up {
            self.vl_port_up(sw, port);
        } else {
            self.count_link_down(sw, port);
        }
        bump(&self.counters.state_changes, 1);
        self.emit(if up {
            FabricEvent::LinkUp { switch, port }
        } else {
            FabricEvent::LinkDown { switch, port }
        });
        Ok(())
    }

    async fn program_data_vls(&self, plan: &DataVlPlan) -> Result<(), DriverError> {
        self.program_data_vls_impl(plan).await
    }

    fn data_vl_capacity(&self) -> Option<u8> {
        self.data_vl_capacity_impl()
    }

    async fn set_switch_state(&self, switch: Guid, up: bool) -> Result<(), DriverError> {
        self.sleep_op().await;
        let sw = self.switch_id(switch)?;
        let reset = read(&self.config).reset_on_power_cycle;
        let _g = lock(&self.drill);
        if self.switch_up[sw.idx()].load(Ordering::SeqCst) == up {
            return Ok(());
        }
        if !up {
            self.count_switch_loss(sw);
        }
        if up && reset {
            self.reset_switch_counters(sw);
            {
                let mut cell = write(&self.cells[sw.idx()]);
                cell.lft.clear();
                cell.mft.clear();
                cell.pkeys.iter_mut().for_each(Vec::clear);
            }
            let mut lids = write(&self.lids);
            let mut t = (**lids).clone();
            t.switch_lid[sw.idx()] = 0;
            *lids = Arc::new(t);
        }
        self.switch_up[sw.idx()].store(up, Ordering::SeqCst);
        if up {
            self.vl_switch_up(sw, reset);
        }
        bump(&self.counters.state_changes, 1);
        self.emit(if up {
            FabricEvent::SwitchUp(switch)
        } else {
            FabricEvent::SwitchDown(switch)
        });
        Ok(())
    }
}
