//! Test-only crate (`publish = false`): `tests/architecture.rs` checks the architecture
//! invariants stated in `docs/ARCHITECTURE.md` by reading the workspace itself — the
//! `Cargo.toml` files (crate layering, lints) and the sources as text (file sizes, `unsafe`,
//! module import cycles). The library is empty; cargo needs a target to hold the tests.
