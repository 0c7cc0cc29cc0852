//! Configuration of the `umad` driver (embedded in the daemon's config file).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Configuration of [`crate::UmadDriver`].
///
/// ```toml
/// device = "/dev/infiniband/umad0"   # user-MAD device of the HCA the manager runs on
/// port = 1                           # HCA port (informational: the device is per port)
/// sm_priority = 15                   # SMInfo priority advertised (0..=15)
/// sm_key = 0                         # SM_Key (0 = none); set to the other SMs' key to make them stand by
/// timeout_ms = 200                   # deadline of one SMP attempt
/// retries = 3                        # re-sends after the first attempt
/// window = 16                        # SMPs in flight (1..=32)
/// perf_window = 4                    # PerfMgt MADs (port counters) in flight, apart from the SMPs (1..=16)
/// sweep_interval_ms = 250            # light sweep period (0 = off)
/// enable_phys_state = 2              # PortPhysicalState written to re-enable a port
/// sm_poll_interval_ms = 1000         # standby: SMInfo poll period of the master
/// sm_poll_retries = 3                # standby: unanswered polls before taking over
/// m_key = 0                          # M_Key of every managed port (0 = no M_Key protection)
/// m_key_protect = 0                  # M_KeyProtectBits written with it (0..=3)
/// m_key_lease_s = 0                  # M_KeyLeasePeriod in seconds (0 = never lapses)
/// ```
///
/// `Debug` never shows `m_key` (it prints `<redacted>`): the config is safe to log.
#[derive(Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct UmadConfig {
    /// The user-MAD device file (`/dev/infiniband/umadN`).
    pub device: PathBuf,
    /// HCA port number the device belongs to.
    pub port: u8,
    /// Subnet manager priority (0..=15).
    pub sm_priority: u8,
    /// SM_Key of the manager, returned in its SMInfo answers (0: none). Another subnet manager
    /// with a non-zero SM_Key ignores a master whose SMInfo carries a different key and takes
    /// the subnet over itself (OpenSM's default key is 1): give every SM of the subnet the
    /// same key. TOML integers are signed, so keys above 0x7fff_ffff_ffff_ffff cannot be set.
    pub sm_key: u64,
    /// Deadline of one SMP attempt, in milliseconds.
    #[serde(rename = "timeout_ms")]
    pub timeout_ms: u64,
    /// Number of re-sends after a lost or timed-out SMP.
    pub retries: u32,
    /// Maximum number of SMPs in flight (the simulator deadlocks beyond ~32).
    pub window: usize,
    /// Maximum number of PerfMgt MADs (port counter reads) in flight, counted apart from the
    /// SMP `window`; they are sent only while no subnet management SMP waits for a slot.
    pub perf_window: usize,
    /// Period of the light sweep (SwitchInfo.PortStateChange polling), in milliseconds; 0 turns
    /// it off (traps only).
    #[serde(rename = "sweep_interval_ms")]
    pub sweep_interval_ms: u64,
    /// PortPhysicalState written to re-enable a port (physical fault injection, "up"): 2 =
    /// Polling, the IBA value (the link trains and comes back in INIT, reported by the light
    /// sweep); 5 = LinkUp, for ibsim, which does not simulate link training and leaves a port
    /// written Polling dead.
    pub enable_phys_state: u8,
    /// Standby (another subnet manager with precedence is master at start): period of the
    /// SMInfo polls of the master, in milliseconds.
    pub sm_poll_interval_ms: u64,
    /// Standby: consecutive unanswered (or not-master) polls after which this manager takes the
    /// subnet over.
    pub sm_poll_retries: u32,
    /// M_Key protection (IBA 14.2.4): the key written into the PortInfo of every port the
    /// manager manages (switch port 0 and every CA port) at LID configuration, and carried by
    /// every SMP the driver sends (0: no M_Key, nothing is written). A port already protected
    /// with another key refuses the manager (reported naming its GUID and port). Never logged.
    /// A standby taking over keeps the key the master set: the daemon hands it the key read
    /// from its state directory ([`crate::UmadDriver::open_with_m_key`]). TOML integers are
    /// signed, so keys above 0x7fff_ffff_ffff_ffff cannot be set here.
    pub m_key: u64,
    /// M_KeyProtectBits written with the key (0..=3): 0 = Sets need the key, Gets answer it to
    /// anyone; 1 = Gets answer M_Key 0 without the key; 2 and 3 = Gets and Sets need the key.
    /// Must be 0 without a key.
    pub m_key_protect: u8,
    /// M_KeyLeasePeriod written with the key, in seconds (0..=65535; 0 = the protection never
    /// lapses): once the manager stops answering for that long, a port drops its protection.
    pub m_key_lease_s: u16,
}

impl std::fmt::Debug for UmadConfig {
    /// Every field, except that the M_Key is shown as `<redacted>` (or `0` when unset).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UmadConfig")
            .field("device", &self.device)
            .field("port", &self.port)
            .field("sm_priority", &self.sm_priority)
            .field("sm_key", &self.sm_key)
            .field("timeout_ms", &self.timeout_ms)
            .field("retries", &self.retries)
            .field("window", &self.window)
            .field("perf_window", &self.perf_window)
            .field("sweep_interval_ms", &self.sweep_interval_ms)
            .field("enable_phys_state", &self.enable_phys_state)
            .field("sm_poll_interval_ms", &self.sm_poll_interval_ms)
            .field("sm_poll_retries", &self.sm_poll_retries)
            .field(
                "m_key",
                &format_args!("{}", if self.m_key == 0 { "0" } else { "<redacted>" }),
            )
            .field("m_key_protect", &self.m_key_protect)
            .field("m_key_lease_s", &self.m_key_lease_s)
            .finish()
    }
}

impl Default for UmadConfig {
    fn default() -> Self {
        UmadConfig {
            device: PathBuf::from("/dev/infiniband/umad0"),
            port: 1,
            sm_priority: 15,
            sm_key: 0,
            timeout_ms: 200,
            retries: 3,
            window: 16,
            perf_window: 4,
            sweep_interval_ms: 250,
            enable_phys_state: crate::mad::PHYS_POLLING,
            sm_poll_interval_ms: 1000,
            sm_poll_retries: 3,
            m_key: 0,
            m_key_protect: 0,
            m_key_lease_s: 0,
        }
    }
}

/// Largest window accepted.
pub const MAX_WINDOW: usize = 32;
/// Largest PerfMgt window accepted (with [`MAX_WINDOW`] SMPs, below the ~64 outstanding MADs
/// at which the simulator shim was seen to stall).
pub const MAX_PERF_WINDOW: usize = 16;

impl UmadConfig {
    /// Deadline of one SMP attempt.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }
    /// Light sweep period (`None` = off).
    pub fn sweep_interval(&self) -> Option<Duration> {
        (self.sweep_interval_ms > 0).then(|| Duration::from_millis(self.sweep_interval_ms))
    }
    /// The M_Key protection the driver writes and sends (key 0: none).
    pub fn m_key_protection(&self) -> crate::mad::MKeyProtection {
        crate::mad::MKeyProtection {
            key: self.m_key,
            protect: self.m_key_protect,
            lease_s: self.m_key_lease_s,
        }
    }
    /// Checks the values; reports every problem at once.
    pub fn validate(&self) -> Result<(), String> {
        let mut errs = Vec::new();
        if self.port == 0 {
            errs.push("port must be at least 1".to_string());
        }
        if self.sm_priority > 15 {
            errs.push(format!("sm_priority {} is above 15", self.sm_priority));
        }
        if self.timeout_ms == 0 {
            errs.push("timeout_ms must be positive".to_string());
        }
        if self.sm_poll_interval_ms < 10 {
            errs.push(format!("sm_poll_interval_ms {} is below 10", self.sm_poll_interval_ms));
        }
        if self.sm_poll_retries == 0 {
            errs.push("sm_poll_retries must be at least 1".to_string());
        }
        if !matches!(
            self.enable_phys_state,
            crate::mad::PHYS_POLLING | crate::mad::PHYS_LINK_UP
        ) {
            errs.push(format!(
                "enable_phys_state {} is neither 2 (Polling) nor 5 (LinkUp, simulators)",
                self.enable_phys_state
            ));
        }
        if self.m_key_protect > 3 {
            errs.push(format!("m_key_protect {} is not in 0..=3", self.m_key_protect));
        } else if self.m_key_protect > 0 && self.m_key == 0 {
            errs.push(format!(
                "m_key_protect {} needs an m_key (0 = no M_Key protection)",
                self.m_key_protect
            ));
        }
        if self.window == 0 || self.window > MAX_WINDOW {
            errs.push(format!("window {} is not in 1..={MAX_WINDOW}", self.window));
        }
        if self.perf_window == 0 || self.perf_window > MAX_PERF_WINDOW {
            errs.push(format!(
                "perf_window {} is not in 1..={MAX_PERF_WINDOW}",
                self.perf_window
            ));
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_toml() {
        let c: UmadConfig = toml::from_str("device = \"/dev/infiniband/umad1\"\nwindow = 8\n").unwrap();
        assert_eq!(c.device, PathBuf::from("/dev/infiniband/umad1"));
        assert_eq!(c.window, 8);
        assert_eq!(c.retries, UmadConfig::default().retries);
        assert!(c.validate().is_ok());
        let e = toml::from_str::<UmadConfig>("devise = \"x\"").unwrap_err();
        assert!(e.to_string().contains("unknown field"), "{e}");
        let bad = UmadConfig {
            window: 0,
            sm_priority: 16,
            enable_phys_state: 3,
            ..UmadConfig::default()
        };
        let msg = bad.validate().unwrap_err();
        assert!(msg.contains("window 0") && msg.contains("sm_priority 16"), "{msg}");
        assert_eq!(c.perf_window, 4, "PerfMgt window default");
        let perf: UmadConfig = toml::from_str("perf_window = 17\n").unwrap();
        assert!(perf.validate().unwrap_err().contains("perf_window 17"));
        assert!(msg.contains("enable_phys_state 3"), "{msg}");
        let sim: UmadConfig = toml::from_str("enable_phys_state = 5\n").unwrap();
        assert!(sim.validate().is_ok());
        assert_eq!(sim.sm_key, 0, "no SM_Key by default");
        // OpenSM's default SM_Key, written the way opensm.conf does.
        let keyed: UmadConfig = toml::from_str("sm_key = 0x0000000000000001\n").unwrap();
        assert_eq!(keyed.sm_key, 1);
    }

    #[test]
    fn m_key_keys_parse_validate_and_never_print() {
        let c: UmadConfig =
            toml::from_str("m_key = 0x00000000cafe1234\nm_key_protect = 2\nm_key_lease_s = 60\n").unwrap();
        assert_eq!((c.m_key, c.m_key_protect, c.m_key_lease_s), (0xcafe_1234, 2, 60));
        assert!(c.validate().is_ok());
        let p = c.m_key_protection();
        assert_eq!((p.key, p.protect, p.lease_s), (0xcafe_1234, 2, 60));
        for shown in [format!("{c:?}"), format!("{c:#?}"), format!("{p:?}")] {
            let lower = shown.to_lowercase();
            assert!(
                !lower.contains("cafe") && !lower.contains(&0xcafe_1234u64.to_string()),
                "{shown}"
            );
        }
        assert!(format!("{c:?}").contains("m_key: <redacted>"), "{c:?}");
        assert!(format!("{:?}", UmadConfig::default()).contains("m_key: 0,"));
        let d = UmadConfig::default();
        assert_eq!((d.m_key, d.m_key_protect, d.m_key_lease_s), (0, 0, 0), "off by default");
        let bad = UmadConfig {
            m_key_protect: 4,
            ..UmadConfig::default()
        };
        assert!(bad.validate().unwrap_err().contains("m_key_protect 4"));
        let keyless = UmadConfig {
            m_key_protect: 1,
            ..UmadConfig::default()
        };
        assert!(keyless.validate().unwrap_err().contains("needs an m_key"));
        assert!(
            toml::from_str::<UmadConfig>("m_key_lease_s = 70000\n").is_err(),
            "u16 lease"
        );
    }
}
