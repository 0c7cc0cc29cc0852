//! The text of the three formats (see the crate docs for what each holds).

use std::fmt::Write as _;

use crate::hostlist::compress;
use crate::{Format, SlurmTopology};

fn hl(names: &[String]) -> String {
    compress(names.iter().map(String::as_str))
}

impl SlurmTopology {
    /// The smallest block (the base block size of topology/block), `None` without blocks.
    pub fn block_size(&self) -> Option<usize> {
        self.blocks.iter().map(|b| b.nodes.len()).min()
    }

    /// The file in `format`: a `#` header (what it is, counts, every warning), then the entries.
    pub fn render(&self, format: Format) -> String {
        let mut out = String::new();
        let what = match format {
            Format::Tree => "topology.conf for Slurm's topology/tree",
            Format::Block => "topology.conf for Slurm's topology/block",
            Format::Yaml => "topology.yaml for Slurm (a topology/tree and a topology/block topology)",
        };
        let _ = writeln!(out, "# {what}, written by fabricd from the live fabric:");
        let _ = writeln!(
            out,
            "# {} switches, {} blocks, {} hosts.",
            self.switches.len(),
            self.blocks.len(),
            self.hosts.len()
        );
        for w in &self.warnings {
            let _ = writeln!(out, "# warning: {w}");
        }
        match format {
            Format::Tree => self.tree_conf(&mut out),
            Format::Block => self.block_conf(&mut out),
            Format::Yaml => self.yaml(&mut out),
        }
        out
    }

    fn tree_conf(&self, out: &mut String) {
        for s in &self.switches {
            if s.nodes.is_empty() {
                let _ = writeln!(out, "SwitchName={} Switches={}", s.name, hl(&s.switches));
            } else {
                let _ = writeln!(out, "SwitchName={} Nodes={}", s.name, hl(&s.nodes));
            }
        }
    }

    fn block_conf(&self, out: &mut String) {
        for b in &self.blocks {
            let _ = writeln!(out, "BlockName={} Nodes={}", b.name, hl(&b.nodes));
        }
        if let Some(size) = self.block_size() {
            let _ = writeln!(out, "BlockSizes={size}");
        }
    }

    fn yaml(&self, out: &mut String) {
        out.push_str("---\n- topology: \"fabric-tree\"\n  cluster_default: true\n  tree:\n");
        if self.switches.is_empty() {
            out.push_str("    switches: []\n");
        } else {
            out.push_str("    switches:\n");
        }
        for s in &self.switches {
            let _ = writeln!(out, "      - switch: \"{}\"", s.name);
            if s.nodes.is_empty() {
                let _ = writeln!(out, "        children: \"{}\"", hl(&s.switches));
            } else {
                let _ = writeln!(out, "        nodes: \"{}\"", hl(&s.nodes));
            }
        }
        out.push_str("- topology: \"fabric-block\"\n  cluster_default: false\n  block:\n");
        match self.block_size() {
            Some(size) => {
                let _ = writeln!(out, "    block_sizes:\n      - {size}\n    blocks:");
            }
            None => out.push_str("    block_sizes: []\n    blocks: []\n"),
        }
        for b in &self.blocks {
            let _ = writeln!(
                out,
                "      - block: \"{}\"\n        nodes: \"{}\"",
                b.name,
                hl(&b.nodes)
            );
        }
    }
}
