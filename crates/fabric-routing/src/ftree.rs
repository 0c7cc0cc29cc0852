//! Ftree (thesis Alg. 1), Ftree2 (Alg. 9) and Ftree-Random (Alg. 8), on the ranking's link
//! directions or on BFS directions (Alg. 10: BFS-Ftree, BFS-Ftree2, BFS-Ftree-Random).
//!
//! SCAFFOLD: being built by the ftree helper; until then it refuses every fabric.

use crate::engine::{check_route_args, LidSet, RoutingContext, RoutingEngine, RoutingError};
use crate::lft::Lfts;

/// Which member of the Ftree family.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FtreeVariant {
    /// Thesis Alg. 1.
    Ftree,
    /// Thesis Alg. 9.
    Ftree2,
    /// Thesis Alg. 8, with the seed of its random choices.
    Random { seed: u64 },
}

/// Where the link directions come from.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Directions {
    /// The ranking's levels (fat-trees).
    Ranking,
    /// A BFS spanning tree (Alg. 10), any topology.
    Bfs,
}

/// An engine of the Ftree family.
#[derive(Copy, Clone, Debug)]
pub struct Ftree {
    /// Ftree, Ftree2 or Ftree-Random.
    pub variant: FtreeVariant,
    /// Ranking or BFS directions.
    pub directions: Directions,
}

impl Ftree {
    /// The engine of `variant` on `directions`.
    pub fn new(variant: FtreeVariant, directions: Directions) -> Self {
        Ftree { variant, directions }
    }
}

impl RoutingEngine for Ftree {
    fn name(&self) -> &'static str {
        match (self.variant, self.directions) {
            (FtreeVariant::Ftree, Directions::Ranking) => "ftree",
            (FtreeVariant::Ftree2, Directions::Ranking) => "ftree2",
            (FtreeVariant::Random { .. }, Directions::Ranking) => "ftree-random",
            (FtreeVariant::Ftree, Directions::Bfs) => "bfs-ftree",
            (FtreeVariant::Ftree2, Directions::Bfs) => "bfs-ftree2",
            (FtreeVariant::Random { .. }, Directions::Bfs) => "bfs-ftree-random",
        }
    }
    fn route(&self, ctx: &RoutingContext<'_>, set: LidSet, lfts: &mut Lfts) -> Result<(), RoutingError> {
        check_route_args(ctx, set, lfts)?;
        Err(RoutingError::Unsupported {
            engine: self.name(),
            reason: "not built yet".into(),
        })
    }
}
