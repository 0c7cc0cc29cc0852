//! The coordinator's own thread (current-thread runtime, own etcd client) that runs the
//! blocking calls of the shared state.

use std::pin::Pin;
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions};

use crate::client::build_client;
use crate::{HaConfig, HaError};

type Job = Box<dyn FnOnce(Client) -> Pin<Box<dyn std::future::Future<Output = ()> + Send>> + Send>;

/// The coordinator's own thread with a current-thread runtime and its own etcd client: the
/// blocking calls run there, so they work from any thread, a tokio worker included (even of
/// a current-thread runtime, which they block meanwhile).
pub(crate) struct BlockingWorker {
    jobs: Mutex<mpsc::Sender<Job>>,
}

impl BlockingWorker {
    pub(crate) async fn start(cfg: &HaConfig, opts: ConnectOptions) -> Result<BlockingWorker, HaError> {
        let (tx, rx) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<Result<(), HaError>>();
        let cfg = cfg.clone();
        let spawn_err = |e: std::io::Error| HaError::Blocking(format!("cannot start the thread: {e}"));
        std::thread::Builder::new()
            .name("fabric-ha-etcd".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(spawn_err(e)));
                        return;
                    }
                };
                // Its own client (no I/O yet): its background tasks run on this runtime.
                let client = match rt.block_on(build_client(&cfg, opts)) {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                while let Ok(job) = rx.recv() {
                    rt.block_on(job(client.clone()));
                }
            })
            .map_err(spawn_err)?;
        ready_rx
            .await
            .map_err(|_| HaError::Blocking("the coordinator's thread stopped at start".into()))??;
        Ok(BlockingWorker { jobs: Mutex::new(tx) })
    }

    /// Runs `f` on the worker; waits at most `bound`.
    pub(crate) fn run<T, F, Fut>(&self, bound: Duration, f: F) -> Result<T, HaError>
    where
        T: Send + 'static,
        F: FnOnce(Client, Instant) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<T, HaError>> + Send + 'static,
    {
        let deadline = Instant::now() + bound;
        let (reply_tx, reply_rx) = mpsc::sync_channel::<Result<T, HaError>>(1);
        let job: Job = Box::new(move |client| {
            Box::pin(async move {
                let _ = reply_tx.send(f(client, deadline).await);
            })
        });
        self.jobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .send(job)
            .map_err(|_| HaError::Blocking("the coordinator's thread has stopped".into()))?;
        reply_rx
            .recv_timeout(bound + Duration::from_millis(250))
            .map_err(|_| HaError::Blocking(format!("no answer within {bound:?}")))?
    }
}
