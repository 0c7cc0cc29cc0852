//! Subnet management packets (SMPs): the 256-byte MAD image, directed-route and LID-routed
//! addressing, and the attributes the subnet manager reads and writes (NodeInfo,
//! NodeDescription, PortInfo, SwitchInfo, LinearForwardingTable, SLtoVLMappingTable, Notice).
//!
//! Offsets follow the InfiniBand Architecture Specification vol. 1 ch. 14 (cross-checked against
//! `smpquery` on ibsim, see `tests/data/*.hex`). Decoders take the 64 attribute-data bytes and
//! never panic; encoders write into a 64-byte buffer.

use fabric_topology::Guid;

/// Size of a MAD.
pub const MAD_SIZE: usize = 256;
/// Size of the SMP attribute data.
pub const SMP_DATA_SIZE: usize = 64;
/// Offset of the attribute data inside an SMP.
pub const SMP_DATA_OFFSET: usize = 64;
/// Longest directed route (the InitialPath array has 64 bytes, entry 0 unused).
pub const MAX_HOPS: usize = 63;
/// Offset of the directed-route InitialPath (64 bytes, entry 0 unused).
pub const DR_INITIAL_PATH_OFFSET: usize = 128;
/// Offset of the directed-route ReturnPath (64 bytes, entry 0 unused).
pub const DR_RETURN_PATH_OFFSET: usize = 192;
/// The permissive LID (0xffff): DrSLID/DrDLID of an SMP directed end to end, and the umad
/// address of a directed-route SMP.
pub const PERMISSIVE_LID: u16 = 0xffff;

/// Management class: LID-routed subnet management.
pub const CLASS_SMP_LID: u8 = 0x01;
/// Management class: directed-route subnet management.
pub const CLASS_SMP_DR: u8 = 0x81;

/// SMP method `Get`.
pub const METHOD_GET: u8 = 0x01;
/// SMP method `Set`.
pub const METHOD_SET: u8 = 0x02;
/// SMP method `GetResp`.
pub const METHOD_GET_RESP: u8 = 0x81;
/// SMP method `Trap`.
pub const METHOD_TRAP: u8 = 0x05;
/// SMP method `TrapRepress`.
pub const METHOD_TRAP_REPRESS: u8 = 0x07;

/// Attribute `Notice` (traps).
pub const ATTR_NOTICE: u16 = 0x0002;
/// Attribute `NodeDescription`.
pub const ATTR_NODE_DESC: u16 = 0x0010;
/// Attribute `NodeInfo`.
pub const ATTR_NODE_INFO: u16 = 0x0011;
/// Attribute `SwitchInfo`.
pub const ATTR_SWITCH_INFO: u16 = 0x0012;
/// Attribute `PortInfo` (modifier = port number).
pub const ATTR_PORT_INFO: u16 = 0x0015;
/// Attribute `SLtoVLMappingTable`.
pub const ATTR_SL2VL: u16 = 0x0017;
/// Attribute `SMInfo` (answered by the manager itself: the simulator and the HCA forward it).
pub const ATTR_SM_INFO: u16 = 0x0020;
/// Attribute `LinearForwardingTable` (modifier = LFT block number).
pub const ATTR_LFT: u16 = 0x0019;
/// MAD status "unsupported method/attribute combination" (IBA 13.4.7).
pub const STATUS_UNSUPPORTED_ATTR: u16 = 0x000c;

/// NodeInfo node type: channel adapter.
pub const NODE_TYPE_CA: u8 = 1;
/// NodeInfo node type: switch.
pub const NODE_TYPE_SWITCH: u8 = 2;
/// NodeInfo node type: router.
pub const NODE_TYPE_ROUTER: u8 = 3;

/// Errors of the SMP codec.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MadError {
    /// A received MAD is shorter than the fixed SMP header.
    #[error("MAD of {len} bytes is too short (need {need})")]
    Short { len: usize, need: usize },
    /// A directed route longer than the 63 hops an SMP can carry.
    #[error("directed route of {0} hops is longer than {MAX_HOPS}")]
    RouteTooLong(usize),
    /// The MAD is not an SMP of a version this driver speaks.
    #[error("not an SMP: base version {base}, class {class:#04x}, class version {version}")]
    NotSmp { base: u8, class: u8, version: u8 },
}

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

fn be16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}
fn be32(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
fn be64(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_be_bytes(a)
}
fn put16(b: &mut [u8], o: usize, v: u16) {
    b[o..o + 2].copy_from_slice(&v.to_be_bytes());
}
fn put32(b: &mut [u8], o: usize, v: u32) {
    b[o..o + 4].copy_from_slice(&v.to_be_bytes());
}
fn put64(b: &mut [u8], o: usize, v: u64) {
    b[o..o + 8].copy_from_slice(&v.to_be_bytes());
}

/// How an SMP is addressed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Route {
    /// Directed route: output port at each hop (`path[0]` is the port of the first hop out of
    /// the manager's node; an empty path addresses the manager's own node).
    Directed(Vec<u8>),
    /// LID routed to this destination LID (needs ACTIVE links and LFT entries on the way).
    Lid(u16),
}

impl Route {
    /// Number of hops of a directed route (0 for LID routes).
    pub fn hops(&self) -> usize {
        match self {
            Route::Directed(p) => p.len(),
            Route::Lid(_) => 0,
        }
    }
}

/// One SMP as a 256-byte image.
#[derive(Clone, PartialEq, Eq)]
pub struct Smp {
    /// The raw MAD.
    pub bytes: [u8; MAD_SIZE],
}

impl std::fmt::Debug for Smp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Smp")
            .field("class", &self.class())
            .field("method", &self.method())
            .field("status", &self.status())
            .field("attr", &self.attr_id())
            .field("modifier", &self.attr_mod())
            .field("tid", &self.tid())
            .finish()
    }
}

impl Smp {
    /// A request (Get or Set) of `attr`/`modifier` along `route` with `data` as attribute data.
    pub fn request(
        route: &Route,
        method: u8,
        attr: u16,
        modifier: u32,
        data: &[u8; SMP_DATA_SIZE],
    ) -> Result<Smp, MadError> {
        let mut b = [0u8; MAD_SIZE];
        b[0] = 1;
        b[2] = 1;
        b[3] = method;
        put16(&mut b, 16, attr);
        put32(&mut b, 20, modifier);
        match route {
            Route::Directed(path) => {
                if path.len() > MAX_HOPS {
                    return Err(MadError::RouteTooLong(path.len()));
                }
                b[1] = CLASS_SMP_DR;
                b[6] = 0;
                b[7] = path.len() as u8;
                put16(&mut b, 32, 0xffff);
                put16(&mut b, 34, 0xffff);
                b[129..129 + path.len()].copy_from_slice(path);
            }
            Route::Lid(_) => b[1] = CLASS_SMP_LID,
        }
        b[SMP_DATA_OFFSET..SMP_DATA_OFFSET + SMP_DATA_SIZE].copy_from_slice(data);
        Ok(Smp { bytes: b })
    }

    /// Parses a received MAD (only the first 232 bytes need be valid; the rest is zero-filled).
    pub fn parse(buf: &[u8]) -> Result<Smp, MadError> {
        let need = SMP_DATA_OFFSET + SMP_DATA_SIZE;
        if buf.len() < need {
            return Err(MadError::Short { len: buf.len(), need });
        }
        let mut b = [0u8; MAD_SIZE];
        let n = buf.len().min(MAD_SIZE);
        b[..n].copy_from_slice(&buf[..n]);
        if b[0] != 1 || (b[1] != CLASS_SMP_DR && b[1] != CLASS_SMP_LID) || b[2] != 1 {
            return Err(MadError::NotSmp {
                base: b[0],
                class: b[1],
                version: b[2],
            });
        }
        Ok(Smp { bytes: b })
    }

    /// Management class (0x81 directed route, 0x01 LID routed).
    pub fn class(&self) -> u8 {
        self.bytes[1]
    }
    /// Method.
    pub fn method(&self) -> u8 {
        self.bytes[3]
    }
    /// MAD status without the directed-route D bit.
    pub fn status(&self) -> u16 {
        let s = be16(&self.bytes, 4);
        if self.class() == CLASS_SMP_DR {
            s & 0x7fff
        } else {
            s
        }
    }
    /// Transaction id.
    pub fn tid(&self) -> u64 {
        be64(&self.bytes, 8)
    }
    /// Sets the transaction id.
    pub fn set_tid(&mut self, tid: u64) {
        put64(&mut self.bytes, 8, tid);
    }
    /// Attribute id.
    pub fn attr_id(&self) -> u16 {
        be16(&self.bytes, 16)
    }
    /// Attribute modifier.
    pub fn attr_mod(&self) -> u32 {
        be32(&self.bytes, 20)
    }
    /// M_Key (the requester's proof for ports protected by an M_Key).
    pub fn m_key(&self) -> u64 {
        be64(&self.bytes, 24)
    }
    /// Directed-route hop count.
    pub fn hop_count(&self) -> u8 {
        self.bytes[7]
    }
    /// The 64 attribute-data bytes.
    pub fn data(&self) -> &[u8; SMP_DATA_SIZE] {
        let s = &self.bytes[SMP_DATA_OFFSET..SMP_DATA_OFFSET + SMP_DATA_SIZE];
        // The slice has exactly SMP_DATA_SIZE bytes.
        s.try_into().unwrap_or(&[0u8; SMP_DATA_SIZE])
    }
    /// True for a request (Get, Set) sent to this port, as opposed to a response or a trap.
    pub fn is_request(&self) -> bool {
        matches!(self.method(), METHOD_GET | METHOD_SET)
    }
    /// Directed-route HopPointer.
    pub fn hop_pointer(&self) -> u8 {
        self.bytes[6]
    }
    /// Directed-route D bit (direction): false on the way out (request), true on the way back
    /// (response).
    pub fn direction(&self) -> bool {
        self.class() == CLASS_SMP_DR && self.bytes[4] & 0x80 != 0
    }
    /// Directed-route DrSLID: the LID-routed segment before the directed one starts there
    /// ([`PERMISSIVE_LID`] when the SMP is directed from its source).
    pub fn dr_slid(&self) -> u16 {
        be16(&self.bytes, 32)
    }
    /// Directed-route DrDLID: the LID-routed segment after the directed one ends there
    /// ([`PERMISSIVE_LID`] when the SMP is directed up to its destination).
    pub fn dr_dlid(&self) -> u16 {
        be16(&self.bytes, 34)
    }
    /// Directed-route InitialPath entries 1..=HopCount: the output port at each hop (entry 0
    /// is unused).
    pub fn initial_path(&self) -> &[u8] {
        let n = usize::from(self.hop_count()).min(MAX_HOPS);
        &self.bytes[DR_INITIAL_PATH_OFFSET + 1..DR_INITIAL_PATH_OFFSET + 1 + n]
    }
    /// Directed-route ReturnPath entries 1..=HopCount: the input port at each hop, written by
    /// the nodes a request crossed (entry 0 unused).
    pub fn return_path(&self) -> &[u8] {
        let n = usize::from(self.hop_count()).min(MAX_HOPS);
        &self.bytes[DR_RETURN_PATH_OFFSET + 1..DR_RETURN_PATH_OFFSET + 1 + n]
    }
    /// The GetResp answering this request (Get or Set) addressed to the manager's port,
    /// whatever its class: [`Smp::lid_response`] for a LID-routed one,
    /// [`Smp::dr_response`] for a directed-route one.
    pub fn response(&self, status: u16, data: &[u8; SMP_DATA_SIZE]) -> Smp {
        if self.class() == CLASS_SMP_DR {
            self.dr_response(status, data)
        } else {
            self.lid_response(status, data)
        }
    }
    /// The GetResp answering this directed-route request (IBA 14.2.2): the request's header
    /// and path fields with method GetResp, the D bit set (the SMP now travels the return
    /// path), the 15-bit `status`, and `data` as attribute data.
    ///
    /// Everything that steers the way back is kept as received: HopCount, InitialPath, the
    /// ReturnPath the crossed nodes filled in, DrSLID (where a LID-routed tail of the way back
    /// goes) and DrDLID. The HopPointer is left as it arrived too: on a real port the kernel's
    /// SMI has set it to HopCount + 1 on receipt (C14-9) and steps it down as the response
    /// leaves (C14-13); ibsim never moves it (a request reaches the manager with 0 and the
    /// simulator only accepts a response that still has 0, then routes it back along the
    /// ReturnPath). The TID is echoed whole.
    pub fn dr_response(&self, status: u16, data: &[u8; SMP_DATA_SIZE]) -> Smp {
        let mut b = self.bytes;
        b[3] = METHOD_GET_RESP;
        put16(&mut b, 4, 0x8000 | (status & 0x7fff));
        b[SMP_DATA_OFFSET..SMP_DATA_OFFSET + SMP_DATA_SIZE].copy_from_slice(data);
        Smp { bytes: b }
    }
    /// The TrapRepress acknowledging this Trap (IBA vol. 1 ch. 13: a trap is repeated until the
    /// manager represses it): the trap's header with method
    /// TrapRepress (0x07) and status 0, its TID, attribute (Notice), modifier and notice data
    /// unchanged.
    pub fn trap_repress(&self) -> Smp {
        let mut b = self.bytes;
        b[3] = METHOD_TRAP_REPRESS;
        put16(&mut b, 4, 0);
        Smp { bytes: b }
    }
    /// The GetResp answering this LID-routed request: same class, TID, attribute and modifier,
    /// `status`, and `data` as attribute data.
    pub fn lid_response(&self, status: u16, data: &[u8; SMP_DATA_SIZE]) -> Smp {
        let mut b = [0u8; MAD_SIZE];
        b[..SMP_DATA_OFFSET].copy_from_slice(&self.bytes[..SMP_DATA_OFFSET]);
        b[3] = METHOD_GET_RESP;
        put16(&mut b, 4, status);
        b[SMP_DATA_OFFSET..SMP_DATA_OFFSET + SMP_DATA_SIZE].copy_from_slice(data);
        Smp { bytes: b }
    }
}

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

impl std::fmt::Debug for PortInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PortInfo")
            .field("lid", &self.lid())
            .field("master_sm_lid", &self.master_sm_lid())
            .field("lmc", &self.lmc())
            .field("state", &self.state())
            .field("phys_state", &self.phys_state())
            .field("width_active", &self.link_width_active())
            .field("speed_active", &self.link_speed_active())
            .finish()
    }
}

impl PortInfo {
    /// Wraps attribute data.
    pub fn decode(d: &[u8; SMP_DATA_SIZE]) -> PortInfo {
        PortInfo { raw: *d }
    }
    /// Base LID.
    pub fn lid(&self) -> u16 {
        be16(&self.raw, 16)
    }
    /// Sets the base LID.
    pub fn set_lid(&mut self, lid: u16) {
        put16(&mut self.raw, 16, lid)
    }
    /// LID of the master subnet manager.
    pub fn master_sm_lid(&self) -> u16 {
        be16(&self.raw, 18)
    }
    /// Sets MasterSMLID.
    pub fn set_master_sm_lid(&mut self, lid: u16) {
        put16(&mut self.raw, 18, lid)
    }
    /// CapabilityMask.
    pub fn capability_mask(&self) -> u32 {
        be32(&self.raw, 20)
    }
    /// Sets CapabilityMask (bit 1 = IsSM).
    pub fn set_capability_mask(&mut self, m: u32) {
        put32(&mut self.raw, 20, m)
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

impl std::fmt::Debug for SwitchInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SwitchInfo")
            .field("linear_fdb_cap", &self.linear_fdb_cap())
            .field("linear_fdb_top", &self.linear_fdb_top())
            .field("port_state_change", &self.port_state_change())
            .finish()
    }
}

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
        put16(&mut self.raw, 6, top)
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
            self.raw[11] |= 0x04
        } else {
            self.raw[11] &= !0x04
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

/// Parses hex text (whitespace ignored) into bytes; used for stored byte images.
pub fn parse_hex(text: &str) -> Option<Vec<u8>> {
    let digits: Vec<u8> = text.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    digits
        .chunks(2)
        .map(|p| std::str::from_utf8(p).ok().and_then(|s| u8::from_str_radix(s, 16).ok()))
        .collect()
}

/// Formats bytes as hex, 32 bytes per line.
pub fn to_hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2 + b.len() / 32);
    for (i, x) in b.iter().enumerate() {
        if i > 0 && i % 32 == 0 {
            s.push('\n');
        }
        s.push_str(&format!("{x:02x}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directed_route_request_layout() {
        let d = [0u8; SMP_DATA_SIZE];
        let mut s = Smp::request(&Route::Directed(vec![1, 5, 3]), METHOD_GET, ATTR_PORT_INFO, 7, &d).unwrap();
        s.set_tid(0x1122_3344_5566_7788);
        let b = &s.bytes;
        assert_eq!(&b[0..4], &[1, 0x81, 1, 1]);
        assert_eq!(b[6], 0);
        assert_eq!(b[7], 3);
        assert_eq!(&b[8..16], &[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]);
        assert_eq!(&b[16..18], &[0x00, 0x15]);
        assert_eq!(&b[20..24], &[0, 0, 0, 7]);
        assert_eq!(&b[32..36], &[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(&b[128..133], &[0, 1, 5, 3, 0]);
        assert!(Smp::request(&Route::Directed(vec![1; 64]), METHOD_GET, 0x11, 0, &d).is_err());
    }

    #[test]
    fn lid_routed_request_has_no_dr_fields() {
        let d = [0u8; SMP_DATA_SIZE];
        let s = Smp::request(&Route::Lid(9), METHOD_SET, ATTR_LFT, 2, &d).unwrap();
        assert_eq!(s.class(), CLASS_SMP_LID);
        assert_eq!(s.hop_count(), 0);
        assert_eq!(&s.bytes[32..36], &[0, 0, 0, 0]);
    }

    #[test]
    fn dr_status_masks_direction_bit() {
        let d = [0u8; SMP_DATA_SIZE];
        let mut s = Smp::request(&Route::Directed(vec![]), METHOD_GET, 0x11, 0, &d).unwrap();
        s.bytes[4] = 0x80;
        s.bytes[5] = 0x1c;
        assert_eq!(s.status(), 0x1c);
        assert!(Smp::parse(&s.bytes[..100]).is_err());
        let mut bad = s.bytes;
        bad[1] = 0x04;
        assert!(matches!(Smp::parse(&bad), Err(MadError::NotSmp { class: 4, .. })));
    }

    #[test]
    fn sm_info_layout_and_lid_response() {
        let i = SmInfo {
            guid: 0x0002_c980_0000_0001,
            sm_key: 0,
            act_count: 0x0102_0304,
            priority: 14,
            state: SM_STATE_MASTER,
        };
        let d = i.encode();
        // Byte offsets of IBA 14.2.5.13, written out by hand.
        assert_eq!(&d[0..8], &[0x00, 0x02, 0xc9, 0x80, 0, 0, 0, 0x01]);
        assert_eq!(&d[16..20], &[1, 2, 3, 4]);
        assert_eq!(d[20], 0xe3);
        assert_eq!(SmInfo::decode(&d), i);
        let mut req = Smp::request(&Route::Lid(2), METHOD_GET, ATTR_SM_INFO, 0, &[0; SMP_DATA_SIZE]).unwrap();
        req.set_tid(0xdead_beef_0000_0042);
        assert!(req.is_request());
        let r = req.lid_response(0, &d);
        assert!(!r.is_request());
        assert_eq!(r.method(), METHOD_GET_RESP);
        assert_eq!(r.tid(), 0xdead_beef_0000_0042);
        assert_eq!(r.attr_id(), ATTR_SM_INFO);
        assert_eq!(r.data()[20], 0xe3);
        let e = req.lid_response(STATUS_UNSUPPORTED_ATTR, &[0; SMP_DATA_SIZE]);
        assert_eq!(e.status(), 0x0c);
    }

    #[test]
    fn trap_repress_layout() {
        // Trap 128 from a switch, as ibsim sends it: class 0x01, method Trap (0x05), TID 0,
        // attribute Notice (0x0002).
        let n = Notice {
            generic: true,
            notice_type: 1,
            producer: 2,
            trap_number: 128,
            issuer_lid: 5,
            toggle_count: 0,
            lid_addr: 5,
        };
        let mut b = [0u8; MAD_SIZE];
        b[..4].copy_from_slice(&[1, CLASS_SMP_LID, 1, METHOD_TRAP]);
        b[8..16].copy_from_slice(&0x0000_0000_0000_0abcu64.to_be_bytes());
        b[17] = 0x02;
        b[64..128].copy_from_slice(&n.encode());
        let trap = Smp::parse(&b).unwrap();
        let r = trap.trap_repress();
        // Method 0x07, everything else as received (TID, attribute, notice).
        assert_eq!(&r.bytes[..4], &[1, 1, 1, 0x07]);
        assert_eq!(&r.bytes[4..], &b[4..]);
        assert!(!r.is_request());
    }

    #[test]
    fn node_info_round_trip() {
        let n = NodeInfo {
            node_type: 2,
            num_ports: 36,
            system_image_guid: 0xaa,
            node_guid: 0x0002_c903_0000_1234,
            port_guid: 0x0002_c903_0000_1234,
            partition_cap: 8,
            device_id: 0xc738,
            revision: 0xa1,
            local_port: 17,
            vendor_id: 0x2c9,
        };
        assert_eq!(NodeInfo::decode(&n.encode()), n);
    }

    #[test]
    fn optimized_sl2vl_and_enhanced_port0_bits() {
        // SwitchInfo byte 11 = LifeTimeValue(5) | PortStateChange(1) | OptSLtoVLMapping(2),
        // byte 16 = InboundEnf | OutboundEnf | FilterRawIn | FilterRawOut | EnhancedPort0 | 0.
        let mut raw = [0u8; SMP_DATA_SIZE];
        raw[11] = (0x13 << 3) | 0x04;
        raw[16] = 0xf0;
        let si = SwitchInfo::decode(&raw);
        assert!(!si.optimized_sl2vl() && !si.enhanced_port0());
        assert_eq!(si.life_time_value(), 0x13);
        raw[11] |= 0x01;
        raw[16] |= 0x08;
        let si = SwitchInfo::decode(&raw);
        assert!(si.optimized_sl2vl() && si.enhanced_port0());
        assert!(si.port_state_change());
    }

    #[test]
    fn sl2vl_set_image_and_modifiers() {
        // SL 1 on VL 1, every other SL on VL 0: byte 0 = SL0<<4 | SL1.
        let d = SlToVl::escape(1).encode();
        assert_eq!(&d[..8], &[0x01, 0, 0, 0, 0, 0, 0, 0]);
        assert!(d[8..].iter().all(|&b| b == 0));
        let d = SlToVl::escape(7).encode();
        assert_eq!(d[0], 0x07);
        // Modifier: output port in bits 0-7, input port in bits 8-15; OpenSM's all-pairs Set
        // is 0x30000 and its "every input port to output p" Set is 0x20000 | p.
        assert_eq!(SlToVl::switch_modifier(0, 36), 0x0024);
        assert_eq!(SlToVl::switch_modifier(36, 1), 0x2401);
        assert_eq!(SlToVl::all_ports_modifier(), 0x0003_0000);
        assert_eq!(SL2VL_ALL_INPUT_PORTS | 5, 0x0002_0005);
        assert_eq!(CAP_SL_MAPPING, 0x40);
        // The whole request as it goes on the wire: Set, attribute 0x0017, modifier 0x30000.
        let s = Smp::request(
            &Route::Directed(vec![1, 3]),
            METHOD_SET,
            ATTR_SL2VL,
            SlToVl::all_ports_modifier(),
            &SlToVl::escape(1).encode(),
        )
        .unwrap();
        assert_eq!(&s.bytes[16..18], &[0x00, 0x17]);
        assert_eq!(&s.bytes[20..24], &[0x00, 0x03, 0x00, 0x00]);
        assert_eq!(s.bytes[3], METHOD_SET);
        assert_eq!(s.bytes[64], 0x01);
    }

    #[test]
    fn port_info_fields() {
        let mut p = PortInfo::decode(&[0u8; 64]);
        p.set_lid(0x1234);
        p.set_master_sm_lid(7);
        p.set_lmc(1);
        p.set_state(PortState::Armed);
        p.set_phys_state(PHYS_DISABLED);
        assert_eq!(&p.raw[16..20], &[0x12, 0x34, 0, 7]);
        assert_eq!(p.raw[32] & 0x0f, 3);
        assert_eq!(p.raw[33] >> 4, 3);
        assert_eq!(p.raw[34] & 7, 1);
        let q = p.for_set();
        assert_eq!(q.state(), PortState::NoChange);
        assert_eq!(q.phys_state(), 0);
        assert_eq!(q.lid(), 0x1234);
    }

    #[test]
    fn sl2vl_and_notice_round_trip() {
        let t = SlToVl([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
        let e = t.encode();
        assert_eq!(&e[..8], &[0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef]);
        assert_eq!(SlToVl::decode(&e), t);
        assert_eq!(SlToVl::switch_modifier(3, 5), 0x0305);
        let n = Notice {
            generic: true,
            notice_type: 1,
            producer: 2,
            trap_number: 128,
            issuer_lid: 5,
            toggle_count: 0,
            lid_addr: 5,
        };
        let d = n.encode();
        assert_eq!(&d[..12], &[0x81, 0, 0, 2, 0, 128, 0, 5, 0, 0, 0, 5]);
        assert_eq!(Notice::decode(&d), n);
    }

    #[test]
    fn hex_round_trip() {
        let b: Vec<u8> = (0..=255u8).collect();
        assert_eq!(parse_hex(&to_hex(&b)).unwrap(), b);
        assert!(parse_hex("abc").is_none());
        assert!(parse_hex("zz").is_none());
    }
}
