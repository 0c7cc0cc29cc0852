//! Notation parsing (round trip, precise errors, no panics) and recognition of generated
//! fabrics (accepts exactly the complete, live generated fat-trees).

use fabric_topology::gen::{generate, GenError, PgftLayout, PgftSpec, SpecKind, SwitchAddr};
use fabric_topology::{Fabric, FabricBuilder, FabricEvent, NodeType, Remote, SwitchId};
use proptest::collection::vec;
use proptest::prelude::*;

fn parse(s: &str) -> Result<PgftSpec, GenError> {
    s.parse()
}

fn join(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Display gives the canonical notation, which parses back to the same spec, whatever the
    /// case and the blanks of the input.
    #[test]
    fn notation_round_trips(h in 1usize..=4, m in vec(1u32..=6, 4), w in vec(1u32..=6, 4), p in vec(1u32..=3, 4),
                            kind in 0u8..3, lower in any::<bool>(), blanks in any::<bool>()) {
        let (m, mut w, mut p) = (m[..h].to_vec(), w[..h].to_vec(), p[..h].to_vec());
        w[0] = 1;
        p[0] = 1;
        let (name, text) = match kind {
            0 => ("PGFT", format!("PGFT({h};{};{};{})", join(&m), join(&w), join(&p))),
            1 => ("XGFT", format!("XGFT({h};{};{})", join(&m), join(&w))),
            _ => ("KARY", format!("KARY({},{h})", m[0])),
        };
        let mut input = if lower { text.to_lowercase() } else { text.clone() };
        if blanks {
            input = input.replace(';', " ; ").replace(',', " ,\t").replace('(', " ( ");
        }
        match parse(&input) {
            Ok(spec) => {
                prop_assert_eq!(spec.to_string(), text.clone());
                prop_assert_eq!(spec.kind.name(), name);
                prop_assert_eq!(parse(&spec.to_string()).unwrap(), spec.clone());
                if kind == 0 {
                    prop_assert_eq!((&spec.m, &spec.w, &spec.p), (&m, &w, &p));
                }
            }
            // Only the port limit can refuse these vectors.
            Err(e) => prop_assert!(matches!(e, GenError::TooManyPorts { .. }), "{}: {}", input, e),
        }
    }

    /// Arbitrary text never panics; syntax errors point inside the text (or just past its end).
    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,40}") {
        if let Err(GenError::Syntax { spec, column, .. }) = parse(&s) {
            prop_assert_eq!(&spec, &s);
            prop_assert!(column >= 1 && column <= s.chars().count() + 1);
        }
    }

    /// Near-misses of a valid string never panic either.
    #[test]
    fn mutated_notation_never_panics(pos in 0usize..30, c in proptest::char::range(' ', '~'), delete in any::<bool>()) {
        let mut chars: Vec<char> = "PGFT(3;18,9,36;1,9,18;1,2,1)".chars().collect();
        let pos = pos.min(chars.len() - 1);
        if delete { chars.remove(pos); } else { chars[pos] = c; }
        let s: String = chars.into_iter().collect();
        if let Ok(spec) = parse(&s) {
            prop_assert_eq!(spec.validate(), Ok(()));
        }
    }
}

#[test]
fn parse_errors_say_where_and_what() {
    let cases = [
        (
            "PGFT(3;18,9,36;1,9;1,2,1)",
            "PGFT(3;18,9,36;1,9;1,2,1): expected 3 values for w, got 2",
        ),
        (
            "QFT(3;18,9,36;1,9,18;1,2)",
            "QFT(3;18,9,36;1,9,18;1,2): expected 3 values for p, got 2",
        ),
        ("PGFT(0;4;1;1)", "PGFT(0;4;1;1): h is 0, it must be at least 1"),
        (
            "PGFT(2;4,4;1,4;1,0)",
            "PGFT(2;4,4;1,4;1,0): p2 is 0, it must be at least 1",
        ),
        (
            "",
            ": at column 1: expected a fat-tree kind (PGFT, XGFT, KARY, QFT or RLFT), found end of input",
        ),
        (
            "PGFT[2;4,4;1,4;1,1]",
            "PGFT[2;4,4;1,4;1,1]: at column 5: expected '(' after PGFT, found '['",
        ),
        (
            "PGFT(2,4,4;1,4;1,1)",
            "PGFT(2,4,4;1,4;1,1): at column 7: expected ';' after h, found ','",
        ),
        (
            "XGFT(2;4,4;1,4;1,1)",
            "XGFT(2;4,4;1,4;1,1): at column 15: expected ')' after the w values, found ';'",
        ),
        ("KARY(4;3)", "KARY(4;3): at column 7: expected ',' after k, found ';'"),
        ("RLFT(3;36;1,2)", "RLFT(3;36;1,2): expected 3 values for p, got 2"),
        ("RLFT(2;36;1,5)", "RLFT(2;36;1,5): K = 36 is not divisible by p2 = 5"),
        (
            "PGFT(2;4, 4;1,4;1,-1)",
            "PGFT(2;4, 4;1,4;1,-1): at column 19: expected a number for p, found '-'",
        ),
    ];
    for (input, want) in cases {
        assert_eq!(parse(input).unwrap_err().to_string(), want, "input {input:?}");
    }
}

#[test]
fn rlft_and_kary_display_as_their_canonical_forms() {
    assert_eq!(parse("rlft(2;8;1,2)").unwrap().to_string(), "PGFT(2;4,4;1,2;1,2)");
    assert_eq!(parse("kary( 4 , 3 )").unwrap().to_string(), "KARY(4,3)");
    assert_eq!(parse("KARY(4,3)").unwrap().kind, SpecKind::Kary);
}

/// Copies a fabric with its switches and end ports in reverse record order (as a file written
/// in another order would give).
fn reversed(f: &Fabric) -> Fabric {
    let n = f.num_switches() as u32;
    let ne = f.num_end_ports() as u32;
    let new_sw = |s: SwitchId| SwitchId(n - 1 - s.0);
    let mut b = FabricBuilder::new();
    for s in f.switches().iter().rev() {
        b.add_switch(s.guid, s.desc.clone(), s.nports).unwrap();
    }
    for e in f.end_ports().iter().rev() {
        b.add_end_port(
            e.port_guid,
            e.node_guid,
            e.desc.clone(),
            e.port_num,
            e.node_ports,
            NodeType::Compute,
        )
        .unwrap();
    }
    for (i, s) in f.switches().iter().enumerate() {
        for (pn, p) in s.external_ports() {
            match p.remote {
                Remote::Switch { sw, port } if (sw.idx(), port) > (i, pn) => b
                    .connect_switches(new_sw(SwitchId(i as u32)), pn, new_sw(sw), port)
                    .unwrap(),
                Remote::EndPort(ep) => b
                    .connect_end_port(
                        fabric_topology::EndPortId(ne - 1 - ep.0),
                        new_sw(SwitchId(i as u32)),
                        pn,
                    )
                    .unwrap(),
                _ => {}
            }
        }
    }
    b.build()
}

#[test]
fn recognize_reads_any_record_order() {
    for s in [
        "PGFT(3;4,2,4;1,2,2;1,2,1)",
        "QFT(3;4,2,4;1,2,2;1,2,1)",
        "KARY(3,2)",
        "XGFT(1;5;1)",
    ] {
        let g = generate(&parse(s).unwrap()).unwrap();
        let r = reversed(&g.fabric);
        let layout = PgftLayout::recognize(&r).unwrap();
        assert_eq!(layout.spec.to_string(), s);
        let n = r.num_switches();
        for id in r.switch_ids() {
            assert_eq!(layout.switch_addr[id.idx()], g.layout.switch_addr[n - 1 - id.idx()]);
            assert_eq!(layout.switch_of(&layout.switch_addr[id.idx()]), Some(id));
        }
        let ne = r.num_end_ports() as u32;
        assert!(r.end_port_ids().all(|e| layout.end_node_index(e) == ne - 1 - e.0));
    }
}

#[test]
fn recognize_rejects_what_is_not_a_complete_live_generated_fat_tree() {
    let g = generate(&parse("PGFT(2;3,4;1,2;1,2)").unwrap()).unwrap();
    let f = &g.fabric;
    let leaf0 = f.switch(SwitchId(0)).guid;
    let err = |f: &Fabric| PgftLayout::recognize(f).unwrap_err().to_string();

    let down = f.apply(&[FabricEvent::LinkDown { switch: leaf0, port: 4 }]).unwrap();
    assert_eq!(
        err(&down),
        "not a complete generated fat-tree: switch 0x0002c90000000000 'PGFT L0 S(0,0)' port 4: the link is down"
    );
    let dead = f.apply(&[FabricEvent::SwitchDown(f.switch(SwitchId(5)).guid)]).unwrap();
    assert_eq!(
        err(&dead),
        "not a complete generated fat-tree: switch 0x0002c90100000001 'PGFT L1 S(0,1)' is down"
    );
    let node_down = f
        .apply(&[FabricEvent::EndPortDown(
            f.end_port(fabric_topology::EndPortId(2)).port_guid,
        )])
        .unwrap();
    assert!(err(&node_down).ends_with("'n(2,0)' is down"), "{}", err(&node_down));

    // A missing cable (degraded): the switch port that lost it is named.
    let cut = fabric_topology::gen::degrade(
        f,
        &fabric_topology::gen::Degrade {
            remove_links: 1,
            remove_switches: 0,
            seed: 5,
        },
    )
    .unwrap();
    assert!(err(&cut).contains("found no cable"), "{}", err(&cut));

    // A hand-made fabric whose names do not follow the scheme.
    let mut b = FabricBuilder::new();
    let a = b.add_switch(0x10, "leaf", 4).unwrap();
    let s = b.add_switch(0x20, "spine", 4).unwrap();
    b.connect_switches(a, 3, s, 1).unwrap();
    assert_eq!(
        err(&b.build()),
        "not a complete generated fat-tree: switch 0x0000000000000010 'leaf' is not named like a generated switch (e.g. 'PGFT L0 S(0,1,2)')"
    );

    // A hand-made fabric with the right names but other GUIDs.
    let mut b = FabricBuilder::new();
    let a = b.add_switch(0x10, "XGFT L0 S(0)", 1).unwrap();
    let e = b.add_end_port(0x101, 0x100, "n(0)", 1, 1, NodeType::Compute).unwrap();
    b.connect_end_port(e, a, 1).unwrap();
    assert_eq!(
        err(&b.build()),
        "not a complete generated fat-tree: switch 0x0000000000000010 'XGFT L0 S(0)': the GUID is not the generated GUID of any XGFT(1;1;1) switch"
    );

    // Two cables swapped between parents: the names and counts fit, the cabling does not.
    let mut b = FabricBuilder::new();
    for s in f.switches() {
        b.add_switch(s.guid, s.desc.clone(), s.nports).unwrap();
    }
    for e in f.end_ports() {
        let id = b
            .add_end_port(
                e.port_guid,
                e.node_guid,
                e.desc.clone(),
                e.port_num,
                1,
                NodeType::Compute,
            )
            .unwrap();
        let (sw, p) = e.attach.unwrap();
        b.connect_end_port(id, sw, p).unwrap();
    }
    let swap = |sw: SwitchId, port: u8| -> (SwitchId, u8) {
        // Leaf 0's cable on port 4 goes where its port 6 cable went, and the other way round.
        match (sw.0, port) {
            (0, 4) => (SwitchId(0), 6),
            (0, 6) => (SwitchId(0), 4),
            x => (SwitchId(x.0), x.1),
        }
    };
    for (i, s) in f.switches().iter().enumerate() {
        for (pn, p) in s.external_ports() {
            if let Remote::Switch { sw, port } = p.remote {
                if (sw.idx(), port) > (i, pn) {
                    let (a, ap) = swap(SwitchId(i as u32), pn);
                    b.connect_switches(a, ap, sw, port).unwrap();
                }
            }
        }
    }
    let miscabled = b.build();
    assert_eq!(miscabled.count_links(), f.count_links());
    assert!(err(&miscabled).contains("'PGFT L0 S(0,0)' port 4: expected a cable to switch 0x0002c90100000000 port 1, found a cable to switch 0x0002c90100000001 port 1"), "{}", err(&miscabled));
}

#[test]
fn addresses_come_back_from_guids() {
    let g = generate(&parse("QFT(3;4,2,4;1,2,2;1,2,1)").unwrap()).unwrap();
    for (i, s) in g.fabric.switches().iter().enumerate() {
        assert_eq!(g.layout.addr_of_guid(s.guid).as_ref(), Some(&g.layout.switch_addr[i]));
        assert_eq!(
            SwitchAddr::parse(s.desc.strip_prefix("QFT ").unwrap()).as_ref(),
            Some(&g.layout.switch_addr[i])
        );
    }
    assert_eq!(
        g.layout
            .addr_of_guid(g.fabric.end_port(fabric_topology::EndPortId(0)).node_guid),
        None
    );
}

/// A generated fabric written as an ibnetdiscover file and read back is still recognized, with
/// the same layout; a degraded one reads back without its removed cables and is refused.
#[test]
fn generated_files_read_back_and_are_recognized() {
    use fabric_topology::gen::{degrade, Degrade};
    use fabric_topology::ibnet;
    for s in ["PGFT(3;4,2,4;1,2,2;1,2,1)", "QFT(3;4,2,4;1,2,2;1,2,1)", "KARY(2,3)"] {
        let g = generate(&parse(s).unwrap()).unwrap();
        let text = ibnet::write(&g.fabric);
        let back = ibnet::parse(&text, s).unwrap().fabric;
        assert_eq!(PgftLayout::recognize(&back).unwrap(), g.layout, "{s}");
        let cut = degrade(
            &g.fabric,
            &Degrade {
                remove_links: 2,
                remove_switches: 1,
                seed: 9,
            },
        )
        .unwrap();
        let back = ibnet::parse(&ibnet::write(&cut), s).unwrap().fabric;
        assert_eq!(back.count_links(), cut.count_links(), "{s}");
        assert_eq!(back.num_switches(), g.fabric.num_switches() - 1, "{s}");
        assert!(PgftLayout::recognize(&back).is_err(), "{s}");
    }
}
