//! `fabricctl`: the fabricd operator CLI (talks gRPC to a running daemon) and offline analysis
//! tool (generate, inspect, route and analyse topology files without a daemon).
//!
//! Exit codes: see [`exit`] (0 ok, 1 difference found, 2 usage, 3 daemon unreachable, 4 not
//! found, 5 refused, 6 other failure).
// `status_json` builds one object of every Status field with `json!`.
#![recursion_limit = "256"]

mod churn;
mod cli;
mod exit;
mod export;
mod human;
mod offline;
mod progress;
mod remote;
mod validate;

use std::path::PathBuf;

use anyhow::Result;
use clap::{FromArgMatches, Parser, Subcommand};

/// The derived command line; [`cli::command`] adds the connection options to the daemon
/// commands.
#[derive(Parser, Debug)]
#[command(
    name = "fabricctl",
    version,
    about = "fabricd operator CLI and offline fabric analysis"
)]
struct Cli {
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
    /// Files for other tools: `export slurm` writes Slurm's topology file (from a topology file
    /// or the live daemon).
    Export(export::ExportArgs),
    /// Slurm hostlist expressions: expand, compress, and the end ports of hosts (`ports`).
    Hostlist(export::HostlistArgs),
    /// Print a shell completion script on standard output (e.g. `fabricctl completions bash >
    /// /usr/share/bash-completion/completions/fabricctl`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Write the man pages: fabricctl.1 and one page per subcommand (fabricctl-status.1, ...).
    Man {
        /// Directory to write the pages to (created if missing).
        #[arg(long, value_name = "DIR")]
        out_dir: PathBuf,
    },
    /// LFT blocks one cable fault rewrites: route the fabric, route it again with one cable down
    /// (LIDs kept, as fabricd does), count the 64-entry blocks that differ.
    Churn(churn::ChurnArgs),
    #[command(flatten)]
    Remote(remote::RemoteCmd),
}

fn main() {
    let matches = cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    let target = || cli::target(&matches);
    let res: Result<()> = match cli.cmd {
        Command::Topo(a) => offline::topo(a, &target()),
        Command::Route(a) => offline::route(a),
        Command::Analyze(a) => offline::analyze(a),
        Command::Churn(a) => churn::churn(a),
        Command::Remote(r) => remote::run(r, &target()),
        Command::Export(a) => export::export(a, &target()),
        Command::Hostlist(a) => export::hostlist(a, &target()),
        Command::Validate(a) => match validate::run(a, &target()) {
            Ok(true) => Ok(()),
            Ok(false) => std::process::exit(exit::DIFFERENCE),
            Err(e) => Err(e),
        },
        Command::Completions { shell } => cli::completions(shell),
        Command::Man { out_dir } => cli::write_man_pages(&out_dir).map(|files| {
            for f in files {
                println!("{}", f.display());
            }
        }),
    };
    if let Err(e) = res {
        eprintln!("fabricctl: {e:#}");
        std::process::exit(exit::exit_code(&e));
    }
}
