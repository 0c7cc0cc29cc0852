//! `[ha]`: high availability of an out-of-band fabric (issue #20): two managers elect a leader
//! on an etcd lease, share their state in etcd and fence each other's writes by epoch.
//! Without `etcd_endpoints` nothing changes. Every key needs a restart.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::DriverKind;

/// Default of `ha.key_prefix`.
pub const DEFAULT_HA_KEY_PREFIX: &str = "/fabricd/default";
/// Default of `ha.lease_ttl_s`.
pub const DEFAULT_HA_LEASE_TTL_S: u64 = 5;
/// Default of `ha.request_timeout_ms`.
pub const DEFAULT_HA_REQUEST_TIMEOUT_MS: u64 = 2000;
/// Shortest lease (a keep-alive goes out every third of it).
pub const MIN_HA_LEASE_TTL_S: u64 = 2;
/// Longest lease: a dead leader is replaced only after it, so a long one is an outage.
pub const MAX_HA_LEASE_TTL_S: u64 = 300;

/// `[ha]`. Needs a restart.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct HaConfig {
    /// etcd client URLs (`http://host:2379`, `https://host:2379` or `host:2379`); empty: HA
    /// off (a single manager, nothing changes).
    pub etcd_endpoints: Vec<String>,
    /// Keys of this fabric in etcd: `<prefix>/leader`, `<prefix>/state/<file>`. Two fabrics
    /// sharing one etcd need two prefixes; the two managers of one fabric need the same.
    pub key_prefix: String,
    /// Lease TTL, seconds: a dead leader is replaced within it (plus one generation).
    pub lease_ttl_s: u64,
    /// This manager's name in the leader key and the status; empty: the host name.
    pub node_name: String,
    /// Where operators reach this manager (e.g. its gRPC TCP address), shown by the other one's
    /// status while this one leads; free text, may be empty.
    pub advertise: String,
    /// PEM CA certificate(s) of the etcd servers: TLS to etcd (`https://` endpoints).
    pub tls_ca: Option<PathBuf>,
    /// PEM client certificate for etcd (with `tls_key`; needs `tls_ca`).
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of `tls_cert`.
    pub tls_key: Option<PathBuf>,
    /// Longest wait for one etcd request, ms (below the lease TTL).
    pub request_timeout_ms: u64,
}

impl Default for HaConfig {
    fn default() -> Self {
        HaConfig {
            etcd_endpoints: Vec::new(),
            key_prefix: DEFAULT_HA_KEY_PREFIX.into(),
            lease_ttl_s: DEFAULT_HA_LEASE_TTL_S,
            node_name: String::new(),
            advertise: String::new(),
            tls_ca: None,
            tls_cert: None,
            tls_key: None,
            request_timeout_ms: DEFAULT_HA_REQUEST_TIMEOUT_MS,
        }
    }
}

/// The host name (`uname` node name), or `"fabricd"` when it is empty.
pub fn host_name() -> String {
    let u = rustix::system::uname();
    let n = u.nodename().to_string_lossy().trim().to_string();
    if n.is_empty() {
        "fabricd".into()
    } else {
        n
    }
}

fn bad_text(s: &str) -> bool {
    s.chars().any(|c| c.is_control() || c.is_whitespace())
}

/// Checks one endpoint: `[http://|https://]host:port`.
fn check_endpoint(e: &str) -> Result<(), String> {
    if e.trim().is_empty() {
        return Err("an endpoint is empty".into());
    }
    if bad_text(e) {
        return Err(format!("{e:?} contains white space or control characters"));
    }
    let rest = if let Some(r) = e.strip_prefix("http://") {
        r
    } else if let Some(r) = e.strip_prefix("https://") {
        r
    } else if e.contains("://") {
        return Err(format!("{e:?}: only http:// and https:// endpoints are supported"));
    } else {
        e
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let Some((host, port)) = rest.rsplit_once(':') else {
        return Err(format!("{e:?} has no port (host:port, e.g. \"http://10.0.0.1:2379\")"));
    };
    if host.is_empty() || host.contains('/') {
        return Err(format!("{e:?} is not host:port"));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(()),
        _ => Err(format!("{e:?}: {port:?} is not a port number")),
    }
}

impl HaConfig {
    /// Whether HA is on (`etcd_endpoints` set).
    pub fn enabled(&self) -> bool {
        !self.etcd_endpoints.is_empty()
    }

    /// `node_name`, or the host name when empty.
    pub fn effective_node_name(&self) -> String {
        if self.node_name.is_empty() {
            host_name()
        } else {
            self.node_name.clone()
        }
    }

    /// The lease TTL.
    pub fn lease_ttl(&self) -> Duration {
        Duration::from_secs(self.lease_ttl_s)
    }

    /// The etcd request timeout.
    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }

    /// Semantic checks: (key path, reason) for every bad value. `driver`: `[ha]` is refused
    /// with any driver but `oob`.
    pub(super) fn check(&self, driver: DriverKind) -> Vec<(String, String)> {
        let mut v = Vec::new();
        let mut bad = |p: &str, m: String| v.push((p.to_string(), m));
        if self.enabled() && driver != DriverKind::Oob {
            bad(
                "ha.etcd_endpoints",
                format!(
                    "driver.kind = \"{}\": InfiniBand managers elect through SMInfo; [ha] is for the oob driver",
                    driver.name()
                ),
            );
        }
        for e in &self.etcd_endpoints {
            if let Err(m) = check_endpoint(e) {
                bad("ha.etcd_endpoints", m);
            }
        }
        let p = &self.key_prefix;
        if !p.starts_with('/') || p.len() < 2 || p.ends_with('/') || bad_text(p) || p.contains("//") {
            bad(
                "ha.key_prefix",
                format!(
                    "{p:?} is not a key prefix such as \"/fabricd/default\" (starts with /, no trailing /, no spaces)"
                ),
            );
        }
        if !(MIN_HA_LEASE_TTL_S..=MAX_HA_LEASE_TTL_S).contains(&self.lease_ttl_s) {
            bad(
                "ha.lease_ttl_s",
                format!(
                    "{} is outside {MIN_HA_LEASE_TTL_S}..={MAX_HA_LEASE_TTL_S} seconds",
                    self.lease_ttl_s
                ),
            );
        }
        if self.node_name.len() > 253 || bad_text(&self.node_name) {
            bad(
                "ha.node_name",
                format!(
                    "{:?}: at most 253 characters, no spaces or control characters",
                    self.node_name
                ),
            );
        }
        if self.advertise.len() > 512 || self.advertise.chars().any(char::is_control) {
            bad("ha.advertise", "at most 512 characters, no control characters".into());
        }
        if self.request_timeout_ms < 100 || self.request_timeout_ms >= self.lease_ttl_s.saturating_mul(1000) {
            bad(
                "ha.request_timeout_ms",
                format!(
                    "{} is outside 100 ms..lease_ttl_s ({} s): a request that outlasts the lease cannot renew it",
                    self.request_timeout_ms, self.lease_ttl_s
                ),
            );
        }
        for (key, p) in [
            ("ha.tls_ca", &self.tls_ca),
            ("ha.tls_cert", &self.tls_cert),
            ("ha.tls_key", &self.tls_key),
        ] {
            if p.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
                bad(key, "must not be empty (remove the key to turn TLS off)".into());
            }
        }
        match (&self.tls_cert, &self.tls_key) {
            (Some(_), None) => bad(
                "ha.tls_cert",
                "needs ha.tls_key (the private key of the certificate)".into(),
            ),
            (None, Some(_)) => bad("ha.tls_key", "needs ha.tls_cert (the certificate of the key)".into()),
            _ => {}
        }
        if self.tls_cert.is_some() && self.tls_ca.is_none() {
            bad(
                "ha.tls_cert",
                "a client certificate needs TLS: set ha.tls_ca (the CA of the etcd servers)".into(),
            );
        }
        if self.tls_ca.is_some() {
            for e in self.etcd_endpoints.iter().filter(|e| e.starts_with("http://")) {
                bad(
                    "ha.etcd_endpoints",
                    format!("{e:?} is plaintext but ha.tls_ca is set: use https://"),
                );
            }
        } else {
            for e in self.etcd_endpoints.iter().filter(|e| e.starts_with("https://")) {
                bad(
                    "ha.etcd_endpoints",
                    format!("{e:?} needs ha.tls_ca (the CA that signed the etcd servers' certificates)"),
                );
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::*;

    const OOB: &str = "[driver]\nkind = \"oob\"\n[driver.oob]\ninventory = \"/etc/fabricd/agents.toml\"\n";

    fn parse(extra: &str) -> Result<Config, String> {
        Config::parse(&format!("{OOB}{extra}"), "t.toml").map_err(|e| e.to_string())
    }

    #[test]
    fn without_endpoints_ha_is_off_and_the_defaults_hold() {
        let c = Config::parse("", "t.toml").unwrap();
        assert!(!c.ha.enabled());
        assert_eq!(c.ha.key_prefix, "/fabricd/default");
        assert_eq!(c.ha.lease_ttl(), Duration::from_secs(5));
        assert_eq!(c.ha.request_timeout(), Duration::from_millis(2000));
        assert!(!c.ha.effective_node_name().is_empty());
        // [ha] without endpoints is accepted with any driver.
        Config::parse("[ha]\nlease_ttl_s = 10\n", "t.toml").unwrap();
    }

    #[test]
    fn a_full_section_is_read() {
        let c = parse(
            "[ha]\netcd_endpoints = [\"http://127.0.0.1:2379\", \"10.0.0.2:2379\"]\nkey_prefix = \"/fabricd/site-a\"\n\
             lease_ttl_s = 3\nnode_name = \"mgmt1\"\nadvertise = \"mgmt1:50051\"\nrequest_timeout_ms = 500\n",
        )
        .unwrap();
        assert!(c.ha.enabled());
        assert_eq!(c.ha.effective_node_name(), "mgmt1");
        assert_eq!(c.ha.lease_ttl_s, 3);
        let c = parse(
            "[ha]\netcd_endpoints = [\"https://etcd1:2379\"]\ntls_ca = \"/ca.pem\"\ntls_cert = \"/c.pem\"\ntls_key = \"/k.pem\"\n",
        )
        .unwrap();
        assert_eq!(c.ha.tls_ca.as_deref(), Some(std::path::Path::new("/ca.pem")));
    }

    #[test]
    fn ha_is_refused_with_an_infiniband_driver() {
        for kind in ["mock", "umad"] {
            let e = Config::parse(
                &format!("[driver]\nkind = \"{kind}\"\n[ha]\netcd_endpoints = [\"127.0.0.1:2379\"]\n"),
                "t.toml",
            )
            .unwrap_err()
            .to_string();
            assert!(
                e.contains("ha.etcd_endpoints")
                    && e.contains("InfiniBand managers elect through SMInfo; [ha] is for the oob driver"),
                "{e}"
            );
        }
    }

    #[test]
    fn every_bad_value_is_named_by_its_key() {
        let e = parse(
            "[ha]\netcd_endpoints = [\"\", \"127.0.0.1\", \"ftp://x:1\", \"h:99999\"]\nkey_prefix = \"fabricd/\"\n\
             lease_ttl_s = 1\nnode_name = \"a b\"\nrequest_timeout_ms = 50\ntls_cert = \"/c.pem\"\ntls_ca = \"\"\n",
        )
        .unwrap_err();
        for needle in [
            "ha.etcd_endpoints: an endpoint is empty",
            "\"127.0.0.1\" has no port",
            "only http:// and https://",
            "\"99999\" is not a port number",
            "ha.key_prefix",
            "ha.lease_ttl_s: 1 is outside 2..=300",
            "ha.node_name",
            "ha.request_timeout_ms: 50",
            "ha.tls_cert: needs ha.tls_key",
            "ha.tls_ca: must not be empty",
        ] {
            assert!(e.contains(needle), "{needle}: {e}");
        }
        // A request that outlasts the lease cannot renew it.
        let e = parse("[ha]\netcd_endpoints = [\"127.0.0.1:2379\"]\nlease_ttl_s = 2\nrequest_timeout_ms = 2000\n")
            .unwrap_err();
        assert!(e.contains("ha.request_timeout_ms: 2000"), "{e}");
        // TLS and the endpoints' schemes agree.
        let e = parse("[ha]\netcd_endpoints = [\"https://e:2379\"]\n").unwrap_err();
        assert!(e.contains("needs ha.tls_ca"), "{e}");
        let e = parse("[ha]\netcd_endpoints = [\"http://e:2379\"]\ntls_ca = \"/ca.pem\"\n").unwrap_err();
        assert!(e.contains("is plaintext but ha.tls_ca is set"), "{e}");
        let e = parse("[ha]\nbogus = 1\n").unwrap_err();
        assert!(e.contains("ha.bogus"), "{e}");
    }

    #[test]
    fn ha_keys_need_a_restart() {
        let old = parse("[ha]\netcd_endpoints = [\"127.0.0.1:2379\"]\n").unwrap();
        let new = parse("[ha]\netcd_endpoints = [\"127.0.0.1:2379\"]\nlease_ttl_s = 9\n").unwrap();
        let d = old.reload_diff(&new);
        assert_eq!(d.need_restart, vec!["ha"]);
        assert_eq!(old.merge_reload(&new).ha, old.ha);
    }
}
