//! The gRPC listeners: the Unix socket (bound with its directory checked) and the server
//! builder with the `[grpc]` limits.

use std::path::Path;
use std::time::Duration;

use tokio::net::UnixListener;

use super::DaemonError;

/// Binds the Unix socket: creates the parent directory (mode 0750 when created here), refuses a
/// directory another user owns or may write (`persist::check_private_dir`: they could replace
/// the socket), removes a stale socket left by a crash (refusing when another daemon answers on
/// it, and refusing to remove anything that is not a socket: a regular file at that path, e.g.
/// the state directory's `guid2lid`, stays), applies the permission bits.
pub(super) async fn bind_socket(path: &Path, mode: u32) -> Result<UnixListener, DaemonError> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let io = |what: &'static str| {
        let p = path.display().to_string();
        move |source| DaemonError::Io { what, path: p, source }
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if std::fs::symlink_metadata(dir).is_err() {
        std::fs::create_dir_all(dir).map_err(io("cannot create the socket directory for"))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o750))
            .map_err(io("cannot set the permissions of the socket directory of"))?;
    }
    crate::persist::check_private_dir(dir).map_err(|e| DaemonError::Config(format!("socket directory: {e}")))?;
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            let kind = if meta.file_type().is_symlink() {
                "a symbolic link"
            } else if meta.is_dir() {
                "a directory"
            } else if meta.is_file() {
                "a regular file"
            } else {
                "not a socket"
            };
            return Err(DaemonError::Config(format!(
                "socket {}: the path exists and is {kind}: refusing to remove it (only a stale socket is \
                 removed); choose another grpc.socket / --socket",
                path.display()
            )));
        }
        if tokio::net::UnixStream::connect(path).await.is_ok() {
            return Err(DaemonError::SocketInUse(path.to_path_buf()));
        }
        std::fs::remove_file(path).map_err(io("cannot remove the stale socket"))?;
    }
    let l = UnixListener::bind(path).map_err(io("cannot bind the socket"))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(io("cannot set the permissions of the socket"))?;
    Ok(l)
}

/// A gRPC server builder with the `[grpc]` limits: keep-alive pings every third of the idle
/// timeout (answered by live clients, so quiet subscribers keep their connection), bounded
/// header lists and concurrent streams per connection.
pub(super) fn server_builder(cfg: &crate::config::GrpcConfig) -> tonic::transport::Server {
    let idle = Duration::from_secs(cfg.idle_timeout_s);
    tonic::transport::Server::builder()
        .http2_keepalive_interval(Some((idle / 3).max(Duration::from_millis(100))))
        .http2_keepalive_timeout(Some(
            (idle / 3).clamp(Duration::from_millis(100), Duration::from_secs(20)),
        ))
        .http2_max_header_list_size(64 * 1024)
        .max_concurrent_streams(Some(128))
}

/// Adds the gRPC server reflection services (`grpc.reflection.v1` and the `v1alpha` older
/// clients still ask for) to a listener's router: they describe `fabricd.v1.FabricManager`,
/// `grpc.health.v1.Health` and themselves from the descriptor sets compiled into the binary,
/// so `grpcurl` works without the `.proto` files.
pub(super) fn add_reflection<L>(
    router: tonic::transport::server::Router<L>,
) -> Result<tonic::transport::server::Router<L>, DaemonError> {
    use tonic_reflection::server::Builder;
    let configure = || {
        Builder::configure()
            .register_encoded_file_descriptor_set(fabric_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    Ok(router
        .add_service(configure().build_v1()?)
        .add_service(configure().build_v1alpha()?))
}
