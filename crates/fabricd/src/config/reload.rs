//! `SIGHUP` reloads: which changed keys apply at run time and which need a restart.

use super::{Config, ReloadDiff};

impl Config {
    /// Compares a newly loaded configuration with the running one.
    pub fn reload_diff(&self, new: &Config) -> ReloadDiff {
        let mut d = ReloadDiff::default();
        macro_rules! cmp {
            ($list:ident, $name:literal, $($f:tt)+) => {
                if self.$($f)+ != new.$($f)+ {
                    d.$list.push($name);
                }
            };
        }
        cmp!(applied, "log.level", log.level);
        cmp!(need_restart, "log.format", log.format);
        cmp!(need_restart, "log.timestamps", log.timestamps);
        cmp!(need_restart, "daemon.state_dir", daemon.state_dir);
        cmp!(need_restart, "grpc.socket", grpc.socket);
        cmp!(need_restart, "grpc.socket_mode", grpc.socket_mode);
        cmp!(need_restart, "grpc.tcp_listen", grpc.tcp_listen);
        cmp!(need_restart, "grpc.tcp_allow_remote", grpc.tcp_allow_remote);
        cmp!(need_restart, "grpc.tls_cert", grpc.tls_cert);
        cmp!(need_restart, "grpc.tls_key", grpc.tls_key);
        cmp!(need_restart, "grpc.tls_client_ca", grpc.tls_client_ca);
        cmp!(need_restart, "grpc.max_connections", grpc.max_connections);
        cmp!(need_restart, "grpc.idle_timeout_s", grpc.idle_timeout_s);
        cmp!(need_restart, "grpc.max_request_bytes", grpc.max_request_bytes);
        cmp!(need_restart, "driver.kind", driver.kind);
        cmp!(need_restart, "driver.mock.generator", driver.mock.generator);
        cmp!(need_restart, "driver.mock.topology_file", driver.mock.topology_file);
        cmp!(need_restart, "driver.mock.remove_links", driver.mock.remove_links);
        cmp!(need_restart, "driver.mock.remove_switches", driver.mock.remove_switches);
        cmp!(need_restart, "driver.mock.degrade_seed", driver.mock.degrade_seed);
        cmp!(need_restart, "driver.mock.max_lid", driver.mock.max_lid);
        cmp!(need_restart, "driver.mock.data_vls", driver.mock.data_vls);
        cmp!(applied, "driver.mock.op_latency_us", driver.mock.op_latency_us);
        cmp!(applied, "driver.mock.error_rate", driver.mock.error_rate);
        cmp!(applied, "driver.mock.error_seed", driver.mock.error_seed);
        cmp!(applied, "driver.mock.max_parallel", driver.mock.max_parallel);
        cmp!(applied, "driver.mock.max_retries", driver.mock.max_retries);
        cmp!(
            applied,
            "driver.mock.unreachable_switches",
            driver.mock.unreachable_switches
        );
        cmp!(need_restart, "driver.umad", driver.umad);
        cmp!(need_restart, "driver.oob", driver.oob);
        cmp!(applied, "routing.engine", routing.engine);
        cmp!(applied, "routing.seed", routing.seed);
        cmp!(need_restart, "routing.lmc", routing.lmc);
        cmp!(need_restart, "routing.max_lid", routing.max_lid);
        cmp!(applied, "routing.roots", routing.roots);
        cmp!(applied, "routing.roots_file", routing.roots_file);
        cmp!(applied, "routing.roles", routing.roles);
        cmp!(need_restart, "routing.threads", routing.threads);
        cmp!(applied, "routing.validate", routing.validate);
        cmp!(applied, "update", update);
        cmp!(applied, "fault_injection", fault_injection);
        cmp!(applied, "metrics", metrics);
        cmp!(need_restart, "prometheus", prometheus);
        cmp!(applied, "partitions", partitions);
        cmp!(applied, "multicast", multicast);
        cmp!(applied, "health", health);
        cmp!(need_restart, "slurm", slurm);
        cmp!(need_restart, "ha", ha);
        d
    }

    /// The configuration that results from a reload: the new values of reloadable keys, the
    /// running values of the others.
    pub fn merge_reload(&self, new: &Config) -> Config {
        let mut c = new.clone();
        c.log.format = self.log.format;
        c.log.timestamps = self.log.timestamps;
        c.daemon = self.daemon.clone();
        c.grpc = self.grpc.clone();
        c.driver.kind = self.driver.kind;
        c.driver.mock.generator = self.driver.mock.generator.clone();
        c.driver.mock.topology_file = self.driver.mock.topology_file.clone();
        c.driver.mock.remove_links = self.driver.mock.remove_links;
        c.driver.mock.remove_switches = self.driver.mock.remove_switches;
        c.driver.mock.degrade_seed = self.driver.mock.degrade_seed;
        c.driver.mock.max_lid = self.driver.mock.max_lid;
        c.driver.mock.data_vls = self.driver.mock.data_vls;
        c.driver.umad = self.driver.umad.clone();
        c.driver.oob = self.driver.oob.clone();
        c.routing.lmc = self.routing.lmc;
        c.routing.max_lid = self.routing.max_lid;
        c.routing.threads = self.routing.threads;
        c.prometheus = self.prometheus.clone();
        c.slurm = self.slurm.clone();
        c.ha = self.ha.clone();
        c
    }
}
