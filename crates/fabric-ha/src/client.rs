//! The etcd client: connection options (TLS files read here), errors classified.

use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};

use crate::{HaConfig, HaError, HaTls};

pub(crate) fn classify(endpoints: &str, op: &str, e: &etcd_client::Error) -> HaError {
    use etcd_client::Error as E;
    let transient = match e {
        E::TransportError(_) | E::IoError(_) => true,
        E::GRpcStatus(s) => matches!(
            s.code(),
            tonic::Code::Unavailable
                | tonic::Code::DeadlineExceeded
                | tonic::Code::Unknown
                | tonic::Code::Cancelled
                | tonic::Code::Aborted
                | tonic::Code::ResourceExhausted
                | tonic::Code::Internal
        ),
        _ => false,
    };
    if transient {
        HaError::Unreachable {
            endpoints: endpoints.to_string(),
            reason: format!("{op}: {e}"),
        }
    } else {
        HaError::Etcd {
            op: op.to_string(),
            endpoints: endpoints.to_string(),
            reason: e.to_string(),
        }
    }
}

fn read_pem(what: &'static str, path: &std::path::Path) -> Result<Vec<u8>, HaError> {
    let err = |reason: String| HaError::TlsFile {
        what,
        path: path.to_path_buf(),
        reason,
    };
    let bytes = std::fs::read(path).map_err(|e| err(e.to_string()))?;
    if !String::from_utf8_lossy(&bytes).contains("-----BEGIN ") {
        return Err(err("not a PEM file (no \"-----BEGIN\" line)".into()));
    }
    Ok(bytes)
}

fn tls_options(tls: &HaTls) -> Result<TlsOptions, HaError> {
    let ca = read_pem("CA certificate", &tls.ca)?;
    let mut o = TlsOptions::new().ca_certificate(Certificate::from_pem(ca));
    if let (Some(cert), Some(key)) = (&tls.cert, &tls.key) {
        let c = read_pem("client certificate", cert)?;
        let k = read_pem("client key", key)?;
        o = o.identity(Identity::from_pem(c, k));
    }
    Ok(o)
}

/// The connection options of every client of `cfg` (TLS files read here).
pub(crate) fn connect_options(cfg: &HaConfig) -> Result<ConnectOptions, HaError> {
    for e in &cfg.endpoints {
        let https = e.starts_with("https://");
        if cfg.tls.is_some() && e.starts_with("http://") {
            return Err(HaError::Config {
                field: "etcd_endpoints",
                reason: format!("{e}: [ha.tls] is set, use an https:// endpoint"),
            });
        }
        if https && cfg.tls.is_none() {
            return Err(HaError::Config {
                field: "etcd_endpoints",
                reason: format!("{e}: https needs [ha.tls] (ca, and cert/key for client auth)"),
            });
        }
    }
    let mut o = ConnectOptions::new()
        .with_connect_timeout(cfg.request_timeout)
        .with_keep_alive(cfg.request_timeout, cfg.request_timeout)
        .with_keep_alive_while_idle(true)
        // A member without a raft leader answers at once (and cancels watches) instead of
        // holding requests: a partitioned member looks like an unreachable one.
        .with_require_leader(true);
    if let Some(tls) = &cfg.tls {
        o = o.with_tls(tls_options(tls)?);
    }
    Ok(o)
}

pub(crate) async fn build_client(cfg: &HaConfig, opts: ConnectOptions) -> Result<Client, HaError> {
    Client::connect(&cfg.endpoints, Some(opts))
        .await
        .map_err(|e| HaError::Config {
            field: "etcd_endpoints",
            reason: format!("{}: {e}", cfg.endpoints_text()),
        })
}

pub(crate) fn epoch_of(revision: i64) -> u64 {
    u64::try_from(revision).unwrap_or(0)
}
