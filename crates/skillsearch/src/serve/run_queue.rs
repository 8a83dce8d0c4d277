//! The daemon's fresh local retrievals, run in the order their requests were read.
//!
//! A request handler that ran its retrieval itself would run it when the runtime first polled
//! its connection, and the runtime polls connections in no particular order under load: each
//! worker takes the sockets it found ready into its own queue, and the other worker only steals
//! from that queue once its own is empty. At 64 busy connections on two cores, one request
//! waited a third of the average and another twice it. Here handlers only queue their
//! retrieval; one runner task per worker takes the oldest queued retrieval, runs it, and yields,
//! so the sockets are polled (and new requests read and queued) between any two retrievals.
//! Everything stays on the runtime's own threads: no hand-off to another thread, whose wake-up
//! cost the daemon as much CPU as the retrieval itself (docs/performance.md, "Daemon under load").

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, oneshot};

type Job = Box<dyn FnOnce() + Send>;

/// Retrievals waiting for a runner, oldest first.
#[derive(Default)]
pub struct RunQueue {
    jobs: Mutex<VecDeque<Job>>,
    ready: Notify,
}

/// The job panicked; its runner goes on with the next.
#[derive(Debug)]
pub struct Panicked;

impl std::fmt::Display for Panicked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the retrieval panicked")
    }
}

impl std::error::Error for Panicked {}

impl RunQueue {
    /// Spawns `runners` runner tasks on the current tokio runtime; they live as long as it.
    pub fn start(self: &Arc<Self>, runners: usize) {
        for _ in 0..runners.max(1) {
            tokio::spawn(self.clone().runner());
        }
    }

    /// Runs `f` once every job queued before it has started, and returns what it returns. A
    /// job whose caller stopped waiting (its deadline passed) is skipped rather than run.
    pub async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Panicked> {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            if !tx.is_closed()
                && let Ok(out) = catch_unwind(AssertUnwindSafe(f))
            {
                let _ = tx.send(out);
            }
        });
        self.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(job);
        self.ready.notify_one();
        rx.await.map_err(|_| Panicked)
    }

    async fn runner(self: Arc<Self>) {
        loop {
            let job = self
                .jobs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop_front();
            match job {
                Some(job) => {
                    job();
                    // Let the worker read the sockets that became ready meanwhile, so their
                    // requests queue behind this one's neighbours rather than jump ahead later.
                    tokio::task::yield_now().await;
                }
                // A notification sent while no runner waits is kept for the next to wait.
                None => self.ready.notified().await,
            }
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::RunQueue;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    #[tokio::test(flavor = "current_thread")]
    async fn jobs_run_in_the_order_they_were_queued() {
        let q = Arc::new(RunQueue::default());
        let order = Arc::new(Mutex::new(Vec::new()));
        // Queued before any runner exists, so all ten wait together.
        let waits: Vec<_> = (0..10)
            .map(|i| {
                let (q, order) = (q.clone(), order.clone());
                tokio::spawn(async move {
                    q.run(move || {
                        order.lock().unwrap().push(i);
                        i * 2
                    })
                    .await
                })
            })
            .collect();
        while q.len() < 10 {
            tokio::task::yield_now().await;
        }
        q.start(1);
        for (i, w) in waits.into_iter().enumerate() {
            assert_eq!(w.await.unwrap().unwrap(), i * 2);
        }
        assert_eq!(*order.lock().unwrap(), (0..10).collect::<Vec<_>>());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_job_fails_its_caller_and_the_runners_go_on() {
        let q = Arc::new(RunQueue::default());
        // One runner: had the panic ended it, nothing would answer the jobs after.
        q.start(1);
        assert!(q.run(|| -> u8 { panic!("boom") }).await.is_err());
        for i in 0..20u32 {
            let answer = tokio::time::timeout(Duration::from_secs(10), q.run(move || i + 1)).await;
            assert_eq!(answer.expect("no runner answered").unwrap(), i + 1);
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_job_whose_caller_gave_up_is_not_run() {
        let q = Arc::new(RunQueue::default());
        let ran = Arc::new(Mutex::new(false));
        let r = ran.clone();
        // No runner yet: the caller's deadline passes while the job waits.
        let gave_up = tokio::time::timeout(
            Duration::from_millis(10),
            q.run(move || *r.lock().unwrap() = true),
        )
        .await;
        assert!(gave_up.is_err());
        q.start(1);
        assert_eq!(q.run(|| 7).await.unwrap(), 7);
        assert!(!*ran.lock().unwrap(), "the abandoned job ran");
    }
}
