//! `fabricd`: the fabric manager daemon.
//!
//! ```text
//! fabricd --config FILE [--state-dir DIR] [--socket PATH]
//! fabricd --config FILE --check-config
//! ```
//!
//! Signals: `SIGHUP` reloads the configuration, `SIGUSR2` forces a reroute, `SIGTERM`/`SIGINT`
//! finish the running phase and exit 0.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use fabricd::config::Config;
use fabricd::daemon::{run_as, Control, HaNode, RunOptions, RunOutcome};
use fabricd::notify::Notifier;
use tokio::signal::unix::{signal, SignalKind};

#[derive(Parser, Debug)]
#[command(name = "fabricd", version, about = "Fabric manager for fat-tree HPC interconnects")]
struct Args {
    /// Configuration file (TOML).
    #[arg(long, short = 'c', default_value = "/etc/fabricd/fabricd.toml")]
    config: PathBuf,
    /// State directory (overrides daemon.state_dir).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// gRPC Unix socket (overrides grpc.socket).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Validate the configuration and exit (0 = valid).
    #[arg(long)]
    check_config: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let config = match Config::load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fabricd: {e}");
            return ExitCode::from(2);
        }
    };
    if args.check_config {
        // (When serving, the daemon logs it.)
        if let Some(w) = config.grpc.socket_mode_warning() {
            eprintln!("fabricd: warning: {w}");
        }
        // The selected driver's files too: mock topology, umad device, oob inventory; with the
        // mock fabric known, what a start would fail on (LID space, dmodk on a degraded fabric).
        let driver = match fabricd::daemon::check_driver(&config) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("fabricd: {}: {e}", args.config.display());
                return ExitCode::from(2);
            }
        };
        // The ranking inputs (routing.roots_file) too: a start reads them.
        if let Err(e) = fabricd::daemon::rank_options(&config) {
            eprintln!("fabricd: {}: {e}", args.config.display());
            return ExitCode::from(2);
        }
        // And the partitions file (partitions.file), parsed as a start parses it.
        if let Err(e) = fabricd::daemon::partition_settings(&config) {
            eprintln!("fabricd: {}: {e}", args.config.display());
            return ExitCode::from(2);
        }
        // The gRPC TLS files (certificate, key, client CA) too.
        let tcp = match fabricd::daemon::check_grpc(&config) {
            Ok(t) => t.map(|t| format!(", {t}")).unwrap_or_default(),
            Err(e) => {
                eprintln!("fabricd: {}: {e}", args.config.display());
                return ExitCode::from(2);
            }
        };
        // [ha]: its TLS files readable (etcd itself is not contacted).
        let ha = match fabricd::daemon::check_ha(&config) {
            Ok(h) => h.map(|h| format!(", {h}")).unwrap_or_default(),
            Err(e) => {
                eprintln!("fabricd: {}: {e}", args.config.display());
                return ExitCode::from(2);
            }
        };
        println!(
            "{}: configuration OK (driver {}, engine {}, socket {}{tcp}{ha})",
            args.config.display(),
            driver,
            config.routing.engine,
            args.socket.as_ref().unwrap_or(&config.grpc.socket).display()
        );
        return ExitCode::SUCCESS;
    }
    match serve(args, config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Once: in the log when it is installed (stderr, the journal), else on stderr.
            let line = error_line(&e);
            if tracing::dispatcher::has_been_set() {
                tracing::error!("{line}");
            } else {
                eprintln!("fabricd: {line}");
            }
            ExitCode::FAILURE
        }
    }
}

/// An error and its causes on one line, each message once: a wrapper whose text already holds
/// its cause (`"{path}: {source}"`) does not repeat the path and the OS error.
fn error_line(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let m = cause.to_string();
        if out.contains(&m) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&m);
    }
    out
}

fn serve(args: Args, config: Config) -> anyhow::Result<()> {
    let log = fabricd::logging::init(&config.log).map_err(anyhow::Error::msg)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("fabricd-io")
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async move {
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let mut hup = signal(SignalKind::hangup()).context("SIGHUP handler")?;
        let mut usr2 = signal(SignalKind::user_defined2()).context("SIGUSR2 handler")?;
        let mut term = signal(SignalKind::terminate()).context("SIGTERM handler")?;
        let mut int = signal(SignalKind::interrupt()).context("SIGINT handler")?;
        tokio::spawn(async move {
            loop {
                let c = tokio::select! {
                    _ = hup.recv() => Control::Reload,
                    _ = usr2.recv() => Control::Reroute,
                    _ = term.recv() => Control::Shutdown,
                    _ = int.recv() => Control::Shutdown,
                };
                tracing::info!(?c, "signal received");
                if tx.send(c).await.is_err() {
                    break;
                }
            }
        });
        tracing::info!(version = env!("CARGO_PKG_VERSION"), config = %args.config.display(), "fabricd starting");
        // One connection per switch agent (oob), gRPC clients, state files: the usual soft
        // limit of 1024 open files is too few for thousands of switches.
        let fds = fabric_oob::fds::raise_fd_limit();
        tracing::info!(soft = fds.soft, hard = ?fds.hard, "open-file limit");
        let mut opts = RunOptions {
            config_path: Some(args.config.clone()),
            config,
            state_dir: args.state_dir,
            socket: args.socket,
            log,
            notifier: Notifier::from_env(),
        };
        let mut rx = rx;
        // [ha]: stand by until elected, lead until stopped or leadership is lost, then stand
        // by again (the same process, the same control channel).
        let Some(ha) = HaNode::start(&opts, &mut rx).await? else {
            if opts.config.ha.enabled() {
                return Ok(()); // stopped while connecting to etcd
            }
            run_as(&mut opts, &mut rx, None).await?;
            return Ok(());
        };
        loop {
            let Some(leadership) = ha.standby(&mut opts, &mut rx).await? else {
                return Ok(());
            };
            match run_as(&mut opts, &mut rx, Some((&ha, leadership))).await? {
                RunOutcome::Stopped => return Ok(()),
                RunOutcome::SteppedDown(reason) => {
                    tracing::warn!("HA: stepped down ({reason}); standing by");
                }
            }
        }
    })
}
