//! The five-phase update as a pure state machine (no I/O, no clock, no threads).
//!
//! The event loop feeds [`Input`]s (with the instant they happened) into [`Protocol::on`] and
//! carries out the returned [`Action`]s: start a computation, upload the escape or base stage,
//! send Unpath/Repath notices, arm deadline timers, commit or abort. Every answer to an action
//! names the generation and the attempt it belongs to, so late answers of a superseded attempt
//! are recognised and ignored.
//!
//! Phases of generation `g + 1` (Domke & Hoefler, *Scheduling-Aware Routing for
//! Supercomputers*, "Five-Phase Property Preserving Update Protocol"):
//!
//! 1. [`Phase::Prepare`]: compute and validate the base and escape routing of the new topology,
//!    upload the escape stage (escape LIDs carry no traffic in steady state).
//! 2. [`Phase::Unpath`]: every subscriber drains and moves its flows to the escape LIDs; wait for
//!    all acks or the deadline.
//! 3. [`Phase::Update`]: upload the base stage (base LIDs are idle), read it back.
//! 4. [`Phase::Repath`]: subscribers move back to the base LIDs; wait for acks or the deadline.
//! 5. [`Phase::Commit`]: publish, persist, report timings and who missed a deadline.
//!
//! With no subscribers phases 2 and 4 pass at once. In single-LID mode (the address space
//! cannot hold two LIDs per end port) there is no escape stage: Prepare is followed directly by
//! Update and Commit (direct upload, no per-flow consistency).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// A phase of the update protocol.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// No generation is being installed.
    #[default]
    Idle,
    /// Computing the new routing and uploading the escape stage.
    Prepare,
    /// Subscribers are moving their flows to the escape LIDs.
    Unpath,
    /// The base stage is being uploaded and verified.
    Update,
    /// Subscribers are moving their flows back to the base LIDs.
    Repath,
    /// The generation is being published and persisted.
    Commit,
}

impl Phase {
    /// Lower-case name (status, metrics labels, persisted progress).
    pub fn name(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Prepare => "prepare",
            Phase::Unpath => "unpath",
            Phase::Update => "update",
            Phase::Repath => "repath",
            Phase::Commit => "commit",
        }
    }

    /// Every phase, `Idle` first (status, metrics labels).
    pub const ALL: [Phase; 6] = [
        Phase::Idle,
        Phase::Prepare,
        Phase::Unpath,
        Phase::Update,
        Phase::Repath,
        Phase::Commit,
    ];

    /// The phases a generation passes through, in order.
    pub const ACTIVE: [Phase; 5] = [
        Phase::Prepare,
        Phase::Unpath,
        Phase::Update,
        Phase::Repath,
        Phase::Commit,
    ];
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What to do when a subscriber has not acked a notice by its deadline.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeadlinePolicy {
    /// Go on with the update and report the subscribers that missed the deadline (default).
    #[default]
    Proceed,
    /// Abort the generation when an Unpath deadline is missed: the base routing of the previous
    /// generation stays installed and the subscribers that did move are sent back (Repath).
    /// A missed Repath deadline cannot be undone (the base stage is installed): it is reported.
    Abort,
}

/// Settings of the protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolConfig {
    /// How long subscribers have to ack an Unpath notice.
    pub unpath_deadline: Duration,
    /// How long subscribers have to ack a Repath notice.
    pub repath_deadline: Duration,
    pub policy: DeadlinePolicy,
    /// Two LIDs per end port (LMC 1): the five phases. `false`: one LID, direct upload.
    pub dual_lids: bool,
    /// Restarts from Prepare allowed per generation before it is aborted.
    pub max_restarts: u32,
}

impl Default for ProtocolConfig {
    fn default() -> Self {
        ProtocolConfig {
            unpath_deadline: Duration::from_secs(5),
            repath_deadline: Duration::from_secs(5),
            policy: DeadlinePolicy::Proceed,
            dual_lids: true,
            max_restarts: 3,
        }
    }
}

/// A registered subscriber (dense id handed out by the caller).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SubscriberId(pub u64);

/// Identifies one attempt of one generation (answers of older attempts are stale).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AttemptId {
    pub generation: u64,
    /// 0 for the first attempt, incremented on every restart from Prepare.
    pub attempt: u32,
}

/// What happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// A new generation is due (queued changes): start it. Ignored unless idle.
    Begin { generation: u64 },
    /// The computation of an attempt finished (`Err` = could not compute or not valid).
    Computed { at: AttemptId, result: Result<(), String> },
    /// The escape stage of an attempt is uploaded (`Err` = upload failed).
    EscapeUploaded { at: AttemptId, result: Result<(), String> },
    /// A subscriber acked a notice.
    Ack {
        subscriber: SubscriberId,
        generation: u64,
        phase: Phase,
    },
    /// A deadline armed by [`Action::ArmDeadline`] expired.
    Deadline { token: u64 },
    /// The base stage is uploaded and read back (`Err` = failed or did not verify).
    BaseUploaded { at: AttemptId, result: Result<(), String> },
    /// The commit actions were carried out (published and persisted).
    Committed { at: AttemptId },
    /// A fault arrived during the update. `breaks_target`: it breaks the routing being installed
    /// (a link or switch that the new base or escape routing uses); otherwise it is queued for
    /// the next generation.
    Fault { breaks_target: bool, description: String },
    /// A subscriber registered.
    SubscriberJoined { subscriber: SubscriberId },
    /// A subscriber disconnected.
    SubscriberGone { subscriber: SubscriberId },
}

/// What the caller must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// The phase changed (status, events, metrics, systemd STATUS=, persisted progress).
    PhaseChanged { at: AttemptId, phase: Phase },
    /// Compute base and escape routing of the current topology for this attempt.
    Compute { at: AttemptId },
    /// Upload the escape stage (escape entries of the new routing over the installed base).
    UploadEscape { at: AttemptId },
    /// Tell these subscribers to drain and move to the escape LIDs (ack by `deadline`).
    NotifyUnpath {
        generation: u64,
        subscribers: Vec<SubscriberId>,
        deadline: Duration,
    },
    /// Call back with [`Input::Deadline`] after `after`.
    ArmDeadline { token: u64, after: Duration },
    /// Upload the base stage and read it back.
    UploadBase { at: AttemptId },
    /// Tell these subscribers to move back to the base LIDs (ack by `deadline`).
    NotifyRepath {
        generation: u64,
        subscribers: Vec<SubscriberId>,
        deadline: Duration,
    },
    /// Publish the generation as current and persist it; answer with [`Input::Committed`].
    Commit { at: AttemptId, report: Report },
    /// The generation is given up. `base_touched`: base blocks were written (the tables may mix
    /// the old and new base routing; the next generation must rewrite them).
    Abort {
        at: AttemptId,
        reason: String,
        base_touched: bool,
        report: Report,
    },
    /// The attempt is abandoned and the generation restarts from Prepare (status and events
    /// must say so).
    Restart { from: AttemptId, reason: String },
}

/// A subscriber that did not ack a notice in time.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Missed {
    pub subscriber: SubscriberId,
    pub phase: Phase,
}

/// Timings and misses of one generation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub generation: u64,
    /// Restarts from Prepare.
    pub restarts: u32,
    /// Time spent in each phase (summed over attempts), in [`Phase::ACTIVE`] order up to Repath.
    pub durations: BTreeMap<Phase, Duration>,
    /// Total time from Begin to Commit (or Abort).
    pub total: Duration,
    /// Subscribers that missed a deadline.
    pub missed: Vec<Missed>,
    /// Subscribers that disconnected during the update.
    pub gone: Vec<SubscriberId>,
    /// Faults queued for the next generation.
    pub queued_faults: Vec<String>,
}

/// Persistable progress (what a restarted daemon needs to finish or restart the generation).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    pub generation: u64,
    pub attempt: u32,
    pub phase: Phase,
}

/// Counters of ignored inputs (stale answers, acks of the wrong generation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ignored {
    pub stale_answers: u64,
    pub stale_acks: u64,
    pub stale_deadlines: u64,
}

/// The protocol state machine (see the module documentation).
#[derive(Debug)]
pub struct Protocol {
    config: ProtocolConfig,
    phase: Phase,
    at: AttemptId,
    subscribers: BTreeMap<SubscriberId, ()>,
    /// Subscribers whose ack for the current notice is still outstanding.
    waiting: BTreeMap<SubscriberId, ()>,
    /// Subscribers that acked the current Unpath notice (sent back on an abort).
    moved: BTreeMap<SubscriberId, ()>,
    /// Token of the armed deadline of the current wait.
    deadline_token: Option<u64>,
    next_token: u64,
    base_touched: bool,
    begun: Option<Instant>,
    phase_started: Option<Instant>,
    report: Report,
    ignored: Ignored,
}

impl Protocol {
    /// An idle protocol.
    pub fn new(config: ProtocolConfig) -> Protocol {
        Protocol {
            config,
            phase: Phase::Idle,
            at: AttemptId {
                generation: 0,
                attempt: 0,
            },
            subscribers: BTreeMap::new(),
            waiting: BTreeMap::new(),
            moved: BTreeMap::new(),
            deadline_token: None,
            next_token: 1,
            base_touched: false,
            begun: None,
            phase_started: None,
            report: Report::default(),
            ignored: Ignored::default(),
        }
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }
    /// The generation and attempt in progress (or the last one, when idle).
    pub fn attempt(&self) -> AttemptId {
        self.at
    }
    pub fn config(&self) -> &ProtocolConfig {
        &self.config
    }
    /// New settings; they apply from the next notice on.
    pub fn set_config(&mut self, config: ProtocolConfig) {
        self.config = config;
    }
    /// Registered subscribers.
    pub fn subscribers(&self) -> impl Iterator<Item = SubscriberId> + '_ {
        self.subscribers.keys().copied()
    }
    /// Subscribers whose ack is outstanding.
    pub fn waiting_for(&self) -> impl Iterator<Item = SubscriberId> + '_ {
        self.waiting.keys().copied()
    }
    /// The report of the generation in progress so far.
    pub fn report(&self) -> &Report {
        &self.report
    }
    pub fn ignored(&self) -> Ignored {
        self.ignored
    }
    /// What to persist (`None` when idle).
    pub fn progress(&self) -> Option<Progress> {
        (self.phase != Phase::Idle).then_some(Progress {
            generation: self.at.generation,
            attempt: self.at.attempt,
            phase: self.phase,
        })
    }

    /// After a restart of the daemon with persisted `progress`: the switches may hold any mix
    /// of the old and new stages, so the generation restarts from Prepare (the caller reads the
    /// LFTs back first and diffs against what they really hold). A generation found in Commit is
    /// committed again (publishing and persisting are idempotent).
    pub fn recover(&mut self, now: Instant, progress: &Progress) -> Vec<Action> {
        let mut out = Vec::new();
        self.at = AttemptId {
            generation: progress.generation,
            attempt: progress.attempt,
        };
        self.report = Report {
            generation: progress.generation,
            restarts: progress.attempt,
            ..Report::default()
        };
        self.begun = Some(now);
        // Whatever the phase, base blocks may have been written before the crash (Update and
        // later certainly, earlier ones never: but a mix is harmless to rewrite).
        self.base_touched = matches!(progress.phase, Phase::Update | Phase::Repath | Phase::Commit);
        match progress.phase {
            Phase::Idle => {}
            Phase::Commit => {
                self.enter(now, Phase::Commit, &mut out);
                out.push(Action::Commit {
                    at: self.at,
                    report: self.report.clone(),
                });
            }
            _ => {
                self.at.attempt += 1;
                self.report.restarts = self.at.attempt;
                out.push(Action::Restart {
                    from: AttemptId {
                        generation: progress.generation,
                        attempt: progress.attempt,
                    },
                    reason: format!("daemon restarted during {}", progress.phase),
                });
                self.enter(now, Phase::Prepare, &mut out);
                out.push(Action::Compute { at: self.at });
            }
        }
        out
    }

    /// Feeds one input; returns what to do, in order.
    pub fn on(&mut self, now: Instant, input: Input) -> Vec<Action> {
        let mut out = Vec::new();
        match input {
            Input::Begin { generation } => {
                if self.phase != Phase::Idle {
                    self.ignored.stale_answers += 1;
                    return out;
                }
                self.at = AttemptId { generation, attempt: 0 };
                self.report = Report {
                    generation,
                    ..Report::default()
                };
                self.begun = Some(now);
                self.base_touched = false;
                self.moved.clear();
                self.enter(now, Phase::Prepare, &mut out);
                out.push(Action::Compute { at: self.at });
            }
            Input::Computed { at, result } => {
                if !self.current(at, Phase::Prepare) {
                    return out;
                }
                match result {
                    Err(reason) => self.abort(now, format!("computation failed: {reason}"), &mut out),
                    Ok(()) if self.config.dual_lids => out.push(Action::UploadEscape { at }),
                    Ok(()) => {
                        self.base_touched = true;
                        self.enter(now, Phase::Update, &mut out);
                        out.push(Action::UploadBase { at });
                    }
                }
            }
            Input::EscapeUploaded { at, result } => {
                if !self.current(at, Phase::Prepare) {
                    return out;
                }
                match result {
                    Err(reason) => self.abort(now, format!("escape upload failed: {reason}"), &mut out),
                    Ok(()) => {
                        self.enter(now, Phase::Unpath, &mut out);
                        self.moved.clear();
                        self.start_wait(Phase::Unpath, &mut out);
                        if self.waiting.is_empty() {
                            self.after_unpath(now, &mut out);
                        }
                    }
                }
            }
            Input::Ack {
                subscriber,
                generation,
                phase,
            } => {
                let waited = matches!(self.phase, Phase::Unpath | Phase::Repath)
                    && phase == self.phase
                    && generation == self.at.generation;
                if !waited || self.waiting.remove(&subscriber).is_none() {
                    self.ignored.stale_acks += 1;
                    return out;
                }
                if phase == Phase::Unpath {
                    self.moved.insert(subscriber, ());
                }
                if self.waiting.is_empty() {
                    self.deadline_token = None;
                    self.after_wait(now, &mut out);
                }
            }
            Input::Deadline { token } => {
                if self.deadline_token != Some(token) || !matches!(self.phase, Phase::Unpath | Phase::Repath) {
                    self.ignored.stale_deadlines += 1;
                    return out;
                }
                self.deadline_token = None;
                let phase = self.phase;
                for s in std::mem::take(&mut self.waiting).into_keys() {
                    self.report.missed.push(Missed { subscriber: s, phase });
                }
                if phase == Phase::Unpath && self.config.policy == DeadlinePolicy::Abort {
                    self.abort(
                        now,
                        "a subscriber missed the unpath deadline (strict policy)".into(),
                        &mut out,
                    );
                } else {
                    self.after_wait(now, &mut out);
                }
            }
            Input::BaseUploaded { at, result } => {
                if !self.current(at, Phase::Update) {
                    return out;
                }
                match result {
                    Err(reason) => self.restart(now, format!("base upload failed: {reason}"), &mut out),
                    Ok(()) if self.config.dual_lids => {
                        self.enter(now, Phase::Repath, &mut out);
                        self.start_wait(Phase::Repath, &mut out);
                        if self.waiting.is_empty() {
                            self.commit(now, &mut out);
                        }
                    }
                    Ok(()) => self.commit(now, &mut out),
                }
            }
            Input::Committed { at } => {
                if !self.current(at, Phase::Commit) {
                    return out;
                }
                self.enter(now, Phase::Idle, &mut out);
            }
            Input::Fault {
                breaks_target,
                description,
            } => {
                if self.phase == Phase::Idle {
                    return out;
                }
                if breaks_target && self.phase != Phase::Commit {
                    self.restart(
                        now,
                        format!("fault breaks the routing being installed: {description}"),
                        &mut out,
                    );
                } else {
                    self.report.queued_faults.push(description);
                }
            }
            Input::SubscriberJoined { subscriber } => {
                // Awaited from the next notice on; the caller tells it the current phase.
                self.subscribers.insert(subscriber, ());
            }
            Input::SubscriberGone { subscriber } => {
                self.subscribers.remove(&subscriber);
                self.moved.remove(&subscriber);
                if self.phase != Phase::Idle {
                    self.report.gone.push(subscriber);
                }
                if self.waiting.remove(&subscriber).is_some() && self.waiting.is_empty() {
                    self.deadline_token = None;
                    self.after_wait(now, &mut out);
                }
            }
        }
        out
    }

    /// Whether an answer belongs to the attempt in progress and the expected phase.
    fn current(&mut self, at: AttemptId, phase: Phase) -> bool {
        let ok = at == self.at && self.phase == phase;
        if !ok {
            self.ignored.stale_answers += 1;
        }
        ok
    }

    fn enter(&mut self, now: Instant, phase: Phase, out: &mut Vec<Action>) {
        if let (Some(t), true) = (self.phase_started, self.phase != Phase::Idle) {
            *self.report.durations.entry(self.phase).or_default() += now.saturating_duration_since(t);
        }
        self.phase = phase;
        self.phase_started = Some(now);
        out.push(Action::PhaseChanged { at: self.at, phase });
    }

    fn start_wait(&mut self, phase: Phase, out: &mut Vec<Action>) {
        self.waiting = self.subscribers.clone();
        self.deadline_token = None;
        if self.waiting.is_empty() {
            return;
        }
        let subscribers: Vec<SubscriberId> = self.waiting.keys().copied().collect();
        let token = self.next_token;
        self.next_token += 1;
        self.deadline_token = Some(token);
        let deadline = if phase == Phase::Unpath {
            self.config.unpath_deadline
        } else {
            self.config.repath_deadline
        };
        out.push(if phase == Phase::Unpath {
            Action::NotifyUnpath {
                generation: self.at.generation,
                subscribers,
                deadline,
            }
        } else {
            Action::NotifyRepath {
                generation: self.at.generation,
                subscribers,
                deadline,
            }
        });
        out.push(Action::ArmDeadline { token, after: deadline });
    }

    fn after_wait(&mut self, now: Instant, out: &mut Vec<Action>) {
        match self.phase {
            Phase::Unpath => self.after_unpath(now, out),
            Phase::Repath => self.commit(now, out),
            _ => {}
        }
    }

    fn after_unpath(&mut self, now: Instant, out: &mut Vec<Action>) {
        self.base_touched = true;
        self.enter(now, Phase::Update, out);
        out.push(Action::UploadBase { at: self.at });
    }

    fn finish_report(&mut self, now: Instant) -> Report {
        if let Some(t) = self.phase_started {
            if self.phase != Phase::Idle && self.phase != Phase::Commit {
                *self.report.durations.entry(self.phase).or_default() += now.saturating_duration_since(t);
                self.phase_started = Some(now);
            }
        }
        self.report.total = self.begun.map_or(Duration::ZERO, |b| now.saturating_duration_since(b));
        self.report.clone()
    }

    fn commit(&mut self, now: Instant, out: &mut Vec<Action>) {
        let report = self.finish_report(now);
        self.enter(now, Phase::Commit, out);
        out.push(Action::Commit { at: self.at, report });
    }

    fn restart(&mut self, now: Instant, reason: String, out: &mut Vec<Action>) {
        if self.at.attempt >= self.config.max_restarts {
            self.abort(now, format!("{reason} (after {} restarts)", self.at.attempt), out);
            return;
        }
        let from = self.at;
        self.at.attempt += 1;
        self.report.restarts = self.at.attempt;
        self.waiting.clear();
        self.deadline_token = None;
        out.push(Action::Restart { from, reason });
        self.enter(now, Phase::Prepare, out);
        out.push(Action::Compute { at: self.at });
    }

    fn abort(&mut self, now: Instant, reason: String, out: &mut Vec<Action>) {
        let report = self.finish_report(now);
        self.waiting.clear();
        self.deadline_token = None;
        // Subscribers that moved to the escape LIDs go back to the (unchanged) base routing.
        // With base blocks written they stay on the escape LIDs until a generation completes.
        if !self.base_touched && !self.moved.is_empty() {
            out.push(Action::NotifyRepath {
                generation: self.at.generation,
                subscribers: std::mem::take(&mut self.moved).into_keys().collect(),
                deadline: self.config.repath_deadline,
            });
        }
        out.push(Action::Abort {
            at: self.at,
            reason,
            base_touched: self.base_touched,
            report,
        });
        self.enter(now, Phase::Idle, out);
    }
}
