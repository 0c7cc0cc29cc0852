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
/// sweep_interval_ms = 250            # light sweep period (0 = off)
/// enable_phys_state = 2              # PortPhysicalState written to re-enable a port
/// sm_poll_interval_ms = 1000         # standby: SMInfo poll period of the master
/// sm_poll_retries = 3                # standby: unanswered polls before taking over
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
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
            sweep_interval_ms: 250,
            enable_phys_state: crate::mad::PHYS_POLLING,
            sm_poll_interval_ms: 1000,
            sm_poll_retries: 3,
        }
    }
}

/// Largest window accepted.
pub const MAX_WINDOW: usize = 32;

impl UmadConfig {
    /// Deadline of one SMP attempt.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }
    /// Light sweep period (`None` = off).
    pub fn sweep_interval(&self) -> Option<Duration> {
        (self.sweep_interval_ms > 0).then(|| Duration::from_millis(self.sweep_interval_ms))
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
        if self.window == 0 || self.window > MAX_WINDOW {
            errs.push(format!("window {} is not in 1..={MAX_WINDOW}", self.window));
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
        assert!(msg.contains("enable_phys_state 3"), "{msg}");
        let sim: UmadConfig = toml::from_str("enable_phys_state = 5\n").unwrap();
        assert!(sim.validate().is_ok());
        assert_eq!(sim.sm_key, 0, "no SM_Key by default");
        // OpenSM's default SM_Key, written the way opensm.conf does.
        let keyed: UmadConfig = toml::from_str("sm_key = 0x0000000000000001\n").unwrap();
        assert_eq!(keyed.sm_key, 1);
    }
}
