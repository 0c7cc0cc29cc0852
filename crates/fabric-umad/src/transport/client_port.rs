//! The device side of the project's own SA client ([`crate::client`]): a umad descriptor opened
//! as an **end node** (no `issm`, no SMP agents) with one Subnet Administration agent, and the
//! sysfs reads that tell the client its port's LID and the SM's LID. The `unsafe` calls
//! (`open`, `ioctl`, `read`, `write`, `poll`, `close`) each have their `SAFETY:` comment.
//!
//! The agent is registered for class 0x03 version 2 on QP1 **without kernel RMPP**
//! (`rmpp_version` 0): the client reassembles multi-MAD answers itself
//! ([`fabric_sa::rmpp::receiver`]) and ACKs them, on a real HCA as under the simulator shim
//! (which has no RMPP). Its method mask holds only Report (0x06): responses to its own requests
//! reach it by TID whatever the mask, and Reports are the only unsolicited MADs it takes.
//!
//! Sysfs files are opened with `libc::open` (not `std::fs`, whose `open64` the umad2sim shim
//! does not intercept), so that under the shim they come from its emulated sysfs.

use std::os::fd::FromRawFd;
use std::os::raw::c_int;
use std::path::Path;
use std::time::Duration;

use super::device::{OpenError, RawPort, UmadFd};

/// Subnet Administration class and version.
const CLASS_SUBN_ADM: u8 = 0x03;
const SA_CLASS_VERSION: u8 = 2;
/// The SMP classes (LID-routed, directed route).
const CLASS_SMP_LID: u8 = 0x01;
const CLASS_SMP_DR: u8 = 0x81;
/// Report, the one unsolicited method the client receives.
const METHOD_REPORT: u8 = 0x06;
/// Largest sysfs attribute read.
const SYSFS_MAX: usize = 4096;

/// A umad descriptor with one SA agent (end node).
pub struct ClientPort {
    port: UmadFd,
    agent: u32,
    /// (class, agent id) of the SMP agents registered with `issm`.
    smp_agents: Vec<(u8, u32)>,
}

impl std::fmt::Debug for ClientPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientPort")
            .field("path", &self.port.path())
            .field("agent", &self.agent)
            .finish_non_exhaustive()
    }
}

impl ClientPort {
    /// Opens `path` (a `/dev/infiniband/umadN`) and registers the SA agent.
    pub fn open(path: &Path) -> Result<ClientPort, OpenError> {
        Self::open_inner(path, false)
    }

    /// [`ClientPort::open`], and opens the matching `issmN` too, with method-less agents for
    /// the two SMP classes. Only for the simulator: ibsim hands an unsolicited MAD (a Report)
    /// to a client of the port only if it opened `issm`. The port then advertises IsSM and
    /// the SM's SMInfo requests reach this process, which must answer them (the client says
    /// NOTACTIVE: an SM that waits for an SMInfo answer under the shim, which has no send
    /// timeouts, waits forever), and the shim kills a process that receives a MAD of a class
    /// it registered no agent for. On an HCA the SA agent's Report method is all a subscriber
    /// needs.
    pub fn open_with_issm(path: &Path) -> Result<ClientPort, OpenError> {
        Self::open_inner(path, true)
    }

    fn open_inner(path: &Path, issm: bool) -> Result<ClientPort, OpenError> {
        let mut port = ClientPort {
            port: UmadFd::open(path)?,
            agent: 0,
            smp_agents: Vec::new(),
        };
        let mut mask = [0u32; 4];
        mask[usize::from(METHOD_REPORT / 32)] |= 1u32 << (METHOD_REPORT % 32);
        port.agent = port.port.register_agent(1, CLASS_SUBN_ADM, SA_CLASS_VERSION, &mask)?;
        if issm {
            for class in [CLASS_SMP_LID, CLASS_SMP_DR] {
                let id = port.port.register_agent(0, class, 1, &[0; 4])?;
                port.smp_agents.push((class, id));
            }
            let issm_path = port
                .port
                .issm_path()
                .ok_or_else(|| OpenError::Missing(path.to_path_buf()))?;
            port.port
                .open_issm(&issm_path)
                .map_err(|e| OpenError::Os(issm_path.clone(), e))?;
        }
        Ok(port)
    }

    /// The SA agent's id.
    pub fn agent_id(&self) -> u32 {
        self.agent
    }
}

impl RawPort for ClientPort {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.port.write(buf)
    }
    fn read(&mut self, buf: &mut [u8]) -> Option<usize> {
        self.port.read(buf)
    }
    fn wait(&mut self, timeout: Duration) {
        self.port.wait(timeout);
    }
    fn agent(&self, class: u8) -> u32 {
        self.smp_agents
            .iter()
            .find(|(c, _)| *c == class)
            .map_or(self.agent, |(_, id)| *id)
    }
}

/// Reads a sysfs attribute (e.g. `/sys/class/infiniband/mlx5_0/ports/1/sm_lid`), trimmed.
/// Opened with `libc::open` so that the umad2sim shim redirects it to its emulated sysfs.
pub fn read_sysfs(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let fd = open_raw_readonly(path)?;
    // SAFETY: `fd` was just returned by a successful `open` of a regular (sysfs or emulated)
    // file, is not used anywhere else, and the `File` takes sole ownership and closes it.
    let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
    let mut s = String::new();
    f.by_ref().take(SYSFS_MAX as u64).read_to_string(&mut s)?;
    Ok(s.trim().to_string())
}

fn open_raw_readonly(path: &Path) -> std::io::Result<c_int> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL in sysfs path"))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call; `open` does not keep
    // the pointer. `libc::open` is what the simulator shim intercepts.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(fd)
    }
}
