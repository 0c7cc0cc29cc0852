//! Daemon configuration: TOML, every key documented in `config/fabricd.toml`.
//!
//! [`Config::parse`] is a pure function from text to a validated [`Config`] that reports **every**
//! problem at once, each with its file, line and key path (`file:line: key.path: reason`):
//! syntax errors, unknown keys (`deny_unknown_fields`), wrong types and out-of-range values.
//!
//! Which keys a `SIGHUP` reload applies at run time is decided by [`Config::reload_diff`]; the
//! others need a restart and are reported as such.//!
//! `parse` reads the text, `check` holds the semantic checks, `reload` what a `SIGHUP` reload
//! applies; this module holds the keys, their defaults and the error types.

mod check;
mod ha;
mod health;
mod lmc;
mod parse;
mod reload;

pub use ha::{host_name, HaConfig, DEFAULT_HA_KEY_PREFIX, DEFAULT_HA_LEASE_TTL_S, DEFAULT_HA_REQUEST_TIMEOUT_MS};
pub use health::{HealthAction, HealthConfig};

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use fabric_routing::EngineKind;
use serde::{Deserialize, Serialize};

/// Most threads `routing.threads` may ask for.
pub const MAX_ROUTING_THREADS: usize = 1024;

/// Highest `driver.mock.max_lid`: 24-bit addresses (as the `oob` driver's widest).
pub const MOCK_MAX_LID_LIMIT: u32 = 0xFF_FFFF;

/// The whole configuration file.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub daemon: DaemonConfig,
    pub log: LogConfig,
    pub grpc: GrpcConfig,
    pub driver: DriverConfig,
    pub routing: RoutingConfig,
    pub update: UpdateConfig,
    pub fault_injection: FaultInjectionConfig,
    pub metrics: MetricsConfig,
    pub prometheus: PrometheusConfig,
    pub partitions: PartitionsConfig,
    pub multicast: MulticastConfig,
    pub health: HealthConfig,
    pub slurm: crate::slurm::SlurmConfig,
    /// `[ha]`: leader election and shared state on etcd (oob driver only; empty: off).
    pub ha: HaConfig,
}

/// `[daemon]`: where state lives.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct DaemonConfig {
    /// State directory (LID assignments, job mappings, virtual faults). Overridden by
    /// `--state-dir`.
    pub state_dir: PathBuf,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            state_dir: PathBuf::from("/var/lib/fabricd"),
        }
    }
}

/// Log output format.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Plain text lines (for journald).
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// `[log]`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// `tracing` filter directive (`info`, `fabricd=debug,info`, ...). Reloadable.
    pub level: String,
    pub format: LogFormat,
    /// Prefix lines with a timestamp (journald adds its own; turn off under systemd).
    pub timestamps: bool,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: "info".into(),
            format: LogFormat::Text,
            timestamps: true,
        }
    }
}

/// `[grpc]`: the northbound API listeners.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct GrpcConfig {
    /// Unix socket path. Overridden by `--socket`.
    pub socket: PathBuf,
    /// Octal permission bits of the socket file (the socket's group gets access).
    pub socket_mode: String,
    /// Optional TCP listener (`host:port`); empty = off. Plaintext unless `tls_cert` and
    /// `tls_key` are set.
    pub tcp_listen: String,
    /// Allow a *plaintext* `tcp_listen` on a non-loopback address (only behind a TLS proxy).
    /// Not needed with TLS.
    pub tcp_allow_remote: bool,
    /// PEM certificate chain (leaf first) of the TCP listener; with `tls_key`, the listener
    /// serves TLS. Needs a restart.
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of `tls_cert`. Needs a restart.
    pub tls_key: Option<PathBuf>,
    /// PEM CA certificate(s): when set, TCP clients must present a certificate signed by one of
    /// them (mutual TLS). Needs `tls_cert` and `tls_key`. Needs a restart.
    pub tls_client_ca: Option<PathBuf>,
    /// Most client connections served at once (Unix socket and TCP listener together); more
    /// are closed at once and logged (rate-limited WARN). Needs a restart.
    pub max_connections: u32,
    /// A connection from which nothing arrived for this long is closed, seconds. Live clients
    /// stay: the daemon pings every third of it and their answers count. Needs a restart.
    pub idle_timeout_s: u64,
    /// Largest request message accepted, bytes (larger ones: `OUT_OF_RANGE`, naming the
    /// limit). Needs a restart.
    pub max_request_bytes: u64,
}

/// Default of `grpc.max_connections`.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 128;
/// Default of `grpc.idle_timeout_s`.
pub const DEFAULT_IDLE_TIMEOUT_S: u64 = 60;
/// Default of `grpc.max_request_bytes` (16 MiB: a job mapping of 10⁵ end ports by name is a
/// few MB).
pub const DEFAULT_MAX_REQUEST_BYTES: u64 = 16 << 20;

impl Default for GrpcConfig {
    fn default() -> Self {
        GrpcConfig {
            socket: PathBuf::from("/run/fabricd/fabricd.sock"),
            socket_mode: "0660".into(),
            tcp_listen: String::new(),
            tcp_allow_remote: false,
            tls_cert: None,
            tls_key: None,
            tls_client_ca: None,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            idle_timeout_s: DEFAULT_IDLE_TIMEOUT_S,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
        }
    }
}

/// Southbound driver kinds.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DriverKind {
    /// Built-in simulated fabric.
    #[default]
    Mock,
    /// InfiniBand subnet manager over the kernel user-MAD interface (`[driver.umad]`).
    Umad,
    /// Out-of-band management agents, one per switch (`[driver.oob]`).
    Oob,
}

impl DriverKind {
    pub fn name(self) -> &'static str {
        match self {
            DriverKind::Mock => "mock",
            DriverKind::Umad => "umad",
            DriverKind::Oob => "oob",
        }
    }
}

/// `[driver]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct DriverConfig {
    pub kind: DriverKind,
    pub mock: MockDriverConfig,
    /// `[driver.umad]`: the `umad` driver's own configuration (used when `kind = "umad"`).
    pub umad: fabric_umad::UmadConfig,
    /// `[driver.oob]`: the `oob` driver's own configuration (used when `kind = "oob"`;
    /// `inventory` is then required).
    pub oob: fabric_oob::OobConfig,
}

/// `[driver.mock]`: the built-in simulated fabric.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct MockDriverConfig {
    /// Generator notation (`PGFT(...)`, `XGFT(...)`, `KARY(k,n)`, `QFT(...)`), used when
    /// `topology_file` is empty.
    pub generator: String,
    /// ibnetdiscover / ibsim topology file; when set, `generator` is ignored.
    pub topology_file: Option<PathBuf>,
    /// Degrade the generated fabric: inter-switch cables removed at random.
    pub remove_links: usize,
    /// Degrade the generated fabric: non-leaf switches removed at random.
    pub remove_switches: usize,
    /// Seed of the degradation.
    pub degrade_seed: u64,
    /// Latency of one management operation, microseconds. Reloadable.
    pub op_latency_us: u64,
    /// Probability that one LFT block write fails transiently. Reloadable.
    pub error_rate: f64,
    /// Seed of the error draws. Reloadable.
    pub error_seed: u64,
    /// Block writes in flight within one batch. Reloadable.
    pub max_parallel: usize,
    /// Driver retries of one failed block write. Reloadable.
    pub max_retries: u32,
    /// Switch GUIDs (`0x...`) whose LFT block writes fail as unreachable while the switch stays
    /// up (the partial-upload drill). Reloadable.
    pub unreachable_switches: Vec<String>,
    /// Highest unicast address of the simulated fabric: InfiniBand's `0xBFFF` by default, up
    /// to `0xFFFFFF` to simulate a fabric with 24-bit addresses (as the `oob` driver's).
    pub max_lid: u32,
    /// Data VLs (VLCap) of every simulated port (1..=15; 8 by default): a VL-layered routing
    /// (dfsssp) needing more is refused. Changing it needs a restart.
    pub data_vls: u8,
}

impl Default for MockDriverConfig {
    fn default() -> Self {
        MockDriverConfig {
            generator: "PGFT(2;18,36;1,18;1,1)".into(),
            topology_file: None,
            remove_links: 0,
            remove_switches: 0,
            degrade_seed: 1,
            op_latency_us: 0,
            error_rate: 0.0,
            error_seed: 0,
            max_parallel: 64,
            max_retries: 3,
            unreachable_switches: Vec::new(),
            max_lid: fabric_mock::IB_MAX_UNICAST_LID,
            data_vls: 8,
        }
    }
}

/// Configured role of a switch (overrides ranking detection).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RoleName {
    Leaf,
    Spine,
    Root,
}

/// `[routing]`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct RoutingConfig {
    /// Engine of the base LIDs: `dmodc`, `dmodk`, `updown`, `updown-random`, … `layered:K[:SEED]`
    /// (needs `lmc` with `2^lmc − 1 ≥ K`). Reloadable (a change forces a reroute).
    pub engine: String,
    /// Seed of `updown-random`.
    pub seed: u64,
    /// `2^lmc` LIDs per end port (0..=7): 0 = one LID, 1 = base + escape LID, ≥ 2 = `2^lmc − 1`
    /// layer LIDs (the routes of `layered:K` on offsets `0..K`, the other engines' routes
    /// repeated) + the escape LID as the last offset.
    pub lmc: u8,
    /// Highest LID to assign (0 = what the driver supports).
    pub max_lid: u32,
    /// Top switches (GUIDs); when non-empty ranking goes downward from them.
    pub roots: Vec<String>,
    /// OpenSM `root_guid_file` (one GUID per line), added to `roots`.
    pub roots_file: Option<PathBuf>,
    /// Roles by switch GUID: `{ "0x..." = "leaf" | "spine" | "root" }`.
    pub roles: std::collections::BTreeMap<String, RoleName>,
    /// Threads of the routing pool (0 = one per core; at most 1024).
    pub threads: usize,
    /// Also check deadlock freedom (CDG of both LID sets) of every new generation (logs a
    /// cycle). The validity check and its Up*/Down* fallback run always. Reloadable.
    pub validate: bool,
    /// Route the base LIDs on node ids re-indexed by job (Gdmodc/Gdmodk); job mapping changes
    /// start a generation. Reloadable (a change forces a reroute).
    pub job_aware: bool,
    /// With no LID assignment in the state directory, start from the LIDs the fabric already
    /// carries (set by another subnet manager) where they fit the plan.
    pub adopt_lids: bool,
    /// Route a generation incrementally from the installed one (Dmodc without job-aware
    /// routing): only the LFT rows whose inputs changed are recomputed, with the same result as
    /// a full routing. `false` routes every generation in full. Reloadable.
    pub incremental: bool,
    /// `auto` (the generation's ranking decides), `fat-tree` or `any` (topology-agnostic mode:
    /// base LIDs routed by Up*/Down*); see [`crate::topology_mode`]. Reloadable (a change
    /// forces a reroute).
    pub topology: crate::topology_mode::TopologySetting,
}

impl Default for RoutingConfig {
    fn default() -> Self {
        RoutingConfig {
            engine: "dmodc".into(),
            seed: 1,
            lmc: 1,
            max_lid: 0,
            roots: Vec::new(),
            roots_file: None,
            roles: Default::default(),
            threads: 0,
            validate: false,
            job_aware: false,
            adopt_lids: true,
            incremental: true,
            topology: crate::topology_mode::TopologySetting::Auto,
        }
    }
}

/// `[update]`: the event loop and the LFT upload. Reloadable.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct UpdateConfig {
    /// Quiet time after the last fault before a generation starts, ms.
    pub coalesce_ms: u64,
    /// Longest a fault waits for its generation to start, ms (bounds a storm).
    pub coalesce_max_ms: u64,
    /// LFT blocks per driver call; 0: the driver's choice ([`UpdateConfig::batch_blocks`]).
    pub upload_batch_blocks: usize,
    /// Driver calls in flight at once.
    pub upload_parallelism: usize,
    /// Retries of a failed driver call (after the driver's own retries).
    pub upload_retries: u32,
    /// Pause before retrying a failed driver call, ms (doubles each attempt).
    pub retry_backoff_ms: u64,
    /// Pause before retrying a generation that failed, ms.
    pub failed_generation_backoff_ms: u64,
    /// How many times in a row a computation may be superseded by newer faults before one is
    /// installed anyway (bounds starvation under flapping links).
    pub max_superseded: u32,
    /// SIGTERM: how long to let a running upload finish, s.
    pub shutdown_timeout_s: u64,
    /// Install generations with the five-phase update (LMC 1); `false`: direct upload (no
    /// per-flow consistency; for comparison and emergencies).
    pub five_phase: bool,
    /// Five-phase update: how long subscribers have to ack an Unpath notice, ms.
    pub unpath_deadline_ms: u64,
    /// Five-phase update: how long subscribers have to ack a Repath notice, ms.
    pub repath_deadline_ms: u64,
    /// Five-phase update: `proceed` (report the subscribers that missed a deadline) or `abort`
    /// (a missed Unpath deadline aborts the generation; the previous routing stays).
    pub missed_ack_policy: fabric_update::DeadlinePolicy,
}

impl UpdateConfig {
    /// The batch used when `upload_batch_blocks` is 0 and the driver has no preference.
    pub const DEFAULT_BATCH_BLOCKS: usize = 256;

    /// LFT blocks per driver call: `upload_batch_blocks`, or when it is 0 the driver's
    /// preference (`lft_blocks_per_call`: the oob driver's 2 048 blocks per request), else
    /// [`UpdateConfig::DEFAULT_BATCH_BLOCKS`].
    pub fn batch_blocks(&self, driver_per_call: Option<usize>) -> usize {
        match self.upload_batch_blocks {
            0 => driver_per_call.filter(|&n| n > 0).unwrap_or(Self::DEFAULT_BATCH_BLOCKS),
            n => n,
        }
    }
}

impl Default for UpdateConfig {
    fn default() -> Self {
        UpdateConfig {
            coalesce_ms: 50,
            coalesce_max_ms: 500,
            upload_batch_blocks: 0,
            upload_parallelism: 4,
            upload_retries: 2,
            retry_backoff_ms: 20,
            failed_generation_backoff_ms: 1000,
            max_superseded: 3,
            shutdown_timeout_s: 30,
            five_phase: true,
            unpath_deadline_ms: 5000,
            repath_deadline_ms: 5000,
            missed_ack_policy: fabric_update::DeadlinePolicy::Proceed,
        }
    }
}

impl UpdateConfig {
    pub fn coalesce(&self) -> Duration {
        Duration::from_millis(self.coalesce_ms)
    }
    pub fn coalesce_max(&self) -> Duration {
        Duration::from_millis(self.coalesce_max_ms)
    }
    /// Settings of the five-phase update protocol (`dual_lids`: LMC 1).
    pub fn protocol(&self, dual_lids: bool) -> fabric_update::ProtocolConfig {
        fabric_update::ProtocolConfig {
            unpath_deadline: Duration::from_millis(self.unpath_deadline_ms),
            repath_deadline: Duration::from_millis(self.repath_deadline_ms),
            policy: self.missed_ack_policy,
            dual_lids,
            ..fabric_update::ProtocolConfig::default()
        }
    }
}

/// `[fault_injection]`. Reloadable.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct FaultInjectionConfig {
    /// Accept `InjectFault` requests.
    pub enabled: bool,
    /// Accept physical faults (the driver takes the link/switch down) as well as virtual ones.
    pub allow_physical: bool,
}

/// `[metrics]`: congestion metrics served by `GetMetrics`. Reloadable.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// Random permutations for `mu_rp`.
    pub random_perms: usize,
    /// Seed of the random permutations.
    pub seed: u64,
    /// Compute `mu_sp` (all shift permutations).
    pub shifts: bool,
    /// Compute `mu_a2a` and `xi` (all-to-all).
    pub all_to_all: bool,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            random_perms: 40,
            seed: 1,
            shifts: true,
            all_to_all: true,
        }
    }
}

/// `[prometheus]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct PrometheusConfig {
    /// `host:port` of the `/metrics` endpoint; empty = off.
    pub listen: String,
    /// Allow a non-loopback address.
    pub allow_remote: bool,
}

/// `[partitions]`: P_Key partitions (OpenSM's `partitions.conf` syntax). Reloadable: a
/// `SIGHUP` re-reads the file and reprograms the P_Key tables without a restart.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct PartitionsConfig {
    /// The partitions file; unset: OpenSM's default, `Default=0x7fff, ipoib : ALL=full ;`.
    pub file: Option<PathBuf>,
    /// Also program the P_Key tables of the switch ports facing end ports and turn on their
    /// partition enforcement (inbound and outbound), as OpenSM does by default.
    pub enforce_switch_ports: bool,
}

impl Default for PartitionsConfig {
    fn default() -> Self {
        PartitionsConfig {
            file: None,
            enforce_switch_ports: true,
        }
    }
}

/// `[multicast]`: multicast groups (joined through the SA) and their forwarding tables.
/// Reloadable.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct MulticastConfig {
    /// Compute a spanning tree per multicast group and program the switches' multicast
    /// forwarding tables with every generation.
    pub enabled: bool,
}

impl Default for MulticastConfig {
    fn default() -> Self {
        MulticastConfig { enabled: true }
    }
}

/// One configuration problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigIssue {
    /// 1-based line, when the key is found in the text.
    pub line: Option<usize>,
    /// Dotted key path (empty for syntax errors).
    pub path: String,
    pub message: String,
}

/// Every problem found in a configuration file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    pub source_name: String,
    pub issues: Vec<ConfigIssue>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.issues.len();
        write!(
            f,
            "{}: {n} configuration error{}",
            self.source_name,
            if n == 1 { "" } else { "s" }
        )?;
        for i in &self.issues {
            write!(f, "\n  {}", self.source_name)?;
            if let Some(l) = i.line {
                write!(f, ":{l}")?;
            }
            if i.path.is_empty() {
                write!(f, ": {}", i.message)?;
            } else {
                write!(f, ": {}: {}", i.path, i.message)?;
            }
        }
        Ok(())
    }
}

/// The keys a `SIGHUP` reload changed, split by whether they apply at run time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReloadDiff {
    /// Changed keys applied at run time.
    pub applied: Vec<&'static str>,
    /// Changed keys that need a restart (the running value is kept).
    pub need_restart: Vec<&'static str>,
}

impl Config {
    /// The routing engine of the base LIDs.
    pub fn engine_kind(&self) -> Result<EngineKind, String> {
        let name = self.routing.engine.trim();
        let kind = EngineKind::from_str(name).map_err(|e| format!("{name:?}: {e}"))?;
        // The seeded engines take `routing.seed` unless the name carries one (`NAME:SEED`,
        // `layered:K:SEED`).
        let carries_seed = match kind {
            EngineKind::Layered { .. } => name.matches(':').count() >= 2,
            _ => name.contains(':'),
        };
        Ok(if carries_seed {
            kind
        } else {
            kind.with_seed(self.routing.seed)
        })
    }
}

impl GrpcConfig {
    /// Whether the TCP listener serves TLS (`tls_cert` and `tls_key` set).
    pub fn tls_enabled(&self) -> bool {
        self.tls_cert.is_some() && self.tls_key.is_some()
    }

    /// The TLS files of the TCP listener, `None` without TLS. Reading and checking them is
    /// [`fabric_proto::tls::ServerTlsFiles::load`] (at start and by `--check-config`; the
    /// configuration text itself is checked without touching files).
    pub fn tls_files(&self) -> Option<fabric_proto::tls::ServerTlsFiles> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(fabric_proto::tls::ServerTlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: self.tls_client_ca.clone(),
            }),
            _ => None,
        }
    }

    /// Permission bits of the socket file.
    pub fn socket_mode_bits(&self) -> Result<u32, String> {
        let s = self.socket_mode.trim();
        let digits = s.strip_prefix("0o").unwrap_or(s);
        match u32::from_str_radix(digits, 8) {
            Ok(m) if m <= 0o777 => Ok(m),
            Ok(m) => Err(format!("{m:o} has bits beyond 0777")),
            Err(_) => Err(format!("{s:?} is not an octal mode such as \"0660\"")),
        }
    }

    /// A warning when `socket_mode` lets every local user connect (the "other" write bit):
    /// any of them could then inject physical faults and change job mappings.
    pub fn socket_mode_warning(&self) -> Option<String> {
        let m = self.socket_mode_bits().ok()?;
        (m & 0o002 != 0).then(|| {
            format!(
                "grpc.socket_mode {m:04o} lets every local user connect to {} (fault injection, job mappings, \
                 reroutes): use 0660 and add the operators to the daemon's group",
                self.socket.display()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upload_batch_is_the_drivers_unless_configured() {
        let auto = Config::parse("", "t.toml").expect("defaults").update;
        assert_eq!(auto.upload_batch_blocks, 0);
        // oob: the blocks of one WriteLftBlocks request; mock and umad have no preference.
        assert_eq!(auto.batch_blocks(Some(2048)), 2048);
        assert_eq!(auto.batch_blocks(None), UpdateConfig::DEFAULT_BATCH_BLOCKS);
        let set = Config::parse("[update]\nupload_batch_blocks = 64\n", "t.toml")
            .expect("explicit batch")
            .update;
        assert_eq!(set.batch_blocks(Some(2048)), 64);
        assert_eq!(set.batch_blocks(None), 64);
    }

    #[test]
    fn empty_text_gives_defaults() {
        let c = Config::parse("", "t.toml").expect("empty config is valid");
        assert_eq!(c, Config::default());
        assert_eq!(c.grpc.socket, PathBuf::from("/run/fabricd/fabricd.sock"));
        assert_eq!(c.driver.mock.generator, "PGFT(2;18,36;1,18;1,1)");
        assert_eq!(c.grpc.socket_mode_bits(), Ok(0o660));
        assert!(!c.fault_injection.enabled);
    }

    #[test]
    fn a_world_connectable_socket_mode_is_warned_about_and_limits_are_checked() {
        let c = Config::parse("[grpc]\nsocket_mode = \"0777\"\n", "t.toml").unwrap();
        let w = c.grpc.socket_mode_warning().expect("0777 warns");
        assert!(w.contains("0777") && w.contains("every local user"), "{w}");
        assert_eq!(Config::default().grpc.socket_mode_warning(), None);
        let c = Config::parse("[grpc]\nsocket_mode = \"0770\"\n", "t.toml").unwrap();
        assert_eq!(c.grpc.socket_mode_warning(), None);
        let e = Config::parse(
            "[grpc]\nmax_connections = 0\nidle_timeout_s = 0\nmax_request_bytes = 10\n",
            "t.toml",
        )
        .unwrap_err()
        .to_string();
        for key in ["grpc.max_connections", "grpc.idle_timeout_s", "grpc.max_request_bytes"] {
            assert!(e.contains(key), "{key}: {e}");
        }
    }

    #[test]
    fn values_are_read() {
        let text = r#"
[log]
level = "debug"
format = "json"
[update]
coalesce_ms = 5
coalesce_max_ms = 40
[routing]
engine = "updown"
roots = ["0x10"]
roles = { "0x20" = "leaf" }
[fault_injection]
enabled = true
"#;
        let c = Config::parse(text, "t.toml").unwrap();
        assert_eq!(c.log.level, "debug");
        assert_eq!(c.log.format, LogFormat::Json);
        assert_eq!(c.update.coalesce(), Duration::from_millis(5));
        assert_eq!(c.engine_kind(), Ok(EngineKind::UpDown));
        assert_eq!(c.routing.roles.get("0x20"), Some(&RoleName::Leaf));
        assert!(c.fault_injection.enabled);
    }

    #[test]
    fn every_error_is_reported_with_line_and_key_path() {
        let text = "[log]\nlevel = \"info\"\nbogus = 1\n\n[update]\ncoalesce_ms = \"fast\"\nupload_parallelism = 0\n\n[nope]\nx = 1\n[routing]\nengine = \"frobnicate\"\nlmc = 9\n";
        let e = Config::parse(text, "bad.toml").unwrap_err();
        let got: Vec<(Option<usize>, &str)> = e.issues.iter().map(|i| (i.line, i.path.as_str())).collect();
        // Structural errors first (in serde's order), then value checks of what remained.
        assert!(got.contains(&(Some(3), "log.bogus")), "{got:?}");
        assert!(got.contains(&(Some(6), "update.coalesce_ms")), "{got:?}");
        assert!(got.contains(&(Some(9), "nope")), "{got:?}");
        assert!(got.contains(&(Some(12), "routing.engine")), "{got:?}");
        assert!(got.contains(&(Some(13), "routing.lmc")), "{got:?}");
        assert!(got.contains(&(Some(7), "update.upload_parallelism")), "{got:?}");
        assert_eq!(e.issues.len(), 6, "{e}");
        let text = e.to_string();
        assert!(text.starts_with("bad.toml: 6 configuration errors"), "{text}");
        assert!(text.contains("bad.toml:3: log.bogus: unknown field `bogus`"), "{text}");
    }

    #[test]
    fn syntax_error_names_the_line() {
        let e = Config::parse("[log]\nlevel = \"info\n", "s.toml").unwrap_err();
        assert_eq!(e.issues.len(), 1);
        assert_eq!(e.issues[0].line, Some(2), "{e}");
        // A key without a value at the end of the text (found by the fuzz target): words too.
        let e = Config::parse("[driver.mock]\nmax_parallel =", "s.toml").unwrap_err();
        assert_eq!(e.issues[0].line, Some(2), "{e}");
        assert!(!e.issues[0].message.is_empty(), "{e}");
    }

    #[test]
    fn value_checks() {
        let text = r#"
[grpc]
socket_mode = "0999"
tcp_listen = "10.1.2.3:50051"
[driver.mock]
generator = "PGFT(2;18"
error_rate = 1.5
[update]
coalesce_ms = 100
coalesce_max_ms = 10
[prometheus]
listen = "nonsense"
[routing]
roots = ["zz"]
"#;
        let e = Config::parse(text, "v.toml").unwrap_err();
        let paths: Vec<&str> = e.issues.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "grpc.socket_mode",
                "grpc.tcp_listen",
                "driver.mock.generator",
                "driver.mock.error_rate",
                "routing.roots.0",
                "update.coalesce_max_ms",
                "prometheus.listen"
            ],
            "{e}"
        );
        assert!(e.issues[1].message.contains("not a loopback address"), "{e}");
    }

    #[test]
    fn grpc_tls_keys_are_read_and_checked() {
        // TLS lets a non-loopback listener through without tcp_allow_remote.
        let text = "[grpc]\ntcp_listen = \"10.1.2.3:50051\"\ntls_cert = \"/etc/fabricd/tls/server.pem\"\n\
                    tls_key = \"/etc/fabricd/tls/server.key\"\ntls_client_ca = \"/etc/fabricd/tls/clients-ca.pem\"\n";
        let c = Config::parse(text, "t.toml").unwrap_or_else(|e| panic!("{e}"));
        assert!(c.grpc.tls_enabled());
        let files = c.grpc.tls_files().expect("tls files");
        assert_eq!(files.key, PathBuf::from("/etc/fabricd/tls/server.key"));
        assert_eq!(files.client_ca, Some(PathBuf::from("/etc/fabricd/tls/clients-ca.pem")));
        // Plaintext remote listener with the explicit opt-in (proxy case) is still accepted.
        let c = Config::parse(
            "[grpc]\ntcp_listen = \"10.1.2.3:50051\"\ntcp_allow_remote = true\n",
            "t.toml",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(!c.grpc.tls_enabled() && c.grpc.tls_files().is_none());

        let issues = |text: &str| -> Vec<(Option<usize>, String)> {
            Config::parse(text, "t.toml")
                .map(|_| Vec::new())
                .unwrap_or_else(|e| e.issues.into_iter().map(|i| (i.line, i.path)).collect())
        };
        let one = |p: &str, l: usize| vec![(Some(l), p.to_string())];
        // Key without certificate, certificate without key.
        assert_eq!(
            issues("[grpc]\ntcp_listen = \"127.0.0.1:1\"\ntls_key = \"k.pem\"\n"),
            one("grpc.tls_key", 3)
        );
        assert_eq!(
            issues("[grpc]\ntcp_listen = \"127.0.0.1:1\"\ntls_cert = \"c.pem\"\n"),
            one("grpc.tls_cert", 3)
        );
        // Client CA without TLS.
        assert_eq!(
            issues("[grpc]\ntcp_listen = \"127.0.0.1:1\"\ntls_client_ca = \"ca.pem\"\n"),
            one("grpc.tls_client_ca", 3)
        );
        // TLS without a TCP listener.
        assert_eq!(
            issues("[grpc]\ntls_cert = \"c.pem\"\ntls_key = \"k.pem\"\n"),
            one("grpc.tls_cert", 2)
        );
        // Empty path.
        assert_eq!(
            issues("[grpc]\ntcp_listen = \"127.0.0.1:1\"\ntls_cert = \"\"\ntls_key = \"k.pem\"\n"),
            one("grpc.tls_cert", 3)
        );
        // A non-loopback plaintext listener still needs the opt-in, and the message says how.
        let e = Config::parse("[grpc]\ntcp_listen = \"0.0.0.0:50051\"\n", "t.toml").unwrap_err();
        assert_eq!(e.issues[0].path, "grpc.tcp_listen");
        assert!(e.issues[0].message.contains("grpc.tls_cert"), "{e}");

        // Every [grpc] key needs a restart and is named on its own.
        let old = Config::parse(text, "t.toml").unwrap_or_else(|e| panic!("{e}"));
        let mut new = old.clone();
        new.grpc.tls_cert = Some("/etc/fabricd/tls/new.pem".into());
        new.grpc.tls_client_ca = None;
        let d = old.reload_diff(&new);
        assert_eq!(d.need_restart, vec!["grpc.tls_cert", "grpc.tls_client_ca"]);
        assert!(d.applied.is_empty());
        assert_eq!(old.merge_reload(&new).grpc, old.grpc);
    }

    #[test]
    fn driver_tables_are_read_and_checked() {
        let text = "[driver]\nkind = \"umad\"\n[driver.umad]\ndevice = \"/dev/infiniband/umad1\"\nwindow = 8\n";
        let c = Config::parse(text, "u.toml").unwrap();
        assert_eq!(c.driver.kind, DriverKind::Umad);
        assert_eq!(c.driver.umad.device, PathBuf::from("/dev/infiniband/umad1"));
        assert_eq!(c.driver.umad.window, 8);
        assert_eq!(c.driver.umad.retries, fabric_umad::UmadConfig::default().retries);

        let text = "[driver]\nkind = \"oob\"\n[driver.oob]\ninventory = \"/etc/agents.inv\"\nrequest_timeout = \"750ms\"\nmax_lid = 65535\n";
        let c = Config::parse(text, "o.toml").unwrap();
        assert_eq!(c.driver.kind, DriverKind::Oob);
        assert_eq!(c.driver.oob.inventory, PathBuf::from("/etc/agents.inv"));
        assert_eq!(c.driver.oob.request_timeout, Duration::from_millis(750));
        assert_eq!(c.driver.oob.max_lid, 0xFFFF);

        // kind = "oob" without an inventory, a bad umad window (ignored: umad is not selected),
        // an unknown key in [driver.oob].
        let e = Config::parse("[driver]\nkind = \"oob\"\n", "o.toml").unwrap_err();
        assert_eq!(e.issues.len(), 1, "{e}");
        assert_eq!(e.issues[0].path, "driver.oob.inventory", "{e}");
        let e = Config::parse(
            "[driver]\nkind = \"umad\"\n[driver.umad]\nwindow = 0\nsm_priority = 99\n",
            "u.toml",
        )
        .unwrap_err();
        assert_eq!(e.issues.len(), 1, "{e}");
        assert_eq!(e.issues[0].path, "driver.umad", "{e}");
        assert!(e.issues[0].message.contains("window 0"), "{e}");
        let e = Config::parse("[driver.oob]\ninventory = \"x\"\nbogus = 1\n", "o.toml").unwrap_err();
        assert_eq!(e.issues[0].path, "driver.oob.bogus", "{e}");
        assert_eq!(e.issues[0].line, Some(3), "{e}");
        let e = Config::parse("[driver]\nkind = \"infiniband\"\n", "k.toml").unwrap_err();
        assert_eq!(e.issues[0].path, "driver.kind", "{e}");

        // Driver tables need a restart.
        let old = Config::default();
        let mut new = old.clone();
        new.driver.umad.window = 4;
        new.driver.oob.max_retries = 9;
        let d = old.reload_diff(&new);
        assert_eq!(d.need_restart, vec!["driver.umad", "driver.oob"]);
        assert_eq!(old.merge_reload(&new).driver, old.driver);
    }

    #[test]
    fn reload_splits_runtime_and_restart_keys() {
        let old = Config::default();
        let mut new = Config::default();
        new.log.level = "debug".into();
        new.update.coalesce_ms = 10;
        new.grpc.socket = "/tmp/x.sock".into();
        new.routing.lmc = 0;
        let d = old.reload_diff(&new);
        assert_eq!(d.applied, vec!["log.level", "update"]);
        assert_eq!(d.need_restart, vec!["grpc.socket", "routing.lmc"]);
        let merged = old.merge_reload(&new);
        assert_eq!(merged.log.level, "debug");
        assert_eq!(merged.update.coalesce_ms, 10);
        assert_eq!(merged.grpc.socket, old.grpc.socket);
        assert_eq!(merged.routing.lmc, 1);
    }

    fn key_paths(prefix: &str, v: &toml::Value, out: &mut std::collections::BTreeSet<String>) {
        if let toml::Value::Table(t) = v {
            for (k, v) in t {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                // Free-form maps (roles) are values, not key lists.
                if matches!(v, toml::Value::Table(_)) && p != "routing.roles" {
                    key_paths(&p, v, out);
                } else {
                    out.insert(p);
                }
            }
        }
    }

    #[test]
    fn shipped_config_documents_every_key_with_its_default() {
        let text = include_str!("../../../config/fabricd.toml");
        let mut shipped = std::collections::BTreeSet::new();
        key_paths("", &toml::Value::Table(text.parse().unwrap()), &mut shipped);
        let mut all = std::collections::BTreeSet::new();
        key_paths("", &toml::Value::try_from(Config::default()).unwrap(), &mut all);
        let missing: Vec<_> = all.difference(&shipped).collect();
        assert!(missing.is_empty(), "config/fabricd.toml does not list {missing:?}");
        // Optional keys are documented as comments.
        for k in [
            "topology_file",
            "roots_file",
            "tls_cert",
            "tls_key",
            "tls_client_ca",
            "tls_ca",
        ] {
            assert!(text.contains(&format!("# {k} = ")), "{k} is not documented");
        }
        // Same defaults, except what the sample deliberately changes for the simulator.
        let mut c = Config::parse(text, "config/fabricd.toml").unwrap();
        assert!(c.fault_injection.enabled && c.fault_injection.allow_physical);
        c.fault_injection = FaultInjectionConfig::default();
        // The oob inventory has no default (required with kind = "oob"); the sample shows a path.
        assert!(!c.driver.oob.inventory.as_os_str().is_empty());
        c.driver.oob.inventory = PathBuf::new();
        assert_eq!(c, Config::default());
    }

    #[test]
    fn production_config_is_umad_without_fault_injection() {
        // config/fabricd-production.toml: what deploy/install.sh installs as
        // /etc/fabricd/fabricd.toml (the simulator config above goes beside it).
        let text = include_str!("../../../config/fabricd-production.toml");
        let c = Config::parse(text, "config/fabricd-production.toml").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.driver.kind, DriverKind::Umad);
        assert!(!c.fault_injection.enabled && !c.fault_injection.allow_physical);
        assert_eq!(c.grpc.socket, PathBuf::from("/run/fabricd/fabricd.sock"));
        assert_eq!(c.daemon.state_dir, PathBuf::from("/var/lib/fabricd"));
        assert!(c.grpc.tcp_listen.is_empty(), "no TCP listener without TLS by default");
        // Every key it sets is one of the reference's (config/fabricd.toml).
        let mut keys = std::collections::BTreeSet::new();
        key_paths("", &toml::Value::Table(text.parse().unwrap()), &mut keys);
        let reference = include_str!("../../../config/fabricd.toml");
        let mut documented = std::collections::BTreeSet::new();
        key_paths("", &toml::Value::Table(reference.parse().unwrap()), &mut documented);
        let unknown: Vec<_> = keys.difference(&documented).collect();
        assert!(unknown.is_empty(), "not in config/fabricd.toml: {unknown:?}");
    }

    #[test]
    fn shipped_config_is_valid() {
        // The documented sample config of the repository (config/fabricd.toml).
        let text = include_str!("../../../config/fabricd.toml");
        let c = Config::parse(text, "config/fabricd.toml").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.driver.mock.generator, "PGFT(2;18,36;1,18;1,1)");
        assert_eq!(c.grpc.socket, PathBuf::from("/run/fabricd/fabricd.sock"));
    }
}
