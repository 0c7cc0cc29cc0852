//! `health.json` in the state directory: the links the monitor isolated and why. Written
//! atomically (the state directory's helper) before an isolation is reported done and after a
//! clear; the virtual link-down itself is persisted by the event loop with the other virtual
//! faults (`virtual-faults.json`), and re-asserted from this file at start.

use fabric_topology::{fmt_guid, parse_guid, Guid, PortNum};
use serde::{Deserialize, Serialize};

use crate::persist::{PersistError, StateDir};

/// File of the isolated links (JSON).
pub const HEALTH_FILE: &str = "health.json";
const VERSION: u32 = 1;

/// One isolated link: its canonical end (the lower (GUID, port)) and the reason.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Isolation {
    /// Switch GUID of the canonical end.
    pub switch: String,
    pub port: PortNum,
    /// The port whose counters or flaps broke the policy (`0x...[5]` or an end port GUID).
    pub port_seen: String,
    /// The counter name, or `flapping`.
    pub cause: String,
    /// Its rate (errors per second) or the link-downs within the window.
    pub value: f64,
    pub threshold: f64,
    /// The whole reason in words.
    pub reason: String,
    /// When it was isolated, ms since the Unix epoch.
    pub at_unix_ms: i64,
}

impl Isolation {
    /// The canonical end as (GUID, port); `None` when the file held no GUID there.
    pub fn link(&self) -> Option<(Guid, PortNum)> {
        parse_guid(&self.switch).map(|g| (g, self.port))
    }
}

#[derive(Serialize, Deserialize)]
struct HealthFile {
    version: u32,
    #[serde(default)]
    isolated: Vec<Isolation>,
}

/// The isolated links saved (none without a file). A file that cannot be parsed or of another
/// version is an error naming it and the field.
pub fn load(dir: &StateDir) -> Result<Vec<Isolation>, PersistError> {
    let Some(text) = dir.read(HEALTH_FILE)? else {
        return Ok(Vec::new());
    };
    let corrupt = |message: String| PersistError::Corrupt {
        path: dir.path().join(HEALTH_FILE),
        message,
    };
    let f: HealthFile = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
    if f.version != VERSION {
        return Err(corrupt(format!(
            "version: {} (this fabricd reads version {VERSION})",
            f.version
        )));
    }
    for i in &f.isolated {
        if i.link().is_none() {
            return Err(corrupt(format!("isolated.switch: {:?} is not a GUID", i.switch)));
        }
    }
    Ok(f.isolated)
}

/// Saves the isolated links (atomically).
pub fn save(dir: &StateDir, isolated: &[Isolation]) -> Result<(), PersistError> {
    let f = HealthFile {
        version: VERSION,
        isolated: isolated.to_vec(),
    };
    let mut text = serde_json::to_string_pretty(&f).map_err(|e| PersistError::Corrupt {
        path: dir.path().join(HEALTH_FILE),
        message: e.to_string(),
    })?;
    text.push('\n');
    dir.write_atomic(HEALTH_FILE, text.as_bytes())
}

/// The canonical-end text of a link (`0x...[5]`).
pub fn link_text(switch: Guid, port: PortNum) -> String {
    format!("{}[{port}]", fmt_guid(switch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isolations_round_trip_and_a_bad_file_is_named() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(&d.path().join("state")).unwrap();
        assert!(load(&s).unwrap().is_empty());
        let i = Isolation {
            switch: fmt_guid(0x10),
            port: 3,
            port_seen: "0x0000000000000010[3]".into(),
            cause: "symbol_errors".into(),
            value: 120.0,
            threshold: 10.0,
            reason: "symbol_errors at 120/s over the threshold 10/s".into(),
            at_unix_ms: 1,
        };
        save(&s, std::slice::from_ref(&i)).unwrap();
        assert_eq!(load(&s).unwrap(), vec![i]);
        s.write_atomic(HEALTH_FILE, b"{\"version\": 7}").unwrap();
        let e = load(&s).unwrap_err().to_string();
        assert!(e.contains("health.json") && e.contains("version"), "{e}");
    }
}
