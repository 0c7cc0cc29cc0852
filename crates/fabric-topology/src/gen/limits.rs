//! The generator limits: levels, ports per switch, end nodes and switches of a generated fabric.

/// Most switch levels a spec may have (the level is one GUID byte; 16 is far beyond real fabrics).
pub const MAX_LEVELS: usize = 16;
/// Most ports a generated switch may have. Port 255 cannot be used: LFT entry 255 means "no route".
pub const MAX_SWITCH_PORTS: u32 = 254;
/// Most end nodes a generated fabric may have.
pub const MAX_END_NODES: u64 = 1 << 22;
/// Most switches a generated fabric may have.
pub const MAX_SWITCHES: u64 = 1 << 22;
