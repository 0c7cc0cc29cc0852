//! TLS of the gRPC TCP transport: loading and checking PEM files (server identity, client
//! identity, trust anchors) with errors that name the setting and the file, and turning the
//! failures of a TLS connection into a hint the operator can act on.
//!
//! Files are read once; the bytes that were checked are the bytes handed to tonic. Error
//! messages never contain key material (nor any line of a key file): PEM problems are reported
//! by kind only.
//!
//! Only the `ring` crypto provider of rustls is used (no aws-lc).

use std::error::Error as StdError;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

/// Longest a TLS handshake may take on the server before the connection is dropped (a client
/// that opens a TCP connection and stays silent does not hold a slot for ever).
pub const SERVER_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A TLS file that cannot be used. `setting` names the configuration key (`grpc.tls_key`) or
/// command-line option (`--tls-key`) that points at the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsFileError {
    /// The file cannot be read (missing, permissions, ...).
    #[error("{setting}: cannot read {}: {error}", path.display())]
    Read {
        setting: &'static str,
        path: PathBuf,
        /// Shown in the message (not chained as a source, so that it is printed once).
        error: std::io::Error,
    },
    /// The file was read but its content cannot be used.
    #[error("{setting}: {}: {reason}", path.display())]
    Invalid {
        setting: &'static str,
        path: PathBuf,
        reason: String,
    },
    /// A setting is missing or given without the one it needs.
    #[error("{setting}: {reason}")]
    Usage { setting: &'static str, reason: String },
}

impl TlsFileError {
    /// The configuration key or option the error is about.
    pub fn setting(&self) -> &'static str {
        match self {
            TlsFileError::Read { setting, .. }
            | TlsFileError::Invalid { setting, .. }
            | TlsFileError::Usage { setting, .. } => setting,
        }
    }
}

fn invalid(setting: &'static str, path: &Path, reason: impl Into<String>) -> TlsFileError {
    TlsFileError::Invalid {
        setting,
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

fn read(setting: &'static str, path: &Path) -> Result<Vec<u8>, TlsFileError> {
    std::fs::read(path).map_err(|error| TlsFileError::Read {
        setting,
        path: path.to_path_buf(),
        error,
    })
}

/// A PEM syntax problem, described without quoting the file (it may be a key).
fn pem_problem(e: &pem::Error) -> String {
    match e {
        pem::Error::MissingSectionEnd { .. } => "malformed PEM: a section has no END line".into(),
        pem::Error::IllegalSectionStart { .. } => "malformed PEM: a BEGIN line is not well formed".into(),
        pem::Error::Base64Decode(_) => "malformed PEM: a section body is not valid base64".into(),
        pem::Error::SectionTooLarge => "malformed PEM: a section is too large".into(),
        pem::Error::NoItemsFound => "no PEM section of the expected kind".into(),
        _ => "malformed PEM".into(),
    }
}

/// PEM text and the certificates it holds (at least one).
struct CertFile {
    pem: Vec<u8>,
    certs: Vec<CertificateDer<'static>>,
}

fn read_certs(setting: &'static str, path: &Path) -> Result<CertFile, TlsFileError> {
    let pem = read(setting, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(setting, path, pem_problem(&e)))?;
    if certs.is_empty() {
        return Err(invalid(
            setting,
            path,
            "no certificate in the file (expected PEM \"-----BEGIN CERTIFICATE-----\" sections)",
        ));
    }
    Ok(CertFile { pem, certs })
}

/// PEM text of a private key, and the signing key it decodes to.
struct KeyFile {
    pem: Vec<u8>,
    key: std::sync::Arc<dyn rustls::sign::SigningKey>,
}

fn read_key(setting: &'static str, path: &Path) -> Result<KeyFile, TlsFileError> {
    let pem = read(setting, path)?;
    let der = match PrivateKeyDer::from_pem_slice(&pem) {
        Ok(k) => k,
        Err(pem::Error::NoItemsFound) => {
            return Err(invalid(
                setting,
                path,
                "no private key in the file (expected a PEM \"PRIVATE KEY\", \"RSA PRIVATE KEY\" or \
                 \"EC PRIVATE KEY\" section)",
            ))
        }
        Err(e) => return Err(invalid(setting, path, pem_problem(&e))),
    };
    let key = rustls::crypto::ring::sign::any_supported_type(&der).map_err(|_| {
        invalid(
            setting,
            path,
            "the private key cannot be decoded (malformed, encrypted, or not RSA, ECDSA P-256/P-384 or Ed25519)",
        )
    })?;
    Ok(KeyFile { pem, key })
}

/// Checks that `key` is the private key of the first certificate of `cert`.
fn check_pair(
    cert: &CertFile,
    cert_setting: &'static str,
    cert_path: &Path,
    key: &KeyFile,
    key_setting: &'static str,
    key_path: &Path,
) -> Result<(), TlsFileError> {
    let ck = rustls::sign::CertifiedKey::new(cert.certs.clone(), key.key.clone());
    match ck.keys_match() {
        Ok(()) => Ok(()),
        Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => Err(invalid(
            key_setting,
            key_path,
            format!(
                "the private key does not match the certificate of {cert_setting} ({})",
                cert_path.display()
            ),
        )),
        // The provider cannot tell (no public key): the handshake will.
        Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => Ok(()),
        Err(_) => Err(invalid(
            cert_setting,
            cert_path,
            "the first certificate is not a well-formed X.509 certificate",
        )),
    }
}

/// Checks that every certificate of a CA file can be a trust anchor.
fn check_anchors(ca: &CertFile, setting: &'static str, path: &Path) -> Result<(), TlsFileError> {
    let mut store = rustls::RootCertStore::empty();
    for (i, c) in ca.certs.iter().enumerate() {
        store.add(c.clone()).map_err(|_| {
            invalid(
                setting,
                path,
                format!("certificate {} is not a well-formed X.509 CA certificate", i + 1),
            )
        })?;
    }
    Ok(())
}

/// Makes `ring` the process's rustls crypto provider (what tonic's server side uses); a
/// provider already installed is kept.
pub fn install_crypto_provider() {
    // Err = another provider is already the default: keep it.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The TLS files of the server (`[grpc]` `tls_cert`, `tls_key`, `tls_client_ca`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerTlsFiles {
    /// PEM certificate chain of the server, leaf first.
    pub cert: PathBuf,
    /// PEM private key of the leaf certificate.
    pub key: PathBuf,
    /// PEM CA certificates; when set, clients must present a certificate signed by one of them
    /// (mutual TLS).
    pub client_ca: Option<PathBuf>,
}

/// A checked server TLS configuration.
#[derive(Clone, Debug)]
pub struct ServerTls {
    /// What tonic's server takes.
    pub config: ServerTlsConfig,
    /// Certificates in the chain of `cert`.
    pub chain_len: usize,
    /// Whether clients must present a certificate (mutual TLS).
    pub mutual: bool,
}

impl ServerTlsFiles {
    /// Reads and checks the files: each is readable PEM of the right kind, the key matches the
    /// certificate, the client CAs are CA certificates. Errors name `grpc.tls_cert`,
    /// `grpc.tls_key` or `grpc.tls_client_ca` and the path.
    pub fn load(&self) -> Result<ServerTls, TlsFileError> {
        const CERT: &str = "grpc.tls_cert";
        const KEY: &str = "grpc.tls_key";
        const CA: &str = "grpc.tls_client_ca";
        install_crypto_provider();
        let cert = read_certs(CERT, &self.cert)?;
        let key = read_key(KEY, &self.key)?;
        check_pair(&cert, CERT, &self.cert, &key, KEY, &self.key)?;
        let mut config = ServerTlsConfig::new()
            .identity(Identity::from_pem(&cert.pem, &key.pem))
            .timeout(SERVER_HANDSHAKE_TIMEOUT);
        if let Some(ca_path) = &self.client_ca {
            let ca = read_certs(CA, ca_path)?;
            check_anchors(&ca, CA, ca_path)?;
            config = config.client_ca_root(Certificate::from_pem(&ca.pem));
        }
        Ok(ServerTls {
            config,
            chain_len: cert.certs.len(),
            mutual: self.client_ca.is_some(),
        })
    }
}

/// TLS options of a client (`fabricctl --tls-ca/--tls-cert/--tls-key/--tls-domain`); used only
/// with `https://` targets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientTlsOptions {
    /// PEM CA certificates to trust for the server's certificate; `None` = the system's trust
    /// store.
    pub ca: Option<PathBuf>,
    /// PEM certificate chain of the client (mutual TLS); needs `key`.
    pub cert: Option<PathBuf>,
    /// PEM private key of `cert`.
    pub key: Option<PathBuf>,
    /// Name to verify in the server's certificate instead of the target's host (for a server
    /// reached by an IP address its certificate does not list).
    pub domain: Option<String>,
}

impl ClientTlsOptions {
    /// Whether any option is set.
    pub fn is_set(&self) -> bool {
        self.ca.is_some() || self.cert.is_some() || self.key.is_some() || self.domain.is_some()
    }

    /// Reads and checks the files into what tonic's channel takes. Errors name `--tls-ca`,
    /// `--tls-cert`, `--tls-key` or `--tls-domain` and the path.
    pub fn load(&self) -> Result<ClientTlsConfig, TlsFileError> {
        const CA: &str = "--tls-ca";
        const CERT: &str = "--tls-cert";
        const KEY: &str = "--tls-key";
        let mut config = ClientTlsConfig::new();
        match &self.ca {
            Some(path) => {
                let ca = read_certs(CA, path)?;
                check_anchors(&ca, CA, path)?;
                config = config.ca_certificate(Certificate::from_pem(&ca.pem));
            }
            None => config = config.with_native_roots(),
        }
        match (&self.cert, &self.key) {
            (Some(cert_path), Some(key_path)) => {
                let cert = read_certs(CERT, cert_path)?;
                let key = read_key(KEY, key_path)?;
                check_pair(&cert, CERT, cert_path, &key, KEY, key_path)?;
                config = config.identity(Identity::from_pem(&cert.pem, &key.pem));
            }
            (Some(_), None) => {
                return Err(TlsFileError::Usage {
                    setting: CERT,
                    reason: "needs --tls-key (the private key of the client certificate)".into(),
                })
            }
            (None, Some(_)) => {
                return Err(TlsFileError::Usage {
                    setting: KEY,
                    reason: "needs --tls-cert (the client certificate of the key)".into(),
                })
            }
            (None, None) => {}
        }
        if let Some(d) = &self.domain {
            if rustls::pki_types::ServerName::try_from(d.as_str()).is_err() {
                return Err(TlsFileError::Usage {
                    setting: "--tls-domain",
                    reason: format!("{d:?} is not a DNS name or IP address"),
                });
            }
            config = config.domain_name(d.clone());
        }
        Ok(config)
    }
}

/// The HTTP/2 client connection preface and an empty SETTINGS frame (RFC 9113 §3.4): what a
/// gRPC client sends first; a server that accepted the connection answers with its SETTINGS.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// How long a diagnosis may wait for the server.
const DIAGNOSIS_TIMEOUT: Duration = Duration::from_secs(3);

fn first_addr(host: &str, port: u16) -> Option<std::net::SocketAddr> {
    use std::net::ToSocketAddrs;
    (host, port).to_socket_addrs().ok()?.next()
}

/// The rustls error inside an I/O error, if any.
fn rustls_in(e: &std::io::Error) -> Option<rustls::Error> {
    e.get_ref()?.downcast_ref::<rustls::Error>().cloned()
}

/// After a TLS connection failed without saying why (in TLS 1.3 a server refuses a client
/// certificate, or its absence, after the client's side of the handshake completed: the gRPC
/// layer then only sees the connection close), redoes the handshake alone with the same trust
/// anchor, client certificate and server name, sends the HTTP/2 preface and reads the answer:
/// the TLS error the server sent, if any. Blocking (std sockets, bounded by short timeouts);
/// `None` when nothing TLS-specific was learnt or the options cannot be read again.
pub fn diagnose_handshake(host: &str, port: u16, opts: &ClientTlsOptions) -> Option<rustls::Error> {
    use std::io::{Read, Write};
    let ca = read_certs("--tls-ca", opts.ca.as_ref()?).ok()?;
    let mut roots = rustls::RootCertStore::empty();
    for c in ca.certs {
        roots.add(c).ok()?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .ok()?
        .with_root_certificates(roots);
    let mut config = match (&opts.cert, &opts.key) {
        (Some(c), Some(k)) => {
            let certs = read_certs("--tls-cert", c).ok()?.certs;
            let key = PrivateKeyDer::from_pem_slice(&read("--tls-key", k).ok()?).ok()?;
            builder.with_client_auth_cert(certs, key).ok()?
        }
        _ => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    let name = opts.domain.clone().unwrap_or_else(|| host.to_string());
    let name = rustls::pki_types::ServerName::try_from(name).ok()?;
    let mut conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name).ok()?;
    let mut sock = std::net::TcpStream::connect_timeout(&first_addr(host, port)?, DIAGNOSIS_TIMEOUT).ok()?;
    sock.set_read_timeout(Some(DIAGNOSIS_TIMEOUT)).ok()?;
    sock.set_write_timeout(Some(DIAGNOSIS_TIMEOUT)).ok()?;
    let mut tls = rustls::Stream::new(&mut conn, &mut sock);
    if let Err(e) = tls.write_all(H2_PREFACE).and_then(|()| tls.flush()) {
        return rustls_in(&e);
    }
    let mut buf = [0u8; 64];
    match tls.read(&mut buf) {
        Err(e) => rustls_in(&e),
        // Any answer (or a clean close): nothing TLS-specific to report.
        Ok(_n) => None,
    }
}

/// Whether the server at `host:port` answers an HTTP/2 preface with a TLS record (an alert or a
/// handshake message): a TLS listener reached with `http://`. Blocking, bounded by short
/// timeouts.
pub fn speaks_tls(host: &str, port: u16) -> bool {
    use std::io::{Read, Write};
    let Some(addr) = first_addr(host, port) else {
        return false;
    };
    let Ok(mut sock) = std::net::TcpStream::connect_timeout(&addr, DIAGNOSIS_TIMEOUT) else {
        return false;
    };
    if sock.set_read_timeout(Some(DIAGNOSIS_TIMEOUT)).is_err() || sock.write_all(H2_PREFACE).is_err() {
        return false;
    }
    let mut head = [0u8; 3];
    // TLS record header: content type 21 (alert) or 22 (handshake), version 3.x.
    sock.read_exact(&mut head).is_ok() && matches!(head[0], 21 | 22) && head[1] == 3
}

/// Every message of an error and its sources, outermost first. An `io::Error` that wraps
/// another error shows it (its `source()` skips it).
pub fn error_chain(err: &(dyn StdError + 'static)) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = Some(err);
    while let Some(e) = cur {
        let msg = e.to_string();
        // Wrappers often repeat their source's message: keep each once.
        if !out.iter().any(|m| m == &msg) {
            out.push(msg);
        }
        cur = e.source();
    }
    out
}

/// The rustls errors in an error's source chain (looking inside `io::Error`s).
fn rustls_errors<'a>(err: &'a (dyn StdError + 'static)) -> Vec<&'a rustls::Error> {
    let mut out = Vec::new();
    let mut cur = Some(err);
    while let Some(e) = cur {
        if let Some(r) = e.downcast_ref::<rustls::Error>() {
            out.push(r);
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if let Some(r) = io.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                out.push(r);
            }
        }
        cur = e.source();
    }
    out
}

/// What an operator should check after a failed TLS connection or call, when the error chain
/// says: the server's certificate is not trusted or does not match the name, the server wants a
/// client certificate, the server refused the client certificate, the server does not speak
/// TLS. `None` when the chain holds no TLS error (refused connection, gRPC error, ...).
pub fn explain(err: &(dyn StdError + 'static)) -> Option<&'static str> {
    use rustls::{AlertDescription as A, CertificateError as C, Error as E};
    for r in rustls_errors(err) {
        let hint = match r {
            E::InvalidCertificate(C::UnknownIssuer) | E::InvalidCertificate(C::BadSignature) => {
                "the server's certificate is not signed by a trusted CA: pass the CA that signed it with --tls-ca"
            }
            E::InvalidCertificate(C::NotValidForName) | E::InvalidCertificate(C::NotValidForNameContext { .. }) => {
                "the server's certificate does not name the host you connected to: use the name it lists, \
                 or --tls-domain NAME"
            }
            E::InvalidCertificate(C::Expired) | E::InvalidCertificate(C::ExpiredContext { .. }) => {
                "the server's certificate has expired"
            }
            E::InvalidCertificate(C::NotValidYet) | E::InvalidCertificate(C::NotValidYetContext { .. }) => {
                "the server's certificate is not valid yet (check the clocks)"
            }
            E::InvalidCertificate(C::InvalidPurpose) | E::InvalidCertificate(C::InvalidPurposeContext { .. }) => {
                "the server's certificate is not for servers: its key usage does not allow server authentication \
                 (it needs extendedKeyUsage serverAuth)"
            }
            E::InvalidCertificate(_) => "the server's certificate was rejected",
            // TLS 1.3 (RFC 8446 §4.4.2.4): the client sent no certificate and one is required.
            E::AlertReceived(A::CertificateRequired) => {
                "the server requires a client certificate (mutual TLS): pass --tls-cert and --tls-key"
            }
            E::AlertReceived(A::UnknownCA) | E::AlertReceived(A::DecryptError) => {
                "the server rejected the client certificate: it is not signed by the CA the server trusts \
                 (grpc.tls_client_ca)"
            }
            // rustls sends unsupported_certificate for a certificate whose (extended) key usage
            // does not allow the purpose (RFC 5246 §7.2.2; rustls CertificateError::InvalidPurpose).
            E::AlertReceived(A::UnsupportedCertificate) => {
                "the server rejected the client certificate: its key usage does not allow client authentication \
                 (it needs extendedKeyUsage clientAuth, and keyUsage digitalSignature if keyUsage is present)"
            }
            E::AlertReceived(A::BadCertificate) | E::AlertReceived(A::CertificateUnknown) => {
                "the server rejected the client certificate: malformed, or refused by its verifier (check it \
                 with openssl x509 -text)"
            }
            E::AlertReceived(A::HandshakeFailure) => {
                "the server refused the TLS handshake (a client certificate missing or not accepted, or no common \
                 protocol version or cipher)"
            }
            E::AlertReceived(A::CertificateExpired) => "the server rejected the client certificate: it has expired",
            E::InvalidMessage(_) | E::InappropriateMessage { .. } => {
                "the server did not answer with TLS: if its grpc.tcp_listen has no TLS, use http://"
            }
            _ => continue,
        };
        return Some(hint);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Pki {
        dir: PathBuf,
    }

    impl Pki {
        fn new(tag: &str) -> Pki {
            let dir = std::env::temp_dir().join(format!("fabric-proto-tls-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("temp dir");
            Pki { dir }
        }
        fn write(&self, name: &str, text: &str) -> PathBuf {
            let p = self.dir.join(name);
            std::fs::write(&p, text).expect("write");
            p
        }
    }

    impl Drop for Pki {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// A CA and a leaf it signs: (ca cert PEM, leaf cert PEM, leaf key PEM).
    fn ca_and_leaf() -> (String, String, String) {
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_cert = ca.self_signed(&ca_key).expect("ca");
        let issuer = rcgen::Issuer::new(ca, ca_key);
        let leaf_key = rcgen::KeyPair::generate().expect("key");
        let leaf = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .expect("params")
            .signed_by(&leaf_key, &issuer)
            .expect("leaf");
        (ca_cert.pem(), leaf.pem(), leaf_key.serialize_pem())
    }

    #[test]
    fn server_files_load_and_mismatch_is_named() {
        let pki = Pki::new("server");
        let (ca, cert, key) = ca_and_leaf();
        let (_, _, other_key) = ca_and_leaf();
        let files = ServerTlsFiles {
            cert: pki.write("cert.pem", &cert),
            key: pki.write("key.pem", &key),
            client_ca: Some(pki.write("ca.pem", &ca)),
        };
        let ok = files.load().expect("valid files");
        assert!(ok.mutual);
        assert_eq!(ok.chain_len, 1);

        let mismatched = ServerTlsFiles {
            key: pki.write("other.pem", &other_key),
            ..files.clone()
        };
        let e = mismatched.load().unwrap_err();
        assert_eq!(e.setting(), "grpc.tls_key");
        let msg = e.to_string();
        assert!(msg.contains("does not match"), "{msg}");
        assert!(msg.contains("other.pem"), "{msg}");
        assert!(!msg.contains("PRIVATE KEY-----"), "{msg}");
    }

    #[test]
    fn bad_files_are_named_without_their_content() {
        let pki = Pki::new("bad");
        let (ca, cert, key) = ca_and_leaf();
        let base = ServerTlsFiles {
            cert: pki.write("cert.pem", &cert),
            key: pki.write("key.pem", &key),
            client_ca: None,
        };
        // Missing key file.
        let e = ServerTlsFiles {
            key: pki.dir.join("absent.pem"),
            ..base.clone()
        }
        .load()
        .unwrap_err();
        assert!(
            matches!(
                e,
                TlsFileError::Read {
                    setting: "grpc.tls_key",
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("absent.pem"), "{e}");
        // A key file given as the certificate: no certificate in it.
        let e = ServerTlsFiles {
            cert: base.key.clone(),
            ..base.clone()
        }
        .load()
        .unwrap_err();
        assert_eq!(e.setting(), "grpc.tls_cert", "{e}");
        assert!(e.to_string().contains("no certificate"), "{e}");
        assert!(!e.to_string().contains(key.lines().nth(1).unwrap_or("-")), "{e}");
        // A certificate given as the key.
        let e = ServerTlsFiles {
            key: base.cert.clone(),
            ..base.clone()
        }
        .load()
        .unwrap_err();
        assert_eq!(e.setting(), "grpc.tls_key", "{e}");
        assert!(e.to_string().contains("no private key"), "{e}");
        // A truncated key (no END line) and a key with a garbled body.
        let cut: String = key.lines().take(3).map(|l| format!("{l}\n")).collect();
        let e = ServerTlsFiles {
            key: pki.write("cut.pem", &cut),
            ..base.clone()
        }
        .load()
        .unwrap_err();
        assert_eq!(e.setting(), "grpc.tls_key", "{e}");
        assert!(e.to_string().contains("malformed PEM"), "{e}");
        for l in cut.lines().skip(1) {
            assert!(!e.to_string().contains(l), "key material in {e}");
        }
        let garbled = key.replacen("-----\n", "-----\n!!!!", 1);
        let e = ServerTlsFiles {
            key: pki.write("garbled.pem", &garbled),
            ..base.clone()
        }
        .load()
        .unwrap_err();
        assert_eq!(e.setting(), "grpc.tls_key", "{e}");
        // A client CA file that is a leaf key.
        let e = ServerTlsFiles {
            client_ca: Some(base.key.clone()),
            ..base.clone()
        }
        .load()
        .unwrap_err();
        assert_eq!(e.setting(), "grpc.tls_client_ca", "{e}");
        // The CA certificate is a valid client CA.
        let ok = ServerTlsFiles {
            client_ca: Some(pki.write("ca.pem", &ca)),
            ..base
        };
        assert!(ok.load().is_ok());
    }

    #[test]
    fn client_options_check_pairs_and_names() {
        let pki = Pki::new("client");
        let (ca, cert, key) = ca_and_leaf();
        let ca = pki.write("ca.pem", &ca);
        let cert = pki.write("cert.pem", &cert);
        let key = pki.write("key.pem", &key);
        let full = ClientTlsOptions {
            ca: Some(ca.clone()),
            cert: Some(cert.clone()),
            key: Some(key.clone()),
            domain: Some("localhost".into()),
        };
        assert!(full.is_set());
        assert!(full.load().is_ok());
        assert!(!ClientTlsOptions::default().is_set());
        let e = ClientTlsOptions {
            key: None,
            ..full.clone()
        }
        .load()
        .unwrap_err();
        assert_eq!(e.setting(), "--tls-cert", "{e}");
        let e = ClientTlsOptions {
            cert: None,
            ..full.clone()
        }
        .load()
        .unwrap_err();
        assert_eq!(e.setting(), "--tls-key", "{e}");
        let e = ClientTlsOptions {
            ca: Some(pki.dir.join("nope.pem")),
            ..full.clone()
        }
        .load()
        .unwrap_err();
        assert!(
            matches!(
                e,
                TlsFileError::Read {
                    setting: "--tls-ca",
                    ..
                }
            ),
            "{e}"
        );
        let e = ClientTlsOptions {
            domain: Some("not a name".into()),
            ..full
        }
        .load()
        .unwrap_err();
        assert_eq!(e.setting(), "--tls-domain", "{e}");
    }

    #[derive(Debug, thiserror::Error)]
    #[error("connection failed")]
    struct Wrapped(#[source] std::io::Error);

    /// A CA, a server certificate for `localhost` and a client certificate whose extended key
    /// usage is `purpose`, all signed by the CA: (CA DER, server chain+key, client chain+key).
    fn mutual_pki(
        purpose: rcgen::ExtendedKeyUsagePurpose,
    ) -> (
        rustls::pki_types::CertificateDer<'static>,
        (rustls::pki_types::CertificateDer<'static>, PrivateKeyDer<'static>),
        (rustls::pki_types::CertificateDer<'static>, PrivateKeyDer<'static>),
    ) {
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_cert = ca.self_signed(&ca_key).expect("ca");
        let issuer = rcgen::Issuer::new(ca, ca_key);
        let leaf = |names: Vec<String>, eku: rcgen::ExtendedKeyUsagePurpose| {
            let key = rcgen::KeyPair::generate().expect("key");
            let mut p = rcgen::CertificateParams::new(names).expect("params");
            p.extended_key_usages = vec![eku];
            let cert = p.signed_by(&key, &issuer).expect("leaf");
            let der = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).expect("key der");
            (cert.der().clone(), der)
        };
        let server = leaf(vec!["localhost".into()], rcgen::ExtendedKeyUsagePurpose::ServerAuth);
        let client = leaf(vec!["client".into()], purpose);
        (ca_cert.der().clone(), server, client)
    }

    /// A TLS handshake in memory, as the daemon's listener (client certificates verified
    /// against the CA) and fabricctl do it: the error the client ends with.
    fn client_error(purpose: rcgen::ExtendedKeyUsagePurpose) -> Option<rustls::Error> {
        use std::sync::Arc;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let (ca, (scert, skey), (ccert, ckey)) = mutual_pki(purpose);
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca).unwrap();
        let roots = Arc::new(roots);
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .unwrap();
        let server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![scert], skey)
            .unwrap();
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_client_auth_cert(vec![ccert], ckey)
            .unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut c = rustls::ClientConnection::new(Arc::new(client), name).unwrap();
        let mut s = rustls::ServerConnection::new(Arc::new(server)).unwrap();
        for _ in 0..10 {
            let mut buf = Vec::new();
            while c.wants_write() {
                c.write_tls(&mut buf).unwrap();
            }
            let mut rd = &buf[..];
            while !rd.is_empty() {
                s.read_tls(&mut rd).unwrap();
            }
            let _ = s.process_new_packets();
            let mut buf = Vec::new();
            while s.wants_write() {
                s.write_tls(&mut buf).unwrap();
            }
            let mut rd = &buf[..];
            while !rd.is_empty() {
                c.read_tls(&mut rd).unwrap();
            }
            if let Err(e) = c.process_new_packets() {
                return Some(e);
            }
        }
        None
    }

    #[test]
    fn a_client_certificate_with_the_wrong_key_usage_is_diagnosed_as_such() {
        assert_eq!(
            client_error(rcgen::ExtendedKeyUsagePurpose::ClientAuth),
            None,
            "a good client certificate"
        );
        let e = client_error(rcgen::ExtendedKeyUsagePurpose::ServerAuth).expect("refused");
        let hint = explain(&e).expect("a hint");
        assert!(hint.contains("key usage") && hint.contains("clientAuth"), "{e}: {hint}");
        assert!(!hint.contains("not signed"), "{e}: {hint}");
    }

    #[test]
    fn explain_reads_rustls_errors_inside_io_errors() {
        let unknown = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        assert!(explain(&unknown).is_some_and(|h| h.contains("--tls-ca")));
        let required = rustls::Error::AlertReceived(rustls::AlertDescription::CertificateRequired);
        assert!(explain(&required).is_some_and(|h| h.contains("--tls-cert")));
        let refused_cert = std::io::Error::other(rustls::Error::AlertReceived(rustls::AlertDescription::UnknownCA));
        assert!(explain(&refused_cert).is_some_and(|h| h.contains("rejected the client certificate")));
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(explain(&refused), None);
        let wrapped = Wrapped(std::io::Error::other(rustls::Error::AlertReceived(
            rustls::AlertDescription::UnknownCA,
        )));
        let chain = error_chain(&wrapped);
        assert_eq!(chain.len(), 2, "{chain:?}");
        assert!(chain[1].contains("UnknownCA"), "{chain:?}");
    }
}
