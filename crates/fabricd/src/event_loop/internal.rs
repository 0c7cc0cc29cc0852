//! What the loop's own tasks answer: a crate-private message enum (no caller can forge a
//! computation result or an upload outcome), one payload type per kind of task.

use fabric_routing::Lfts;
use fabric_update::Stages as StagedWrites;

use super::request::{FaultAccepted, FaultRequest, LoopError, Reply};
use crate::compute::{ComputeError, Computed};
use crate::persist::Jobs;
use crate::upload::UploadOutcome;

/// One answer of a task of the loop.
#[derive(Debug)]
pub(crate) enum Internal {
    /// A computation finished on the rayon pool.
    ComputeDone(Box<Routed>),
    /// The driver answered `escape_vl_ready` for a computed five-phase generation (still in
    /// Prepare).
    EscapeVlChecked(Box<EscapeVlChecked>),
    /// The background escape-VL preparation after a commit finished.
    EscapeVlPrepared(Result<(), String>),
    /// The escape stage of the five-phase update is uploaded.
    EscapeDone(Uploaded),
    /// An upload (direct, or the base stage) finished.
    UploadDone(Uploaded),
    /// The driver carried out (or refused) a physical fault injection.
    PhysicalFaultDone(Box<PhysicalFaultDone>),
    /// The job mappings were written (or not).
    JobsSaved(Box<JobsSaved>),
    /// The state files of a commit were written (or not).
    Persisted(Persisted),
    /// The switches' LFTs were read back.
    ReadBack(ReadBack),
    /// The stages of a given-up attempt are folded into a copy of the installed tables.
    Folded(Folded),
    /// The SA took the partitions of a committed generation.
    PartitionsHanded,
}

/// A computation's result.
#[derive(Debug)]
pub(crate) struct Routed {
    pub job: u64,
    pub result: Result<Computed, ComputeError>,
    /// The writes split into the five-phase stages (when the generation may need them).
    pub stages: Option<StagedWrites>,
}

/// The escape VL check of a computed generation.
#[derive(Debug)]
pub(crate) struct EscapeVlChecked {
    pub job: u64,
    pub computed: Computed,
    pub stages: Option<StagedWrites>,
    pub result: Result<(), String>,
}

/// An upload stage's outcome.
#[derive(Debug)]
pub(crate) struct Uploaded {
    pub job: u64,
    pub outcome: UploadOutcome,
}

/// The driver's answer to a physical fault injection, with what the answer needs.
#[derive(Debug)]
pub(crate) struct PhysicalFaultDone {
    pub id: u64,
    pub req: FaultRequest,
    pub reply: Reply<FaultAccepted>,
    /// The change number when the request arrived.
    pub before: u64,
    pub result: Result<(), LoopError>,
}

/// The write of the job mappings.
#[derive(Debug)]
pub(crate) struct JobsSaved {
    pub id: String,
    pub jobs: Jobs,
    /// A `SetJob` (true) or a `ClearJob`.
    pub set: bool,
    pub reply: Reply<()>,
    pub result: Result<(), String>,
}

/// The state files of a commit: whether the virtual faults were written, and the errors.
#[derive(Debug)]
pub(crate) struct Persisted {
    pub job: u64,
    pub faults_saved: bool,
    pub errors: Vec<String>,
}

/// What the switches hold: the tables and the switches read whole.
#[derive(Debug)]
pub(crate) struct ReadBack {
    pub lfts: Lfts,
    pub read_whole: Vec<u32>,
    /// Blocks read.
    pub blocks: u64,
}

/// The installed tables with the stages of a given-up attempt folded in, and the blocks that
/// stay dirty.
#[derive(Debug)]
pub(crate) struct Folded {
    pub job: u64,
    pub lfts: Lfts,
    pub dirty: Vec<(u32, u32)>,
}
