//! Live congestion metrics on a fabric whose metrics take long (many random permutations): a
//! fault's generation is committed while GetMetrics is still computing the previous
//! generation's figures; that computation is cancelled and replaced by the new generation's,
//! and the report names the generation its figures belong to.

mod common;

use common::*;
use fabric_proto::v1 as pb;

/// 1 024 end ports; 100 000 random permutations (the most the config allows) take seconds in the
/// test profile, long enough for a generation to commit while they are computed.
const FABRIC: &str = "XGFT(3;8,8,16;1,4,4)";

#[test]
fn a_generation_commits_while_metrics_compute_and_replaces_them() {
    run_with_deadline(300, async {
        let dir = test_dir("metrics-background");
        let text = Opts::new(FABRIC)
            .config_text()
            .replace("random_perms = 4", "random_perms = 100000");
        assert!(text.contains("random_perms = 100000"));
        let config = dir.join("fabricd.toml");
        std::fs::write(&config, text).expect("config");
        let d = Daemon::spawn_with_config(&dir, &config, &[]);
        let mut c = d.ready().await;
        let g0 = status(&mut c).await.generation;

        // Metrics of generation g0, computing in the background.
        let mut c2 = c.clone();
        let pending = tokio::spawn(async move {
            c2.get_metrics(pb::GetMetricsRequest {})
                .await
                .expect("metrics")
                .into_inner()
        });
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;

        // A fault meanwhile: its generation is committed without waiting for the metrics.
        let (sw, port) = switch_links(&topology(&mut c).await)[0];
        let r = c
            .inject_fault(link_req(sw, port, false, true, true))
            .await
            .expect("link-down")
            .into_inner();
        assert_eq!(r.generation, g0 + 1);
        assert!(
            !pending.is_finished(),
            "the metrics of generation {g0} were still computing when generation {} was committed",
            r.generation
        );

        // The computation for g0 was cancelled: the answer is the new generation's.
        let m = pending.await.expect("task");
        assert_eq!(m.generation, g0 + 1, "{m:?}");
        assert!(m.valid && m.mu_sp >= 1, "{m:?}");
        assert!(m.mu_rp.as_ref().expect("mu_rp").median >= 1.0, "{m:?}");

        // Published: asked again, the same figures come from the cache.
        let again = c
            .get_metrics(pb::GetMetricsRequest {})
            .await
            .expect("metrics")
            .into_inner();
        assert_eq!(again.generation, g0 + 1);
        assert_eq!(again.compute_ms, 0.0, "cached, not recomputed");
        assert_eq!(again.mu_sp, m.mu_sp);
    });
}
