//! Generates the agent protocol code (client and server) from the workspace's top-level
//! `proto/fabric/agent/v1/agent.proto` with the system `protoc` (set `PROTOC` to use another one).

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let file = root.join("fabric/agent/v1/agent.proto");
    println!("cargo:rerun-if-changed={}", file.display());
    tonic_prost_build::configure().compile_protos(&[file], &[root])?;
    Ok(())
}
