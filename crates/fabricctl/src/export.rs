//! `fabricctl export slurm` (Slurm topology files from a topology file or the live daemon) and
//! `fabricctl hostlist expand|compress|ports` (Slurm hostlist expressions; the end ports of
//! hosts, for the Slurm prolog). The rules (host names, switch names, what a block is) are
//! `fabric_slurm`'s; this module only reads the fabric and writes the result.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use fabric_proto::v1 as pb;
use fabric_ranking::{rank, RankOptions, Ranking};
use fabric_slurm::hostlist::{compress, expand};
use fabric_slurm::{Format, Hosts, SlurmTopology};
use fabric_topology::{fmt_guid, ibnet, Fabric, FabricEvent};

use crate::remote::Target;

/// `fabricctl export`.
#[derive(Args, Debug)]
pub struct ExportArgs {
    #[command(subcommand)]
    what: ExportWhat,
}

#[derive(Subcommand, Debug)]
enum ExportWhat {
    /// Slurm topology file (topology.conf for topology/tree or topology/block, or topology.yaml)
    /// of the live fabric: host names from node descriptions, hostlist-compressed; what is left
    /// out (down, disconnected, unnamed) is printed on stderr and as comments in the file.
    Slurm(SlurmArgs),
}

/// The formats on the command line.
#[derive(Copy, Clone, Debug, ValueEnum)]
enum SlurmFormat {
    /// topology.conf for topology/tree: SwitchName=... Nodes=... / Switches=...
    Tree,
    /// topology.conf for topology/block (Slurm 23.11+): a block per leaf switch, BlockSizes=.
    Block,
    /// topology.yaml (Slurm 25.05+): a tree topology (cluster default) and a block topology.
    Yaml,
}

#[derive(Args, Debug)]
struct SlurmArgs {
    /// Which Slurm file to write.
    #[arg(long, value_enum, default_value = "tree")]
    format: SlurmFormat,
    /// Read the fabric from this ibnetdiscover / ibsim topology file (every link and node in it
    /// is up; levels by fabricd's default ranking) instead of the running daemon's live topology.
    #[arg(long, value_name = "FILE")]
    topology: Option<PathBuf>,
    /// Write the file here (replaced atomically) instead of standard output.
    #[arg(short = 'o', long, value_name = "OUT")]
    output: Option<PathBuf>,
}

/// `fabricctl hostlist`.
#[derive(Args, Debug)]
pub struct HostlistArgs {
    #[command(subcommand)]
    cmd: HostlistCmd,
}

#[derive(Subcommand, Debug)]
enum HostlistCmd {
    /// Print every host of the expressions, one per line, in order (`node[01-03]` → node01,
    /// node02, node03).
    Expand {
        /// Hostlist expressions (e.g. "$SLURM_JOB_NODELIST").
        #[arg(required = true)]
        exprs: Vec<String>,
    },
    /// Print the shortest hostlist expression of the hosts (`node01 node02 node03` → node[01-03]).
    Compress {
        /// Host names or hostlist expressions; none: read names from standard input (white space
        /// or commas between them).
        names: Vec<String>,
    },
    /// Print the end port GUIDs of hosts, one per line (the end ports whose node description
    /// names the host, the names `export slurm` writes); for `fabricctl jobs set`. Unknown hosts
    /// are named on stderr; an error when none is known.
    Ports {
        /// Host names or hostlist expressions (e.g. "$SLURM_JOB_NODELIST").
        #[arg(required = true)]
        hosts: Vec<String>,
        /// Look the hosts up in this topology file instead of the running daemon's topology.
        #[arg(long, value_name = "FILE")]
        topology: Option<PathBuf>,
    },
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// A topology file and its default ranking.
fn from_file(path: &Path) -> Result<(Fabric, Ranking)> {
    let parsed = ibnet::read_file(path).with_context(|| format!("cannot read the topology {}", path.display()))?;
    for w in &parsed.warnings {
        eprintln!("fabricctl: {}: {w}", path.display());
    }
    let ranking = rank(&parsed.fabric, &RankOptions::default());
    Ok((parsed.fabric, ranking))
}

/// The daemon's live topology as routing sees it (virtual faults applied) and its levels.
fn from_daemon(target: &Target) -> Result<(Fabric, Ranking)> {
    let t: pb::Topology = runtime()?.block_on(async {
        let mut c = target.connect().await?;
        c.get_topology(pb::GetTopologyRequest {})
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| anyhow!("GetTopology: {}", fabric_proto::describe_status(&s)))
    })?;
    let fabric = crate::validate::fabric_from_topology(&t)?;
    // Links excluded by virtual faults and end nodes down: as routing sees them.
    let mut events = Vec::new();
    for s in &t.switches {
        for p in s.ports.iter().filter(|p| p.excluded) {
            let port = u8::try_from(p.port)
                .map_err(|_| anyhow!("switch {}: port {} out of range", fmt_guid(s.guid), p.port))?;
            events.push(FabricEvent::LinkDown { switch: s.guid, port });
        }
    }
    events.extend(
        t.end_ports
            .iter()
            .filter(|e| !e.up)
            .map(|e| FabricEvent::EndPortDown(e.guid)),
    );
    let fabric = if events.is_empty() {
        fabric
    } else {
        fabric
            .apply(&events)
            .context("virtual faults and end nodes of the live topology")?
    };
    let mut level = vec![None; fabric.num_switches()];
    for s in &t.switches {
        if let (Some(id), Some(l)) = (fabric.switch_by_guid(s.guid), s.level) {
            level[id.idx()] = Some(l);
        }
    }
    let height = level.iter().flatten().max().map_or(0, |m| m + 1);
    Ok((
        fabric,
        Ranking {
            level,
            height,
            diagnostics: Vec::new(),
        },
    ))
}

/// Runs `fabricctl export`.
pub fn export(a: ExportArgs, target: &Target) -> Result<()> {
    let ExportWhat::Slurm(a) = a.what;
    let (fabric, ranking) = match &a.topology {
        Some(p) => from_file(p)?,
        None => from_daemon(target)?,
    };
    let format = match a.format {
        SlurmFormat::Tree => Format::Tree,
        SlurmFormat::Block => Format::Block,
        SlurmFormat::Yaml => Format::Yaml,
    };
    let topo = SlurmTopology::build(&fabric, &ranking);
    for w in &topo.warnings {
        eprintln!("fabricctl: warning: {w}");
    }
    let text = topo.render(format);
    match &a.output {
        Some(p) => crate::offline::write_atomic(p, text.as_bytes())?,
        None => print!("{text}"),
    }
    Ok(())
}

fn expand_all(exprs: &[String]) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for e in exprs {
        out.extend(expand(e)?);
    }
    Ok(out)
}

/// Runs `fabricctl hostlist`.
pub fn hostlist(a: HostlistArgs, target: &Target) -> Result<()> {
    match a.cmd {
        HostlistCmd::Expand { exprs } => {
            for h in expand_all(&exprs)? {
                println!("{h}");
            }
        }
        HostlistCmd::Compress { names } => {
            let names = if names.is_empty() {
                let mut s = String::new();
                std::io::stdin()
                    .read_to_string(&mut s)
                    .context("cannot read standard input")?;
                vec![s]
            } else {
                names
            };
            let all = expand_all(&names)?;
            println!("{}", compress(all.iter().map(String::as_str)));
        }
        HostlistCmd::Ports { hosts, topology } => {
            let wanted = expand_all(&hosts)?;
            let (fabric, _) = match &topology {
                Some(p) => from_file(p)?,
                None => from_daemon(target)?,
            };
            let known = Hosts::of(&fabric);
            let mut unknown = Vec::new();
            let mut found = 0usize;
            for h in &wanted {
                match known.ports.get(h) {
                    Some(ports) => {
                        for &ep in ports {
                            println!("{}", fmt_guid(fabric.end_port(ep).port_guid));
                            found += 1;
                        }
                    }
                    None => unknown.push(h.as_str()),
                }
            }
            if !unknown.is_empty() {
                eprintln!(
                    "fabricctl: {} host(s) with no end port in the fabric: {}",
                    unknown.len(),
                    compress(unknown.iter().copied())
                );
            }
            if found == 0 {
                bail!(
                    "no end port found for the hosts {}",
                    compress(wanted.iter().map(String::as_str))
                );
            }
        }
    }
    Ok(())
}
