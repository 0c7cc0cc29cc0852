//! The multicast data plane: each switch's multicast forwarding table (MFT), the packet flood
//! over the installed tables and live links, and the multicast verification.
//!
//! An MFT entry is the 256-bit port mask of one MLID (16 positions of 16 ports; bit 0 of
//! position 0 is the switch's own port 0). Tables are sparse (MLIDs never written, or written
//! all zero, are absent): a simulated fabric of thousands of switches holds only the groups in
//! use.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use fabric_oob::proto;
use fabric_southbound::{SouthboundDriver, MFT_BLOCK_SIZE, MFT_PORTS_PER_POSITION, MLID_BASE};
use fabric_topology::{fmt_guid, EndPortId, Fabric, Guid, Lid, PortNum, Remote, SwitchId};

use super::state::{lock, Sim, SimError};

/// MFT blocks every simulated switch accepts: MLIDs `0xC000 ..= 0xFFFF` (InfiniBand's range).
pub(super) const MFT_BLOCKS: u32 = 512;
/// Port positions of a port mask (ports 0..=255).
const POSITIONS: usize = 256 / MFT_PORTS_PER_POSITION;
/// Failures listed in a report (all are counted).
const MAX_LISTED: usize = 1000;

/// One switch's MFT: port mask per MLID offset (`mlid - 0xC000`), non-zero masks only.
#[derive(Clone, Debug, Default)]
pub(super) struct Mft {
    masks: BTreeMap<u32, [u16; POSITIONS]>,
}

/// One block write as the agent validated it.
pub(super) struct MftWrite {
    pub(super) block: u32,
    pub(super) position: u8,
    pub(super) entries: [u16; MFT_BLOCK_SIZE],
}

impl Mft {
    /// Validates a block of a switch with `nports` external ports: block within
    /// [`MFT_BLOCKS`], position within the switch's ports, 32 entries of 16 bits, no bit for a
    /// port the switch does not have. Errors name the block, position and MLID.
    pub(super) fn validate(b: &proto::MftBlock, nports: PortNum) -> Result<MftWrite, tonic::Status> {
        if b.block >= MFT_BLOCKS {
            return Err(tonic::Status::out_of_range(format!(
                "MFT block {} beyond the {MFT_BLOCKS} blocks of the switch",
                b.block
            )));
        }
        let last_position = usize::from(nports) / MFT_PORTS_PER_POSITION;
        if b.position as usize > last_position {
            return Err(tonic::Status::out_of_range(format!(
                "MFT block {} position {}: the switch has ports 0..={nports} (positions 0..={last_position})",
                b.block, b.position
            )));
        }
        if b.entries.len() != MFT_BLOCK_SIZE {
            return Err(tonic::Status::invalid_argument(format!(
                "MFT block {} position {} has {} entries, expected {MFT_BLOCK_SIZE}",
                b.block,
                b.position,
                b.entries.len()
            )));
        }
        let first_port = b.position as usize * MFT_PORTS_PER_POSITION;
        // Ports of this position the switch has: bits above `nports` are refused.
        let have = (usize::from(nports) + 1 - first_port).min(MFT_PORTS_PER_POSITION);
        let allowed: u32 = if have >= 16 { 0xFFFF } else { (1u32 << have) - 1 };
        let mut entries = [0u16; MFT_BLOCK_SIZE];
        for (i, &e) in b.entries.iter().enumerate() {
            if e & !allowed != 0 {
                return Err(tonic::Status::invalid_argument(format!(
                    "MFT block {} position {}: MLID {:#06x} mask {e:#x} names ports the switch does not have \
                     (ports 0..={nports})",
                    b.block,
                    b.position,
                    mlid_of(b.block, i)
                )));
            }
            entries[i] = e as u16;
        }
        Ok(MftWrite {
            block: b.block,
            position: b.position as u8,
            entries,
        })
    }

    /// Applies validated blocks.
    pub(super) fn apply(&mut self, writes: &[MftWrite]) {
        for w in writes {
            for (i, &e) in w.entries.iter().enumerate() {
                let off = w.block * MFT_BLOCK_SIZE as u32 + i as u32;
                let pos = usize::from(w.position);
                match self.masks.get_mut(&off) {
                    Some(m) => {
                        m[pos] = e;
                        if m.iter().all(|&x| x == 0) {
                            self.masks.remove(&off);
                        }
                    }
                    None if e != 0 => {
                        let mut m = [0u16; POSITIONS];
                        m[pos] = e;
                        self.masks.insert(off, m);
                    }
                    None => {}
                }
            }
        }
    }

    /// One block (one position) as written; never written reads as all 0.
    pub(super) fn read(&self, block: u32, position: u8) -> [u16; MFT_BLOCK_SIZE] {
        let mut out = [0u16; MFT_BLOCK_SIZE];
        for (i, e) in out.iter_mut().enumerate() {
            if let Some(m) = self.masks.get(&(block * MFT_BLOCK_SIZE as u32 + i as u32)) {
                *e = m[usize::from(position)];
            }
        }
        out
    }

    /// Whether `port` is in the mask of MLID offset `off`.
    pub(super) fn has(&self, off: u32, port: PortNum) -> bool {
        self.masks.get(&off).is_some_and(|m| bit(m, port))
    }

    /// MLID offsets with a non-zero mask.
    pub(super) fn in_use(&self) -> impl Iterator<Item = u32> + '_ {
        self.masks.keys().copied()
    }
}

/// Whether `port` is in port mask `m`.
fn bit(m: &[u16; POSITIONS], port: PortNum) -> bool {
    let p = usize::from(port);
    m[p / MFT_PORTS_PER_POSITION] & (1 << (p % MFT_PORTS_PER_POSITION)) != 0
}

fn mlid_of(block: u32, i: usize) -> Lid {
    MLID_BASE + block * MFT_BLOCK_SIZE as u32 + i as u32
}

/// Where one flooded packet went.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Flood {
    /// Copies received per end port (the sender included if a copy came back to it).
    pub(super) received: BTreeMap<EndPortId, u32>,
    /// Switches a copy reached again after the first (a loop or a second path); such a copy
    /// still delivers to the switch's end ports but is not forwarded to other switches again,
    /// so that the flood ends.
    pub(super) reached_again: BTreeSet<SwitchId>,
}

/// Floods one packet sent by end port `src` to MLID offset `off` over the live links of `f`
/// through the tables `mfts` (indexed by switch id): a switch forwards a copy out of every
/// port of the mask except the arrival port; copies to dead or uncabled ports are dropped.
pub(super) fn flood(f: &Fabric, mfts: &[Mft], src: EndPortId, off: u32) -> Flood {
    let mut out = Flood::default();
    let Some((leaf, in_port)) = f.end_port(src).attach.filter(|_| f.end_port_live(src)) else {
        return out;
    };
    let mut seen = vec![false; f.num_switches()];
    let mut queue = VecDeque::from([(leaf, in_port)]);
    while let Some((sw, arrival)) = queue.pop_front() {
        let s = f.switch(sw);
        if !s.up {
            continue;
        }
        let again = std::mem::replace(&mut seen[sw.idx()], true);
        if again {
            out.reached_again.insert(sw);
        }
        let Some(mask) = mfts[sw.idx()].masks.get(&off) else {
            continue;
        };
        for port in 1..=s.nports {
            if port == arrival || !bit(mask, port) {
                continue;
            }
            match s.ports[usize::from(port)].remote {
                Remote::EndPort(ep) if f.end_port_live(ep) => *out.received.entry(ep).or_insert(0) += 1,
                Remote::Switch { .. } if !again => {
                    if let Some(next) = f.switch_link_live(sw, port) {
                        queue.push_back(next);
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// The receivers of MLID offset `off`: live end ports whose bit is set on the port of the
/// switch they are cabled to; and the number of such end ports that are down.
pub(super) fn receivers(f: &Fabric, mfts: &[Mft], off: u32) -> (Vec<EndPortId>, usize) {
    let (mut live, mut down) = (Vec::new(), 0);
    for (i, e) in f.end_ports().iter().enumerate() {
        let Some((sw, port)) = e.attach else { continue };
        if mfts[sw.idx()].has(off, port) {
            let ep = EndPortId(i as u32);
            if f.end_port_live(ep) {
                live.push(ep);
            } else {
                down += 1;
            }
        }
    }
    (live, down)
}

/// Checks every MLID in use: the packet of each receiver reaches every other receiver exactly
/// once, no other end port, and no switch twice.
pub(super) fn verify(f: &Fabric, mfts: &[Mft]) -> proto::McastReport {
    let offs: BTreeSet<u32> = mfts.iter().flat_map(Mft::in_use).collect();
    let mut r = proto::McastReport::default();
    let guid = |ep: EndPortId| f.end_port(ep).port_guid;
    for &off in &offs {
        let mlid = MLID_BASE + off;
        let (members, down) = receivers(f, mfts, off);
        r.mlids_checked += 1;
        r.members_down += down as u64;
        let before = r.failure_count;
        for &src in &members {
            r.floods += 1;
            let fl = flood(f, mfts, src, off);
            let mut fail = |end_port: Guid, switch_guid: Guid, copies: u32, reason: String| {
                r.failure_count += 1;
                if r.failures.len() < MAX_LISTED {
                    r.failures.push(proto::McastFailure {
                        mlid,
                        sender: guid(src),
                        end_port,
                        switch_guid,
                        copies,
                        reason,
                    });
                }
            };
            let sender = fmt_guid(guid(src));
            for &sw in &fl.reached_again {
                let g = f.switch(sw).guid;
                fail(
                    0,
                    g,
                    0,
                    format!(
                        "MLID {mlid:#06x}: the packet of {sender} reaches switch {} \"{}\" more than once (a loop or a \
                         second path in the tree)",
                        fmt_guid(g),
                        f.switch(sw).desc
                    ),
                );
            }
            for &m in members.iter().filter(|&&m| m != src) {
                let copies = fl.received.get(&m).copied().unwrap_or(0);
                if copies != 1 {
                    let what = if copies == 0 {
                        "never reaches".to_string()
                    } else {
                        format!("reaches {copies} times")
                    };
                    fail(
                        guid(m),
                        0,
                        copies,
                        format!(
                            "MLID {mlid:#06x}: the packet of {sender} {what} member {}",
                            fmt_guid(guid(m))
                        ),
                    );
                }
            }
            for (&ep, &copies) in &fl.received {
                if ep == src {
                    fail(
                        guid(ep),
                        0,
                        copies,
                        format!("MLID {mlid:#06x}: the packet of {sender} comes back to it {copies} time(s)"),
                    );
                } else if !members.contains(&ep) {
                    fail(
                        guid(ep),
                        0,
                        copies,
                        format!(
                            "MLID {mlid:#06x}: the packet of {sender} reaches non-member {}",
                            fmt_guid(guid(ep))
                        ),
                    );
                }
            }
        }
        if r.failure_count > before {
            r.failed_mlids += 1;
        }
    }
    r
}

impl Sim {
    /// The multicast verification over the agents' MFTs and the live link states.
    pub(super) async fn verify_multicast(&self) -> Result<proto::McastReport, SimError> {
        let f = self.mock.discover().await?;
        let mfts: Vec<Mft> = self.agents.iter().map(|a| lock(&a.mft).clone()).collect();
        tokio::task::spawn_blocking(move || verify(&f, &mfts))
            .await
            .map_err(|e| SimError::Command(format!("multicast verification task failed: {e}")))
    }
}

/// One line summing a report up (console `verify`).
pub(super) fn summary(r: &proto::McastReport) -> String {
    format!(
        "multicast: MLIDs checked {}, floods {}, failed MLIDs {}, failures {}, members down {}{}",
        r.mlids_checked,
        r.floods,
        r.failed_mlids,
        r.failure_count,
        r.members_down,
        r.failures
            .first()
            .map(|f| format!("; first: {}", f.reason))
            .unwrap_or_default()
    )
}

#[cfg(test)]
#[path = "mcast_tests.rs"]
mod tests;
