//! fabric-ha over TLS with client certificates: one real etcd member (TLS, not quorum, is
//! under test) started here with `--client-cert-auth`, certificates made by `openssl`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric_ha::{Coordinator, Fence, HaConfig, HaError, HaTls};

struct Etcd {
    child: Child,
    dir: PathBuf,
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl (Debian package openssl) must be installed");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// CA, server certificate for 127.0.0.1, client certificate.
fn make_certs(dir: &Path) {
    let days = ["-days", "2"];
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-subj",
            "/CN=fabric-ha test CA",
            days[0],
            days[1],
        ],
    );
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n",
    )
    .unwrap();
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    for (name, cn) in [("server", "/CN=127.0.0.1"), ("client", "/CN=fabricd")] {
        let key = format!("{name}.key");
        let csr = format!("{name}.csr");
        let pem = format!("{name}.pem");
        let ext = format!("{name}.ext");
        openssl(
            dir,
            &[
                "req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj", cn,
            ],
        );
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &pem,
                "-extfile",
                &ext,
                days[0],
                days[1],
            ],
        );
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_tls_etcd() -> (Etcd, String) {
    let dir = std::env::temp_dir().join(format!("fabric-ha-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    make_certs(&dir);
    let (cp, pp) = (free_port(), free_port());
    let client_url = format!("https://127.0.0.1:{cp}");
    let peer_url = format!("http://127.0.0.1:{pp}");
    let log = std::fs::File::create(dir.join("etcd.log")).unwrap();
    let child = Command::new(fabric_etcd_harness::etcd_binary())
        .args(["--name", "t", "--data-dir"])
        .arg(dir.join("data"))
        .args(["--listen-client-urls", &client_url])
        .args(["--advertise-client-urls", &client_url])
        .args(["--listen-peer-urls", &peer_url])
        .args(["--initial-advertise-peer-urls", &peer_url])
        .args(["--initial-cluster", &format!("t={peer_url}")])
        .arg("--cert-file")
        .arg(dir.join("server.pem"))
        .arg("--key-file")
        .arg(dir.join("server.key"))
        .arg("--trusted-ca-file")
        .arg(dir.join("ca.pem"))
        .arg("--client-cert-auth")
        .args(["--logger", "zap", "--log-level", "warn"])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("etcd (Debian etcd-server) must be installed");
    (Etcd { child, dir }, client_url)
}

fn cfg(ep: &str, dir: &Path, client_cert: bool) -> HaConfig {
    HaConfig {
        endpoints: vec![ep.to_string()],
        key_prefix: "/fabricd-test/tls".into(),
        lease_ttl: Duration::from_secs(3),
        node_name: "n1".into(),
        advertise: "n1:7070".into(),
        tls: Some(HaTls {
            ca: dir.join("ca.pem"),
            cert: client_cert.then(|| dir.join("client.pem")),
            key: client_cert.then(|| dir.join("client.key")),
        }),
        request_timeout: Duration::from_secs(1),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_election_and_shared_state_over_tls_with_client_certificates() {
    let (etcd, ep) = start_tls_etcd();
    let dir = etcd.dir.clone();
    // Connect as soon as the member answers (at most 20 s).
    let end = Instant::now() + Duration::from_secs(20);
    let c1 = loop {
        match Coordinator::connect(cfg(&ep, &dir, true), Arc::new(Fence::standby())).await {
            Ok(c) => break c,
            Err(e) => {
                let log = std::fs::read_to_string(dir.join("etcd.log")).unwrap_or_default();
                assert!(Instant::now() < end, "no TLS connection to {ep}: {e}\n{log}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let l1 = c1.campaign().await.unwrap();
    assert!(l1.epoch > 0);
    let st = l1.shared_state();
    st.put("plan", b"over tls").await.unwrap();
    assert_eq!(st.load().await.unwrap()["plan"], b"over tls");

    // Without a client certificate, etcd (--client-cert-auth) refuses the connection.
    let e = Coordinator::connect(cfg(&ep, &dir, false), Arc::new(Fence::standby()))
        .await
        .err()
        .expect("a client without certificate must be refused");
    assert!(e.to_string().contains(&ep), "{e}");
    // A key file that is not PEM names the file.
    let mut bad = cfg(&ep, &dir, true);
    bad.tls.as_mut().unwrap().key = Some(dir.join("server.ext"));
    let e = Coordinator::connect(bad, Arc::new(Fence::standby()))
        .await
        .err()
        .unwrap();
    assert!(matches!(e, HaError::TlsFile { .. }), "{e}");
    assert!(
        e.to_string().contains("server.ext") && e.to_string().contains("client key"),
        "{e}"
    );
    l1.resign().await;
}
