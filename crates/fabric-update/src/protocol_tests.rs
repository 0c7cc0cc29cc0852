//! Unit tests of the protocol state machine: every transition, stale inputs, policies,
//! restarts and recovery.

use std::time::{Duration, Instant};

use crate::protocol::*;

const S1: SubscriberId = SubscriberId(1);
const S2: SubscriberId = SubscriberId(2);

struct H {
    p: Protocol,
    t0: Instant,
    now: Instant,
}

impl H {
    fn new(config: ProtocolConfig) -> H {
        let t0 = Instant::now();
        H {
            p: Protocol::new(config),
            t0,
            now: t0,
        }
    }
    fn advance(&mut self, ms: u64) {
        self.now += Duration::from_millis(ms);
    }
    fn on(&mut self, i: Input) -> Vec<Action> {
        self.p.on(self.now, i)
    }
    fn at(&self) -> AttemptId {
        self.p.attempt()
    }
    fn join(&mut self, s: SubscriberId) {
        assert!(self.on(Input::SubscriberJoined { subscriber: s }).is_empty());
    }
    /// Begin + Computed + EscapeUploaded; returns the actions of EscapeUploaded.
    fn run_to_unpath(&mut self, generation: u64) -> Vec<Action> {
        let a = self.on(Input::Begin { generation });
        assert_eq!(
            a,
            vec![
                Action::PhaseChanged {
                    at: AttemptId { generation, attempt: 0 },
                    phase: Phase::Prepare
                },
                Action::Compute {
                    at: AttemptId { generation, attempt: 0 }
                }
            ]
        );
        let at = self.at();
        assert_eq!(
            self.on(Input::Computed { at, result: Ok(()) }),
            vec![Action::UploadEscape { at }]
        );
        self.on(Input::EscapeUploaded { at, result: Ok(()) })
    }
}

/// A subscriber's acknowledgement of a phase of a generation.
fn ack(subscriber: SubscriberId, generation: u64, phase: Phase) -> Input {
    Input::Ack {
        subscriber,
        generation,
        phase,
    }
}

fn phases(actions: &[Action]) -> Vec<Phase> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::PhaseChanged { phase, .. } => Some(*phase),
            _ => None,
        })
        .collect()
}

fn token(actions: &[Action]) -> u64 {
    actions
        .iter()
        .find_map(|a| match a {
            Action::ArmDeadline { token, .. } => Some(*token),
            _ => None,
        })
        .expect("a deadline is armed")
}

fn commit_report(actions: &[Action]) -> Report {
    actions
        .iter()
        .find_map(|a| match a {
            Action::Commit { report, .. } => Some(report.clone()),
            _ => None,
        })
        .expect("commit action")
}

#[test]
fn no_subscribers_unpath_and_repath_pass_at_once() {
    let mut h = H::new(ProtocolConfig::default());
    let a = h.run_to_unpath(1);
    let at = h.at();
    assert_eq!(phases(&a), vec![Phase::Unpath, Phase::Update]);
    assert_eq!(a.last(), Some(&Action::UploadBase { at }));
    assert!(!a
        .iter()
        .any(|x| matches!(x, Action::NotifyUnpath { .. } | Action::ArmDeadline { .. })));
    let a = h.on(Input::BaseUploaded { at, result: Ok(()) });
    assert_eq!(phases(&a), vec![Phase::Repath, Phase::Commit]);
    assert!(!a.iter().any(|x| matches!(x, Action::NotifyRepath { .. })));
    let r = commit_report(&a);
    assert_eq!(r.generation, 1);
    assert!(r.missed.is_empty());
    assert_eq!(h.p.phase(), Phase::Commit);
    assert_eq!(
        h.on(Input::Committed { at }),
        vec![Action::PhaseChanged { at, phase: Phase::Idle }]
    );
    assert_eq!(h.p.phase(), Phase::Idle);
    assert_eq!(h.p.progress(), None);
}

#[test]
fn full_run_with_two_subscribers_waits_for_every_ack_and_times_phases() {
    let mut h = H::new(ProtocolConfig::default());
    h.join(S1);
    h.join(S2);
    h.advance(10);
    let a = h.run_to_unpath(7);
    let at = h.at();
    assert_eq!(phases(&a), vec![Phase::Unpath]);
    assert_eq!(
        a[1],
        Action::NotifyUnpath {
            generation: 7,
            subscribers: vec![S1, S2],
            deadline: Duration::from_secs(5)
        }
    );
    assert!(matches!(a[2], Action::ArmDeadline { after, .. } if after == Duration::from_secs(5)));
    h.advance(100);
    assert!(h.on(ack(S1, 7, Phase::Unpath)).is_empty());
    assert_eq!(h.p.waiting_for().collect::<Vec<_>>(), vec![S2]);
    // Duplicate ack: ignored.
    assert!(h.on(ack(S1, 7, Phase::Unpath)).is_empty());
    assert_eq!(h.p.ignored().stale_acks, 1);
    h.advance(50);
    let a = h.on(ack(S2, 7, Phase::Unpath));
    assert_eq!(phases(&a), vec![Phase::Update]);
    assert_eq!(a.last(), Some(&Action::UploadBase { at }));
    h.advance(30);
    let a = h.on(Input::BaseUploaded { at, result: Ok(()) });
    assert_eq!(phases(&a), vec![Phase::Repath]);
    assert!(matches!(&a[1], Action::NotifyRepath { generation: 7, subscribers, .. } if subscribers == &vec![S1, S2]));
    for s in [S2, S1] {
        h.advance(20);
        let a = h.on(ack(s, 7, Phase::Repath));
        if s == S1 {
            let r = commit_report(&a);
            assert_eq!(r.durations.get(&Phase::Unpath), Some(&Duration::from_millis(150)));
            assert_eq!(r.durations.get(&Phase::Update), Some(&Duration::from_millis(30)));
            assert_eq!(r.durations.get(&Phase::Repath), Some(&Duration::from_millis(40)));
            assert_eq!(r.total, Duration::from_millis(220));
            assert!(r.missed.is_empty());
        } else {
            assert!(a.is_empty());
        }
    }
    assert!(h.now > h.t0);
}

#[test]
fn acks_of_wrong_generation_or_phase_are_ignored() {
    let mut h = H::new(ProtocolConfig::default());
    h.join(S1);
    h.run_to_unpath(3);
    for (g, ph) in [(2, Phase::Unpath), (3, Phase::Repath), (4, Phase::Unpath)] {
        assert!(h.on(ack(S1, g, ph)).is_empty());
    }
    assert_eq!(h.p.ignored().stale_acks, 3);
    assert_eq!(h.p.phase(), Phase::Unpath);
    // Unknown subscriber.
    assert!(h.on(ack(SubscriberId(99), 3, Phase::Unpath)).is_empty());
    assert_eq!(h.p.phase(), Phase::Unpath);
}

#[test]
fn missed_unpath_deadline_proceeds_and_is_reported_by_default() {
    let mut h = H::new(ProtocolConfig::default());
    h.join(S1);
    h.join(S2);
    let a = h.run_to_unpath(1);
    let tok = token(&a);
    h.on(ack(S1, 1, Phase::Unpath));
    h.advance(5000);
    let a = h.on(Input::Deadline { token: tok });
    assert_eq!(phases(&a), vec![Phase::Update]);
    // The deadline is used up: firing again is stale.
    assert!(h.on(Input::Deadline { token: tok }).is_empty());
    assert_eq!(h.p.ignored().stale_deadlines, 1);
    let at = h.at();
    let a = h.on(Input::BaseUploaded { at, result: Ok(()) });
    let tok = token(&a);
    h.on(ack(S2, 1, Phase::Repath));
    let a = h.on(Input::Deadline { token: tok });
    let r = commit_report(&a);
    assert_eq!(
        r.missed,
        vec![
            Missed {
                subscriber: S2,
                phase: Phase::Unpath
            },
            Missed {
                subscriber: S1,
                phase: Phase::Repath
            }
        ]
    );
}

#[test]
fn strict_policy_aborts_on_missed_unpath_and_sends_movers_back() {
    let mut h = H::new(ProtocolConfig {
        policy: DeadlinePolicy::Abort,
        ..ProtocolConfig::default()
    });
    h.join(S1);
    h.join(S2);
    let a = h.run_to_unpath(1);
    let at = h.at();
    h.on(ack(S1, 1, Phase::Unpath));
    let a2 = h.on(Input::Deadline { token: token(&a) });
    assert!(matches!(&a2[0], Action::NotifyRepath { subscribers, .. } if subscribers == &vec![S1]));
    match &a2[1] {
        Action::Abort {
            at: a,
            base_touched,
            report,
            reason,
        } => {
            assert_eq!(*a, at);
            assert!(!base_touched, "the previous base routing stays installed");
            assert!(reason.contains("unpath deadline"));
            assert_eq!(
                report.missed,
                vec![Missed {
                    subscriber: S2,
                    phase: Phase::Unpath
                }]
            );
        }
        x => panic!("expected abort, got {x:?}"),
    }
    assert!(!a2.iter().any(|x| matches!(x, Action::UploadBase { .. })));
    assert_eq!(h.p.phase(), Phase::Idle);
    // Late answers of the aborted generation are stale.
    assert!(h.on(Input::BaseUploaded { at, result: Ok(()) }).is_empty());
    // The next generation starts normally.
    assert_eq!(phases(&h.on(Input::Begin { generation: 2 })), vec![Phase::Prepare]);
}

#[test]
fn strict_policy_missed_repath_commits_and_reports() {
    let mut h = H::new(ProtocolConfig {
        policy: DeadlinePolicy::Abort,
        ..ProtocolConfig::default()
    });
    h.join(S1);
    h.run_to_unpath(1);
    let at = h.at();
    h.on(ack(S1, 1, Phase::Unpath));
    let a = h.on(Input::BaseUploaded { at, result: Ok(()) });
    let a = h.on(Input::Deadline { token: token(&a) });
    let r = commit_report(&a);
    assert_eq!(
        r.missed,
        vec![Missed {
            subscriber: S1,
            phase: Phase::Repath
        }]
    );
}

#[test]
fn subscriber_gone_while_awaited_releases_the_wait() {
    let mut h = H::new(ProtocolConfig::default());
    h.join(S1);
    h.join(S2);
    h.run_to_unpath(1);
    h.on(ack(S1, 1, Phase::Unpath));
    let a = h.on(Input::SubscriberGone { subscriber: S2 });
    assert_eq!(phases(&a), vec![Phase::Update]);
    let at = h.at();
    let a = h.on(Input::BaseUploaded { at, result: Ok(()) });
    assert!(matches!(&a[1], Action::NotifyRepath { subscribers, .. } if subscribers == &vec![S1]));
    let a = h.on(ack(S1, 1, Phase::Repath));
    let r = commit_report(&a);
    assert_eq!(r.gone, vec![S2]);
    assert!(r.missed.is_empty());
}

#[test]
fn subscriber_joining_mid_update_is_awaited_from_the_next_notice() {
    let mut h = H::new(ProtocolConfig::default());
    h.join(S1);
    h.run_to_unpath(1);
    h.join(S2);
    let a = h.on(ack(S1, 1, Phase::Unpath));
    assert_eq!(phases(&a), vec![Phase::Update]);
    let at = h.at();
    let a = h.on(Input::BaseUploaded { at, result: Ok(()) });
    assert!(matches!(&a[1], Action::NotifyRepath { subscribers, .. } if subscribers == &vec![S1, S2]));
}

#[test]
fn breaking_fault_restarts_from_prepare_in_every_phase_before_commit() {
    for stop in [Phase::Prepare, Phase::Unpath, Phase::Update, Phase::Repath] {
        let mut h = H::new(ProtocolConfig::default());
        h.join(S1);
        h.on(Input::Begin { generation: 4 });
        let at0 = h.at();
        if stop != Phase::Prepare {
            h.on(Input::Computed {
                at: at0,
                result: Ok(()),
            });
            h.on(Input::EscapeUploaded {
                at: at0,
                result: Ok(()),
            });
        }
        if matches!(stop, Phase::Update | Phase::Repath) {
            h.on(ack(S1, 4, Phase::Unpath));
        }
        if stop == Phase::Repath {
            h.on(Input::BaseUploaded {
                at: at0,
                result: Ok(()),
            });
        }
        assert_eq!(h.p.phase(), stop);
        let a = h.on(Input::Fault {
            breaks_target: true,
            description: "link-down 0x1[3]".into(),
        });
        let at1 = AttemptId {
            generation: 4,
            attempt: 1,
        };
        assert_eq!(
            a,
            vec![
                Action::Restart {
                    from: at0,
                    reason: "fault breaks the routing being installed: link-down 0x1[3]".into()
                },
                Action::PhaseChanged {
                    at: at1,
                    phase: Phase::Prepare
                },
                Action::Compute { at: at1 }
            ],
            "{stop}"
        );
        // Answers of the old attempt are stale now.
        assert!(h
            .on(Input::Computed {
                at: at0,
                result: Ok(())
            })
            .is_empty());
        assert!(h
            .on(Input::BaseUploaded {
                at: at0,
                result: Ok(())
            })
            .is_empty());
        assert_eq!(h.p.phase(), Phase::Prepare);
        // The new attempt completes.
        h.on(Input::Computed {
            at: at1,
            result: Ok(()),
        });
        let a = h.on(Input::EscapeUploaded {
            at: at1,
            result: Ok(()),
        });
        assert!(matches!(&a[1], Action::NotifyUnpath { generation: 4, .. }));
        h.on(ack(S1, 4, Phase::Unpath));
        h.on(Input::BaseUploaded {
            at: at1,
            result: Ok(()),
        });
        let a = h.on(ack(S1, 4, Phase::Repath));
        assert_eq!(commit_report(&a).restarts, 1, "{stop}");
    }
}

#[test]
fn non_breaking_fault_is_queued_and_reported() {
    let mut h = H::new(ProtocolConfig::default());
    h.run_to_unpath(1);
    let at = h.at();
    assert!(h
        .on(Input::Fault {
            breaks_target: false,
            description: "node-down 0x9".into()
        })
        .is_empty());
    let r = commit_report(&h.on(Input::BaseUploaded { at, result: Ok(()) }));
    assert_eq!(r.queued_faults, vec!["node-down 0x9".to_string()]);
    assert_eq!(r.restarts, 0);
    // In Commit even a breaking fault waits for the next generation.
    assert!(h
        .on(Input::Fault {
            breaks_target: true,
            description: "x".into()
        })
        .is_empty());
    assert_eq!(h.p.phase(), Phase::Commit);
    // Idle: nothing to do.
    h.on(Input::Committed { at });
    assert!(h
        .on(Input::Fault {
            breaks_target: true,
            description: "y".into()
        })
        .is_empty());
}

#[test]
fn too_many_restarts_abort_the_generation() {
    let mut h = H::new(ProtocolConfig {
        max_restarts: 2,
        ..ProtocolConfig::default()
    });
    h.run_to_unpath(1);
    let mut last = Vec::new();
    for _ in 0..3 {
        let at = h.at();
        last = h.on(Input::BaseUploaded {
            at,
            result: Err("verify mismatch on 0x2 block 3".into()),
        });
        if h.p.phase() == Phase::Prepare {
            h.on(Input::Computed {
                at: h.at(),
                result: Ok(()),
            });
            h.on(Input::EscapeUploaded {
                at: h.at(),
                result: Ok(()),
            });
        }
    }
    let abort = last.iter().find_map(|a| match a {
        Action::Abort {
            base_touched, reason, ..
        } => Some((*base_touched, reason.clone())),
        _ => None,
    });
    let (touched, reason) = abort.expect("aborted");
    assert!(touched);
    assert!(reason.contains("after 2 restarts"), "{reason}");
    assert_eq!(h.p.phase(), Phase::Idle);
}

#[test]
fn compute_or_escape_failure_aborts_without_touching_base() {
    for escape in [false, true] {
        let mut h = H::new(ProtocolConfig::default());
        h.on(Input::Begin { generation: 1 });
        let at = h.at();
        let a = if escape {
            h.on(Input::Computed { at, result: Ok(()) });
            h.on(Input::EscapeUploaded {
                at,
                result: Err("timeout".into()),
            })
        } else {
            h.on(Input::Computed {
                at,
                result: Err("not valid".into()),
            })
        };
        assert!(
            matches!(
                &a[0],
                Action::Abort {
                    base_touched: false,
                    ..
                }
            ),
            "{a:?}"
        );
        assert_eq!(h.p.phase(), Phase::Idle);
    }
}

#[test]
fn single_lid_mode_is_a_direct_upload() {
    let mut h = H::new(ProtocolConfig {
        dual_lids: false,
        ..ProtocolConfig::default()
    });
    h.join(S1);
    h.on(Input::Begin { generation: 1 });
    let at = h.at();
    let a = h.on(Input::Computed { at, result: Ok(()) });
    assert_eq!(phases(&a), vec![Phase::Update]);
    assert_eq!(a.last(), Some(&Action::UploadBase { at }));
    let a = h.on(Input::BaseUploaded { at, result: Ok(()) });
    assert_eq!(phases(&a), vec![Phase::Commit]);
    assert!(!a
        .iter()
        .any(|x| matches!(x, Action::NotifyRepath { .. } | Action::NotifyUnpath { .. })));
}

#[test]
fn begin_while_busy_and_stale_inputs_in_idle_are_ignored() {
    let mut h = H::new(ProtocolConfig::default());
    let at = AttemptId {
        generation: 1,
        attempt: 0,
    };
    assert!(h.on(Input::Computed { at, result: Ok(()) }).is_empty());
    assert!(h.on(Input::EscapeUploaded { at, result: Ok(()) }).is_empty());
    assert!(h.on(Input::Committed { at }).is_empty());
    assert!(h.on(Input::Deadline { token: 1 }).is_empty());
    h.on(Input::Begin { generation: 1 });
    assert!(h.on(Input::Begin { generation: 2 }).is_empty());
    assert_eq!(h.at().generation, 1);
    // Out-of-phase answer: base uploaded while preparing.
    assert!(h.on(Input::BaseUploaded { at, result: Ok(()) }).is_empty());
    assert_eq!(h.p.phase(), Phase::Prepare);
}

#[test]
fn progress_round_trips_and_recovery_restarts_from_prepare() {
    for ph in [Phase::Prepare, Phase::Unpath, Phase::Update, Phase::Repath] {
        let mut h = H::new(ProtocolConfig::default());
        h.on(Input::Begin { generation: 9 });
        let p = Progress {
            generation: 9,
            attempt: 0,
            phase: ph,
        };
        let json = serde_json::to_string(&p).expect("serialize");
        assert!(json.contains(&format!("\"{}\"", ph.name())), "{json}");
        let back: Progress = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, p);
        let mut fresh = Protocol::new(ProtocolConfig::default());
        let a = fresh.recover(h.now, &back);
        let at1 = AttemptId {
            generation: 9,
            attempt: 1,
        };
        assert!(matches!(&a[0], Action::Restart { reason, .. } if reason.contains(ph.name())));
        assert_eq!(
            a[1],
            Action::PhaseChanged {
                at: at1,
                phase: Phase::Prepare
            }
        );
        assert_eq!(a[2], Action::Compute { at: at1 });
        assert_eq!(
            fresh.progress(),
            Some(Progress {
                generation: 9,
                attempt: 1,
                phase: Phase::Prepare
            })
        );
    }
    let mut fresh = Protocol::new(ProtocolConfig::default());
    let now = Instant::now();
    let a = fresh.recover(
        now,
        &Progress {
            generation: 5,
            attempt: 2,
            phase: Phase::Commit,
        },
    );
    assert!(matches!(a.last(), Some(Action::Commit { at, .. }) if at.generation == 5 && at.attempt == 2));
    assert!(fresh
        .recover(
            now,
            &Progress {
                generation: 5,
                attempt: 0,
                phase: Phase::Idle
            }
        )
        .is_empty());
}

#[test]
fn progress_is_reported_in_every_active_phase() {
    let mut h = H::new(ProtocolConfig::default());
    h.join(S1);
    assert_eq!(h.p.progress(), None);
    h.on(Input::Begin { generation: 2 });
    assert_eq!(h.p.progress().map(|p| p.phase), Some(Phase::Prepare));
    let at = h.at();
    h.on(Input::Computed { at, result: Ok(()) });
    h.on(Input::EscapeUploaded { at, result: Ok(()) });
    assert_eq!(h.p.progress().map(|p| p.phase), Some(Phase::Unpath));
    h.on(ack(S1, 2, Phase::Unpath));
    assert_eq!(h.p.progress().map(|p| p.phase), Some(Phase::Update));
}
