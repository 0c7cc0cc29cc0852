//! The umad device: the `open`/`ioctl`/`read`/`write`/`poll`/`close` calls on the raw
//! descriptor (the only `unsafe` code of the crate, each block with its `SAFETY:` comment),
//! agent registration, and [`RawPort`], what the transport thread needs from a device (a fake
//! port in the tests).

use std::ffi::CString;
use std::os::raw::{c_int, c_ulong};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::mad::{CLASS_SMP_DR, CLASS_SMP_LID, METHOD_GET, METHOD_SET, METHOD_TRAP};
use crate::sa;
use fabric_sa::wire;

/// Length of the `ib_user_mad_hdr` this driver uses (the pre-pkey layout).
pub const UMAD_HDR_LEN: usize = 56;
/// `_IOWR(0x1b, 1, struct ib_user_mad_reg_req)`.
const IB_USER_MAD_REGISTER_AGENT: c_ulong = 0xC01C_1B01;

/// Raw access to a MAD port: what the transport thread needs from the device.
pub trait RawPort: Send + 'static {
    /// Writes one packet (header + MAD).
    fn write(&mut self, buf: &[u8]) -> std::io::Result<()>;
    /// Reads one packet if one is queued (never blocks).
    fn read(&mut self, buf: &mut [u8]) -> Option<usize>;
    /// Waits up to `timeout` for a packet to be readable.
    fn wait(&mut self, timeout: Duration);
    /// Agent id registered for `class`.
    fn agent(&self, class: u8) -> u32;
}

/// A raw umad descriptor, with the matching `issmN` one once opened: the agent registration
/// ioctl, the packet calls of [`RawPort`] and the `close` on drop, shared by [`UmadDevice`]
/// (the manager) and [`super::client_port::ClientPort`] (the SA client's end node).
pub(super) struct UmadFd {
    fd: c_int,
    issm_fd: Option<c_int>,
    path: PathBuf,
}

impl UmadFd {
    /// Opens `path` (a `/dev/infiniband/umadN`), read-write and non-blocking.
    pub(super) fn open(path: &Path) -> Result<UmadFd, OpenError> {
        // Under the simulator shim the device does not exist on disk but open() succeeds, so
        // only a *real* ENOENT from open counts as missing.
        let fd = open_raw(path).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::ENXIO) => OpenError::Missing(path.to_path_buf()),
            Some(libc::EACCES) | Some(libc::EPERM) => OpenError::Permission(path.to_path_buf()),
            _ => OpenError::Os(path.to_path_buf(), e),
        })?;
        Ok(UmadFd {
            fd,
            issm_fd: None,
            path: path.to_path_buf(),
        })
    }

    /// The device path it was opened from.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// The `issmN` path matching this `umadN` (`None` when the name does not start `umad`).
    pub(super) fn issm_path(&self) -> Option<PathBuf> {
        self.path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("umad"))
            .map(|n| self.path.with_file_name(format!("issm{n}")))
    }

    /// Opens `issm` (which advertises IsSM on the port while open); closed on drop.
    pub(super) fn open_issm(&mut self, issm: &Path) -> Result<(), std::io::Error> {
        self.issm_fd = Some(open_raw(issm)?);
        Ok(())
    }

    /// Registers an agent for `class` (version `version`) on QP `qpn` receiving the unsolicited
    /// methods of `mask` (bit m of word m / 32: the kernel's `long` bitmap on a little-endian
    /// 64-bit host), without kernel RMPP (`rmpp_version` 0: the transport's SA agent and the
    /// client do RMPP in user space).
    pub(super) fn register_agent(&self, qpn: u8, class: u8, version: u8, mask: &[u32; 4]) -> Result<u32, OpenError> {
        // struct ib_user_mad_reg_req: id u32 @0, method_mask [u32; 4] @4, qpn @20,
        // mgmt_class @21, mgmt_class_version @22, oui[3] @23, rmpp_version @26 (0: no kernel
        // RMPP), padding @27.
        let mut req = [0u8; 28];
        for (i, w) in mask.iter().enumerate() {
            req[4 + 4 * i..8 + 4 * i].copy_from_slice(&w.to_ne_bytes());
        }
        req[20] = qpn;
        req[21] = class;
        req[22] = version;
        req[26] = 0;
        // SAFETY: REGISTER_AGENT reads and writes exactly 28 bytes (the size encoded in the
        // ioctl number), and `req` is a live 28-byte buffer for the duration of the call.
        let r = unsafe { libc::ioctl(self.fd, IB_USER_MAD_REGISTER_AGENT as _, req.as_mut_ptr()) };
        if r < 0 {
            return Err(OpenError::Register {
                path: self.path.clone(),
                class,
                err: std::io::Error::last_os_error(),
            });
        }
        Ok(u32::from_ne_bytes([req[0], req[1], req[2], req[3]]))
    }

    /// [`RawPort::write`]: one packet (header + MAD).
    pub(super) fn write(&mut self, buf: &[u8]) -> std::io::Result<()> {
        // SAFETY: `buf` is valid for `buf.len()` bytes during the call.
        let n = unsafe { libc::write(self.fd, buf.as_ptr().cast(), buf.len()) };
        if n < 0 || n as usize != buf.len() {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// [`RawPort::read`]: one packet if one is queued.
    pub(super) fn read(&mut self, buf: &mut [u8]) -> Option<usize> {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes during the call. The shim
        // returns a negative value without setting errno when nothing is queued.
        let n = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
        (n > 0).then_some(n as usize)
    }

    /// [`RawPort::wait`]: up to `timeout` for a packet to be readable.
    pub(super) fn wait(&mut self, timeout: Duration) {
        let mut p = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as c_int;
        // SAFETY: `p` is one valid pollfd for the duration of the call.
        unsafe {
            libc::poll(&raw mut p, 1, ms);
        }
    }
}

impl Drop for UmadFd {
    fn drop(&mut self) {
        // SAFETY: the descriptors were returned by `open` and are closed exactly once here; they
        // are raw integers (under the shim fake ones), never owned by `File`/`OwnedFd`.
        unsafe {
            libc::close(self.fd);
            if let Some(f) = self.issm_fd {
                libc::close(f);
            }
        }
    }
}

/// An open umad device with agents registered for classes 0x81 and 0x01 (both also receive
/// the Get/Set requests addressed to the manager's port: SMInfo from `sminfo` and other
/// subnet managers), for Subnet Administration (0x03, QP1: SA clients' queries and the RMPP
/// ACKs of the answers, both on request methods; no kernel RMPP: the transport's SA agent does
/// it) and, without methods, for the GSI classes of [`crate::sa::GUARD_CLASSES`] (the
/// simulator shim crashes the process on a MAD of a class nobody registered).
pub struct UmadDevice {
    port: UmadFd,
    agent_dr: u32,
    agent_lid: u32,
    /// (class, agent id) of the GSI agents that could be registered.
    agents_gsi: Vec<(u8, u32)>,
}

/// Errors opening the device.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The device file does not exist.
    #[error("umad device {} does not exist (is the ib_umad module loaded? is this the right HCA?)", .0.display())]
    Missing(PathBuf),
    /// Permission denied.
    #[error("permission denied opening {} (run as root or grant access to /dev/infiniband/umad*)", .0.display())]
    Permission(PathBuf),
    /// Other OS error.
    #[error("cannot open {}: {}", .0.display(), .1)]
    Os(PathBuf, std::io::Error),
    /// Agent registration failed.
    #[error("cannot register an agent for management class {class:#04x} on {}: {err}", path.display())]
    Register {
        path: PathBuf,
        class: u8,
        err: std::io::Error,
    },
}

pub(super) fn open_raw(path: &Path) -> Result<c_int, std::io::Error> {
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL in device path"))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call; `open` does not keep
    // the pointer. `libc::open` (not open64) is what the simulator shim intercepts.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK) };
    if fd < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(fd)
    }
}

impl UmadDevice {
    /// Opens `path` (a `/dev/infiniband/umadN`), registers the SM agents and opens the
    /// matching `issmN` (which advertises IsSM on the port; failure there is not fatal).
    pub fn open(path: &Path) -> Result<UmadDevice, OpenError> {
        let mut dev = UmadDevice {
            port: UmadFd::open(path)?,
            agent_dr: 0,
            agent_lid: 0,
            agents_gsi: Vec::new(),
        };
        // Unsolicited MADs these agents receive: the Get/Set requests addressed to the manager
        // (SMInfo; another SM polls it over directed route during its sweep, `sminfo` LID
        // routed) on both classes, and Traps (method 0x05) on the LID-routed one. The
        // responses to the driver's own requests do not depend on the mask: the kernel matches
        // them to the sending agent by TID.
        let sm_mask = (1u32 << METHOD_GET) | (1u32 << METHOD_SET);
        dev.agent_dr = dev.port.register_agent(0, CLASS_SMP_DR, 1, &[sm_mask, 0, 0, 0])?;
        dev.agent_lid = dev
            .port
            .register_agent(0, CLASS_SMP_LID, 1, &[sm_mask | (1u32 << METHOD_TRAP), 0, 0, 0])?;
        // GSI agents (QP1). Not fatal: a kernel may refuse one (another SA on this port); the
        // simulator shim never does, and there they keep the process alive.
        let mut sa_mask = [0u32; 4];
        for m in [
            wire::METHOD_GET,
            wire::METHOD_SET,
            wire::METHOD_GET_TABLE,
            wire::METHOD_GET_TRACE_TABLE,
            wire::METHOD_GET_MULTI,
            wire::METHOD_DELETE,
        ] {
            sa_mask[usize::from(m / 32)] |= 1u32 << (m % 32);
        }
        let gsi = std::iter::once((sa::CLASS_SUBN_ADM, sa::SA_CLASS_VERSION, sa_mask))
            .chain(sa::GUARD_CLASSES.iter().map(|&(c, v)| (c, v, [0u32; 4])));
        for (class, version, mask) in gsi {
            match dev.port.register_agent(1, class, version, &mask) {
                Ok(id) => dev.agents_gsi.push((class, id)),
                Err(e) => tracing::warn!("{e}; MADs of that class addressed to the manager's port go unanswered"),
            }
        }
        if let Some(issm) = dev.port.issm_path() {
            // Not fatal: the port then does not advertise IsSM.
            let _ = dev.port.open_issm(&issm);
        }
        Ok(dev)
    }
}

impl RawPort for UmadDevice {
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
        match class {
            CLASS_SMP_DR => self.agent_dr,
            CLASS_SMP_LID => self.agent_lid,
            c => self
                .agents_gsi
                .iter()
                .find(|(g, _)| *g == c)
                .map_or(self.agent_lid, |(_, id)| *id),
        }
    }
}
