//! `fabricctl`: the fabricd operator CLI (talks gRPC to a running daemon) and offline analysis
//! tool (generate, inspect, route and analyse topology files without a daemon).

mod offline;
mod remote;
mod validate;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "fabricctl",
    version,
    about = "fabricd operator CLI and offline fabric analysis"
)]
struct Cli {
    /// Unix socket (or http://host:port) of the running fabricd.
    #[arg(long, global = true, default_value = "/run/fabricd/fabricd.sock")]
    socket: String,
    #[command(subcommand)]
    cmd: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Topology files (gen, info) offline; without a subcommand, the daemon's live topology.
    Topo(offline::TopoArgs),
    /// Route a topology file offline and write the LFTs (OpenSM `opensm-lfts.dump` format).
    Route(offline::RouteArgs),
    /// Route a topology file offline (or take LFTs read back from a fabric: --lfts) and print
    /// validity and congestion metrics.
    Analyze(offline::AnalyzeArgs),
    /// Compare the cabling with an expected topology file (the daemon's live topology, or
    /// --actual FILE); exit code 1 when they differ.
    Validate(validate::ValidateArgs),
    #[command(flatten)]
    Remote(remote::RemoteCmd),
}

fn main() {
    let cli = Cli::parse();
    let res: Result<()> = match cli.cmd {
        Command::Topo(a) => offline::topo(a, &cli.socket),
        Command::Route(a) => offline::route(a),
        Command::Analyze(a) => offline::analyze(a),
        Command::Remote(r) => remote::run(r, &cli.socket),
        Command::Validate(a) => match validate::run(a, &cli.socket) {
            Ok(true) => Ok(()),
            Ok(false) => std::process::exit(1),
            Err(e) => Err(e),
        },
    };
    if let Err(e) = res {
        eprintln!("fabricctl: {e:#}");
        std::process::exit(1);
    }
}
