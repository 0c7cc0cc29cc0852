//! `[ha]` in the daemon: the process-wide pieces (write fence, etcd coordinator, the Unix
//! socket and Prometheus listener bound once for every role) and the **standby**: serving a
//! status-only gRPC (every other call `UNAVAILABLE` naming the leader) and Prometheus while
//! campaigning, until elected or stopped.
//!
//! The leader's run is [`super::run_as`] with a [`Leadership`]; when it steps down the binary
//! calls [`HaNode::standby`] again (same process, same control channel).

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use fabric_ha::{Coordinator, Fence, Leadership};
use fabric_proto::v1::fabric_manager_server::FabricManagerServer;
use tokio::sync::{broadcast, mpsc, watch};
use tokio_stream::wrappers::UnixListenerStream;

use super::checks::pool;
use super::listen::{add_reflection, bind_socket, server_builder};
use super::{unless_stopped, Control, DaemonError, RunOptions};
use crate::config::Config;
use crate::grpc::{FabricService, Shared};
use crate::ha::{ha_config, HaView};
use crate::notify::watchdog_interval;
use crate::state::Published;
use crate::telemetry::Telemetry;

/// Environment variable of the test failpoint: `1` turns the leader's self-fencing off (see
/// `fabric_southbound::fence`): only an agent's refusal stops its writes. Tests only.
pub const NO_SELF_FENCE_ENV: &str = "FABRICD_TEST_HA_NO_SELF_FENCE";

/// The HA pieces of one fabricd process (built once, kept across leader terms).
pub struct HaNode {
    pub(super) coordinator: Coordinator,
    pub(super) fence: Arc<Fence>,
    pub(super) view: HaView,
    /// The Unix socket, bound once: the standby's and the leader's servers accept on clones.
    socket: std::os::unix::net::UnixListener,
    /// The Prometheus listener (`prometheus.listen`), bound once.
    prometheus: Option<std::net::TcpListener>,
}

fn io_err(what: &'static str, path: String) -> impl FnOnce(std::io::Error) -> DaemonError {
    move |source| DaemonError::Io { what, path, source }
}

impl HaNode {
    /// With `[ha]`: the fence (standby), the failpoint, the listeners, and the coordinator
    /// connected to etcd (retried while etcd does not answer). `None` without `[ha]`, or when
    /// stopped meanwhile (`Ok(None)` too: the caller checks `control`'s outcome through
    /// [`HaNode::standby`] anyway).
    pub async fn start(
        opts: &RunOptions,
        control: &mut mpsc::Receiver<Control>,
    ) -> Result<Option<HaNode>, DaemonError> {
        let config = &opts.config;
        if !config.ha.enabled() {
            return Ok(None);
        }
        let fence = Arc::new(Fence::standby());
        if std::env::var(NO_SELF_FENCE_ENV).is_ok_and(|v| v == "1") {
            fence.set_self_fencing(false);
            tracing::warn!(
                "{NO_SELF_FENCE_ENV}=1: TEST FAILPOINT: this manager ignores its own lease (no self-fencing); only the \
                 switch agents' epoch check stops its writes. Never in production"
            );
        }
        let socket_path = opts.socket.clone().unwrap_or_else(|| config.grpc.socket.clone());
        let mode = config
            .grpc
            .socket_mode_bits()
            .map_err(|e| DaemonError::Config(format!("grpc.socket_mode: {e}")))?;
        let socket = bind_socket(&socket_path, mode)
            .await?
            .into_std()
            .map_err(io_err("cannot use the socket", socket_path.display().to_string()))?;
        let prometheus = if config.prometheus.listen.is_empty() {
            None
        } else {
            let (l, addr) = crate::telemetry::bind(&config.prometheus.listen).await.map_err(io_err(
                "cannot bind prometheus.listen",
                config.prometheus.listen.clone(),
            ))?;
            tracing::info!(%addr, "Prometheus endpoint listening");
            Some(
                l.into_std()
                    .map_err(io_err("cannot use prometheus.listen", config.prometheus.listen.clone()))?,
            )
        };
        let cfg = ha_config(&config.ha);
        // Until etcd answers, the socket answers Status (standby, etcd unreachable) already.
        let (status_tx, status_rx) = watch::channel(fabric_ha::HaStatus {
            node_name: cfg.node_name.clone(),
            lease_ttl_s: cfg.lease_ttl.as_secs(),
            message: "connecting to etcd".into(),
            ..fabric_ha::HaStatus::default()
        });
        let (early_stop, early_servers) = serve_standby(
            config,
            &HaView::new(status_rx, fence.clone()),
            &socket,
            prometheus.as_ref(),
        )?;
        tracing::info!(
            node = %cfg.node_name,
            endpoints = %cfg.endpoints.join(", "),
            key_prefix = %cfg.key_prefix,
            lease_ttl_s = cfg.lease_ttl.as_secs(),
            "HA: connecting to etcd"
        );
        let connect = async {
            let mut backoff = Duration::from_millis(500);
            loop {
                match Coordinator::connect(cfg.clone(), fence.clone()).await {
                    Ok(c) => return Ok(c),
                    Err(e) if e.is_transient() => {
                        let msg = format!("standby: etcd unreachable, retrying in {} ms: {e}", backoff.as_millis());
                        tracing::warn!("HA: {msg}");
                        let _ = opts.notifier.status(&msg);
                        status_tx.send_modify(|s| s.message = e.to_string());
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                    }
                    Err(e) => return Err(DaemonError::Ha(e.to_string())),
                }
            }
        };
        let connected = unless_stopped(connect, control).await;
        let _ = early_stop.send(true);
        stop_servers(early_servers).await;
        let Some(coordinator) = connected else {
            let _ = std::fs::remove_file(&socket_path);
            return Ok(None);
        };
        let coordinator = coordinator?;
        let view = HaView::new(coordinator.status(), fence.clone());
        Ok(Some(HaNode {
            coordinator,
            fence,
            view,
            socket,
            prometheus,
        }))
    }

    /// A server's own handle on the Unix socket.
    pub(super) fn unix_listener(&self) -> Result<tokio::net::UnixListener, DaemonError> {
        clone_unix(&self.socket)
    }

    /// A server's own handle on the Prometheus listener, if configured.
    pub(super) fn prometheus_listener(&self) -> Result<Option<tokio::net::TcpListener>, DaemonError> {
        clone_tcp(self.prometheus.as_ref())
    }

    /// The telemetry of a term (leader or standby) with the `fabricd_ha_*` metrics.
    pub(super) fn telemetry(&self) -> Telemetry {
        ha_telemetry(&self.view)
    }

    /// Stands by until elected (`Some`) or stopped (`None`: the socket is removed): serves
    /// Status and Prometheus, campaigns, applies reloads to `opts.config` (read at takeover),
    /// keeps systemd's watchdog fed and its STATUS current.
    pub async fn standby(
        &self,
        opts: &mut RunOptions,
        control: &mut mpsc::Receiver<Control>,
    ) -> Result<Option<Leadership>, DaemonError> {
        let notifier = opts.notifier.clone();
        let socket_path = opts.socket.clone().unwrap_or_else(|| opts.config.grpc.socket.clone());
        let (stop_tx, servers) = serve_standby(&opts.config, &self.view, &self.socket, self.prometheus.as_ref())?;
        let summary = self.view.standby_message();
        tracing::info!(node = %self.view.status().node_name, "HA: {summary}; campaigning");
        if let Err(e) = notifier.ready(&summary) {
            tracing::warn!(error = %e, "READY notification failed");
        }
        let mut status = self.coordinator.status();
        let mut status_open = true;
        let mut watchdog = watchdog_interval().map(|d| tokio::time::interval(d / 2));
        let campaign = self.coordinator.campaign();
        tokio::pin!(campaign);
        let outcome = loop {
            let tick = async {
                match watchdog.as_mut() {
                    Some(w) => {
                        w.tick().await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                r = &mut campaign => break Some(r),
                () = tick => {
                    let _ = notifier.watchdog();
                }
                changed = status.changed(), if status_open => {
                    match changed {
                        Ok(()) => {
                            let _ = notifier.status(&self.view.standby_message());
                        }
                        Err(_) => status_open = false,
                    }
                }
                c = control.recv() => match c {
                    Some(Control::Shutdown) | None => break None,
                    Some(Control::Reroute) => tracing::info!("reroute ignored: {}", self.view.standby_message()),
                    Some(Control::Reload) => reload_standby(opts),
                },
            }
        };
        let _ = stop_tx.send(true);
        stop_servers(servers).await;
        match outcome {
            None => {
                tracing::info!("stopped while standby");
                let _ = notifier.stopping();
                if let Err(e) = std::fs::remove_file(&socket_path) {
                    tracing::debug!(error = %e, "socket already gone");
                }
                Ok(None)
            }
            Some(Err(e)) => Err(DaemonError::Ha(e.to_string())),
            Some(Ok(l)) => {
                let msg = format!("leader with epoch {}: taking over the fabric", l.epoch);
                tracing::info!(epoch = l.epoch, lease = format_args!("{:x}", l.lease_id), "HA: {msg}");
                let _ = notifier.status(&msg);
                Ok(Some(l))
            }
        }
    }
}

/// The standby's servers: the status-only gRPC on the Unix socket, Prometheus.
fn serve_standby(
    config: &Config,
    view: &HaView,
    socket: &std::os::unix::net::UnixListener,
    prometheus: Option<&std::net::TcpListener>,
) -> Result<(watch::Sender<bool>, tokio::task::JoinSet<()>), DaemonError> {
    let empty = Arc::new(fabric_topology::FabricBuilder::new().build());
    let published = Arc::new(ArcSwap::from_pointee(Published::starting(
        empty,
        config.routing.engine.clone(),
        config.routing.job_aware,
        "oob",
        config.routing.lmc,
    )));
    // No event loop behind a standby: the service refuses every call but Status.
    let (events, _) = mpsc::channel(1);
    let (notices, _) = broadcast::channel(1);
    let shared = Shared::new(
        published,
        events,
        notices,
        None,
        Arc::new(ArcSwap::from_pointee(config.metrics.clone())),
        pool("standby-analysis", 1)?,
    )
    .with_ha(view.clone(), true);
    let service = FabricManagerServer::new(FabricService::new(Arc::new(shared)))
        .max_decoding_message_size(config.grpc.max_request_bytes as usize);
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let mut servers = tokio::task::JoinSet::new();
    let router = add_reflection(
        server_builder(&config.grpc)
            .add_service(health_service)
            .add_service(service),
    )?;
    let limits = crate::connlimit::ConnLimits::new(
        config.grpc.max_connections,
        Duration::from_secs(config.grpc.idle_timeout_s),
    );
    let incoming = tokio_stream::StreamExt::map(
        crate::connlimit::limit(
            UnixListenerStream::new(clone_unix(socket)?),
            limits,
            config.grpc.socket.display().to_string(),
        ),
        |r| r.map(crate::authority::UnixAuthority::new),
    );
    let stop = stopped(stop_rx.clone());
    servers.spawn(async move {
        // Not serving: the gRPC health check says so; Status answers.
        health_reporter
            .set_not_serving::<FabricManagerServer<FabricService>>()
            .await;
        if let Err(e) = router.serve_with_incoming_shutdown(incoming, stop).await {
            tracing::error!(error = %e, "standby gRPC server error");
        }
    });
    if let Some(l) = clone_tcp(prometheus)? {
        let t = ha_telemetry(view);
        servers.spawn(t.serve(l, stopped(stop_rx)));
    }
    Ok((stop_tx, servers))
}

/// A server's own handle on the Unix socket.
fn clone_unix(socket: &std::os::unix::net::UnixListener) -> Result<tokio::net::UnixListener, DaemonError> {
    socket
        .try_clone()
        .and_then(|l| {
            l.set_nonblocking(true)?;
            tokio::net::UnixListener::from_std(l)
        })
        .map_err(io_err("cannot use the socket", String::new()))
}

/// A server's own handle on the Prometheus listener, if configured.
fn clone_tcp(l: Option<&std::net::TcpListener>) -> Result<Option<tokio::net::TcpListener>, DaemonError> {
    let Some(l) = l else { return Ok(None) };
    l.try_clone()
        .and_then(|l| {
            l.set_nonblocking(true)?;
            tokio::net::TcpListener::from_std(l)
        })
        .map(Some)
        .map_err(io_err("cannot use prometheus.listen", String::new()))
}

/// Telemetry with the `fabricd_ha_*` metrics read from `view`.
fn ha_telemetry(view: &HaView) -> Telemetry {
    let t = Telemetry::with_ha();
    let view = view.clone();
    t.attach_ha(Arc::new(move || view.gauges()));
    t
}

/// A reload while standby: the new configuration is checked and kept for the takeover (the
/// log level applies at once; keys that need a restart keep their running values).
fn reload_standby(opts: &mut RunOptions) {
    let Some(path) = &opts.config_path else {
        tracing::warn!("reload requested but no configuration file was given");
        return;
    };
    match Config::load(path) {
        Err(e) => tracing::error!("reload refused, keeping the running configuration: {e}"),
        Ok(new) => {
            let diff = opts.config.reload_diff(&new);
            if !diff.need_restart.is_empty() {
                tracing::warn!(keys = ?diff.need_restart, "changed keys need a restart; keeping their running values");
            }
            let merged = opts.config.merge_reload(&new);
            if let Err(e) = opts.log.set_level(&merged.log.level) {
                tracing::error!("log.level: {e}");
            }
            opts.config = merged;
            tracing::info!(applied = ?diff.applied, "configuration reloaded (standby: applied at takeover)");
        }
    }
}

/// Waits for a term's servers to finish (open connections get 2 s, then are closed).
pub(super) async fn stop_servers(mut servers: tokio::task::JoinSet<()>) {
    let grace = tokio::time::sleep(Duration::from_secs(2));
    tokio::pin!(grace);
    loop {
        tokio::select! {
            r = servers.join_next() => if r.is_none() { break },
            () = &mut grace => {
                servers.abort_all();
                break;
            }
        }
    }
}

/// A new leader's state directory: etcd's shared state written into it (or, etcd holding
/// none yet, its shared files uploaded). The error says what failed (the caller resigns).
pub(super) async fn take_over_state(l: &Leadership, state_path: &std::path::Path) -> Result<(), String> {
    use crate::ha::{adopt_shared_state, Adopted};
    let dir = crate::persist::StateDir::open(state_path).map_err(|e| format!("state directory: {e}"))?;
    match adopt_shared_state(&l.shared_state(), &dir).await {
        Ok(Adopted::FromEtcd(files)) => {
            tracing::info!(epoch = l.epoch, ?files, dir = %state_path.display(), "HA: shared state loaded from etcd into the state directory");
            Ok(())
        }
        Ok(Adopted::Uploaded(files)) => {
            tracing::info!(
                epoch = l.epoch,
                ?files,
                dir = %state_path.display(),
                "HA: etcd held no shared state: the state directory's shared files were uploaded (LIDs kept)"
            );
            Ok(())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// While leading: logs every fence transition (an ERROR when writes become refused), keeps
/// systemd's STATUS honest, and when the fence reopens after refusing writes asks the loop for
/// a reroute at once (rather than waiting for the failed generation's backoff, up to a minute).
pub(super) async fn watch_fence(
    view: HaView,
    events: mpsc::Sender<crate::event_loop::Request>,
    notifier: crate::notify::Notifier,
) {
    let mut was: Option<String> = None;
    let mut refused_at_close = 0;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tick.tick().await;
        let now = view.not_ready().filter(|_| view.fenced());
        if now == was {
            continue;
        }
        match (&was, &now) {
            (_, Some(why)) => {
                tracing::error!("HA: {why}");
                let _ = notifier.status(why);
                if was.is_none() {
                    refused_at_close = view.fence().refused();
                }
            }
            (Some(_), None) => {
                let refused = view.fence().refused() - refused_at_close.min(view.fence().refused());
                tracing::warn!(
                    refused,
                    "HA: the lease was renewed: the fence is open again, switch writes resume"
                );
                let _ = notifier.status(&format!("{}: writes resume", view.summary()));
                if refused > 0 {
                    let _ = events
                        .send(crate::event_loop::Request::Reroute {
                            resync: false,
                            wait: false,
                            reply: None,
                        })
                        .await;
                }
            }
            (None, None) => {}
        }
        was = now;
    }
}
