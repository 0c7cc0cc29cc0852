//! The attributes the subnet manager reads and writes, decoded from and encoded into the 64
//! attribute-data bytes: NodeInfo, NodeDescription, PortInfo, SwitchInfo, SLtoVLMappingTable,
//! SMInfo and Notice, with their field values (port states, capability bits, SM states).

use fabric_topology::Guid;

use super::bytes::{be16, be32, be64, debug_fields, put16, put32, put64};
use super::smp::SMP_DATA_SIZE;

/// Logical port state (PortInfo.PortState).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum PortState {
    /// 0: no state change (only valid in a Set).
    NoChange,
    /// 1: link down.
    Down,
    /// 2: physical link up, not yet configured.
    Init,
    /// 3: configured, waiting for the neighbour.
    Armed,
    /// 4: forwarding data traffic.
    Active,
    /// 5: ActiveDefer.
    ActiveDefer,
    /// Any other value.
    Other(u8),
}

impl PortState {
    /// From the 4-bit field.
    pub fn from_bits(v: u8) -> PortState {
        match v & 0x0f {
            0 => PortState::NoChange,
            1 => PortState::Down,
            2 => PortState::Init,
            3 => PortState::Armed,
            4 => PortState::Active,
            5 => PortState::ActiveDefer,
            x => PortState::Other(x),
        }
    }
    /// To the 4-bit field.
    pub fn bits(self) -> u8 {
        match self {
            PortState::NoChange => 0,
            PortState::Down => 1,
            PortState::Init => 2,
            PortState::Armed => 3,
            PortState::Active => 4,
            PortState::ActiveDefer => 5,
            PortState::Other(x) => x & 0x0f,
        }
    }
    /// Whether the physical link is up (INIT, ARMED, ACTIVE or ActiveDefer).
    pub fn link_up(self) -> bool {
        matches!(
            self,
            PortState::Init | PortState::Armed | PortState::Active | PortState::ActiveDefer
        )
    }
}

/// PortInfo.PortPhysicalState value "Disabled" (a Set takes the link down).
pub const PHYS_DISABLED: u8 = 3;
/// PortInfo.PortPhysicalState value "Polling" (a Set re-enables a disabled port).
pub const PHYS_POLLING: u8 = 2;
/// PortInfo.PortPhysicalState value "LinkUp".
pub const PHYS_LINK_UP: u8 = 5;

/// NodeInfo (attribute 0x0011).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NodeInfo {
    /// Node type (1 CA, 2 switch, 3 router).
    pub node_type: u8,
    /// Number of physical ports.
    pub num_ports: u8,
    /// System image GUID.
    pub system_image_guid: Guid,
    /// Node GUID.
    pub node_guid: Guid,
    /// GUID of the port the SMP arrived on (switches: port 0).
    pub port_guid: Guid,
    /// Partition table capacity.
    pub partition_cap: u16,
    /// Device id.
    pub device_id: u16,
    /// Revision.
    pub revision: u32,
    /// Port the SMP arrived on.
    pub local_port: u8,
    /// Vendor id (24 bits).
    pub vendor_id: u32,
}

impl NodeInfo {
    /// Decodes the attribute data.
    pub fn decode(d: &[u8; SMP_DATA_SIZE]) -> NodeInfo {
        NodeInfo {
            node_type: d[2],
            num_ports: d[3],
            system_image_guid: be64(d, 4),
            node_guid: be64(d, 12),
            port_guid: be64(d, 20),
            partition_cap: be16(d, 28),
            device_id: be16(d, 30),
            revision: be32(d, 32),
            local_port: d[36],
            vendor_id: be32(d, 36) & 0x00ff_ffff,
        }
    }
    /// Encodes the attribute data (NodeInfo is read-only on the wire; used by tests and mocks).
    pub fn encode(&self) -> [u8; SMP_DATA_SIZE] {
        let mut d = [0u8; SMP_DATA_SIZE];
        d[0] = 1;
        d[1] = 1;
        d[2] = self.node_type;
        d[3] = self.num_ports;
        put64(&mut d, 4, self.system_image_guid);
        put64(&mut d, 12, self.node_guid);
        put64(&mut d, 20, self.port_guid);
        put16(&mut d, 28, self.partition_cap);
        put16(&mut d, 30, self.device_id);
        put32(&mut d, 32, self.revision);
        put32(
            &mut d,
            36,
            (u32::from(self.local_port) << 24) | (self.vendor_id & 0x00ff_ffff),
        );
        d
    }
}

/// Decodes NodeDescription (attribute 0x0010): 64 bytes of text, NUL-terminated.
pub fn decode_node_desc(d: &[u8; SMP_DATA_SIZE]) -> String {
    let end = d.iter().position(|&c| c == 0).unwrap_or(SMP_DATA_SIZE);
    String::from_utf8_lossy(&d[..end]).trim_end().to_string()
}

/// Encodes a NodeDescription (truncated to 64 bytes).
pub fn encode_node_desc(s: &str) -> [u8; SMP_DATA_SIZE] {
    let mut d = [0u8; SMP_DATA_SIZE];
    let b = s.as_bytes();
    let n = b.len().min(SMP_DATA_SIZE);
    d[..n].copy_from_slice(&b[..n]);
    d
}

/// PortInfo (attribute 0x0015). The image is kept whole so that a Set writes back every field
/// the manager does not change; accessors read and write the fields the driver uses.
#[derive(Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// The 64 attribute-data bytes.
    pub raw: [u8; SMP_DATA_SIZE],
}

debug_fields!(PortInfo {
    lid,
    master_sm_lid,
    lmc,
    state,
    phys_state,
    width_active = link_width_active,
    speed_active = link_speed_active
});

impl PortInfo {
    /// Wraps attribute data.
    pub fn decode(d: &[u8; SMP_DATA_SIZE]) -> PortInfo {
        PortInfo { raw: *d }
    }
    /// GidPrefix (the subnet prefix of the port's GIDs, bytes 8..16).
    pub fn gid_prefix(&self) -> u64 {
        be64(&self.raw, 8)
    }
    /// Sets GidPrefix.
    pub fn set_gid_prefix(&mut self, prefix: u64) {
        put64(&mut self.raw, 8, prefix);
    }
    /// Base LID.
    pub fn lid(&self) -> u16 {
        be16(&self.raw, 16)
    }
    /// Sets the base LID.
    pub fn set_lid(&mut self, lid: u16) {
        put16(&mut self.raw, 16, lid);
    }
    /// LID of the master subnet manager.
    pub fn master_sm_lid(&self) -> u16 {
        be16(&self.raw, 18)
    }
    /// Sets MasterSMLID.
    pub fn set_master_sm_lid(&mut self, lid: u16) {
        put16(&mut self.raw, 18, lid);
    }
    /// CapabilityMask.
    pub fn capability_mask(&self) -> u32 {
        be32(&self.raw, 20)
    }
    /// Sets CapabilityMask (bit 1 = IsSM).
    pub fn set_capability_mask(&mut self, m: u32) {
        put32(&mut self.raw, 20, m);
    }
    /// LocalPortNum.
    pub fn local_port(&self) -> u8 {
        self.raw[28]
    }
    /// LinkWidthEnabled.
    pub fn link_width_enabled(&self) -> u8 {
        self.raw[29]
    }
    /// LinkWidthSupported.
    pub fn link_width_supported(&self) -> u8 {
        self.raw[30]
    }
    /// LinkWidthActive (1 = 1x, 2 = 4x, 4 = 8x, 8 = 12x).
    pub fn link_width_active(&self) -> u8 {
        self.raw[31]
    }
    /// LinkSpeedSupported.
    pub fn link_speed_supported(&self) -> u8 {
        self.raw[32] >> 4
    }
    /// Logical port state.
    pub fn state(&self) -> PortState {
        PortState::from_bits(self.raw[32])
    }
    /// Sets the logical port state field (0 = no change).
    pub fn set_state(&mut self, s: PortState) {
        self.raw[32] = (self.raw[32] & 0xf0) | s.bits();
    }
    /// PortPhysicalState.
    pub fn phys_state(&self) -> u8 {
        self.raw[33] >> 4
    }
    /// Sets PortPhysicalState (0 = no change, 2 = Polling, 3 = Disabled).
    pub fn set_phys_state(&mut self, p: u8) {
        self.raw[33] = (self.raw[33] & 0x0f) | ((p & 0x0f) << 4);
    }
    /// LMC.
    pub fn lmc(&self) -> u8 {
        self.raw[34] & 0x07
    }
    /// Sets LMC.
    pub fn set_lmc(&mut self, lmc: u8) {
        self.raw[34] = (self.raw[34] & 0xf8) | (lmc & 0x07);
    }
    /// LinkSpeedActive (1 = SDR, 2 = DDR, 4 = QDR).
    pub fn link_speed_active(&self) -> u8 {
        self.raw[35] >> 4
    }
    /// VLCap.
    pub fn vl_cap(&self) -> u8 {
        self.raw[37] >> 4
    }
    /// OperationalVLs.
    pub fn operational_vls(&self) -> u8 {
        self.raw[43] >> 4
    }
    /// Sets OperationalVLs.
    pub fn set_operational_vls(&mut self, v: u8) {
        self.raw[43] = (self.raw[43] & 0x0f) | ((v & 0x0f) << 4);
    }
    /// Width/speed as ibnetdiscover prints it (`4xQDR`), if known.
    pub fn speed_string(&self) -> Option<String> {
        let w = match self.link_width_active() {
            1 => "1x",
            2 => "4x",
            4 => "8x",
            8 => "12x",
            16 => "2x",
            _ => return None,
        };
        let s = match self.link_speed_active() {
            1 => "SDR",
            2 => "DDR",
            4 => "QDR",
            _ => return None,
        };
        Some(format!("{w}{s}"))
    }
    /// A copy prepared for a Set: PortState and PortPhysicalState set to "no change", so that
    /// writing it back changes only what the caller sets afterwards.
    pub fn for_set(&self) -> PortInfo {
        let mut p = self.clone();
        p.set_state(PortState::NoChange);
        p.set_phys_state(0);
        p
    }
}

/// SwitchInfo (attribute 0x0012), kept whole for read-modify-write.
#[derive(Clone, PartialEq, Eq)]
pub struct SwitchInfo {
    /// The 64 attribute-data bytes.
    pub raw: [u8; SMP_DATA_SIZE],
}

debug_fields!(SwitchInfo {
    linear_fdb_cap,
    linear_fdb_top,
    port_state_change
});

impl SwitchInfo {
    /// Wraps attribute data.
    pub fn decode(d: &[u8; SMP_DATA_SIZE]) -> SwitchInfo {
        SwitchInfo { raw: *d }
    }
    /// LinearFDBCap: number of LFT entries the switch supports.
    pub fn linear_fdb_cap(&self) -> u16 {
        be16(&self.raw, 0)
    }
    /// RandomFDBCap.
    pub fn random_fdb_cap(&self) -> u16 {
        be16(&self.raw, 2)
    }
    /// MulticastFDBCap.
    pub fn multicast_fdb_cap(&self) -> u16 {
        be16(&self.raw, 4)
    }
    /// LinearFDBTop: highest LID the LFT forwards.
    pub fn linear_fdb_top(&self) -> u16 {
        be16(&self.raw, 6)
    }
    /// Sets LinearFDBTop.
    pub fn set_linear_fdb_top(&mut self, top: u16) {
        put16(&mut self.raw, 6, top);
    }
    /// DefaultPort.
    pub fn default_port(&self) -> u8 {
        self.raw[8]
    }
    /// PortStateChange: some port changed state since it was last cleared.
    pub fn port_state_change(&self) -> bool {
        self.raw[11] & 0x04 != 0
    }
    /// Sets the PortStateChange bit of a Set image (writing 1 clears it on the switch; 0 leaves
    /// it unchanged).
    pub fn set_port_state_change(&mut self, v: bool) {
        if v {
            self.raw[11] |= 0x04;
        } else {
            self.raw[11] &= !0x04;
        }
    }
    /// LifeTimeValue.
    pub fn life_time_value(&self) -> u8 {
        self.raw[11] >> 3
    }
    /// OptimizedSLtoVLMappingProgramming (IBA 1.2.1+, SwitchInfo bits 94-95, the low two bits of
    /// byte 11; libibmad's `OptSLtoVLMapping`): its low bit says the switch accepts the
    /// SLtoVLMappingTable attribute-modifier bits [`SL2VL_ALL_INPUT_PORTS`] and
    /// [`SL2VL_ALL_OUTPUT_PORTS`] (tested the same way as OpenSM's
    /// `ib_switch_info_get_opt_sl2vlmapping`).
    pub fn optimized_sl2vl(&self) -> bool {
        self.raw[11] & 0x01 != 0
    }
    /// EnhancedPort0 (SwitchInfo bit 132, byte 16 mask 0x08): port 0 is an enhanced switch port
    /// 0 that carries data traffic (it then needs SL-to-VL entries as an input port). A base
    /// port 0 only sees management traffic on VL 15.
    pub fn enhanced_port0(&self) -> bool {
        self.raw[16] & 0x08 != 0
    }
}

/// SLtoVLMappingTable attribute-modifier bit 16: the Set applies to every output port (the
/// output-port field is ignored). Only for switches advertising
/// [`SwitchInfo::optimized_sl2vl`].
pub const SL2VL_ALL_OUTPUT_PORTS: u32 = 1 << 16;
/// SLtoVLMappingTable attribute-modifier bit 17: the Set applies to every input port (the
/// input-port field is ignored). OpenSM programs "all input ports to output port `p`" as
/// `0x20000 | p` and "every pair" as `0x30000`.
pub const SL2VL_ALL_INPUT_PORTS: u32 = 1 << 17;
/// PortInfo.CapabilityMask bit 6, IsSLMappingSupported: the port has SL-to-VL tables (checked
/// on port 0 for a switch, like OpenSM's `IB_PORT_CAP_HAS_SL_MAP`).
pub const CAP_SL_MAPPING: u32 = 1 << 6;
/// PortInfo.CapabilityMask bit 1, IsSM: a subnet manager runs behind the port (set on the
/// manager's own port; another manager's port with it is a candidate master).
pub const CAP_IS_SM: u32 = 1 << 1;

/// An SL-to-VL mapping table (attribute 0x0017): the VL of each of the 16 service levels.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct SlToVl(pub [u8; 16]);

impl SlToVl {
    /// Decodes the table (two SLs per byte, SL 0 in the high nibble of byte 0).
    pub fn decode(d: &[u8; SMP_DATA_SIZE]) -> SlToVl {
        let mut t = [0u8; 16];
        for (i, v) in t.iter_mut().enumerate() {
            let b = d[i / 2];
            *v = if i % 2 == 0 { b >> 4 } else { b & 0x0f };
        }
        SlToVl(t)
    }
    /// Encodes the table.
    pub fn encode(&self) -> [u8; SMP_DATA_SIZE] {
        let mut d = [0u8; SMP_DATA_SIZE];
        for (i, v) in self.0.iter().enumerate() {
            d[i / 2] |= if i % 2 == 0 { (v & 0x0f) << 4 } else { v & 0x0f };
        }
        d
    }
    /// The table of this driver: SL 1 (escape traffic) on `escape_vl`, every other SL on VL 0.
    pub fn escape(escape_vl: u8) -> SlToVl {
        let mut t = [0u8; 16];
        t[1] = escape_vl;
        SlToVl(t)
    }
    /// Attribute modifier of a switch's table from `in_port` to `out_port`.
    pub fn switch_modifier(in_port: u8, out_port: u8) -> u32 {
        (u32::from(in_port) << 8) | u32::from(out_port)
    }
    /// Attribute modifier of an optimized Set of every (input, output) pair of a switch.
    pub fn all_ports_modifier() -> u32 {
        SL2VL_ALL_INPUT_PORTS | SL2VL_ALL_OUTPUT_PORTS
    }
}

/// SMInfo.SMState: not active.
pub const SM_STATE_NOT_ACTIVE: u8 = 0;
/// SMInfo.SMState: discovering (the first sweep is under way).
pub const SM_STATE_DISCOVERING: u8 = 1;
/// SMInfo.SMState: standby.
pub const SM_STATE_STANDBY: u8 = 2;
/// SMInfo.SMState: master.
pub const SM_STATE_MASTER: u8 = 3;

/// SubnSet(SMInfo) attribute modifier HANDOVER: the master hands mastership to the receiver.
pub const SMINFO_HANDOVER: u32 = 1;
/// SubnSet(SMInfo) attribute modifier ACKNOWLEDGE: the receiver acknowledges a HANDOVER.
pub const SMINFO_ACKNOWLEDGE: u32 = 2;
/// SubnSet(SMInfo) attribute modifier DISABLE: the master tells the receiver to stop.
pub const SMINFO_DISABLE: u32 = 3;
/// SubnSet(SMInfo) attribute modifier STANDBY: the master tells the receiver to stand by.
pub const SMINFO_STANDBY: u32 = 4;
/// SubnSet(SMInfo) attribute modifier DISCOVER: the master tells the receiver to discover.
pub const SMINFO_DISCOVER: u32 = 5;

/// Name of a SubnSet(SMInfo) attribute modifier (IBA 14.4.1), for logs.
pub fn sminfo_modifier_name(modifier: u32) -> &'static str {
    match modifier {
        SMINFO_HANDOVER => "HANDOVER",
        SMINFO_ACKNOWLEDGE => "ACKNOWLEDGE",
        SMINFO_DISABLE => "DISABLE",
        SMINFO_STANDBY => "STANDBY",
        SMINFO_DISCOVER => "DISCOVER",
        _ => "unknown",
    }
}

/// SMInfo (attribute 0x0020, IBA 14.2.5.13): GUID @0, SM_Key @8, ActCount @16, then
/// Priority (high nibble) and SMState (low nibble) @20.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct SmInfo {
    /// Port GUID of the manager.
    pub guid: u64,
    /// SM_Key (reported as 0 unless the requester proved it knows it; this manager uses 0).
    pub sm_key: u64,
    /// Activity counter (heartbeat of the master: SMPs sent).
    pub act_count: u32,
    /// Priority (0..=15).
    pub priority: u8,
    /// SMState (`SM_STATE_*`).
    pub state: u8,
}

impl SmInfo {
    /// Decodes the attribute data.
    pub fn decode(d: &[u8; SMP_DATA_SIZE]) -> SmInfo {
        SmInfo {
            guid: be64(d, 0),
            sm_key: be64(d, 8),
            act_count: be32(d, 16),
            priority: d[20] >> 4,
            state: d[20] & 0x0f,
        }
    }
    /// Encodes the attribute data.
    pub fn encode(&self) -> [u8; SMP_DATA_SIZE] {
        let mut d = [0u8; SMP_DATA_SIZE];
        put64(&mut d, 0, self.guid);
        put64(&mut d, 8, self.sm_key);
        put32(&mut d, 16, self.act_count);
        d[20] = ((self.priority & 0x0f) << 4) | (self.state & 0x0f);
        d
    }
}

/// A trap notice (attribute 0x0002 in a Trap).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// Generic (true) or vendor-specific notice.
    pub generic: bool,
    /// Notice type (urgent 1, ...).
    pub notice_type: u8,
    /// Producer type (generic) or vendor id.
    pub producer: u32,
    /// Trap number (generic) or device id.
    pub trap_number: u16,
    /// LID of the port that issued the trap.
    pub issuer_lid: u16,
    /// Toggle bit and count.
    pub toggle_count: u16,
    /// Trap 128: LID of the switch whose port state changed.
    pub lid_addr: u16,
}

impl Notice {
    /// Decodes the notice.
    pub fn decode(d: &[u8; SMP_DATA_SIZE]) -> Notice {
        Notice {
            generic: d[0] & 0x80 != 0,
            notice_type: d[0] & 0x7f,
            producer: be32(d, 0) & 0x00ff_ffff,
            trap_number: be16(d, 4),
            issuer_lid: be16(d, 6),
            toggle_count: be16(d, 8),
            lid_addr: be16(d, 10),
        }
    }
    /// Encodes the notice.
    pub fn encode(&self) -> [u8; SMP_DATA_SIZE] {
        let mut d = [0u8; SMP_DATA_SIZE];
        put32(&mut d, 0, self.producer & 0x00ff_ffff);
        d[0] = (u8::from(self.generic) << 7) | (self.notice_type & 0x7f);
        put16(&mut d, 4, self.trap_number);
        put16(&mut d, 6, self.issuer_lid);
        put16(&mut d, 8, self.toggle_count);
        put16(&mut d, 10, self.lid_addr);
        d
    }
}
