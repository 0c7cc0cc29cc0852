//! Fat-tree generators.
