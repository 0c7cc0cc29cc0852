//! The southbound driver selected by `[driver]`, and the umad driver's counters.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric_mock::{MockConfig, MockFabric};
use fabric_routing::Guid2Lid;
use fabric_southbound::SouthboundDriver;
use fabric_topology::Fabric;
use fabric_umad::UmadStats;

use crate::config::{Config, DriverKind, MockDriverConfig};
use crate::telemetry::Telemetry;

use super::{check_fabric_fits, effective_max_lid, DaemonError};

/// The simulated fabric described by `[driver.mock]` (the topology file is read here).
pub fn build_mock(cfg: &MockDriverConfig) -> Result<MockFabric, DaemonError> {
    let fabric: Fabric = match &cfg.topology_file {
        Some(path) => {
            let parsed = fabric_topology::ibnet::read_file(path).map_err(|e| DaemonError::Config(e.to_string()))?;
            for w in &parsed.warnings {
                tracing::warn!(file = %path.display(), "{w}");
            }
            if parsed.fabric.num_switches() == 0 {
                // A daemon "ready" with nothing to route would claim a fabric it does not manage.
                return Err(DaemonError::Config(format!(
                    "driver.mock.topology_file {}: no switches (an empty or truncated topology file?)",
                    path.display()
                )));
            }
            parsed.fabric
        }
        None => {
            let d = (cfg.remove_links > 0 || cfg.remove_switches > 0).then_some(fabric_topology::gen::Degrade {
                remove_links: cfg.remove_links,
                remove_switches: cfg.remove_switches,
                seed: cfg.degrade_seed,
            });
            fabric_topology::gen::generate_str(cfg.generator.trim(), d.as_ref())
                .map_err(|e| DaemonError::Config(format!("driver.mock.generator {:?}: {e}", cfg.generator)))?
        }
    };
    Ok(MockFabric::new(fabric).with_config(mock_config(cfg))?)
}

/// The run-time behaviour of the simulated fabric.
pub fn mock_config(cfg: &MockDriverConfig) -> MockConfig {
    MockConfig {
        op_latency: Duration::from_micros(cfg.op_latency_us),
        error_rate: cfg.error_rate,
        seed: cfg.error_seed,
        max_parallel: cfg.max_parallel.max(1),
        max_retries: cfg.max_retries,
        // Checked by `Config::validate`.
        unreachable_switches: cfg
            .unreachable_switches
            .iter()
            .filter_map(|g| fabric_topology::parse_guid(g))
            .collect(),
        max_lid: cfg.max_lid,
        data_vls: cfg.data_vls,
        ..MockConfig::default()
    }
}

/// A driver and, for `mock`, the simulated fabric behind it.
pub type OpenedDriver = (Arc<dyn SouthboundDriver>, Option<Arc<MockFabric>>);

/// Opens the driver selected by `[driver] kind` (the mock fabric is built, the umad device
/// opened, the oob inventory read). The second value is the simulated fabric when the driver is
/// `mock` (it serves the packet-level RPCs Trace and VerifyReachability).
pub async fn open_driver(cfg: &Config) -> Result<OpenedDriver, DaemonError> {
    open_driver_counted(cfg, &cfg.daemon.state_dir, None)
        .await
        .map(|(d, _)| d)
}

/// [`open_driver`], and the umad driver itself when it is the one selected (for its SMP
/// counters). `fence` (`[ha]`, oob only): every agent request carries its epoch, every write
/// is checked against it.
pub(super) async fn open_driver_counted(
    cfg: &Config,
    state_path: &std::path::Path,
    fence: Option<Arc<fabric_southbound::Fence>>,
) -> Result<(OpenedDriver, Option<Arc<fabric_umad::UmadDriver>>), DaemonError> {
    match cfg.driver.kind {
        DriverKind::Mock => {
            let m = Arc::new(build_mock(&cfg.driver.mock)?);
            Ok(((m.clone(), Some(m)), None))
        }
        DriverKind::Umad => {
            let u = &cfg.driver.umad;
            // The M_Key in force (the state directory's, written by this manager or the
            // master it took over from with the same directory): the ports refuse any other.
            let state = crate::persist::StateDir::open(state_path)?;
            // A recorded 0 is "no key in force": the configured key (if any) is set at bring-up.
            let in_force = state.load_m_key()?.filter(|&k| k != 0);
            if let Some(k) = in_force {
                if k != u.m_key && u.m_key != 0 {
                    tracing::warn!(
                        "driver.umad.m_key differs from the M_Key in force on the ports (state directory \
                         file m-key): managing with the key in force; changing the key of a protected \
                         fabric is not supported (turn protection off with the old key first)"
                    );
                }
            }
            // Off the runtime: the open can block until the device (or the simulator) answers.
            let d = fabric_umad::UmadDriver::open_waiting_with_m_key(u.clone(), in_force)
                .await
                .map_err(|source| DaemonError::DriverOpen {
                    kind: "umad",
                    what: format!("driver.umad.device = {}", u.device.display()),
                    source,
                })?;
            if d.m_key() != 0 && in_force != Some(d.m_key()) {
                state.save_m_key(d.m_key())?;
            }
            let d = Arc::new(d);
            Ok(((d.clone(), None), Some(d)))
        }
        DriverKind::Oob => {
            let o = &cfg.driver.oob;
            let d = fabric_oob::OobDriver::open(o.clone()).map_err(|source| DaemonError::DriverOpen {
                kind: "oob",
                what: format!("driver.oob.inventory = {}", o.inventory.display()),
                source,
            })?;
            if let Some(f) = fence {
                d.set_fence(f);
            }
            Ok(((Arc::new(d), None), None))
        }
    }
}

/// At most how often the umad SMP counters are summarised at INFO (when they changed).
pub(super) const SMP_SUMMARY_EVERY: Duration = Duration::from_secs(15 * 60);

/// Which umad counter readings reach the log: every change at DEBUG; at INFO the first
/// change, then a summary at most every [`SMP_SUMMARY_EVERY`] when the counters changed since
/// the last one (a subnet manager's periodic SMPs and SMInfo polls change them every second).
#[derive(Debug, Default)]
pub(super) struct CounterLog {
    last: UmadStats,
    /// When and with what the last INFO summary was written.
    summarised: Option<(Instant, UmadStats)>,
}

/// What [`CounterLog::observe`] decides for one reading.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum CounterLine {
    /// Unchanged: nothing.
    Nothing,
    /// Changed: a DEBUG line.
    Debug,
    /// Changed and a summary is due: an INFO line, with the counters of the previous summary
    /// (zero at the first) and the time since it.
    Summary {
        previous: UmadStats,
        since: Option<Duration>,
    },
}

impl CounterLog {
    /// Decides the line of reading `s` at `now`.
    pub(super) fn observe(&mut self, s: UmadStats, now: Instant) -> CounterLine {
        if s == self.last {
            return CounterLine::Nothing;
        }
        self.last = s;
        match self.summarised {
            Some((at, _)) if now.duration_since(at) < SMP_SUMMARY_EVERY => CounterLine::Debug,
            prev => {
                self.summarised = Some((now, s));
                CounterLine::Summary {
                    previous: prev.map(|(_, p)| p).unwrap_or_default(),
                    since: prev.map(|(at, _)| now.duration_since(at)),
                }
            }
        }
    }
}

/// Reports the umad driver's SMP counters once a second, until the driver is dropped: to the
/// Prometheus counters (`fabricd_driver_smps_total`, `fabricd_driver_smp_retries_total`,
/// `fabricd_driver_smp_failures_total`) every second, and to the log as [`CounterLog`] decides
/// (sent, retries, failures, traps, SMInfo and SA requests answered): every change at DEBUG, a
/// summary with the increments at INFO at most every [`SMP_SUMMARY_EVERY`]. Retries under SMP
/// loss (discovery, LID assignment, LFT upload) are visible there.
pub(super) async fn report_umad_counters(d: std::sync::Weak<fabric_umad::UmadDriver>, telemetry: Telemetry) {
    let mut log = CounterLog::default();
    loop {
        let Some(drv) = d.upgrade() else { return };
        let s = drv.stats();
        let vl = fabric_southbound::SouthboundDriver::escape_vl_status(&*drv);
        drop(drv);
        telemetry.driver_smp_counters(s.smps_sent, s.retries, s.failures);
        telemetry.set_escape_vl_ready(vl.ready);
        match log.observe(s, Instant::now()) {
            CounterLine::Nothing => {}
            CounterLine::Debug => tracing::debug!(
                smps = s.smps_sent,
                retries = s.retries,
                failures = s.failures,
                traps = s.traps,
                sm_requests = s.sm_requests,
                sa_requests = s.sa_requests,
                "umad SMP counters"
            ),
            CounterLine::Summary { previous: p, since } => tracing::info!(
                smps = s.smps_sent,
                retries = s.retries,
                failures = s.failures,
                traps = s.traps,
                sm_requests = s.sm_requests,
                sa_requests = s.sa_requests,
                new_smps = s.smps_sent - p.smps_sent,
                new_retries = s.retries - p.retries,
                new_failures = s.failures - p.failures,
                since_s = since.map_or(0, |d| d.as_secs()),
                "umad SMP counters (summary at most every {} min; every change at debug level)",
                SMP_SUMMARY_EVERY.as_secs() / 60
            ),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// What `--check-config` verifies beyond the configuration text: the selected driver's files
/// (the mock topology file or generator, the umad device, the oob inventory) without opening
/// the fabric. Returns a one-line description of the driver on success.
pub fn check_driver(cfg: &Config) -> Result<String, DaemonError> {
    match cfg.driver.kind {
        DriverKind::Mock => {
            let m = build_mock(&cfg.driver.mock)?;
            let f = m.cabling();
            // The fabric is known: what the start would fail on (LIDs, engine) is checked too.
            check_fabric_fits(cfg, f, &Guid2Lid::new(), effective_max_lid(cfg, m.caps().max_lid))?;
            Ok(format!(
                "mock, {} switches, {} end ports",
                f.num_switches(),
                f.num_end_ports()
            ))
        }
        DriverKind::Umad => {
            let dev = &cfg.driver.umad.device;
            let meta = std::fs::metadata(dev).map_err(|source| DaemonError::Io {
                what: "driver.umad.device: cannot access",
                path: dev.display().to_string(),
                source,
            })?;
            use std::os::unix::fs::FileTypeExt;
            if !meta.file_type().is_char_device() {
                return Err(DaemonError::Config(format!(
                    "driver.umad.device: {} is not a character device (expected /dev/infiniband/umadN)",
                    dev.display()
                )));
            }
            Ok(format!("umad, device {}", dev.display()))
        }
        DriverKind::Oob => {
            let inv = fabric_oob::Inventory::read_file(&cfg.driver.oob.inventory)
                .map_err(|e| DaemonError::Config(format!("driver.oob.inventory: {e}")))?;
            Ok(format!(
                "oob, {} agents in {}",
                inv.entries.len(),
                cfg.driver.oob.inventory.display()
            ))
        }
    }
}

#[cfg(test)]
mod counter_log_tests {
    use super::*;

    fn stats(smps: u64) -> UmadStats {
        UmadStats {
            smps_sent: smps,
            ..UmadStats::default()
        }
    }

    #[test]
    fn changes_every_second_give_one_info_summary_per_period() {
        let t0 = Instant::now();
        let mut log = CounterLog::default();
        assert_eq!(log.observe(UmadStats::default(), t0), CounterLine::Nothing);
        assert_eq!(
            log.observe(stats(10), t0),
            CounterLine::Summary {
                previous: UmadStats::default(),
                since: None
            }
        );
        // A subnet manager's polls change the counters every second: DEBUG only.
        let mut infos = 0;
        for sec in 1..=(2 * SMP_SUMMARY_EVERY.as_secs()) {
            match log.observe(stats(10 + sec), t0 + Duration::from_secs(sec)) {
                CounterLine::Summary { previous, since } => {
                    infos += 1;
                    assert_eq!(since, Some(SMP_SUMMARY_EVERY));
                    assert!(previous.smps_sent < 10 + sec);
                }
                CounterLine::Debug => {}
                CounterLine::Nothing => panic!("the counters changed at {sec} s"),
            }
        }
        assert_eq!(infos, 2);
        // Unchanged counters: nothing, even after the period.
        let later = t0 + 3 * SMP_SUMMARY_EVERY;
        let s = stats(10 + 2 * SMP_SUMMARY_EVERY.as_secs());
        assert_eq!(log.observe(s, later), CounterLine::Nothing);
    }
}
