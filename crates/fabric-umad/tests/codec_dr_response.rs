//! The directed-route GetResp the manager sends when another subnet manager (or `sminfo -D`)
//! asks for its SMInfo over directed route, against byte images written out by hand from IBA
//! vol. 1 14.2.2 (DR SMP header: D bit in the top bit of the status word @4, HopPointer @6,
//! HopCount @7, DrSLID @32, DrDLID @34, InitialPath @128, ReturnPath @192) and 14.2.5.13
//! (SMInfo: GUID @0, SM_Key @8, ActCount @16, Priority << 4 | SMState @20), not from the
//! encoder under test.

use fabric_umad::mad::*;

/// 256 bytes from 8 lines of 64 hex digits (32 bytes each).
fn image(lines: [&str; 8]) -> [u8; MAD_SIZE] {
    let text: String = lines.concat();
    let b = parse_hex(&text).expect("hex");
    assert_eq!(b.len(), MAD_SIZE);
    b.try_into().expect("256 bytes")
}

const ZERO32: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// SubnGet(SMInfo) as it reaches the manager on a real port after two hops: HopCount 2, the
/// kernel's SMI moved the HopPointer to HopCount + 1 = 3; InitialPath 3,1 (the requester's
/// output ports); ReturnPath 5,2 (the input ports the two hops wrote); permissive
/// DrSLID/DrDLID; TID 0x00000001_0000002a (the requester's agent in the high half).
fn get_request_on_a_real_port() -> Smp {
    Smp::parse(&image([
        "0181010100000302000000010000002a00200000000000000000000000000000",
        "ffffffff00000000000000000000000000000000000000000000000000000000",
        ZERO32,
        ZERO32,
        "0003010000000000000000000000000000000000000000000000000000000000",
        ZERO32,
        "0005020000000000000000000000000000000000000000000000000000000000",
        ZERO32,
    ]))
    .expect("an SMP")
}

fn our_sm_info() -> SmInfo {
    SmInfo {
        guid: 0x0002_c900_0000_0001,
        sm_key: 0,
        act_count: 256,
        priority: 14,
        state: SM_STATE_MASTER,
    }
}

#[test]
fn dr_sminfo_get_response_byte_image() {
    let req = get_request_on_a_real_port();
    assert!(req.is_request() && !req.direction());
    assert_eq!((req.hop_pointer(), req.hop_count()), (3, 2));
    assert_eq!(req.initial_path(), &[3, 1]);
    assert_eq!(req.return_path(), &[5, 2]);
    assert_eq!((req.dr_slid(), req.dr_dlid()), (PERMISSIVE_LID, PERMISSIVE_LID));
    let resp = req.dr_response(0, &our_sm_info().encode());
    // GetResp (0x81) with the D bit (0x8000 in the status word); HopPointer still 3 (the
    // kernel steps it down as the response leaves), HopCount 2, TID whole, attribute SMInfo
    // (0x0020), DrSLID/DrDLID, InitialPath and ReturnPath untouched; the data is SMInfo:
    // GUID 0x0002c90000000001, SM_Key 0, ActCount 0x100, priority 14 / MASTER = 0xe3.
    let want = image([
        "0181018180000302000000010000002a00200000000000000000000000000000",
        "ffffffff00000000000000000000000000000000000000000000000000000000",
        "0002c90000000001000000000000000000000100e30000000000000000000000",
        ZERO32,
        "0003010000000000000000000000000000000000000000000000000000000000",
        ZERO32,
        "0005020000000000000000000000000000000000000000000000000000000000",
        ZERO32,
    ]);
    assert_eq!(to_hex(&resp.bytes), to_hex(&want));
    assert!(resp.direction() && !resp.is_request());
    assert_eq!(resp.status(), 0);
    // `response` picks the directed-route form for a class 0x81 request.
    assert_eq!(req.response(0, &our_sm_info().encode()), resp);
    assert_eq!(SmInfo::decode(resp.data()), our_sm_info());
}

#[test]
fn dr_response_under_ibsim_keeps_hop_pointer_zero() {
    // ibsim forwards a directed-route request to the SM client without moving the HopPointer
    // (0) and writes the ReturnPath it walked (entry 0: the requester's port, then the port the
    // SMP entered at each hop); it only accepts a response whose HopPointer is still 0 and whose
    // D bit matches the method, and routes it back along that ReturnPath. Two hops from a CA
    // port 1 through a switch (in 3, out 7) to the manager's CA port 1: InitialPath 1,7,
    // ReturnPath 1,3,1.
    let req = Smp::parse(&image([
        "0181010100000002000000030000beef00200000000000000000000000000000",
        "ffffffff00000000000000000000000000000000000000000000000000000000",
        ZERO32,
        ZERO32,
        "0001070000000000000000000000000000000000000000000000000000000000",
        ZERO32,
        "0103010000000000000000000000000000000000000000000000000000000000",
        ZERO32,
    ]))
    .expect("an SMP");
    assert_eq!(req.return_path(), &[3, 1]);
    let resp = req.dr_response(0, &our_sm_info().encode());
    let want = image([
        "0181018180000002000000030000beef00200000000000000000000000000000",
        "ffffffff00000000000000000000000000000000000000000000000000000000",
        "0002c90000000001000000000000000000000100e30000000000000000000000",
        ZERO32,
        "0001070000000000000000000000000000000000000000000000000000000000",
        ZERO32,
        "0103010000000000000000000000000000000000000000000000000000000000",
        ZERO32,
    ]);
    assert_eq!(to_hex(&resp.bytes), to_hex(&want));
    assert_eq!(resp.hop_pointer(), 0);
}

#[test]
fn dr_sminfo_set_from_another_sm_and_error_status() {
    // SubnSet(SMInfo) HANDOVER (modifier 1) from a standby SM (GUID 0x...beef, priority 1,
    // STANDBY = 0x12), zero hops (the requester is on this node).
    let req = Smp::parse(&image([
        "0181010200000100000000050000000700200000000000010000000000000000",
        "ffffffff00000000000000000000000000000000000000000000000000000000",
        "000000000000beef000000000000000000000009120000000000000000000000",
        ZERO32,
        ZERO32,
        ZERO32,
        ZERO32,
        ZERO32,
    ]))
    .expect("an SMP");
    assert_eq!(req.attr_mod(), SMINFO_HANDOVER);
    assert_eq!(sminfo_modifier_name(req.attr_mod()), "HANDOVER");
    let them = SmInfo::decode(req.data());
    assert_eq!((them.guid, them.priority, them.state), (0xbeef, 1, SM_STATE_STANDBY));
    let resp = req.dr_response(0, &our_sm_info().encode());
    // Method Set -> GetResp, modifier echoed, HopPointer 1 kept, our SMInfo in place of theirs.
    let want = image([
        "0181018180000100000000050000000700200000000000010000000000000000",
        "ffffffff00000000000000000000000000000000000000000000000000000000",
        "0002c90000000001000000000000000000000100e30000000000000000000000",
        ZERO32,
        ZERO32,
        ZERO32,
        ZERO32,
        ZERO32,
    ]);
    assert_eq!(to_hex(&resp.bytes), to_hex(&want));
    // A 15-bit status goes under the D bit: 0x000c "unsupported attribute" -> 0x800c.
    let e = req.dr_response(STATUS_UNSUPPORTED_ATTR, &[0; SMP_DATA_SIZE]);
    assert_eq!(&e.bytes[4..6], &[0x80, 0x0c]);
    assert_eq!(e.status(), STATUS_UNSUPPORTED_ATTR);
    // The LID-routed form has no D bit.
    let mut lid = req.clone();
    lid.bytes[1] = CLASS_SMP_LID;
    let l = lid.response(STATUS_UNSUPPORTED_ATTR, &[0; SMP_DATA_SIZE]);
    assert_eq!(&l.bytes[..6], &[0x01, 0x01, 0x01, 0x81, 0x00, 0x0c]);
    assert!(!l.direction());
}
