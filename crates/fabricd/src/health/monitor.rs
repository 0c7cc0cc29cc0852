//! The monitor task: polls, flaps from the notices, the policy, isolation and clearing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use fabric_southbound::{Counter, CounterPort, DriverError, SouthboundDriver};
use fabric_topology::{fmt_guid, Fabric, FabricEvent, Guid, PortNum, Remote};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::time::Instant;

use super::flaps::Flaps;
use super::names::{canonical, link_ends, port_name, remote_name, routed_fabric, switch_side};
use super::policy::{evaluate, round, Breach, Policy};
use super::rates::PortTrack;
use super::rows::{names_fingerprint, Rebuild, Rows};
use super::safety::check_isolation;
use super::store::{self, link_text, Isolation};
use super::{ClearTarget, Command, CounterView, FabricSummary, HealthHandle, HealthSnapshot, PortHealth, PortState};
use crate::config::{HealthAction, HealthConfig};
use crate::event_loop::{FaultAccepted, LoopError, Request as LoopRequest};
use crate::persist::{PersistError, StateDir};
use crate::state::{Notice, Published};
use crate::telemetry::{HealthGauges, PortRate, Telemetry};

/// What the monitor reads from and reports to.
pub struct MonitorIo {
    pub driver: Arc<dyn SouthboundDriver>,
    pub driver_name: &'static str,
    pub published: Arc<ArcSwap<Published>>,
    pub notices: broadcast::Sender<Notice>,
    pub events: mpsc::Sender<LoopRequest>,
    pub state_dir: StateDir,
    pub telemetry: Telemetry,
}

/// Loads `health.json` and starts the monitor task. An unreadable `health.json` is an error
/// naming it (the daemon refuses to start rather than forget why links are isolated).
pub fn start(
    config: HealthConfig,
    fault_injection: bool,
    io: MonitorIo,
) -> Result<(Arc<HealthHandle>, tokio::task::JoinHandle<()>), PersistError> {
    let isolated = store::load(&io.state_dir)?;
    let (tx, rx) = mpsc::channel(16);
    let handle = Arc::new(HealthHandle {
        snapshot: ArcSwap::from_pointee(HealthSnapshot::default()),
        config: ArcSwap::from_pointee(config),
        fault_injection: AtomicBool::new(fault_injection),
        commands: tx,
    });
    let m = Monitor {
        notices: io.notices.subscribe(),
        io,
        handle: handle.clone(),
        commands: rx,
        tracks: BTreeMap::new(),
        flaps: Flaps::default(),
        isolated,
        unsupported_logged: false,
        counters_note: String::new(),
        breaches: BTreeMap::new(),
        refused: BTreeMap::new(),
        polls: 0,
        last_poll_unix_ms: 0,
        rows: Rows::default(),
    };
    Ok((handle, tokio::spawn(m.run())))
}

/// A committed generation changes the snapshot's fabric summary and flap counts only; its
/// snapshot (every tracked port: ~280 000 on the 34 992-node fabric, hundreds of ms of CPU) is
/// built this long after the commit, once for all the commits meanwhile, so that it does not
/// compete with the next fault's generation for the cores (issue #17). Polls publish at once.
const COMMIT_PUBLISH_DELAY: Duration = Duration::from_millis(1000);

/// How often a poll waiting for a generation's installation looks again.
const POLL_RETRY: Duration = Duration::from_millis(100);

struct Monitor {
    io: MonitorIo,
    handle: Arc<HealthHandle>,
    commands: mpsc::Receiver<Command>,
    notices: broadcast::Receiver<Notice>,
    tracks: BTreeMap<CounterPort, PortTrack>,
    flaps: Flaps,
    isolated: Vec<Isolation>,
    unsupported_logged: bool,
    counters_note: String,
    /// The breaches of the last poll, and the refused isolations among them.
    breaches: BTreeMap<CounterPort, Breach>,
    refused: BTreeMap<CounterPort, String>,
    polls: u64,
    last_poll_unix_ms: i64,
    /// The snapshot's rows between publications (rebuilt where something changed).
    rows: Rows,
}

impl Monitor {
    async fn run(mut self) {
        self.publish();
        // The isolations of a previous run: the virtual link-downs are persisted by the event
        // loop too; asserting them again costs nothing ("no change") and covers a lost file.
        for i in self.isolated.clone() {
            if let Some((g, p)) = i.link() {
                if let Err(e) = self.ask_isolate(g, p, true).await {
                    tracing::warn!(link = %link_text(g, p), error = %e, "cannot restore an isolation of health.json");
                }
            }
        }
        let mut next = Instant::now() + Duration::from_secs(1);
        // The snapshot owed to the commits seen since the last one (see `COMMIT_PUBLISH_DELAY`).
        let mut publish_at: Option<Instant> = None;
        // Since when the due poll waits for the generation being installed.
        let mut poll_waited: Option<Instant> = None;
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(next) => {
                    let interval = Duration::from_secs(self.handle.config().interval_s.max(1));
                    let installing = self.io.published.load().phase != crate::state::Phase::Idle;
                    if installing && poll_waited.is_none_or(|t| t.elapsed() < interval) {
                        // A generation is being installed: reading every port's counters
                        // (~280 000 ports on the 34 992-node fabric) would compete with it
                        // for the cores and the driver; the poll waits for Idle, at most one
                        // interval (issue #17).
                        poll_waited.get_or_insert_with(Instant::now);
                        next = Instant::now() + POLL_RETRY;
                        continue;
                    }
                    poll_waited = None;
                    self.poll().await;
                    publish_at = None;
                    next = Instant::now() + interval;
                }
                () = async {
                    match publish_at {
                        Some(t) => tokio::time::sleep_until(t).await,
                        None => std::future::pending().await,
                    }
                } => {
                    publish_at = None;
                    self.publish();
                }
                n = self.notices.recv() => match n {
                    Ok(Notice::TopologyChange { event, physical: true }) => self.on_physical(&event),
                    Ok(Notice::GenerationCommitted { .. }) => {
                        publish_at.get_or_insert_with(|| Instant::now() + COMMIT_PUBLISH_DELAY);
                    }
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "health monitor: notices missed (flap counts may be low)");
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                c = self.commands.recv() => match c {
                    Some(Command::Clear { target, reply }) => self.on_clear(target, reply).await,
                    None => break,
                },
            }
        }
    }

    /// A physical link-down counts as a flap of both ends.
    fn on_physical(&mut self, ev: &FabricEvent) {
        let now = std::time::Instant::now();
        let p = self.io.published.load();
        let f = &p.cabling;
        match *ev {
            FabricEvent::LinkDown { switch, port } => {
                for end in link_ends(f, switch, port) {
                    self.flaps.record_down(end, now);
                }
            }
            FabricEvent::EndPortDown(g) => {
                self.flaps.record_down(CounterPort::EndPort(g), now);
            }
            _ => {}
        }
    }

    async fn poll(&mut self) {
        let cfg = self.handle.config();
        // Only the two fabrics: holding the published state across the reads would keep its
        // generation's tables alive (the next incremental routing recycles them).
        let (cabling, routed) = {
            let p = self.io.published.load_full();
            (p.cabling.clone(), routed_fabric(&p))
        };
        let now = std::time::Instant::now();
        if cfg.enabled {
            let ports = self.ports_to_read(&cabling, &routed);
            match self.io.driver.read_port_counters(&ports).await {
                Ok(readings) => {
                    let failed = readings.iter().filter(|r| r.counters.is_err()).count();
                    for r in readings {
                        let t = self.tracks.entry(r.port).or_default();
                        let changed = match r.counters {
                            Ok(c) => t.update(now, c),
                            Err(e) => t.failed(e.to_string()),
                        };
                        if changed {
                            self.rows.mark(r.port);
                        }
                    }
                    self.counters_note = if failed > 0 {
                        format!(
                            "{failed} of {} ports could not be read (see their read_error)",
                            ports.len()
                        )
                    } else {
                        String::new()
                    };
                }
                Err(e @ DriverError::Unsupported(_)) => {
                    if !self.unsupported_logged {
                        tracing::warn!(
                            driver = self.io.driver_name,
                            error = %e,
                            "port health: counters not available from this driver; flap detection still works"
                        );
                        self.unsupported_logged = true;
                    }
                    self.counters_note = format!("counters not available from driver {}: {e}", self.io.driver_name);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "port health: reading the port counters failed");
                    self.counters_note = format!("reading the counters failed: {e}");
                }
            }
            self.flaps.prune(now, Duration::from_secs(cfg.flap_window_s));
            self.apply_policy(&cfg, &cabling, &routed, now).await;
            self.polls += 1;
            self.last_poll_unix_ms = unix_ms();
        }
        self.publish();
    }

    /// Every cabled port of a live switch and every cabled live end port; links down in the
    /// routed fabric only when the monitor isolated them (they are still read).
    fn ports_to_read(&self, cabling: &Fabric, routed: &Fabric) -> Vec<CounterPort> {
        let mut v = Vec::new();
        for sid in cabling.switch_ids() {
            let s = cabling.switch(sid);
            let up = routed.switch_by_guid(s.guid).is_some_and(|r| routed.switch(r).up);
            if !up {
                continue;
            }
            for (pn, port) in s.external_ports() {
                if matches!(port.remote, Remote::None) {
                    continue;
                }
                let live = routed.switch(sid).ports[pn as usize].state == fabric_topology::LinkState::Up;
                if live || self.isolation_of(cabling, s.guid, pn).is_some() {
                    v.push(CounterPort::Switch {
                        switch: s.guid,
                        port: pn,
                    });
                }
            }
        }
        for e in cabling.end_ports() {
            let live = routed
                .end_port_by_guid(e.port_guid)
                .is_some_and(|id| routed.end_port_live(id));
            if e.attach.is_some() && live {
                v.push(CounterPort::EndPort(e.port_guid));
            }
        }
        v
    }

    /// The isolation of the link on `switch`/`port`, if the monitor isolated it.
    fn isolation_of(&self, cabling: &Fabric, switch: Guid, port: PortNum) -> Option<usize> {
        let c = canonical(cabling, switch, port);
        self.isolated.iter().position(|i| i.link() == Some(c))
    }

    fn port_isolation(&self, cabling: &Fabric, p: &CounterPort) -> Option<usize> {
        let (s, n) = switch_side(cabling, p)?;
        self.isolation_of(cabling, s, n)
    }

    async fn apply_policy(&mut self, cfg: &HealthConfig, cabling: &Fabric, routed: &Fabric, now: std::time::Instant) {
        let policy = Policy::from_config(cfg);
        let window = Duration::from_secs(cfg.flap_window_s);
        let ports: BTreeSet<CounterPort> = self.tracks.keys().chain(self.flaps.ports()).copied().collect();
        let mut breaches: Vec<(CounterPort, Breach)> = ports
            .into_iter()
            .filter_map(|p| evaluate(&policy, self.tracks.get(&p), self.flaps.count(&p, now, window)).map(|b| (p, b)))
            .collect();
        breaches.sort_by(|a, b| b.1.severity().total_cmp(&a.1.severity()).then(a.0.cmp(&b.0)));
        let mut refused = BTreeMap::new();
        let mut fabric = routed.clone();
        for (port, b) in &breaches {
            let text = b.text(cfg.flap_window_s);
            if self.port_isolation(cabling, port).is_some() {
                continue;
            }
            if !self.breaches.contains_key(port) {
                tracing::warn!(port = %port_name(cabling, port), reason = %text, action = ?cfg.action, "port health: policy broken");
            }
            if cfg.action != HealthAction::Isolate {
                continue;
            }
            let verdict = match switch_side(cabling, port) {
                None => Err("not cabled".to_string()),
                Some(_) if matches!(port, CounterPort::EndPort(_)) => {
                    Err("it is an end port's link: isolating it would disconnect the end port".to_string())
                }
                Some(_) if self.isolated.len() >= cfg.max_isolated as usize => Err(format!(
                    "max_isolated = {} links are isolated already",
                    cfg.max_isolated
                )),
                Some((s, n)) => check_isolation(&fabric, s, n),
            };
            match verdict {
                Err(why) => {
                    let why = format!("not isolated: {why}");
                    if self.refused.get(port) != Some(&why) {
                        tracing::error!(
                            port = %port_name(cabling, port),
                            reason = %text,
                            "PORT HEALTH: the policy asks to isolate this port but it is only reported: {why}"
                        );
                    }
                    refused.insert(*port, why);
                }
                Ok((g, n)) => match self.ask_isolate(g, n, true).await {
                    Ok(a) => {
                        let (s, pn) = switch_side(cabling, port).unwrap_or((g, n));
                        if let Ok(next) = fabric.apply(&[FabricEvent::LinkDown { switch: s, port: pn }]) {
                            fabric = next;
                        }
                        let iso = Isolation {
                            switch: fmt_guid(g),
                            port: n,
                            port_seen: port.to_string(),
                            cause: b.counter.map_or("flapping", Counter::name).to_string(),
                            value: b.value,
                            threshold: b.threshold,
                            reason: text.clone(),
                            at_unix_ms: unix_ms(),
                        };
                        tracing::warn!(
                            port = %port_name(cabling, port),
                            link = %link_text(g, n),
                            reason = %text,
                            event = %a.event,
                            "PORT HEALTH: link isolated (routing avoids it until `fabricctl health clear`)"
                        );
                        self.isolated.push(iso);
                        self.io.telemetry.health_isolated();
                        self.save().await;
                    }
                    Err(e) => {
                        let why = format!("not isolated: the event loop refused: {e}");
                        tracing::error!(port = %port_name(cabling, port), "PORT HEALTH: {why}");
                        refused.insert(*port, why);
                    }
                },
            }
        }
        self.breaches = breaches.into_iter().collect();
        self.refused = refused;
    }

    async fn ask_isolate(&self, switch: Guid, port: PortNum, isolate: bool) -> Result<FaultAccepted, LoopError> {
        let (tx, rx) = oneshot::channel();
        self.io
            .events
            .send(LoopRequest::Isolate {
                switch,
                port,
                isolate,
                reply: tx,
            })
            .await
            .map_err(|_| LoopError::ShuttingDown)?;
        rx.await.map_err(|_| LoopError::ShuttingDown)?
    }

    async fn save(&self) {
        let dir = self.io.state_dir.clone();
        let list = self.isolated.clone();
        match tokio::task::spawn_blocking(move || store::save(&dir, &list)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "port health: cannot save the isolated links"),
            Err(e) => tracing::error!(error = %e, "port health: the save task failed"),
        }
    }

    async fn on_clear(&mut self, target: ClearTarget, reply: oneshot::Sender<Result<Vec<String>, String>>) {
        let cabling = self.io.published.load().cabling.clone();
        let cabling = &*cabling;
        let mut done = Vec::new();
        let chosen: Vec<usize> = match &target {
            ClearTarget::All => (0..self.isolated.len()).collect(),
            ClearTarget::Port(port) => self.port_isolation(cabling, port).into_iter().collect(),
        };
        let mut kept = Vec::new();
        for (i, iso) in std::mem::take(&mut self.isolated).into_iter().enumerate() {
            if !chosen.contains(&i) {
                kept.push(iso);
                continue;
            }
            let Some((g, n)) = iso.link() else { continue };
            match self.ask_isolate(g, n, false).await {
                Ok(a) => {
                    tracing::info!(link = %link_text(g, n), event = %a.event, "port health: isolation cleared");
                    done.push(format!("{}: isolation cleared ({})", link_text(g, n), a.event));
                    for end in link_ends(cabling, g, n) {
                        self.forget(&end);
                    }
                }
                Err(e) => {
                    done.push(format!("{}: not cleared: {e}", link_text(g, n)));
                    kept.push(iso);
                }
            }
        }
        self.isolated = kept;
        self.save().await;
        match target {
            ClearTarget::All => {
                self.rows.mark_all();
                self.tracks.clear();
                self.flaps = Flaps::default();
                self.breaches.clear();
                self.refused.clear();
                done.push("every port's rates and flaps start over".into());
            }
            ClearTarget::Port(port) => {
                let ends = match switch_side(cabling, &port) {
                    Some((s, n)) => link_ends(cabling, s, n),
                    None => vec![port],
                };
                for e in &ends {
                    self.forget(e);
                }
                done.push(format!("{}: rates and flaps start over", port_name(cabling, &port)));
            }
        }
        self.publish();
        let _ = reply.send(Ok(done));
    }

    fn forget(&mut self, p: &CounterPort) {
        self.rows.mark(*p);
        self.tracks.remove(p);
        self.flaps.clear(p);
        self.breaches.remove(p);
        self.refused.remove(p);
    }

    /// Builds and swaps in the snapshot; moves the Prometheus gauges. Only the rows of ports
    /// that changed are rebuilt (see `rows`).
    fn publish(&mut self) {
        let cfg = self.handle.config();
        let p = self.io.published.load_full();
        let routed = routed_fabric(&p);
        let cabling = &p.cabling;
        let now = std::time::Instant::now();
        let window = Duration::from_secs(cfg.flap_window_s);
        // Ports whose rows depend on more than their track: flaps (which age), isolated ends,
        // breaches and refusals of the last poll.
        let mut volatile: BTreeSet<CounterPort> = self.flaps.ports().copied().collect();
        for iso in &self.isolated {
            if let Some((g, n)) = iso.link() {
                volatile.extend(link_ends(cabling, g, n));
            }
        }
        volatile.extend(self.breaches.keys().copied());
        volatile.extend(self.refused.keys().copied());
        let mut rows = std::mem::take(&mut self.rows);
        match rows.plan(&cfg, names_fingerprint(cabling), volatile) {
            Rebuild::All => {
                for port in self.tracks.keys().chain(self.flaps.ports()) {
                    rows.set(self.port_health(cabling, *port, now, window));
                }
                for iso in &self.isolated {
                    if let Some((g, n)) = iso.link() {
                        for port in link_ends(cabling, g, n) {
                            rows.set(self.port_health(cabling, port, now, window));
                        }
                    }
                }
            }
            Rebuild::Some(todo) => {
                for port in todo {
                    // In the snapshot: tracked, flapping or an isolated end (volatile).
                    if self.tracks.contains_key(&port) || rows.volatile(&port) {
                        rows.set(self.port_health(cabling, port, now, window));
                    } else {
                        rows.remove(&port);
                    }
                }
            }
        }
        let ports = rows.ordered();
        self.rows = rows;
        let mut fabric = FabricSummary::of(&routed, &ports, cfg.flap_count);
        fabric.isolated_ports = self.isolated.len() as u64;
        let thresholds: Vec<String> = cfg
            .counter_thresholds()
            .iter()
            .map(|(c, t)| format!("{} > {}/s", c.name(), round(*t)))
            .collect();
        let snapshot = HealthSnapshot {
            enabled: cfg.enabled,
            counters_note: self.counters_note.clone(),
            polls: self.polls,
            last_poll_unix_ms: self.last_poll_unix_ms,
            interval_s: cfg.interval_s,
            policy: format!(
                "action {}; {}; flapping: {} link-downs within {} s; at most {} isolated links",
                match cfg.action {
                    HealthAction::Report => "report",
                    HealthAction::Isolate => "isolate",
                },
                if thresholds.is_empty() {
                    "no thresholds".into()
                } else {
                    thresholds.join(", ")
                },
                cfg.flap_count,
                cfg.flap_window_s,
                cfg.max_isolated
            ),
            isolated: self.isolated.clone(),
            refused: self
                .refused
                .iter()
                .map(|(p, why)| format!("{}: {why}", port_name(cabling, p)))
                .collect(),
            fabric,
            ports,
        };
        self.io
            .telemetry
            .health_state(&gauges(&snapshot, cfg.metrics_top_ports));
        self.io.telemetry.health_ports(dashboard_view(cabling, &snapshot));
        self.handle.snapshot.store(Arc::new(snapshot));
    }

    fn port_health(
        &self,
        cabling: &Fabric,
        port: CounterPort,
        now: std::time::Instant,
        window: Duration,
    ) -> PortHealth {
        let track = self.tracks.get(&port);
        let counters: Vec<CounterView> = match track {
            Some(t) if t.read() => Counter::ALL
                .into_iter()
                .map(|c| {
                    let s = t.get(c);
                    CounterView {
                        counter: c,
                        value: s.value,
                        rate: s.rate,
                        saturated: s.saturated,
                    }
                })
                .collect(),
            _ => Vec::new(),
        };
        let saturated: Vec<&str> = track.map_or(Vec::new(), |t| {
            t.saturated_errors().into_iter().map(Counter::name).collect()
        });
        let flaps = self.flaps.count(&port, now, window);
        let cfg = self.handle.config();
        let (state, reason) = if let Some(i) = self.port_isolation(cabling, &port) {
            let iso = &self.isolated[i];
            (
                PortState::Isolated,
                format!(
                    "isolated since {} ms (Unix): {} (seen on {})",
                    iso.at_unix_ms, iso.reason, iso.port_seen
                ),
            )
        } else if let Some(b) = self.breaches.get(&port) {
            let mut r = b.text(cfg.flap_window_s);
            if let Some(why) = self.refused.get(&port) {
                r = format!("{r}; {why}");
            }
            (PortState::Warning, r)
        } else if !saturated.is_empty() {
            (
                PortState::Warning,
                format!("saturated (rate unknown until reset): {}", saturated.join(", ")),
            )
        } else {
            (PortState::Ok, String::new())
        };
        PortHealth {
            port,
            name: port_name(cabling, &port),
            remote: remote_name(cabling, &port),
            state,
            reason,
            counters,
            max_error_rate: track.map_or(0.0, PortTrack::max_error_rate),
            flaps,
            read_error: track.and_then(|t| t.error.clone()).unwrap_or_default(),
        }
    }
}

/// The Prometheus view of a snapshot: totals per counter and the `top` worst ports per counter.
fn gauges(s: &HealthSnapshot, top: usize) -> HealthGauges {
    let mut totals = Vec::new();
    let mut worst = Vec::new();
    for c in Counter::ERRORS {
        // A positive error rate makes `max_error_rate` positive: only those ports are looked at.
        let mut rates: Vec<(&PortHealth, f64)> = s
            .ports
            .iter()
            .map(|p| &**p)
            .filter(|p| p.max_error_rate > 0.0)
            .filter_map(|p| {
                let r = p.counters.iter().find(|v| v.counter == c)?.rate?;
                (r > 0.0).then_some((p, r))
            })
            .collect();
        totals.push((c.name(), rates.iter().map(|(_, r)| r).fold(0.0, |a, r| a + r)));
        rates.sort_by(|a, b| b.1.total_cmp(&a.1));
        worst.extend(rates.into_iter().take(top).map(|(p, r)| PortRate {
            port: p.port.to_string(),
            name: p.name.clone(),
            counter: c.name(),
            rate: r,
        }));
    }
    let f = &s.fabric;
    HealthGauges {
        switches: (f.switches_up, f.switches_down),
        links: (f.links_up, f.links_down),
        end_ports: (f.end_ports_up, f.end_ports_down),
        isolated: f.isolated_ports,
        warning: f.warning_ports,
        flapping: f.flapping_ports,
        totals,
        worst,
    }
}

fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// What the dashboard colours ports with: the highest error rate of every switch port with
/// one, and the reason of every isolated link on both its ends.
fn dashboard_view(cabling: &Fabric, snapshot: &HealthSnapshot) -> crate::telemetry::HealthPorts {
    let mut view = crate::telemetry::HealthPorts::default();
    for p in &snapshot.ports {
        if let (CounterPort::Switch { switch, port }, true) = (p.port, p.max_error_rate > 0.0) {
            view.error_rates.insert((switch, port), p.max_error_rate);
        }
    }
    for iso in &snapshot.isolated {
        let Some((g, n)) = iso.link() else { continue };
        for end in link_ends(cabling, g, n) {
            if let CounterPort::Switch { switch, port } = end {
                view.isolation_reasons.insert((switch, port), iso.reason.clone());
            }
        }
    }
    view
}
