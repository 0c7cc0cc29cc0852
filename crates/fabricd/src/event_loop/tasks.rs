//! The task registry: every task the event loop starts (computations, escape-VL checks,
//! uploads, persistence, physical faults, read-back) is spawned here and answers with one
//! internal message on the loop's internal channel.
//!
//! A spawn returns a [`Task`] handle that aborts the task when dropped: the state that waits
//! for a task owns its handle (the install owns its computation, its upload and its commit's
//! state files; the loop owns the read-back, physical fault injections, job-mapping writes and
//! the escape-VL preparation), so dropping that state cancels the work, and when the loop
//! stops every task it started stops with it. No task is detached.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// A running task of the loop; aborted when dropped.
#[derive(Debug)]
#[must_use = "dropping a task handle aborts the task"]
pub(crate) struct Task(Option<JoinHandle<()>>);

impl Drop for Task {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            h.abort();
        }
    }
}

/// Spawns the loop's tasks; each answers with one message of type `M`.
#[derive(Debug)]
pub(crate) struct Tasks<M> {
    tx: mpsc::UnboundedSender<M>,
}

impl<M: Send + 'static> Tasks<M> {
    /// A registry answering on `tx`.
    pub(crate) fn new(tx: mpsc::UnboundedSender<M>) -> Self {
        Tasks { tx }
    }

    /// Runs `fut` on the tokio runtime; its output is the answer.
    pub(crate) fn spawn(&self, fut: impl Future<Output = M> + Send + 'static) -> Task {
        let tx = self.tx.clone();
        Task(Some(tokio::spawn(async move {
            let _ = tx.send(fut.await);
        })))
    }

    /// Runs `f` on tokio's blocking pool (file writes, heavy copies); its output is the answer.
    pub(crate) fn spawn_blocking(&self, f: impl FnOnce() -> M + Send + 'static) -> Task {
        self.spawn(async move {
            match tokio::task::spawn_blocking(f).await {
                Ok(m) => m,
                Err(e) => std::panic::resume_unwind(e.into_panic()),
            }
        })
    }

    /// Runs `f` on the rayon `pool` (ranking, routing, diffs); `panicked` is the answer when
    /// `f` panics. A blocking thread waits for the pool: the loop's tokio workers never do, and
    /// a runtime with paused time (the loop tests) does not advance its clock meanwhile.
    pub(crate) fn spawn_on_pool(
        &self,
        pool: &Arc<rayon::ThreadPool>,
        f: impl FnOnce() -> M + Send + 'static,
        panicked: impl FnOnce() -> M + Send + 'static,
    ) -> Task {
        let pool = pool.clone();
        self.spawn_blocking(move || {
            pool.install(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)))
                .unwrap_or_else(|_| panicked())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_dropped_handle_aborts_its_task_and_a_kept_one_answers() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let tasks = Tasks::new(tx);
        let (hold_tx, hold_rx) = tokio::sync::oneshot::channel::<()>();
        let aborted = tasks.spawn(async move {
            let _ = hold_rx.await;
            1
        });
        drop(aborted);
        // The aborted task's future is dropped with its receiver: the sender sees it closed.
        let mut hold_tx = hold_tx;
        hold_tx.closed().await;
        let _kept = tasks.spawn(async { 2 });
        assert_eq!(rx.recv().await, Some(2));
        let pool = Arc::new(rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap());
        let _on_pool = tasks.spawn_on_pool(&pool, || 3, || 0);
        assert_eq!(rx.recv().await, Some(3));
        let _panics = tasks.spawn_on_pool(&pool, || panic!("routing bug"), || 4);
        assert_eq!(rx.recv().await, Some(4));
        let _blocking = tasks.spawn_blocking(|| 5);
        assert_eq!(rx.recv().await, Some(5));
    }
}
