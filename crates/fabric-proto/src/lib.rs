//! The fabricd northbound gRPC API, generated from `proto/fabricd/v1/fabricd.proto`.
//!
//! * [`v1`]: messages, the `FabricManager` client (`v1::fabric_manager_client`) and server
//!   (`v1::fabric_manager_server`) stubs.
//! * [`connect`]: a client over the daemon's Unix socket (or `http://host:port`).
//! * [`FILE_DESCRIPTOR_SET`]: the encoded descriptor set, for gRPC reflection.
//!
//! **Architecture invariant:** only the daemon and the CLI see this crate; algorithm crates never
//! depend on protobuf types.

use std::path::PathBuf;

use tonic::transport::{Channel, Endpoint, Uri};

/// Version 1 of the API (`package fabricd.v1`).
#[allow(clippy::all, missing_docs)]
pub mod v1 {
    tonic::include_proto!("fabricd.v1");

    /// Fully qualified name of the service, as used by the gRPC health service.
    pub const SERVICE_NAME: &str = "fabricd.v1.FabricManager";
}

/// Encoded `FileDescriptorSet` of the API.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("fabricd_descriptor");

/// Largest message a client built by [`connect`] accepts (whole-fabric LFT dumps are large).
pub const MAX_MESSAGE_BYTES: usize = 1 << 30;

/// A `FabricManager` client.
pub type Client = v1::fabric_manager_client::FabricManagerClient<Channel>;

/// Opens a channel to a daemon: `target` is a Unix socket path (optionally `unix:` prefixed) or
/// an `http://host:port` URL.
pub async fn channel(target: &str) -> Result<Channel, tonic::transport::Error> {
    if target.starts_with("http://") || target.starts_with("https://") {
        return Endpoint::from_shared(target.to_string())?.connect().await;
    }
    let path = PathBuf::from(target.strip_prefix("unix:").unwrap_or(target));
    // The URI is required by the API but unused: the connector always dials the socket.
    Endpoint::from_static("http://fabricd.local")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
        .await
}

/// A `FabricManager` client on [`channel`]`(target)`, accepting messages up to
/// [`MAX_MESSAGE_BYTES`].
pub async fn connect(target: &str) -> Result<Client, tonic::transport::Error> {
    let ch = channel(target).await?;
    Ok(Client::new(ch)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES))
}

#[cfg(test)]
mod tests {
    use super::v1::*;
    use prost::Message;

    #[test]
    fn phase_names_and_round_trip() {
        assert_eq!(Phase::Idle.as_str_name(), "PHASE_IDLE");
        assert_eq!(Phase::from_str_name("PHASE_COMMIT"), Some(Phase::Commit));
        let s = Status {
            generation: 7,
            phase: Phase::Update as i32,
            engine: "dmodc".into(),
            ..Default::default()
        };
        let back = Status::decode(s.encode_to_vec().as_slice()).expect("decode");
        assert_eq!(back.generation, 7);
        assert_eq!(back.phase(), Phase::Update);
    }

    #[test]
    fn descriptor_set_names_the_service() {
        let needle = b"FabricManager";
        assert!(super::FILE_DESCRIPTOR_SET.windows(needle.len()).any(|w| w == needle));
    }

    #[tokio::test]
    async fn connect_to_missing_socket_fails_cleanly() {
        let dir = std::env::temp_dir().join(format!("fabric-proto-test-{}", std::process::id()));
        let sock = dir.join("absent.sock");
        assert!(super::connect(sock.to_str().expect("utf-8 path")).await.is_err());
    }
}
