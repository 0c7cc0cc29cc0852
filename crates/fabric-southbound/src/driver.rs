//! The southbound driver trait: how the daemon sees and programs the physical fabric.
//!
//! Every operation is GUID-addressed (dense ids are the daemon's business and may differ between
//! a driver's view and the daemon's), fallible and async. A driver is shared as
//! `Arc<dyn SouthboundDriver>`.
//!
//! # Who retries, who bounds parallelism
//!
//! * **Retries.** Drivers retry *transient* per-operation failures themselves (a lost MAD, an agent
//!   that timed out once) up to a driver-configured limit and count them in
//!   [`WriteReport::retries`]. An `Err` from a driver means it gave up: the caller (the update
//!   protocol) treats it as a failed phase and does not retry blindly. LFT block writes are
//!   idempotent, so re-issuing a whole batch after an error is always safe.
//! * **Parallelism.** A single [`SouthboundDriver::write_lft_blocks`] call may be a large batch
//!   spanning many switches; the driver decides how many block writes it keeps in flight (for
//!   `umad` the number of outstanding MADs, for `oob` the number of agent connections, for
//!   `mock` `fabric_mock::MockConfig::max_parallel`). Callers may also issue several batches
//!   concurrently (e.g. one per switch): drivers must accept that and must not serialise unrelated
//!   switches on one lock.

use async_trait::async_trait;
use fabric_routing::{LidPlan, BLOCK_SIZE};
use fabric_topology::{fmt_guid, Fabric, FabricEvent, Guid, Lid, PortNum};

use crate::counters::{CounterPort, CountersReading};

/// One 64-entry LFT block to write to one switch (block `b` covers LIDs `64b..64b+63`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LftBlockWrite {
    /// Node GUID of the switch.
    pub switch: Guid,
    /// LFT block number.
    pub block: u32,
    /// Output port per LID of the block (port 0 = the switch itself, 255 = no route).
    pub entries: [u8; BLOCK_SIZE],
}

/// MLIDs of one multicast forwarding table block (IBA 14.2.5.8).
pub const MFT_BLOCK_SIZE: usize = 32;
/// Ports of one MFT position (port mask of 16 bits; position `k` covers ports `16k..16k+15`).
pub const MFT_PORTS_PER_POSITION: usize = 16;
/// First multicast LID (MLID block 0 entry 0).
pub const MLID_BASE: Lid = 0xC000;

/// One multicast forwarding table block to write to one switch: the port masks of 32 MLIDs
/// (`0xC000 + 32·block ..= 0xC000 + 32·block + 31`) for the 16 ports of one position
/// (SMP attribute modifier `position << 28 | block`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MftBlockWrite {
    /// Node GUID of the switch.
    pub switch: Guid,
    /// MFT block number (32 MLIDs each, from [`MLID_BASE`]).
    pub block: u32,
    /// Port position: bit `i` of an entry is port `16·position + i` (bit 0 of position 0 is
    /// the switch's own port 0).
    pub position: u8,
    /// Port mask of each MLID of the block.
    pub entries: [u16; MFT_BLOCK_SIZE],
}

/// Entries of one P_Key table block (IBA 14.2.5.7 PartitionTable).
pub const PKEY_BLOCK_SIZE: usize = 32;

/// The port whose P_Key table is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PkeyPort {
    /// An end port (CA port), by port GUID.
    EndPort(Guid),
    /// An external port of a switch (partition enforcement), by node GUID and port number.
    SwitchPort(Guid, PortNum),
}

/// One P_Key table block to write: 32 P_Keys (bit 15 = full membership; 0 = empty entry).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PkeyBlockWrite {
    pub port: PkeyPort,
    /// Block number (entries `32·block .. 32·block + 31`).
    pub block: u16,
    pub entries: [u16; PKEY_BLOCK_SIZE],
}

/// Outcome of a successful [`SouthboundDriver::write_lft_blocks`] call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteReport {
    /// Blocks written (equals the batch length on success).
    pub blocks_written: usize,
    /// Transient failures the driver recovered from by retrying.
    pub retries: usize,
}

/// Errors of southbound drivers. Every variant names the switch (GUID) or port it concerns.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The switch exists but cannot be reached (dead, or no management path to it).
    #[error("switch {} is unreachable", fmt_guid(*guid))]
    Unreachable { guid: Guid },
    /// An operation failed in a way that may succeed if retried; the driver already retried
    /// `attempts` times in total.
    #[error("transient failure of {op} on switch {} after {attempts} attempt(s)", fmt_guid(*guid))]
    Transient {
        guid: Guid,
        op: &'static str,
        attempts: u32,
    },
    /// The port does not exist on the switch, or cannot be used for this operation.
    #[error("switch {} has no usable port {port}: {reason}", fmt_guid(*guid))]
    InvalidPort {
        guid: Guid,
        port: PortNum,
        reason: &'static str,
    },
    /// No switch with this node GUID is known to the driver.
    #[error("unknown switch GUID {}", fmt_guid(*.0))]
    UnknownSwitch(Guid),
    /// No end port with this port GUID is known to the driver.
    #[error("unknown end port GUID {}", fmt_guid(*.0))]
    UnknownEndPort(Guid),
    /// The LFT block is beyond what the switch supports.
    #[error("switch {} has no LFT block {block} (supports {max_blocks} blocks)", fmt_guid(*guid))]
    BlockOutOfRange { guid: Guid, block: u32, max_blocks: u32 },
    /// A LID plan that the driver cannot install (out of range, misaligned, conflicting, wrong size).
    #[error("invalid LID plan: {0}")]
    InvalidLidPlan(String),
    /// Two ports were given the same LID.
    #[error("LID {lid} assigned to both {} and {}", fmt_guid(*first), fmt_guid(*second))]
    LidConflict { lid: Lid, first: Guid, second: Guid },
    /// The topology source (file or generator string) could not be turned into a fabric.
    #[error("topology {source_name}: {message}")]
    Topology { source_name: String, message: String },
    /// Invalid driver configuration.
    #[error("invalid driver configuration: {0}")]
    Config(String),
    /// A device answered something the driver does not understand.
    #[error("protocol error{}: {message}", guid.map(|g| format!(" from {}", fmt_guid(g))).unwrap_or_default())]
    Protocol { guid: Option<Guid>, message: String },
    /// An operation did not complete in time.
    #[error("{op} on switch {} timed out", fmt_guid(*guid))]
    Timeout { guid: Guid, op: &'static str },
    /// The driver does not implement this operation.
    #[error("operation not supported by this driver: {0}")]
    Unsupported(&'static str),
    /// Operating-system I/O error (device file, socket).
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// This manager may not write (high availability: not the leader, lease not renewed, or a
    /// switch has seen a newer leader epoch); `reason` says which ([`crate::Fence`]).
    #[error("{op} refused: this manager is fenced: {reason}")]
    Fenced { op: &'static str, reason: String },
    /// A data VL plan the fabric cannot hold ([`SouthboundDriver::program_data_vls`]): the
    /// first port (switch GUID or CA port GUID, port number) with too few VLs or no SL-to-VL
    /// table.
    #[error("data VL plan refused: {} port {port}: {reason}", fmt_guid(*guid))]
    DataVls { guid: Guid, port: PortNum, reason: String },
}

impl DriverError {
    /// Whether retrying the same operation later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, DriverError::Transient { .. } | DriverError::Timeout { .. })
    }
}

/// What a driver can do; the daemon sizes its LID plan and update protocol from this.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriverCaps {
    /// Driver name as used in the config (`mock`, `umad`, `oob`).
    pub name: &'static str,
    /// Highest unicast address the fabric supports (InfiniBand: `0xBFFF`).
    pub max_lid: Lid,
    /// Number of LFT blocks each switch accepts, if bounded.
    pub max_lft_blocks: Option<u32>,
    /// The virtual lane carrying escape-LID traffic, if the driver configures VLs.
    pub escape_vl: Option<u8>,
}

/// Counters of the management traffic a driver sent (for status and comparisons with other
/// subnet managers). Drivers without such traffic (mock, oob) report zeros.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// Management packets sent (umad: SMPs written, re-sends included).
    pub smps_sent: u64,
    /// Re-sends after lost or bounced packets.
    pub retries: u64,
    /// Packets given up after all attempts.
    pub failures: u64,
}

/// Part of the fabric a driver learnt about after its last [`SouthboundDriver::discover`]
/// (e.g. the end ports of a switch whose agent was down at discovery): unknown to the running
/// fabric, hence not routed until the next discovery (a restart of the daemon).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopologyGap {
    /// Node GUID of the switch that lists them.
    pub switch: Guid,
    /// Node description of the switch, when known.
    pub name: String,
    /// End ports (port GUIDs) the switch lists that the last discovery did not know.
    pub end_ports: Vec<Guid>,
    /// Switch-to-switch cables (this switch's port, remote GUID) the last discovery did not know.
    pub links: Vec<(PortNum, Guid)>,
}

impl std::fmt::Display for TopologyGap {
    /// `topology incomplete: switch leaf-1 (0x...) lists 4 end ports unknown since start`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let who = if self.name.is_empty() {
            fmt_guid(self.switch)
        } else {
            format!("{} ({})", self.name, fmt_guid(self.switch))
        };
        let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        let mut what = Vec::new();
        if !self.end_ports.is_empty() {
            what.push(plural(self.end_ports.len(), "end port"));
        }
        if !self.links.is_empty() || self.end_ports.is_empty() {
            what.push(plural(self.links.len(), "link"));
        }
        write!(
            f,
            "topology incomplete: switch {who} lists {} unknown since start",
            what.join(" and ")
        )
    }
}

/// Whether the escape virtual lane is usable: every live port's SL-to-VL table maps the escape
/// service level to [`DriverCaps::escape_vl`] (see [`SouthboundDriver::escape_vl_ready`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EscapeVlStatus {
    /// Every table the fabric needs is programmed and nothing is pending.
    pub ready: bool,
    /// Tables (SLtoVLMappingTable Sets) still to program.
    pub pending: u64,
    /// The last programming pass left failures: the first one, naming GUID and port.
    pub error: Option<String>,
    /// When the fabric's tables were last all programmed (Unix ms; 0 = never).
    pub ready_at_unix_ms: u64,
}

/// The service-level to virtual-lane map a routing needs when its routes are spread over several
/// data VLs (DFSSSP's virtual layers; the Slim Fly paper, seed 003 §5.2): the SL-to-VL table every
/// live switch port pair and CA port must hold (see [`SouthboundDriver::program_data_vls`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataVlPlan {
    /// VL of each SL (index = SL). SLs the routing does not use map to VL 0. With `escape`,
    /// the escape SL keeps the driver's escape VL ([`DriverCaps::escape_vl`]).
    pub sl_to_vl: [u8; 16],
    /// Data VLs the plan needs on every port: 1 + the highest VL in `sl_to_vl`.
    pub data_vls: u8,
    /// The routing has escape LIDs (LMC ≥ 1, the five-phase update): the driver keeps the
    /// escape SL on its escape VL and no other SL may use that VL. `false` (LMC 0, no escape
    /// LID): every SL is a data SL and the driver reserves no VL, so SL 1 may carry a layer.
    pub escape: bool,
}

impl DataVlPlan {
    /// The plan of a routing on one data VL (every SL on VL 0) plus the escape SL on `escape_vl`:
    /// what the drivers program for the five-phase update alone.
    pub fn escape_only(escape_sl: u8, escape_vl: u8) -> DataVlPlan {
        let mut sl_to_vl = [0u8; 16];
        sl_to_vl[usize::from(escape_sl & 0x0f)] = escape_vl;
        DataVlPlan {
            sl_to_vl,
            data_vls: escape_vl + 1,
            escape: true,
        }
    }
    /// SL `i` on VL `i` for `i < data_vls` (every other SL on VL 0): the plan of a VL layering
    /// whose layer SLs equal their VLs (the escape SL included, kept on the escape VL).
    pub fn identity(data_vls: u8) -> DataVlPlan {
        let mut sl_to_vl = [0u8; 16];
        for (i, v) in sl_to_vl.iter_mut().enumerate().take(usize::from(data_vls.min(15))) {
            *v = i as u8;
        }
        DataVlPlan {
            sl_to_vl,
            data_vls: data_vls.max(1),
            escape: true,
        }
    }
    /// [`DataVlPlan::identity`] of a routing without escape LIDs (LMC 0): SL `i` on VL `i` for
    /// `i < data_vls`, no VL reserved, so the plan needs exactly `data_vls` data VLs.
    pub fn identity_without_escape(data_vls: u8) -> DataVlPlan {
        DataVlPlan {
            escape: false,
            ..DataVlPlan::identity(data_vls)
        }
    }
}

/// A southbound driver: discovery, physical events and programming of one fabric.
///
/// See the [module documentation](self) for the retry and parallelism contract.
#[async_trait]
pub trait SouthboundDriver: Send + Sync {
    /// Static capabilities of the driver and fabric.
    fn caps(&self) -> DriverCaps;

    /// Full sweep of the fabric: every switch and end port with its cabling and current state.
    /// End ports come in topology source order (that order is the global end-node order). Dead
    /// switches that the driver still knows are returned with `up == false`. The returned
    /// snapshot has generation 0: the caller numbers generations.
    async fn discover(&self) -> Result<Fabric, DriverError>;

    /// A new stream of the physical changes the driver observes from now on (link, switch and
    /// end port up/down). Each call returns an independent receiver; dropping it unsubscribes.
    fn subscribe_events(&self) -> tokio::sync::mpsc::UnboundedReceiver<FabricEvent>;

    /// Installs a LID plan (LIDs and LMC of every switch and end port of `fabric`, addressed by
    /// GUID). Replaces any previous assignment as a whole.
    async fn configure_lids(&self, fabric: &Fabric, lids: &LidPlan) -> Result<(), DriverError>;

    /// Writes a batch of LFT blocks, possibly to many switches. Transient failures are retried
    /// inside the driver; on `Err` some blocks of the batch may already be written.
    async fn write_lft_blocks(&self, blocks: &[LftBlockWrite]) -> Result<WriteReport, DriverError>;

    /// Reads one LFT block back from a switch (blocks never written read as all 255).
    async fn read_lft_block(&self, switch: Guid, block: u32) -> Result<[u8; BLOCK_SIZE], DriverError>;

    /// Reads `count` consecutive LFT blocks from `first` back from one switch, in order (the
    /// takeover's and crash recovery's read-back). Fails as [`SouthboundDriver::read_lft_block`]
    /// fails for the first block that cannot be read. Default: one `read_lft_block` per block;
    /// drivers with a bulk read override it.
    async fn read_lft_blocks(
        &self,
        switch: Guid,
        first: u32,
        count: u32,
    ) -> Result<Vec<[u8; BLOCK_SIZE]>, DriverError> {
        let mut out = Vec::with_capacity(count as usize);
        for b in first..first.saturating_add(count) {
            out.push(self.read_lft_block(switch, b).await?);
        }
        Ok(out)
    }

    /// Writes a batch of multicast forwarding table blocks (same retry contract as
    /// [`SouthboundDriver::write_lft_blocks`]). Default: unsupported.
    async fn write_mft_blocks(&self, blocks: &[MftBlockWrite]) -> Result<WriteReport, DriverError> {
        let _ = blocks;
        Err(DriverError::Unsupported("multicast forwarding tables"))
    }

    /// Reads one MFT block (one position) back from a switch; never written reads as all 0.
    /// Default: unsupported.
    async fn read_mft_block(
        &self,
        switch: Guid,
        block: u32,
        position: u8,
    ) -> Result<[u16; MFT_BLOCK_SIZE], DriverError> {
        let _ = (switch, block, position);
        Err(DriverError::Unsupported("multicast forwarding tables"))
    }

    /// Writes a batch of P_Key table blocks (end ports, and switch external ports where
    /// partition enforcement is on). Default: unsupported.
    async fn write_pkey_blocks(&self, blocks: &[PkeyBlockWrite]) -> Result<WriteReport, DriverError> {
        let _ = blocks;
        Err(DriverError::Unsupported("partition tables"))
    }

    /// Reads one P_Key table block back. Default: unsupported.
    async fn read_pkey_block(&self, port: PkeyPort, block: u16) -> Result<[u16; PKEY_BLOCK_SIZE], DriverError> {
        let _ = (port, block);
        Err(DriverError::Unsupported("partition tables"))
    }

    /// Takes the link on a switch port physically down or up (fault drills). The change is then
    /// reported on the event streams like any other physical change.
    async fn set_port_state(&self, switch: Guid, port: PortNum, up: bool) -> Result<(), DriverError>;

    /// Powers a switch off or on (fault drills).
    async fn set_switch_state(&self, switch: Guid, up: bool) -> Result<(), DriverError>;

    /// Waits until the escape VL is programmed on every live port (SL-to-VL tables mapping the
    /// escape service level to [`DriverCaps::escape_vl`]), starting or re-running the
    /// programming of the tables still missing (new or relinked switches and CAs). The update
    /// protocol calls it before it moves traffic to the escape LIDs; an `Err` names the first
    /// GUID and port whose table could not be written. Drivers that configure no VLs (or
    /// program them synchronously) keep the default: ready at once.
    async fn escape_vl_ready(&self) -> Result<(), DriverError> {
        Ok(())
    }

    /// Programs `plan` on every live port: enough operational data VLs and the SL-to-VL tables
    /// of every switch (input, output) port pair and CA port, then waits until all are written
    /// (new or relinked ports get the plan in force, not the escape-only table). The daemon
    /// calls it before it installs a routing whose routes use more than the escape VL (a VL
    /// layering); an `Err` names the first GUID and port that cannot hold it (VLCap too small,
    /// Set refused). Default: the escape-only plan is [`Self::escape_vl_ready`], anything else
    /// [`DriverError::Unsupported`].
    async fn program_data_vls(&self, plan: &DataVlPlan) -> Result<(), DriverError> {
        match self.caps().escape_vl {
            Some(vl) if plan.data_vls <= vl + 1 && plan.sl_to_vl.iter().all(|&v| v == 0 || v == vl) => {
                self.escape_vl_ready().await
            }
            None if plan.data_vls <= 1 => Ok(()),
            _ => Err(DriverError::Unsupported("programming data VLs beyond the escape VL")),
        }
    }

    /// The data VLs every live port can operate (the fewest over the fabric's ports, from their
    /// VLCap), when the driver knows it; the daemon refuses a VL layering that needs more, before
    /// routing is installed. Default: `None` (unknown).
    fn data_vl_capacity(&self) -> Option<u8> {
        None
    }

    /// Current state of the escape VL programming (for status). Default: ready.
    fn escape_vl_status(&self) -> EscapeVlStatus {
        EscapeVlStatus {
            ready: true,
            ..EscapeVlStatus::default()
        }
    }

    /// LFT blocks one [`SouthboundDriver::write_lft_blocks`] call is best given, for a manager
    /// that leaves the batch size to the driver (fabricd's `[update] upload_batch_blocks = 0`):
    /// e.g. the blocks one request carries. Default: `None` (the manager's own default).
    fn lft_blocks_per_call(&self) -> Option<usize> {
        None
    }

    /// Management traffic counters. Default: zeros (drivers that send no SMPs).
    fn driver_stats(&self) -> DriverStats {
        DriverStats::default()
    }

    /// Subnet-manager election at start (IBA 14.4): when another manager with precedence is
    /// master, stands by — writes nothing, reports `on_standby`, polls the master — until it is
    /// gone, then returns `true` (the caller discovers again and takes over); `false` at once
    /// when there is no such master. Default: `false` (drivers without other managers).
    async fn standby_while_master(&self, on_standby: &(dyn Fn(String) + Send + Sync)) -> Result<bool, DriverError> {
        let _ = on_standby;
        Ok(false)
    }

    /// The addresses the last discovery found in force on the fabric (set by an earlier subnet
    /// manager): `(GUID, first LID, last LID)` of every switch (its port 0) and end port (base
    /// LID and `2^LMC` LIDs) that has one, in the `guid2lid` record form. A manager taking over a
    /// running fabric keeps them instead of renumbering. Default: none.
    fn lids_in_force(&self) -> Vec<(Guid, Lid, Lid)> {
        Vec::new()
    }

    /// The port the manager itself manages the fabric from (its CA port GUID, or its switch's
    /// GUID), when the fabric has one: OpenSM's `SELF` in a partitions file, and a full member
    /// of every partition so that every node reaches the SA. Default: none (mock, oob).
    fn sm_port_guid(&self) -> Option<Guid> {
        None
    }

    /// Problems of the fabric's configuration the driver found that do not stop it (one line
    /// each, naming the switch): oob agents without VLs for the escape traffic, agents that
    /// refuse or cannot take the management key. Polled by the daemon after every commit; a
    /// new line is logged as a warning. Default: none.
    fn configuration_warnings(&self) -> Vec<String> {
        Vec::new()
    }

    /// What the driver learnt after its last discovery that the discovered fabric lacks (end
    /// ports or cables listed by a switch that was not fully discovered), one entry per switch.
    /// The daemon cannot route them without a new discovery and reports the fabric as not
    /// ready while any is listed. Polled by the daemon at every event and commit. Default:
    /// none (drivers whose discovery is complete).
    fn topology_gaps(&self) -> Vec<TopologyGap> {
        Vec::new()
    }

    /// Hands the driver the Subnet Administration service. A driver that reads the subnet's
    /// SMP attributes and answers SA MADs on the wire (umad) keeps the service's snapshot
    /// current itself (after sweeps, LID configuration and acknowledged LFT writes), sets it
    /// serving only while it is the master, and returns `true`. The default returns `false`:
    /// the daemon then publishes snapshots built from the model and the acknowledged writes.
    fn attach_sa(&self, sa: std::sync::Arc<fabric_sa::SaService>) -> bool {
        let _ = sa;
        false
    }

    /// Reads the counters of `ports` (the port-health monitor's periodic poll). One answer per
    /// port, in the order asked; a port that cannot be read has its own error and does not fail
    /// the batch (`Err` only when the driver cannot read counters at all). The driver bounds its
    /// own parallelism so that routing traffic keeps priority (umad: a separate, small window
    /// of PerfMgt GMPs; oob: the agent connections' spare capacity). Default: unsupported.
    async fn read_port_counters(&self, ports: &[CounterPort]) -> Result<Vec<CountersReading>, DriverError> {
        let _ = ports;
        Err(DriverError::Unsupported("port counters"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_guid_and_port() {
        let e = DriverError::InvalidPort {
            guid: 0x10,
            port: 40,
            reason: "out of range",
        };
        assert_eq!(
            e.to_string(),
            "switch 0x0000000000000010 has no usable port 40: out of range"
        );
        let e = DriverError::Transient {
            guid: 0xab,
            op: "LFT block write",
            attempts: 4,
        };
        assert!(e.is_transient());
        assert_eq!(
            e.to_string(),
            "transient failure of LFT block write on switch 0x00000000000000ab after 4 attempt(s)"
        );
        let e = DriverError::Protocol {
            guid: None,
            message: "short read".into(),
        };
        assert_eq!(e.to_string(), "protocol error: short read");
        assert!(!DriverError::Unreachable { guid: 1 }.is_transient());
    }

    #[test]
    fn provided_methods_default_to_ready_and_zero() {
        struct Nothing;
        #[async_trait]
        impl SouthboundDriver for Nothing {
            fn caps(&self) -> DriverCaps {
                DriverCaps {
                    name: "nothing",
                    max_lid: 1,
                    max_lft_blocks: None,
                    escape_vl: None,
                }
            }
            async fn discover(&self) -> Result<Fabric, DriverError> {
                Err(DriverError::Unsupported("discover"))
            }
            fn subscribe_events(&self) -> tokio::sync::mpsc::UnboundedReceiver<FabricEvent> {
                tokio::sync::mpsc::unbounded_channel().1
            }
            async fn configure_lids(&self, _: &Fabric, _: &LidPlan) -> Result<(), DriverError> {
                Ok(())
            }
            async fn write_lft_blocks(&self, _: &[LftBlockWrite]) -> Result<WriteReport, DriverError> {
                Ok(WriteReport::default())
            }
            async fn read_lft_block(&self, s: Guid, _: u32) -> Result<[u8; BLOCK_SIZE], DriverError> {
                Err(DriverError::UnknownSwitch(s))
            }
            async fn set_port_state(&self, s: Guid, _: PortNum, _: bool) -> Result<(), DriverError> {
                Err(DriverError::UnknownSwitch(s))
            }
            async fn set_switch_state(&self, s: Guid, _: bool) -> Result<(), DriverError> {
                Err(DriverError::UnknownSwitch(s))
            }
        }
        let d = Nothing;
        assert_eq!(d.driver_stats(), DriverStats::default());
        let st = d.escape_vl_status();
        assert!(st.ready && st.error.is_none() && st.pending == 0);
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        assert!(rt.block_on(d.escape_vl_ready()).is_ok());
        assert!(d.topology_gaps().is_empty());
    }

    #[test]
    fn topology_gap_names_the_switch_and_counts() {
        let mut g = TopologyGap {
            switch: 0x10,
            name: "leaf-1".into(),
            end_ports: vec![1, 2, 3, 4],
            links: Vec::new(),
        };
        assert_eq!(
            g.to_string(),
            "topology incomplete: switch leaf-1 (0x0000000000000010) lists 4 end ports unknown since start"
        );
        g.name.clear();
        g.end_ports.truncate(1);
        g.links.push((3, 0x20));
        assert_eq!(
            g.to_string(),
            "topology incomplete: switch 0x0000000000000010 lists 1 end port and 1 link unknown since start"
        );
    }

    #[test]
    fn trait_is_dyn_compatible() {
        fn takes(_: Option<std::sync::Arc<dyn SouthboundDriver>>) {}
        takes(None);
    }
}
