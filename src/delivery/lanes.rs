//! Delivery lanes: a few threads (one per core), each an event loop of its own. A hook's
//! worker and the connections its callbacks go on live on one lane, chosen by the hook's id,
//! so a callback's round trip (the request written, the answer read, the next callback taken)
//! stays on one thread. On the relay's shared pool of threads, the connection's task and the
//! worker's were woken on different threads, a hop and a thread woken per callback.
//!
//! A lane ends once the relay stops (or the lanes are dropped) and the tasks on it are done,
//! so an attempt under way is finished as before. When a lane cannot be started, its hooks'
//! workers run on the relay's shared threads with the shared client.

use std::future::Future;

use tokio::{runtime::Handle, task::JoinHandle};
use tokio_util::{
    sync::{CancellationToken, DropGuard},
    task::TaskTracker,
};

use super::client::CallbackClient;
use crate::base::ids::HookId;

/// One lane: where its tasks run and the client whose connections they own.
struct Lane {
    handle: Handle,
    client: CallbackClient,
    /// The tasks on the lane: it ends once they are done after the stop.
    tracker: TaskTracker,
}

/// The lanes, and the shared client used where none could start.
pub(crate) struct Lanes {
    lanes: Vec<Lane>,
    shared: CallbackClient,
    /// Stops the lanes when they are dropped (the relay's stop stops them too).
    _stop: DropGuard,
}

impl Lanes {
    /// Starts `count` lanes (at least one), each with a client like `shared` (the same
    /// settings and turns per receiver, connections of its own); they end after `token`.
    pub(crate) fn start(count: usize, shared: CallbackClient, token: &CancellationToken) -> Self {
        let stop = token.child_token();
        let mut lanes = Vec::new();
        for i in 0..count.max(1) {
            match start_lane(i, &shared, &stop) {
                Ok(lane) => lanes.push(lane),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot start a delivery thread; its hooks use the shared threads");
                    break;
                }
            }
        }
        Self {
            lanes,
            shared,
            _stop: stop.drop_guard(),
        }
    }

    /// One lane per core this process may use.
    pub(crate) fn per_core() -> usize {
        std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
    }

    fn lane(&self, hook: HookId) -> Option<&Lane> {
        let n = self.lanes.len() as u64;
        (n > 0).then(|| &self.lanes[(hook.0 % n) as usize])
    }

    /// The client hook `hook`'s callbacks go through.
    pub(crate) fn client(&self, hook: HookId) -> &CallbackClient {
        self.lane(hook).map_or(&self.shared, |l| &l.client)
    }

    /// Runs `task` (hook `hook`'s worker) on the hook's lane.
    pub(crate) fn spawn<F>(&self, hook: HookId, task: F) -> JoinHandle<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        match self.lane(hook) {
            Some(l) => l.handle.spawn(l.tracker.track_future(task)),
            None => tokio::spawn(task),
        }
    }
}

/// Errors starting a lane.
#[derive(Debug, thiserror::Error)]
enum LaneError {
    #[error("the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
    #[error("the thread: {0}")]
    Thread(#[from] std::io::Error),
    #[error("the thread ended at start")]
    Ended,
}

fn start_lane(
    i: usize,
    shared: &CallbackClient,
    stop: &CancellationToken,
) -> Result<Lane, LaneError> {
    let client = shared.with_own_connections()?;
    let tracker = TaskTracker::new();
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop, tasks) = (stop.clone(), tracker.clone());
    std::thread::Builder::new()
        .name(format!("hookrelay-deliver-{i}"))
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            let runtime = match runtime {
                Ok(r) => r,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            if tx.send(Ok(runtime.handle().clone())).is_err() {
                return;
            }
            runtime.block_on(async {
                stop.cancelled().await;
                tasks.close();
                tasks.wait().await;
            });
        })?;
    let handle = rx.recv().map_err(|_| LaneError::Ended)??;
    Ok(Lane {
        handle,
        client,
        tracker,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::callback_url::Guard;
    use std::{sync::Arc, time::Duration};

    fn client() -> CallbackClient {
        let guard = Arc::new(Guard::new(true, Vec::new()));
        CallbackClient::new(Duration::from_secs(1), guard, 4).expect("client")
    }

    /// The name of the thread a task of hook `id` runs on.
    async fn thread_of(lanes: &Lanes, id: u64) -> String {
        let (tx, rx) = tokio::sync::oneshot::channel();
        lanes.spawn(HookId(id), async move {
            let name = std::thread::current().name().map(str::to_string);
            let _ = tx.send(name.unwrap_or_default());
        });
        rx.await.expect("the task ran")
    }

    #[tokio::test]
    async fn a_hook_keeps_its_lane_and_lanes_end_after_the_stop_once_their_tasks_are_done() {
        let token = CancellationToken::new();
        let lanes = Lanes::start(2, client(), &token);
        assert_eq!(thread_of(&lanes, 4).await, "hookrelay-deliver-0");
        assert_eq!(thread_of(&lanes, 7).await, "hookrelay-deliver-1");
        assert_eq!(thread_of(&lanes, 9).await, "hookrelay-deliver-1");

        // A task under way when the relay stops is finished, not dropped.
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (started_tx, started) = tokio::sync::oneshot::channel();
        lanes.spawn(HookId(2), async move {
            let _ = started_tx.send(());
            tokio::time::sleep(Duration::from_millis(100)).await;
            let _ = tx.send("finished");
        });
        started.await.expect("started");
        token.cancel();
        assert_eq!(rx.await, Ok("finished"));
    }

    #[tokio::test]
    async fn with_no_lane_hooks_run_on_the_shared_threads() {
        let token = CancellationToken::new();
        let mut lanes = Lanes::start(1, client(), &token);
        lanes.lanes.clear();
        assert!(!thread_of(&lanes, 3).await.starts_with("hookrelay-deliver"));
        assert!(std::ptr::eq(lanes.client(HookId(3)), &lanes.shared));
    }
}
