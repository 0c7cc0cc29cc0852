//! `fabricctl jobs`: job mappings (list, set, clear).

use anyhow::Result;
use clap::{Args, Subcommand};
use fabric_proto::v1 as pb;
use serde_json::{json, Value};

use super::output::{ask, guid, print_json, status_err};

/// `fabricctl jobs`.
#[derive(Args, Debug)]
pub struct JobsArgs {
    #[command(subcommand)]
    pub cmd: Option<JobsCmd>,
    /// JSON output (for scripts) instead of text.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub enum JobsCmd {
    /// List job mappings (default).
    List,
    /// Create or replace a job mapping: JOB_ID then end ports (GUIDs or names).
    Set {
        /// Job id: 1 to 128 characters from letters, digits, '.', '_', ':', '-'.
        job_id: String,
        /// The job's end ports: port GUIDs, node GUIDs or node names.
        #[arg(required = true)]
        end_ports: Vec<String>,
    },
    /// Remove a job mapping.
    Clear {
        /// The job id to remove.
        job_id: String,
    },
}

/// JSON of one job mapping: `job_id` and its `end_ports` (`guid`, `name`).
fn job_json(j: &pb::Job) -> Value {
    json!({
        "job_id": j.job_id,
        "end_ports": j.end_ports.iter().map(|e| json!({"guid": guid(e.guid), "name": e.name})).collect::<Vec<_>>(),
    })
}

/// Runs `fabricctl jobs`.
pub async fn run(c: &mut fabric_proto::Client, a: JobsArgs) -> Result<()> {
    match a.cmd.unwrap_or(JobsCmd::List) {
        JobsCmd::List => {
            let r = ask(c.list_jobs(pb::ListJobsRequest {})).await?;
            if a.json {
                let jobs: Vec<Value> = r.jobs.iter().map(job_json).collect();
                return print_json(&json!({ "jobs": jobs }));
            }
            outln!("{:<24}  {:>9}  FIRST END PORTS", "JOB", "END PORTS");
            for j in &r.jobs {
                let first: Vec<&str> = j.end_ports.iter().take(4).map(|e| e.name.as_str()).collect();
                outln!("{:<24}  {:>9}  {}", j.job_id, j.end_ports.len(), first.join(", "));
            }
        }
        JobsCmd::Set { job_id, end_ports } => {
            let j = ask(c.set_job_mapping(pb::SetJobMappingRequest { job_id, end_ports })).await?;
            if a.json {
                return print_json(&job_json(&j));
            }
            outln!("job {} mapped to {} end ports", j.job_id, j.end_ports.len());
        }
        JobsCmd::Clear { job_id } => {
            c.clear_job(pb::ClearJobRequest { job_id: job_id.clone() })
                .await
                .map_err(status_err)?;
            if a.json {
                return print_json(&json!({ "cleared": job_id }));
            }
            outln!("job {job_id} cleared");
        }
    }
    Ok(())
}
