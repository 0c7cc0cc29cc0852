//! The project's own Subnet Administration client: [`SaClient`] asks the master SM's SA
//! (fabricd's or OpenSM's) questions from an end node, the way `saquery`, `rdma_cm` and IPoIB
//! do, and reads whole tables with RMPP done in user space.
//!
//! * The device is opened as an end node ([`crate::transport::ClientPort`]): one SA agent
//!   (class 0x03, version 2, QP1) without kernel RMPP, receiving only responses and Reports.
//!   Under the ibsim shim, run the program with `LD_PRELOAD=libumad2sim.so` and `SIM_HOST=<node>`
//!   like the infiniband-diags tools.
//! * The SM's LID comes from the port's sysfs `sm_lid` (PortInfo:MasterSMLID, what `saquery`
//!   reads through libibumad), unless [`ClientConfig::sm_lid`] overrides it.
//! * One I/O thread owns the descriptor (the shim forbids async I/O on it). Queries from any
//!   number of threads share it ([`SaClient::query`] blocks the caller only): each gets a
//!   unique TID (low 32 bits; the kernel and the shim stamp the agent in the high ones), a
//!   deadline per attempt and a new TID per retry.
//! * Answers: a single MAD (Get, Set, Delete, errors) or an RMPP transfer (GetTableResp,
//!   GetMultiResp, always RMPP) reassembled by [`fabric_sa::rmpp::receiver`], whose ACKs go
//!   back to the SA's LID on QP1 with Q_Key 0x80010000. A transfer's deadline moves with every
//!   segment that arrives.
//! * Requests: one MAD, but for a GetMulti (MultiPathRecord) whose GIDs do not fit one
//!   (more than 11): it goes out as a multi-segment RMPP transfer through
//!   [`fabric_sa::rmpp::sender`] (window opened by the SA's ACKs, resends on the sender's
//!   timer), then its answer is awaited like any other.
//! * Reports (InformInfo subscriptions) are answered with a ReportResp and queued for
//!   [`SaClient::next_report`]. Under ibsim a Report reaches only a client that opened `issm`
//!   ([`ClientConfig::issm`]).
//!
//! Layout: this module holds the types, the configuration, the local port (sysfs) and the
//! [`SaClient`] handle; `io` is the I/O thread.
//!
//! Simulator limit (umad2sim has no RMPP and no kernel in between): an SA whose RMPP the
//! kernel does (OpenSM) reaches the client unsegmented, as the first 200 bytes of its table
//! with the RMPP header as the SA wrote it (ACTIVE, no segment number); the client returns
//! that MAD's records and flags the answer [`SaAnswer::unsegmented`].

mod io;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fabric_sa::rmpp::receiver::{ReceiverConfig, RmppError};
use fabric_sa::wire::{self, SaHeader, MAD_SIZE, SA_DATA_SIZE, SA_HEADER_SIZE};

use io::{Cmd, Io};

use crate::mad::{
    SmInfo, Smp, ATTR_SM_INFO, CLASS_SMP_DR, PERMISSIVE_LID, SMP_DATA_SIZE, SM_STATE_NOT_ACTIVE,
    STATUS_UNSUPPORTED_ATTR,
};
use crate::transport::{read_sysfs, ClientPort, OpenError, RawPort, UMAD_HDR_LEN};

/// The well-known Q_Key of QP1.
pub const QP1_QKEY: u32 = 0x8001_0000;
/// The default umad device.
pub const DEFAULT_DEVICE: &str = "/dev/infiniband/umad0";
/// Receive buffer: the umad header, one MAD, and room the simulator shim may write past it.
const RX_BUF: usize = UMAD_HDR_LEN + MAD_SIZE + 512;
/// umad devices searched for a CA name.
const MAX_UMAD_DEVICES: u32 = 64;

/// How to reach the SA.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The umad device (`/dev/infiniband/umadN`); found from [`ClientConfig::ca`] when unset.
    pub device: Option<PathBuf>,
    /// The CA name (`mlx5_0`; `ibsim0` under the shim): its first umad port.
    pub ca: Option<String>,
    /// The SA's LID (default: the port's MasterSMLID).
    pub sm_lid: Option<u16>,
    /// Deadline of one attempt (for an RMPP transfer: without a new segment).
    pub timeout: Duration,
    /// Attempts after the first.
    pub retries: u32,
    /// Reassembly limits.
    pub rmpp: ReceiverConfig,
    /// Also open `issm` (simulator only: see [`ClientPort::open_with_issm`]); subscribers
    /// under ibsim need it to receive Reports.
    pub issm: bool,
    /// MAD bytes the transport really delivers: 256 on an HCA; [`SHIM_VALID_MAD_BYTES`] under
    /// the umad2sim shim. `None`: the shim's value when `LD_PRELOAD` names `umad2sim`.
    pub valid_mad_bytes: Option<usize>,
}

/// MAD bytes the umad2sim shim delivers of a received MAD (measured: bytes 232..256 are not
/// copied, what is there is stale memory; the shim's receive buffer is one `sim_request`).
pub const SHIM_VALID_MAD_BYTES: usize = 232;

/// Largest GetMulti request payload sent (SA data bytes): a MultiPathRecord of 255 SGIDs and
/// 255 DGIDs (8 184 bytes), what the SA agent reassembles.
pub const MAX_MULTI_REQUEST: usize = 8192;

/// [`ClientConfig::valid_mad_bytes`] resolved: the shim's limit when this process runs under
/// umad2sim (`LD_PRELOAD`), else a whole MAD.
pub fn valid_mad_bytes(cfg: &ClientConfig) -> usize {
    cfg.valid_mad_bytes
        .unwrap_or_else(|| {
            if under_umad2sim() {
                SHIM_VALID_MAD_BYTES
            } else {
                MAD_SIZE
            }
        })
        .clamp(SA_HEADER_SIZE, MAD_SIZE)
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            device: None,
            ca: None,
            sm_lid: None,
            timeout: Duration::from_millis(1000),
            retries: 3,
            rmpp: ReceiverConfig::default(),
            valid_mad_bytes: None,
            issm: false,
        }
    }
}

/// The answer of a port that opened `issm` but runs no SM to an SMP request `mad` from
/// `from_lid`: SMInfo says NOTACTIVE, priority 0, GUID `port_guid`; any other attribute is
/// "unsupported". With the LID to send it to (the permissive LID for a directed-route request
/// that came all the way by directed route). `None` for what is not a request.
pub fn answer_smp(mad: &[u8], from_lid: u16, port_guid: u64) -> Option<(Smp, u16)> {
    let req = Smp::parse(mad).ok()?;
    if !req.is_request() || req.direction() {
        return None;
    }
    let resp = if req.attr_id() == ATTR_SM_INFO {
        let info = SmInfo {
            guid: port_guid,
            sm_key: 0,
            act_count: 0,
            priority: 0,
            state: SM_STATE_NOT_ACTIVE,
        };
        req.response(0, &info.encode())
    } else {
        req.response(STATUS_UNSUPPORTED_ATTR, &[0u8; SMP_DATA_SIZE])
    };
    let to = if req.class() == CLASS_SMP_DR && req.dr_dlid() == PERMISSIVE_LID {
        PERMISSIVE_LID
    } else {
        from_lid
    };
    Some((resp, to))
}

/// Whether this process runs under the umad2sim shim (`LD_PRELOAD` names it).
pub fn under_umad2sim() -> bool {
    std::env::var("LD_PRELOAD").is_ok_and(|p| p.contains("umad2sim"))
}

/// Why a query got no answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The device could not be opened or the agent registered.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// A sysfs attribute of the port could not be read.
    #[error("cannot read {}: {err}", path.display())]
    Sysfs { path: PathBuf, err: std::io::Error },
    /// A sysfs attribute did not parse.
    #[error("{}: {value:?} is not a {what}", path.display())]
    BadSysfs {
        path: PathBuf,
        value: String,
        what: &'static str,
    },
    /// No umad device belongs to the CA.
    #[error("no umad device of CA {0:?} among /dev/infiniband/umad0..{MAX_UMAD_DEVICES}")]
    NoSuchCa(String),
    /// The port knows no master SM (MasterSMLID 0) and none was given.
    #[error("port {port} of {ca} has no master SM (MasterSMLID 0); is a subnet manager running? (--sm-lid overrides)")]
    NoSm { ca: String, port: u8 },
    /// No answer within every attempt.
    #[error("no answer from the SA at LID {sm_lid} to {what} after {attempts} attempt(s)")]
    Timeout { sm_lid: u16, what: String, attempts: u32 },
    /// An RMPP transfer failed.
    #[error("{what}: {err}")]
    Rmpp { what: String, err: RmppError },
    /// A request that needs more than one MAD (only a GetMulti is sent as several, up to
    /// [`MAX_MULTI_REQUEST`] bytes).
    #[error("request of {0} data bytes does not fit one MAD (at most 200; a GetMulti at most 8192)")]
    RequestTooLarge(usize),
    /// The I/O thread is gone.
    #[error("the SA client's I/O thread stopped")]
    Closed,
}

/// The local port the client speaks from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalPort {
    pub device: PathBuf,
    pub ca: String,
    pub port: u8,
    pub lid: u16,
    pub sm_lid: u16,
    pub sm_sl: u8,
    /// GID index 0 (subnet prefix and port GUID), when sysfs has it.
    pub gid: Option<[u8; 16]>,
}

/// One SA request: header fields and the record template (or, for GetMulti, its payload).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SaQuery {
    pub method: u8,
    pub attr_id: u16,
    pub attr_mod: u32,
    pub component_mask: u64,
    pub sm_key: u64,
    /// AttributeOffset of the request (8-byte words; 0 for Get/GetTable, set for GetMulti).
    pub attr_offset: u16,
    pub data: Vec<u8>,
    /// Deliberately malformed requests (tests of an SA's error handling): a class version
    /// other than 2, an RMPP header written as given (bytes 24..36), a MAD cut to this many
    /// bytes on the wire.
    pub malformed: Malformed,
}

/// How [`SaQuery::malformed`] breaks a request (default: not at all).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Malformed {
    pub class_version: Option<u8>,
    pub rmpp: Option<[u8; 12]>,
    pub mad_bytes: Option<usize>,
}

/// An answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaAnswer {
    /// The response header (of the first segment for RMPP).
    pub header: SaHeader,
    /// The SA data: one record, or the records of a table (`attr_offset * 8` bytes apart).
    pub data: Vec<u8>,
    /// Came as an RMPP transfer.
    pub rmpp: bool,
    /// RMPP segments (1 for a single MAD).
    pub segments: u32,
    /// The response carried RMPP ACTIVE but no segment header (an SA behind the simulator
    /// shim, which has no RMPP): only its first MAD's data is here.
    pub unsegmented: bool,
    /// Attempts it took.
    pub attempts: u32,
    /// Time from the first send to the answer.
    pub elapsed: Duration,
    /// Byte ranges of `data` the transport did not deliver (zero-filled): under the umad2sim
    /// shim the last 24 data bytes of every MAD ([`SHIM_VALID_MAD_BYTES`]); empty on an HCA.
    pub undelivered: Vec<(usize, usize)>,
}

impl SaAnswer {
    /// The MAD status.
    pub fn status(&self) -> u16 {
        self.header.status
    }

    /// Whether record image `i` (of [`SaAnswer::records`]) lies wholly in delivered bytes.
    pub fn record_delivered(&self, i: usize) -> bool {
        let size = usize::from(self.header.attr_offset) * 8;
        let (a, b) = if self.rmpp {
            (i * size, (i + 1) * size)
        } else {
            (0, size.max(1))
        };
        self.undelivered.iter().all(|&(x, y)| y <= a || x >= b)
    }

    /// The record images: for a table, every `attr_offset * 8` bytes (a trailing partial one
    /// dropped); for a single answer, the whole data.
    pub fn records(&self) -> Vec<&[u8]> {
        let size = usize::from(self.header.attr_offset) * 8;
        if !self.rmpp {
            if self.data.is_empty() || self.header.status != wire::status::OK {
                return Vec::new();
            }
            let size = if size == 0 {
                self.data.len()
            } else {
                size.min(self.data.len())
            };
            return vec![&self.data[..size]];
        }
        if size == 0 {
            return Vec::new();
        }
        self.data.chunks_exact(size).collect()
    }
}

/// A Report received (answered with ReportResp already).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub header: SaHeader,
    /// The Notice (SA data of the Report).
    pub data: Vec<u8>,
    pub from_lid: u16,
}

/// I/O counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    pub sent: u64,
    pub received: u64,
    pub acks_sent: u64,
    pub retries: u64,
    pub timeouts: u64,
    pub stray: u64,
    pub reports: u64,
    /// SMPs answered (SMInfo polls of an SM while `issm` is open).
    pub sm_info_answers: u64,
}

/// The SA client: a handle to its I/O thread. Shareable between threads (`&self` queries).
pub struct SaClient {
    tx: Mutex<mpsc::Sender<Cmd>>,
    local: LocalPort,
    reports: Mutex<mpsc::Receiver<Report>>,
    stats: Arc<Mutex<ClientStats>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for SaClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaClient")
            .field("local", &self.local)
            .finish_non_exhaustive()
    }
}

fn sysfs(path: PathBuf) -> Result<String, ClientError> {
    read_sysfs(&path).map_err(|err| ClientError::Sysfs { path, err })
}

fn parse_num(path: &Path, v: &str, what: &'static str) -> Result<u32, ClientError> {
    let t = v.split(':').next().unwrap_or("").trim();
    let r = match t.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16),
        None => t.parse(),
    };
    r.map_err(|_| ClientError::BadSysfs {
        path: path.to_path_buf(),
        value: v.to_string(),
        what,
    })
}

fn parse_gid(s: &str) -> Option<[u8; 16]> {
    let groups: Vec<&str> = s.trim().split(':').collect();
    if groups.len() != 8 {
        return None;
    }
    let mut g = [0u8; 16];
    for (i, w) in groups.iter().enumerate() {
        let v = u16::from_str_radix(w, 16).ok()?;
        g[2 * i..2 * i + 2].copy_from_slice(&v.to_be_bytes());
    }
    Some(g)
}

/// The local port behind `cfg`: device, CA, port number, LIDs (from sysfs).
pub fn local_port(cfg: &ClientConfig) -> Result<LocalPort, ClientError> {
    let mad_dir = Path::new("/sys/class/infiniband_mad");
    let device = match (&cfg.device, &cfg.ca) {
        (Some(d), _) => d.clone(),
        (None, None) => PathBuf::from(DEFAULT_DEVICE),
        (None, Some(ca)) => {
            let mut found = None;
            for n in 0..MAX_UMAD_DEVICES {
                match read_sysfs(&mad_dir.join(format!("umad{n}/ibdev"))) {
                    Ok(name) if &name == ca => {
                        found = Some(PathBuf::from(format!("/dev/infiniband/umad{n}")));
                        break;
                    }
                    _ => {}
                }
            }
            found.ok_or_else(|| ClientError::NoSuchCa(ca.clone()))?
        }
    };
    let name = device
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("umad0")
        .to_string();
    let ca = sysfs(mad_dir.join(&name).join("ibdev"))?;
    let port_path = mad_dir.join(&name).join("port");
    let port = parse_num(&port_path, &sysfs(port_path.clone())?, "port number")? as u8;
    let ports = Path::new("/sys/class/infiniband")
        .join(&ca)
        .join("ports")
        .join(port.to_string());
    let lid_path = ports.join("lid");
    let lid = parse_num(&lid_path, &sysfs(lid_path.clone())?, "LID")? as u16;
    let sm_path = ports.join("sm_lid");
    let port_sm = parse_num(&sm_path, &sysfs(sm_path.clone())?, "LID")? as u16;
    let sm_sl = read_sysfs(&ports.join("sm_sl"))
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let gid = read_sysfs(&ports.join("gids/0")).ok().and_then(|s| parse_gid(&s));
    let sm_lid = match cfg.sm_lid {
        Some(l) => l,
        None if port_sm != 0 => port_sm,
        None => return Err(ClientError::NoSm { ca, port }),
    };
    Ok(LocalPort {
        device,
        ca,
        port,
        lid,
        sm_lid,
        sm_sl,
        gid,
    })
}

impl SaClient {
    /// Opens the port of `cfg` as an end node and starts the I/O thread.
    pub fn open(cfg: &ClientConfig) -> Result<SaClient, ClientError> {
        // sysfs first: under the shim the first sysfs read starts the simulated device.
        let local = local_port(cfg)?;
        let port = if cfg.issm {
            ClientPort::open_with_issm(&local.device)?
        } else {
            ClientPort::open(&local.device)?
        };
        Ok(Self::start(port, local, cfg))
    }

    /// Starts the client on an open port (a fake one in the tests).
    pub fn start<P: RawPort>(port: P, local: LocalPort, cfg: &ClientConfig) -> SaClient {
        let (tx, rx) = mpsc::channel();
        let (rtx, rrx) = mpsc::channel();
        let stats = Arc::new(Mutex::new(ClientStats::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let io = Io::new(port, &local, cfg, rtx, stats.clone());
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("sa-client".into())
            .spawn(move || io.run(rx, &stop2))
            .ok();
        SaClient {
            tx: Mutex::new(tx),
            local,
            reports: Mutex::new(rrx),
            stats,
            stop,
            thread,
        }
    }

    /// The local port.
    pub fn local(&self) -> &LocalPort {
        &self.local
    }

    /// Counters of the I/O thread.
    pub fn stats(&self) -> ClientStats {
        *self.stats.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sends `q` and waits for its answer (any MAD status: the caller decides).
    pub fn query(&self, q: SaQuery) -> Result<SaAnswer, ClientError> {
        let max = if q.method == wire::METHOD_GET_MULTI {
            MAX_MULTI_REQUEST
        } else {
            SA_DATA_SIZE
        };
        if q.data.len() > max {
            return Err(ClientError::RequestTooLarge(q.data.len()));
        }
        let (reply, rx) = mpsc::channel();
        self.tx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .send(Cmd::Query { q, reply })
            .map_err(|_| ClientError::Closed)?;
        rx.recv().unwrap_or(Err(ClientError::Closed))
    }

    /// The next Report received, waiting at most `within`.
    pub fn next_report(&self, within: Duration) -> Option<Report> {
        self.reports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .recv_timeout(within)
            .ok()
    }
}

impl Drop for SaClient {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fabric_sa::rmpp::receiver::segments;
    use fabric_sa::wire::rmpp_flag;
    use std::collections::VecDeque;
    use std::sync::Mutex as StdMutex;

    type AnswerFn = dyn FnMut(&SaHeader) -> Vec<Box<[u8; MAD_SIZE]>> + Send;

    /// A fake SA behind a fake port: answers every request with `answer(request header)`
    /// (a list of MADs), records what the client wrote.
    struct FakeSa {
        inbox: Arc<StdMutex<VecDeque<Vec<u8>>>>,
        written: Arc<StdMutex<Vec<Vec<u8>>>>,
        answer: Box<AnswerFn>,
    }

    impl RawPort for FakeSa {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<()> {
            self.written.lock().unwrap().push(buf.to_vec());
            let h = SaHeader::decode(&buf[UMAD_HDR_LEN..]).expect("client wrote an SA MAD");
            let request = h.rmpp.rmpp_type == 0 || h.rmpp.rmpp_type == fabric_sa::wire::rmpp_type::DATA;
            if h.method & wire::METHOD_RESPONSE == 0 && request {
                for m in (self.answer)(&h) {
                    let mut p = vec![0u8; UMAD_HDR_LEN];
                    p[20..24].copy_from_slice(&1u32.to_be_bytes());
                    p[28..30].copy_from_slice(&7u16.to_be_bytes());
                    p.extend_from_slice(&m[..]);
                    self.inbox.lock().unwrap().push_back(p);
                }
            }
            Ok(())
        }
        fn read(&mut self, buf: &mut [u8]) -> Option<usize> {
            let p = self.inbox.lock().unwrap().pop_front()?;
            buf[..p.len()].copy_from_slice(&p);
            Some(p.len())
        }
        fn wait(&mut self, _: Duration) {}
        fn agent(&self, _: u8) -> u32 {
            5
        }
    }

    fn local() -> LocalPort {
        LocalPort {
            device: PathBuf::from("/dev/null"),
            ca: "fake".into(),
            port: 1,
            lid: 3,
            sm_lid: 7,
            sm_sl: 0,
            gid: None,
        }
    }

    fn fake(
        answer: impl FnMut(&SaHeader) -> Vec<Box<[u8; MAD_SIZE]>> + Send + 'static,
    ) -> (FakeSa, Arc<StdMutex<Vec<Vec<u8>>>>) {
        let written = Arc::new(StdMutex::new(Vec::new()));
        (
            FakeSa {
                inbox: Arc::new(StdMutex::new(VecDeque::new())),
                written: written.clone(),
                answer: Box::new(answer),
            },
            written,
        )
    }

    fn cfg() -> ClientConfig {
        ClientConfig {
            timeout: Duration::from_millis(50),
            retries: 1,
            valid_mad_bytes: Some(MAD_SIZE),
            ..ClientConfig::default()
        }
    }

    /// The SA side of [`Bridge`]: records the (reassembled) request, answers PathRecords.
    #[derive(Default)]
    struct RecordingSa {
        requests: StdMutex<Vec<Vec<u8>>>,
    }

    const ANSWER_RECORDS: usize = 5;

    impl crate::transport::SaEndpoint for RecordingSa {
        fn serving(&self) -> bool {
            true
        }
        fn handle(
            &self,
            mad: &[u8],
            _: &fabric_sa::Requester,
            _: std::time::SystemTime,
        ) -> Option<fabric_sa::SaResponse> {
            let h = SaHeader::decode(mad).ok()?;
            self.requests.lock().unwrap().push(mad[SA_HEADER_SIZE..].to_vec());
            let mut header = fabric_sa::request::response_header(&h);
            header.attr_offset = 8;
            Some(fabric_sa::SaResponse {
                header,
                data: (0..64 * ANSWER_RECORDS).map(|i| (i * 3) as u8).collect(),
            })
        }
        fn take_reports(&self) -> Vec<fabric_sa::service::OutgoingReport> {
            Vec::new()
        }
    }

    /// The client's port wired to the transport's SA agent: what the client writes reaches
    /// the agent cut to `valid` bytes (232 under the ibsim shim), what the agent sends comes
    /// back at the length it writes.
    struct Bridge {
        agent: crate::transport::SaAgent,
        sa: Arc<RecordingSa>,
        stats: crate::transport::Stats,
        valid: usize,
        inbox: VecDeque<Vec<u8>>,
    }

    impl RawPort for Bridge {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<()> {
            let from = fabric_sa::Requester {
                lid: 3,
                qpn: 1,
                ..fabric_sa::Requester::default()
            };
            let mad = &buf[UMAD_HDR_LEN..buf.len().min(UMAD_HDR_LEN + self.valid)];
            let mut out = Vec::new();
            let now = std::time::Instant::now();
            let sa: &dyn crate::transport::SaEndpoint = &*self.sa;
            self.agent.on_mad(
                Some(sa),
                mad,
                &from,
                now,
                std::time::SystemTime::now(),
                &self.stats,
                &mut out,
            );
            for o in out {
                let mut p = vec![0u8; UMAD_HDR_LEN];
                p[20..24].copy_from_slice(&1u32.to_be_bytes());
                p[28..30].copy_from_slice(&7u16.to_be_bytes());
                p.extend_from_slice(&o.mad[..o.len]);
                self.inbox.push_back(p);
            }
            Ok(())
        }
        fn read(&mut self, buf: &mut [u8]) -> Option<usize> {
            let p = self.inbox.pop_front()?;
            buf[..p.len()].copy_from_slice(&p);
            Some(p.len())
        }
        fn wait(&mut self, _: Duration) {}
        fn agent(&self, _: u8) -> u32 {
            5
        }
    }

    fn multi_path_query(gids: usize) -> SaQuery {
        let size = 24 + 16 * gids;
        let mut data: Vec<u8> = (0..size).map(|i| (i % 251) as u8 | 1).collect();
        data[15] = (gids / 2) as u8;
        data[16] = (gids - gids / 2) as u8;
        SaQuery {
            method: wire::METHOD_GET_MULTI,
            attr_id: wire::attr::MULTI_PATH_RECORD,
            attr_offset: (size / 8) as u16,
            data,
            ..SaQuery::default()
        }
    }

    fn bridge(valid: usize) -> (Bridge, Arc<RecordingSa>) {
        let sa = Arc::new(RecordingSa::default());
        (
            Bridge {
                agent: crate::transport::SaAgent::new(crate::transport::SaAgentParams::default()),
                sa: sa.clone(),
                stats: crate::transport::Stats::default(),
                valid,
                inbox: VecDeque::new(),
            },
            sa,
        )
    }

    #[test]
    fn a_multi_mad_get_multi_is_sent_as_rmpp_and_reassembled_by_the_sa_agent() {
        for gids in [11usize, 12, 40, 510] {
            let (port, sa) = bridge(MAD_SIZE);
            let c = SaClient::start(port, local(), &cfg());
            let q = multi_path_query(gids);
            let sent = q.data.clone();
            let a = c.query(q).unwrap_or_else(|e| panic!("{gids} GIDs: {e}"));
            assert_eq!(
                (a.header.method, a.header.status, a.rmpp),
                (wire::METHOD_GET_MULTI_RESP, 0, true),
                "{gids} GIDs"
            );
            assert_eq!(a.records().len(), ANSWER_RECORDS, "{gids} GIDs");
            let got = sa.requests.lock().unwrap().clone();
            assert_eq!(got.len(), 1, "{gids} GIDs: answered once");
            if sent.len() <= SA_DATA_SIZE {
                // One MAD: the SA sees its 200 data bytes.
                assert_eq!(&got[0][..sent.len()], &sent[..], "{gids} GIDs");
            } else {
                assert_eq!(got[0], sent, "{gids} GIDs: the SA got the whole payload");
            }
            assert_eq!(c.stats().timeouts, 0);
        }
    }

    #[test]
    fn under_the_shim_a_multi_mad_get_multi_loses_the_tail_of_every_segment() {
        let (port, sa) = bridge(SHIM_VALID_MAD_BYTES);
        let c = SaClient::start(port, local(), &cfg());
        let q = multi_path_query(40);
        let sent = q.data.clone();
        let a = c.query(q).expect("answer");
        assert_eq!(a.header.status, 0);
        let got = sa.requests.lock().unwrap()[0].clone();
        assert_eq!(got.len(), sent.len());
        for (i, (g, s)) in got.iter().zip(&sent).enumerate() {
            // Data bytes 176..200 of every segment never reach the SA (they read as zero).
            let lost = i % SA_DATA_SIZE >= SHIM_VALID_MAD_BYTES - SA_HEADER_SIZE;
            assert_eq!(*g, if lost { 0 } else { *s }, "byte {i}");
        }
    }

    #[test]
    fn under_the_shim_the_tail_of_every_segment_is_marked_undelivered() {
        let table: Vec<u8> = (0..64 * 11).map(|i| i as u8).collect();
        let t2 = table.clone();
        let (port, _) = fake(move |h| {
            let mut r = *h;
            r.method = wire::METHOD_GET_TABLE_RESP;
            r.attr_offset = 8;
            segments(&r, &t2)
        });
        let c = SaClient::start(
            port,
            local(),
            &ClientConfig {
                valid_mad_bytes: Some(SHIM_VALID_MAD_BYTES),
                ..cfg()
            },
        );
        let a = c
            .query(SaQuery {
                method: wire::METHOD_GET_TABLE,
                attr_id: wire::attr::PATH_RECORD,
                ..SaQuery::default()
            })
            .expect("answer");
        assert_eq!(a.undelivered, vec![(176, 200), (376, 400), (576, 600)]);
        assert_eq!(a.data.len(), table.len());
        for (i, (got, want)) in a.data.iter().zip(&table).enumerate() {
            let lost = a.undelivered.iter().any(|&(x, y)| (x..y).contains(&i));
            assert_eq!(*got, if lost { 0 } else { *want }, "byte {i}");
        }
        // Records touching 176..200, 376..400 or 576..600 (2, 3, 5, 6, 9) are not delivered.
        let delivered: Vec<usize> = (0..11).filter(|&i| a.record_delivered(i)).collect();
        assert_eq!(delivered, vec![0, 1, 4, 7, 8, 10]);
    }

    #[test]
    fn a_table_is_reassembled_and_every_ack_goes_to_the_sa() {
        let table: Vec<u8> = (0..64 * 11).map(|i| i as u8).collect();
        let t2 = table.clone();
        let (port, written) = fake(move |h| {
            let mut r = *h;
            r.method = wire::METHOD_GET_TABLE_RESP;
            r.attr_offset = 8;
            segments(&r, &t2)
        });
        let c = SaClient::start(port, local(), &cfg());
        let a = c
            .query(SaQuery {
                method: wire::METHOD_GET_TABLE,
                attr_id: wire::attr::PATH_RECORD,
                ..SaQuery::default()
            })
            .expect("answer");
        assert!(a.rmpp && !a.unsegmented);
        assert_eq!(a.segments, 4);
        assert_eq!(a.data, table);
        assert_eq!(a.records().len(), 11);
        let w = written.lock().unwrap();
        // The request, the ACK of segment 1 (window announced), the ACK of the LAST one.
        assert_eq!(w.len(), 3);
        let first = SaHeader::decode(&w[1][UMAD_HDR_LEN..]).unwrap();
        assert_eq!((first.rmpp.data1, first.rmpp.data2), (1, 17));
        let ack = &w[2];
        assert_eq!(u16::from_be_bytes([ack[28], ack[29]]), 7, "ACK to the SA's LID");
        assert_eq!(u32::from_be_bytes([ack[24], ack[25], ack[26], ack[27]]), QP1_QKEY);
        let h = SaHeader::decode(&ack[UMAD_HDR_LEN..]).unwrap();
        assert_eq!(
            (h.method, h.rmpp.rmpp_type, h.rmpp.data1),
            (wire::METHOD_GET_TABLE, 2, 4)
        );
    }

    #[test]
    fn a_lost_answer_is_retried_under_a_new_tid_then_reported() {
        let mut calls = 0;
        let (port, written) = fake(move |h| {
            calls += 1;
            if calls == 1 {
                return Vec::new();
            }
            let mut r = *h;
            r.method = wire::METHOD_GET_RESP;
            let mut b = Box::new([0u8; MAD_SIZE]);
            r.encode(&mut b[..]);
            b[SA_HEADER_SIZE] = 0xab;
            vec![b]
        });
        let c = SaClient::start(port, local(), &cfg());
        let a = c
            .query(SaQuery {
                method: wire::METHOD_GET,
                attr_id: wire::attr::NODE_RECORD,
                ..SaQuery::default()
            })
            .expect("answer");
        assert_eq!(a.attempts, 2);
        assert_eq!(a.data[0], 0xab);
        let w = written.lock().unwrap();
        let t0 = SaHeader::decode(&w[0][UMAD_HDR_LEN..]).unwrap().tid;
        let t1 = SaHeader::decode(&w[1][UMAD_HDR_LEN..]).unwrap().tid;
        assert_ne!(t0, t1);
        drop(w);
        let (port, _) = fake(|_| Vec::new());
        let c = SaClient::start(port, local(), &cfg());
        let e = c
            .query(SaQuery {
                method: wire::METHOD_GET,
                attr_id: wire::attr::NODE_RECORD,
                ..SaQuery::default()
            })
            .unwrap_err();
        assert!(
            matches!(
                e,
                ClientError::Timeout {
                    attempts: 2,
                    sm_lid: 7,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn an_unsegmented_rmpp_answer_is_taken_as_its_first_mad() {
        let (port, _) = fake(|h| {
            let mut r = *h;
            r.method = wire::METHOD_GET_TABLE_RESP;
            r.attr_offset = 8;
            r.rmpp.flags = rmpp_flag::ACTIVE;
            let mut b = Box::new([0u8; MAD_SIZE]);
            r.encode(&mut b[..]);
            b[SA_HEADER_SIZE..SA_HEADER_SIZE + 128].fill(0x11);
            vec![b]
        });
        let c = SaClient::start(port, local(), &cfg());
        let a = c
            .query(SaQuery {
                method: wire::METHOD_GET_TABLE,
                attr_id: wire::attr::PATH_RECORD,
                ..SaQuery::default()
            })
            .expect("answer");
        assert!(a.unsegmented);
        assert_eq!(a.records().len(), 3);
    }

    #[test]
    fn a_get_multi_request_goes_out_as_one_rmpp_segment() {
        let (port, written) = fake(|h| {
            let mut r = *h;
            r.method = wire::METHOD_GET_MULTI_RESP;
            r.attr_id = wire::attr::PATH_RECORD;
            r.attr_offset = 8;
            segments(&r, &[7u8; 64])
        });
        let c = SaClient::start(port, local(), &cfg());
        let a = c
            .query(SaQuery {
                method: wire::METHOD_GET_MULTI,
                attr_id: wire::attr::MULTI_PATH_RECORD,
                attr_offset: 7,
                data: vec![1u8; 56],
                ..SaQuery::default()
            })
            .expect("answer");
        assert_eq!(a.records().len(), 1);
        let w = written.lock().unwrap();
        let h = SaHeader::decode(&w[0][UMAD_HDR_LEN..]).unwrap();
        assert_eq!((h.rmpp.version, h.rmpp.rmpp_type, h.rmpp.flags), (1, 1, 0x07));
        assert_eq!((h.rmpp.data1, h.rmpp.data2), (1, 220 - 144));
        assert_eq!(h.attr_offset, 7);
        assert_eq!(w[0][UMAD_HDR_LEN + SA_HEADER_SIZE], 1);
    }

    #[test]
    fn malformed_requests_go_out_as_asked() {
        let (port, written) = fake(|h| {
            let mut r = *h;
            r.method = wire::METHOD_GET_RESP;
            r.status = wire::status::BAD_VERSION;
            let mut b = Box::new([0u8; MAD_SIZE]);
            r.encode(&mut b[..]);
            vec![b]
        });
        let c = SaClient::start(port, local(), &cfg());
        let a = c
            .query(SaQuery {
                method: wire::METHOD_GET,
                attr_id: wire::attr::NODE_RECORD,
                malformed: Malformed {
                    class_version: Some(1),
                    rmpp: Some([1, 1, 0x07, 0, 0, 0, 0, 1, 0, 0, 0, 20]),
                    mad_bytes: Some(60),
                },
                ..SaQuery::default()
            })
            .expect("answer");
        assert_eq!(a.status(), wire::status::BAD_VERSION);
        let w = written.lock().unwrap();
        assert_eq!(w[0].len(), UMAD_HDR_LEN + 60);
        let h = SaHeader::decode(&w[0][UMAD_HDR_LEN..]).unwrap();
        assert_eq!(
            (h.class_version, h.rmpp.rmpp_type, h.rmpp.data1, h.rmpp.data2),
            (1, 1, 1, 20)
        );
    }

    #[test]
    fn sysfs_values_parse_as_the_kernel_and_the_shim_write_them() {
        let p = Path::new("x");
        assert_eq!(parse_num(p, "0x1a", "LID").unwrap(), 26);
        assert_eq!(parse_num(p, "4: ACTIVE", "state").unwrap(), 4);
        assert!(parse_num(p, "zz", "LID").is_err());
        let g = parse_gid("fe80:0000:0000:0000:0002:c903:0000:0001").unwrap();
        assert_eq!(g[0], 0xfe);
        assert_eq!(g[15], 1);
        assert!(parse_gid("fe80::1").is_none());
    }
}
