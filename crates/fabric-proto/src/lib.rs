//! The fabricd northbound gRPC API, generated from `proto/fabricd/v1/fabricd.proto`.
//!
//! * [`v1`]: messages, the `FabricManager` client (`v1::fabric_manager_client`) and server
//!   (`v1::fabric_manager_server`) stubs.
//! * [`connect`]: a client over the daemon's Unix socket (or `http://host:port`);
//!   [`connect_with`]: the same and `https://host:port` with TLS options ([`tls::ClientTlsOptions`]:
//!   trust anchor, client certificate for mutual TLS, server name), with errors that say what to fix.
//! * [`tls`]: loading and checking the PEM files of both sides (the daemon's `[grpc]` `tls_*`
//!   keys use it too).
//! * [`FILE_DESCRIPTOR_SET`]: the encoded descriptor set, for gRPC reflection.
//!
//! **Architecture invariant:** only the daemon and the CLI see this crate; algorithm crates never
//! depend on protobuf types.

use std::path::PathBuf;
use std::time::Duration;

use tonic::transport::{Channel, Endpoint, Uri};

pub mod tls;

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

/// How long [`channel_with`] waits for a TCP connection to a daemon.
pub const TCP_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why [`channel_with`] could not open a channel.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// A TLS file or option is unusable (names the option and the file).
    #[error(transparent)]
    Tls(#[from] tls::TlsFileError),
    /// The target and the options do not go together (TLS options on a plaintext target, ...).
    #[error("{0}")]
    Usage(String),
    /// The connection failed. `detail` is the whole error chain on one line (and what a
    /// diagnosis learnt); `hint`, when the failure is understood, what to check.
    #[error("cannot connect to fabricd at {target}: {detail}{}", hint.map(|h| format!(" ({h})")).unwrap_or_default())]
    Transport {
        target: String,
        detail: String,
        hint: Option<&'static str>,
    },
}

/// Whether `target` is a TCP URL (`http://` or `https://`) rather than a Unix socket path.
pub fn is_tcp_target(target: &str) -> bool {
    target.starts_with("http://") || target.starts_with("https://")
}

/// Opens a channel to a daemon at `target`: a Unix socket path (optionally `unix:` prefixed),
/// `http://host:port` (plaintext TCP) or `https://host:port` (TLS, configured by `tls`: trust
/// anchor, client certificate for mutual TLS, server name). TLS options with a plaintext target
/// are refused rather than ignored.
///
/// A TCP channel is probed with a gRPC health check before it is returned, so that a refused
/// TLS handshake (wrong CA, client certificate missing or refused, plaintext to a TLS port and
/// the reverse) is reported here, with a hint, rather than as a bare "connection closed" on the
/// first call.
pub async fn channel_with(target: &str, tls: &tls::ClientTlsOptions) -> Result<Channel, ConnectError> {
    let https = target.starts_with("https://");
    if !https && tls.is_set() {
        return Err(ConnectError::Usage(format!(
            "the --tls-* options apply to https:// targets only; {target} is {}",
            if is_tcp_target(target) {
                "plaintext TCP (use https://host:port for TLS)"
            } else {
                "a Unix socket (always plaintext: its file permissions are the access control)"
            }
        )));
    }
    if !is_tcp_target(target) {
        return channel(target).await.map_err(|e| transport_error(target, &e));
    }
    let endpoint = Endpoint::from_shared(target.to_string())
        .map_err(|e| transport_error(target, &e))?
        .connect_timeout(TCP_CONNECT_TIMEOUT);
    let endpoint = if https {
        endpoint
            .tls_config(tls.load()?)
            .map_err(|e| transport_error(target, &e))?
    } else {
        endpoint
    };
    let failed = match endpoint.connect().await {
        Ok(ch) => match probe(ch.clone()).await {
            Ok(()) => return Ok(ch),
            Err(status) => ConnectError::Transport {
                target: target.to_string(),
                detail: status_chain(&status),
                hint: tls::explain(&status),
            },
        },
        Err(e) => transport_error(target, &e),
    };
    Err(diagnose(target, tls, failed).await)
}

/// The code, message and transport error chain of a status, on one line.
fn status_chain(status: &tonic::Status) -> String {
    let mut s = format!("{:?}: {}", status.code(), status.message());
    if let Some(src) = std::error::Error::source(status) {
        for m in tls::error_chain(src) {
            if !s.contains(&m) {
                s.push_str(": ");
                s.push_str(&m);
            }
        }
    }
    s
}

/// A gRPC health check on a fresh channel: `Err` only when the call failed in the transport
/// (any answer of the server, `Unimplemented` included, means the connection works).
async fn probe(ch: Channel) -> Result<(), tonic::Status> {
    use tonic_health::pb::health_client::HealthClient;
    let mut h = HealthClient::new(ch);
    let req = tonic_health::pb::HealthCheckRequest { service: String::new() };
    match tokio::time::timeout(TCP_CONNECT_TIMEOUT, h.check(req)).await {
        Err(_) => Err(tonic::Status::deadline_exceeded("no answer to a health check")),
        Ok(Ok(_)) => Ok(()),
        Ok(Err(s)) if std::error::Error::source(&s).is_some() => Err(s),
        Ok(Err(s)) if matches!(s.code(), tonic::Code::Unavailable | tonic::Code::Cancelled) => Err(s),
        Ok(Err(_)) => Ok(()),
    }
}

fn transport_error(target: &str, error: &(dyn std::error::Error + 'static)) -> ConnectError {
    ConnectError::Transport {
        target: target.to_string(),
        detail: tls::error_chain(error).join(": "),
        hint: tls::explain(error),
    }
}

/// Adds what a failed TCP connection means when its error did not say: a separate TLS
/// handshake for `https://` (what the server's alert was), a look at the first bytes the server
/// sends for `http://` (a TLS listener).
async fn diagnose(target: &str, opts: &tls::ClientTlsOptions, err: ConnectError) -> ConnectError {
    let ConnectError::Transport {
        target: t,
        detail,
        hint,
    } = err
    else {
        return err;
    };
    let uri: Option<Uri> = target.parse().ok();
    let host = uri
        .as_ref()
        .and_then(|u| u.host())
        .map(|h| h.trim_start_matches('[').trim_end_matches(']').to_string());
    let (Some(host), None) = (host, hint) else {
        return ConnectError::Transport {
            target: t,
            detail,
            hint,
        };
    };
    let https = target.starts_with("https://");
    let port = uri
        .as_ref()
        .and_then(tonic::transport::Uri::port_u16)
        .unwrap_or(if https { 443 } else { 80 });
    let opts = opts.clone();
    let found = tokio::task::spawn_blocking(move || {
        if https {
            tls::diagnose_handshake(&host, port, &opts).map(|e| {
                let hint = tls::explain(&e);
                (format!("the server said: {e}"), hint)
            })
        } else if tls::speaks_tls(&host, port) {
            Some((
                "the server answered with TLS".to_string(),
                Some("its grpc.tcp_listen uses TLS: use https:// and --tls-ca"),
            ))
        } else {
            None
        }
    })
    .await
    .ok()
    .flatten();
    match found {
        Some((more, hint)) => ConnectError::Transport {
            target: t,
            detail: format!("{detail}; {more}"),
            hint,
        },
        None => ConnectError::Transport {
            target: t,
            detail,
            hint,
        },
    }
}

/// [`connect`] with the targets and TLS options of [`channel_with`].
pub async fn connect_with(target: &str, tls: &tls::ClientTlsOptions) -> Result<Client, ConnectError> {
    let ch = channel_with(target, tls).await?;
    Ok(Client::new(ch)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES))
}

/// A failed call as one line: the gRPC code and message, the transport error chain behind it,
/// and a TLS hint when the chain holds one (in TLS 1.3 a server that refuses the client
/// certificate does so after the client's handshake completed, so it shows on the first call).
pub fn describe_status(status: &tonic::Status) -> String {
    let mut s = status_chain(status);
    if let Some(h) = tls::explain(status) {
        s.push_str(&format!(" ({h})"));
    }
    s
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

    #[tokio::test]
    async fn tls_options_on_a_plaintext_target_are_refused() {
        let opts = super::tls::ClientTlsOptions {
            ca: Some("/nonexistent/ca.pem".into()),
            ..Default::default()
        };
        for target in ["http://127.0.0.1:1", "/run/fabricd/fabricd.sock"] {
            let e = super::channel_with(target, &opts).await.unwrap_err();
            assert!(matches!(e, super::ConnectError::Usage(_)), "{e}");
            assert!(e.to_string().contains("https://"), "{e}");
        }
        // https:// reads the files first: the error names the option and the path.
        let e = super::channel_with("https://127.0.0.1:1", &opts).await.unwrap_err();
        assert!(
            e.to_string().starts_with("--tls-ca: cannot read /nonexistent/ca.pem"),
            "{e}"
        );
    }
}
