//! The fabricd northbound gRPC API, generated from `proto/fabricd/v1/fabricd.proto`.
//!
//! * [`v1`]: messages, the `FabricManager` client (`v1::fabric_manager_client`) and server
//!   (`v1::fabric_manager_server`) stubs.
//! * [`FILE_DESCRIPTOR_SET`]: the encoded descriptor set, for gRPC reflection.
//!
//! **Architecture invariant:** only the daemon and the CLI see this crate; algorithm crates never
//! depend on protobuf types.

/// Version 1 of the API (`package fabricd.v1`).
#[allow(clippy::all, missing_docs)]
pub mod v1 {
    tonic::include_proto!("fabricd.v1");

    /// Fully qualified name of the service, as used by the gRPC health service.
    pub const SERVICE_NAME: &str = "fabricd.v1.FabricManager";
}

/// Encoded `FileDescriptorSet` of the API.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("fabricd_descriptor");

#[cfg(test)]
mod tests {
    use super::v1::*;
    use prost::Message;

    #[test]
    fn phase_names_and_round_trip() {
        assert_eq!(Phase::Idle.as_str_name(), "PHASE_IDLE");
        assert_eq!(Phase::from_str_name("PHASE_COMMIT"), Some(Phase::Commit));
        let s = Status { generation: 7, phase: Phase::Update as i32, engine: "dmodc".into(), ..Default::default() };
        let back = Status::decode(s.encode_to_vec().as_slice()).expect("decode");
        assert_eq!(back.generation, 7);
        assert_eq!(back.phase(), Phase::Update);
    }

    #[test]
    fn descriptor_set_names_the_service() {
        let fds = prost_types_free_check(super::FILE_DESCRIPTOR_SET);
        assert!(fds, "descriptor set should mention the service name");
    }

    /// Checks the raw descriptor bytes contain the service name without pulling in prost-types.
    fn prost_types_free_check(bytes: &[u8]) -> bool {
        bytes.windows(b"FabricManager".len()).any(|w| w == b"FabricManager")
    }
}
