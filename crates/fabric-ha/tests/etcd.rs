//! fabric-ha against the real etcd (Debian `etcd-server`) started by `fabric-etcd-harness`.
//!
//! One member where the test is about the election or the state logic (quorum plays no
//! part: a single member is its own quorum); three where quorum matters.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric_etcd_harness::EtcdCluster;
use fabric_ha::{Coordinator, Fence, FenceState, HaConfig, HaError, HaStatus, LossReason, Role};

fn cfg(endpoints: Vec<String>, prefix: &str, node: &str, ttl_s: u64) -> HaConfig {
    HaConfig {
        endpoints,
        key_prefix: format!("/fabricd-test/{prefix}"),
        lease_ttl: Duration::from_secs(ttl_s),
        node_name: node.into(),
        advertise: format!("{node}.example:7070"),
        tls: None,
        request_timeout: Duration::from_millis(1500).min(Duration::from_secs(ttl_s) / 2),
    }
}

async fn connect(c: HaConfig) -> (Coordinator, Arc<Fence>) {
    let fence = Arc::new(Fence::standby());
    let co = Coordinator::connect(c, Arc::clone(&fence))
        .await
        .expect("connect to the test etcd");
    (co, fence)
}

/// Polls `f` every 20 ms until it answers `Some`, at most `bound` (panics naming `what`).
async fn wait_for<T>(what: &str, bound: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + bound;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "not within {bound:?}: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn status(c: &Coordinator) -> HaStatus {
    c.status().borrow().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_coordinators_one_leads_then_resign_hands_over_within_1s() {
    // One member: the election logic, not quorum, is under test.
    let etcd = EtcdCluster::start(1);
    let (c1, f1) = connect(cfg(etcd.endpoints(), "resign", "n1", 3)).await;
    let (c2, f2) = connect(cfg(etcd.endpoints(), "resign", "n2", 3)).await;
    let l1 = tokio::time::timeout(Duration::from_secs(5), c1.campaign())
        .await
        .expect("n1 elected in time")
        .expect("n1 campaign");
    let c2b = c2.clone();
    let standby = tokio::spawn(async move { c2b.campaign().await });
    let s2 = wait_for("n2 standby sees n1 leading", Duration::from_secs(5), || {
        let s = status(&c2);
        (s.role == Role::Standby && s.leader.as_ref().is_some_and(|l| l.node_name == "n1")).then_some(s)
    })
    .await;
    assert_eq!(s2.epoch, l1.epoch, "{s2:?}");
    assert!(
        s2.message.contains("n1") && s2.message.contains("standby"),
        "{}",
        s2.message
    );
    let s1 = status(&c1);
    assert_eq!(
        (s1.role, s1.epoch, s1.lease_id),
        (Role::Leader, l1.epoch, l1.lease_id),
        "{s1:?}"
    );
    assert!(!s1.fenced && s1.etcd_reachable && s1.lease_remaining_ms > 0, "{s1:?}");
    assert_eq!(f1.check("write").unwrap(), l1.epoch);
    assert!(f2.check("write").is_err(), "the standby's fence must refuse");
    assert!(!standby.is_finished(), "n2 must not be elected while n1 leads");

    let old_state = l1.shared_state();
    old_state.put("plan", b"from n1").await.unwrap();
    let epoch1 = l1.epoch;
    let t0 = Instant::now();
    l1.resign().await;
    let l2 = tokio::time::timeout(Duration::from_secs(5), standby)
        .await
        .expect("n2 elected after the resignation")
        .unwrap()
        .unwrap();
    let took = t0.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "takeover after resign took {took:?} (bound 1 s)"
    );
    eprintln!("measured: takeover after resign {took:?}");
    assert!(l2.epoch > epoch1, "epoch {} after {epoch1}", l2.epoch);
    assert_eq!(f2.check("write").unwrap(), l2.epoch);
    assert!(matches!(f1.state(), FenceState::Lost { .. }), "{:?}", f1.state());
    assert_eq!(status(&c1).role, Role::Standby);
    assert!(status(&c2).leader_changes >= 2, "{:?}", status(&c2));

    // The deposed leader's write is refused by etcd (the Txn guard), naming the new leader.
    let e = old_state.put("plan", b"stale").await.unwrap_err();
    assert!(matches!(e, HaError::NotLeader { .. }), "{e}");
    assert!(
        e.to_string().contains("n2") && e.to_string().contains("not the leader"),
        "{e}"
    );
    let state = l2.shared_state();
    assert_eq!(state.load().await.unwrap()["plan"], b"from n1");
    l2.resign().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_leader_loses_its_lease_standby_takes_over_within_ttl_plus_1s() {
    // One member: lease expiry at the server, not quorum. The old leader runs on its own
    // current-thread runtime, which the test freezes (its only thread blocked on a channel):
    // no keep-alive, no task runs, as under SIGSTOP.
    const TTL: u64 = 2;
    let etcd = EtcdCluster::start(1);
    let (thaw, frozen) = std::sync::mpsc::channel::<()>();
    let f1 = Arc::new(Fence::standby());
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let (elected_tx, elected_rx) = std::sync::mpsc::channel::<u64>();
    let c1cfg = cfg(etcd.endpoints(), "frozen", "n1", TTL);
    let f1b = Arc::clone(&f1);
    let old = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let c1 = Coordinator::connect(c1cfg, Arc::clone(&f1b)).await.unwrap();
            let mut l1 = c1.campaign().await.unwrap();
            let state = l1.shared_state();
            state.put("gen", b"1").await.unwrap();
            elected_tx.send(l1.epoch).unwrap();
            frozen.recv().unwrap(); // frozen here: the runtime's only thread blocks
            let t = Instant::now();
            let reason = tokio::time::timeout(Duration::from_secs(2 * TTL), l1.lost()).await;
            let lost_after = t.elapsed();
            let put = state.put("gen", b"stale").await;
            tx.send(format!("{reason:?} | {lost_after:?} | {put:?} | {:?}", f1b.check("w")))
                .unwrap();
            let s = c1.status().borrow().clone();
            tx.send(format!("{:?} | {}", s.role, s.message)).unwrap();
        });
    });
    let epoch1 = elected_rx.recv_timeout(Duration::from_secs(10)).expect("n1 elected");
    let frozen_at = Instant::now();
    let (c2, f2) = connect(cfg(etcd.endpoints(), "frozen", "n2", TTL)).await;
    let c2b = c2.clone();
    let standby = tokio::spawn(async move { c2b.campaign().await });
    // The frozen leader's own fence closes by its deadline (monotonic time), epoch kept.
    wait_for(
        "the frozen leader's fence expires",
        Duration::from_secs(TTL + 1),
        || matches!(f1.state(), FenceState::Expired { epoch } if epoch == epoch1).then_some(()),
    )
    .await;
    let l2 = tokio::time::timeout(Duration::from_secs(TTL + 3), standby)
        .await
        .expect("n2 elected after n1's lease expired")
        .unwrap()
        .unwrap();
    let took = frozen_at.elapsed();
    assert!(
        took <= Duration::from_secs(TTL + 1),
        "takeover {took:?} after the leader froze (bound TTL {TTL} s + 1 s)"
    );
    eprintln!("measured: takeover {took:?} after the leader froze (TTL {TTL} s)");
    assert!(l2.epoch > epoch1);
    assert_eq!(f2.check("w").unwrap(), l2.epoch);
    assert_eq!(l2.shared_state().load().await.unwrap()["gen"], b"1");

    thaw.send(()).unwrap(); // SIGCONT
    let after = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the old leader reports");
    let role = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    old.join().unwrap();
    assert!(after.starts_with("Ok("), "lost() did not resolve: {after}");
    assert!(
        after.contains("LeaseExpired") || after.contains("KeyTaken") || after.contains("KeyDeleted"),
        "{after}"
    );
    assert!(
        after.contains("NotLeader"),
        "the old leader's put must be refused: {after}"
    );
    assert!(
        after.contains("Err(Fenced"),
        "the old leader's fence must refuse: {after}"
    );
    assert!(
        role.starts_with("SteppingDown") && role.contains("stepping down"),
        "{role}"
    );
    assert!(matches!(f1.state(), FenceState::Lost { .. }));
    l2.resign().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_state_round_trip_and_concurrent_change() {
    // One member: the transactions' guards, not quorum.
    let etcd = EtcdCluster::start(1);
    let c = cfg(etcd.endpoints(), "state", "n1", 3);
    let (c1, _f1) = connect(c.clone()).await;
    let l1 = c1.campaign().await.unwrap();
    let st = l1.shared_state();
    assert!(st.load().await.unwrap().is_empty());
    st.put("lids", b"plan v1").await.unwrap();
    st.put("jobs", b"[]").await.unwrap();
    st.put("lids", b"plan v2").await.unwrap();
    let all = st.load().await.unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(all["lids"], b"plan v2");
    st.delete("jobs").await.unwrap();
    st.delete("jobs").await.unwrap(); // absent: no error
    assert_eq!(st.load().await.unwrap().keys().collect::<Vec<_>>(), ["lids"]);

    // Someone else changes a key behind our back: the next put is refused, naming the revision.
    let mut raw = etcd_client::Client::connect(etcd.endpoints(), None).await.unwrap();
    let r = raw
        .put(format!("{}lids", c.state_prefix()), "intruder", None)
        .await
        .unwrap();
    let rev = r.header().unwrap().revision();
    let e = st.put("lids", b"plan v3").await.unwrap_err();
    match &e {
        HaError::Conflict { revision, .. } => assert_eq!(*revision, rev, "{e}"),
        other => panic!("expected a conflict, got {other}"),
    }
    assert!(
        e.to_string()
            .contains(&format!("changed by someone else at revision {rev}")),
        "{e}"
    );
    // A key created by someone else while we believed it absent: refused as well.
    raw.put(format!("{}faults", c.state_prefix()), "x", None).await.unwrap();
    assert!(matches!(st.put("faults", b"y").await, Err(HaError::Conflict { .. })));
    // After a load, writes go through again.
    assert_eq!(st.load().await.unwrap()["lids"], b"intruder");
    st.put("lids", b"plan v3").await.unwrap();
    st.put("faults", b"y").await.unwrap();
    let e = st.put("a/b", b"x").await.unwrap_err().to_string();
    assert!(e.contains("file name"), "{e}");
    l1.resign().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_answer_was_lost_is_recognised_by_its_value() {
    // One member, frozen while a put is in flight: the put fails (timeout), its outcome unknown.
    let mut etcd = EtcdCluster::start(1);
    let c = cfg(etcd.endpoints(), "uncertain", "n1", 6);
    let (c1, _f1) = connect(c.clone()).await;
    let l1 = c1.campaign().await.unwrap();
    let st = l1.shared_state();
    st.put("lids", b"plan v1").await.unwrap();
    let key = format!("{}lids", c.state_prefix());

    // The put times out; then the key holds exactly its value, as if etcd had applied it and
    // the answer was lost: the next put adopts that revision instead of reporting a conflict.
    etcd.freeze(0);
    assert!(
        st.put("lids", b"plan v2").await.is_err(),
        "a put to a frozen etcd must fail"
    );
    etcd.thaw(0);
    let mut raw = etcd_client::Client::connect(etcd.endpoints(), None).await.unwrap();
    raw.put(key.clone(), "plan v2", None).await.unwrap();
    st.put("lids", b"plan v3")
        .await
        .expect("our own applied write is no conflict");

    // Same failure, but the key then holds another value: a real concurrent change, refused.
    etcd.freeze(0);
    assert!(st.put("lids", b"plan v4").await.is_err());
    etcd.thaw(0);
    raw.put(key.clone(), "intruder", None).await.unwrap();
    assert!(
        matches!(st.put("lids", b"plan v5").await, Err(HaError::Conflict { .. })),
        "a value that is not ours must stay a conflict"
    );

    // Same failure, and the write was not applied at all: the next put goes through.
    assert_eq!(st.load().await.unwrap()["lids"], b"intruder");
    etcd.freeze(0);
    assert!(st.put("lids", b"plan v6").await.is_err());
    etcd.thaw(0);
    st.put("lids", b"plan v7")
        .await
        .expect("an unapplied write leaves the revision as it was (or, applied late, is ours)");
    assert_eq!(st.load().await.unwrap()["lids"], b"plan v7");

    // Two writes with an unknown outcome, and the older one is what etcd applied (the newer
    // one, guarded by the older revision, then could not apply): still our own write.
    etcd.freeze(0);
    assert!(st.put("lids", b"plan v8").await.is_err());
    assert!(st.put("lids", b"plan v9").await.is_err());
    etcd.thaw(0);
    st.load().await.unwrap();
    raw.put(key.clone(), "plan v8", None).await.unwrap();
    st.put("lids", b"plan v10")
        .await
        .expect("any of our writes with a lost answer is no conflict");
    assert_eq!(st.load().await.unwrap()["lids"], b"plan v10");
    l1.resign().await;
}

#[tokio::test(flavor = "current_thread")]
async fn blocking_calls_from_inside_a_runtime() {
    // One member. A current-thread runtime: put_blocking called on its only thread must not
    // need that thread (it runs on the coordinator's own thread and client).
    let etcd = EtcdCluster::start(1);
    let (c1, _f1) = connect(cfg(etcd.endpoints(), "blocking", "n1", 3)).await;
    let l1 = c1.campaign().await.unwrap();
    let st = l1.shared_state();
    st.put_blocking("progress", b"phase 1").unwrap();
    st.put_blocking("progress", b"phase 2").unwrap();
    let st2 = st.clone();
    std::thread::spawn(move || st2.put_blocking("gen", b"7").unwrap())
        .join()
        .unwrap();
    // From a worker of a multi-thread runtime, too.
    let mt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    let st3 = st.clone();
    let r = std::thread::spawn(move || {
        mt.block_on(async move { tokio::spawn(async move { st3.delete_blocking("gen") }).await })
    })
    .join()
    .unwrap();
    r.unwrap().unwrap();
    let all = st.load().await.unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all["progress"], b"phase 2");
    // Mixed with the async path: revisions are shared.
    st.put("progress", b"phase 3").await.unwrap();
    st.put_blocking("progress", b"phase 4").unwrap();
    assert_eq!(st.load().await.unwrap()["progress"], b"phase 4");
    // Dropping the leadership gives the lease back: another node is elected at once (the
    // TTL is 3 s).
    drop(l1);
    assert_eq!(status(&c1).role, Role::Standby);
    let (c2, _f2) = connect(cfg(etcd.endpoints(), "blocking", "n2", 3)).await;
    let l2 = tokio::time::timeout(Duration::from_secs(1), c2.campaign())
        .await
        .expect("n2 elected within 1 s of the drop")
        .unwrap();
    l2.resign().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_loss_closes_the_fence_and_its_return_reopens_it_with_the_same_epoch() {
    // Three members: quorum is what is under test.
    const TTL: u64 = 3;
    let mut etcd = EtcdCluster::start(3);
    let (c1, f1) = connect(cfg(etcd.endpoints(), "quorum", "n1", TTL)).await;
    let (c2, f2) = connect(cfg(etcd.endpoints(), "quorum", "n2", TTL)).await;
    let mut l1 = c1.campaign().await.unwrap();
    let epoch = l1.epoch;
    let c2b = c2.clone();
    let standby = tokio::spawn(async move { c2b.campaign().await });
    wait_for("n2 sees n1", Duration::from_secs(5), || {
        (status(&c2).leader.is_some_and(|l| l.epoch == epoch)).then_some(())
    })
    .await;

    // One member of three lost: nothing changes (observed over two TTLs).
    etcd.kill(2);
    let end = Instant::now() + Duration::from_secs(2 * TTL);
    while Instant::now() < end {
        assert!(
            matches!(f1.state(), FenceState::Leading { epoch: e, .. } if e == epoch),
            "fence after losing 1 of 3: {:?}; {:?}",
            f1.state(),
            status(&c1)
        );
        assert!(l1.lost_reason().is_none() && !standby.is_finished());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let s = status(&c1);
    assert!(s.role == Role::Leader && !s.fenced, "{s:?}");

    // Quorum lost: the leader's fence closes within the TTL, no step-down. (etcd notices the
    // loss late: its raft leader keeps answering keep-alives until check-quorum makes it step
    // down, up to two election timeouts = 1 s; the bound is measured from the kill.)
    let t0 = Instant::now();
    etcd.kill(1);
    wait_for(
        "the fence expires after quorum loss",
        Duration::from_secs(3 * TTL),
        || matches!(f1.state(), FenceState::Expired { epoch: e } if e == epoch).then_some(()),
    )
    .await;
    let closed_after = t0.elapsed();
    let bound = Duration::from_secs(TTL) + Duration::from_millis(1100);
    assert!(
        closed_after <= bound,
        "fence closed {closed_after:?} after quorum loss (bound: TTL {TTL} s + etcd's 1 s)"
    );
    let s = wait_for("the status says fenced", Duration::from_secs(1), || {
        let s = status(&c1);
        s.fenced.then_some(s)
    })
    .await;
    assert_eq!(s.role, Role::Leader, "{s:?}");
    assert!(!s.etcd_reachable, "{s:?}");
    assert!(
        s.message.starts_with("leader, fenced: lease not renewed for"),
        "{}",
        s.message
    );
    assert!(f1.check("write LFT blocks").is_err());
    // The standby cannot reach a quorum either: it stays standby and says so.
    let s2 = wait_for("the standby says etcd is unreachable", Duration::from_secs(5), || {
        let s = status(&c2);
        (!s.etcd_reachable).then_some(s)
    })
    .await;
    assert!(
        s2.role == Role::Standby && s2.message.contains("etcd unreachable"),
        "{s2:?}"
    );
    // Still no step-down a TTL later (without quorum the lease cannot expire at the server).
    tokio::time::sleep(Duration::from_secs(TTL)).await;
    assert!(l1.lost_reason().is_none(), "{:?}", l1.lost_reason());
    assert_eq!(status(&c1).role, Role::Leader);
    assert!(f2.check("w").is_err() && !standby.is_finished());

    // Quorum back: the fence reopens with the same epoch.
    let t1 = Instant::now();
    etcd.restart(1);
    etcd.restart(2);
    wait_for(
        "the fence reopens after quorum returns",
        Duration::from_secs(20),
        || matches!(f1.state(), FenceState::Leading { epoch: e, .. } if e == epoch).then_some(()),
    )
    .await;
    let reopened_after = t1.elapsed();
    let s = wait_for("the status says leader, reachable", Duration::from_secs(2), || {
        let s = status(&c1);
        (s.etcd_reachable && !s.fenced).then_some(s)
    })
    .await;
    assert_eq!((s.role, s.epoch), (Role::Leader, epoch), "{s:?}");
    assert!(!standby.is_finished(), "n2 must not be elected");
    wait_for("the standby sees n1 again", Duration::from_secs(10), || {
        let s = status(&c2);
        (s.etcd_reachable && s.leader.is_some_and(|l| l.epoch == epoch)).then_some(())
    })
    .await;
    eprintln!("quorum loss: fence closed after {closed_after:?} (TTL {TTL} s); reopened {reopened_after:?} after the restarts");
    let l = tokio::select! {
        r = l1.lost() => panic!("leadership lost: {r}"),
        () = tokio::time::sleep(Duration::from_millis(10)) => l1,
    };
    assert!(l.lost_reason().is_none());
    l.resign().await;
    let l2 = tokio::time::timeout(Duration::from_secs(5), standby)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(l2.epoch > epoch);
    l2.resign().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_key_deleted_or_superseded_ends_leadership_and_the_failpoint_keeps_only_superseded() {
    // One member: the reactions to the leader key and to the fence, not quorum.
    let etcd = EtcdCluster::start(1);
    let c = cfg(etcd.endpoints(), "lost", "n1", 3);
    let mut raw = etcd_client::Client::connect(etcd.endpoints(), None).await.unwrap();
    let (c1, f1) = connect(c.clone()).await;
    let mut l1 = c1.campaign().await.unwrap();
    // Someone deletes the leader key: leadership ends at once.
    raw.delete(c.leader_key(), None).await.unwrap();
    let r = tokio::time::timeout(Duration::from_secs(2), l1.lost())
        .await
        .expect("lost() resolves");
    assert_eq!(r, LossReason::KeyDeleted);
    assert!(matches!(f1.state(), FenceState::Lost { .. }) && f1.check("w").is_err());
    assert_eq!(status(&c1).role, Role::SteppingDown);
    drop(l1);

    // Elected again (a new epoch); an agent reports a newer epoch: leadership ends, the lease
    // is given back so that the standby takes over at once.
    let mut l1 = c1.campaign().await.unwrap();
    assert_eq!(f1.check("w").unwrap(), l1.epoch);
    let (c2, f2) = connect(cfg(etcd.endpoints(), "lost", "n2", 3)).await;
    let c2b = c2.clone();
    let standby = tokio::spawn(async move { c2b.campaign().await });
    f1.superseded(l1.epoch + 100);
    let r = tokio::time::timeout(Duration::from_secs(2), l1.lost())
        .await
        .expect("lost() resolves");
    assert_eq!(r, LossReason::Superseded { by: l1.epoch + 100 });
    assert!(r.to_string().contains("newer manager epoch"), "{r}");
    let mut l2 = tokio::time::timeout(Duration::from_secs(2), standby)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(f2.check("w").unwrap(), l2.epoch);
    drop(l1);

    // Test failpoint: without self-fencing, the key deleted does not end leadership (the
    // fence stays open); only an agent's refusal does.
    f2.set_self_fencing(false);
    raw.delete(c.leader_key(), None).await.unwrap();
    let l1 = tokio::time::timeout(Duration::from_secs(2), c1.campaign())
        .await
        .unwrap()
        .unwrap();
    assert!(l1.epoch > l2.epoch);
    tokio::select! {
        r = l2.lost() => panic!("leadership ended under the failpoint: {r}"),
        () = tokio::time::sleep(Duration::from_secs(1)) => {}
    }
    assert_eq!(f2.check("w").unwrap(), l2.epoch, "the failpoint keeps the fence open");
    f2.superseded(l1.epoch);
    let r = tokio::time::timeout(Duration::from_secs(2), l2.lost())
        .await
        .expect("lost() resolves");
    assert_eq!(r, LossReason::Superseded { by: l1.epoch });
    assert!(f2.check("w").is_err());
    l1.resign().await;
}

#[tokio::test]
async fn unreachable_etcd_and_bad_tls_files_are_clear_errors() {
    // No etcd: nothing listens on the port.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let ep = format!("http://127.0.0.1:{port}");
    let mut c = cfg(vec![ep.clone()], "none", "n1", 3);
    c.request_timeout = Duration::from_millis(500);
    let t0 = Instant::now();
    let e = Coordinator::connect(c.clone(), Arc::new(Fence::standby()))
        .await
        .err()
        .unwrap();
    assert!(
        matches!(e, HaError::Unreachable { .. }) && e.to_string().contains(&ep),
        "{e}"
    );
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    let mut t = c.clone();
    t.endpoints = vec![format!("https://127.0.0.1:{port}")];
    t.tls = Some(fabric_ha::HaTls {
        ca: "/nonexistent/ca.pem".into(),
        cert: None,
        key: None,
    });
    let e = Coordinator::connect(t, Arc::new(Fence::standby())).await.err().unwrap();
    assert!(e.to_string().contains("/nonexistent/ca.pem"), "{e}");
    c.lease_ttl = Duration::from_secs(1);
    let e = Coordinator::connect(c, Arc::new(Fence::standby())).await.err().unwrap();
    assert!(e.to_string().contains("lease_ttl"), "{e}");
}
