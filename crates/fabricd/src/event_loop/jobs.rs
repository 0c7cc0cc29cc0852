//! Job mappings: set and cleared one at a time (each written to the state directory by a
//! task before it takes effect); with job-aware routing a change is a reason for a new
//! generation.

use std::sync::Arc;

use super::internal::{Internal, JobsSaved};
use super::request::Reply;
use super::{EventLoop, JobChange, LoopError};
use crate::persist::JobPort;

impl EventLoop {
    /// A `SetJob` (`ports`) or `ClearJob` (`None`) request: queued behind the one being
    /// written, so that each starts from the mappings the previous one left.
    pub(super) fn on_job_change(&mut self, id: String, ports: Option<Vec<JobPort>>, reply: Reply<()>) {
        self.job_changes.push_back(JobChange { id, ports, reply });
        self.next_job_change();
    }

    /// Starts writing the next queued job change, unless one is being written.
    fn next_job_change(&mut self) {
        while self.job_save.is_none() {
            let Some(JobChange { id, ports, reply }) = self.job_changes.pop_front() else {
                return;
            };
            let mut jobs = (*self.jobs).clone();
            let set = ports.is_some();
            match ports {
                Some(ports) => {
                    jobs.insert(id.clone(), ports);
                }
                None if !jobs.contains_key(&id) => {
                    let _ = reply.send(Err(LoopError::NotFound(format!("no job {id:?}"))));
                    continue;
                }
                None => {
                    jobs.remove(&id);
                }
            }
            let dir = self.io.state_dir.clone();
            self.job_save = Some(self.tasks.spawn_blocking(move || {
                let result = dir.save_jobs(&jobs).map_err(|e| e.to_string());
                Internal::JobsSaved(Box::new(JobsSaved {
                    id,
                    jobs,
                    set,
                    reply,
                    result,
                }))
            }));
        }
    }

    /// The job mappings were written (they take effect) or not (nothing changes).
    pub(super) fn on_jobs_saved(&mut self, saved: JobsSaved) {
        let JobsSaved {
            id,
            jobs,
            set,
            reply,
            result,
        } = saved;
        self.job_save = None;
        let ok = result.is_ok();
        let r = match result {
            Ok(()) => {
                self.jobs = Arc::new(jobs);
                self.note_persistence(Ok(()));
                self.publish();
                tracing::info!(
                    job = %crate::logging::untrusted(&id),
                    "job mapping {}",
                    if set { "set" } else { "cleared" }
                );
                Ok(())
            }
            Err(e) => {
                let msg = format!("cannot persist job mappings: {e}");
                self.note_persistence(Err(e));
                self.publish();
                Err(LoopError::Internal(msg))
            }
        };
        let _ = reply.send(r);
        if ok {
            self.reroute_for_jobs(&id);
        }
        self.next_job_change();
    }

    /// Job-aware routing: a changed job mapping is a reason for a new generation (coalesced
    /// with whatever else is pending, installed like any other).
    fn reroute_for_jobs(&mut self, id: &str) {
        if self.settings.job_aware {
            tracing::info!(job = %crate::logging::untrusted(id), "job mappings changed: job-aware reroute");
            // Like a fault: a burst of mappings (a scheduler starting many jobs) coalesces.
            self.note_change(false);
            self.maybe_start();
        }
    }
}
