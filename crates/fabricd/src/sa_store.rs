//! The SA registry (ServiceRecords, InformInfo subscriptions) in the state directory, as
//! `sa-registry.json`, so that what clients registered survives a restart of the master (and
//! a takeover by a manager sharing the directory).
//!
//! * [`open`] is what the daemon's start calls: it reads the file (no file: an empty
//!   registry) and returns the [`RegistryStore`] the [`fabric_sa::SaService`] saves through.
//! * Saving goes through [`StateDir::write_atomic`] (temporary, fsync, rename, fsync of the
//!   directory), reading through [`StateDir::read`]: the same local-trust rules and size
//!   bound (16 MiB; the registry's bounds keep a full one under it) as the other state files.
//! * A file that cannot be read or parsed stops the start, naming the file and what is wrong
//!   (as `jobs.json`, `virtual-faults.json`, `generation.json` do): starting empty would
//!   silently drop every registration, and the next save would overwrite the file.
//! * Leases that ended while the daemon was down are dropped at load.
//!
//! Saving blocks (a write and two fsyncs): the SA service calls it under its registry lock
//! before it answers a Set or Delete, on the thread that handles the request (the umad
//! transport thread, or a blocking task of the gRPC service).

use std::time::SystemTime;

use fabric_sa::registry::Registry;
use fabric_sa::service::RegistryStore;

use crate::persist::{PersistError, StateDir};

/// File of the SA registry (JSON).
pub const SA_REGISTRY_FILE: &str = "sa-registry.json";

/// The [`RegistryStore`] of the daemon: the registry file in the state directory.
#[derive(Clone, Debug)]
pub struct StateDirRegistryStore {
    dir: StateDir,
}

impl StateDirRegistryStore {
    pub fn new(dir: StateDir) -> Self {
        StateDirRegistryStore { dir }
    }
}

impl RegistryStore for StateDirRegistryStore {
    fn save(&self, registry: &Registry) -> Result<(), String> {
        save(&self.dir, registry).map_err(|e| e.to_string())
    }
}

/// Writes `registry` to [`SA_REGISTRY_FILE`] atomically.
pub fn save(dir: &StateDir, registry: &Registry) -> Result<(), PersistError> {
    let path = dir.path().join(SA_REGISTRY_FILE);
    let mut text = serde_json::to_string_pretty(registry).map_err(|e| PersistError::Corrupt {
        path,
        message: e.to_string(),
    })?;
    text.push('\n');
    dir.write_atomic(SA_REGISTRY_FILE, text.as_bytes())
}

/// The registry saved in `dir` (empty when there is no file), without the leases ended at
/// `now`. A file that cannot be read or parsed is an error naming it, the entry and field
/// at fault, and what to do.
pub fn load(dir: &StateDir, now: SystemTime) -> Result<Registry, PersistError> {
    let Some(text) = dir.read(SA_REGISTRY_FILE)? else {
        return Ok(Registry::default());
    };
    let mut registry: Registry = serde_json::from_str(&text).map_err(|e| PersistError::Corrupt {
        path: dir.path().join(SA_REGISTRY_FILE),
        message: format!(
            "{e}: the SA registrations (ServiceRecords, InformInfo subscriptions) cannot be read; \
             remove the file to start without them (clients must then register again)"
        ),
    })?;
    registry.drop_expired(now);
    Ok(registry)
}

/// What the daemon's start needs: the registry read back from `dir` (leases ended by now
/// dropped) and the store the SA service saves it through.
pub fn open(dir: &StateDir) -> Result<(Registry, Box<dyn RegistryStore>), PersistError> {
    let registry = load(dir, SystemTime::now())?;
    Ok((registry, Box::new(StateDirRegistryStore::new(dir.clone()))))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use fabric_sa::records::service::comp;
    use fabric_sa::records::{InformInfo, Record, ServiceRecord};
    use fabric_sa::registry::{MAX_SERVICE_RECORDS, MAX_SUBSCRIPTIONS};
    use fabric_sa::wire::{self, attr, status, SaHeader, MAD_SIZE, SA_HEADER_SIZE};
    use fabric_sa::{Requester, SaService, Subnet};

    use super::*;

    fn t0() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_764_000_000)
    }

    fn service_record_mad(method: u8, mask: u64, id: u64, lease: u32) -> [u8; MAD_SIZE] {
        let mut r = ServiceRecord {
            service_id: id,
            service_lease: lease,
            ..Default::default()
        };
        r.service_gid.0[..2].copy_from_slice(&[0xfe, 0x80]);
        r.service_gid.0[15] = 7;
        r.service_name.0[..6].copy_from_slice(b"lustre");
        let mut b = [0u8; MAD_SIZE];
        SaHeader {
            class_version: wire::SA_CLASS_VERSION,
            method,
            attr_id: attr::SERVICE_RECORD,
            component_mask: mask,
            ..Default::default()
        }
        .encode(&mut b);
        r.encode(&mut b[SA_HEADER_SIZE..]);
        b
    }

    fn serving(registry: Registry, store: Box<dyn RegistryStore>) -> SaService {
        let sa = SaService::new(registry, Some(store));
        sa.publish(Subnet::default());
        sa.set_serving(true);
        sa
    }

    const KEY: u64 = 1 << comp::SERVICE_ID | 1 << comp::SERVICE_GID | 1 << comp::SERVICE_LEASE;

    #[test]
    fn service_records_and_subscriptions_survive_a_new_service_built_from_the_state_directory() {
        // `open` drops leases ended by the real clock: the requests are made now.
        let now = SystemTime::now();
        let d = tempfile::tempdir().unwrap();
        let dir = StateDir::open(d.path()).unwrap();
        let (registry, store) = open(&dir).unwrap();
        assert!(registry.is_empty(), "no file: nothing registered");
        let sa = serving(registry, store);
        let from = Requester::default();
        for (id, lease) in [(1, 3600), (2, 0xffff_ffff), (3, 10)] {
            let r = sa
                .handle(&service_record_mad(wire::METHOD_SET, KEY, id, lease), &from, now)
                .unwrap();
            assert_eq!(r.header.status, status::OK);
        }
        let r = sa
            .handle(&service_record_mad(wire::METHOD_DELETE, KEY, 3, 10), &from, now)
            .unwrap();
        assert_eq!(r.header.status, status::OK);
        // An InformInfo subscription (the requester known by its GRH).
        let subscriber = Requester {
            lid: 12,
            qpn: 0x4d,
            gid: Some([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12]),
            ..Default::default()
        };
        let ii = InformInfo {
            lid_range_begin: 0xffff,
            is_generic: 1,
            subscribe: 1,
            trap_type: 0xffff,
            trap_number: 65,
            producer_type: 0xff_ffff,
            ..Default::default()
        };
        let mut m = [0u8; MAD_SIZE];
        SaHeader {
            class_version: wire::SA_CLASS_VERSION,
            method: wire::METHOD_SET,
            attr_id: attr::INFORM_INFO,
            ..Default::default()
        }
        .encode(&mut m);
        ii.encode(&mut m[SA_HEADER_SIZE..]);
        assert_eq!(sa.handle(&m, &subscriber, now).unwrap().header.status, status::OK);
        assert_eq!(sa.counters().persist_failures, 0);
        drop(sa);
        // "Restart": a new service from what the directory holds.
        let (registry, store) = open(&dir).unwrap();
        let ids: Vec<u64> = registry.service_records().map(|e| e.record.service_id).collect();
        assert_eq!(ids, vec![1, 2], "saved before each answer, the Delete included");
        let subs = registry.subscriptions();
        assert_eq!(subs.len(), 1);
        assert_eq!(
            (subs[0].lid, subs[0].qpn, subs[0].inform_info.trap_number),
            (12, 0x4d, 65)
        );
        assert_eq!(subs[0].subscriber_gid.0, subscriber.gid.unwrap());
        let sa = serving(registry, store);
        let r = sa
            .handle(&service_record_mad(wire::METHOD_GET_TABLE, 0, 0, 0), &from, now)
            .unwrap();
        assert_eq!((r.header.status, r.data.len()), (status::OK, 2 * ServiceRecord::SIZE));
        let first = ServiceRecord::decode(&r.data).unwrap();
        assert_eq!((first.service_id, first.service_lease), (1, 3600));
        assert_eq!(first.service_name.text(), "lustre");
        // A lease that ended while the daemon was down is gone at load.
        let later = load(&dir, now + Duration::from_secs(3600)).unwrap();
        let ids: Vec<u64> = later.service_records().map(|e| e.record.service_id).collect();
        assert_eq!(ids, vec![2]);
        // The file is where the documentation says.
        assert!(d.path().join(SA_REGISTRY_FILE).is_file());
    }

    #[test]
    fn a_corrupt_registry_file_is_an_error_naming_it() {
        let d = tempfile::tempdir().unwrap();
        let dir = StateDir::open(d.path()).unwrap();
        let path = d.path().join(SA_REGISTRY_FILE).display().to_string();
        let cases: [(&[u8], &str); 4] = [
            (b"{ \"version\": 1, \"service_records\": [", "EOF"),
            (br#"{"version": 3}"#, "version: 3"),
            (
                br#"{"version": 1, "service_records": [{"record": "abc"}]}"#,
                "service_records[0].record: 3 hex digits",
            ),
            (b"\xff\xfe", "invalid UTF-8"),
        ];
        for (text, why) in cases {
            dir.write_atomic(SA_REGISTRY_FILE, text).unwrap();
            let e = open(&dir).map(|_| ()).unwrap_err();
            assert!(matches!(e, PersistError::Corrupt { .. }), "{e:?}");
            let e = e.to_string();
            assert!(e.starts_with(&path), "{e}");
            assert!(e.contains(why), "{why}: {e}");
        }
        // A parse error also says what to do.
        dir.write_atomic(SA_REGISTRY_FILE, b"[]").unwrap();
        let e = load(&dir, t0()).unwrap_err().to_string();
        assert!(e.contains("remove the file"), "{e}");
    }

    /// A registry at its bounds, with the largest values, fits the state files' size limit
    /// and round-trips through the directory.
    #[test]
    fn a_full_registry_fits_the_state_file_limit() {
        let record = "f".repeat(2 * ServiceRecord::SIZE);
        let services: Vec<serde_json::Value> = (0..MAX_SERVICE_RECORDS)
            .map(|i| {
                let mut r = record.clone();
                r.replace_range(0..16, &format!("{i:016x}"));
                serde_json::json!({"record": r, "expires_unix_ms": u64::MAX})
            })
            .collect();
        let subs: Vec<serde_json::Value> = (0..MAX_SUBSCRIPTIONS)
            .map(|_| {
                serde_json::json!({
                    "subscriber_gid": "f".repeat(32), "enum": u16::MAX, "inform_info": "f".repeat(72),
                    "lid": u16::MAX, "qpn": 0xff_ffff, "sl": u8::MAX, "pkey_index": u16::MAX
                })
            })
            .collect();
        let full: Registry = serde_json::from_value(
            serde_json::json!({"version": 1, "service_records": services, "subscriptions": subs}),
        )
        .unwrap();
        let d = tempfile::tempdir().unwrap();
        let dir = StateDir::open(d.path()).unwrap();
        save(&dir, &full).unwrap();
        let size = std::fs::metadata(d.path().join(SA_REGISTRY_FILE)).unwrap().len();
        eprintln!("a full registry file: {size} bytes");
        assert!(size < fabric_topology::textfile::SMALL_TEXT_LIMIT, "{size} bytes");
        assert_eq!(load(&dir, t0()).unwrap(), full);
    }
}
