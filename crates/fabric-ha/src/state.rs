//! The leader's shared state in etcd: `<prefix>/state/<name>`, every write one transaction
//! guarded by the leader key's create revision (== our epoch) and the key's mod revision
//! (== the one last seen by this node).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use etcd_client::{Client, Compare, CompareOp, GetOptions, Txn, TxnOp, TxnOpResponse};

use crate::client::{classify, epoch_of};
use crate::shared::Shared;
use crate::{HaError, LeaderInfo};

/// Writes with an unknown outcome remembered per key (while etcd keeps failing, a leader that
/// keeps writing does not keep every value).
const UNCERTAIN_KEPT: usize = 8;

struct Inner {
    shared: Arc<Shared>,
    epoch: u64,
    prefix: String,
    /// Mod revision of every key as last read or written by this node (0: absent).
    revisions: Mutex<HashMap<String, i64>>,
    /// Writes whose outcome is unknown since the key's last certain outcome (the request failed
    /// or timed out: etcd may have applied it, even after a later read of the key): the values
    /// written (`None`: a delete). When the guarded transaction of a later write finds the key
    /// moved and holding exactly one of them, that was our own write applied with its answer
    /// lost: its revision is adopted and the transaction retried, instead of reporting a
    /// concurrent writer.
    uncertain: Mutex<HashMap<String, Vec<Option<Vec<u8>>>>>,
}

/// The leader's state in etcd (see the module documentation). Writes are refused by etcd
/// itself — not by a local check — once this node is not the leader of its epoch any more.
#[derive(Clone)]
pub struct SharedState {
    inner: Arc<Inner>,
}

impl SharedState {
    pub(crate) fn new(shared: Arc<Shared>, epoch: u64) -> SharedState {
        SharedState {
            inner: Arc::new(Inner {
                prefix: shared.cfg.state_prefix(),
                shared,
                epoch,
                revisions: Mutex::new(HashMap::new()),
                uncertain: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The epoch that guards the writes.
    pub fn epoch(&self) -> u64 {
        self.inner.epoch
    }

    /// Every state key (`name` → bytes); remembers their mod revisions for the next writes.
    pub async fn load(&self) -> Result<BTreeMap<String, Vec<u8>>, HaError> {
        let sh = &self.inner.shared;
        let mut kv = sh.client.kv_client();
        let got = sh
            .call(
                &format!("get of {}*", self.inner.prefix),
                kv.get(self.inner.prefix.clone(), Some(GetOptions::new().with_prefix())),
            )
            .await?;
        let mut out = BTreeMap::new();
        let mut revs = HashMap::new();
        for k in got.kvs() {
            let Some(name) = k.key().strip_prefix(self.inner.prefix.as_bytes()) else {
                continue;
            };
            let name = String::from_utf8_lossy(name).into_owned();
            revs.insert(name.clone(), k.mod_revision());
            out.insert(name, k.value().to_vec());
        }
        *self.revisions() = revs;
        Ok(out)
    }

    /// Writes `name` (one guarded transaction; see the module documentation).
    pub async fn put(&self, name: &str, bytes: &[u8]) -> Result<(), HaError> {
        let client = self.inner.shared.client.clone();
        let deadline = Instant::now() + self.inner.shared.cfg.request_timeout;
        self.inner.write(client, name, Some(bytes.to_vec()), deadline).await
    }

    /// Deletes `name` (one guarded transaction; deleting an absent key is no error).
    pub async fn delete(&self, name: &str) -> Result<(), HaError> {
        let client = self.inner.shared.client.clone();
        let deadline = Instant::now() + self.inner.shared.cfg.request_timeout;
        self.inner.write(client, name, None, deadline).await
    }

    /// [`put`](Self::put) from any thread, a tokio worker included (runs on the
    /// coordinator's own thread and runtime), bounded by `request_timeout`.
    pub fn put_blocking(&self, name: &str, bytes: &[u8]) -> Result<(), HaError> {
        self.blocking(name, Some(bytes.to_vec()))
    }

    /// [`delete`](Self::delete) from any thread (see [`put_blocking`](Self::put_blocking)).
    pub fn delete_blocking(&self, name: &str) -> Result<(), HaError> {
        self.blocking(name, None)
    }

    fn blocking(&self, name: &str, bytes: Option<Vec<u8>>) -> Result<(), HaError> {
        let inner = Arc::clone(&self.inner);
        let name = name.to_string();
        let bound = inner.shared.cfg.request_timeout;
        let worker = &self.inner.shared.blocking;
        worker.run(bound, move |client, deadline| async move {
            inner.write(client, &name, bytes, deadline).await
        })
    }

    fn revisions(&self) -> std::sync::MutexGuard<'_, HashMap<String, i64>> {
        self.inner.revisions()
    }
}

impl Inner {
    fn revisions(&self) -> std::sync::MutexGuard<'_, HashMap<String, i64>> {
        self.revisions.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn uncertain(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Option<Vec<u8>>>>> {
        self.uncertain.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Remembers a write of `name` whose outcome is unknown (the last [`UNCERTAIN_KEPT`]: an
    /// older one applied later still is reported as a conflict, the safe side).
    fn remember_uncertain(&self, name: &str, bytes: Option<Vec<u8>>) {
        let mut u = self.uncertain();
        let sent = u.entry(name.to_string()).or_default();
        if sent.len() >= UNCERTAIN_KEPT {
            sent.remove(0);
        }
        sent.push(bytes);
    }

    /// Whether `current` (the key now; `None`: absent) is what one of the writes of `name`
    /// with an unknown outcome wrote.
    fn is_ours(&self, name: &str, current: Option<&etcd_client::KeyValue>) -> bool {
        self.uncertain().get(name).is_some_and(|sent| {
            sent.iter().any(|w| match (w, current) {
                (Some(b), Some(k)) => k.value() == b.as_slice(),
                (None, None) => true,
                _ => false,
            })
        })
    }

    async fn write(
        &self,
        mut client: Client,
        name: &str,
        bytes: Option<Vec<u8>>,
        deadline: Instant,
    ) -> Result<(), HaError> {
        let sh = &self.shared;
        if name.is_empty() || name.contains('/') || name.contains('\0') {
            return Err(HaError::Config {
                field: "state key",
                reason: format!("{name:?}: a state key is a non-empty file name"),
            });
        }
        let key = format!("{}{name}", self.prefix);
        let epoch = i64::try_from(self.epoch).unwrap_or(i64::MAX);
        let put = bytes.is_some();
        let what = format!("txn on {key}");
        // At most one retry: after adopting the revision of our own write found applied.
        let mut adopted = false;
        loop {
            let expected = self.revisions().get(name).copied().unwrap_or(0);
            let op = match &bytes {
                Some(b) => TxnOp::put(key.clone(), b.clone(), None),
                None => TxnOp::delete(key.clone(), None),
            };
            let txn = Txn::new()
                .when([
                    Compare::create_revision(sh.leader_key.clone(), CompareOp::Equal, epoch),
                    Compare::mod_revision(key.clone(), CompareOp::Equal, expected),
                ])
                .and_then([op])
                .or_else([TxnOp::get(sh.leader_key.clone(), None), TxnOp::get(key.clone(), None)]);
            let resp = match tokio::time::timeout_at(deadline.into(), client.txn(txn)).await {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => {
                    self.remember_uncertain(name, bytes);
                    return Err(classify(&sh.endpoints, &what, &e));
                }
                Err(_) => {
                    self.remember_uncertain(name, bytes);
                    return Err(sh.timeout_error(&what));
                }
            };
            if resp.succeeded() {
                let revision = resp.header().map_or(0, etcd_client::ResponseHeader::revision);
                self.revisions()
                    .insert(name.to_string(), if put { revision } else { 0 });
                self.uncertain().remove(name);
                return Ok(());
            }
            let gets: Vec<_> = resp
                .op_responses()
                .into_iter()
                .filter_map(|r| match r {
                    TxnOpResponse::Get(g) => Some(g),
                    _ => None,
                })
                .collect();
            let leader = gets.first().and_then(|g| g.kvs().first().cloned());
            let state = gets.get(1).and_then(|g| g.kvs().first().cloned());
            match leader {
                Some(l) if l.create_revision() == epoch => {
                    let revision = state.as_ref().map_or(0, etcd_client::KeyValue::mod_revision);
                    if !adopted && self.is_ours(name, state.as_ref()) {
                        // Our own earlier write, applied with its answer lost (possibly after
                        // this node read the key): adopt its revision and write again.
                        self.revisions().insert(name.to_string(), revision);
                        self.uncertain().remove(name);
                        adopted = true;
                        continue;
                    }
                    // The key moved to a value that is not ours: none of our earlier writes
                    // (guarded by older revisions) can apply any more.
                    self.uncertain().remove(name);
                    return Err(HaError::Conflict {
                        key,
                        revision,
                        expected,
                    });
                }
                other => {
                    return Err(HaError::NotLeader {
                        key,
                        epoch: self.epoch,
                        current: other.map_or_else(
                            || "no leader now".to_string(),
                            |l| {
                                let i = LeaderInfo::from_kv(l.value(), epoch_of(l.create_revision()));
                                format!("leader now {} with epoch {}", i.node_name, i.epoch)
                            },
                        ),
                    });
                }
            }
        }
    }
}
