//! The ranking procedure: method selection per connected component, level assignment, local
//! repair of shortcut links, and the diagnostics pass. See the crate documentation for the
//! policy.

use std::collections::{HashSet, VecDeque};

use fabric_topology::{fmt_guid, Fabric, Guid, LinkState, Remote, SwitchId};

use crate::graph::{bfs, components, Adjacency, Component, UNREACHED};
use crate::statistical::criterion;
use crate::{DiagKind, Diagnostic, RankOptions, Ranking, Role};

/// How the levels of one connected component were obtained.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum RankMethod {
    /// Upward from the leaves (thesis Alg. 3).
    Upward,
    /// Downward from configured top switches (root GUID file and/or role `root`).
    ConfiguredRoots,
    /// Downward from the top switches found by the statistical criterion (thesis Annex 2,
    /// Alg. 14), because leaves sit at different heights.
    Statistical,
    /// Neither a leaf nor a configured root in the component: its switches are unranked.
    Unranked,
}

/// Ranking of one connected component of the live switch graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ComponentRank {
    /// Member switches, ascending.
    pub switches: Vec<SwitchId>,
    /// The method whose levels were kept.
    pub method: RankMethod,
    /// Top switches ranking started from (downward methods; empty for upward ranking).
    pub tops: Vec<SwitchId>,
    /// Switch pairs (neighbours, not cables) whose levels do not differ by exactly one.
    pub inconsistent_links: usize,
}

/// [`Ranking`] plus how it was obtained, per connected component.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankReport {
    pub ranking: Ranking,
    /// Connected components of live switches, in order of their smallest switch id.
    pub components: Vec<ComponentRank>,
}

/// Ranks the live fabric: a level for every live switch (leaves at 0), `None` for dead or
/// unreachable ones, and every diagnostic found. See the crate documentation for the policy.
pub fn rank(fabric: &Fabric, opts: &RankOptions) -> Ranking {
    rank_report(fabric, opts).ranking
}

/// Like [`rank`], also telling which method ranked each connected component.
pub fn rank_report(fabric: &Fabric, opts: &RankOptions) -> RankReport {
    let mut diags = Vec::new();
    let setup = Setup::resolve(fabric, opts, &mut diags);
    let adj = Adjacency::new(fabric);
    let comps = components(fabric, &adj);
    let n = fabric.num_switches();
    let mut level = vec![UNREACHED; n];
    // Switches whose level is not their BFS level: moved by the repair, or placed by a role.
    let mut moved: Vec<Option<(u32, bool)>> = vec![None; n];
    let any_root = setup.is_root.iter().any(|&r| r);
    let mut reports = Vec::with_capacity(comps.len());
    for comp in &comps {
        let cand = rank_component(fabric, comp, &setup, any_root, &mut diags);
        for (i, &s) in comp.members.iter().enumerate() {
            level[s as usize] = cand.level[i];
            if cand.level[i] != UNREACHED && cand.level[i] != cand.bfs_level[i] {
                moved[s as usize] = Some((cand.bfs_level[i], setup.role[s as usize] == Some(Role::Leaf)));
            }
        }
        reports.push(ComponentRank {
            switches: comp.members.iter().map(|&s| SwitchId(s)).collect(),
            method: cand.method,
            tops: cand.tops.iter().map(|&v| SwitchId(comp.members[v as usize])).collect(),
            inconsistent_links: cand.violations,
        });
    }
    switch_diagnostics(fabric, &setup, &level, &moved, &mut diags);
    let height = level
        .iter()
        .filter(|&&l| l != UNREACHED)
        .map(|&l| l + 1)
        .max()
        .unwrap_or(0);
    let level = level.into_iter().map(|l| (l != UNREACHED).then_some(l)).collect();
    RankReport {
        ranking: Ranking {
            level,
            height,
            diagnostics: diags,
        },
        components: reports,
    }
}

/// The configuration resolved against the fabric.
struct Setup {
    /// Effective role per switch (a GUID in the root list counts as role root).
    role: Vec<Option<Role>>,
    /// Configured top switch (root list or role root), live.
    is_root: Vec<bool>,
    /// Leaf set: live switches with a live end port and no spine/root role, plus role leaf.
    is_leaf: Vec<bool>,
}

fn diag(kind: DiagKind, switch: Option<Guid>, port: Option<u8>, message: String) -> Diagnostic {
    Diagnostic {
        kind,
        switch,
        port,
        message,
    }
}

impl Setup {
    fn resolve(fabric: &Fabric, opts: &RankOptions, diags: &mut Vec<Diagnostic>) -> Setup {
        let n = fabric.num_switches();
        let mut role: Vec<Option<Role>> = vec![None; n];
        let unknown = |g: Guid, what: &str| {
            let why = if fabric.end_port_by_guid(g).is_some() {
                "an end port, not a switch"
            } else {
                "not in the fabric"
            };
            diag(
                DiagKind::UnknownGuid,
                Some(g),
                None,
                format!("{what} GUID {} is {why}", fmt_guid(g)),
            )
        };
        let mut roles: Vec<(Guid, Role)> = opts.roles.iter().map(|(&g, &r)| (g, r)).collect();
        roles.sort_unstable_by_key(|&(g, _)| g);
        for (g, r) in roles {
            match fabric.switch_by_guid(g) {
                Some(s) => role[s.idx()] = Some(r),
                None => diags.push(unknown(g, "role")),
            }
        }
        let mut seen = HashSet::new();
        for &g in &opts.roots {
            if !seen.insert(g) {
                continue;
            }
            match fabric.switch_by_guid(g) {
                Some(s) => {
                    if let Some(r @ (Role::Leaf | Role::Spine)) = role[s.idx()] {
                        diags.push(diag(
                            DiagKind::Irregular,
                            Some(g),
                            None,
                            format!("listed as a root GUID but configured with role {r:?}: treated as a root"),
                        ));
                    }
                    role[s.idx()] = Some(Role::Root);
                }
                None => diags.push(unknown(g, "root")),
            }
        }
        let up = |i: usize| fabric.switch(SwitchId(i as u32)).up;
        let is_root: Vec<bool> = (0..n).map(|i| up(i) && role[i] == Some(Role::Root)).collect();
        let configured = role.iter().filter(|&&r| r == Some(Role::Root)).count();
        if configured > 0 && !is_root.iter().any(|&r| r) {
            diags.push(diag(
                DiagKind::Irregular,
                None,
                None,
                format!("none of the {configured} configured root switches is up: ranked automatically"),
            ));
        }
        let is_leaf = (0..n)
            .map(|i| {
                up(i)
                    && match role[i] {
                        Some(Role::Leaf) => true,
                        Some(Role::Spine | Role::Root) => false,
                        None => fabric.is_leaf(SwitchId(i as u32)),
                    }
            })
            .collect();
        Setup { role, is_root, is_leaf }
    }
}

/// One way of ranking a component (local indices).
struct Candidate {
    method: RankMethod,
    /// Final levels (`UNREACHED` for unranked).
    level: Vec<u32>,
    /// Levels as given by the BFS alone, on the same scale as `level`.
    bfs_level: Vec<u32>,
    /// Local indices of the top switches (downward methods).
    tops: Vec<u32>,
    violations: usize,
}

fn rank_component(
    fabric: &Fabric,
    comp: &Component,
    setup: &Setup,
    any_root: bool,
    diags: &mut Vec<Diagnostic>,
) -> Candidate {
    let k = comp.members.len();
    let m = |v: usize| comp.members[v] as usize;
    let roots: Vec<u32> = (0..k as u32).filter(|&v| setup.is_root[m(v as usize)]).collect();
    let leaf: Vec<bool> = (0..k).map(|v| setup.is_leaf[m(v)]).collect();
    let role_leaf: Vec<bool> = (0..k).map(|v| setup.role[m(v)] == Some(Role::Leaf)).collect();
    let spine: Vec<bool> = (0..k)
        .map(|v| matches!(setup.role[m(v)], Some(Role::Spine | Role::Root)))
        .collect();
    let first_guid = fabric.switch(SwitchId(comp.members[0])).guid;
    if !roots.is_empty() {
        return rank_down(&comp.adj, RankMethod::ConfiguredRoots, roots, &role_leaf, &spine);
    }
    if !leaf.iter().any(|&l| l) {
        return Candidate {
            method: RankMethod::Unranked,
            level: vec![UNREACHED; k],
            bfs_level: vec![UNREACHED; k],
            tops: Vec::new(),
            violations: 0,
        };
    }
    if any_root {
        diags.push(diag(
            DiagKind::Irregular,
            Some(first_guid),
            None,
            format!("the {k} switches connected to this one include no configured root: ranked automatically"),
        ));
    }
    let up = rank_up(&comp.adj, &leaf);
    if up.violations == 0 {
        return up;
    }
    let Some(crit) = criterion(fabric, comp) else { return up };
    let tops: Vec<u32> = crit.tops.into_iter().filter(|&v| !role_leaf[v as usize]).collect();
    if tops.is_empty() {
        return up;
    }
    let down = rank_down(&comp.adj, RankMethod::Statistical, tops, &role_leaf, &spine);
    if down.violations < up.violations {
        diags.push(diag(
            DiagKind::Irregular,
            Some(first_guid),
            None,
            format!(
                "leaves sit at different heights among the {k} switches connected to this one: ranked downward from {} \
                 top switches found by the statistical criterion ({} inconsistent links instead of {} ranking upward)",
                down.tops.len(),
                down.violations,
                up.violations
            ),
        ));
        down
    } else {
        up
    }
}

/// Alg. 3: BFS upward from the leaves, then local repair (leaves stay at level 0, other switches
/// at level 1 or above).
fn rank_up(adj: &Adjacency, leaf: &[bool]) -> Candidate {
    let k = adj.len();
    let seeds: Vec<u32> = (0..k as u32).filter(|&v| leaf[v as usize]).collect();
    let mut level = vec![UNREACHED; k];
    bfs(adj, &seeds, &mut level);
    let bfs_level = level.clone();
    // A shortcut only shortens distances: the true level is at least the BFS distance.
    repair(adj, &mut level, leaf, &bfs_level, &vec![UNREACHED - 1; k]);
    let violations = count_violations(adj, &level);
    Candidate {
        method: RankMethod::Upward,
        level,
        bfs_level,
        tops: Vec::new(),
        violations,
    }
}

/// Downward ranking from top switches (thesis §1.4.5: Alg. 3 from the tops, then level
/// `h - 1 - distance`), switches with role leaf placed at level 0, local repair, and a shift
/// bringing the lowest level to 0.
fn rank_down(adj: &Adjacency, method: RankMethod, tops: Vec<u32>, role_leaf: &[bool], spine: &[bool]) -> Candidate {
    let k = adj.len();
    let mut dist = vec![UNREACHED; k];
    let top_level = bfs(adj, &tops, &mut dist);
    let mut level: Vec<u32> = dist
        .iter()
        .map(|&d| if d == UNREACHED { UNREACHED } else { top_level - d })
        .collect();
    let mut bfs_level = level.clone();
    let mut anchored = vec![false; k];
    for &t in &tops {
        anchored[t as usize] = true;
    }
    for v in 0..k {
        if role_leaf[v] && !anchored[v] {
            anchored[v] = true;
            level[v] = 0;
        }
    }
    let min_level: Vec<u32> = spine.iter().map(|&s| if s { 1 } else { 0 }).collect();
    // A shortcut only shortens distances from the tops: the true level is at most the BFS one.
    let max_level = level.clone();
    repair(adj, &mut level, &anchored, &min_level, &max_level);
    let shift = level.iter().copied().filter(|&l| l != UNREACHED).min().unwrap_or(0);
    if shift > 0 {
        for l in level.iter_mut().chain(bfs_level.iter_mut()) {
            if *l != UNREACHED {
                *l = l.saturating_sub(shift);
            }
        }
    }
    let violations = count_violations(adj, &level);
    Candidate {
        method,
        level,
        bfs_level,
        tops,
        violations,
    }
}

/// Neighbour pairs (each counted once) whose levels do not differ by exactly one.
fn count_violations(adj: &Adjacency, level: &[u32]) -> usize {
    (0..adj.len())
        .map(|v| {
            adj.neighbours(v)
                .iter()
                .filter(|&&r| (r as usize) > v && level[v] != UNREACHED && level[v].abs_diff(level[r as usize]) != 1)
                .count()
        })
        .sum()
}

/// Local repair of a BFS ranking around shortcut links.
///
/// A BFS gives every switch its distance from the sources, so one miscabled link (a leaf cabled
/// to a top switch, say) pulls the far end a level too close and turns its correct links into
/// same-level links. Shortcuts only ever shorten distances, so the true level lies on one side of
/// the BFS level: above it ranking upward, below it ranking downward (`min_level`/`max_level`).
/// Every non-anchored switch with an inconsistent link is moved to the level (within
/// `min_level[v]..=max_level[v]`) that makes the most of its neighbours sit exactly one level
/// above or below it, and only when that is *strictly* more than at its current level (ties:
/// nearest level, then lowest). Each move strictly increases the number of consistent neighbour
/// pairs, so the repair terminates; on a consistent ranking it changes nothing. What remains
/// inconsistent is then reported link by link, the miscabled link as a level-skipping one.
fn repair(adj: &Adjacency, level: &mut [u32], anchored: &[bool], min_level: &[u32], max_level: &[u32]) {
    let k = adj.len();
    let inconsistent = |level: &[u32], v: usize| {
        level[v] != UNREACHED
            && adj
                .neighbours(v)
                .iter()
                .any(|&r| level[v].abs_diff(level[r as usize]) != 1)
    };
    let mut queued = vec![false; k];
    let mut queue: VecDeque<usize> = VecDeque::new();
    for v in 0..k {
        if !anchored[v] && inconsistent(level, v) {
            queued[v] = true;
            queue.push_back(v);
        }
    }
    let mut budget = 4 * (k + adj.num_directed_edges()) + 16;
    let mut nl: Vec<u32> = Vec::new();
    while let Some(v) = queue.pop_front() {
        queued[v] = false;
        if budget == 0 {
            break;
        }
        budget -= 1;
        let cur = level[v];
        if cur == UNREACHED {
            continue;
        }
        nl.clear();
        nl.extend(
            adj.neighbours(v)
                .iter()
                .map(|&r| level[r as usize])
                .filter(|&l| l != UNREACHED),
        );
        nl.sort_unstable();
        let count = |l: u32| nl.partition_point(|&x| x <= l) - nl.partition_point(|&x| x < l);
        let fit = |c: u32| c.checked_sub(1).map_or(0, count) + c.checked_add(1).map_or(0, count);
        let cur_fit = fit(cur);
        if cur_fit == nl.len() {
            continue;
        }
        let mut best: Option<(usize, u32)> = None;
        for &l in &nl {
            for c in [l.checked_sub(1), l.checked_add(1)].into_iter().flatten() {
                if c < min_level[v] || c > max_level[v] || c == cur {
                    continue;
                }
                let f = fit(c);
                if f <= cur_fit {
                    continue;
                }
                let better = match best {
                    None => true,
                    Some((bf, bc)) => f > bf || (f == bf && (c.abs_diff(cur), c) < (bc.abs_diff(cur), bc)),
                };
                if better {
                    best = Some((f, c));
                }
            }
        }
        if let Some((_, c)) = best {
            level[v] = c;
            for &r in adj.neighbours(v) {
                let r = r as usize;
                if !anchored[r] && !queued[r] {
                    queued[r] = true;
                    queue.push_back(r);
                }
            }
        }
    }
}

/// Per-switch diagnostics in switch-id order: self-loops, inconsistent links (once per cable),
/// leaves above level 0, configured roles contradicting the topology, repaired switches, unranked
/// switches.
fn switch_diagnostics(
    fabric: &Fabric,
    setup: &Setup,
    level: &[u32],
    moved: &[Option<(u32, bool)>],
    diags: &mut Vec<Diagnostic>,
) {
    for sid in fabric.switch_ids() {
        let s = fabric.switch(sid);
        if !s.up {
            continue;
        }
        let i = sid.idx();
        let lv = level[i];
        for (pn, port) in s.external_ports() {
            match port.remote {
                Remote::Switch { sw, port: rp } if sw == sid && pn < rp && port.state == LinkState::Up => {
                    diags.push(diag(
                        DiagKind::SelfLoop,
                        Some(s.guid),
                        Some(pn),
                        format!("cable loops back to port {rp} of the same switch"),
                    ));
                }
                Remote::Switch { .. } => {
                    let Some((r, rp)) = fabric.switch_link_live(sid, pn) else {
                        continue;
                    };
                    let rl = level[r.idx()];
                    if lv == UNREACHED || rl == UNREACHED || lv.abs_diff(rl) == 1 {
                        continue;
                    }
                    let rg = fabric.switch(r).guid;
                    // One diagnostic per cable: at the lower end, or the smaller (GUID, port).
                    let here = if lv == rl { (s.guid, pn) < (rg, rp) } else { lv < rl };
                    if !here {
                        continue;
                    }
                    // One `format!` per cable (a direct topology reports every one of them: on
                    // HYPERX(8,8;4) three strings per cable were ~7 % of the daemon's
                    // computation); `fmt_guid`'s notation, 0x and 16 hex digits.
                    let (kind, message) = if lv == rl {
                        (
                            DiagKind::SameLevelLink,
                            format!("link to 0x{rg:016x}[{rp}]: both at level {lv}"),
                        )
                    } else {
                        (
                            DiagKind::SkipLevelLink,
                            format!(
                                "link to 0x{rg:016x}[{rp}]: level {lv} to level {rl}, skipping {} level(s)",
                                rl - lv - 1
                            ),
                        )
                    };
                    diags.push(diag(kind, Some(s.guid), Some(pn), message));
                }
                _ => {}
            }
        }
        let nodes = fabric.attached_end_ports(sid).len();
        match setup.role[i] {
            Some(r @ (Role::Spine | Role::Root)) if nodes > 0 => diags.push(diag(
                DiagKind::Irregular,
                Some(s.guid),
                None,
                format!("{nodes} live end ports attached to a switch configured as {r:?}"),
            )),
            None if nodes > 0 && lv != UNREACHED && lv > 0 => diags.push(diag(
                DiagKind::Irregular,
                Some(s.guid),
                None,
                format!("leaf with {nodes} live end ports ranked at level {lv}: leaves sit at different heights"),
            )),
            _ => {}
        }
        if let Some((bfs_lv, by_role)) = moved[i] {
            let message = if by_role {
                format!("configured as leaf (level 0) but its distance from the top switches gives level {bfs_lv}")
            } else {
                format!(
                    "ranked at level {lv} although its distance gives level {bfs_lv}: a link skipping levels next to it is \
                     likely miscabled"
                )
            };
            diags.push(diag(DiagKind::Irregular, Some(s.guid), None, message));
        }
        if lv == UNREACHED {
            diags.push(diag(
                DiagKind::Unranked,
                Some(s.guid),
                None,
                "not connected to any leaf or configured root switch".to_owned(),
            ));
        }
    }
}
