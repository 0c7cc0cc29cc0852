//! The persisted form of the [`Registry`] (the daemon writes it as JSON):
//!
//! ```json
//! { "version": 1,
//!   "service_records": [ { "record": "<352 hex digits: the 176-byte wire image>",
//!                          "expires_unix_ms": 1764064800000 } ],
//!   "subscriptions": [ { "subscriber_gid": "<32 hex digits>", "enum": 0,
//!                        "inform_info": "<72 hex digits: the 36-byte wire image>",
//!                        "lid": 12, "qpn": 1, "sl": 0, "pkey_index": 0 } ] }
//! ```
//!
//! With multicast groups the file is version 2 and has two more keys (version 1 files, and
//! files of version 2 without them, read as no group; a registry without groups is still
//! written as version 1, so that an older fabricd reads it):
//!
//! ```json
//!   "mcast_groups": [ { "record": "<112 hex digits: the group's MCMemberRecord image>",
//!                       "well_known": true,
//!                       "members": [ { "port_gid": "<32 hex digits>", "join_state": 1,
//!                                      "proxy": false } ] } ],
//!   "mcast_next_mgid": 0
//! ```
//!
//! `expires_unix_ms` is absent (or null) for an infinite lease. Unknown keys are ignored (as
//! in the daemon's other state files). Loading checks everything and names the entry and
//! field at fault: version, hex images, QPN range, duplicate keys, the bounds.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Registry, ServiceEntry, Subscription, MAX_SERVICE_RECORDS, MAX_SUBSCRIPTIONS};
use crate::mcast::{self, Group, McastState, Member};
use crate::records::{Gid, InformInfo, McMemberRecord, Record, ServiceRecord};

/// Version of the format this code writes when there are multicast groups (it reads 1 and 2).
pub const REGISTRY_FILE_VERSION: u32 = 2;
/// Version written without multicast groups (readable by a fabricd without multicast).
pub const REGISTRY_FILE_VERSION_NO_MCAST: u32 = 1;

#[derive(Clone, Serialize, Deserialize)]
pub(super) struct RegistryFile {
    version: u32,
    #[serde(default)]
    service_records: Vec<ServiceRecordEntry>,
    #[serde(default)]
    subscriptions: Vec<SubscriptionEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    mcast_groups: Vec<McGroupEntry>,
    #[serde(default, skip_serializing_if = "is_zero")]
    mcast_next_mgid: u32,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

#[derive(Clone, Serialize, Deserialize)]
struct McGroupEntry {
    record: String,
    #[serde(default)]
    well_known: bool,
    #[serde(default)]
    members: Vec<McMemberEntry>,
}

#[derive(Clone, Serialize, Deserialize)]
struct McMemberEntry {
    port_gid: String,
    join_state: u8,
    #[serde(default)]
    proxy: bool,
}

#[derive(Clone, Serialize, Deserialize)]
struct ServiceRecordEntry {
    record: String,
    #[serde(default)]
    expires_unix_ms: Option<u64>,
}

#[derive(Clone, Serialize, Deserialize)]
struct SubscriptionEntry {
    subscriber_gid: String,
    #[serde(rename = "enum")]
    subscriber_enum: u16,
    inform_info: String,
    lid: u16,
    qpn: u32,
    sl: u8,
    pkey_index: u16,
}

fn hex(b: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2);
    for &x in b {
        s.push(char::from(D[usize::from(x >> 4)]));
        s.push(char::from(D[usize::from(x & 15)]));
    }
    s
}

/// `what` read from `n` bytes of hex.
fn unhex(s: &str, n: usize, what: &str) -> Result<Vec<u8>, String> {
    if s.len() != 2 * n {
        return Err(format!("{what}: {} hex digits (expected {})", s.len(), 2 * n));
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    s.as_bytes()
        .chunks_exact(2)
        .enumerate()
        .map(|(i, p)| match (digit(p[0]), digit(p[1])) {
            (Some(h), Some(l)) => Ok((h << 4) | l),
            _ => Err(format!(
                "{what}: {:?} at digit {} is not hex",
                String::from_utf8_lossy(p),
                2 * i
            )),
        })
        .collect()
}

impl From<Registry> for RegistryFile {
    fn from(r: Registry) -> Self {
        let mcast_groups: Vec<McGroupEntry> = r
            .mcast
            .groups
            .values()
            .map(|g| {
                let mut b = [0u8; McMemberRecord::SIZE];
                g.rec.encode(&mut b);
                McGroupEntry {
                    record: hex(&b),
                    well_known: g.well_known,
                    members: g
                        .members
                        .values()
                        .map(|m| McMemberEntry {
                            port_gid: hex(&m.port_gid.0),
                            join_state: m.join_state,
                            proxy: m.proxy,
                        })
                        .collect(),
                }
            })
            .collect();
        RegistryFile {
            version: if mcast_groups.is_empty() {
                REGISTRY_FILE_VERSION_NO_MCAST
            } else {
                REGISTRY_FILE_VERSION
            },
            mcast_next_mgid: if mcast_groups.is_empty() { 0 } else { r.mcast.next_mgid },
            mcast_groups,
            service_records: r
                .services
                .values()
                .map(|e| {
                    let mut b = [0u8; ServiceRecord::SIZE];
                    e.record.encode(&mut b);
                    ServiceRecordEntry {
                        record: hex(&b),
                        expires_unix_ms: e.expires_unix_ms,
                    }
                })
                .collect(),
            subscriptions: r
                .subscriptions
                .iter()
                .map(|s| {
                    let mut b = [0u8; InformInfo::SIZE];
                    s.inform_info.encode(&mut b);
                    SubscriptionEntry {
                        subscriber_gid: hex(&s.subscriber_gid.0),
                        subscriber_enum: s.subscriber_enum,
                        inform_info: hex(&b),
                        lid: s.lid,
                        qpn: s.qpn,
                        sl: s.sl,
                        pkey_index: s.pkey_index,
                    }
                })
                .collect(),
        }
    }
}

impl TryFrom<RegistryFile> for Registry {
    type Error = String;

    fn try_from(f: RegistryFile) -> Result<Self, String> {
        if f.version != REGISTRY_FILE_VERSION && f.version != REGISTRY_FILE_VERSION_NO_MCAST {
            return Err(format!(
                "version: {} (this fabricd reads versions {REGISTRY_FILE_VERSION_NO_MCAST} and {REGISTRY_FILE_VERSION})",
                f.version
            ));
        }
        if f.service_records.len() > MAX_SERVICE_RECORDS {
            return Err(format!(
                "service_records: {} entries (at most {MAX_SERVICE_RECORDS})",
                f.service_records.len()
            ));
        }
        if f.subscriptions.len() > MAX_SUBSCRIPTIONS {
            return Err(format!(
                "subscriptions: {} entries (at most {MAX_SUBSCRIPTIONS})",
                f.subscriptions.len()
            ));
        }
        let mut services = BTreeMap::new();
        let mut first_at = BTreeMap::new();
        for (i, e) in f.service_records.iter().enumerate() {
            let b = unhex(&e.record, ServiceRecord::SIZE, &format!("service_records[{i}].record"))?;
            let record = ServiceRecord::decode(&b).map_err(|e| format!("service_records[{i}].record: {e}"))?;
            let key = (record.service_id, record.service_gid, record.service_pkey);
            if let Some(j) = first_at.insert(key, i) {
                return Err(format!(
                    "service_records[{i}]: same ServiceID, ServiceGID and ServiceP_Key as service_records[{j}]"
                ));
            }
            services.insert(
                key,
                ServiceEntry {
                    record,
                    expires_unix_ms: e.expires_unix_ms,
                },
            );
        }
        let mut subscriptions = Vec::with_capacity(f.subscriptions.len());
        for (i, s) in f.subscriptions.iter().enumerate() {
            let g = unhex(&s.subscriber_gid, 16, &format!("subscriptions[{i}].subscriber_gid"))?;
            let mut subscriber_gid = Gid::default();
            subscriber_gid.0.copy_from_slice(&g);
            let b = unhex(
                &s.inform_info,
                InformInfo::SIZE,
                &format!("subscriptions[{i}].inform_info"),
            )?;
            let inform_info = InformInfo::decode(&b).map_err(|e| format!("subscriptions[{i}].inform_info: {e}"))?;
            if s.qpn > 0x00FF_FFFF {
                return Err(format!("subscriptions[{i}].qpn: {:#x} is above 24 bits", s.qpn));
            }
            subscriptions.push(Subscription {
                subscriber_gid,
                subscriber_enum: s.subscriber_enum,
                inform_info,
                lid: s.lid,
                qpn: s.qpn,
                sl: s.sl,
                pkey_index: s.pkey_index,
            });
        }
        let mcast = mcast_from_file(&f.mcast_groups, f.mcast_next_mgid)?;
        Ok(Registry {
            services,
            subscriptions,
            mcast,
        })
    }
}

/// The multicast state of a file: every group's image, distinct MGIDs and MLIDs (in
/// 0xC000..=0xFFFE), members with a JoinState of 1..=15.
fn mcast_from_file(groups: &[McGroupEntry], next_mgid: u32) -> Result<McastState, String> {
    if groups.len() > mcast::MAX_GROUPS {
        return Err(format!(
            "mcast_groups: {} entries (at most {})",
            groups.len(),
            mcast::MAX_GROUPS
        ));
    }
    let mut st = McastState {
        next_mgid,
        ..Default::default()
    };
    let mut first_at = BTreeMap::new();
    for (i, e) in groups.iter().enumerate() {
        let b = unhex(&e.record, McMemberRecord::SIZE, &format!("mcast_groups[{i}].record"))?;
        let rec = McMemberRecord::decode(&b).map_err(|e| format!("mcast_groups[{i}].record: {e}"))?;
        if !(mcast::MLID_START..=mcast::MLID_END).contains(&rec.mlid) {
            return Err(format!(
                "mcast_groups[{i}].record: MLID {:#06x} is not a multicast LID",
                rec.mlid
            ));
        }
        if let Some(j) = first_at.insert(rec.mgid, i) {
            return Err(format!("mcast_groups[{i}]: same MGID as mcast_groups[{j}]"));
        }
        if let Some(other) = st.mlids.insert(rec.mlid, rec.mgid) {
            let j = first_at.get(&other).copied().unwrap_or_default();
            return Err(format!(
                "mcast_groups[{i}]: MLID {:#06x} also held by mcast_groups[{j}]",
                rec.mlid
            ));
        }
        let mut members = BTreeMap::new();
        for (k, m) in e.members.iter().enumerate() {
            let what = format!("mcast_groups[{i}].members[{k}]");
            let g = unhex(&m.port_gid, 16, &format!("{what}.port_gid"))?;
            let mut port_gid = Gid::default();
            port_gid.0.copy_from_slice(&g);
            if !(1..=15).contains(&m.join_state) {
                return Err(format!("{what}.join_state: {} (1 to 15)", m.join_state));
            }
            if members
                .insert(
                    port_gid.guid(),
                    Member {
                        port_gid,
                        join_state: m.join_state,
                        proxy: m.proxy,
                    },
                )
                .is_some()
            {
                return Err(format!("{what}: the port is already a member of this group"));
            }
        }
        st.groups.insert(
            rec.mgid,
            Group {
                rec,
                well_known: e.well_known,
                members,
            },
        );
    }
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Raw;

    fn sample() -> Registry {
        let mut r = Registry::default();
        let mut rec = ServiceRecord {
            service_id: 0x10,
            service_gid: Gid::new(0xfe80 << 48, 7),
            service_pkey: 0xffff,
            service_lease: 30,
            ..Default::default()
        };
        rec.service_name.0[..3].copy_from_slice(b"mgs");
        rec.service_key = Raw([9; 16]);
        r.services.insert(
            (rec.service_id, rec.service_gid, rec.service_pkey),
            ServiceEntry {
                record: rec.clone(),
                expires_unix_ms: Some(1_764_000_030_000),
            },
        );
        let forever = ServiceRecord {
            service_id: 0x11,
            service_lease: 0xffff_ffff,
            ..rec
        };
        r.services.insert(
            (forever.service_id, forever.service_gid, forever.service_pkey),
            ServiceEntry {
                record: forever,
                expires_unix_ms: None,
            },
        );
        r.subscriptions.push(Subscription {
            subscriber_gid: Gid::new(0xfe80 << 48, 8),
            subscriber_enum: 2,
            inform_info: InformInfo {
                lid_range_begin: 0xffff,
                is_generic: 1,
                subscribe: 1,
                trap_type: 0xffff,
                trap_number: 64,
                qpn: 0x12_3456,
                resp_time_value: 18,
                producer_type: 0xff_ffff,
                ..Default::default()
            },
            lid: 12,
            qpn: 0x12_3456,
            sl: 1,
            pkey_index: 3,
        });
        r
    }

    #[test]
    fn the_registry_round_trips_through_json_with_its_keys_and_leases() {
        let r = sample();
        let text = serde_json::to_string_pretty(&r).unwrap();
        assert!(text.contains("\"version\": 1"), "{text}");
        assert!(text.contains("\"expires_unix_ms\": null"), "{text}");
        let back: Registry = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r);
        // Keys absent from a hand-written file: defaults; unknown keys: ignored.
        let empty: Registry = serde_json::from_str(r#"{"version": 1, "note": "x"}"#).unwrap();
        assert!(empty.is_empty());
    }

    #[test]
    fn a_bad_file_names_the_entry_and_field_at_fault() {
        let good = serde_json::to_value(sample()).unwrap();
        type Edit = Box<dyn Fn(&mut serde_json::Value)>;
        let cases: Vec<(Edit, &str)> = vec![
            (Box::new(|v| v["version"] = 3.into()), "version: 3"),
            (
                Box::new(|v| v["service_records"][1]["record"] = "00".into()),
                "service_records[1].record: 2 hex digits (expected 352)",
            ),
            (
                Box::new(|v| {
                    let s = v["service_records"][0]["record"]
                        .as_str()
                        .unwrap()
                        .replacen('0', "g", 1);
                    v["service_records"][0]["record"] = s.into();
                }),
                "service_records[0].record: \"",
            ),
            (
                Box::new(|v| {
                    let first = v["service_records"][0].clone();
                    v["service_records"][1] = first;
                }),
                "service_records[1]: same ServiceID, ServiceGID and ServiceP_Key as service_records[0]",
            ),
            (
                Box::new(|v| v["subscriptions"][0]["qpn"] = 0x100_0000.into()),
                "subscriptions[0].qpn: 0x1000000 is above 24 bits",
            ),
            (
                Box::new(|v| v["subscriptions"][0]["subscriber_gid"] = "fe80".into()),
                "subscriptions[0].subscriber_gid: 4 hex digits (expected 32)",
            ),
            (
                Box::new(|v| v["subscriptions"][0]["lid"] = "twelve".into()),
                "invalid type",
            ),
        ];
        for (edit, why) in cases {
            let mut v = good.clone();
            edit(&mut v);
            let e = serde_json::from_value::<Registry>(v).unwrap_err().to_string();
            assert!(e.contains(why), "{why}: {e}");
        }
    }
}
