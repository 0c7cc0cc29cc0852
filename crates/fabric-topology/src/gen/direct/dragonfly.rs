//! The Dragonfly switch graph (Kim et al., ISCA 2008): fully connected groups, global links in
//! the absolute arrangement (see the [module docs](super)).

use super::build::{Graph, Link};

/// Slot of group `t` among group `i`'s peers (absolute arrangement): `t` if `t < i`, else `t − 1`.
fn slot_of(i: u32, t: u32) -> u32 {
    if t < i {
        t
    } else {
        t - 1
    }
}

/// `g` groups of `a` routers with `h` global links each; router `r` of group `i` has id `i·a + r`.
/// `g − 1` divides `a·h` (checked by the spec).
pub(super) fn graph(a: u32, h: u32, g: u32) -> Graph {
    let digits = (0..g).flat_map(|i| (0..a).map(move |r| vec![i, r])).collect();
    let mut links: Vec<Link> = Vec::new();
    for i in 0..g {
        // Local: every pair of routers of the group, local port index r' (r' < r) or r' − 1.
        for r in 0..a {
            for r2 in r + 1..a {
                links.push(((i * a + r, r2 - 1), (i * a + r2, r)));
            }
        }
        // Global: index j = r·h + k, slot j mod (g − 1), copy j div (g − 1); from the lower group.
        for j in 0..a * h {
            let (slot, copy) = (j % (g - 1), j / (g - 1));
            let t = if slot < i { slot } else { slot + 1 };
            if t < i {
                continue;
            }
            let j2 = copy * (g - 1) + slot_of(t, i);
            let (r, k) = (j / h, j % h);
            let (r2, k2) = (j2 / h, j2 % h);
            links.push(((i * a + r, a - 1 + k), (t * a + r2, a - 1 + k2)));
        }
    }
    Graph { digits, links }
}
