//! Generates the agent protocol code (client and server) from the workspace's top-level
//! `proto/fabric/agent/v1/agent.proto`. The `.proto` file is compiled in Rust by `protox` (no
//! system `protoc` is needed) and the descriptor set feeds `tonic-prost-build`.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let file = root.join("fabric/agent/v1/agent.proto");
    println!("cargo:rerun-if-changed={}", file.display());
    let fds = protox::compile([&file], [&root])?;
    tonic_prost_build::configure().compile_fds(fds)?;
    Ok(())
}
