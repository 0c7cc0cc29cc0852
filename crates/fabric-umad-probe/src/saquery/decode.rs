//! Record images → JSON fields, through the record types of `fabric_sa::records` (their
//! `serde::Serialize` form: the field names `saquery` prints where it prints them raw).
//! A MultiPathRecord query is answered with PathRecords (IBA 15.2.5.17; OpenSM's answers
//! carry the MultiPathRecord attribute), so its images decode as PathRecord.

use serde_json::Value;

/// The decoded fields of one record image of attribute `attr_id` (`fabric_sa::records::decode_any`);
/// `None` for an attribute without a record type (SLtoVL, VLArb, P_Key table, trace, ...) or an
/// image shorter than its record.
pub fn fields(attr_id: u16, image: &[u8]) -> Option<Value> {
    serde_json::to_value(fabric_sa::records::decode_any(attr_id, image)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use fabric_sa::records::*;
    use fabric_sa::wire::attr;

    #[test]
    fn every_record_attribute_decodes_from_its_image() {
        let node = NodeRecord {
            lid: 7,
            node_type: 1,
            num_ports: 2,
            node_guid: 0x0002_c903_0000_0010,
            port_guid: 0x0002_c903_0000_0011,
            port_num: 1,
            ..NodeRecord::default()
        };
        let mut b = [0u8; NodeRecord::SIZE];
        node.encode(&mut b);
        let v = fields(attr::NODE_RECORD, &b).expect("NodeRecord");
        assert_eq!(v, serde_json::to_value(&node).unwrap());
        assert_eq!(v["lid"], 7);
        assert_eq!(v["node_guid"], serde_json::to_value(node.node_guid).unwrap());

        let path = PathRecord {
            dgid: Gid::new(0xfe80_0000_0000_0000, 0x11),
            sgid: Gid::new(0xfe80_0000_0000_0000, 0x22),
            dlid: 3,
            slid: 4,
            ..PathRecord::default()
        };
        let mut b = [0u8; PathRecord::SIZE];
        path.encode(&mut b);
        let want = serde_json::to_value(path).unwrap();
        assert_eq!(fields(attr::PATH_RECORD, &b), Some(want.clone()));
        assert_eq!(
            fields(attr::MULTI_PATH_RECORD, &b),
            Some(want),
            "MultiPath answers are PathRecords"
        );

        // Every attribute with a record type decodes a zero image of its size; a short image
        // or an attribute without one is no record.
        for (id, size) in [
            (attr::CLASS_PORT_INFO, ClassPortInfo::SIZE),
            (attr::NOTICE, Notice::SIZE),
            (attr::INFORM_INFO, InformInfo::SIZE),
            (attr::PORT_INFO_RECORD, PortInfoRecord::SIZE),
            (attr::SWITCH_INFO_RECORD, SwitchInfoRecord::SIZE),
            (attr::LFT_RECORD, LftRecord::SIZE),
            (attr::SM_INFO_RECORD, SmInfoRecord::SIZE),
            (attr::LINK_RECORD, LinkRecord::SIZE),
            (attr::GUID_INFO_RECORD, GuidInfoRecord::SIZE),
            (attr::SERVICE_RECORD, ServiceRecord::SIZE),
            (attr::MC_MEMBER_RECORD, McMemberRecord::SIZE),
            (attr::INFORM_INFO_RECORD, InformInfoRecord::SIZE),
        ] {
            let img = vec![0u8; size];
            assert!(fields(id, &img).is_some_and(|v| v.is_object()), "{id:#06x}");
            assert_eq!(fields(id, &img[..size - 1]), None, "{id:#06x} short");
        }
        assert_eq!(fields(attr::SL_TO_VL_RECORD, &[0u8; 64]), None);
    }
}
