//! Generates the gRPC code from the workspace's top-level `proto/` directory. The `.proto` files
//! are compiled in Rust by `protox` (no system `protoc` is needed); the resulting descriptor set
//! feeds `tonic-prost-build` and is written to `$OUT_DIR/fabricd_descriptor.bin` for the daemon's
//! gRPC reflection service.

use std::path::PathBuf;

use protox::prost::Message as _;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let file = root.join("fabricd/v1/fabricd.proto");
    println!("cargo:rerun-if-changed={}", file.display());
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let fds = protox::compile([&file], [&root])?;
    std::fs::write(out.join("fabricd_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure().compile_fds(fds)?;
    Ok(())
}
