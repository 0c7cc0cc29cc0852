//! The reference multicast data plane ([`flood`]): what a packet sent by an end port to an
//! MLID reaches under a set of MFTs. Pure; used by the property tests and the simulators'
//! verification.

use fabric_topology::{fmt_guid, EndPortId, Fabric, Guid, Lid, PortNum, Remote, SwitchId};

use super::mft::{is_mlid, mask_ports, Mfts};

/// A copy's position: the switch it is at and the port it arrived through.
type State = (SwitchId, PortNum);

/// Copies a flood may make before it gives up ([`FloodError::TooManyCopies`]).
pub const FLOOD_MAX_COPIES: u64 = 1 << 24;

/// Why a flood could not be evaluated.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FloodError {
    /// The source end port does not exist.
    #[error("end port {src:?} does not exist (the fabric has {end_ports} end ports)")]
    UnknownEndPort { src: EndPortId, end_ports: usize },
    /// The source end port is down or not cabled to a live switch.
    #[error("end port {} is not live: it cannot send", fmt_guid(*.guid))]
    SourceNotLive { guid: Guid },
    /// The LID is not a multicast LID.
    #[error("LID {mlid:#x} is not a multicast LID (0xc000..=0xfffe)")]
    NotMulticast { mlid: Lid },
    /// The masks send copies around a cycle: a copy arriving at `switch` through `port` comes
    /// back there.
    #[error("MLID {mlid:#x}: forwarding loop through switch {} port {port}", fmt_guid(*.guid))]
    Loop {
        mlid: Lid,
        guid: Guid,
        switch: SwitchId,
        port: PortNum,
    },
    /// The masks multiply copies beyond [`FLOOD_MAX_COPIES`] (no loop, but a badly redundant
    /// table).
    #[error("MLID {mlid:#x}: more than {FLOOD_MAX_COPIES} copies")]
    TooManyCopies { mlid: Lid },
}

/// Floods one packet from `src` to `mlid`: a switch forwards a copy out of every port of its
/// mask except the arrival port; a live end port behind a masked port receives it; dead links,
/// dead switches and port 0 drop it. Returns the end ports reached with their number of
/// copies, by end port id (the source is listed only if a copy comes back to it).
pub fn flood(fabric: &Fabric, mfts: &Mfts, src: EndPortId, mlid: Lid) -> Result<Vec<(EndPortId, u32)>, FloodError> {
    if src.idx() >= fabric.num_end_ports() {
        return Err(FloodError::UnknownEndPort {
            src,
            end_ports: fabric.num_end_ports(),
        });
    }
    if !is_mlid(mlid) {
        return Err(FloodError::NotMulticast { mlid });
    }
    let ep = fabric.end_port(src);
    let start = match ep.attach {
        Some(a) if fabric.end_port_live(src) => a,
        _ => return Err(FloodError::SourceNotLive { guid: ep.port_guid }),
    };
    // The switch ports a copy arriving at (switch, port) is forwarded to another switch.
    let next = |(s, i): (SwitchId, PortNum)| {
        let m = mfts.mask(s, mlid);
        mask_ports(m).filter(move |&q| q != i && q != 0)
    };
    // 1. Loop check: depth-first over the states (switch, arrival port), colours white / grey
    //    / black; a grey state reached again is a cycle.
    let ns = fabric.num_switches();
    let mut colour = vec![0u8; ns * 256];
    let key = |(s, p): (SwitchId, PortNum)| s.idx() * 256 + p as usize;
    let mut stack: Vec<(State, Vec<State>)> = Vec::new();
    let succ = |st: (SwitchId, PortNum)| -> Vec<(SwitchId, PortNum)> {
        next(st).filter_map(|q| fabric.switch_link_live(st.0, q)).collect()
    };
    colour[key(start)] = 1;
    stack.push((start, succ(start)));
    while let Some((_, todo)) = stack.last_mut() {
        match todo.pop() {
            Some(t) => match colour[key(t)] {
                0 => {
                    colour[key(t)] = 1;
                    let v = succ(t);
                    stack.push((t, v));
                }
                1 => {
                    return Err(FloodError::Loop {
                        mlid,
                        guid: fabric.switch(t.0).guid,
                        switch: t.0,
                        port: t.1,
                    })
                }
                _ => {}
            },
            None => {
                let (st, _) = stack.pop().unwrap_or((start, Vec::new()));
                colour[key(st)] = 2;
            }
        }
    }
    // 2. No loop: propagate the copies.
    let mut got: Vec<u32> = vec![0; fabric.num_end_ports()];
    let mut copies = 0u64;
    let mut work = vec![start];
    while let Some(st) = work.pop() {
        let (s, _) = st;
        for q in next(st) {
            copies += 1;
            if copies > FLOOD_MAX_COPIES {
                return Err(FloodError::TooManyCopies { mlid });
            }
            match fabric.switch(s).ports.get(q as usize).map(|p| p.remote) {
                Some(Remote::EndPort(e)) if fabric.end_port_live(e) => got[e.idx()] += 1,
                Some(Remote::Switch { .. }) => {
                    if let Some(t) = fabric.switch_link_live(s, q) {
                        work.push(t);
                    }
                }
                _ => {}
            }
        }
    }
    Ok(got
        .into_iter()
        .enumerate()
        .filter(|&(_, n)| n > 0)
        .map(|(i, n)| (EndPortId(i as u32), n))
        .collect())
}
