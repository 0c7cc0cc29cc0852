//! Wiring of the daemon: driver, discovery, state directory, event loop, gRPC listeners,
//! Prometheus endpoint, systemd notifications, and the control channel (reload, reroute,
//! shutdown) that the binary feeds from signals.
//!
//! [`run`] is what `fabricd` runs; it returns after a clean shutdown (the running upload
//! finished, the socket removed).
//!
//! * `driver`: the driver selected by `[driver]` (the mock fabric built, umad opened, oob
//!   inventory read) and the umad counters' reporter;
//! * `checks`: what the start and `--check-config` verify (TLS files, ranking inputs, LID
//!   range) and the loop settings and thread pools derived from the configuration;
//! * `listen`: the Unix socket and the gRPC server builder;
//! * `ha`: `[ha]`: the write fence, the etcd coordinator, the standby's status-only service.
//!
//! With `[ha]` the binary alternates [`HaNode::standby`] (until elected) and [`run_as`] with
//! the [`Leadership`] (until stopped, or leadership lost: [`RunOutcome::SteppedDown`]).

mod checks;
mod driver;
mod ha;
mod listen;

pub use checks::{
    check_fabric_fits, check_grpc, check_ha, check_recorded_lids, effective_max_lid, load_grpc_tls, partition_settings,
    rank_options,
};
pub use driver::{build_mock, check_driver, mock_config, open_driver, OpenedDriver};
pub use ha::{HaNode, NO_SELF_FENCE_ENV};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use fabric_ha::Leadership;
use fabric_proto::v1::fabric_manager_server::FabricManagerServer;
use fabric_topology::Lid;
use tokio::sync::{broadcast, mpsc, watch};
use tokio_stream::wrappers::{TcpListenerStream, UnixListenerStream};

use crate::config::Config;
use crate::event_loop::{EventLoop, LoopInit, LoopIo, LoopParams, Request};
use crate::grpc::{FabricService, Shared};
use crate::logging::LogHandle;
use crate::notify::{watchdog_interval, Notifier};
use crate::persist::StateDir;
use crate::state::Published;
use crate::telemetry::Telemetry;
use checks::{loop_settings, pool, routing_threads};
use driver::{open_driver_counted, report_umad_counters};
use listen::{add_reflection, bind_socket, server_builder};

/// Errors that stop the daemon from starting.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("{0}")]
    Config(String),
    #[error("driver: {0}")]
    Driver(#[from] fabric_southbound::DriverError),
    /// The driver could not be opened: `what` names its device or inventory file.
    #[error("cannot open the {kind} driver ({what}): {source}")]
    DriverOpen {
        kind: &'static str,
        what: String,
        source: fabric_southbound::DriverError,
    },
    /// The driver opened but the first discovery failed.
    #[error("{kind} driver: discovery failed: {source}")]
    Discovery {
        kind: &'static str,
        source: fabric_southbound::DriverError,
    },
    #[error("state directory: {0}")]
    State(#[from] crate::persist::PersistError),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: String,
        source: std::io::Error,
    },
    #[error("another fabricd is serving on {0}")]
    SocketInUse(PathBuf),
    #[error("cannot build the {0} thread pool: {1}")]
    Pool(&'static str, String),
    #[error("gRPC server: {0}")]
    Grpc(#[from] tonic::transport::Error),
    #[error("gRPC reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// A TLS file of `[grpc]` is unusable: names the key (`grpc.tls_key`) and the path, never
    /// the content.
    #[error("gRPC TLS: {0}")]
    Tls(#[from] fabric_proto::tls::TlsFileError),
    /// High availability (`[ha]`): etcd refused the coordinator (names the endpoints).
    #[error("high availability: {0}")]
    Ha(String),
}

/// How a run of the daemon ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunOutcome {
    /// Shutdown requested (or the control channel closed): the process exits.
    Stopped,
    /// `[ha]`: leadership lost (the reason); the loop stopped, the process stands by again.
    SteppedDown(String),
}

/// What the binary tells the daemon (from signals).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// SIGHUP: re-read the configuration file and apply what can change at run time.
    Reload,
    /// SIGUSR2: force a reroute.
    Reroute,
    /// SIGTERM / SIGINT: finish the running phase and stop.
    Shutdown,
}

/// Everything [`run`] needs.
pub struct RunOptions {
    /// Configuration file (re-read on reload); `None` = no reload source.
    pub config_path: Option<PathBuf>,
    pub config: Config,
    /// Overrides `daemon.state_dir`.
    pub state_dir: Option<PathBuf>,
    /// Overrides `grpc.socket`.
    pub socket: Option<PathBuf>,
    pub log: LogHandle,
    pub notifier: Notifier,
}

/// Runs `fut` to completion unless [`Control::Shutdown`] arrives (or `control` closes) first:
/// `None` then. Other controls are ignored meanwhile (nothing to reload or reroute yet).
async fn unless_stopped<T>(
    fut: impl std::future::Future<Output = T>,
    control: &mut mpsc::Receiver<Control>,
) -> Option<T> {
    tokio::pin!(fut);
    loop {
        tokio::select! {
            r = &mut fut => return Some(r),
            c = control.recv() => match c {
                Some(Control::Shutdown) | None => return None,
                Some(_) => {}
            },
        }
    }
}

/// Runs the daemon until [`Control::Shutdown`] arrives on `control` (without `[ha]`).
pub async fn run(mut opts: RunOptions, mut control: mpsc::Receiver<Control>) -> Result<(), DaemonError> {
    run_as(&mut opts, &mut control, None).await.map(|_| ())
}

/// Runs the daemon until [`Control::Shutdown`] arrives on `control`, or, as the `[ha]` leader
/// (`ha`), until leadership is lost. Reloads applied are kept in `opts.config`.
pub async fn run_as(
    opts: &mut RunOptions,
    control: &mut mpsc::Receiver<Control>,
    ha: Option<(&HaNode, Leadership)>,
) -> Result<RunOutcome, DaemonError> {
    let mut config = opts.config.clone();
    if let Some(d) = crate::event_loop::commit_delay() {
        tracing::warn!(
            "{}={}: TEST FAILPOINT: every commit waits {} ms before writing its state files. Never in production",
            crate::event_loop::COMMIT_DELAY_ENV,
            d.as_millis(),
            d.as_millis()
        );
    }
    let state_path = opts
        .state_dir
        .clone()
        .unwrap_or_else(|| config.daemon.state_dir.clone());
    let socket_path = opts.socket.clone().unwrap_or_else(|| config.grpc.socket.clone());
    let notifier = opts.notifier.clone();
    // TLS files first: a bad one stops the start before the fabric is touched.
    let grpc_tls = load_grpc_tls(&config)?;
    // So does a partitions file that does not parse (read again with the loop's settings).
    checks::partition_settings(&config)?;
    // [ha] leader: etcd's shared state becomes the state directory's, before anything reads it.
    let (ha_node, mut leadership) = match ha {
        Some((node, l)) => (Some(node), Some(l)),
        None => (None, None),
    };
    if let Some(l) = &leadership {
        if let Err(e) = ha::take_over_state(l, &state_path).await {
            tracing::error!("HA: {e}: giving the leadership up");
            let _ = notifier.status(&format!("stepping down: {e}"));
            if let Some(l) = leadership.take() {
                l.resign().await;
            }
            return Ok(RunOutcome::SteppedDown(e));
        }
    }
    let fence = ha_node.map(|n| n.fence.clone());

    // Driver and discovery. Both can wait on the fabric for long (a umad device under the
    // simulator shim does not open until ibsim runs; SMPs to a dead fabric time out), so a stop
    // request ends the start wherever it is.
    let kind = config.driver.kind.name();
    let start = async {
        let ((driver, mock), umad) = open_driver_counted(&config, &state_path, fence.clone()).await?;
        let physical = driver
            .discover()
            .await
            .map_err(|source| DaemonError::Discovery { kind, source })?;
        Ok::<_, DaemonError>((driver, mock, umad, Arc::new(physical)))
    };
    let Some(started) = unless_stopped(start, control).await else {
        tracing::warn!(
            driver = kind,
            "stopped while starting (the driver was still opening its device or discovering the fabric): no generation installed"
        );
        let _ = notifier.stopping();
        return Ok(RunOutcome::Stopped);
    };
    let (driver, mock, umad, physical) = started?;
    // Subnet-manager election: while another manager with precedence is master, stand by
    // (nothing written, its SMInfo polled); when it is gone, discover again and take over.
    let on_standby = {
        let notifier = notifier.clone();
        move |msg: String| {
            tracing::warn!("{msg}");
            // Started, as a standby: systemd must not time the start out.
            let _ = notifier.ready(&msg);
        }
    };
    let Some(was_standby) = unless_stopped(driver.standby_while_master(&on_standby), control).await else {
        tracing::info!("stopped while standby");
        let _ = notifier.stopping();
        return Ok(RunOutcome::Stopped);
    };
    let was_standby = was_standby.map_err(|source| DaemonError::Discovery { kind, source })?;
    let physical = if was_standby {
        let Some(found) = unless_stopped(driver.discover(), control).await else {
            tracing::info!("stopped while discovering the fabric to take it over");
            let _ = notifier.stopping();
            return Ok(RunOutcome::Stopped);
        };
        Arc::new(found.map_err(|source| DaemonError::Discovery { kind, source })?)
    } else {
        physical
    };
    // After discovery: the oob driver learns its agents' LFT capacity there.
    let caps = driver.caps();
    let (links, _) = physical.count_links();
    tracing::info!(
        driver = caps.name,
        switches = physical.num_switches(),
        end_ports = physical.num_end_ports(),
        links,
        "fabric discovered"
    );

    // State directory ([ha]: every shared file goes to etcd first).
    let state_dir = StateDir::open(&state_path)?;
    let state_dir = match &leadership {
        Some(l) => state_dir.with_mirror(Arc::new(crate::ha::EtcdMirror::new(l.shared_state()))),
        None => state_dir,
    };
    // A directory that cannot take the state files would let every commit go unrecorded.
    state_dir.probe_writable()?;
    let max_lid: Lid = effective_max_lid(&config, caps.max_lid);
    let mut guid2lid = state_dir.load_guid2lid()?;
    // Before the LIDs in force are added (those are adopted only where they fit the plan).
    check_recorded_lids(&guid2lid, max_lid)?;
    if guid2lid.is_empty() && config.routing.adopt_lids {
        // Taking over a running fabric (from another subnet manager, or after the state
        // directory was lost): keep the addresses in force where they fit the LID plan.
        let found = driver.lids_in_force();
        if !found.is_empty() {
            for &(guid, min, max) in &found {
                guid2lid.insert(guid, min, max);
            }
            tracing::info!(
                records = found.len(),
                "no LID assignment in the state directory: keeping the LIDs in force on the fabric where they fit the plan"
            );
        }
    }
    let jobs = state_dir.load_jobs()?;
    let virtual_faults = state_dir.load_virtual_faults()?;
    // A generation file that cannot be read stops the start (like the other files): numbering
    // from a guess could reuse numbers subscribers have seen. The event loop reads it again.
    let last_generation = state_dir.load_last_generation()?;
    // Same for the progress of an interrupted update: its generation number was announced.
    state_dir.load_update_progress()?;
    tracing::info!(
        dir = %state_path.display(),
        lids = guid2lid.len(),
        jobs = jobs.len(),
        virtual_faults = virtual_faults.len(),
        last_generation = last_generation.map_or(0, |g| g.generation),
        last_committed_at_unix_ms = last_generation.map_or(0, |g| g.committed_at_unix_ms),
        "state loaded"
    );

    let settings = loop_settings(&config)?;
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    let routing_pool = pool("route", routing_threads(&config, cores))?;
    let analysis_pool = pool("analysis", cores.div_ceil(2).max(1))?;
    // Fail the start now, clearly, rather than serve generation 0 forever.
    check_fabric_fits(&config, &physical, &guid2lid, max_lid)?;

    let published = Arc::new(ArcSwap::from_pointee(Published::starting(
        physical.clone(),
        settings.engine.to_string(),
        settings.job_aware,
        caps.name,
        config.routing.lmc,
    )));
    let (notices, _) = broadcast::channel(1024);
    // [slurm]: a task of its own, fed by the notices (subscribed before the first commit).
    let _slurm = crate::slurm::spawn(&config.slurm, published.clone(), notices.subscribe());
    let telemetry = ha_node.map_or_else(Telemetry::new, HaNode::telemetry);
    // Subnet Administration: one service for the driver (umad answers SA MADs itself and keeps
    // its snapshot) and gRPC SaQuery; for the other drivers the loop keeps the snapshot.
    let sa = crate::sa::open_service(&state_dir)?;
    let sa_publisher = if driver.attach_sa(sa.clone()) {
        tracing::info!(
            driver = caps.name,
            "subnet administration: the driver keeps the SA snapshot"
        );
        None
    } else {
        let escape = (config.routing.lmc >= 1).then_some(fabric_sa::subnet::Escape {
            sl: crate::grpc::ESCAPE_SL as u8,
        });
        Some(Arc::new(crate::sa::SaPublisher::new(
            sa.clone(),
            crate::sa::local_sm(),
            escape,
        )))
    };
    telemetry.attach_sa(sa.clone());
    // Every multicast group change (a join, a leave, a group removed) wakes the event loop,
    // which routes the groups in its next generation. The listener runs on the SA's thread:
    // it only bumps a counter.
    let (mcast_tx, mcast_rx) = tokio::sync::watch::channel(0u64);
    sa.set_mcast_listener(Box::new(move || {
        mcast_tx.send_modify(|v| *v = v.wrapping_add(1));
    }));
    // Drivers that configure no VLs are ready at once; umad's state is refreshed every second.
    telemetry.set_escape_vl_ready(driver.escape_vl_status().ready);
    if let Some(u) = umad {
        tokio::spawn(report_umad_counters(Arc::downgrade(&u), telemetry.clone()));
    }
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter
        .set_not_serving::<FabricManagerServer<FabricService>>()
        .await;

    // The socket first: a socket path that cannot be used stops the start before the event
    // loop writes anything (state files, switches).
    let mode = config
        .grpc
        .socket_mode_bits()
        .map_err(|e| DaemonError::Config(format!("grpc.socket_mode: {e}")))?;
    if let Some(w) = config.grpc.socket_mode_warning() {
        tracing::warn!("{w}");
    }
    let listener = match ha_node {
        Some(n) => n.unix_listener()?,
        None => bind_socket(&socket_path, mode).await?,
    };

    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<(u64, String)>();
    let watchdog = watchdog_interval();
    if let Some(w) = watchdog {
        tracing::info!(interval_ms = w.as_millis() as u64, "systemd watchdog enabled");
    }
    let (mut event_loop, events) = EventLoop::new(
        LoopParams {
            settings,
            lmc: config.routing.lmc,
            max_lid,
            driver_name: caps.name,
        },
        LoopIo {
            driver: driver.clone(),
            state_dir: state_dir.clone(),
            pool: routing_pool,
            published: published.clone(),
            notices: notices.clone(),
            telemetry: telemetry.clone(),
            notifier: notifier.clone(),
            watchdog,
            on_ready: Some(Box::new(move |g, status| {
                let _ = ready_tx.send((g, status));
            })),
            sa: sa_publisher,
            sa_service: Some(sa.clone()),
            mcast_changes: Some(mcast_rx),
        },
        LoopInit {
            physical,
            guid2lid,
            jobs,
            virtual_faults,
        },
    );
    if was_standby || leadership.is_some() {
        // The old master's tables are in the switches: write only what differs. ([ha]: the
        // previous leader's, always.)
        event_loop.read_back_first();
    }
    // The dashboard follows the notices from the first generation on.
    let metrics_config = Arc::new(ArcSwap::from_pointee(config.metrics.clone()));
    if !config.prometheus.listen.is_empty() {
        telemetry.attach_dashboard(crate::dashboard::Dashboard::start(
            published.clone(),
            &notices,
            analysis_pool.clone(),
            metrics_config.clone(),
        ));
    }
    let loop_task = tokio::spawn(event_loop.run());
    // The port-health monitor: a task of its own beside the loop (docs/port-health.md).
    let (health, health_task) = crate::health::start(
        config.health.clone(),
        config.fault_injection.enabled,
        crate::health::MonitorIo {
            driver: driver.clone(),
            driver_name: caps.name,
            published: published.clone(),
            notices: notices.clone(),
            events: events.clone(),
            state_dir,
            telemetry: telemetry.clone(),
        },
    )?;

    // gRPC.
    let shared = Shared::new(
        published.clone(),
        events.clone(),
        notices.clone(),
        mock.clone().map(|m| m as Arc<dyn fabric_southbound::PacketSimulator>),
        metrics_config.clone(),
        analysis_pool,
    )
    .with_driver(driver.clone())
    .with_sa(sa)
    .with_health(health.clone());
    let shared = Arc::new(match ha_node {
        Some(n) => shared.with_ha(n.view.clone(), false),
        None => shared,
    });
    // Requests are bounded by grpc.max_request_bytes; answers (whole-fabric LFT dumps) are not.
    let service = FabricManagerServer::new(FabricService::new(shared))
        .max_decoding_message_size(config.grpc.max_request_bytes as usize)
        .max_encoding_message_size(fabric_proto::MAX_MESSAGE_BYTES);
    let limits = crate::connlimit::ConnLimits::new(
        config.grpc.max_connections,
        Duration::from_secs(config.grpc.idle_timeout_s),
    );
    tracing::info!(
        socket = %socket_path.display(),
        mode = format_args!("{mode:o}"),
        max_connections = config.grpc.max_connections,
        idle_timeout_s = config.grpc.idle_timeout_s,
        max_request_bytes = config.grpc.max_request_bytes,
        "gRPC listening"
    );
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let mut servers = tokio::task::JoinSet::new();
    {
        let router = add_reflection(
            server_builder(&config.grpc)
                .add_service(health_service.clone())
                .add_service(service.clone()),
        )?;
        // Within the limits; the :authority grpcio / grpc-java send over a Unix socket made
        // acceptable to the HTTP/2 layer (authority.rs).
        let incoming = tokio_stream::StreamExt::map(
            crate::connlimit::limit(
                UnixListenerStream::new(listener),
                limits.clone(),
                socket_path.display().to_string(),
            ),
            |r| r.map(crate::authority::UnixAuthority::new),
        );
        let stop = stopped(stop_rx.clone());
        servers.spawn(async move { router.serve_with_incoming_shutdown(incoming, stop).await });
    }
    if !config.grpc.tcp_listen.is_empty() {
        let l = tokio::net::TcpListener::bind(&config.grpc.tcp_listen)
            .await
            .map_err(|source| DaemonError::Io {
                what: "cannot bind grpc.tcp_listen",
                path: config.grpc.tcp_listen.clone(),
                source,
            })?;
        let mut builder = server_builder(&config.grpc);
        match grpc_tls {
            Some(tls) => {
                tracing::info!(
                    addr = %config.grpc.tcp_listen,
                    cert = %config.grpc.tls_cert.as_deref().unwrap_or(Path::new("")).display(),
                    chain = tls.chain_len,
                    client_certificates = if tls.mutual { "required" } else { "not requested" },
                    "gRPC also listening on TCP with TLS"
                );
                builder = builder
                    .tls_config(tls.config)
                    .map_err(|e| DaemonError::Config(format!("grpc.tls_cert / grpc.tls_key: TLS refused: {e}")))?;
            }
            None => tracing::warn!(addr = %config.grpc.tcp_listen, "gRPC also listening on plaintext TCP"),
        }
        let router = add_reflection(builder.add_service(health_service).add_service(service))?;
        let stop = stopped(stop_rx.clone());
        let incoming = crate::connlimit::limit(
            TcpListenerStream::new(l),
            limits.clone(),
            config.grpc.tcp_listen.clone(),
        );
        servers.spawn(async move { router.serve_with_incoming_shutdown(incoming, stop).await });
    }
    let mut prom_task = None;
    if let Some(l) = ha_node.map(HaNode::prometheus_listener).transpose()?.flatten() {
        // [ha]: bound once for every term.
        prom_task = Some(tokio::spawn(telemetry.clone().serve(l, stopped(stop_rx.clone()))));
    } else if !config.prometheus.listen.is_empty() && ha_node.is_none() {
        let (l, addr) = crate::telemetry::bind(&config.prometheus.listen)
            .await
            .map_err(|source| DaemonError::Io {
                what: "cannot bind prometheus.listen",
                path: config.prometheus.listen.clone(),
                source,
            })?;
        tracing::info!(%addr, "Prometheus endpoint listening");
        prom_task = Some(tokio::spawn(telemetry.clone().serve(l, stopped(stop_rx.clone()))));
    }

    // READY=1 once the first generation is committed (complete or incomplete: STATUS says
    // what is missing); never while none could be.
    {
        let health_reporter = health_reporter.clone();
        let notifier = notifier.clone();
        let socket = socket_path.display().to_string();
        tokio::spawn(async move {
            if let Ok((g, status)) = ready_rx.await {
                health_reporter
                    .set_serving::<FabricManagerServer<FabricService>>()
                    .await;
                tracing::info!(generation = g, socket = %socket, status = %status, "fabricd ready");
                if let Err(e) = notifier.ready(&status) {
                    tracing::warn!(error = %e, "READY notification failed");
                }
            }
        });
    }

    // [ha]: fence transitions reach the log and systemd's STATUS; writes refused while fenced
    // are retried at once when the fence reopens.
    let fence_watch = ha_node.map(|n| tokio::spawn(ha::watch_fence(n.view.clone(), events.clone(), notifier.clone())));

    // Control channel ([ha]: and the leadership).
    let mut outcome = RunOutcome::Stopped;
    loop {
        let c = match leadership.as_mut() {
            Some(l) => tokio::select! {
                c = control.recv() => c,
                reason = l.lost() => {
                    let msg = format!("leadership lost: {reason}; stopping the event loop and standing by");
                    tracing::error!("HA: {msg}");
                    let _ = notifier.status(&format!("stepping down: {msg}"));
                    outcome = RunOutcome::SteppedDown(reason.to_string());
                    break;
                }
            },
            None => control.recv().await,
        };
        match c {
            Some(Control::Reroute) => {
                let _ = events
                    .send(Request::Reroute {
                        resync: false,
                        wait: false,
                        reply: None,
                    })
                    .await;
            }
            Some(Control::Reload) => {
                let Some(path) = &opts.config_path else {
                    tracing::warn!("reload requested but no configuration file was given");
                    continue;
                };
                let _ = notifier.reloading();
                match Config::load(path) {
                    Err(e) => tracing::error!("reload refused, keeping the running configuration: {e}"),
                    Ok(new) => {
                        let diff = config.reload_diff(&new);
                        if !diff.need_restart.is_empty() {
                            tracing::warn!(keys = ?diff.need_restart, "changed keys need a restart; keeping their running values");
                        }
                        let merged = config.merge_reload(&new);
                        // An engine that cannot route the fabric (dmodk off a complete PGFT, pqft off
                        // a QFT, smodk anywhere) would fail every generation from now on.
                        let engine_unfit = merged
                            .engine_kind()
                            .ok()
                            .and_then(|k| fabric_routing::engine_fits(k, &published.load().cabling).err());
                        match loop_settings(&merged) {
                            Err(e) => tracing::error!("reload refused: {e}"),
                            Ok(_) if engine_unfit.is_some() => tracing::error!(
                                "reload refused, keeping the running configuration: routing.engine = \"{}\": {}",
                                merged.routing.engine,
                                engine_unfit.as_ref().map(ToString::to_string).unwrap_or_default()
                            ),
                            Ok(s) => {
                                if let Err(e) = opts.log.set_level(&merged.log.level) {
                                    tracing::error!("log.level: {e}");
                                }
                                if let Some(m) = &mock {
                                    if let Err(e) = m.set_config(mock_config(&merged.driver.mock)) {
                                        tracing::error!("driver.mock: {e}");
                                    }
                                }
                                metrics_config.store(Arc::new(merged.metrics.clone()));
                                health.reload(merged.health.clone(), merged.fault_injection.enabled);
                                let _ = events.send(Request::Reload(Box::new(s))).await;
                                tracing::info!(applied = ?diff.applied, "configuration reloaded");
                                config = merged;
                            }
                        }
                    }
                }
                // READY=1 ends the reload; before the first commit the start is not over.
                let p = published.load();
                let status = p.installation.status_line(p.generation());
                if p.current.is_some() {
                    let _ = notifier.reloaded(&status);
                } else {
                    let _ = notifier.status(&status);
                }
            }
            Some(Control::Shutdown) | None => break,
        }
    }

    // Shutdown: stop accepting changes, let the running upload finish, then close listeners.
    // ([ha] step-down: the fence already refuses writes; the socket stays for the standby.)
    opts.config = config.clone();
    if let Some(t) = fence_watch {
        t.abort();
    }
    if outcome == RunOutcome::Stopped {
        tracing::info!("shutting down");
        let _ = notifier.stopping();
    }
    health_reporter
        .set_not_serving::<FabricManagerServer<FabricService>>()
        .await;
    health_task.abort();
    let _ = events.send(Request::Shutdown).await;
    if let Err(e) = loop_task.await {
        tracing::error!(error = %e, "event loop task failed");
    }
    let _ = stop_tx.send(true);
    let grace = tokio::time::sleep(Duration::from_secs(5));
    tokio::pin!(grace);
    loop {
        tokio::select! {
            r = servers.join_next() => match r {
                None => break,
                Some(Ok(Err(e))) => tracing::error!(error = %e, "gRPC server error"),
                Some(_) => {}
            },
            () = &mut grace => {
                tracing::warn!("gRPC connections still open after 5 s; closing them");
                servers.abort_all();
                break;
            }
        }
    }
    if let Some(t) = prom_task {
        t.abort();
    }
    match (&outcome, leadership) {
        (RunOutcome::Stopped, Some(l)) => {
            // A clean shutdown of the leader: the standby takes over at once.
            l.resign().await;
        }
        // Lost: dropping it stops the keep-alives (the fence is revoked already).
        (_, l) => drop(l),
    }
    if outcome != RunOutcome::Stopped {
        tracing::info!("event loop stopped; standing by");
        return Ok(outcome);
    }
    if let Err(e) = std::fs::remove_file(&socket_path) {
        tracing::debug!(error = %e, "socket already gone");
    }
    tracing::info!("stopped");
    Ok(outcome)
}
