//! gRPC server reflection on both listeners (what `grpcurl list` / `grpcurl describe` use, so
//! no `.proto` file is needed): the real daemon, a reflection client over the Unix socket and
//! over the plaintext TCP listener, v1 and the older v1alpha.

mod common;

use common::{free_port, run_with_deadline, test_dir, Daemon, Opts};
use tonic::transport::Channel;
use tonic_reflection::pb::{v1, v1alpha};

const SMALL: &str = "PGFT(2;4,4;1,2;1,1)";

/// The service names `ListServices` answers (v1).
async fn list_v1(channel: Channel) -> Vec<String> {
    let mut c = v1::server_reflection_client::ServerReflectionClient::new(channel);
    let req = v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(v1::server_reflection_request::MessageRequest::ListServices(
            String::new(),
        )),
    };
    let mut stream = c
        .server_reflection_info(tokio_stream::iter(vec![req]))
        .await
        .expect("ServerReflectionInfo")
        .into_inner();
    let reply = stream.message().await.expect("reply").expect("one reply");
    match reply.message_response {
        Some(v1::server_reflection_response::MessageResponse::ListServicesResponse(l)) => {
            l.service.into_iter().map(|s| s.name).collect()
        }
        other => panic!("not a service list: {other:?}"),
    }
}

/// The encoded file descriptors that define `symbol` (v1).
async fn file_containing_v1(channel: Channel, symbol: &str) -> Vec<Vec<u8>> {
    let mut c = v1::server_reflection_client::ServerReflectionClient::new(channel);
    let req = v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(v1::server_reflection_request::MessageRequest::FileContainingSymbol(
            symbol.to_string(),
        )),
    };
    let mut stream = c
        .server_reflection_info(tokio_stream::iter(vec![req]))
        .await
        .expect("ServerReflectionInfo")
        .into_inner();
    let reply = stream.message().await.expect("reply").expect("one reply");
    match reply.message_response {
        Some(v1::server_reflection_response::MessageResponse::FileDescriptorResponse(f)) => f.file_descriptor_proto,
        other => panic!("no file descriptor for {symbol}: {other:?}"),
    }
}

#[test]
fn reflection_lists_the_services_on_the_socket_and_on_tcp() {
    let dir = test_dir("reflection");
    let port = free_port();
    let mut opts = Opts::new(SMALL);
    opts.extra = format!("[grpc]\ntcp_listen = \"127.0.0.1:{port}\"\n");
    let d = Daemon::spawn(&dir, &opts, &[]);
    run_with_deadline(60, async move {
        let _ = d.ready().await;
        let expected = [
            "fabricd.v1.FabricManager",
            "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection",
        ];
        let unix = fabric_proto::channel(d.socket.to_str().expect("utf-8"))
            .await
            .expect("unix channel");
        let tcp = fabric_proto::channel(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("tcp channel");
        for (name, ch) in [("unix socket", unix.clone()), ("tcp", tcp)] {
            let services = list_v1(ch.clone()).await;
            for s in expected {
                assert!(
                    services.iter().any(|x| x == s),
                    "{name}: {s} not listed in {services:?}"
                );
            }
            let files = file_containing_v1(ch, "fabricd.v1.FabricManager").await;
            assert!(!files.is_empty(), "{name}: no descriptor of fabricd.v1.FabricManager");
            let text = String::from_utf8_lossy(&files.concat()).to_string();
            assert!(
                text.contains("fabricd/v1/fabricd.proto"),
                "{name}: descriptor names no file"
            );
            assert!(
                text.contains("GetStatus"),
                "{name}: descriptor lacks the GetStatus method"
            );
        }

        // Older clients (grpcurl before 1.8.8) ask v1alpha.
        let mut c = v1alpha::server_reflection_client::ServerReflectionClient::new(unix);
        let req = v1alpha::ServerReflectionRequest {
            host: String::new(),
            message_request: Some(v1alpha::server_reflection_request::MessageRequest::ListServices(
                String::new(),
            )),
        };
        let mut stream = c
            .server_reflection_info(tokio_stream::iter(vec![req]))
            .await
            .expect("v1alpha ServerReflectionInfo")
            .into_inner();
        let reply = stream.message().await.expect("reply").expect("one reply");
        match reply.message_response {
            Some(v1alpha::server_reflection_response::MessageResponse::ListServicesResponse(l)) => {
                assert!(l.service.iter().any(|s| s.name == "fabricd.v1.FabricManager"), "{l:?}");
            }
            other => panic!("v1alpha: not a service list: {other:?}"),
        }
    });
}
