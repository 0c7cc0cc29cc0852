//! The daemon's Subnet Administration glue: the one [`SaService`] of the process, and what keeps
//! its snapshot true of the switches when the driver does not (mock, oob).
//!
//! * [`open_service`]: the service, with the registry read back from the state directory and
//!   its saves logged (ERROR once per failure streak, INFO when saving works again).
//! * [`SaPublisher`]: for drivers whose [`attach_sa`] returns `false`. After every committed
//!   generation the event loop hands it the physical fabric, the LID plan and the tables; the
//!   snapshot is built by [`fabric_sa::subnet::from_model`] on tokio's blocking pool (never on
//!   the loop task), then swapped in. Between two generations the upload reports every LFT
//!   block a switch acknowledged ([`SaPublisher::lft_blocks_acknowledged`]), so that in the
//!   middle of a five-phase update PathRecords follow what the switches hold. The service
//!   serves from the first stored snapshot on (mock and oob have no standby).
//! * The names of attributes, methods and statuses shared by gRPC `SaQuery`, the metrics and
//!   logs, and the JSON rendering of records.
//!
//! SM data on mock and oob: the SMInfoRecord names GUID 0 and LID 0 (no port of the fabric is
//! the manager's), priority 0, state master. These drivers carry no SA MADs: the Reports a
//! snapshot owes subscribers are dropped (logged at DEBUG) instead of kept queued.
//!
//! [`attach_sa`]: fabric_southbound::SouthboundDriver::attach_sa

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use fabric_sa::registry::Registry;
use fabric_sa::service::RegistryStore;
use fabric_sa::subnet::{Escape, SmData};
use fabric_sa::{LftTable, SaService, Subnet};
use fabric_southbound::LftBlockWrite;
use fabric_topology::{Fabric, FabricEvent, Guid};
use tokio::sync::watch;

use crate::persist::{PersistError, StateDir};
use crate::state::{Generation, UnprogrammedSwitch};

/// SMInfo state "master".
const SM_STATE_MASTER: u8 = 3;

/// One LFT block as the SA service takes it: (switch GUID, block, 64 entries).
type SaBlock = (Guid, u32, [u8; fabric_routing::BLOCK_SIZE]);

/// The registry read back from the state directory and the store its changes are saved to;
/// an unreadable registry file stops the start (like the other state files)
/// (`sa-registry.json`, [`crate::sa_store`]).
pub fn registry_and_store(state_dir: &StateDir) -> Result<(Registry, Option<Box<dyn RegistryStore>>), PersistError> {
    crate::sa_store::open(state_dir).map(|(r, s)| (r, Some(s)))
}

/// The daemon's SA service: the registry of `state_dir`, saves logged by [`LoggedStore`]. It
/// does not serve until the driver (umad: as master) or the [`SaPublisher`] (mock, oob: the
/// first generation) says so.
pub fn open_service(state_dir: &StateDir) -> Result<Arc<SaService>, PersistError> {
    let (registry, store) = registry_and_store(state_dir)?;
    let store = store.map(|inner| Box::new(LoggedStore::new(inner)) as Box<dyn RegistryStore>);
    Ok(Arc::new(SaService::new(registry, store)))
}

/// The SM data of a daemon whose driver reads no SMInfo (mock, oob): GUID 0, LID 0, master.
pub fn local_sm() -> SmData {
    SmData {
        guid: 0,
        lid: 0,
        priority: 0,
        state: SM_STATE_MASTER,
        act_count: 0,
    }
}

/// A [`RegistryStore`] that logs failed saves: an ERROR when saving starts failing (once per
/// streak, whatever the number of failed Set/Delete requests), an INFO when it works again.
/// The failures are counted by the service (`fabricd_sa_persist_failures_total`).
pub struct LoggedStore {
    inner: Box<dyn RegistryStore>,
    failing: AtomicBool,
}

impl LoggedStore {
    pub fn new(inner: Box<dyn RegistryStore>) -> LoggedStore {
        LoggedStore {
            inner,
            failing: AtomicBool::new(false),
        }
    }
}

impl RegistryStore for LoggedStore {
    fn save(&self, registry: &Registry) -> Result<(), String> {
        let r = self.inner.save(registry);
        match &r {
            Ok(()) => {
                if self.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!("SA registry saved again: ServiceRecord and InformInfo changes are accepted");
                }
            }
            Err(e) => {
                if !self.failing.swap(true, Ordering::Relaxed) {
                    tracing::error!(
                        error = %e,
                        "cannot save the SA registry: ServiceRecord and InformInfo Set/Delete are refused \
                         (ERR_NO_RESOURCES) until it can be saved"
                    );
                }
            }
        }
        r
    }
}

/// Builds and stores the SA snapshots of a driver that does not keep them (see the module).
pub struct SaPublisher {
    service: Arc<SaService>,
    sm: SmData,
    escape: Option<Escape>,
    state: Mutex<PublishState>,
    /// Acknowledged blocks not applied yet (see [`SaPublisher::lft_blocks_acknowledged`]).
    acks: Mutex<Acks>,
    /// The number of the last build stored (tests and logs wait on it).
    stored: watch::Sender<u64>,
}

/// What the publisher's builds and the upload's acknowledgements share.
#[derive(Default)]
struct PublishState {
    /// Builds requested (one per committed generation or physical change).
    requested: u64,
    /// The last build stored.
    stored: u64,
    /// Blocks acknowledged since the last build was requested: replayed onto its snapshot
    /// when it is stored (they were written after the tables it was built from).
    since_request: Vec<SaBlock>,
    /// The LID plan and tables of the last committed generation (physical changes rebuild the
    /// snapshot with them).
    last: Option<(Arc<fabric_routing::LidPlan>, Arc<fabric_routing::Lfts>)>,
    /// The next build to run (only the latest request is built: older ones are superseded).
    next: Option<Build>,
    /// A blocking task is running the builds.
    building: bool,
    /// The build running carries a generation's tables (a physical change requested meanwhile
    /// adopts them: [`Build::adopt`]).
    running_tables: Option<u64>,
}

/// One snapshot to build.
struct Build {
    seq: u64,
    /// What it is built for (logs).
    what: String,
    physical: Arc<Fabric>,
    /// Physical changes not yet applied to `physical`.
    events: Vec<FabricEvent>,
    lids: Arc<fabric_routing::LidPlan>,
    /// The generation's tables (`Keep::Switches`); `None` for a physical change (`Keep::All`),
    /// whose snapshot keeps the current tables. Held only until the rows are resolved: the
    /// next routing recycles these tables' allocation once nothing else holds them.
    lfts: Option<Arc<fabric_routing::Lfts>>,
    /// Rows already resolved (handed over by the superseded build of a generation, which a
    /// physical change's build adopted).
    rows: Option<Vec<Option<LftTable>>>,
    /// The running build (by number) whose generation tables this physical change's build
    /// takes over when that build is superseded: a snapshot no build stored yet holds the
    /// generation's tables, and the switches do (issue #17: back-to-back faults superseded
    /// every generation's build, and the physical changes' builds kept tables that only held
    /// the blocks acknowledged since, so PathRecords lost their paths).
    adopt: Option<u64>,
    keep: Keep,
}

/// Which switches keep the tables of the current snapshot instead of the build's.
enum Keep {
    /// These (the unprogrammed switches of a committed generation).
    Switches(Vec<Guid>),
    /// Every switch (a physical change: the tables did not change, the current snapshot holds
    /// what the switches acknowledged).
    All,
}

impl std::fmt::Debug for SaPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaPublisher")
            .field("service", &self.service)
            .field("stored", &*self.stored.borrow())
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SaPublisher {
    /// The publisher of `service`'s snapshots; `escape`: the five-phase update's escape
    /// addressing when the LMC gives every end port an escape LID.
    pub fn new(service: Arc<SaService>, sm: SmData, escape: Option<Escape>) -> SaPublisher {
        SaPublisher {
            service,
            sm,
            escape,
            state: Mutex::new(PublishState::default()),
            acks: Mutex::new(Acks::default()),
            stored: watch::Sender::new(0),
        }
    }

    /// The service it publishes to.
    pub fn service(&self) -> &Arc<SaService> {
        &self.service
    }

    /// A receiver of the number of the last build stored.
    pub fn stored_watch(&self) -> watch::Receiver<u64> {
        self.stored.subscribe()
    }

    /// A generation was committed: builds its snapshot on the blocking pool (the caller, the
    /// event loop, does not wait) and stores it unless a newer generation's build was
    /// requested meanwhile. Switches listed as `unprogrammed` keep the tables of the current
    /// snapshot (the blocks they acknowledged), not the generation's.
    ///
    /// `physical` is the physical fabric the generation was computed on and `pending` the
    /// physical changes seen since (not routed yet): they are applied too, so that the SA's
    /// links are the live ones.
    pub fn generation_committed(
        self: &Arc<Self>,
        physical: &Arc<Fabric>,
        pending: &[FabricEvent],
        generation: &Generation,
        unprogrammed: &[UnprogrammedSwitch],
    ) {
        let mut st = lock(&self.state);
        st.last = Some((generation.lids.clone(), generation.lfts.clone()));
        let keep = Keep::Switches(unprogrammed.iter().map(|u| u.guid).collect());
        self.request(st, format!("generation {}", generation.number), physical, pending, keep);
    }

    /// A physical change was seen (`pending`: the changes since `physical`, the fabric of the
    /// last committed generation): the snapshot's links and ports follow at once (built on
    /// the blocking pool), its tables stay what the switches acknowledged. Nothing before the
    /// first generation.
    pub fn physical_changed(self: &Arc<Self>, physical: &Arc<Fabric>, pending: &[FabricEvent]) {
        let st = lock(&self.state);
        if st.last.is_none() {
            return;
        }
        self.request(st, "a physical change".into(), physical, pending, Keep::All);
    }

    /// Requests a build (superseding any not stored yet) and starts the builder if idle.
    fn request(
        self: &Arc<Self>,
        mut st: MutexGuard<'_, PublishState>,
        what: String,
        physical: &Arc<Fabric>,
        pending: &[FabricEvent],
        keep: Keep,
    ) {
        let Some((lids, lfts)) = st.last.clone() else {
            return;
        };
        st.requested += 1;
        let generation = matches!(keep, Keep::Switches(_));
        // A physical change supersedes a build of a generation no snapshot holds yet: it takes
        // that build's tables (or, for the running one, its rows once resolved) over.
        let inherited = if generation {
            None
        } else {
            match st.next.take() {
                Some(prev) if prev.lfts.is_some() || prev.rows.is_some() || prev.adopt.is_some() => {
                    Some((prev.lfts, prev.rows, prev.adopt, prev.keep))
                }
                _ => st.running_tables.map(|seq| (None, None, Some(seq), Keep::All)),
            }
        };
        let (lfts, rows, adopt, keep) = match inherited {
            // Blocks acknowledged since that generation's request are replayed too.
            Some(inherited) => inherited,
            None => {
                st.since_request.clear();
                (generation.then_some(lfts), None, None, keep)
            }
        };
        st.next = Some(Build {
            seq: st.requested,
            what,
            physical: physical.clone(),
            events: pending.to_vec(),
            lids,
            lfts,
            rows,
            adopt,
            keep,
        });
        if st.building {
            return;
        }
        st.building = true;
        drop(st);
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.run_builds());
    }

    /// The builder: builds the latest request until none is left.
    fn run_builds(&self) {
        loop {
            let b = {
                let mut st = lock(&self.state);
                match st.next.take() {
                    Some(b) => {
                        st.running_tables = (b.lfts.is_some() || b.rows.is_some()).then_some(b.seq);
                        b
                    }
                    None => {
                        st.building = false;
                        st.running_tables = None;
                        return;
                    }
                }
            };
            let physical = if b.events.is_empty() {
                Ok(b.physical.clone())
            } else {
                b.physical.apply(&b.events).map(Arc::new)
            };
            match physical {
                Ok(f) => {
                    // The rows first (shared with the current snapshot where equal), and the
                    // generation's tables let go before the long part: the next routing
                    // recycles them. A build superseded meanwhile stops there.
                    let rows = match (b.rows, b.lfts) {
                        (Some(rows), _) => Some(rows),
                        (None, Some(lfts)) => Some(resolve_rows(&f, &lfts, &self.service.subnet())),
                        (None, None) => None,
                    };
                    if lock(&self.state).requested != b.seq {
                        tracing::debug!("SA snapshot of {} superseded by a newer one", b.what);
                        if let Some(rows) = rows {
                            self.hand_over(b.seq, rows, b.keep);
                        }
                        continue;
                    }
                    // Built without tables, then given the resolved rows (a physical change
                    // keeps the current snapshot's tables: `store`).
                    let no_tables = fabric_routing::Lfts::new(0, 0);
                    let mut subnet = fabric_sa::subnet::from_model(&f, &b.lids, &no_tables, self.sm, self.escape);
                    let tables = rows.is_some();
                    if let Some(rows) = rows {
                        attach_rows(&mut subnet, &f, rows);
                    }
                    if let Err(subnet) = self.store(b.seq, &b.what, subnet, &b.keep) {
                        if tables {
                            self.hand_over(b.seq, rows_of(&subnet, &f), b.keep);
                        }
                    }
                }
                // Checked by the loop before it queued them: not expected.
                Err(e) => tracing::warn!(error = %e, "SA snapshot not rebuilt for {}", b.what),
            }
        }
    }

    /// Gives the rows of superseded build `seq` to the build that adopts them, if any.
    fn hand_over(&self, seq: u64, rows: Vec<Option<LftTable>>, keep: Keep) {
        let mut st = lock(&self.state);
        st.running_tables = None;
        if let Some(next) = st.next.as_mut().filter(|n| n.adopt == Some(seq)) {
            tracing::debug!(
                "SA snapshot of {} takes over the tables of a superseded build",
                next.what
            );
            next.rows = Some(rows);
            next.adopt = None;
            next.keep = keep;
        }
    }

    /// Stores build `seq` (for `what`) unless a newer one was requested (then gives the
    /// snapshot back).
    fn store(&self, seq: u64, what: &str, mut subnet: Subnet, keep: &Keep) -> Result<(), Subnet> {
        let mut st = lock(&self.state);
        if seq != st.requested {
            tracing::debug!("SA snapshot of {what} superseded by a newer one");
            return Err(subnet);
        }
        let previous = self.service.subnet();
        apply_keep(&mut subnet, &previous, keep);
        subnet.version = previous.version + 1;
        let version = subnet.version;
        let nodes = subnet.nodes.len();
        self.service.publish(subnet);
        let replay = std::mem::take(&mut st.since_request);
        if !replay.is_empty() {
            self.service.apply_lft_blocks(&replay);
        }
        st.stored = seq;
        st.running_tables = None;
        drop(st);
        if !self.service.serving() {
            self.service.set_serving(true);
            tracing::info!(nodes, "subnet administration serving ({what})");
        }
        tracing::debug!(version, nodes, "SA snapshot of {what} published");
        // Reports (traps 64/65) owed to InformInfo subscribers: mock and oob have no SA transport
        // to send them on (no client can have subscribed over the wire); not kept queued.
        let reports = self.service.take_reports();
        if !reports.is_empty() {
            tracing::debug!(
                reports = reports.len(),
                "SA Reports not delivered: no SA transport on this driver"
            );
        }
        self.stored.send_replace(seq);
        Ok(())
    }

    /// LFT blocks a switch acknowledged (the upload, after each batch written): the SA's
    /// tables follow them at once.
    ///
    /// Applying blocks makes a new snapshot (`SaService::apply_lft_blocks`, a copy-on-write of
    /// the per-node table list and of the 4 KiB chunk holding each block), so concurrent
    /// acknowledgements are applied together: a caller that finds another one applying leaves
    /// its blocks to it (in acknowledgement order), and the applier goes on until none is left. Once no call is running (every batch of an upload
    /// has returned), every acknowledged block is applied.
    pub fn lft_blocks_acknowledged(&self, writes: &[LftBlockWrite]) {
        if writes.is_empty() {
            return;
        }
        {
            let mut a = lock(&self.acks);
            a.pending.extend(writes.iter().map(|w| (w.switch, w.block, w.entries)));
            if a.applying {
                return;
            }
            a.applying = true;
        }
        // A panic below must not leave `applying` set (no block would be applied again).
        let mut applier = Applier {
            acks: &self.acks,
            done: false,
        };
        loop {
            let blocks = {
                let mut a = lock(&self.acks);
                if a.pending.is_empty() {
                    // Under the lock the blocks are pushed under: none is left behind.
                    a.applying = false;
                    applier.done = true;
                    return;
                }
                std::mem::take(&mut a.pending)
            };
            let mut st = lock(&self.state);
            self.service.apply_lft_blocks(&blocks);
            if st.requested > st.stored {
                st.since_request.extend(blocks);
            }
        }
    }
}

/// The caller applying acknowledged blocks: clears [`Acks::applying`] if it unwinds.
struct Applier<'a> {
    acks: &'a Mutex<Acks>,
    /// Returned normally (`applying` cleared with the queue seen empty).
    done: bool,
}

impl Drop for Applier<'_> {
    fn drop(&mut self) {
        if !self.done {
            lock(self.acks).applying = false;
        }
    }
}

/// Acknowledged blocks waiting for the one caller that applies them.
#[derive(Default)]
struct Acks {
    pending: Vec<SaBlock>,
    /// A caller of [`SaPublisher::lft_blocks_acknowledged`] is applying blocks.
    applying: bool,
}

#[cfg(test)]
impl SaPublisher {
    /// Marks a build as requested (none runs): acknowledged blocks are then kept for its replay.
    pub(crate) fn request_build(&self) {
        lock(&self.state).requested += 1;
    }

    /// (switch, block) of the blocks kept for the replay of the pending build.
    pub(crate) fn kept_for_replay(&self) -> Vec<(Guid, u32)> {
        lock(&self.state)
            .since_request
            .iter()
            .map(|&(g, b, _)| (g, b))
            .collect()
    }
}

/// Per switch of `fabric` (by dense id): its row of `lfts` (empty beyond `lfts`) as a snapshot
/// stores it — sharing with `current` (the snapshot in force, same node GUID) every chunk of
/// the table that holds the same entries ([`LftTable::from_slice_sharing`]); `None` for a
/// switch that is down. Attached with [`attach_rows`], the result is the same as building from
/// `lfts` row by row, and a snapshot after a fault allocates only the chunks that changed. (A
/// physical change resolves none: its snapshot keeps the tables in force, [`apply_keep`].)
fn resolve_rows(fabric: &Fabric, lfts: &fabric_routing::Lfts, current: &Subnet) -> Vec<Option<LftTable>> {
    use rayon::prelude::*;
    fabric
        .switches()
        .par_iter()
        .enumerate()
        .map(|(i, sw)| {
            if !sw.up {
                return None;
            }
            let row: &[u8] = if i < lfts.num_switches() {
                lfts.row(fabric_topology::SwitchId(i as u32))
            } else {
                &[]
            };
            let old = current.node_index_by_guid(sw.guid).and_then(|j| current.lft(j));
            Some(LftTable::from_slice_sharing(row, old))
        })
        .collect()
}

/// The rows of `subnet`'s tables per switch of `fabric` (by dense id), as [`resolve_rows`]
/// gives them (shared, not copied).
fn rows_of(subnet: &Subnet, fabric: &Fabric) -> Vec<Option<LftTable>> {
    fabric
        .switches()
        .iter()
        .map(|sw| subnet.node_index_by_guid(sw.guid).and_then(|n| subnet.lft(n)).cloned())
        .collect()
}

/// Gives the switch nodes of `subnet` their rows resolved by [`resolve_rows`].
fn attach_rows(subnet: &mut Subnet, fabric: &Fabric, mut rows: Vec<Option<LftTable>>) {
    let switches: Vec<(u32, Guid)> = subnet
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.is_switch())
        .map(|(i, n)| (i as u32, n.guid()))
        .collect();
    for (i, guid) in switches {
        let row = fabric
            .switch_by_guid(guid)
            .and_then(|id| rows.get_mut(id.idx()).and_then(Option::take));
        subnet.set_lft(i, Some(row.unwrap_or_default()));
    }
}

/// The switches `keep` names take the tables of `previous` (every switch that has one for
/// [`Keep::All`]).
fn apply_keep(subnet: &mut Subnet, previous: &Subnet, keep: &Keep) {
    match keep {
        Keep::Switches(guids) => keep_tables(subnet, previous, guids),
        Keep::All => {
            let all: Vec<Guid> = previous
                .nodes
                .iter()
                .enumerate()
                .filter(|&(j, _)| previous.lft(j as u32).is_some())
                .map(|(_, n)| n.guid())
                .collect();
            keep_tables(subnet, previous, &all);
        }
    }
}

/// The switches `keep` take the tables `previous` has for them (same node GUID; shared, not
/// copied).
fn keep_tables(subnet: &mut Subnet, previous: &Subnet, keep: &[Guid]) {
    for &guid in keep {
        let (Some(i), Some(j)) = (subnet.node_index_by_guid(guid), previous.node_index_by_guid(guid)) else {
            continue;
        };
        if previous.lft(j).is_some() {
            subnet.share_lft(i, previous, j);
        }
    }
}

/// Attributes by name: (id, long name, saquery-style short name).
const ATTRIBUTES: &[(u16, &str, &str)] = {
    use fabric_sa::wire::attr::*;
    &[
        (CLASS_PORT_INFO, "ClassPortInfo", "classportinfo"),
        (NOTICE, "Notice", "notice"),
        (INFORM_INFO, "InformInfo", "ii"),
        (NODE_RECORD, "NodeRecord", "nr"),
        (PORT_INFO_RECORD, "PortInfoRecord", "pir"),
        (SL_TO_VL_RECORD, "SLtoVLMappingTableRecord", "sl2vl"),
        (SWITCH_INFO_RECORD, "SwitchInfoRecord", "swir"),
        (LFT_RECORD, "LinearForwardingTableRecord", "lftr"),
        (RFT_RECORD, "RandomForwardingTableRecord", "rftr"),
        (MFT_RECORD, "MulticastForwardingTableRecord", "mftr"),
        (SM_INFO_RECORD, "SMInfoRecord", "smir"),
        (LINK_RECORD, "LinkRecord", "lr"),
        (GUID_INFO_RECORD, "GUIDInfoRecord", "gir"),
        (SERVICE_RECORD, "ServiceRecord", "sr"),
        (P_KEY_TABLE_RECORD, "P_KeyTableRecord", "pkr"),
        (PATH_RECORD, "PathRecord", "pr"),
        (VL_ARB_RECORD, "VLArbitrationTableRecord", "vlarb"),
        (MC_MEMBER_RECORD, "MCMemberRecord", "mcmr"),
        (TRACE_RECORD, "TraceRecord", "tr"),
        (MULTI_PATH_RECORD, "MultiPathRecord", "mpr"),
        (SERVICE_ASSOCIATION_RECORD, "ServiceAssociationRecord", "sar"),
        (INFORM_INFO_RECORD, "InformInfoRecord", "iir"),
    ]
};

/// The attribute a name stands for: the IBA name (`NodeRecord`, any case), its saquery-style
/// short name (`nr`), or `LFTRecord`.
pub fn attribute_by_name(name: &str) -> Option<u16> {
    let name = name.trim();
    if name.eq_ignore_ascii_case("LFTRecord") {
        return Some(fabric_sa::wire::attr::LFT_RECORD);
    }
    ATTRIBUTES
        .iter()
        .find(|(_, long, short)| long.eq_ignore_ascii_case(name) || short.eq_ignore_ascii_case(name))
        .map(|&(id, _, _)| id)
}

/// The IBA name of an attribute the SA knows.
pub fn attribute_name(id: u16) -> Option<&'static str> {
    ATTRIBUTES.iter().find(|(a, _, _)| *a == id).map(|&(_, long, _)| long)
}

/// The name of a request method (metrics label): `get`, `get_table`, ..., `other`.
pub fn method_label(method: u8) -> &'static str {
    use fabric_sa::wire::*;
    match method {
        METHOD_GET => "get",
        METHOD_SET => "set",
        METHOD_GET_TABLE => "get_table",
        METHOD_GET_TRACE_TABLE => "get_trace_table",
        METHOD_GET_MULTI => "get_multi",
        METHOD_DELETE => "delete",
        METHOD_REPORT_RESP => "report_resp",
        _ => "other",
    }
}

/// The name of an SA MAD status (IBA 13.4.7 and 15.2.1.1).
pub fn status_text(status: u16) -> &'static str {
    use fabric_sa::wire::status::*;
    match status {
        OK => "success",
        BAD_VERSION => "bad class version",
        UNSUPPORTED_METHOD => "method not supported",
        UNSUPPORTED_METHOD_ATTR => "method/attribute combination not supported",
        INVALID_FIELD => "invalid field in the attribute or modifier",
        NO_RESOURCES => "ERR_NO_RESOURCES",
        REQ_INVALID => "ERR_REQ_INVALID",
        NO_RECORDS => "ERR_NO_RECORDS",
        TOO_MANY_RECORDS => "ERR_REQ_TOO_MANY_RECORDS",
        INVALID_GID => "ERR_REQ_INVALID_GID",
        INSUFFICIENT_COMPONENTS => "ERR_REQ_INSUFFICIENT_COMPONENTS",
        DENIED => "ERR_REQ_DENIED",
        _ => "unknown status",
    }
}

/// The JSON rendering of one record image of attribute `attr` (`serde_json` of the decoded
/// `fabric_sa::records` type); `None` when the daemon has no decoder for it or the image does
/// not decode.
pub fn record_json(attr: u16, raw: &[u8]) -> Option<String> {
    serde_json::to_string(&fabric_sa::records::decode_any(attr, raw)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use fabric_sa::wire::attr;

    #[test]
    fn attributes_resolve_by_long_and_short_name_and_back() {
        assert_eq!(attribute_by_name("NodeRecord"), Some(attr::NODE_RECORD));
        assert_eq!(attribute_by_name("nodereCORD"), Some(attr::NODE_RECORD));
        assert_eq!(attribute_by_name(" pr "), Some(attr::PATH_RECORD));
        assert_eq!(attribute_by_name("LFTRecord"), Some(attr::LFT_RECORD));
        assert_eq!(attribute_by_name("lftr"), Some(attr::LFT_RECORD));
        assert_eq!(attribute_by_name("classportinfo"), Some(attr::CLASS_PORT_INFO));
        assert_eq!(attribute_by_name("bogus"), None);
        for &(id, long, short) in ATTRIBUTES {
            assert_eq!(attribute_by_name(long), Some(id), "{long}");
            assert_eq!(attribute_by_name(short), Some(id), "{short}");
            assert_eq!(attribute_name(id), Some(long));
        }
        assert_eq!(attribute_name(0x1234), None);
        assert_eq!(method_label(fabric_sa::wire::METHOD_GET_TABLE), "get_table");
        assert_eq!(method_label(0x7f), "other");
        assert_eq!(status_text(0x0300), "ERR_NO_RECORDS");
    }

    /// A store failing while `fail` is set.
    struct Flaky(Arc<AtomicBool>);
    impl RegistryStore for Flaky {
        fn save(&self, _: &Registry) -> Result<(), String> {
            if self.0.load(Ordering::Relaxed) {
                Err("sa-registry.json: read-only file system".into())
            } else {
                Ok(())
            }
        }
    }

    #[test]
    fn a_failure_streak_is_one_state_and_ends_with_a_save() {
        let fail = Arc::new(AtomicBool::new(true));
        let s = LoggedStore::new(Box::new(Flaky(fail.clone())));
        let r = Registry::default();
        assert!(s.save(&r).unwrap_err().contains("read-only"));
        assert!(s.failing.load(Ordering::Relaxed));
        assert!(s.save(&r).is_err());
        fail.store(false, Ordering::Relaxed);
        assert_eq!(s.save(&r), Ok(()));
        assert!(!s.failing.load(Ordering::Relaxed));
    }

    fn generation(fabric: &Arc<Fabric>, number: u64) -> Generation {
        let ranking = fabric_ranking::rank(fabric, &fabric_ranking::RankOptions::default());
        let lids = fabric_routing::assign_lids(fabric, &fabric_routing::Guid2Lid::default(), 1, 0xbfff).expect("LIDs");
        let lfts = fabric_routing::Lfts::new(fabric.num_switches(), lids.top());
        Generation {
            number,
            fabric: fabric.clone(),
            ranking: Arc::new(ranking),
            lids: Arc::new(lids),
            lfts: Arc::new(lfts),
            engine: "dmodc".into(),
            route_ms: 0.0,
            timings: crate::state::RerouteTimings::default(),
            excluded_links: Arc::default(),
            virtual_faults: 0,
            routing_check: Arc::default(),
            mcast: Arc::default(),
            partitions: Arc::default(),
            vl: None,
            route_path: String::new(),
            full_recompute: false,
        }
    }

    #[tokio::test]
    async fn the_service_serves_once_the_first_snapshot_is_stored_and_versions_grow() {
        let fabric = Arc::new(fabric_topology::gen::generate_str("PGFT(2;2,2;1,2;1,1)", None).unwrap());
        let service = Arc::new(SaService::new(Registry::default(), None));
        let p = Arc::new(SaPublisher::new(service.clone(), local_sm(), Some(Escape { sl: 1 })));
        let mut stored = p.stored_watch();
        assert!(!service.serving());
        // Nothing to rebuild before the first generation.
        p.physical_changed(&fabric, &[]);
        assert!(!service.serving());
        p.generation_committed(&fabric, &[], &generation(&fabric, 1), &[]);
        stored.wait_for(|s| *s == 1).await.unwrap();
        assert!(service.serving());
        assert_eq!(service.subnet().version, 1);
        assert_eq!(service.subnet().sm, local_sm());
        p.generation_committed(&fabric, &[], &generation(&fabric, 2), &[]);
        stored.wait_for(|s| *s == 2).await.unwrap();
        assert_eq!(service.subnet().version, 2);
        // A physical change is a new snapshot too.
        let sw = fabric.switch(fabric_topology::SwitchId(0)).guid;
        p.physical_changed(&fabric, &[FabricEvent::SwitchDown(sw)]);
        stored.wait_for(|s| *s == 3).await.unwrap();
        assert_eq!(service.subnet().version, 3);
        // Acknowledged blocks are taken while no build runs, and kept for the replay while one does.
        let w = LftBlockWrite {
            switch: fabric.switch(fabric_topology::SwitchId(0)).guid,
            block: 0,
            entries: [1; 64],
        };
        p.lft_blocks_acknowledged(std::slice::from_ref(&w));
        assert!(lock(&p.state).since_request.is_empty());
        p.request_build();
        p.lft_blocks_acknowledged(std::slice::from_ref(&w));
        assert_eq!(p.kept_for_replay(), vec![(w.switch, 0)]);
        // A build older than the last request is not stored.
        assert!(p.store(3, "old", Subnet::default(), &Keep::All).is_err());
        assert_eq!(service.subnet().version, 3);
        assert!(p.store(4, "new", Subnet::default(), &Keep::All).is_ok());
        assert_eq!(service.subnet().version, 4);
        assert!(lock(&p.state).since_request.is_empty(), "replayed");
    }

    /// Tables of `fabric` with every entry of switch `s` set to `s + port`.
    fn tables(fabric: &Fabric, port: u8) -> fabric_routing::Lfts {
        let lids = fabric_routing::assign_lids(fabric, &fabric_routing::Guid2Lid::default(), 1, 0xbfff).expect("LIDs");
        let mut t = fabric_routing::Lfts::new(fabric.num_switches(), lids.top());
        for s in fabric.switch_ids() {
            t.row_mut(s).fill(s.0 as u8 + port);
        }
        t
    }

    /// The incremental routing recycles the tables of the generation before the installed
    /// one once nothing else holds them: a physical-change build (which keeps the snapshot's
    /// tables) must not hold any, and a generation's build lets them go before its long part.
    #[test]
    fn builds_hold_no_generation_tables_they_do_not_need() {
        let fabric = Arc::new(fabric_topology::gen::generate_str("PGFT(2;2,2;1,2;1,1)", None).unwrap());
        let service = Arc::new(SaService::new(Registry::default(), None));
        let p = Arc::new(SaPublisher::new(service, local_sm(), None));
        let g = generation(&fabric, 1);
        // A builder is "running": requests are queued, not built.
        lock(&p.state).building = true;
        p.generation_committed(&fabric, &[], &g, &[]);
        // `last` and the generation's build hold the tables.
        assert_eq!(Arc::strong_count(&g.lfts), 3);
        p.physical_changed(&fabric, &[]);
        // The physical change superseded the generation's build, which no snapshot holds yet:
        // it took the tables over (until its rows are resolved), no more references.
        assert!(lock(&p.state).next.as_ref().is_some_and(|b| b.lfts.is_some()));
        assert_eq!(Arc::strong_count(&g.lfts), 3);
        lock(&p.state).building = false;
        p.run_builds();
        assert_eq!(lock(&p.state).stored, 2);
        assert_eq!(Arc::strong_count(&g.lfts), 2, "the generation and `last` only");
        // Once a snapshot holds them, a physical change's build holds no tables.
        lock(&p.state).building = true;
        p.physical_changed(&fabric, &[]);
        assert!(lock(&p.state)
            .next
            .as_ref()
            .is_some_and(|b| b.lfts.is_none() && b.rows.is_none() && b.adopt.is_none()));
        assert_eq!(Arc::strong_count(&g.lfts), 2, "the generation and `last` only");
        // A build superseded after its rows were resolved stops before the snapshot.
        let b = lock(&p.state).next.take().unwrap();
        p.physical_changed(&fabric, &[]);
        lock(&p.state).next = Some(b);
        lock(&p.state).building = false;
        p.run_builds();
        assert_eq!(lock(&p.state).stored, 2, "nothing more stored");
    }

    /// Every switch's table in the snapshot in force equals its row of `lfts`.
    fn holds_tables(service: &SaService, fabric: &Fabric, lfts: &fabric_routing::Lfts) -> bool {
        let s = service.subnet();
        let mut seen = 0;
        let all = fabric.switch_ids().all(|id| {
            // A switch that went down is not in the snapshot.
            let Some(n) = s.node_index_by_guid(fabric.switch(id).guid) else {
                return true;
            };
            seen += 1;
            s.lft(n).is_some_and(|t| t.eq_slice(lfts.row(id)))
        });
        all && seen > 0
    }

    /// A physical change superseding the build of a generation no snapshot holds yet (queued,
    /// or running and superseded once its rows were resolved) takes that generation's tables
    /// over. Without it the physical change's snapshot kept the tables in force (here: none),
    /// and back-to-back faults left the SA without the tables the switches hold.
    #[test]
    fn a_physical_change_superseding_a_generation_build_keeps_its_tables() {
        let fabric = Arc::new(fabric_topology::gen::generate_str("PGFT(2;2,2;1,2;1,1)", None).unwrap());
        let mut g = generation(&fabric, 1);
        g.lfts = Arc::new(tables(&fabric, 1));
        let sw = fabric.switch(fabric_topology::SwitchId(0)).guid;
        // Queued: the physical change's build inherits the generation's tables.
        let service = Arc::new(SaService::new(Registry::default(), None));
        let p = Arc::new(SaPublisher::new(service.clone(), local_sm(), None));
        lock(&p.state).building = true;
        p.generation_committed(&fabric, &[], &g, &[]);
        p.physical_changed(&fabric, &[FabricEvent::SwitchDown(sw)]);
        lock(&p.state).building = false;
        p.run_builds();
        assert_eq!(lock(&p.state).stored, 2);
        assert!(
            holds_tables(&service, &fabric, &g.lfts),
            "queued generation's tables kept"
        );
        assert!(
            service.subnet().node_index_by_guid(sw).is_none(),
            "the physical change applied"
        );
        // Running: the generation's build is superseded after resolving its rows and hands
        // them to the physical change's build, which adopted them.
        let service = Arc::new(SaService::new(Registry::default(), None));
        let p = Arc::new(SaPublisher::new(service.clone(), local_sm(), None));
        lock(&p.state).building = true;
        p.generation_committed(&fabric, &[], &g, &[]);
        let b = {
            let mut st = lock(&p.state);
            let b = st.next.take().unwrap();
            st.running_tables = Some(b.seq);
            b
        };
        p.physical_changed(&fabric, &[]);
        assert_eq!(lock(&p.state).next.as_ref().and_then(|n| n.adopt), Some(b.seq));
        let rows = resolve_rows(&fabric, b.lfts.as_ref().unwrap(), &service.subnet());
        p.hand_over(b.seq, rows, b.keep);
        lock(&p.state).building = false;
        p.run_builds();
        assert!(
            holds_tables(&service, &fabric, &g.lfts),
            "running generation's tables kept"
        );
        // A newer generation is not overridden by an older one's rows.
        let mut g2 = generation(&fabric, 2);
        g2.lfts = Arc::new(tables(&fabric, 2));
        lock(&p.state).building = true;
        p.generation_committed(&fabric, &[], &g2, &[]);
        lock(&p.state).building = false;
        p.run_builds();
        assert!(holds_tables(&service, &fabric, &g2.lfts));
    }

    #[test]
    fn attached_tables_equal_the_rows_and_share_the_unchanged_ones() {
        let fabric = fabric_topology::gen::generate_str("PGFT(2;2,2;1,2;1,1)", None).unwrap();
        let lids = fabric_routing::assign_lids(&fabric, &fabric_routing::Guid2Lid::default(), 1, 0xbfff).unwrap();
        let built = |lfts: &fabric_routing::Lfts, current: &Subnet, keep: &Keep| {
            let mut s =
                fabric_sa::subnet::from_model(&fabric, &lids, &fabric_routing::Lfts::new(0, 0), local_sm(), None);
            // As `run_builds` and `store` do.
            if let Keep::Switches(_) = keep {
                attach_rows(&mut s, &fabric, resolve_rows(&fabric, lfts, current));
            }
            apply_keep(&mut s, current, keep);
            s
        };
        let one = tables(&fabric, 1);
        let first = built(&one, &Subnet::default(), &Keep::Switches(vec![]));
        // The same as building from the tables row by row.
        assert_eq!(
            first,
            fabric_sa::subnet::from_model(&fabric, &lids, &one, local_sm(), None)
        );
        // The next generation changes switch 0's row only: the others are shared.
        let mut two = one.clone();
        two.row_mut(fabric_topology::SwitchId(0)).fill(9);
        let second = built(&two, &first, &Keep::Switches(vec![]));
        assert_eq!(
            second,
            fabric_sa::subnet::from_model(&fabric, &lids, &two, local_sm(), None)
        );
        for (i, sw) in fabric.switches().iter().enumerate() {
            let n = second.node_index_by_guid(sw.guid).unwrap();
            let m = first.node_index_by_guid(sw.guid).unwrap();
            let (a, b) = (second.lft(n).unwrap(), first.lft(m).unwrap());
            // One chunk per table at this size: shared or not.
            assert_eq!(a.shared_chunks(b), usize::from(i != 0), "switch {i}");
        }
        // A physical change keeps every table of the snapshot in force, whatever the build's.
        let kept = built(&tables(&fabric, 5), &second, &Keep::All);
        assert_eq!(kept, second);
    }

    #[test]
    fn blocks_acknowledged_from_many_threads_are_all_applied_in_order_per_thread() {
        let fabric = Arc::new(fabric_topology::gen::generate_str("PGFT(2;2,2;1,2;1,1)", None).unwrap());
        let service = Arc::new(SaService::new(Registry::default(), None));
        let p = Arc::new(SaPublisher::new(service.clone(), local_sm(), None));
        let lids = fabric_routing::assign_lids(&fabric, &fabric_routing::Guid2Lid::default(), 1, 0xbfff).unwrap();
        service.publish(fabric_sa::subnet::from_model(
            &fabric,
            &lids,
            &tables(&fabric, 0),
            local_sm(),
            None,
        ));
        let guids: Vec<Guid> = fabric.switches().iter().map(|s| s.guid).collect();
        // Each thread owns one switch and writes its block 0 with 1, 2, ..., 50 in turn.
        std::thread::scope(|sc| {
            for &g in &guids {
                let p = p.clone();
                sc.spawn(move || {
                    for v in 1..=50u8 {
                        let w = LftBlockWrite {
                            switch: g,
                            block: 0,
                            entries: [v; 64],
                        };
                        p.lft_blocks_acknowledged(std::slice::from_ref(&w));
                    }
                });
            }
        });
        let s = service.subnet();
        for g in guids {
            let n = s.node_index_by_guid(g).unwrap();
            assert_eq!(s.lft(n).unwrap().block(0), [50u8; 64], "switch {g:#x}");
        }
        let a = lock(&p.acks);
        assert!(a.pending.is_empty() && !a.applying);
    }
}
