//! Slurm topology files from the fabric model (pure: no I/O, no clock).
//!
//! - [`hostlist`]: Slurm hostlist expressions (`node[001-018,020]`): [`hostlist::compress`] and
//!   [`hostlist::expand`].
//! - [`names`]: host names from node descriptions (`"node017 HCA-1"` → `node017`) and switch
//!   names valid for Slurm.
//! - [`SlurmTopology::build`]: the switch tree and the blocks of a ranked fabric, with a warning
//!   for every part left out (down, disconnected, unnamed); [`SlurmTopology::render`] writes it
//!   as `topology.conf` for topology/tree ([`Format::Tree`]) or topology/block
//!   ([`Format::Block`]), or as Slurm's `topology.yaml` ([`Format::Yaml`], both topologies).
//!
//! # What is written
//!
//! Only live equipment: live switches with a level, live switch-to-switch links, hosts with at
//! least one live end port.
//!
//! - **tree**: every leaf switch (level 0) with live hosts is `SwitchName=<leaf> Nodes=<hosts>`;
//!   every switch above is `SwitchName=<sw> Switches=<children>`, its children being its live
//!   neighbours one level down that are written themselves. A host with live ports on several
//!   leaves is listed under each (Slurm accepts multi-homed nodes). A switch above level 0 that
//!   carries hosts (a spine with a management host) gets a child `<sw>-hosts` holding them, since
//!   a Slurm switch has either nodes or child switches. Switches with nothing below them are left
//!   out, with a warning.
//! - **block**: a block is the hosts of one leaf switch (the hosts that reach each other through
//!   one switch at full bandwidth). Blocks are written in the order of their leaves' first
//!   level-1 neighbour, so Slurm's aggregation of consecutive blocks into larger ones follows the
//!   fabric's level-1 subtrees. `BlockSizes=` is the smallest block (every block holds at least
//!   that many hosts). A host is in the block of its first live end port's leaf only (a warning
//!   names the hosts on several leaves).
//! - **yaml**: a list of two topologies, `fabric-tree` (topology/tree, `cluster_default: true`)
//!   and `fabric-block` (topology/block), with the same contents as the two files above.
//!
//! Nothing is dropped silently: every warning is also written as a `#` comment at the top of
//! the file. The text depends only on the topology (no generation number, no time), so an
//! unchanged topology gives the same bytes.

pub mod hostlist;
pub mod names;
mod render;
mod tree;

pub use names::Hosts;
pub use tree::{Block, SlurmSwitch, SlurmTopology};

/// Which Slurm file to write.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// `topology.conf` for topology/tree.
    Tree,
    /// `topology.conf` for topology/block.
    Block,
    /// `topology.yaml` (Slurm 25.05+): a tree and a block topology.
    Yaml,
}

impl Format {
    /// Every format, in the order of their names.
    pub const ALL: [Format; 3] = [Format::Tree, Format::Block, Format::Yaml];

    /// The name used in configuration and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::Tree => "tree",
            Format::Block => "block",
            Format::Yaml => "yaml",
        }
    }

    /// The format of a name (`tree`, `block`, `yaml`).
    pub fn from_name(s: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == s)
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
