//! Property tests: random configurations against a reference model of OpenSM's membership rules,
//! shared_pkey symmetry, limited–limited never shared, determinism, kept indices; random bytes
//! and mutated valid files never panic.

use std::collections::BTreeMap;

use fabric_partitions::{parse, resolve_with, PartitionTables, ResolveOptions};
use fabric_topology::gen::generate_str;
use fabric_topology::{Fabric, Guid};
use proptest::prelude::*;

fn fabric() -> Fabric {
    generate_str("XGFT(2;4,4;1,2)", None).unwrap()
}

/// One member entry: which ports (0..16 end port index, 16 ALL, 17 ALL_CAS, 18 ALL_SWITCHES,
/// 19 SELF) and its membership (None: the statement's default).
type Entry = (u8, Option<u8>);

#[derive(Clone, Debug)]
struct Stmt {
    pkey: u16,
    defmember: Option<u8>,
    members: Vec<Entry>,
}

const WORDS: [&str; 3] = ["limited", "full", "both"];

fn stmt() -> impl Strategy<Value = Stmt> {
    (
        prop_oneof![1u16..40, Just(0x7fffu16)],
        proptest::option::of(0u8..3),
        prop::collection::vec((0u8..20, proptest::option::of(0u8..3)), 0..8),
    )
        .prop_map(|(pkey, defmember, members)| Stmt {
            pkey,
            defmember,
            members,
        })
}

fn text_of(f: &Fabric, stmts: &[Stmt]) -> String {
    let mut s = String::new();
    for st in stmts {
        let name = if st.pkey == 0x7fff {
            "Default".to_string()
        } else {
            format!("P{}", st.pkey)
        };
        s.push_str(&format!("{name}={:#x}", st.pkey));
        if let Some(d) = st.defmember {
            s.push_str(&format!(", defmember={}", WORDS[d as usize]));
        }
        s.push_str(" :\n");
        for (k, (who, m)) in st.members.iter().enumerate() {
            let port = match who {
                16 => "ALL".to_string(),
                17 => "ALL_CAS".to_string(),
                18 => "ALL_SWITCHES".to_string(),
                19 => "SELF".to_string(),
                i => format!("{:#x}", f.end_ports()[*i as usize].port_guid),
            };
            let sep = if k + 1 < st.members.len() { "," } else { "" };
            match m {
                Some(m) => s.push_str(&format!("  {port}={}{sep}\n", WORDS[*m as usize])),
                None => s.push_str(&format!("  {port}{sep}\n")),
            }
        }
        s.push_str(";\n");
    }
    s
}

/// The reference: OpenSM's rules written out plainly (pkey -> guid -> full).
fn model(f: &Fabric, stmts: &[Stmt], sm: Guid) -> BTreeMap<u16, BTreeMap<Guid, bool>> {
    let cas: Vec<Guid> = f.end_ports().iter().map(|e| e.port_guid).collect();
    let sws: Vec<Guid> = f.switches().iter().map(|s| s.guid).collect();
    let mut m: BTreeMap<u16, BTreeMap<Guid, bool>> = BTreeMap::new();
    let d = m.entry(0x7fff).or_default();
    for &g in cas.iter().chain(&sws) {
        d.insert(g, false);
    }
    d.insert(sm, true);
    for st in stmts {
        let p = m.entry(st.pkey).or_default();
        for &(who, mem) in &st.members {
            // Both is full without allow_both_pkeys; an entry's own word beats defmember.
            let full = mem.or(st.defmember).is_some_and(|w| w != 0);
            let ports: Vec<Guid> = match who {
                16 => cas.iter().chain(&sws).copied().collect(),
                17 => cas.clone(),
                18 => sws.clone(),
                19 => vec![sm],
                i => vec![cas[i as usize]],
            };
            for g in ports {
                p.insert(g, full);
            }
        }
    }
    m.retain(|_, v| !v.is_empty());
    m
}

fn check_tables(t: &PartitionTables, want: &BTreeMap<u16, BTreeMap<Guid, bool>>, holes_allowed: bool) {
    let mut per_port: BTreeMap<Guid, usize> = BTreeMap::new();
    for (&pkey, members) in want {
        assert_eq!(
            t.members(pkey),
            members.iter().map(|(&g, &f)| (g, f)).collect::<Vec<_>>()
        );
        for (&g, &full) in members {
            *per_port.entry(g).or_default() += 1;
            let table = t.table(g).expect("a member has a table");
            let hits: Vec<u16> = table.iter().copied().filter(|e| e & 0x7fff == pkey).collect();
            assert_eq!(hits.len(), 1, "P_Key {pkey:#x} exactly once in {table:x?}");
            assert_eq!(hits[0] & 0x8000 != 0, full);
        }
    }
    for (g, table) in t.port_tables() {
        let used = table.iter().filter(|&&e| e != 0).count();
        assert_eq!(
            used,
            per_port.get(&g).copied().unwrap_or(0),
            "no extra entries for {g:#x}"
        );
        assert!(holes_allowed || used == table.len());
        if let Some(&e) = table.first() {
            // Index 0: the default partition whenever the port is in it (no indx0 here).
            if !holes_allowed && want.get(&0x7fff).is_some_and(|m| m.contains_key(&g)) {
                assert_eq!(e & 0x7fff, 0x7fff);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn resolution_matches_the_reference(stmts in prop::collection::vec(stmt(), 0..8), sm_i in 0usize..16,
                                        pairs in prop::collection::vec((0usize..22, 0usize..22), 20),
                                        prev_stmts in prop::collection::vec(stmt(), 0..8)) {
        let f = fabric();
        let sm = f.end_ports()[sm_i].port_guid;
        let cfg = parse(&text_of(&f, &stmts), "rand.conf").unwrap();
        let opts = ResolveOptions { partition_cap: 1024, enforcement_cap: 1024 };
        let t = resolve_with(&cfg, &f, Some(sm), &opts, None);
        let want = model(&f, &stmts, sm);
        check_tables(&t, &want, false);
        prop_assert_eq!(&t, &resolve_with(&cfg, &f, Some(sm), &opts, None), "deterministic");

        let guid = |i: usize| if i < 16 { f.end_ports()[i].port_guid } else { f.switches()[i - 16].guid };
        for (a, b) in pairs {
            let (a, b) = (guid(a), guid(b));
            prop_assert_eq!(t.shared_pkey(a, b), t.shared_pkey(b, a));
            prop_assert_eq!(t.shared_pkeys(a, b), t.shared_pkeys(b, a));
            for p in t.shared_pkeys(a, b) {
                let (fa, fb) = (want[&p][&a], want[&p][&b]);
                prop_assert!(fa || fb, "limited-limited shared in {:#x}", p);
            }
            // Every partition with both in it and a full member is shared.
            let expect = want.values().filter(|m| matches!((m.get(&a), m.get(&b)), (Some(x), Some(y)) if *x || *y)).count();
            prop_assert_eq!(t.shared_pkeys(a, b).len(), expect);
        }

        // With previous tables: same membership, kept P_Keys at their index.
        let prev_cfg = parse(&text_of(&f, &prev_stmts), "prev.conf").unwrap();
        let prev = resolve_with(&prev_cfg, &f, Some(sm), &opts, None);
        let t2 = resolve_with(&cfg, &f, Some(sm), &opts, Some(&prev));
        check_tables(&t2, &want, true);
        for (g, table) in t2.port_tables() {
            if let Some(old) = prev.table(g) {
                for (i, &e) in old.iter().enumerate() {
                    if e != 0 && want.get(&(e & 0x7fff)).is_some_and(|m| m.contains_key(&g)) {
                        prop_assert_eq!(table[i] & 0x7fff, e & 0x7fff, "kept at index {}", i);
                    }
                }
            }
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(cfg) = parse(&text, "bytes.conf") {
            let _ = fabric_partitions::resolve(&cfg, &fabric(), None);
        }
    }

    #[test]
    fn mutated_files_never_panic(stmts in prop::collection::vec(stmt(), 1..5),
                                 edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, 0usize..24), 1..8)) {
        let f = fabric();
        let mut chars: Vec<char> = text_of(&f, &stmts).chars().collect();
        let alphabet: Vec<char> = ":;,=#\n \t0xXfé9ALSipob-".chars().collect();
        for (at, op, c) in edits {
            let c = alphabet[c % alphabet.len()];
            match op {
                0 => { let i = at.index(chars.len() + 1); chars.insert(i, c); }
                1 if !chars.is_empty() => { let i = at.index(chars.len()); chars.remove(i); }
                _ if !chars.is_empty() => { let i = at.index(chars.len()); chars[i] = c; }
                _ => {}
            }
        }
        let text: String = chars.into_iter().collect();
        match parse(&text, "mut.conf") {
            Ok(cfg) => { let _ = fabric_partitions::resolve(&cfg, &f, Some(f.end_ports()[0].port_guid)); }
            Err(e) => {
                prop_assert!(e.line >= 1 && e.column >= 1);
                prop_assert!(e.line as usize <= text.split('\n').count());
            }
        }
    }
}
