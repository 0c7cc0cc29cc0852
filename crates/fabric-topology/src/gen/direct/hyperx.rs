//! The 2-D HyperX switch graph (Ahn et al., SC'09): every switch cabled to all switches of its
//! row and of its column, `K1` / `K2` parallel cables per pair (see the [module docs](super)).

use super::build::{Graph, Link};

/// Index of peer `o` among the `s − 1` peers of `own` in one dimension.
fn peer(own: u32, o: u32) -> u32 {
    if o < own {
        o
    } else {
        o - 1
    }
}

/// Switch `(x,y)` has id `x + s1·y`.
pub(super) fn graph(s1: u32, s2: u32, k1: u32, k2: u32) -> Graph {
    let digits = (0..s2).flat_map(|y| (0..s1).map(move |x| vec![x, y])).collect();
    let id = |x: u32, y: u32| x + s1 * y;
    let dim2 = (s1 - 1) * k1;
    let mut links: Vec<Link> = Vec::new();
    for y in 0..s2 {
        for x in 0..s1 {
            for x2 in x + 1..s1 {
                for c in 0..k1 {
                    links.push(((id(x, y), peer(x, x2) * k1 + c), (id(x2, y), peer(x2, x) * k1 + c)));
                }
            }
            for y2 in y + 1..s2 {
                for c in 0..k2 {
                    links.push((
                        (id(x, y), dim2 + peer(y, y2) * k2 + c),
                        (id(x, y2), dim2 + peer(y2, y) * k2 + c),
                    ));
                }
            }
        }
    }
    Graph { digits, links }
}
