//! Property tests of the topology reader and writer: no panics on any input, errors on the right
//! line, write -> parse round trip on random fabrics.

use fabric_topology::ibnet::{parse, write};
use fabric_topology::{Fabric, FabricBuilder, NodeType, PortNum, SwitchId};
use proptest::prelude::*;

const REAL: [&str; 4] = [
    include_str!("data/real/ibtopotool-ufm-lab-degraded.ibnet"),
    include_str!("data/real/loginoff-sx6036-fdr10-8sw.ibnet"),
    include_str!("data/real/psmn-x5-voltaire4036-qdr.ibnet"),
    include_str!("data/real/switchib-edr-6sw-flat.ibnet"),
];

/// Lines of `text` as the reader numbers them.
fn line_count(text: &str) -> usize {
    text.split('\n').count()
}

/// The reader's contract on any input: no panic; an error names a line that exists.
fn check_any(text: &str) -> Result<(), TestCaseError> {
    match parse(text, "p") {
        Ok(p) => {
            for w in &p.warnings {
                prop_assert!(w.starts_with("p:"), "{}", w);
            }
        }
        Err(e) => {
            prop_assert_eq!(e.file.as_str(), "p");
            prop_assert!(
                e.line >= 1 && e.line <= line_count(text),
                "line {} of {}: {}",
                e.line,
                line_count(text),
                e
            );
            prop_assert!(!e.reason.is_empty());
        }
    }
    Ok(())
}

/// Fragments of the format, so that random text reaches deep into the reader.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("Switch".to_string()),
        Just("Ca".to_string()),
        Just("Hca".to_string()),
        Just("Rt".to_string()),
        Just("switchguid=".to_string()),
        Just("caguid+".to_string()),
        Just("\"S-10\"".to_string()),
        Just("\"H-20\"".to_string()),
        Just("\"a\"".to_string()),
        Just("[1]".to_string()),
        Just("[2]".to_string()),
        Just("[ext 3]".to_string()),
        Just("(21)".to_string()),
        Just("# \"d\" lid 1 4xQDR".to_string()),
        Just("\n".to_string()),
        Just("\n\n".to_string()),
        Just("\r\n".to_string()),
        Just("\t".to_string()),
        Just(" ".to_string()),
        Just("\"".to_string()),
        Just("[".to_string()),
        Just("(".to_string()),
        Just("#".to_string()),
        Just("@".to_string()),
        Just("w=4".to_string()),
        "[0-9]{1,4}",
        "0x[0-9a-f]{1,18}",
        ".{0,6}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_strings_never_panic(text in any::<String>()) {
        check_any(&text)?;
    }

    #[test]
    fn format_like_strings_never_panic(parts in prop::collection::vec(fragment(), 0..60)) {
        check_any(&parts.concat())?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// The file reader on random bytes (invalid UTF-8 included) and on real dumps with a bad
    /// byte: no panic; an error names the path and a line that exists.
    #[test]
    fn read_file_of_random_bytes_names_the_line(
        file in 0..REAL.len(),
        random in prop::collection::vec(any::<u8>(), 0..400),
        use_real in any::<bool>(),
        pos in any::<usize>(),
    ) {
        let mut bytes = if use_real { REAL[file].as_bytes().to_vec() } else { random };
        if use_real {
            let p = pos % (bytes.len() + 1);
            bytes.insert(p, 0xff);
        }
        let path = std::env::temp_dir().join(format!("ibnet-proptest-{}.topo", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        let r = fabric_topology::ibnet::read_file(&path);
        std::fs::remove_file(&path).unwrap();
        if let Err(e) = r {
            prop_assert_eq!(e.file.clone(), path.display().to_string());
            let lines = bytes.split(|&b| b == b'\n').count();
            prop_assert!(e.line >= 1 && e.line <= lines, "line {} of {}: {}", e.line, lines, e);
        } else {
            prop_assert!(!use_real, "a bad byte was accepted");
        }
    }

    /// Random edits of real dumps: cut a byte range, insert random text, duplicate or drop lines.
    #[test]
    fn mutated_real_files_never_panic(
        file in 0..REAL.len(),
        edits in prop::collection::vec((0..4u8, any::<prop::sample::Index>(), 0..200usize, ".{0,12}"), 1..6),
    ) {
        let mut text = REAL[file].to_string();
        for (kind, at, len, insert) in edits {
            let mut pos = at.index(text.len() + 1);
            while !text.is_char_boundary(pos) {
                pos -= 1;
            }
            match kind {
                0 => {
                    let mut end = (pos + len).min(text.len());
                    while !text.is_char_boundary(end) {
                        end -= 1;
                    }
                    text.replace_range(pos..end, "");
                }
                1 => text.insert_str(pos, &insert),
                2 => {
                    let lines: Vec<&str> = text.split('\n').collect();
                    let i = at.index(lines.len());
                    let mut v: Vec<&str> = lines.clone();
                    v.insert(i, lines[i]);
                    text = v.join("\n");
                }
                _ => {
                    let mut lines: Vec<&str> = text.split('\n').collect();
                    let i = at.index(lines.len());
                    lines.remove(i);
                    text = lines.join("\n");
                }
            }
        }
        check_any(&text)?;
    }

    /// One targeted defect on a port line of a valid dump is reported on exactly that line.
    #[test]
    fn a_broken_port_line_is_reported_on_its_line(
        file in 0..REAL.len(),
        pick in any::<prop::sample::Index>(),
        defect in 0..6u8,
    ) {
        let text = REAL[file];
        let mut lines: Vec<String> = text.split('\n').map(str::to_string).collect();
        let port_lines: Vec<usize> = (0..lines.len()).filter(|&i| lines[i].starts_with('[')).collect();
        let i = port_lines[pick.index(port_lines.len())];
        let line = lines[i].clone();
        let close = line.find(']').unwrap();
        let q1 = line.find('"').unwrap();
        let q2 = q1 + 1 + line[q1 + 1..].find('"').unwrap();
        let mut expected_line = i + 1;
        match defect {
            0 => lines[i] = format!("[0]{}", &line[close + 1..]),
            1 => lines[i] = format!("[300]{}", &line[close + 1..]),
            2 => lines[i] = format!("[x]{}", &line[close + 1..]),
            3 => lines[i] = format!("{}{}", &line[..q2], &line[q2 + 1..].replace('"', "'")),
            4 => lines[i] = format!("{}\"no-such-node{}", &line[..q1], &line[q2..]),
            _ => {
                lines.insert(i + 1, "bogus keyword".to_string());
                expected_line = i + 2;
            }
        }
        let broken = lines.join("\n");
        let e = parse(&broken, "p").unwrap_err();
        prop_assert_eq!(e.line, expected_line, "defect {}: {}", defect, e);
    }
}

/// A random fabric that the format can represent exactly (see `write`'s documentation).
fn fabric_strategy() -> impl Strategy<Value = Fabric> {
    let switch = (1u8..=36, "[a-zA-Z0-9;:/ _.-]{1,20}");
    let node = (1u8..=2, "[a-zA-Z0-9 _-]{1,16}", any::<bool>(), any::<bool>());
    let speeds = prop::sample::select(vec![
        "4xSDR", "4xDDR", "4xQDR", "4xFDR10", "4xFDR", "4xEDR", "1xSDR", "12xHDR",
    ]);
    (
        prop::collection::vec(switch, 1..8),
        prop::collection::vec(node, 0..24),
        prop::collection::vec(
            (
                any::<prop::sample::Index>(),
                any::<prop::sample::Index>(),
                speeds.clone(),
            ),
            0..40,
        ),
        prop::collection::vec((any::<prop::sample::Index>(), speeds), 0..48),
        any::<u64>(),
    )
        .prop_map(|(switches, nodes, cables, attach, guid_seed)| {
            let mut b = FabricBuilder::new();
            let base = guid_seed >> 16 << 16;
            for (i, (nports, desc)) in switches.iter().enumerate() {
                b.add_switch(base + 0x1000 + i as u64, desc.clone(), *nports).unwrap();
            }
            let free = |b: &FabricBuilder| -> Vec<(SwitchId, PortNum)> {
                (0..b.num_switches() as u32)
                    .flat_map(|s| {
                        let sw = b.switch(SwitchId(s));
                        (1..=sw.nports)
                            .filter(|&p| sw.ports[p as usize].remote == fabric_topology::Remote::None)
                            .map(move |p| (SwitchId(s), p))
                            .collect::<Vec<_>>()
                    })
                    .collect()
            };
            for (x, y, speed) in cables {
                let f = free(&b);
                if f.len() < 2 {
                    break;
                }
                let (a, pa) = f[x.index(f.len())];
                let (c, pc) = f[y.index(f.len())];
                if (a, pa) == (c, pc) {
                    continue;
                }
                b.connect_switches(a, pa, c, pc).unwrap();
                b.switch_mut(a).ports[pa as usize].speed = Some(speed.to_string());
                b.switch_mut(c).ports[pc as usize].speed = Some(speed.to_string());
            }
            let mut attach = attach.into_iter();
            for (n, (nports, desc, router, guid_is_node)) in nodes.into_iter().enumerate() {
                let node_guid = base + 0x10_0000 + 0x10 * n as u64;
                let ty = if router { NodeType::Other } else { NodeType::Compute };
                for p in 1..=nports {
                    let f = free(&b);
                    let Some((at, speed)) = attach.next() else { break };
                    if f.is_empty() {
                        break;
                    }
                    let pg = if guid_is_node && nports == 1 {
                        node_guid
                    } else {
                        node_guid + u64::from(p)
                    };
                    let ep = b.add_end_port(pg, node_guid, desc.clone(), p, nports, ty).unwrap();
                    let (s, sp) = f[at.index(f.len())];
                    b.connect_end_port(ep, s, sp).unwrap();
                    b.switch_mut(s).ports[sp as usize].speed = Some(speed.to_string());
                }
            }
            b.build()
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn write_then_parse_round_trips(f in fabric_strategy()) {
        let text = write(&f);
        let p = parse(&text, "w").map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert!(p.fabric == f, "round trip differs:\n{}", text);
        for w in &p.warnings {
            prop_assert!(w.contains("self-looped cable"), "{}", w);
        }
    }
}
