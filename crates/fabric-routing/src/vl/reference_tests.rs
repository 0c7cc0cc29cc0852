//! The layering against a straightforward reference: every route walked through the tables,
//! edge ids by first appearance in a map, and the cycle breaking that recounts each layer and
//! searches the DFS stack linearly (the implementation before the flat, incremental one).
//! Same layer for every route, on random regular graphs, intact and degraded.

use std::collections::HashMap;

use proptest::prelude::*;

use super::routes::ChannelMap;
use super::*;
use crate::layered::graphs::rrg;
use crate::lft::NO_ROUTE;
use crate::testutil::*;
use crate::EngineKind;

/// Layers of the routes of `lfts` towards `dlids`, in (LID, switch) order, by the reference.
fn reference(f: &Fabric, lfts: &Lfts, dlids: &[Lid]) -> Vec<(u32, Lid, u8)> {
    let cm = ChannelMap::new(f);
    let mut routes = Vec::new();
    let mut deps: Vec<Vec<usize>> = Vec::new();
    let mut edges: Vec<(u32, u32)> = Vec::new();
    let mut ids: HashMap<(u32, u32), usize> = HashMap::new();
    for &d in dlids {
        for s in f.switch_ids().filter(|&s| f.switch(s).up) {
            let p = lfts.get(s, d);
            if p == 0 || p == NO_ROUTE {
                continue;
            }
            let mut path = Vec::new();
            cm.walk(lfts, s.0, d, |c| path.push(c)).unwrap();
            let mut dl = Vec::new();
            for w in path.windows(2) {
                let e = *ids.entry((w[0], w[1])).or_insert_with(|| {
                    edges.push((w[0], w[1]));
                    edges.len() - 1
                });
                dl.push(e);
            }
            routes.push((s.0, d));
            deps.push(dl);
        }
    }
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); edges.len()];
    for (r, dl) in deps.iter().enumerate() {
        for &e in dl {
            users[e].push(r);
        }
    }
    let mut out_edges: Vec<Vec<usize>> = vec![Vec::new(); cm.nchan];
    for (e, &(a, _)) in edges.iter().enumerate() {
        out_edges[a as usize].push(e);
    }
    let mut layer = vec![0u8; routes.len()];
    let mut cur = 0u8;
    loop {
        let mut cnt = vec![0u32; edges.len()];
        let mut any = false;
        for (r, dl) in deps.iter().enumerate() {
            if layer[r] == cur {
                any = true;
                dl.iter().for_each(|&e| cnt[e] += 1);
            }
        }
        if !any {
            break;
        }
        let mut color = vec![0u8; cm.nchan];
        for root in 0..cm.nchan {
            if color[root] != 0 {
                continue;
            }
            // (channel, next out-edge, edge to the next frame)
            let mut stack: Vec<(usize, usize, usize)> = vec![(root, 0, usize::MAX)];
            color[root] = 1;
            while let Some(&(c, next, _)) = stack.last() {
                if next == out_edges[c].len() {
                    color[c] = 2;
                    stack.pop();
                    continue;
                }
                let e = out_edges[c][next];
                stack.last_mut().unwrap().1 += 1;
                if cnt[e] == 0 {
                    continue;
                }
                let v = edges[e].1 as usize;
                if color[v] == 0 {
                    stack.last_mut().unwrap().2 = e;
                    color[v] = 1;
                    stack.push((v, 0, usize::MAX));
                } else if color[v] == 1 {
                    let from = stack.iter().position(|fr| fr.0 == v).unwrap();
                    let mut weakest = e;
                    for fr in &stack[from..stack.len() - 1] {
                        if cnt[fr.2] < cnt[weakest] {
                            weakest = fr.2;
                        }
                    }
                    for &r in &users[weakest] {
                        if layer[r] == cur {
                            layer[r] = cur + 1;
                            deps[r].iter().for_each(|&x| cnt[x] -= 1);
                        }
                    }
                    let top = stack.len() - 1;
                    if let Some(i) = stack[..top].iter().position(|fr| cnt[fr.2] == 0) {
                        stack[i + 1..].iter().for_each(|fr| color[fr.0] = 0);
                        stack.truncate(i + 1);
                    }
                }
            }
        }
        cur += 1;
    }
    routes.iter().zip(&layer).map(|(&(s, d), &l)| (s, d, l)).collect()
}

fn same_as_reference(f: &Fabric) -> Result<u8, TestCaseError> {
    let (_, lids, lfts) = routed(f, EngineKind::Dfsssp, 1);
    let dl = base_lids(f, &lids);
    let l = layer_base_fewest(f, &lids, &lfts, IB_MAX_DATA_VLS).unwrap();
    let want = reference(f, &lfts, &dl);
    let got: Vec<(u32, Lid, u8)> = want
        .iter()
        .map(|&(s, d, _)| (s, d, l.layer_of(0, SwitchId(s), d)))
        .collect();
    prop_assert_eq!(&got, &want);
    let needed = want.iter().map(|x| x.2 + 1).max().unwrap_or(0);
    prop_assert_eq!(l.needed, needed);
    Ok(needed)
}

#[test]
fn a_degraded_slim_fly_is_layered_as_the_reference() {
    let f = fabric_topology::gen::generate_str(
        "SLIMFLY(5;4)",
        Some(&fabric_topology::gen::Degrade {
            remove_links: 9,
            remove_switches: 0,
            seed: 1,
        }),
    )
    .unwrap();
    let needed = same_as_reference(&f).unwrap();
    assert!(needed >= 2, "a Slim Fly needs several layers");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    #[test]
    fn layering_equals_the_reference_on_random_regular_graphs(n in 8usize..40, k in 3usize..7, seed in 0u64..1000, links in 0usize..5) {
        prop_assume!((n * k).is_multiple_of(2));
        let g = rrg(n, k, 2, seed);
        let f = if links > 0 { degrade(&g, links, 0, seed) } else { g };
        same_as_reference(&f)?;
    }
}
