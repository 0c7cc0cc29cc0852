//! Job-aware routing end to end (`[routing] job_aware`, thesis §3.4 Alg. 4 over Dmodc): a job
//! mapping set over gRPC starts a generation whose base LIDs are routed on node ids re-indexed
//! by job, which balances the job's own collectives; clearing it returns to plain Dmodc.
//!
//! The fabric is the thesis' G_3 (`XGFT(3;4,4,6;1,2,2)`, blocking 4:1) and the job its storage
//! nodes (the 4th port of every leaf): under Dmodc every shift of that job climbs to one top
//! switch (job-local mu_sp 4).

mod common;

use std::time::{Duration, Instant};

use common::*;
use fabric_proto::v1 as pb;
use fabric_proto::Client;

const G3: &str = "XGFT(3;4,4,6;1,2,2)";

async fn wait_generation(c: &mut Client, at_least: u64) -> pb::Status {
    let t = Instant::now();
    loop {
        let s = status(c).await;
        if s.generation >= at_least && s.phase == pb::Phase::Idle as i32 && s.pending_faults == 0 {
            return s;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "no generation {at_least}: {s:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn job_metrics(c: &mut Client) -> Vec<pb::JobMetrics> {
    c.get_metrics(pb::GetMetricsRequest {})
        .await
        .expect("metrics")
        .into_inner()
        .jobs
}

#[test]
fn a_job_mapping_reroutes_job_aware_and_balances_the_job() {
    run_with_deadline(120, async {
        let plain_dir = test_dir("job-plain");
        let aware_dir = test_dir("job-aware");
        let plain = Daemon::spawn(&plain_dir, &Opts::new(G3), &[]);
        let mut opts = Opts::new(G3);
        opts.extra = "\n[routing]\njob_aware = true\n".into();
        let aware = Daemon::spawn(&aware_dir, &opts, &[]);
        let (mut p, mut a) = (plain.ready().await, aware.ready().await);
        assert!(!status(&mut p).await.job_aware);
        assert!(status(&mut a).await.job_aware);
        // Before any job both route plain Dmodc: the same tables.
        let (_, plain_lfts) = lfts(&mut p).await;
        assert_eq!(lfts(&mut a).await.1, plain_lfts);

        // The storage nodes, in node-id order (port, leaf in the pod, pod).
        let names: Vec<String> = (0..6)
            .flat_map(|pod| (0..4).map(move |leaf| format!("n(3,{leaf},{pod})")))
            .collect();
        let topo = topology(&mut a).await;
        for n in &names {
            assert!(topo.end_ports.iter().any(|e| &e.name == n), "no end port {n}");
        }
        let job = pb::SetJobMappingRequest {
            job_id: "storage".into(),
            end_ports: names.clone(),
        };
        p.set_job_mapping(job.clone()).await.expect("plain: set job");
        a.set_job_mapping(job).await.expect("aware: set job");

        // The job-aware daemon installs generation 2; the plain one keeps generation 1.
        let s = wait_generation(&mut a, 2).await;
        assert_eq!(s.generation, 2);
        assert!(s.last_reroute.expect("timings").blocks_written > 0);
        let (pg, after) = lfts(&mut p).await;
        assert_eq!(pg, 1, "plain routing does not reroute for jobs");
        assert_eq!(after, plain_lfts);
        let v = verify(&mut a).await;
        assert_eq!(v.unreachable_count, 0, "{v:?}");

        let (pj, aj) = (job_metrics(&mut p).await, job_metrics(&mut a).await);
        assert_eq!((pj.len(), aj.len()), (1, 1));
        assert_eq!((pj[0].end_ports, aj[0].end_ports), (24, 24));
        assert_eq!(pj[0].mu_sp, 4, "Dmodc: every shift through one top switch: {pj:?}");
        assert!(aj[0].mu_sp < pj[0].mu_sp, "job-aware {aj:?} vs plain {pj:?}");
        assert!(aj[0].worst_shift >= 1);
        assert!(aware.log_text().contains("job-aware reroute"));

        // Clearing the job returns to plain Dmodc: generation 3 has the plain tables again.
        a.clear_job(pb::ClearJobRequest {
            job_id: "storage".into(),
        })
        .await
        .expect("clear");
        let s = wait_generation(&mut a, 3).await;
        assert_eq!(s.generation, 3);
        assert_eq!(lfts(&mut a).await.1, plain_lfts);
    });
}
