//! `fabricctl`: the fabricd operator CLI (talks gRPC to a running daemon) and offline analysis
//! tool (generate, inspect, route and analyse topology files without a daemon).
// `status_json` builds one object of every Status field with `json!`.
#![recursion_limit = "256"]

mod export;
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
    /// The running fabricd: its Unix socket, http://host:port (plaintext TCP) or https://host:port
    /// (TLS; see --tls-ca).
    #[arg(long, global = true, default_value = "/run/fabricd/fabricd.sock")]
    socket: String,
    /// https:// only: PEM CA certificate(s) to trust for the daemon's certificate (default: the
    /// system trust store).
    #[arg(long, global = true, value_name = "FILE")]
    tls_ca: Option<std::path::PathBuf>,
    /// https:// only: PEM client certificate, for a daemon that requires one (mutual TLS,
    /// grpc.tls_client_ca); needs --tls-key.
    #[arg(long, global = true, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,
    /// https:// only: PEM private key of --tls-cert.
    #[arg(long, global = true, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
    /// https:// only: name to verify in the daemon's certificate instead of the host of
    /// --socket (when connecting by an IP address the certificate does not list).
    #[arg(long, global = true, value_name = "NAME")]
    tls_domain: Option<String>,
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
    #[command(flatten)]
    Remote(remote::RemoteCmd),
}

fn main() {
    let cli = Cli::parse();
    let target = remote::Target {
        addr: cli.socket,
        tls: fabric_proto::tls::ClientTlsOptions {
            ca: cli.tls_ca,
            cert: cli.tls_cert,
            key: cli.tls_key,
            domain: cli.tls_domain,
        },
    };
    let res: Result<()> = match cli.cmd {
        Command::Topo(a) => offline::topo(a, &target),
        Command::Route(a) => offline::route(a),
        Command::Analyze(a) => offline::analyze(a),
        Command::Remote(r) => remote::run(r, &target),
        Command::Export(a) => export::export(a, &target),
        Command::Hostlist(a) => export::hostlist(a, &target),
        Command::Validate(a) => match validate::run(a, &target) {
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
