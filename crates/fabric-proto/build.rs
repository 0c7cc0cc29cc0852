//! Generates the gRPC code from the workspace's top-level `proto/` directory with the system
//! `protoc` (set `PROTOC` to use another one).

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let file = root.join("fabricd/v1/fabricd.proto");
    println!("cargo:rerun-if-changed={}", file.display());
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out.join("fabricd_descriptor.bin"))
        .compile_protos(&[file], &[root])?;
    Ok(())
}
