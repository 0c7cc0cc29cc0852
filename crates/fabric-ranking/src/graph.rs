//! The live switch graph as a compact adjacency array (CSR) plus breadth-first searches.
//!
//! Vertices are dense switch ids; an edge joins two live switches with at least one live cable
//! between them (one edge per port group, whatever the number of parallel cables).

use fabric_topology::{Fabric, SwitchId};

/// Distance / level value of a switch not reached (yet).
pub(crate) const UNREACHED: u32 = u32::MAX;

/// Distinct live neighbour switches of every switch, in [`Fabric::port_groups`] order.
#[derive(Clone, Debug)]
pub(crate) struct Adjacency {
    offsets: Vec<u32>,
    nbrs: Vec<u32>,
}

impl Adjacency {
    /// Builds the adjacency of the live fabric (a dead switch has no neighbours).
    pub(crate) fn new(fabric: &Fabric) -> Self {
        let n = fabric.num_switches();
        let mut offsets = Vec::with_capacity(n + 1);
        let total: usize = fabric.switch_ids().map(|s| fabric.port_groups(s).len()).sum();
        let mut nbrs = Vec::with_capacity(total);
        offsets.push(0);
        for s in fabric.switch_ids() {
            nbrs.extend(fabric.port_groups(s).iter().map(|g| g.remote.0));
            offsets.push(nbrs.len() as u32);
        }
        Adjacency { offsets, nbrs }
    }

    /// Builds an adjacency from explicit neighbour lists.
    #[cfg(test)]
    pub(crate) fn from_lists(lists: impl IntoIterator<Item = impl IntoIterator<Item = u32>>) -> Self {
        let mut offsets = vec![0];
        let mut nbrs = Vec::new();
        for l in lists {
            nbrs.extend(l);
            offsets.push(nbrs.len() as u32);
        }
        Adjacency { offsets, nbrs }
    }

    /// Number of vertices.
    pub(crate) fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Number of directed edges (twice the number of undirected ones).
    pub(crate) fn num_directed_edges(&self) -> usize {
        self.nbrs.len()
    }

    /// Neighbours of vertex `s`.
    #[inline]
    pub(crate) fn neighbours(&self, s: usize) -> &[u32] {
        &self.nbrs[self.offsets[s] as usize..self.offsets[s + 1] as usize]
    }
}

/// A connected component of the live switch graph with its own local adjacency: local vertex
/// `i` is switch `members[i]`.
#[derive(Clone, Debug)]
pub(crate) struct Component {
    /// Switch indices, ascending.
    pub members: Vec<u32>,
    /// Adjacency over local indices.
    pub adj: Adjacency,
}

/// Connected components of the live switch graph, in order of their smallest member. Dead
/// switches belong to no component.
pub(crate) fn components(fabric: &Fabric, adj: &Adjacency) -> Vec<Component> {
    let n = adj.len();
    let mut seen = vec![false; n];
    let mut loc = vec![UNREACHED; n];
    let mut out = Vec::new();
    let mut queue: Vec<u32> = Vec::new();
    for s in 0..n {
        if seen[s] || !fabric.switch(SwitchId(s as u32)).up {
            continue;
        }
        seen[s] = true;
        queue.clear();
        queue.push(s as u32);
        let mut head = 0;
        while head < queue.len() {
            let u = queue[head] as usize;
            head += 1;
            for &v in adj.neighbours(u) {
                if !seen[v as usize] {
                    seen[v as usize] = true;
                    queue.push(v);
                }
            }
        }
        let mut members = queue.clone();
        members.sort_unstable();
        for (i, &m) in members.iter().enumerate() {
            loc[m as usize] = i as u32;
        }
        let mut offsets = Vec::with_capacity(members.len() + 1);
        let mut nbrs = Vec::new();
        offsets.push(0);
        for &m in &members {
            nbrs.extend(adj.neighbours(m as usize).iter().map(|&r| loc[r as usize]));
            offsets.push(nbrs.len() as u32);
        }
        let local = Adjacency { offsets, nbrs };
        out.push(Component { members, adj: local });
    }
    out
}

/// Multi-source BFS: writes hop distances from the nearest source into `dist` (entries not
/// reached keep their value, normally [`UNREACHED`]; sources are set to 0). Returns the largest
/// distance assigned (0 when `sources` is empty).
pub(crate) fn bfs(adj: &Adjacency, sources: &[u32], dist: &mut [u32]) -> u32 {
    let mut queue: Vec<u32> = Vec::with_capacity(sources.len());
    for &s in sources {
        if dist[s as usize] != 0 {
            dist[s as usize] = 0;
            queue.push(s);
        }
    }
    let mut head = 0;
    let mut max = 0;
    while head < queue.len() {
        let u = queue[head] as usize;
        head += 1;
        let d = dist[u] + 1;
        for &v in adj.neighbours(u) {
            if dist[v as usize] == UNREACHED {
                dist[v as usize] = d;
                max = d;
                queue.push(v);
            }
        }
    }
    max
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bfs_on_a_path_and_a_star() {
        // 0 - 1 - 2 - 3, and 4 alone.
        let adj = Adjacency::from_lists(vec![vec![1], vec![0, 2], vec![1, 3], vec![2], vec![]]);
        let mut d = vec![UNREACHED; 5];
        assert_eq!(bfs(&adj, &[0], &mut d), 3);
        assert_eq!(d, vec![0, 1, 2, 3, UNREACHED]);
        let mut d = vec![UNREACHED; 5];
        assert_eq!(bfs(&adj, &[0, 3], &mut d), 1);
        assert_eq!(d, vec![0, 1, 1, 0, UNREACHED]);
        let mut d = vec![UNREACHED; 5];
        assert_eq!(bfs(&adj, &[], &mut d), 0);
        assert!(d.iter().all(|&x| x == UNREACHED));
    }
}
