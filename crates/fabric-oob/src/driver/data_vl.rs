//! Data virtual lanes over the agents ([`SouthboundDriver::program_data_vls`],
//! [`SouthboundDriver::data_vl_capacity`]): a VL layering (DFSSSP's virtual layers, the Slim Fly
//! paper, seed 003 §5.2) needs the SL-to-VL table of its plan on every switch.
//!
//! The agent protocol has one SL-to-VL table per switch (every input/output port pair); the
//! hosts' NICs are not managed by the agents, so end ports get no table from this driver. The
//! capacity of a switch is its VLCap (`SwitchInfo.vl_cap`; `vls` for agents that report none,
//! 2 for agents that report neither); a plan is refused, before anything is written, when it
//! needs more VLs than a known, up switch has, naming that switch (and its first up port). The
//! escape SL keeps the escape VL ([`crate::OobDriver::escape_vl`], the highest VL every switch
//! operates); no other SL may use it (its traffic would share the escape VL, which the
//! five-phase update needs to itself). The plan in force replaces the escape-only table in
//! every switch's address set-up, so agents that come back (or that `configure_lids` sets up
//! later) get it too.
//!
//! [`SouthboundDriver::program_data_vls`]: fabric_southbound::SouthboundDriver::program_data_vls
//! [`SouthboundDriver::data_vl_capacity`]: fabric_southbound::SouthboundDriver::data_vl_capacity

use std::sync::Arc;

use fabric_southbound::{DataVlPlan, DriverError};
use tokio::task::JoinSet;
use tonic::Code;

use super::agents::{lock, Inner};
use super::config::{sl_to_vl_table, ESCAPE_SL};
use super::epoch::with_epoch;
use crate::proto::{self, PortState};

/// Highest data VL (VL 15 is InfiniBand's management VL).
const MAX_DATA_VL: u8 = 14;

/// Data VLs of an agent's description: `vl_cap`, else `vls`, else `default` (old agents).
pub(super) fn vl_cap_of(info: &proto::SwitchInfo, default: u32) -> u8 {
    let n = if info.vl_cap > 0 {
        info.vl_cap
    } else if info.vls > 0 {
        info.vls
    } else {
        default
    };
    n.min(u32::from(MAX_DATA_VL) + 1) as u8
}

/// The table of `plan` with the escape SL on `escape_vl` when the plan has escape LIDs
/// ([`DataVlPlan::escape`]), and the data VLs it needs (the plan's
/// `data_vls`, at least 1 + the highest VL used). Refuses VL 15 and data SLs on the escape VL.
pub(super) fn plan_table(plan: &DataVlPlan, escape_vl: Option<u8>) -> Result<([u8; 16], u8), DriverError> {
    let bad = |m: String| Err(DriverError::Config(format!("data VL plan: {m}")));
    if let Some((sl, &vl)) = plan.sl_to_vl.iter().enumerate().find(|(_, &v)| v > MAX_DATA_VL) {
        return bad(format!("SL {sl} maps to VL {vl}: data VLs are 0..={MAX_DATA_VL}"));
    }
    let mut t = plan.sl_to_vl;
    if let Some(e) = escape_vl.filter(|_| plan.escape) {
        if let Some((sl, _)) = t
            .iter()
            .enumerate()
            .find(|&(sl, &v)| sl != usize::from(ESCAPE_SL) && v == e && e != 0)
        {
            return bad(format!(
                "SL {sl} maps to VL {e}, the escape VL of SL {ESCAPE_SL} (the switches operate VLs 0..={e})"
            ));
        }
        t[usize::from(ESCAPE_SL)] = e;
    }
    let highest = t.iter().copied().max().unwrap_or(0);
    Ok((t, plan.data_vls.max(highest + 1)))
}

impl Inner {
    /// The SL-to-VL table every switch's set-up carries: the data VL plan in force, else the
    /// escape-only table.
    pub(super) fn sl_to_vl_in_force(&self) -> [u8; 16] {
        lock(&self.data_vl_table).unwrap_or_else(|| sl_to_vl_table(self.escape_vl()))
    }

    /// The smallest VLCap over the known switches that are up (`None` before discovery).
    pub(super) fn data_vl_capacity(&self) -> Option<u8> {
        self.agents
            .iter()
            .filter(|a| !lock(&a.health).reported_down)
            .filter_map(|a| {
                lock(&a.known)
                    .as_ref()
                    .filter(|k| k.info.powered)
                    .map(|k| vl_cap_of(&k.info, 2))
            })
            .min()
    }
}

/// [`SouthboundDriver::program_data_vls`](fabric_southbound::SouthboundDriver::program_data_vls).
pub(super) async fn program_data_vls(inner: &Arc<Inner>, plan: &DataVlPlan) -> Result<(), DriverError> {
    inner.write_epoch("set SL-to-VL")?;
    let (table, need) = plan_table(plan, inner.escape_vl())?;
    let escape_only = table == sl_to_vl_table(inner.escape_vl());
    // The switches to write: every known one not reported down; the first too small refuses.
    let mut due = Vec::new();
    for (idx, a) in inner.agents.iter().enumerate() {
        let Some(k) = lock(&a.known).clone() else { continue };
        if lock(&a.health).reported_down || !k.info.powered {
            continue;
        }
        let cap = vl_cap_of(&k.info, 2);
        let first_up = k
            .ports
            .iter()
            .find(|p| p.port > 0 && p.state == PortState::Up as i32)
            .map_or(0, |p| p.port as u8);
        if cap < need {
            return Err(DriverError::DataVls {
                guid: k.info.guid,
                port: first_up,
                reason: format!(
                    "the plan needs {need} data VLs, the switch's VLCap is {cap} (one SL-to-VL table for every port pair)"
                ),
            });
        }
        due.push((idx, k.info.guid, first_up));
    }
    // Nothing to do for the escape-only table while no plan was in force: the set-ups carry it.
    let was = *lock(&inner.data_vl_table);
    if escape_only && was.is_none() {
        return Ok(());
    }
    *lock(&inner.data_vl_table) = (!escape_only).then_some(table);
    for a in &inner.agents {
        if let Some(s) = lock(&a.setup).as_mut() {
            s.sl_to_vl.vl_of_sl = table.to_vec();
        }
    }
    let key = inner.write_key();
    let mut set = JoinSet::new();
    for (idx, guid, port) in due {
        let inner = inner.clone();
        set.spawn(async move {
            let r = inner
                .call_write(idx, "set SL-to-VL", |mut c, epoch| {
                    let r = with_epoch(
                        proto::SlToVlTable {
                            vl_of_sl: table.to_vec(),
                            management_key: key,
                        },
                        epoch,
                    );
                    async move { c.set_sl_to_vl(r).await }
                })
                .await;
            (guid, port, r)
        });
    }
    let mut first: Option<DriverError> = None;
    while let Some(r) = set.join_next().await {
        let e = match r {
            Ok((_, _, Ok(_))) => continue,
            Ok((guid, port, Err(DriverError::Protocol { message, .. })))
                if message.contains(&format!("{:?}", Code::Unimplemented)) =>
            {
                DriverError::DataVls {
                    guid,
                    port,
                    reason: "the agent does not implement SetSlToVl".to_string(),
                }
            }
            Ok((guid, port, Err(DriverError::Protocol { message, .. })))
                if message.contains(&format!("{:?}", Code::InvalidArgument)) =>
            {
                DriverError::DataVls {
                    guid,
                    port,
                    reason: format!("the agent refused the table: {message}"),
                }
            }
            Ok((_, _, Err(e))) => e,
            Err(e) => DriverError::Protocol {
                guid: None,
                message: format!("task failed: {e}"),
            },
        };
        first.get_or_insert(e);
    }
    match first {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
