//! The persisted registry (`sa-registry.json`, version 1) read by the registry now that it
//! uses the shared `fabric_sa::records` codecs: `registry_file_v1.json` was written by the
//! registry's former private codec (every field of a ServiceRecord and of an InformInfo set),
//! and must read back into the same records and write back to the same text.

use fabric_sa::records::Gid;
use fabric_sa::registry::Registry;

const V1: &str = include_str!("registry_file_v1.json");

#[test]
fn a_version_1_file_of_the_former_codec_reads_into_the_records_types() {
    let reg: Registry = serde_json::from_str(V1).unwrap();
    let services: Vec<_> = reg.service_records().collect();
    assert_eq!(services.len(), 3);
    let (a, b, c) = (&services[0].record, &services[1].record, &services[2].record);
    assert_eq!(
        (a.service_id, a.service_gid, a.service_pkey, a.service_lease),
        (0x10, Gid::new(0xfe80 << 48, 7), 0xffff, 30)
    );
    assert_eq!(a.service_key.0, [9; 16]);
    assert_eq!(a.service_name.text(), "mgs");
    assert_eq!(services[0].expires_unix_ms, Some(1_764_000_030_000));
    assert_eq!((b.service_id, b.service_lease), (0x11, 0xffff_ffff));
    assert_eq!(services[1].expires_unix_ms, None);
    assert_eq!((c.service_id, c.service_pkey), (0x12, 0x8001));
    assert_eq!(c.service_name.0, [b'n'; 64]);
    assert_eq!(c.service_data8, std::array::from_fn(|i| i as u8 + 1));
    assert_eq!(c.service_data16, std::array::from_fn(|i| 0x1600 + i as u16));
    assert_eq!(c.service_data32, std::array::from_fn(|i| 0x3200_0000 + i as u32));
    assert_eq!(c.service_data64, [0x6400_0000_0000_0000, 0x6400_0000_0000_0001]);

    let subs = reg.subscriptions();
    assert_eq!(subs.len(), 2);
    let (s, v) = (&subs[0], &subs[1]);
    assert_eq!(s.subscriber_gid, Gid::new(0xfe80 << 48, 8));
    assert_eq!(
        (s.subscriber_enum, s.lid, s.qpn, s.sl, s.pkey_index),
        (2, 12, 0x12_3456, 1, 3)
    );
    let ii = &s.inform_info;
    assert_eq!(
        (
            ii.gid,
            ii.lid_range_begin,
            ii.lid_range_end,
            ii.is_generic,
            ii.subscribe
        ),
        (Gid::default(), 0xffff, 0, 1, 1)
    );
    assert_eq!(
        (
            ii.trap_type,
            ii.trap_number,
            ii.qpn,
            ii.resp_time_value,
            ii.producer_type
        ),
        (0xffff, 64, 0x12_3456, 18, 0xff_ffff)
    );
    let ii = &v.inform_info;
    assert_eq!(v.subscriber_enum, 3);
    assert_eq!(
        (ii.gid, ii.lid_range_begin, ii.lid_range_end, ii.is_generic),
        (Gid::new(0xfe80 << 48, 9), 0, 0x30, 0)
    );
    assert_eq!(
        (ii.trap_type, ii.trap_number, ii.producer_type),
        (4, 0x1234, 0x02c9),
        "a vendor subscription: DeviceID and VendorID in the generic fields' places"
    );
}

#[test]
fn a_version_1_file_is_written_back_unchanged() {
    let reg: Registry = serde_json::from_str(V1).unwrap();
    let text = serde_json::to_string_pretty(&reg).unwrap();
    assert_eq!(text.trim_end(), V1.trim_end(), "same version, keys and wire images");
}
