//! [`OobConfig`] (the `oob` table of the daemon's configuration) and the SL-to-VL table the
//! driver programs.

use std::path::PathBuf;
use std::time::Duration;

use fabric_southbound::DriverError;
use fabric_topology::Lid;
use serde::{Deserialize, Serialize};

/// Service level of escape-LID traffic (base LIDs use SL 0). `GetPath` hands these SLs to the
/// end nodes; the SL-to-VL tables the driver programs put SL 1 on the escape VL.
pub const ESCAPE_SL: u8 = 1;

/// The SL-to-VL table the driver programs on every switch: SL 1 (escape LIDs) on `escape_vl`,
/// every other SL (SL 0: base LIDs) on data VL 0. `None` (a switch with a single VL): every SL
/// on VL 0.
pub fn sl_to_vl_table(escape_vl: Option<u8>) -> [u8; 16] {
    let mut t = [0u8; 16];
    if let Some(v) = escape_vl {
        t[ESCAPE_SL as usize] = v;
    }
    t
}

/// Configuration of the `oob` driver (the daemon embeds it in its TOML config).
///
/// Durations are strings with a unit (`"500ms"`, `"2s"`, `"1m"`) or integer milliseconds.
/// `management_key` is an integer or a string (`"0x8000000000000001"`: TOML integers are
/// signed, so keys above `0x7fff_ffff_ffff_ffff` need the string form). `Debug` never shows
/// the key.
#[derive(Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OobConfig {
    /// Inventory file mapping switch GUIDs (or names) to agent addresses (see [`Inventory`](crate::Inventory)).
    pub inventory: PathBuf,
    /// TCP connect timeout per agent.
    #[serde(default = "d_connect", with = "duration")]
    pub connect_timeout: Duration,
    /// Timeout of one request to an agent.
    #[serde(default = "d_request", with = "duration")]
    pub request_timeout: Duration,
    /// Maximum number of agent requests in flight at once (uploads, discovery, LID setup). The
    /// port-event streams (one long-lived stream per agent) are not counted.
    #[serde(default = "d_max_conn")]
    pub max_connections: usize,
    /// Counter reads (`ReadPortCounters`, one per switch) in flight at once. A limit of their
    /// own, on top of `max_connections`: the port-health poll never delays an upload.
    #[serde(default = "d_max_counter_reads")]
    pub max_counter_reads: usize,
    /// How long an agent may stay unreachable before its switch is reported down.
    #[serde(default = "d_deadline", with = "duration")]
    pub unreachable_deadline: Duration,
    /// Highest unicast address of the fabric (BXI-like fabrics: up to `0xFFFFFF`).
    #[serde(default = "d_max_lid")]
    pub max_lid: Lid,
    /// Retries of a failed request (transient failures only) before giving up.
    #[serde(default = "d_retries")]
    pub max_retries: u32,
    /// Management key (the agents' M_Key; 0 = off): set on every agent at discovery (and again
    /// on an agent that restarted) and carried by every write, so that another manager without
    /// it can no longer change a switch. Never logged.
    #[serde(default, with = "key")]
    pub management_key: u64,
    /// Protect level of the key on the agents: 0 = writes need the key, reads are open and
    /// report it; 1 = writes need the key, reads are open, the key is never reported; 2 =
    /// every read but `Describe` needs the key too.
    #[serde(default = "d_protect")]
    pub management_key_protect: u8,
}

/// Every field, the management key redacted.
impl std::fmt::Debug for OobConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OobConfig")
            .field("inventory", &self.inventory)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("max_connections", &self.max_connections)
            .field("max_counter_reads", &self.max_counter_reads)
            .field("unreachable_deadline", &self.unreachable_deadline)
            .field("max_lid", &self.max_lid)
            .field("max_retries", &self.max_retries)
            .field(
                "management_key",
                &if self.management_key == 0 { "off" } else { "<redacted>" },
            )
            .field("management_key_protect", &self.management_key_protect)
            .finish()
    }
}

fn d_connect() -> Duration {
    Duration::from_secs(2)
}
fn d_request() -> Duration {
    Duration::from_secs(5)
}
fn d_max_conn() -> usize {
    64
}
fn d_max_counter_reads() -> usize {
    4
}
fn d_deadline() -> Duration {
    Duration::from_secs(10)
}
fn d_max_lid() -> Lid {
    0xFF_FFFF
}
fn d_retries() -> u32 {
    3
}
fn d_protect() -> u8 {
    1
}

/// Highest protect level of the management key.
pub const MAX_MANAGEMENT_KEY_PROTECT: u8 = 2;

/// Every default and an empty inventory path (which [`OobDriver::open`](crate::OobDriver::open) refuses): what an
/// embedding configuration holds when no `oob` table is given.
impl Default for OobConfig {
    fn default() -> Self {
        OobConfig::new(PathBuf::new())
    }
}

impl OobConfig {
    /// A configuration with every default and the given inventory.
    pub fn new(inventory: impl Into<PathBuf>) -> Self {
        OobConfig {
            inventory: inventory.into(),
            connect_timeout: d_connect(),
            request_timeout: d_request(),
            max_connections: d_max_conn(),
            max_counter_reads: d_max_counter_reads(),
            unreachable_deadline: d_deadline(),
            max_lid: d_max_lid(),
            max_retries: d_retries(),
            management_key: 0,
            management_key_protect: d_protect(),
        }
    }

    /// Checks the values (not the inventory file).
    pub fn validate(&self) -> Result<(), DriverError> {
        let mut p = Vec::new();
        if self.max_connections == 0 {
            p.push("max_connections must be at least 1".to_string());
        }
        if self.max_counter_reads == 0 {
            p.push("max_counter_reads must be at least 1".to_string());
        }
        if self.connect_timeout.is_zero() || self.request_timeout.is_zero() {
            p.push("connect_timeout and request_timeout must be positive".to_string());
        }
        if self.max_lid == 0 {
            p.push("max_lid must be at least 1".to_string());
        }
        if self.management_key_protect > MAX_MANAGEMENT_KEY_PROTECT {
            p.push(format!(
                "management_key_protect {} out of range 0..={MAX_MANAGEMENT_KEY_PROTECT}",
                self.management_key_protect
            ));
        }
        if p.is_empty() {
            Ok(())
        } else {
            Err(DriverError::Config(p.join("; ")))
        }
    }
}

/// The management key: an integer, or a string in hex (`0x...`) or decimal; written as a hex
/// string.
mod key {
    use serde::{Deserialize, Deserializer, Serializer};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Int(u64),
        Text(String),
    }

    pub fn parse(s: &str) -> Option<u64> {
        let s = s.trim().replace('_', "");
        match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => s.parse().ok(),
        }
    }

    pub fn serialize<S: Serializer>(k: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{k:#018x}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        match Raw::deserialize(d)? {
            Raw::Int(k) => Ok(k),
            // The value is not echoed: it is a secret.
            Raw::Text(t) => parse(&t).ok_or_else(|| {
                serde::de::Error::custom(
                    "invalid management_key (expected an integer, a \"0x\" string of up to 16 hex digits, or decimal)",
                )
            }),
        }
    }
}

mod duration {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Ms(u64),
        Text(String),
    }

    /// Parses a `humantime` duration (`"250ms"`, `"2s"`, `"1m 30s"`, `"1h"`) or a bare number
    /// of milliseconds (`"10"`).
    pub fn parse(s: &str) -> Option<Duration> {
        let s = s.trim();
        if let Ok(ms) = s.parse::<u64>() {
            return Some(Duration::from_millis(ms));
        }
        humantime_serde::re::humantime::parse_duration(s).ok()
    }

    /// Writes a duration the `humantime` way (`"2s"`, `"1m 30s"`: what [`deserialize`] reads
    /// back).
    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        humantime_serde::serialize(d, s)
    }

    /// Reads a number of milliseconds or a string with a unit (see [`parse`]).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        match Raw::deserialize(d)? {
            Raw::Ms(ms) => Ok(Duration::from_millis(ms)),
            Raw::Text(t) => parse(&t).ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "invalid duration `{t}` (expected e.g. \"500ms\", \"2s\", \"1m 30s\")"
                ))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_from_toml_with_units_and_defaults() {
        let c: OobConfig = toml::from_str(
            "inventory = \"/etc/fabricd/agents\"\nconnect_timeout = \"250ms\"\nrequest_timeout = 1500\nunreachable_deadline = \"3s\"\nmax_lid = 0xFFFFFF\n",
        )
        .unwrap();
        assert_eq!(c.connect_timeout, Duration::from_millis(250));
        assert_eq!(c.request_timeout, Duration::from_millis(1500));
        assert_eq!(c.unreachable_deadline, Duration::from_secs(3));
        assert_eq!(c.max_lid, 0xFF_FFFF);
        assert_eq!(c.max_connections, 64);
        assert_eq!(c.max_counter_reads, 4);
        assert!(toml::from_str::<OobConfig>("inventory = \"x\"\nbogus = 1\n").is_err());
        assert!(toml::from_str::<OobConfig>("inventory = \"x\"\nconnect_timeout = \"5 parsecs\"\n").is_err());
        assert!(toml::from_str::<OobConfig>("connect_timeout = 1\n").is_err());
        let mut bad = OobConfig::new("x");
        bad.max_connections = 0;
        assert!(matches!(bad.validate(), Err(DriverError::Config(_))));
    }

    #[test]
    fn management_key_from_toml_and_never_in_debug() {
        let c: OobConfig = toml::from_str("inventory = \"x\"\n").unwrap();
        assert_eq!((c.management_key, c.management_key_protect), (0, 1));
        let c: OobConfig = toml::from_str(
            "inventory = \"x\"\nmanagement_key = \"0xFEDC_BA98_7654_3210\"\nmanagement_key_protect = 2\n",
        )
        .unwrap();
        assert_eq!((c.management_key, c.management_key_protect), (0xFEDC_BA98_7654_3210, 2));
        assert!(c.validate().is_ok());
        let dbg = format!("{c:?}");
        assert!(
            dbg.contains("<redacted>") && !dbg.to_lowercase().contains("fedc"),
            "{dbg}"
        );
        // Written as a hex string, read back the same.
        let text = toml::to_string(&c).unwrap();
        assert_eq!(toml::from_str::<OobConfig>(&text).unwrap(), c);
        let c: OobConfig = toml::from_str("inventory = \"x\"\nmanagement_key = 4660\n").unwrap();
        assert_eq!(c.management_key, 0x1234);
        // A bad key is refused without echoing it; a protect level above 2 is refused.
        let e = toml::from_str::<OobConfig>("inventory = \"x\"\nmanagement_key = \"0xnothex\"\n").unwrap_err();
        assert!(e.to_string().contains("invalid management_key"), "{e}");
        let mut bad = OobConfig::new("x");
        bad.management_key_protect = 3;
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.contains("management_key_protect 3"), "{e}");
    }

    #[test]
    fn sl_to_vl_table_puts_only_sl1_on_the_escape_vl() {
        assert_eq!(
            sl_to_vl_table(Some(3)),
            [0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(sl_to_vl_table(None), [0; 16]);
    }

    #[test]
    fn duration_parser() {
        assert_eq!(duration::parse("2s"), Some(Duration::from_secs(2)));
        assert_eq!(duration::parse("1m"), Some(Duration::from_secs(60)));
        assert_eq!(duration::parse("10"), Some(Duration::from_millis(10)));
        assert_eq!(duration::parse("1m 30s"), Some(Duration::from_secs(90)));
        assert_eq!(duration::parse("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(duration::parse("x"), None);
        // Beyond the range of Duration (found by the configuration fuzz target): refused, no panic.
        assert_eq!(duration::parse("99999999999999999999999s"), None);
        assert_eq!(duration::parse("1e400"), None);
    }
}
