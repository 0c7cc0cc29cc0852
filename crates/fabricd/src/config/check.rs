//! The semantic checks of a configuration that parsed (ranges, GUIDs, addresses, the keys
//! that need each other), reported as (key path, reason) pairs.

use std::net::SocketAddr;
use std::str::FromStr;

use fabric_topology::parse_guid;

use super::{Config, DriverKind, MAX_ROUTING_THREADS, MOCK_MAX_LID_LIMIT};

impl Config {
    /// Semantic checks: (key path, reason) for every bad value.
    pub(super) fn validate(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = Vec::new();
        v.extend(self.slurm.validate());
        let mut bad = |p: &str, m: String| v.push((p.to_string(), m));
        if self.daemon.state_dir.as_os_str().is_empty() {
            bad("daemon.state_dir", "must not be empty".into());
        }
        if let Err(e) = tracing_subscriber::EnvFilter::try_new(&self.log.level) {
            bad("log.level", format!("invalid filter {:?}: {e}", self.log.level));
        }
        if self.grpc.socket.as_os_str().is_empty() {
            bad("grpc.socket", "must not be empty".into());
        }
        if let Err(m) = self.grpc.socket_mode_bits() {
            bad("grpc.socket_mode", m);
        }
        if self.grpc.max_connections == 0 {
            bad("grpc.max_connections", "must be at least 1".into());
        }
        if self.grpc.idle_timeout_s == 0 {
            bad("grpc.idle_timeout_s", "must be at least 1 second".into());
        }
        if self.grpc.max_request_bytes < 4096 || self.grpc.max_request_bytes > fabric_proto::MAX_MESSAGE_BYTES as u64 {
            bad(
                "grpc.max_request_bytes",
                format!(
                    "{} is outside 4096..={} bytes",
                    self.grpc.max_request_bytes,
                    fabric_proto::MAX_MESSAGE_BYTES
                ),
            );
        }
        let g = &self.grpc;
        if !g.tcp_listen.is_empty() {
            match g.tcp_listen.parse::<SocketAddr>() {
                Err(e) => bad("grpc.tcp_listen", format!("{:?} is not host:port: {e}", g.tcp_listen)),
                Ok(a) if !a.ip().is_loopback() && !g.tcp_allow_remote && !g.tls_enabled() => bad(
                    "grpc.tcp_listen",
                    format!(
                        "{a} is not a loopback address and the listener has no TLS: set grpc.tls_cert and \
                         grpc.tls_key, or grpc.tcp_allow_remote = true behind a TLS proxy"
                    ),
                ),
                Ok(_) => {}
            }
        }
        for (key, p) in [
            ("grpc.tls_cert", &g.tls_cert),
            ("grpc.tls_key", &g.tls_key),
            ("grpc.tls_client_ca", &g.tls_client_ca),
        ] {
            if p.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
                bad(key, "must not be empty (remove the key to turn TLS off)".into());
            }
        }
        match (&g.tls_cert, &g.tls_key) {
            (Some(_), None) => bad(
                "grpc.tls_cert",
                "needs grpc.tls_key (the private key of the certificate)".into(),
            ),
            (None, Some(_)) => bad(
                "grpc.tls_key",
                "needs grpc.tls_cert (the certificate of the key)".into(),
            ),
            (Some(_), Some(_)) if g.tcp_listen.is_empty() => bad(
                "grpc.tls_cert",
                "TLS applies to the TCP listener: set grpc.tcp_listen (the Unix socket is plaintext; its file \
                 permissions are its access control)"
                    .into(),
            ),
            _ => {}
        }
        if g.tls_client_ca.is_some() && !g.tls_enabled() {
            bad(
                "grpc.tls_client_ca",
                "client certificates need TLS: set grpc.tls_cert and grpc.tls_key".into(),
            );
        }
        let m = &self.driver.mock;
        if self.driver.kind == DriverKind::Mock {
            if m.topology_file.is_none() && m.generator.trim().is_empty() {
                bad(
                    "driver.mock.generator",
                    "set a generator or driver.mock.topology_file".into(),
                );
            }
            if m.topology_file.is_none() && !m.generator.trim().is_empty() {
                if let Err(e) = check_generator(m.generator.trim()) {
                    bad("driver.mock.generator", format!("{:?}: {e}", m.generator));
                }
            }
            if !(0.0..=1.0).contains(&m.error_rate) {
                bad("driver.mock.error_rate", format!("{} is not in [0, 1]", m.error_rate));
            }
            if m.max_parallel == 0 {
                bad("driver.mock.max_parallel", "must be at least 1".into());
            }
            if !(1..=MOCK_MAX_LID_LIMIT).contains(&m.max_lid) {
                bad(
                    "driver.mock.max_lid",
                    format!("{:#x} is not in 1..={MOCK_MAX_LID_LIMIT:#x}", m.max_lid),
                );
            }
            if !(1..=15).contains(&m.data_vls) {
                bad("driver.mock.data_vls", format!("{} is not in 1..=15", m.data_vls));
            }
            for g in &m.unreachable_switches {
                if fabric_topology::parse_guid(g).is_none() {
                    bad(
                        "driver.mock.unreachable_switches",
                        format!("{g:?} is not a GUID (0x followed by hex digits)"),
                    );
                }
            }
        }
        if self.driver.kind == DriverKind::Umad {
            if self.driver.umad.device.as_os_str().is_empty() {
                bad("driver.umad.device", "must not be empty".into());
            }
            if let Err(e) = self.driver.umad.validate() {
                bad("driver.umad", e);
            }
        }
        if self.driver.kind == DriverKind::Oob {
            if self.driver.oob.inventory.as_os_str().is_empty() {
                bad(
                    "driver.oob.inventory",
                    "required with driver.kind = \"oob\" (the agent inventory file)".into(),
                );
            }
            if let Err(e) = self.driver.oob.validate() {
                bad("driver.oob", e.to_string());
            }
        }
        if let Err(e) = self.engine_kind() {
            bad("routing.engine", e);
        }
        if self.routing.threads > MAX_ROUTING_THREADS {
            bad(
                "routing.threads",
                format!(
                    "{} is too many (at most {MAX_ROUTING_THREADS}; 0 = one per core): each thread takes a \
                     stack and the routing is CPU-bound, so threads beyond the cores only stall the machine",
                    self.routing.threads
                ),
            );
        }
        if self.routing.lmc > 7 {
            bad(
                "routing.lmc",
                format!("{} is not supported (0..=7, InfiniBand's LMC)", self.routing.lmc),
            );
        } else if let Some(why) = self
            .engine_kind()
            .ok()
            .and_then(|k| super::lmc::layers_misfit(k, self.routing.lmc))
        {
            bad("routing.lmc", why);
        }
        for (i, r) in self.routing.roots.iter().enumerate() {
            if parse_guid(r).is_none() {
                bad(&format!("routing.roots.{i}"), format!("{r:?} is not a GUID"));
            }
        }
        for k in self.routing.roles.keys() {
            if parse_guid(k).is_none() {
                bad(&format!("routing.roles.{k}"), format!("{k:?} is not a GUID"));
            }
        }
        let u = &self.update;
        for (key, v) in [
            ("update.unpath_deadline_ms", u.unpath_deadline_ms),
            ("update.repath_deadline_ms", u.repath_deadline_ms),
        ] {
            if v == 0 {
                bad(key, "must be at least 1 ms".into());
            }
        }
        if u.coalesce_max_ms < u.coalesce_ms {
            bad(
                "update.coalesce_max_ms",
                format!("{} is below coalesce_ms = {}", u.coalesce_max_ms, u.coalesce_ms),
            );
        }
        if u.upload_parallelism == 0 {
            bad("update.upload_parallelism", "must be at least 1".into());
        }
        if self.metrics.random_perms > 100_000 {
            bad(
                "metrics.random_perms",
                format!("{} is too many (at most 100000)", self.metrics.random_perms),
            );
        }
        if !self.prometheus.listen.is_empty() {
            match self.prometheus.listen.parse::<SocketAddr>() {
                Err(e) => bad(
                    "prometheus.listen",
                    format!("{:?} is not host:port: {e}", self.prometheus.listen),
                ),
                Ok(a) if !a.ip().is_loopback() && !self.prometheus.allow_remote => bad(
                    "prometheus.listen",
                    format!("{a} is not a loopback address; set prometheus.allow_remote = true"),
                ),
                Ok(_) => {}
            }
        }
        v.extend(self.health.check());
        v.extend(self.ha.check(self.driver.kind));
        v
    }
}

/// Parses (without generating) a generator notation: a fat-tree one, or a direct topology
/// (`SLIMFLY`, `DRAGONFLY`, `HYPERX`, `RRG`: `fabric_topology::gen::direct`) by its keyword.
fn check_generator(spec: &str) -> Result<(), fabric_topology::gen::GenError> {
    use fabric_topology::gen::{direct::DIRECT_KINDS, DirectSpec, PgftSpec};
    let word: String = spec.chars().take_while(char::is_ascii_alphabetic).collect();
    if DIRECT_KINDS.iter().any(|k| k.eq_ignore_ascii_case(&word)) {
        DirectSpec::from_str(spec).map(drop)
    } else {
        PgftSpec::from_str(spec).map(drop)
    }
}
