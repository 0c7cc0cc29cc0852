//! Fat-tree generators: PGFT, XGFT, k-ary n-tree, RLFT and QFT from their standard notation,
//! and randomly degraded variants. The direct topologies (Slim Fly, Dragonfly, 2-D HyperX,
//! random regular graphs) are in [`direct`]; [`generate_str`] accepts both notations.
//!
//! # Notation
//!
//! The notation strings follow the thesis (Gliksberg 2022, §1.3.3, Definitions 23–27) and the QFT
//! paper (Zahavi et al., HOTI 2014, §II–III), with 1-based notation levels: notation level 1 is the
//! link between end nodes and leaves, level `l` the link between switch levels `l - 1` and `l`.
//!
//! | string | meaning |
//! |---|---|
//! | `PGFT(h;m1,..,mh;w1,..,wh;p1,..,ph)` | parallel generalised fat-tree: a switch of notation level `l` has `m_l` children (each over `p_l` parallel cables) and `w_{l+1}` parents (each over `p_{l+1}` cables) |
//! | `XGFT(h;m1,..,mh;w1,..,wh)` | the PGFT with every `p_l = 1` |
//! | `KARY(k,n)` | k-ary n-tree, `XGFT(n;k,..,k;1,k,..,k)` |
//! | `RLFT(h;K;p1,..,ph)` | real-life fat-tree of `K`-port switches (Definition 27): read as the PGFT `PGFT(h;K/2,K/(2p2),..,K/ph;1,K/(2p2),..,K/(2ph);p1,..,ph)` and displayed in that PGFT form |
//! | `QFT(h;m1,..,mh;w1,..,wh;p1,..,ph)` | quasi fat-tree: `p_l` counts cross-connected groups (QFT paper eqs. 6–8), not parallel cables |
//!
//! End nodes have exactly one link to one leaf: `w1` and `p1` must be 1.
//!
//! Parsed specs are held in a [`PgftSpec`] whose vectors are 0-based (`m[0]` is `m1`). Counts
//! follow the closed formulas: `Π m` end nodes, `Π_{i≤l} w_i · Π_{i>l} m_i` switches at notation
//! level `l`, `switches(l) · w_{l+1} · p_{l+1}` cables between notation levels `l` and `l + 1`;
//! QFTs have the same counts as the PGFT with the same vectors.
//!
//! # Addresses and order
//!
//! A switch address ([`SwitchAddr`]) is its level (0 = leaf) and `h` digits in notation order
//! (index 0 = notation index 1, little-endian): for a level-`L` switch the digits at indices
//! `0..=L` are w-digits `b_{i+1} ∈ [0, w[i])` (the path up from the leaves) and those above are
//! m-digits `a_{i+1} ∈ [0, m[i])` (the path down from the top). Within a level, switches are
//! numbered by the mixed-radix index of their digits, index 0 least significant. Generated
//! [`SwitchId`](crate::SwitchId)s are level by level (leaves first), index order within a level.
//!
//! An end node has the m-digits `(a1, .., ah)`: it hangs on port `a1 + 1` of the leaf
//! `(0, a2, .., ah)`. Its index `d = Σ a_i · Π_{j<i} m_j` (QFT paper eq. 4) is its
//! [`EndPortId`](crate::EndPortId): end ports are created leaf by leaf in leaf order, then port order,
//! which is the global end-node order used by the metrics.
//!
//! # Cabling and port numbering
//!
//! PGFT/XGFT/KARY: a level-`L` switch with digits `(b1..b_{L+1}, a_{L+2}..a_h)` is cabled to each
//! level-`L+1` switch whose digits are the same except at index `L+1`, where the upper switch has
//! any w-digit `b_{L+2} ∈ [0, w[L+1])`; the lower switch is the upper switch's child number
//! `c = a_{L+2}`; each such pair has `p[L+1]` parallel cables. Ports: down ports first, then up
//! ports. Leaves have the end nodes on ports `1..=m1`. A level-`L ≥ 1` switch reaches child `c` by
//! parallel cable `k` on port `1 + c·p[L] + k`; any switch reaches parent `j` (its w-digit) by
//! parallel cable `k` on port `1 + down + j·p[L+1] + k` (child-major, then parent-major).
//!
//! QFT: the paper's connection rule (eq. 6) and port numbers (eqs. 7–8) exactly, with `f` and `g`
//! the 0-based down and up port indices (down port `1 + f`, up port `1 + down + g`). With all
//! `p = 1` a QFT is cabled exactly like the PGFT.
//!
//! Every switch has exactly the ports it uses (`m_l·p_l + w_{l+1}·p_{l+1}`), at most
//! [`MAX_SWITCH_PORTS`] (254: LFT entry 255 means "no route", so port 255 cannot be routed to).
//! An RLFT therefore has every switch fully plugged.
//!
//! # GUIDs (stable forever: tests and users rely on them)
//!
//! * switch node GUID: `0x0002c9 << 40 | level << 32 | index` ([`PgftSpec::switch_guid`]), so the
//!   GUID order of switches is generator order, and among the parents (or the children) of one
//!   PGFT switch, which differ in one digit, GUID order is digit order;
//! * end node GUID: `0x0002c9 << 40 | 0x80 << 32 | d << 8` ([`PgftSpec::node_guid`]), CA port GUID =
//!   node GUID + 1 (ibsim's node GUID + port number convention).
//!
//! # Names
//!
//! Switch descriptions are `"<KIND> L<level> S(<digits>)"`, e.g. `"PGFT L1 S(0,3,1)"`, digits in
//! notation order (index 1 first); end nodes are `"n(<a1>,..,<ah>)"`. [`PgftLayout::recognize`]
//! reads the switch names back, infers the spec, regenerates it and accepts the fabric only if it
//! is that complete, fully live fat-tree. [`PgftLayout::recognize_structure`] recognises a
//! complete PGFT from its levels and cabling alone (any names, GUIDs and port numbers).
//!
//! # Degradation
//!
//! [`degrade`] removes `N` random non-leaf switches (with their cables) and then `N` random
//! inter-switch cables from any fabric, deterministically for a seed (ChaCha8). Removed equipment
//! is absent from the returned fabric (and any file written from it); the remaining switches keep
//! their relative order, so their ids shift: map them back to the generator by GUID
//! ([`PgftLayout::addr_of_guid`]).

mod addr;
mod build;
mod degrade;
pub mod direct;
mod error;
mod layout;
mod limits;
mod recable;
mod recognize;
mod spec;
mod structure;

pub use addr::SwitchAddr;
pub use build::{generate, generate_str, Generated};
pub use degrade::{degrade, degrade_direct, Degrade};
pub use direct::{generate_direct, DirectSpec};
pub use error::GenError;
pub use layout::PgftLayout;
pub use limits::{MAX_END_NODES, MAX_LEVELS, MAX_SWITCHES, MAX_SWITCH_PORTS};
pub use recable::{recable, NamedPort};
pub use spec::{PgftSpec, SpecKind, NODE_GUID_BASE, SWITCH_GUID_BASE};
