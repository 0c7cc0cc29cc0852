//! TLS and mutual TLS of the gRPC TCP listener, end to end: the real `fabricd` (mock driver)
//! with `[grpc]` `tls_cert` / `tls_key` / `tls_client_ca`, the real `fabricctl` with
//! `https://` and `--tls-*`, and a plain tonic client. Certificates are generated at test time
//! (a throwaway CA, a server certificate for 127.0.0.1 and localhost, client certificates, and a
//! second CA that nobody trusts); no key material is in the repository.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::*;
use fabric_proto::tls::ClientTlsOptions;
use fabric_proto::v1 as pb;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

const SMALL: &str = "PGFT(2;4,6;1,3;1,1)";

/// PEM files of one test.
struct Pki {
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
    /// A CA nobody trusts, and a client certificate it signed.
    rogue_ca: PathBuf,
    rogue_cert: PathBuf,
    rogue_key: PathBuf,
    /// A valid key that belongs to no certificate here.
    other_key: PathBuf,
}

/// A self-signed CA: the issuer that signs leaves, and its certificate (PEM).
fn ca(name: &str) -> (Issuer<'static, KeyPair>, String) {
    let key = KeyPair::generate().expect("CA key");
    let mut p = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    p.distinguished_name.push(DnType::CommonName, name);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let pem = p.self_signed(&key).expect("CA cert").pem();
    (Issuer::new(p, key), pem)
}

/// A leaf certificate signed by `issuer`: (cert PEM, key PEM).
fn leaf(
    issuer: &Issuer<'static, KeyPair>,
    cn: &str,
    sans: &[&str],
    purpose: ExtendedKeyUsagePurpose,
) -> (String, String) {
    let key = KeyPair::generate().expect("leaf key");
    let mut p =
        CertificateParams::new(sans.iter().map(std::string::ToString::to_string).collect::<Vec<_>>()).expect("params");
    p.distinguished_name.push(DnType::CommonName, cn);
    p.extended_key_usages = vec![purpose];
    let cert = p.signed_by(&key, issuer).expect("leaf cert");
    (cert.pem(), key.serialize_pem())
}

impl Pki {
    fn new(dir: &Path) -> Pki {
        let write = |name: &str, text: &str| {
            let p = dir.join(name);
            std::fs::write(&p, text).expect("write PEM");
            p
        };
        let (ca_issuer, ca_cert) = ca("fabricd test CA");
        let (rogue_issuer, rogue_cert) = ca("rogue CA");
        let (sc, sk) = leaf(
            &ca_issuer,
            "fabricd",
            &["127.0.0.1", "localhost"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let (cc, ck) = leaf(&ca_issuer, "scheduler", &[], ExtendedKeyUsagePurpose::ClientAuth);
        let (rc, rk) = leaf(&rogue_issuer, "intruder", &[], ExtendedKeyUsagePurpose::ClientAuth);
        Pki {
            ca: write("ca.pem", &ca_cert),
            server_cert: write("server.pem", &sc),
            server_key: write("server.key", &sk),
            client_cert: write("client.pem", &cc),
            client_key: write("client.key", &ck),
            rogue_ca: write("rogue-ca.pem", &rogue_cert),
            rogue_cert: write("rogue.pem", &rc),
            rogue_key: write("rogue.key", &rk),
            other_key: write("other.key", &KeyPair::generate().expect("key").serialize_pem()),
        }
    }

    /// The `[grpc]` table of a TLS listener on `port`.
    fn grpc_table(&self, port: u16, mutual: bool) -> String {
        let mut t = format!(
            "[grpc]\ntcp_listen = \"127.0.0.1:{port}\"\ntls_cert = \"{}\"\ntls_key = \"{}\"\n",
            self.server_cert.display(),
            self.server_key.display()
        );
        if mutual {
            t.push_str(&format!("tls_client_ca = \"{}\"\n", self.ca.display()));
        }
        t
    }
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// Runs `fabricctl ARGS` (off the async runtime's threads).
async fn fabricctl(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        Command::new(fabricctl_binary())
            .args(&args)
            .output()
            .expect("run fabricctl")
    })
    .await
    .expect("fabricctl task")
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(std::string::ToString::to_string).collect()
}

/// `fabricctl ... status --json` succeeded; its generation.
fn ok_generation(o: &Output) -> u64 {
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "fabricctl failed: {}\n{stdout}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("status --json");
    v["generation"].as_u64().expect("generation")
}

/// `fabricctl` failed and its message contains every needle.
fn failed_with(o: &Output, needles: &[&str]) -> String {
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(
        !o.status.success(),
        "fabricctl succeeded: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    for n in needles {
        assert!(stderr.contains(n), "{n:?} not in: {stderr}");
    }
    stderr
}

async fn start(dir: &Path, extra: String) -> (Daemon, pb::Status) {
    let mut opts = Opts::new(SMALL);
    opts.extra = extra;
    let d = Daemon::spawn(dir, &opts, &[]);
    // The Unix socket stays plaintext and serves as before.
    let mut c = d.ready().await;
    let s = status(&mut c).await;
    (d, s)
}

#[test]
fn tls_listener_serves_trusted_clients_and_explains_refusals() {
    run_with_deadline(180, async {
        let dir = test_dir("tls");
        let pki = Pki::new(&dir);
        let port = free_port();
        let (d, st) = start(&dir, pki.grpc_table(port, false)).await;
        assert!(st.generation >= 1);
        let https = format!("https://127.0.0.1:{port}");

        // Trusted CA: works by IP (the certificate lists 127.0.0.1) and by name.
        let o = fabricctl(args(&["--socket", &https, "--tls-ca", p(&pki.ca), "status", "--json"])).await;
        assert!(ok_generation(&o) >= st.generation);
        let by_name = format!("https://localhost:{port}");
        let o = fabricctl(args(&[
            "--socket",
            &by_name,
            "--tls-ca",
            p(&pki.ca),
            "status",
            "--json",
        ]))
        .await;
        assert!(ok_generation(&o) >= st.generation);

        // No --tls-ca: the system trust store does not know the test CA.
        let o = fabricctl(args(&["--socket", &https, "status"])).await;
        failed_with(
            &o,
            &["cannot connect to fabricd at", "not signed by a trusted CA", "--tls-ca"],
        );
        // The wrong CA.
        let o = fabricctl(args(&["--socket", &https, "--tls-ca", p(&pki.rogue_ca), "status"])).await;
        failed_with(&o, &["not signed by a trusted CA"]);
        // A name the certificate does not list.
        let o = fabricctl(args(&[
            "--socket",
            &https,
            "--tls-ca",
            p(&pki.ca),
            "--tls-domain",
            "fabricd.example.org",
            "status",
        ]))
        .await;
        failed_with(&o, &["does not name the host", "--tls-domain"]);
        // ... and one it does, when connecting by IP.
        let o = fabricctl(args(&[
            "--socket",
            &https,
            "--tls-ca",
            p(&pki.ca),
            "--tls-domain",
            "localhost",
            "status",
            "--json",
        ]))
        .await;
        assert!(ok_generation(&o) >= 1);
        // Plaintext to the TLS port.
        let http = format!("http://127.0.0.1:{port}");
        let o = fabricctl(args(&["--socket", &http, "status"])).await;
        failed_with(&o, &["use https://"]);
        // TLS options with a plaintext target are refused, not ignored.
        let o = fabricctl(args(&["--socket", &http, "--tls-ca", p(&pki.ca), "status"])).await;
        failed_with(&o, &["https:// targets only"]);
        // A CA file that is not there is named.
        let missing = dir.join("missing-ca.pem");
        let o = fabricctl(args(&["--socket", &https, "--tls-ca", p(&missing), "status"])).await;
        failed_with(&o, &["--tls-ca: cannot read", p(&missing)]);

        // A plain tonic client (not the fabric-proto connector): health check over TLS.
        let ca = std::fs::read(&pki.ca).expect("read CA");
        let ch = tonic::transport::Endpoint::from_shared(https.clone())
            .expect("endpoint")
            .tls_config(
                tonic::transport::ClientTlsConfig::new().ca_certificate(tonic::transport::Certificate::from_pem(ca)),
            )
            .expect("tls config")
            .connect()
            .await
            .expect("tonic TLS connect");
        let mut health = tonic_health::pb::health_client::HealthClient::new(ch);
        let h = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: pb::SERVICE_NAME.into(),
            })
            .await
            .expect("health check over TLS")
            .into_inner();
        assert_eq!(
            h.status,
            tonic_health::pb::health_check_response::ServingStatus::Serving as i32
        );
        // And the fabric-proto connector with its options.
        let tls = ClientTlsOptions {
            ca: Some(pki.ca.clone()),
            ..Default::default()
        };
        let mut c = fabric_proto::connect_with(&https, &tls).await.expect("connect_with");
        assert!(status(&mut c).await.generation >= st.generation);

        let log = d.log_text();
        assert!(log.contains("gRPC also listening on TCP with TLS"), "{log}");
        // The test key is written 0644 (umask 022): the daemon warns about it.
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&pki.server_key).expect("key").permissions().mode();
        assert_eq!(
            log.contains("grpc.tls_key is readable by every user"),
            mode & 0o004 != 0,
            "mode {mode:o}: {log}"
        );
    });
}

#[test]
fn mutual_tls_requires_a_certificate_from_the_client_ca() {
    run_with_deadline(180, async {
        let dir = test_dir("mtls");
        let pki = Pki::new(&dir);
        let port = free_port();
        let (d, st) = start(&dir, pki.grpc_table(port, true)).await;
        let https = format!("https://127.0.0.1:{port}");
        let ca = p(&pki.ca);

        // No client certificate.
        let o = fabricctl(args(&["--socket", &https, "--tls-ca", ca, "status"])).await;
        failed_with(&o, &["requires a client certificate", "--tls-cert"]);
        // A client certificate of the configured CA.
        let o = fabricctl(args(&[
            "--socket",
            &https,
            "--tls-ca",
            ca,
            "--tls-cert",
            p(&pki.client_cert),
            "--tls-key",
            p(&pki.client_key),
            "status",
            "--json",
        ]))
        .await;
        assert!(ok_generation(&o) >= st.generation);
        // A client certificate of another CA.
        let o = fabricctl(args(&[
            "--socket",
            &https,
            "--tls-ca",
            ca,
            "--tls-cert",
            p(&pki.rogue_cert),
            "--tls-key",
            p(&pki.rogue_key),
            "status",
        ]))
        .await;
        failed_with(&o, &["rejected the client certificate"]);
        // A key that does not belong to the certificate is caught before connecting.
        let o = fabricctl(args(&[
            "--socket",
            &https,
            "--tls-ca",
            ca,
            "--tls-cert",
            p(&pki.client_cert),
            "--tls-key",
            p(&pki.other_key),
            "status",
        ]))
        .await;
        failed_with(&o, &["--tls-key", p(&pki.other_key), "does not match"]);
        // --tls-cert alone is a usage error.
        let o = fabricctl(args(&["--socket", &https, "--tls-cert", p(&pki.client_cert), "status"])).await;
        failed_with(&o, &["--tls-key"]);

        // A tonic client with and without an identity.
        let with_id = ClientTlsOptions {
            ca: Some(pki.ca.clone()),
            cert: Some(pki.client_cert.clone()),
            key: Some(pki.client_key.clone()),
            domain: None,
        };
        let mut c = fabric_proto::connect_with(&https, &with_id)
            .await
            .expect("mTLS connect");
        assert!(status(&mut c).await.generation >= st.generation);
        let without = ClientTlsOptions {
            ca: Some(pki.ca.clone()),
            ..Default::default()
        };
        // TLS 1.3: the refusal comes after the client's handshake, so on connect or first call.
        let refused = match fabric_proto::connect_with(&https, &without).await {
            Err(e) => e.to_string(),
            Ok(mut c) => match c.get_status(pb::GetStatusRequest {}).await {
                Ok(s) => panic!("served without a client certificate: {s:?}"),
                Err(s) => fabric_proto::describe_status(&s),
            },
        };
        assert!(refused.contains("requires a client certificate"), "{refused}");

        // The Unix socket needs no certificate.
        let mut local = d.client().await;
        assert!(status(&mut local).await.generation >= st.generation);
    });
}

/// `fabricd --config FILE --check-config`: (exit code, stderr + stdout).
fn check_config(config: &Path) -> (Option<i32>, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_fabricd"))
        .arg("--config")
        .arg(config)
        .arg("--check-config")
        .output()
        .expect("run fabricd");
    (
        o.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stderr),
            String::from_utf8_lossy(&o.stdout)
        ),
    )
}

#[test]
fn bad_tls_files_stop_the_start_naming_the_key_and_the_path() {
    let dir = test_dir("tls-bad");
    let pki = Pki::new(&dir);
    let key_lines: Vec<String> = std::fs::read_to_string(&pki.other_key)
        .expect("key")
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .map(str::to_string)
        .collect();
    let port = free_port();
    let missing = dir.join("no-such.key");
    let base = Opts::new(SMALL);
    let cases: Vec<(&str, String, Vec<String>)> = vec![
        (
            "missing key file",
            format!(
                "[grpc]\ntcp_listen = \"127.0.0.1:{port}\"\ntls_cert = \"{}\"\ntls_key = \"{}\"\n",
                pki.server_cert.display(),
                missing.display()
            ),
            vec!["grpc.tls_key".into(), "cannot read".into(), p(&missing).into()],
        ),
        (
            "key of another certificate",
            format!(
                "[grpc]\ntcp_listen = \"127.0.0.1:{port}\"\ntls_cert = \"{}\"\ntls_key = \"{}\"\n",
                pki.server_cert.display(),
                pki.other_key.display()
            ),
            vec!["grpc.tls_key".into(), "does not match".into(), p(&pki.other_key).into()],
        ),
        (
            "key given as the certificate",
            format!(
                "[grpc]\ntcp_listen = \"127.0.0.1:{port}\"\ntls_cert = \"{}\"\ntls_key = \"{}\"\n",
                pki.other_key.display(),
                pki.server_key.display()
            ),
            vec![
                "grpc.tls_cert".into(),
                "no certificate".into(),
                p(&pki.other_key).into(),
            ],
        ),
        (
            "client CA that is a key",
            format!(
                "{}tls_client_ca = \"{}\"\n",
                pki.grpc_table(port, false),
                pki.other_key.display()
            ),
            vec!["grpc.tls_client_ca".into(), p(&pki.other_key).into()],
        ),
    ];
    for (what, grpc, needles) in cases {
        let case_dir = dir.join(what.replace(' ', "-"));
        std::fs::create_dir_all(&case_dir).expect("case dir");
        let config = case_dir.join("fabricd.toml");
        let mut opts = base.clone();
        opts.extra = grpc;
        std::fs::write(&config, opts.config_text()).expect("write config");
        // --check-config reads the files too.
        let (code, out) = check_config(&config);
        assert_eq!(code, Some(2), "{what}: {out}");
        // The daemon refuses to start.
        let mut d = Daemon::spawn_with_config(&case_dir, &config, &[]);
        let code = d.wait_exit(Duration::from_secs(30));
        assert_ne!(code, Some(0), "{what}: fabricd started");
        let log = d.log_text();
        for text in [&out, &log] {
            for n in &needles {
                assert!(text.contains(n.as_str()), "{what}: {n:?} not in: {text}");
            }
            // Never the key material.
            assert!(!text.contains("PRIVATE KEY"), "{what}: {text}");
            for l in &key_lines {
                assert!(!text.contains(l.as_str()), "{what}: key material in: {text}");
            }
        }
        assert!(!d.socket.exists(), "{what}: the socket was created");
    }

    // Text-level rules: a key without a certificate, TLS without a TCP listener; exit 2 from the
    // configuration check, before any file is read.
    for (grpc, key) in [
        (
            format!("[grpc]\ntcp_listen = \"127.0.0.1:{port}\"\ntls_key = \"x.key\"\n"),
            "grpc.tls_key",
        ),
        (
            "[grpc]\ntls_cert = \"x.pem\"\ntls_key = \"x.key\"\n".to_string(),
            "grpc.tls_cert",
        ),
        (
            "[grpc]\ntcp_listen = \"0.0.0.0:50051\"\n".to_string(),
            "grpc.tcp_listen",
        ),
    ] {
        let config = dir.join("rule.toml");
        let mut opts = base.clone();
        opts.extra = grpc;
        std::fs::write(&config, opts.config_text()).expect("write config");
        let (code, out) = check_config(&config);
        assert_eq!(code, Some(2), "{out}");
        assert!(out.contains(key), "{key} not in: {out}");
    }

    // Valid files: --check-config says what the listener is.
    let config = dir.join("good.toml");
    let mut opts = base.clone();
    opts.extra = pki.grpc_table(port, true);
    std::fs::write(&config, opts.config_text()).expect("write config");
    let (code, out) = check_config(&config);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("TLS, client certificates required"), "{out}");
}

#[test]
fn https_to_a_plaintext_listener_is_explained() {
    run_with_deadline(120, async {
        let dir = test_dir("tls-plain");
        let pki = Pki::new(&dir);
        let port = free_port();
        // A plaintext loopback listener: existing configurations keep working unchanged.
        let (_d, st) = start(&dir, format!("[grpc]\ntcp_listen = \"127.0.0.1:{port}\"\n")).await;
        let http = format!("http://127.0.0.1:{port}");
        let o = fabricctl(args(&["--socket", &http, "status", "--json"])).await;
        assert!(ok_generation(&o) >= st.generation);
        let https = format!("https://127.0.0.1:{port}");
        let o = fabricctl(args(&["--socket", &https, "--tls-ca", p(&pki.ca), "status"])).await;
        failed_with(&o, &["did not answer with TLS", "use http://"]);
    });
}
