//! Cabling validation on direct topologies (Slim Fly paper §3.4): a generated Slim Fly, Dragonfly
//! and HyperX compared with a miswired copy (two cables swapped, one missing) is reported exactly.

use fabric_topology::gen::generate_str;
use fabric_topology::validate::{compare, Cable, Endpoint, Miswire, NodeRef};
use fabric_topology::{Fabric, PortNum, Remote};

fn ep(f: &Fabric, name: &str, port: PortNum) -> Endpoint {
    let s = f.switch(f.find_switch(name).unwrap());
    Endpoint {
        node: NodeRef::Switch {
            guid: s.guid,
            name: s.desc.clone(),
        },
        port,
    }
}

fn far(f: &Fabric, name: &str, port: PortNum) -> Endpoint {
    match f.switch(f.find_switch(name).unwrap()).ports[port as usize].remote {
        Remote::Switch { sw, port } => ep(f, &f.switch(sw).desc, port),
        r => panic!("{r:?}"),
    }
}

/// Swaps the cables on `a` and `c`, cuts the one on `cut`, and checks the exact report.
fn check(spec: &str, a: (&str, PortNum), c: (&str, PortNum), cut: (&str, PortNum)) {
    let expected = generate_str(spec, None).unwrap();
    let actual = fabric_topology::gen::recable(&expected, [a, c], Some(cut)).unwrap();
    let r = compare(&expected, &actual);
    let (ea, ec) = (ep(&expected, a.0, a.1), ep(&expected, c.0, c.1));
    let (eb, ed) = (far(&expected, a.0, a.1), far(&expected, c.0, c.1));
    let mut want = vec![
        Miswire {
            at: ea.clone(),
            expected: Some(eb.clone()),
            actual: ed.clone(),
        },
        Miswire {
            at: ed.clone(),
            expected: Some(ec.clone()),
            actual: ea.clone(),
        },
        Miswire {
            at: ec.clone(),
            expected: Some(ed.clone()),
            actual: eb.clone(),
        },
        Miswire {
            at: eb.clone(),
            expected: Some(ea.clone()),
            actual: ec.clone(),
        },
    ];
    want.sort();
    assert_eq!(r.miswired, want, "{spec}: {r}");
    let (x, y) = (ep(&expected, cut.0, cut.1), far(&expected, cut.0, cut.1));
    let cable = if x < y {
        Cable { a: x, b: y }
    } else {
        Cable { a: y, b: x }
    };
    assert_eq!(r.missing, [cable], "{spec}: {r}");
    assert!(r.extra.is_empty() && r.down.is_empty(), "{spec}: {r}");
    assert!(r.missing_switches.is_empty() && r.extra_switches.is_empty());
    // The generated fabric itself is clean.
    assert!(compare(&expected, &expected).is_clean());
}

#[test]
fn miswired_slim_fly_is_reported_exactly() {
    // Paper's deployment: an intra-group cable of rack 0 swapped with an inter-rack cable of
    // rack 1, one inter-rack cable of rack 4 missing.
    check(
        "SLIMFLY(5;4)",
        ("SLIMFLY S(0,0,0)", 5),
        ("SLIMFLY S(1,1,3)", 9),
        ("SLIMFLY S(0,4,2)", 11),
    );
    check(
        "SLIMFLY(7)",
        ("SLIMFLY S(0,3,3)", 7 + 6),
        ("SLIMFLY S(1,0,6)", 7 + 1),
        ("SLIMFLY S(1,6,0)", 7 + 9),
    );
}

#[test]
fn miswired_dragonfly_and_hyperx_are_reported_exactly() {
    check(
        "DRAGONFLY(2)",
        ("DRAGONFLY S(0,0)", 2 + 4),
        ("DRAGONFLY S(3,2)", 2 + 1),
        ("DRAGONFLY S(8,3)", 2 + 5),
    );
    check(
        "HYPERX(4,4;2)",
        ("HYPERX S(0,0)", 3),
        ("HYPERX S(2,3)", 7),
        ("HYPERX S(1,1)", 8),
    );
}
