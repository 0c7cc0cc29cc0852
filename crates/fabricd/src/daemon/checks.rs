//! What the start and `--check-config` verify beyond the configuration text, and the settings
//! and thread pools the start derives from the configuration.

use std::sync::Arc;

use fabric_ranking::{RankOptions, Role};
use fabric_routing::Guid2Lid;
use fabric_topology::{parse_guid, Fabric, Lid};

use crate::config::{Config, RoleName};
use crate::event_loop::LoopSettings;
use crate::partitions::PartitionSettings;

use super::DaemonError;

/// Reads and checks the TLS files of the gRPC TCP listener (`grpc.tls_cert`, `grpc.tls_key`,
/// `grpc.tls_client_ca`): `Ok(None)` without TLS. Used at start (before the driver is opened, so
/// that a bad file fails fast) and by `--check-config`.
pub fn load_grpc_tls(cfg: &Config) -> Result<Option<fabric_proto::tls::ServerTls>, DaemonError> {
    let Some(files) = cfg.grpc.tls_files() else {
        return Ok(None);
    };
    let tls = files.load()?;
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(&files.key) {
        if meta.permissions().mode() & 0o004 != 0 {
            tracing::warn!(
                key = %files.key.display(),
                "grpc.tls_key is readable by every user: make it 0600 or 0640 (owner root or fabricd)"
            );
        }
    }
    Ok(Some(tls))
}

/// A one-line description of the gRPC TCP listener for `--check-config` (reads the TLS files):
/// `None` when there is none.
pub fn check_grpc(cfg: &Config) -> Result<Option<String>, DaemonError> {
    if cfg.grpc.tcp_listen.is_empty() {
        return Ok(None);
    }
    Ok(Some(match load_grpc_tls(cfg)? {
        None => format!("tcp {} plaintext", cfg.grpc.tcp_listen),
        Some(t) if t.mutual => format!("tcp {} TLS, client certificates required", cfg.grpc.tcp_listen),
        Some(_) => format!("tcp {} TLS", cfg.grpc.tcp_listen),
    }))
}

/// `[ha]` for `--check-config` (the configuration checked its values): its TLS files can be
/// read (the error names the key and the path, never the content). etcd is not contacted.
/// `None` without `[ha]`, else a summary for the "configuration OK" line.
pub fn check_ha(cfg: &Config) -> Result<Option<String>, DaemonError> {
    let h = &cfg.ha;
    if !h.enabled() {
        return Ok(None);
    }
    for (key, path) in [
        ("ha.tls_ca", &h.tls_ca),
        ("ha.tls_cert", &h.tls_cert),
        ("ha.tls_key", &h.tls_key),
    ] {
        if let Some(p) = path {
            std::fs::File::open(p).map_err(|source| DaemonError::Io {
                what: match key {
                    "ha.tls_ca" => "ha.tls_ca: cannot read",
                    "ha.tls_cert" => "ha.tls_cert: cannot read",
                    _ => "ha.tls_key: cannot read",
                },
                path: p.display().to_string(),
                source,
            })?;
        }
    }
    Ok(Some(format!(
        "HA node {} on etcd {} (prefix {}, lease {} s{})",
        h.effective_node_name(),
        h.etcd_endpoints.join(", "),
        h.key_prefix,
        h.lease_ttl_s,
        if h.tls_ca.is_some() { ", TLS" } else { "" }
    )))
}

/// Ranking inputs from `[routing]` (reads `roots_file`).
pub fn rank_options(cfg: &Config) -> Result<RankOptions, DaemonError> {
    let mut roots = Vec::new();
    for r in &cfg.routing.roots {
        roots.push(parse_guid(r).ok_or_else(|| DaemonError::Config(format!("routing.roots: {r:?} is not a GUID")))?);
    }
    if let Some(path) = &cfg.routing.roots_file {
        let text = fabric_topology::textfile::read_text_file(path, fabric_topology::textfile::SMALL_TEXT_LIMIT)
            .map_err(|e| DaemonError::Config(format!("routing.roots_file: {e}")))?;
        let more = fabric_ranking::parse_root_guid_file(&text, &path.display().to_string())
            .map_err(|e| DaemonError::Config(e.to_string()))?;
        for g in more {
            if !roots.contains(&g) {
                roots.push(g);
            }
        }
    }
    let mut roles = std::collections::HashMap::new();
    for (k, v) in &cfg.routing.roles {
        let g = parse_guid(k).ok_or_else(|| DaemonError::Config(format!("routing.roles: {k:?} is not a GUID")))?;
        roles.insert(
            g,
            match v {
                RoleName::Leaf => Role::Leaf,
                RoleName::Spine => Role::Spine,
                RoleName::Root => Role::Root,
            },
        );
    }
    Ok(RankOptions { roots, roles })
}

/// The highest LID of the plan: `routing.max_lid` within what the driver supports.
pub fn effective_max_lid(cfg: &Config, driver_max: Lid) -> Lid {
    if cfg.routing.max_lid == 0 {
        driver_max
    } else {
        cfg.routing.max_lid.min(driver_max)
    }
}

/// What a start would otherwise fail on forever (no generation ever committed) once the fabric
/// is known: the LID plan (keeping the `recorded` LIDs that fit) must fit the highest LID, and
/// the engine must be able to route the fabric ([`fabric_routing::engine_fits`]: dmodk needs a
/// complete PGFT, pqft a quasi fat-tree, smodk cannot be written into LFTs). Used at start (the discovered
/// fabric and the state directory's record) and by `--check-config` (the mock fabric).
pub fn check_fabric_fits(cfg: &Config, fabric: &Fabric, recorded: &Guid2Lid, max_lid: Lid) -> Result<(), DaemonError> {
    fabric_routing::assign_lids(fabric, recorded, cfg.routing.lmc, max_lid).map_err(|e| {
        DaemonError::Config(format!(
            "routing.max_lid = {}: {e} ({} switches, {} end ports)",
            cfg.routing.max_lid,
            fabric.num_switches(),
            fabric.num_end_ports()
        ))
    })?;
    if let Ok(kind) = cfg.engine_kind() {
        fabric_routing::engine_fits(kind, fabric).map_err(|e| {
            DaemonError::Config(format!(
                "routing.engine = \"{kind}\": {e}; use engine = \"dmodc\" (the same tables as \
                 dmodk on a complete PGFT, and it routes degraded and irregular fat-trees)"
            ))
        })?;
    }
    Ok(())
}

/// The state directory's LID record must lie under the highest LID: LID assignment would drop a
/// record above it, renumber its port and rewrite the file without a word.
pub fn check_recorded_lids(recorded: &Guid2Lid, max_lid: Lid) -> Result<(), DaemonError> {
    match recorded.above(max_lid).first() {
        None => Ok(()),
        Some(&(guid, lo, hi)) => Err(DaemonError::Config(format!(
            "{}: {} holds LIDs {lo:#06x}..{hi:#06x}, above the highest LID {max_lid:#06x} \
             (routing.max_lid or the driver's limit): raise routing.max_lid, or remove the record \
             (that port then gets a new LID)",
            crate::persist::GUID2LID_FILE,
            fabric_topology::fmt_guid(guid)
        ))),
    }
}

/// Threads of the routing pool: `routing.threads` (checked at most
/// [`crate::config::MAX_ROUTING_THREADS`]), 0 = one per core.
pub(super) fn routing_threads(cfg: &Config, cores: usize) -> usize {
    let t = cfg.routing.threads;
    if t == 0 {
        return cores;
    }
    if t > 4 * cores {
        tracing::warn!(
            threads = t,
            cores,
            "routing.threads is more than four threads per core: the extra threads only add switching"
        );
    }
    t
}

pub(super) fn loop_settings(cfg: &Config) -> Result<LoopSettings, DaemonError> {
    Ok(LoopSettings {
        update: cfg.update.clone(),
        engine: cfg
            .engine_kind()
            .map_err(|e| DaemonError::Config(format!("routing.engine: {e}")))?,
        topology: cfg.routing.topology,
        validate: cfg.routing.validate,
        incremental: cfg.routing.incremental,
        job_aware: cfg.routing.job_aware,
        rank_options: Arc::new(rank_options(cfg)?),
        fault_injection: cfg.fault_injection.clone(),
        multicast: cfg.multicast.enabled,
        partitions: Arc::new(partition_settings(cfg)?),
    })
}

/// `[partitions]`: the partitions file read and parsed (errors name the file, line and
/// column), or OpenSM's default partition without a file.
pub fn partition_settings(cfg: &Config) -> Result<PartitionSettings, DaemonError> {
    let config = match &cfg.partitions.file {
        None => fabric_partitions::PartitionConfig::default_opensm(),
        Some(path) => {
            let text = fabric_topology::textfile::read_text_file(path, fabric_topology::textfile::SMALL_TEXT_LIMIT)
                .map_err(|e| DaemonError::Config(format!("partitions.file: {e}")))?;
            fabric_partitions::parse(&text, &path.display().to_string())
                .map_err(|e| DaemonError::Config(format!("partitions.file: {e}")))?
        }
    };
    Ok(PartitionSettings {
        config: Arc::new(config),
        file: cfg.partitions.file.clone(),
        enforce_switch_ports: cfg.partitions.enforce_switch_ports,
    })
}

pub(super) fn pool(name: &'static str, threads: usize) -> Result<Arc<rayon::ThreadPool>, DaemonError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(move |i| format!("fabricd-{name}-{i}"))
        .build()
        .map(Arc::new)
        .map_err(|e| DaemonError::Pool(name, e.to_string()))
}
