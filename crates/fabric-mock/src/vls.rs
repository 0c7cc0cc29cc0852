//! Data virtual lanes of the simulated fabric: every simulated port has a VLCap
//! ([`MockConfig::data_vls`], per switch [`MockConfig::data_vls_of`]);
//! [`SouthboundDriver::program_data_vls`](fabric_southbound::SouthboundDriver::program_data_vls)
//! refuses a plan needing more VLs than a live port has (naming the first such port), else
//! records the plan's SL-to-VL table on every live switch port and end port; ports that come up
//! later (link, switch or end-port drills) get the plan in force. The mock's packet simulator
//! does not model VLs (a trace follows LFTs only): the tables are recorded for tests to read
//! ([`MockFabric::sl_to_vl_of_switch_port`], [`MockFabric::sl_to_vl_of_end_port`]).

use std::sync::atomic::Ordering;

use fabric_southbound::{DataVlPlan, DriverError};
use fabric_topology::{EndPortId, Guid, PortNum, Remote, SwitchId};

use crate::{lock, read, MockConfig, MockFabric};

/// Highest data VL (VL 15 carries subnet management only).
pub const MAX_DATA_VL: u8 = 14;

/// The plan in force and the tables each port holds.
#[derive(Debug, Default)]
pub(crate) struct VlTables {
    /// SL-to-VL table of the plan in force (`None`: no plan was programmed).
    pub(crate) plan: Option<[u8; 16]>,
    /// Table of each switch port (by the fabric's port index), `None` until written.
    pub(crate) switch_ports: Vec<Option<[u8; 16]>>,
    /// Table of each end port (by dense id), `None` until written.
    pub(crate) end_ports: Vec<Option<[u8; 16]>>,
}

impl VlTables {
    pub(crate) fn new(switch_ports: usize, end_ports: usize) -> VlTables {
        VlTables {
            plan: None,
            switch_ports: vec![None; switch_ports],
            end_ports: vec![None; end_ports],
        }
    }
}

/// The table of `plan` and the data VLs it needs: the escape SL (1) keeps the escape VL when
/// the fabric has one and the plan has escape LIDs ([`DataVlPlan::escape`]; no other SL may
/// use it); every VL must be a data VL (0..=14); the VLs
/// needed are `data_vls`, at least 1 + the highest VL used.
pub(crate) fn plan_table(plan: &DataVlPlan, escape_vl: Option<u8>) -> Result<([u8; 16], u8), DriverError> {
    if let Some((sl, &vl)) = plan.sl_to_vl.iter().enumerate().find(|(_, &v)| v > MAX_DATA_VL) {
        return Err(DriverError::Config(format!(
            "data VL plan maps SL {sl} to VL {vl}: data VLs are 0..={MAX_DATA_VL}"
        )));
    }
    let mut t = plan.sl_to_vl;
    if let Some(v) = escape_vl.filter(|_| plan.escape) {
        if let Some((sl, _)) = t.iter().enumerate().find(|&(sl, &x)| sl != 1 && x == v && v != 0) {
            return Err(DriverError::Config(format!(
                "data VL plan maps SL {sl} to VL {v}, the escape VL of SL 1"
            )));
        }
        t[1] = v;
    }
    let highest = t.iter().copied().max().unwrap_or(0);
    Ok((t, plan.data_vls.max(highest + 1)))
}

impl MockConfig {
    /// VLCap (data VLs) of the ports of switch `guid`.
    pub fn data_vls_of_switch(&self, guid: Guid) -> u8 {
        self.data_vls_of
            .iter()
            .find(|(g, _)| *g == guid)
            .map_or(self.data_vls, |&(_, n)| n)
    }
}

impl MockFabric {
    /// Live ports that carry data: (GUID, port, VLCap, slot) of every live external port of an
    /// up switch and every up end port that is cabled to a live switch port.
    fn live_vl_ports(&self, cfg: &MockConfig) -> Vec<(Guid, PortNum, u8, Slot)> {
        let mut out = Vec::new();
        for (i, s) in self.topo.switches().iter().enumerate() {
            let sid = SwitchId(i as u32);
            if !self.switch_up[i].load(Ordering::SeqCst) {
                continue;
            }
            let cap = cfg.data_vls_of_switch(s.guid);
            for (pn, p) in s.external_ports() {
                if p.remote != Remote::None && self.port_up[self.port_idx(sid, pn)].load(Ordering::SeqCst) {
                    out.push((s.guid, pn, cap, Slot::Switch(self.port_idx(sid, pn))));
                }
            }
        }
        for (i, e) in self.topo.end_ports().iter().enumerate() {
            if self.end_port_up[i].load(Ordering::SeqCst) && e.attach.is_some() {
                out.push((e.port_guid, e.port_num, cfg.data_vls, Slot::EndPort(i)));
            }
        }
        out
    }

    /// [`SouthboundDriver::program_data_vls`](fabric_southbound::SouthboundDriver::program_data_vls).
    pub(crate) async fn program_data_vls_impl(&self, plan: &DataVlPlan) -> Result<(), DriverError> {
        self.sleep_op().await;
        let cfg = read(&self.config).clone();
        let (table, need) = plan_table(plan, cfg.escape_vl)?;
        let _g = lock(&self.drill);
        let ports = self.live_vl_ports(&cfg);
        if let Some((guid, port, cap, _)) = ports.iter().find(|p| p.2 < need) {
            return Err(DriverError::DataVls {
                guid: *guid,
                port: *port,
                reason: format!("the plan needs {need} data VLs, this port has VLCap {cap}"),
            });
        }
        let mut t = lock(&self.vl_tables);
        t.plan = Some(table);
        for (_, _, _, slot) in ports {
            match slot {
                Slot::Switch(i) => t.switch_ports[i] = Some(table),
                Slot::EndPort(i) => t.end_ports[i] = Some(table),
            }
        }
        Ok(())
    }

    /// [`SouthboundDriver::data_vl_capacity`](fabric_southbound::SouthboundDriver::data_vl_capacity):
    /// the fewest VLs over the live ports (`None` when no port is live).
    pub(crate) fn data_vl_capacity_impl(&self) -> Option<u8> {
        let cfg = read(&self.config);
        self.live_vl_ports(&cfg).iter().map(|p| p.2).min()
    }

    /// A port that came up gets the plan in force (both ends of the cable of switch `sw` port
    /// `port`). Called with the drill lock held, after the state change.
    pub(crate) fn vl_port_up(&self, sw: SwitchId, port: PortNum) {
        let mut t = lock(&self.vl_tables);
        let Some(table) = t.plan else { return };
        t.switch_ports[self.port_idx(sw, port)] = Some(table);
        match self.topo.switch(sw).ports[port as usize].remote {
            Remote::Switch { sw: r, port: rp } => t.switch_ports[self.port_idx(r, rp)] = Some(table),
            Remote::EndPort(e) => t.end_ports[e.idx()] = Some(table),
            Remote::None => {}
        }
    }

    /// A switch that came up: its live ports (and what is behind them) get the plan in force;
    /// with `reset` (a reboot) its ports lose their tables first.
    pub(crate) fn vl_switch_up(&self, sw: SwitchId, reset: bool) {
        if reset {
            let mut t = lock(&self.vl_tables);
            let s = self.topo.switch(sw);
            for p in 0..=s.nports {
                t.switch_ports[self.port_idx(sw, p)] = None;
            }
        }
        for (pn, p) in self.topo.switch(sw).external_ports() {
            if p.remote != Remote::None && self.port_up[self.port_idx(sw, pn)].load(Ordering::SeqCst) {
                self.vl_port_up(sw, pn);
            }
        }
    }

    /// An end port that came up gets the plan in force.
    pub(crate) fn vl_end_port_up(&self, ep: EndPortId) {
        let mut t = lock(&self.vl_tables);
        if let Some(table) = t.plan {
            t.end_ports[ep.idx()] = Some(table);
        }
    }

    /// The SL-to-VL table switch `guid` holds for its port `port` (`None`: never written, or
    /// unknown switch or port).
    pub fn sl_to_vl_of_switch_port(&self, guid: Guid, port: PortNum) -> Option<[u8; 16]> {
        let sw = self.topo.switch_by_guid(guid)?;
        if port > self.topo.switch(sw).nports {
            return None;
        }
        lock(&self.vl_tables).switch_ports[self.port_idx(sw, port)]
    }

    /// The SL-to-VL table end port `port_guid` holds (`None`: never written, or unknown port).
    pub fn sl_to_vl_of_end_port(&self, port_guid: Guid) -> Option<[u8; 16]> {
        let ep = self.topo.end_port_by_guid(port_guid)?;
        lock(&self.vl_tables).end_ports[ep.idx()]
    }

    /// The SL-to-VL table of the data VL plan in force (`None`: none was programmed).
    pub fn data_vl_plan_in_force(&self) -> Option<[u8; 16]> {
        lock(&self.vl_tables).plan
    }
}

/// Where a port's table lives.
#[derive(Clone, Copy, Debug)]
enum Slot {
    Switch(usize),
    EndPort(usize),
}
