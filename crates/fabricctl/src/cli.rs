//! The command line: the connection options of the commands that talk to the daemon, the
//! `clap::Command` tree with them, shell completions and man pages.
//!
//! The connection options (`--socket`, `--tls-*`, [`Connection`]) are added to every remote
//! subcommand ([`crate::remote::RemoteCmd`]: adding a variant there is all a new daemon command
//! needs) and to the top-level commands listed in [`CONNECTED`] (`topo`, `validate`: they talk
//! to the daemon in one of their forms). Offline commands (`topo gen`, `topo info`, `route`,
//! `analyze`) do not have them. For older scripts they are also accepted, hidden, before the
//! subcommand (`fabricctl --socket S status`); after the subcommand they win.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, Subcommand};

use crate::exit;
use crate::remote::{RemoteCmd, Target};

/// The daemon's default gRPC socket (`grpc.socket` of the shipped configuration).
pub const DEFAULT_SOCKET: &str = "/run/fabricd/fabricd.sock";

/// Top-level commands that get the connection options besides the remote subcommands.
pub const CONNECTED: &[&str] = &["topo", "validate"];

// Where the daemon is and how to reach it over TLS. (A plain comment: clap takes a flattened
// struct's doc comment as the `about` of every command that flattens it.)
#[derive(Args, Debug, Clone)]
pub struct Connection {
    /// The running fabricd: its Unix socket, http://host:port (plaintext TCP) or https://host:port
    /// (TLS; see --tls-ca).
    #[arg(long, env = "FABRICD_SOCKET", default_value = DEFAULT_SOCKET, value_name = "SOCKET|URL")]
    pub socket: String,
    /// https:// only: PEM CA certificate(s) to trust for the daemon's certificate (default: the
    /// system trust store).
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// https:// only: PEM client certificate, for a daemon that requires one (mutual TLS,
    /// grpc.tls_client_ca); needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// https:// only: PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// https:// only: name to verify in the daemon's certificate instead of the host of
    /// --socket (when connecting by an IP address the certificate does not list).
    #[arg(long, value_name = "NAME")]
    pub tls_domain: Option<String>,
}

/// The argument ids of [`Connection`].
const CONNECTION_IDS: &[&str] = &["socket", "tls_ca", "tls_cert", "tls_key", "tls_domain"];

/// The exit codes as help text.
fn exit_codes_help() -> String {
    let mut s = String::from("Exit codes:\n");
    for (code, what) in exit::TABLE {
        s.push_str(&format!("  {code}  {what}\n"));
    }
    s.push_str("\nEnvironment:\n  FABRICD_SOCKET  the daemon to talk to when --socket is not given");
    s
}

/// The whole command tree: the derived one with the connection options on the daemon
/// commands and hidden before the subcommand.
pub fn command() -> clap::Command {
    let mut root = crate::Cli::command().after_long_help(exit_codes_help());
    let remote: Vec<String> = RemoteCmd::augment_subcommands(clap::Command::new("remote"))
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for name in remote.iter().map(String::as_str).chain(CONNECTED.iter().copied()) {
        // Global within the command: `jobs set --socket S ...` works too; `topo` is not global
        // (its `gen` and `info` are offline).
        let global = !CONNECTED.contains(&name);
        root = root.mut_subcommand(name, |s| {
            let mut s = Connection::augment_args(s);
            for id in CONNECTION_IDS {
                s = s.mut_arg(*id, |a| a.global(global));
            }
            s
        });
    }
    // `export slurm` reads the live daemon without --topology; of `hostlist`, only `ports` does.
    root = root.mut_subcommand("export", |s| s.mut_subcommand("slurm", Connection::augment_args));
    root = root.mut_subcommand("hostlist", |s| s.mut_subcommand("ports", Connection::augment_args));
    let mut root = Connection::augment_args(root);
    for id in CONNECTION_IDS {
        root = root.mut_arg(*id, |a| a.hide(true));
    }
    root
}

/// One connection option: given after the subcommand, else given before it (hidden form),
/// else the subcommand's environment or default.
fn pick<T: Clone + Send + Sync + 'static>(top: &ArgMatches, sub: &ArgMatches, id: &str) -> Option<T> {
    let given = |m: &ArgMatches| m.value_source(id) == Some(ValueSource::CommandLine);
    if !given(sub) && given(top) {
        return top.get_one::<T>(id).cloned();
    }
    sub.get_one::<T>(id).cloned()
}

/// The daemon target of a parsed command line whose subcommand has the connection options.
pub fn target(top: &ArgMatches) -> Target {
    // The deepest subcommand that has the options (`export slurm`, `hostlist ports` have them
    // one level down).
    let mut sub = top;
    let mut m = top;
    while let Some((_, next)) = m.subcommand() {
        if next.try_get_one::<String>("socket").is_ok() {
            sub = next;
        }
        m = next;
    }
    Target {
        addr: pick::<String>(top, sub, "socket").unwrap_or_else(|| DEFAULT_SOCKET.to_string()),
        tls: fabric_proto::tls::ClientTlsOptions {
            ca: pick(top, sub, "tls_ca"),
            cert: pick(top, sub, "tls_cert"),
            key: pick(top, sub, "tls_key"),
            domain: pick(top, sub, "tls_domain"),
        },
    }
}

/// `fabricctl completions SHELL`: the completion script on stdout.
pub fn completions(shell: clap_complete::Shell) -> Result<()> {
    let mut cmd = command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "fabricctl", &mut out);
    std::io::stdout()
        .lock()
        .write_all(&out)
        .context("cannot write the completion script")
}

/// `fabricctl man --out-dir DIR`: `fabricctl.1` and one page per subcommand
/// (`fabricctl-topo.1`, `fabricctl-topo-gen.1`, ...); returns the files written.
pub fn write_man_pages(dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut root = command();
    root.build();
    let mut written = Vec::new();
    man_page(&root, dir, true, &mut written)?;
    Ok(written)
}

fn man_page(cmd: &clap::Command, dir: &Path, top: bool, written: &mut Vec<PathBuf>) -> Result<()> {
    let name = cmd.get_display_name().unwrap_or_else(|| cmd.get_name()).to_string();
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut page)
        .with_context(|| format!("cannot render the man page of {name}"))?;
    page.extend_from_slice(b".SH \"EXIT STATUS\"\n");
    for (code, what) in exit::TABLE {
        page.extend_from_slice(format!(".TP\n{code}\n{what}\n").as_bytes());
    }
    if top {
        page.extend_from_slice(
            b".SH ENVIRONMENT\n.TP\nFABRICD_SOCKET\nThe daemon to talk to when \\-\\-socket is not given.\n",
        );
    }
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, page).with_context(|| format!("cannot write {}", path.display()))?;
    written.push(path);
    for sub in cmd
        .get_subcommands()
        .filter(|s| s.get_name() != "help" && !s.is_hide_set())
    {
        man_page(sub, dir, false, written)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the command `name` (first level) has the connection options.
    fn is_connected(root: &clap::Command, name: &str) -> bool {
        root.find_subcommand(name)
            .is_some_and(|s| s.get_arguments().any(|a| a.get_id() == "socket"))
    }

    /// Every argument and every subcommand of the whole tree has a help text.
    #[test]
    fn every_argument_and_subcommand_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    missing.push(format!("{path} {}", a.get_id()));
                }
            }
            for s in cmd.get_subcommands() {
                let p = format!("{path} {}", s.get_name());
                if s.get_about().is_none() && s.get_long_about().is_none() {
                    missing.push(format!("{p} (subcommand)"));
                }
                walk(s, &p, missing);
            }
        }
        let mut root = command();
        root.build();
        let mut missing = Vec::new();
        walk(&root, "fabricctl", &mut missing);
        assert!(missing.is_empty(), "no help text: {missing:#?}");
    }

    /// Sibling subcommands describe themselves, not a shared option group: no two siblings
    /// have the same one-line help (a flattened struct's doc comment once became the `about`
    /// of every daemon command).
    #[test]
    fn sibling_subcommands_have_distinct_help() {
        fn walk(cmd: &clap::Command, path: &str, dup: &mut Vec<String>) {
            let mut seen = std::collections::HashMap::new();
            for s in cmd.get_subcommands() {
                if let Some(about) = s.get_about().map(ToString::to_string) {
                    if let Some(other) = seen.insert(about.clone(), s.get_name().to_string()) {
                        dup.push(format!("{path}: {other} and {} both say {about:?}", s.get_name()));
                    }
                }
                walk(s, &format!("{path} {}", s.get_name()), dup);
            }
        }
        let mut root = command();
        root.build();
        let mut dup = Vec::new();
        walk(&root, "fabricctl", &mut dup);
        assert!(dup.is_empty(), "{dup:#?}");
    }

    #[test]
    fn the_tree_is_consistent() {
        command().debug_assert();
    }

    /// Connection options only where the daemon is talked to.
    #[test]
    fn connection_options_only_on_daemon_commands() {
        let root = command();
        for offline in ["route", "analyze", "completions", "man"] {
            assert!(!is_connected(&root, offline), "{offline} has --socket");
        }
        for online in ["status", "topo", "validate", "inject", "what-if", "jobs", "sa", "watch"] {
            assert!(is_connected(&root, online), "{online} lacks --socket");
        }
        let topo = root.find_subcommand("topo").unwrap();
        for sub in ["gen", "info"] {
            let s = topo.find_subcommand(sub).unwrap();
            assert!(
                !s.get_arguments().any(|a| a.get_id() == "socket"),
                "topo {sub} has --socket"
            );
        }
    }

    fn target_of(args: &[&str]) -> Target {
        let m = command().try_get_matches_from(args).expect("parses");
        target(&m)
    }

    #[test]
    fn socket_after_the_subcommand_wins_over_before_and_default() {
        // (FABRICD_SOCKET is tested on the binary, where the environment is its own.)
        assert_eq!(target_of(&["fabricctl", "status", "--socket", "/a"]).addr, "/a");
        assert_eq!(target_of(&["fabricctl", "--socket", "/b", "status"]).addr, "/b");
        assert_eq!(
            target_of(&["fabricctl", "--socket", "/b", "status", "--socket", "/a"]).addr,
            "/a"
        );
        assert_eq!(
            target_of(&["fabricctl", "jobs", "set", "--socket", "/c", "j", "x"]).addr,
            "/c"
        );
        let t = target_of(&["fabricctl", "--tls-ca", "/ca.pem", "status", "--socket", "https://h:1"]);
        assert_eq!(t.tls.ca.as_deref(), Some(Path::new("/ca.pem")));
        assert_eq!(t.addr, "https://h:1");
        assert!(command()
            .try_get_matches_from(["fabricctl", "topo", "gen", "KARY(2,2)", "--socket", "/x"])
            .is_err());
        // One level down: `export slurm` and `hostlist ports`, not `hostlist expand`.
        assert_eq!(
            target_of(&["fabricctl", "export", "slurm", "--socket", "/d"]).addr,
            "/d"
        );
        assert_eq!(
            target_of(&["fabricctl", "--socket", "/e", "export", "slurm"]).addr,
            "/e"
        );
        assert_eq!(
            target_of(&["fabricctl", "hostlist", "ports", "--socket", "/f", "n1"]).addr,
            "/f"
        );
        assert!(command()
            .try_get_matches_from(["fabricctl", "hostlist", "expand", "--socket", "/x", "n[1-2]"])
            .is_err());
    }

    #[test]
    fn man_pages_cover_every_subcommand() {
        let dir = std::env::temp_dir().join(format!("fabricctl-man-{}", std::process::id()));
        let files = write_man_pages(&dir).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for want in [
            "fabricctl.1",
            "fabricctl-status.1",
            "fabricctl-topo-gen.1",
            "fabricctl-jobs-set.1",
        ] {
            assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
        }
        let top = std::fs::read_to_string(dir.join("fabricctl.1")).unwrap();
        assert!(top.contains("EXIT STATUS") && top.contains("FABRICD_SOCKET"), "{top}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
