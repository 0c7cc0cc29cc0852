//! The harness against the real simulator on ibsim's example net (`NET_2SW2PATH4HCA`): the
//! simulator comes up in its own directory, a tool run under the shim on a chosen node sees
//! that node, the console answers, and everything goes away on drop. Needs `ibsim`
//! (ibsim-utils) and infiniband-diags; a missing tool fails the test.

use fabric_ibsim_harness::{Ibsim, NET_2SW2PATH4HCA};

/// The node description `smpquery nodedesc` shows (ibsim sets it to the node id).
fn node_desc(text: &str) -> Option<&str> {
    text.lines()
        .find(|l| l.starts_with("Node Description:"))
        .map(|l| l.trim_start_matches("Node Description:").trim_start_matches('.'))
}

#[test]
fn tools_attach_to_the_chosen_node_and_the_directory_goes_away() {
    let mut sim = Ibsim::start_temp("selftest", NET_2SW2PATH4HCA, "Hca1".to_string());
    let dir = sim.dir().to_path_buf();
    assert!(dir.join("fabric.net").is_file());
    let (ok, text) = sim.tool("smpquery", &["-D", "nodedesc", "0"]);
    assert!(ok, "{text}");
    assert_eq!(node_desc(&text), Some("Hca1"), "{text}");
    let (ok, text) = sim.tool_on("Hca3", "smpquery", &["-D", "nodedesc", "0"]);
    assert!(ok, "{text}");
    assert_eq!(node_desc(&text), Some("Hca3"), "{text}");
    // No SM ran: LIDs are unassigned and the console walk fails with ibsim's message.
    let e = sim.route(1, 2).expect_err("Route between unassigned LIDs");
    assert!(e.contains("unconfigured"), "{e}");
    // The console dump lists every node of the net file, and only what followed the command.
    let out = sim.console_output("Dump", |l| l.contains("dumped"));
    for n in ["Switch1", "Switch2", "Hca1", "Hca2", "Hca3", "Hca4"] {
        assert!(out.contains(&format!("\"{n}\"")), "{n} missing:\n{out}");
    }
    assert!(!out.contains("unconfigured"), "{out}");
    drop(sim);
    assert!(!dir.exists(), "{} left behind", dir.display());
}

#[test]
fn startup_log_ends_at_ready_and_leaves_console_output_out() {
    let mut sim = Ibsim::start_temp("startlog", NET_2SW2PATH4HCA, "Hca1".to_string());
    let out = sim.console_output("Dump", |l| l.contains("dumped"));
    assert!(out.contains("dumped"), "{out}");
    let start = sim.startup_log();
    assert!(start.ends_with("Network simulator ready."), "{start}");
    assert!(
        !start.contains("dumped"),
        "console output in the start-up log:\n{start}"
    );
    let whole = std::fs::read_to_string(sim.dir().join("ibsim.log")).expect("read the ibsim log");
    assert!(whole.starts_with(&start) && whole.len() > start.len(), "{whole}");
}
