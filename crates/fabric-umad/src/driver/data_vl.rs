//! Data virtual lanes ([`SouthboundDriver::program_data_vls`] and
//! [`SouthboundDriver::data_vl_capacity`]): the routes of a VL layering (DFSSSP's virtual layers,
//! the Slim Fly paper, seed 003 §5.2) spread over several data VLs, so every port needs enough
//! operational VLs and the SL-to-VL tables of the plan.
//!
//! **OperationalVLs.** A port negotiates its VLs at link bring-up: the IBA link layer (vol. 1
//! §7.2.7, the port state machine) only lets a port change them on the way up, and OpenSM
//! (`osm_lid_mgr.c`) sends PortState = Down to re-train a link whose OperationalVLs it wants to
//! change. This driver therefore never touches OperationalVLs of an ARMED or ACTIVE port: it
//! brings every port up (INIT → ARMED, [`link_op_vls`]) with OperationalVLs = the smaller VLCap
//! of the link's two ends (as OpenSM's `osm_physp_calc_link_op_vls` with `max_op_vls` 5), and
//! a data VL plan then only rewrites SL-to-VL tables (the background programmer of
//! [`super::sl2vl`] writes the plan in force, to new and relinked ports too). A plan needing more
//! VLs than a live port operates is refused before anything is written, naming the port.
//! ibsim reports VLCap = VL0-7 (8 data VLs) on every switch and CA port and accepts any
//! OperationalVLs up to it.
//!
//! [`SouthboundDriver::program_data_vls`]: fabric_southbound::SouthboundDriver::program_data_vls
//! [`SouthboundDriver::data_vl_capacity`]: fabric_southbound::SouthboundDriver::data_vl_capacity

use fabric_southbound::{DataVlPlan, DriverError};
use fabric_topology::Guid;

use super::inner::{lock, Inner};
use super::sl2vl::{self, sl2vl_forget_all, table_in_force, ESCAPE_SL, ESCAPE_VL};
use super::state::{live, Peer, State};
use crate::mad::*;

/// Highest data VL (VL 15 carries subnet management only).
const MAX_DATA_VL: u8 = 14;

/// Data VLs of a PortInfo VLCap / OperationalVLs code (1 = VL0, 2 = VL0-1, 3 = VL0-3,
/// 4 = VL0-7, 5 = VL0-14; IBA vol. 1 §14.2.5.6); 0 for a reserved code.
pub(super) fn vls_of_code(code: u8) -> u8 {
    match code {
        1 => 1,
        2 => 2,
        3 => 4,
        4 => 8,
        5 => 15,
        _ => 0,
    }
}

/// Human-readable VL range of a code (`VL0-7`), as `smpquery` prints it.
fn code_name(code: u8) -> String {
    match vls_of_code(code) {
        0 => format!("reserved code {code}"),
        1 => "VL0".to_string(),
        n => format!("VL0-{}", n - 1),
    }
}

/// Data VLs a live port can operate without re-training its link: its VLCap while it is in
/// INIT (the driver raises OperationalVLs when it arms the port), its OperationalVLs once ARMED
/// or ACTIVE. With the reason (`VLCap VL0-3`, `OperationalVLs VL0-1`).
fn port_vls(i: &PortInfo) -> (u8, String) {
    let cap = (vls_of_code(i.vl_cap()), format!("VLCap {}", code_name(i.vl_cap())));
    if matches!(i.state(), PortState::Armed | PortState::Active) && vls_of_code(i.operational_vls()) < cap.0 {
        let op = i.operational_vls();
        return (
            vls_of_code(op),
            format!("OperationalVLs {} (VLCap {})", code_name(op), code_name(i.vl_cap())),
        );
    }
    cap
}

/// One live port of the subnet: (node or port GUID, port number, switch?, PortInfo).
type LivePort<'a> = (Guid, u8, bool, &'a PortInfo);

/// Every live port whose VLs carry data: the live ports 1..N of the up switches, the up CA
/// ports.
fn live_ports(st: &State) -> Vec<LivePort<'_>> {
    let mut out = Vec::new();
    for s in st.switches.iter().filter(|s| s.up) {
        for (p, r) in s.ports.iter().enumerate().skip(1) {
            if let Some(i) = r.info.as_ref().filter(|i| live(i)) {
                out.push((s.guid, p as u8, true, i));
            }
        }
    }
    for c in st.cas.iter().filter(|c| c.up) {
        out.push((c.port_guid, c.port_num, false, &c.info));
    }
    out
}

/// [`SouthboundDriver::data_vl_capacity`](fabric_southbound::SouthboundDriver::data_vl_capacity):
/// the fewest data VLs a live port can operate ([`port_vls`]); `None` before discovery.
pub(super) fn capacity(st: &State) -> Option<u8> {
    live_ports(st).into_iter().map(|(_, _, _, i)| port_vls(i).0).min()
}

/// The table and VL count of `plan`: with escape LIDs ([`DataVlPlan::escape`]) the escape SL
/// keeps [`ESCAPE_VL`], which no other SL may use (without, every SL is a data SL); every VL must be a data VL (0..=14); the VLs needed are the plan's `data_vls`, at least
/// 1 + the highest VL used.
pub(super) fn plan_table(plan: &DataVlPlan) -> Result<(SlToVl, u8), DriverError> {
    if let Some((sl, &vl)) = plan.sl_to_vl.iter().enumerate().find(|(_, &v)| v > MAX_DATA_VL) {
        return Err(DriverError::Protocol {
            guid: None,
            message: format!("data VL plan maps SL {sl} to VL {vl}: data VLs are 0..={MAX_DATA_VL}"),
        });
    }
    if let Some((sl, _)) = plan
        .sl_to_vl
        .iter()
        .enumerate()
        .find(|&(sl, &v)| plan.escape && sl != usize::from(ESCAPE_SL) && v == ESCAPE_VL)
    {
        return Err(DriverError::Protocol {
            guid: None,
            message: format!(
                "data VL plan maps SL {sl} to VL {ESCAPE_VL}, the escape VL of SL {ESCAPE_SL} (the five-phase update needs it to itself)"
            ),
        });
    }
    let mut t = plan.sl_to_vl;
    if plan.escape {
        t[usize::from(ESCAPE_SL)] = ESCAPE_VL;
    }
    let highest = t.iter().copied().max().unwrap_or(0);
    let need = plan.data_vls.max(highest + 1);
    if need > MAX_DATA_VL + 1 {
        return Err(DriverError::Protocol {
            guid: None,
            message: format!(
                "data VL plan needs {need} data VLs: a port has at most {}",
                MAX_DATA_VL + 1
            ),
        });
    }
    Ok((SlToVl(t), need))
}

/// The first live port that cannot hold `need` data VLs (or, for `need` > 1, has no SL-to-VL
/// table: IsSLMappingSupported clear), as [`DriverError::DataVls`] naming its GUID and port.
pub(super) fn check_capacity(st: &State, need: u8) -> Result<(), DriverError> {
    for (guid, port, is_switch, info) in live_ports(st) {
        let (vls, why) = port_vls(info);
        let who = if is_switch { "switch port" } else { "CA port" };
        if vls < need {
            return Err(DriverError::DataVls {
                guid,
                port,
                reason: format!(
                    "the plan needs {need} data VLs, this {who} operates {vls} ({why}){}",
                    if vls_of_code(info.vl_cap()) >= need {
                        "; its link must be re-trained to raise OperationalVLs"
                    } else {
                        ""
                    }
                ),
            });
        }
        let mapping = if is_switch {
            st.sw_by_guid
                .get(&guid)
                .and_then(|&i| st.switches[i].ports.first())
                .and_then(|p| p.info.as_ref())
                .is_some_and(|p0| p0.capability_mask() & CAP_SL_MAPPING != 0)
        } else {
            info.capability_mask() & CAP_SL_MAPPING != 0
        };
        if need > 1 && !mapping {
            return Err(DriverError::DataVls {
                guid,
                port,
                reason: format!("the plan needs SL-to-VL tables, this {who} has none (IsSLMappingSupported clear)"),
            });
        }
    }
    Ok(())
}

/// Puts `table` in force: when it differs from the one in force, every table written is
/// forgotten (all are written again). The escape-only table is recorded as no plan, so that
/// the escape-only behaviour stays what it was. Returns whether the table in force changed.
pub(super) fn set_table(st: &mut State, table: SlToVl) -> bool {
    if table_in_force(st) == table {
        return false;
    }
    st.data_vl_table = (table != SlToVl::escape(ESCAPE_VL)).then_some(table);
    st.sl2vl_gen += 1;
    sl2vl_forget_all(st);
    true
}

/// [`SouthboundDriver::program_data_vls`](fabric_southbound::SouthboundDriver::program_data_vls):
/// checks the plan against every live port, puts it in force and waits until a pass wrote
/// every table (the caller has started the background tasks).
pub(super) async fn program_data_vls(inner: &Inner, plan: &DataVlPlan) -> Result<(), DriverError> {
    let (table, need) = plan_table(plan)?;
    {
        let mut st = lock(&inner.state);
        check_capacity(&st, need)?;
        if set_table(&mut st, table) {
            tracing::info!(data_vls = need, table = ?table.0, "data VL plan in force: SL-to-VL tables are rewritten");
        }
    }
    sl2vl::wait_for_pass(inner, "data VL plan not in force").await
}

/// OperationalVLs code a port is brought up with: the smaller VLCap of the port and of the
/// port at the other end of its cable (`peer`, when known and read), as OpenSM; `None` when the
/// port's VLCap is a reserved code (OperationalVLs is then left as read).
pub(super) fn link_op_vls(st: &State, local: &PortInfo, peer: Option<Peer>) -> Option<u8> {
    let mine = local.vl_cap();
    if vls_of_code(mine) == 0 {
        return None;
    }
    let theirs = match peer {
        Some(Peer::Switch { guid, port }) => st
            .sw_by_guid
            .get(&guid)
            .and_then(|&i| st.switches[i].ports.get(usize::from(port)))
            .and_then(|r| r.info.as_ref())
            .map(PortInfo::vl_cap),
        Some(Peer::Ca { port_guid }) => st.ca_by_guid.get(&port_guid).map(|&i| st.cas[i].info.vl_cap()),
        None => None,
    };
    Some(match theirs {
        Some(t) if vls_of_code(t) > 0 => mine.min(t),
        _ => mine,
    })
}

/// The peer of CA port `port_guid` (the switch port it is cabled to), for [`link_op_vls`].
pub(super) fn ca_peer(st: &State, port_guid: Guid) -> Option<Peer> {
    let c = &st.cas[*st.ca_by_guid.get(&port_guid)?];
    let (guid, port) = c.attach?;
    Some(Peer::Switch { guid, port })
}
