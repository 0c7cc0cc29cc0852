//! Issue #19: the mock driver's `from_generator` (`[driver.mock] generator`) accepts the direct
//! topology notations: the discovered fabric is exactly the generated one, degradation removes
//! what it says, and a bad notation is a clear topology error.

use fabric_mock::MockFabric;
use fabric_southbound::{DriverError, SouthboundDriver};
use fabric_topology::gen::{generate_str, Degrade};

#[tokio::test]
async fn direct_generators_are_discovered_as_generated() {
    for spec in [
        "SLIMFLY(5;4)",
        "SLIMFLY(7)",
        "DRAGONFLY(4,2,2;5)",
        "HYPERX(3,4;2;2,1)",
        "RRG(24,5,2;11)",
    ] {
        let m = MockFabric::from_generator(spec, None).unwrap();
        let want = generate_str(spec, None).unwrap();
        assert_eq!(m.cabling(), &want, "{spec}");
        assert_eq!(m.discover().await.unwrap(), want, "{spec}");
    }
    let d = Degrade {
        remove_links: 4,
        remove_switches: 1,
        seed: 2,
    };
    let m = MockFabric::from_generator("SLIMFLY(5;4)", Some(&d)).unwrap();
    let f = m.discover().await.unwrap();
    assert_eq!((f.num_switches(), f.num_end_ports()), (49, 196));
    assert_eq!(f.count_links().0, 175 - 7 - 4);
}

#[test]
fn bad_direct_notation_is_a_topology_error() {
    match MockFabric::from_generator("SLIMFLY(10)", None) {
        Err(DriverError::Topology { message, .. }) => {
            assert!(message.contains("q = 10 is not a prime power"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}
