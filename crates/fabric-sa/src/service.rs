//! [`SaService`]: the one SA object the transports share (the umad driver's SA agent on its
//! transport thread, the daemon's gRPC `SaQuery`). It holds the current [`Subnet`] snapshot
//! (arc-swap: answering never waits for the event loop or the driver), the [`Registry`] of
//! what clients registered (behind its own mutex, persisted through a [`RegistryStore`] before
//! a Set or Delete is answered), the per-(attribute, method, status) counters and the Reports
//! owed to InformInfo subscribers.
//!
//! A standby manager does not answer ([`SaService::set_serving`]).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use arc_swap::{ArcSwap, ArcSwapOption};
use fabric_topology::Guid;

use crate::mcast::{self, McGroup, McastState};
use crate::partitions::{Partitions, PkeyTables};
use crate::registry::{self, Registry};
use crate::request::{Request, Requester, SaResponse};
use crate::subnet::Subnet;
use crate::wire::{self, SaHeader, MAD_SIZE, SA_HEADER_SIZE};

/// Where the registry is persisted (the daemon: an atomic write in the state directory).
pub trait RegistryStore: Send + Sync {
    /// Saves the whole registry; an error is logged by the caller and the Set/Delete fails
    /// with ERR_NO_RESOURCES (nothing is acknowledged that would not survive a restart).
    fn save(&self, registry: &Registry) -> Result<(), String>;
}

/// A Report (Notice) the SA owes a subscriber: the transport sends `mad` to `lid`/`qpn`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutgoingReport {
    pub lid: u16,
    pub qpn: u32,
    pub pkey_index: u16,
    pub mad: Box<[u8; MAD_SIZE]>,
}

/// Counters: answers per (attribute, request method, status).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SaCounters {
    pub answers: BTreeMap<(u16, u8, u16), u64>,
    /// MADs that were not SA requests at all (runts, wrong class/base version): no answer.
    pub malformed: u64,
    /// Registry saves that failed (the Set/Delete was answered ERR_NO_RESOURCES and undone).
    pub persist_failures: u64,
    /// The last such error (the daemon logs it; this crate has no logger).
    pub last_persist_error: Option<String>,
    /// IPoIB groups of the partitions configuration that could not be created (no MLID left
    /// under the switches' MulticastFDBCap).
    pub mcast_groups_not_created: u64,
    /// Reports (traps 64/65) queued for subscribers by [`SaService::publish`].
    pub reports_queued: u64,
    /// Reports dropped because the queue held [`MAX_QUEUED_REPORTS`] not yet taken.
    pub reports_dropped: u64,
}

/// At most this many Reports wait in the queue for the transport; the oldest are dropped
/// beyond (a transport that stopped taking them must not grow the daemon without bound).
pub const MAX_QUEUED_REPORTS: usize = 65_536;

/// The shared SA.
pub struct SaService {
    subnet: ArcSwap<Subnet>,
    registry: Mutex<Registry>,
    store: Option<Box<dyn RegistryStore>>,
    serving: AtomicBool,
    /// The SM_Key a trusted request carries (0: no requester is trusted).
    trusted_key: AtomicU64,
    counters: Mutex<SaCounters>,
    reports: Mutex<VecDeque<OutgoingReport>>,
    /// Transaction id of the next Report (low 32 bits; the kernel owns the high ones).
    next_report_tid: AtomicU32,
    /// The registry's subscriptions as of its last change, for [`SaService::publish`]: it
    /// never waits for the registry lock (held across a save, i.e. fsyncs).
    subscriptions: ArcSwap<Vec<registry::Subscription>>,
    /// The partitions in force (`None`: every port full member of 0xFFFF only).
    partitions: ArcSwapOption<Partitions>,
    /// The multicast state as of its last change: Get/GetTable answer from it without the
    /// registry lock (held across saves).
    mcast: ArcSwap<McastState>,
    /// [`SaService::mcast_groups`], built once per change.
    mcast_groups: ArcSwap<Vec<McGroup>>,
    mcast_version: AtomicU64,
    mcast_listener: Mutex<Option<McastListener>>,
    /// The per-path SLs of the routing in force ([`SaService::set_path_sls`]), given to every
    /// snapshot published without its own.
    path_sls: ArcSwapOption<crate::subnet::PathSls>,
}

/// What [`SaService::set_mcast_listener`] installs.
type McastListener = Arc<dyn Fn() + Send + Sync>;

impl std::fmt::Debug for SaService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaService")
            .field("subnet_version", &self.subnet.load().version)
            .field("serving", &self.serving())
            .finish_non_exhaustive()
    }
}

/// LFT blocks of the unicast LID space (LIDs 0..=0xBFFF).
const MAX_LFT_BLOCKS: u32 = 0xc000 / 64;

/// Writes `blocks` into the tables of `subnet` (see [`SaService::apply_lft_blocks`]).
fn apply_blocks(subnet: &mut Subnet, blocks: &[(Guid, u32, [u8; 64])]) {
    for (guid, block, entries) in blocks {
        let Some(n) = subnet.node_index_by_guid(*guid) else {
            continue;
        };
        if !subnet.nodes[n as usize].is_switch() {
            continue;
        }
        // A block beyond the unicast LID space would grow the table: ignored. One within the
        // table the snapshot holds is applied wherever it lies (24-bit addresses of the oob
        // driver: the snapshot's tables, built from the model, cover every LID; ignoring their
        // acknowledged blocks above 0xBFFF left them stale, and the next snapshot build then
        // copied every such row again, issue #17).
        let within = subnet.lft(n).is_some_and(|t| *block as usize * 64 + 64 <= t.len());
        if *block >= MAX_LFT_BLOCKS && !within {
            continue;
        }
        if let Some(table) = subnet.lft_mut(n) {
            table.write_block(*block as usize, entries);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl SaService {
    /// A service starting from `registry` (read back from the state directory), persisting
    /// through `store`. It answers once [`SaService::set_serving`] is called with `true`.
    pub fn new(registry: Registry, store: Option<Box<dyn RegistryStore>>) -> SaService {
        let subscriptions = ArcSwap::from_pointee(registry.subscriptions().to_vec());
        let mcast = ArcSwap::from_pointee(registry.mcast().clone());
        let mcast_groups = ArcSwap::from_pointee(registry.mcast_groups());
        SaService {
            subnet: ArcSwap::from_pointee(Subnet::default()),
            registry: Mutex::new(registry),
            store,
            serving: AtomicBool::new(false),
            trusted_key: AtomicU64::new(0),
            counters: Mutex::new(SaCounters::default()),
            reports: Mutex::new(VecDeque::new()),
            next_report_tid: AtomicU32::new(1),
            subscriptions,
            partitions: ArcSwapOption::empty(),
            mcast,
            mcast_groups,
            mcast_version: AtomicU64::new(0),
            mcast_listener: Mutex::new(None),
            path_sls: ArcSwapOption::empty(),
        }
    }

    /// The current snapshot.
    pub fn subnet(&self) -> Arc<Subnet> {
        self.subnet.load_full()
    }

    /// Installs a new snapshot (after a sweep, a LID configuration, a generation) and, while
    /// serving, queues the Reports it owes: one per (trap, subscriber) for every end port
    /// that went out of service (trap 65) or in service (trap 64) since the previous
    /// snapshot (see [`registry::reports`]; the first snapshot owes none).
    ///
    /// While serving, the multicast members whose port went out of service leave their
    /// groups (all JoinState bits), as OpenSM drops them with the port; a group left without
    /// full member is deleted and its MLID released (well-known groups stay). The registry is
    /// then saved on the caller's thread (the publisher waits for that save, never a reader).
    ///
    /// A snapshot without [`Subnet::path_sls`] gets the ones set by [`SaService::set_path_sls`]
    /// (the driver that builds the snapshots does not know the routing's SLs).
    pub fn publish(&self, mut subnet: Subnet) {
        if subnet.path_sls.is_none() {
            subnet.path_sls = self.path_sls.load_full();
        }
        let new = Arc::new(subnet);
        let old = self.subnet.swap(Arc::clone(&new));
        if !self.serving() {
            return;
        }
        self.drop_members_out_of_service(&old, &new);
        let notices = registry::reports::gid_change_notices(&old, &new);
        if notices.is_empty() {
            return;
        }
        let mut out = Vec::new();
        {
            let subscriptions = self.subscriptions.load();
            for n in &notices {
                for s in registry::reports::subscribers_for(&subscriptions, n, &new) {
                    let tid = u64::from(self.next_report_tid.fetch_add(1, Ordering::Relaxed));
                    out.push(OutgoingReport {
                        lid: s.lid,
                        qpn: s.qpn,
                        pkey_index: s.pkey_index,
                        mad: Box::new(registry::reports::report_mad(n, tid)),
                    });
                }
            }
        }
        if out.is_empty() {
            return;
        }
        let queued = out.len() as u64;
        let mut q = lock(&self.reports);
        q.extend(out);
        let dropped = q.len().saturating_sub(MAX_QUEUED_REPORTS);
        q.drain(..dropped);
        drop(q);
        let mut c = lock(&self.counters);
        c.reports_queued += queued;
        c.reports_dropped += dropped as u64;
    }

    /// The per-path SLs of the routing whose base tables are (being) installed (DFSSSP's VL
    /// layering, seed 003 §5.2), or `None` for a routing on one data VL: PathRecords report
    /// them from now on (the current snapshot is updated at once, later ones get them in
    /// [`SaService::publish`]).
    pub fn set_path_sls(&self, sls: Option<Arc<crate::subnet::PathSls>>) {
        let same = match (&*self.path_sls.load(), &sls) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        if same {
            // Nothing changes (every commit of a routing on one VL): no snapshot copy.
            return;
        }
        self.path_sls.store(sls.clone());
        self.subnet.rcu(|cur| {
            let mut next = Subnet::clone(cur);
            next.path_sls.clone_from(&sls);
            next
        });
    }

    /// The per-path SLs set by [`SaService::set_path_sls`].
    pub fn path_sls(&self) -> Option<Arc<crate::subnet::PathSls>> {
        self.path_sls.load_full()
    }

    /// Records LFT blocks acknowledged by a switch: `(switch GUID, block, 64 entries)`.
    ///
    /// Copy-on-write: the new snapshot shares the node list and every table but the chunks
    /// written ([`crate::LftTable`]: one 4 KiB chunk copied per touched chunk per call, plus
    /// the list of per-node table pointers), a table grows (with 0xff,
    /// "no route") when a block lies beyond it. One swap per call (a read-copy-update: a
    /// snapshot published meanwhile is not lost, the blocks are applied to it); readers keep
    /// the snapshot they hold. Blocks of a GUID that is not a switch of the snapshot (it left
    /// the fabric since the write) and blocks beyond the unicast LID space are ignored.
    pub fn apply_lft_blocks(&self, blocks: &[(Guid, u32, [u8; 64])]) {
        if blocks.is_empty() {
            return;
        }
        self.subnet.rcu(|cur| {
            let mut next = Subnet::clone(cur);
            apply_blocks(&mut next, blocks);
            next
        });
    }

    /// Removes the members whose port left service between `old` and `new` (see
    /// [`SaService::publish`]).
    fn drop_members_out_of_service(&self, old: &Subnet, new: &Subnet) {
        if old.nodes.is_empty() || new.nodes.is_empty() {
            return;
        }
        let any_member = self.mcast.load().groups.values().any(|g| !g.members.is_empty());
        if !any_member {
            return;
        }
        let after = registry::reports::in_service_end_ports(new);
        let gone: std::collections::BTreeSet<Guid> = registry::reports::in_service_end_ports(old)
            .into_iter()
            .filter(|g| !after.contains(g))
            .collect();
        if gone.is_empty() {
            return;
        }
        self.change_mcast(|st, _| st.remove_ports(&gone));
    }

    /// Applies `f` to the multicast state under the registry lock; when it reports a change,
    /// saves the registry (a failure is counted: the change stays, the next save writes it),
    /// publishes the new state and calls the listener once the lock is released.
    fn change_mcast(&self, f: impl FnOnce(&mut McastState, &mut SaCounters) -> bool) {
        let mut reg = lock(&self.registry);
        let mut counters = SaCounters::default();
        if !f(reg.mcast_mut(), &mut counters) {
            drop(reg);
            self.count_mcast(&counters);
            return;
        }
        if let Err(e) = self.persist(&reg) {
            counters.persist_failures += 1;
            counters.last_persist_error = Some(e);
        }
        self.publish_mcast(&reg);
        drop(reg);
        self.count_mcast(&counters);
        self.notify_mcast();
    }

    fn count_mcast(&self, d: &SaCounters) {
        if d.persist_failures == 0 && d.mcast_groups_not_created == 0 {
            return;
        }
        let mut c = lock(&self.counters);
        c.persist_failures += d.persist_failures;
        c.mcast_groups_not_created += d.mcast_groups_not_created;
        if d.last_persist_error.is_some() {
            c.last_persist_error.clone_from(&d.last_persist_error);
        }
    }

    /// Publishes the multicast state of `reg` (called under the registry lock, so that the
    /// snapshots follow the changes in order) and bumps the version.
    fn publish_mcast(&self, reg: &Registry) {
        self.mcast.store(Arc::new(reg.mcast().clone()));
        self.mcast_groups.store(Arc::new(reg.mcast_groups()));
        self.mcast_version.fetch_add(1, Ordering::AcqRel);
    }

    /// Calls the multicast listener (never under a lock of the service).
    fn notify_mcast(&self) {
        let l = lock(&self.mcast_listener).clone();
        if let Some(l) = l {
            l();
        }
    }

    /// Installs the partitions in force (a reload swaps a new one in; no new [`Subnet`] is
    /// needed): P_Key-aware PathRecords, MultiPathRecords and joins, P_KeyTableRecords. The
    /// IPoIB groups it lists are created (well-known, kept without members; MLIDs from
    /// 0xC000, lowest free first; those beyond the MLID limit are counted in
    /// [`SaCounters::mcast_groups_not_created`]); a well-known group it no longer lists becomes
    /// an ordinary group, deleted at once unless it has a full member; members whose port is
    /// no longer in their group's partition leave it.
    ///
    /// While not serving (a standby, which must not write the registry file a master may
    /// share) only the tables are installed; the groups follow when serving starts.
    pub fn set_partitions(&self, partitions: Arc<Partitions>) {
        self.partitions.store(Some(Arc::clone(&partitions)));
        if self.serving() {
            self.apply_partitions(&partitions);
        }
    }

    /// The group side of [`SaService::set_partitions`].
    fn apply_partitions(&self, partitions: &Partitions) {
        let limit = mcast::mlid_limit(&self.subnet.load());
        self.change_mcast(|st, c| {
            let (changed, failed) = st.apply_partitions(partitions, limit);
            c.mcast_groups_not_created += failed.len() as u64;
            changed
        });
    }

    /// The partitions in force (`None` until [`SaService::set_partitions`]).
    pub fn partitions(&self) -> Option<Arc<Partitions>> {
        self.partitions.load_full()
    }

    /// The multicast groups, in MLID order (a new `Arc` after every change).
    pub fn mcast_groups(&self) -> Arc<Vec<McGroup>> {
        self.mcast_groups.load_full()
    }

    /// Bumped by every change of the multicast groups (joins, leaves, partitions, ports out).
    pub fn mcast_version(&self) -> u64 {
        self.mcast_version.load(Ordering::Acquire)
    }

    /// Installs the function called after every change of the multicast groups (outside any
    /// lock of the service; it must not block: the daemon schedules a generation).
    pub fn set_mcast_listener(&self, listener: Box<dyn Fn() + Send + Sync>) {
        *lock(&self.mcast_listener) = Some(Arc::from(listener));
    }

    /// Whether this manager answers (master) or not (standby, not yet configured). When it
    /// starts serving, the partitions set meanwhile are applied to the groups
    /// ([`SaService::set_partitions`]).
    pub fn set_serving(&self, on: bool) {
        let was = self.serving.swap(on, Ordering::AcqRel);
        if on && !was {
            if let Some(p) = self.partitions.load_full() {
                self.apply_partitions(&p);
            }
        }
    }
    /// See [`SaService::set_serving`].
    pub fn serving(&self) -> bool {
        self.serving.load(Ordering::Relaxed)
    }

    /// The manager's SM_Key: a request whose SM_Key field carries it (non-zero) is trusted and
    /// gets the keys of the records (ServiceKey). 0, the default, trusts no requester.
    pub fn set_trusted_key(&self, sm_key: u64) {
        self.trusted_key.store(sm_key, Ordering::Relaxed);
    }

    /// Whether a request carrying `sm_key` is trusted (see [`SaService::set_trusted_key`]).
    pub fn trusts(&self, sm_key: u64) -> bool {
        let key = self.trusted_key.load(Ordering::Relaxed);
        key != 0 && sm_key == key
    }

    /// The answer to one SA MAD (`mad`: the received bytes) from `from` at `now`; `None` for
    /// what gets no answer (responses, Reports, runts, and everything while not serving).
    pub fn handle(&self, mad: &[u8], from: &Requester, now: SystemTime) -> Option<SaResponse> {
        if !self.serving() {
            return None;
        }
        let Ok(h) = SaHeader::decode(mad) else {
            lock(&self.counters).malformed += 1;
            return None;
        };
        let resp = match crate::request::unsupported(&h, mad) {
            // Responses, Reports, Traps: no answer.
            None => return None,
            // A bad class version or an unknown method: answered before any lookup.
            Some(e) if e.header.status != wire::status::UNSUPPORTED_METHOD_ATTR => e,
            Some(_) => {
                let req = Request {
                    header: h,
                    data: &mad[SA_HEADER_SIZE.min(mad.len())..],
                    from: *from,
                    now,
                    trusted: self.trusts(h.sm_key),
                };
                let subnet = self.subnet.load();
                let parts = self.partitions.load();
                let pkeys = PkeyTables::new(parts.as_deref());
                if registry::is_registry_attr(h.attr_id) {
                    self.answer_registry(&req, |reg| reg.answer(&subnet, &req))
                } else if h.attr_id == wire::attr::MC_MEMBER_RECORD {
                    self.answer_mcast(&subnet, pkeys, &req)
                } else {
                    crate::query::answer_in(&subnet, pkeys, &req)
                }
            }
        };
        *lock(&self.counters)
            .answers
            .entry((h.attr_id, h.method, resp.header.status))
            .or_default() += 1;
        Some(resp)
    }

    /// Reports queued for subscribers since the last call.
    pub fn take_reports(&self) -> Vec<OutgoingReport> {
        lock(&self.reports).drain(..).collect()
    }

    /// A copy of the counters.
    pub fn counters(&self) -> SaCounters {
        lock(&self.counters).clone()
    }

    /// A copy of the registry.
    pub fn registry(&self) -> Registry {
        lock(&self.registry).clone()
    }

    /// A registry request: answered under the registry lock, the registry saved before the
    /// answer when it changed. A Set or Delete that cannot be saved is undone and answered
    /// ERR_NO_RESOURCES (nothing is acknowledged that would not survive a restart); a Get
    /// that only dropped expired leases is answered anyway (the file keeps records that
    /// the next load drops as expired).
    fn answer_registry(&self, req: &Request<'_>, f: impl FnOnce(&mut Registry) -> (SaResponse, bool)) -> SaResponse {
        let h = &req.header;
        let mut reg = lock(&self.registry);
        // Only what can fail to be saved needs undoing.
        let mutating = matches!(h.method, wire::METHOD_SET | wire::METHOD_DELETE);
        let before = (mutating && self.store.is_some()).then(|| reg.clone());
        let (resp, changed) = f(&mut reg);
        if !changed {
            return resp;
        }
        let saved = self.persist(&reg);
        if saved.is_ok() || before.is_none() {
            self.subscriptions.store(Arc::new(reg.subscriptions().to_vec()));
            if h.attr_id == wire::attr::MC_MEMBER_RECORD {
                self.publish_mcast(&reg);
            }
        }
        let Err(e) = saved else {
            return resp;
        };
        let mut c = lock(&self.counters);
        c.persist_failures += 1;
        c.last_persist_error = Some(e);
        drop(c);
        match before {
            Some(b) => {
                *reg = b;
                let mut r = crate::request::error_response(h, req.data, wire::status::NO_RESOURCES);
                if h.attr_id == wire::attr::INFORM_INFO {
                    // o13-13.1.1: a refused subscription is echoed with Subscribe = 0.
                    if let Some(subscribe) = r.data.get_mut(23) {
                        *subscribe = 0;
                    }
                }
                r
            }
            None => resp,
        }
    }

    /// An MCMemberRecord request: Get/GetTable from the published state, Set/Delete under the
    /// registry lock (saved before the answer, undone and answered ERR_NO_RESOURCES when the
    /// save fails), the listener called after a change once the lock is released.
    fn answer_mcast(&self, subnet: &Subnet, pkeys: PkeyTables<'_>, req: &Request<'_>) -> SaResponse {
        let cx = mcast::Ctx { subnet, pkeys, req };
        match req.header.method {
            wire::METHOD_GET | wire::METHOD_GET_TABLE => mcast::query(&self.mcast.load(), &cx),
            wire::METHOD_SET | wire::METHOD_DELETE => {
                let before = self.mcast_version();
                let resp = self.answer_registry(req, |reg| mcast::change(reg.mcast_mut(), &cx));
                if self.mcast_version() != before {
                    self.notify_mcast();
                }
                resp
            }
            _ => crate::query::request_error(req, wire::status::UNSUPPORTED_METHOD_ATTR),
        }
    }

    fn persist(&self, r: &Registry) -> Result<(), String> {
        match &self.store {
            Some(s) => s.save(r),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subnet::{from_model, SmData};
    use fabric_routing::{assign_lids, Guid2Lid, Lfts, IB_MAX_UNICAST_LID};
    use fabric_topology::gen::generate_str;

    #[test]
    fn lft_blocks_are_copied_on_write_and_readers_keep_their_snapshot() {
        let f = generate_str("PGFT(2;4,4;1,2;1,1)", None).unwrap();
        let lids = assign_lids(&f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
        let lfts = Lfts::new(f.num_switches(), lids.top());
        let sa = SaService::new(Registry::default(), None);
        sa.publish(from_model(&f, &lids, &lfts, SmData::default(), None));
        let before = sa.subnet();
        let (a, b) = (f.switches()[0].guid, f.switches()[1].guid);
        let len = before.lft(0).unwrap().len();
        assert_eq!(len, 64);
        sa.apply_lft_blocks(&[
            (a, 0, [3; 64]),
            (a, 2, [4; 64]),                          // beyond the table: it grows
            (0xdead, 0, [9; 64]),                     // not a switch of the snapshot: ignored
            (f.end_ports()[0].node_guid, 0, [9; 64]), // a CA: ignored
            (b, 768, [9; 64]),                        // beyond the unicast LID space: ignored
        ]);
        let after = sa.subnet();
        // The reader's snapshot is untouched.
        assert!(before.lft(0).unwrap().iter().all(|e| e == 0xff));
        let ta = after.lft(0).unwrap().to_vec();
        assert_eq!(ta.len(), 3 * 64);
        assert!(ta[..64].iter().all(|&e| e == 3));
        assert!(ta[64..128].iter().all(|&e| e == 0xff));
        assert!(ta[128..].iter().all(|&e| e == 4));
        // Untouched tables are shared, not copied.
        for i in 1..after.nodes.len() as u32 {
            match (before.lft(i), after.lft(i)) {
                (Some(x), Some(y)) => assert!(std::ptr::eq(x, y), "node {i}"),
                (x, y) => assert_eq!(x, y),
            }
        }
        // The node list, the port list and the indexes are shared too: a group of acknowledged
        // blocks copies no list (issue #17: the whole snapshot, then the node list and every
        // touched table, were copied per group).
        assert!(Arc::ptr_eq(&before.nodes, &after.nodes), "node list copied");
        assert!(Arc::ptr_eq(&before.ports, &after.ports), "port list copied");
        assert!(Arc::ptr_eq(&before.lid_port, &after.lid_port), "LID index copied");
        assert_eq!(
            after.port_index_by_guid(f.end_ports()[0].port_guid),
            before.port_index_by_guid(f.end_ports()[0].port_guid)
        );
        // Nothing to apply: the same snapshot stays.
        sa.apply_lft_blocks(&[]);
        assert!(Arc::ptr_eq(&after, &sa.subnet()));
    }

    /// 24-bit addresses (oob driver): the snapshot's tables reach beyond 0xBFFF and every
    /// acknowledged block within them is applied (without it the SA kept the old entries above
    /// 0xBFFF and each snapshot build copied those rows again); beyond the table the unicast
    /// limit still holds.
    #[test]
    fn blocks_beyond_the_unicast_space_within_the_table_are_applied() {
        let f = generate_str("PGFT(2;4,4;1,2;1,1)", None).unwrap();
        let lids = assign_lids(&f, &Guid2Lid::default(), 1, IB_MAX_UNICAST_LID).unwrap();
        // Tables of 800 blocks (LIDs up to 51 199), as a fabric with 24-bit addresses has.
        let lfts = Lfts::new(f.num_switches(), 800 * 64 - 1);
        let sa = SaService::new(Registry::default(), None);
        sa.publish(from_model(&f, &lids, &lfts, SmData::default(), None));
        let a = f.switches()[0].guid;
        let len = sa.subnet().lft(0).unwrap().len();
        assert_eq!(len, 800 * 64);
        let before = sa.subnet();
        sa.apply_lft_blocks(&[(a, 790, [5; 64]), (a, 800, [6; 64])]);
        // One chunk of the table copied (the one holding block 790), the others shared.
        let chunks = (800 * 64usize).div_ceil(crate::lft_table::LFT_CHUNK);
        assert_eq!(
            sa.subnet().lft(0).unwrap().shared_chunks(before.lft(0).unwrap()),
            chunks - 1
        );
        let t = sa.subnet().lft(0).unwrap().to_vec();
        assert_eq!(t.len(), 800 * 64, "no growth beyond the unicast space");
        assert!(t[790 * 64..791 * 64].iter().all(|&e| e == 5), "block 790 applied");
        assert!(t[791 * 64..].iter().all(|&e| e == 0xff));
    }
}
