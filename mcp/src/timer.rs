//! The timer behind hyper's header read timeout, at a one-second grain.
//!
//! hyper arms its header timer every time a keep-alive connection starts
//! waiting for the next request, and drops it once the head is in. With
//! tokio's timer each arming registers a deadline earlier than the one the
//! I/O driver sleeps towards, so the worker parked in the driver is woken
//! to recompute it: under the search bench that was one eventfd write and
//! one needless wake-up of the other worker per request. Here arming a
//! timer is an insertion into a map, and one task sweeps the map once a
//! second, waking the sleeps that are due. A timeout of seconds fires up
//! to one [`GRAIN`] late, which no client can tell from the timeout itself.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use hyper::rt::{Sleep, Timer};

/// How often due sleeps are woken.
pub const GRAIN: Duration = Duration::from_secs(1);

#[derive(Default)]
struct Armed {
    next_id: u64,
    /// The sleeps polled before their deadline, and the task each wakes.
    waiting: HashMap<u64, (Instant, Waker)>,
}

/// A [`Timer`] for hyper whose sleeps are woken by one sweeping task.
#[derive(Clone, Default)]
pub struct CoarseTimer {
    armed: Arc<Mutex<Armed>>,
}

impl std::fmt::Debug for CoarseTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoarseTimer").field("waiting", &lock(&self.armed).waiting.len()).finish()
    }
}

fn lock(armed: &Mutex<Armed>) -> std::sync::MutexGuard<'_, Armed> {
    armed.lock().unwrap_or_else(PoisonError::into_inner)
}

impl CoarseTimer {
    /// A timer and its sweeping task, which ends when the last clone of
    /// the timer is dropped. Needs a tokio runtime.
    pub fn start() -> Self {
        let timer = CoarseTimer::default();
        tokio::spawn(sweep(Arc::downgrade(&timer.armed)));
        timer
    }

    #[cfg(test)]
    fn waiting(&self) -> usize {
        lock(&self.armed).waiting.len()
    }
}

async fn sweep(armed: Weak<Mutex<Armed>>) {
    let mut ticks = tokio::time::interval(GRAIN);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(armed) = armed.upgrade() else { return };
        let now = Instant::now();
        let mut due = Vec::new();
        lock(&armed).waiting.retain(|_, (deadline, waker)| {
            let waiting = *deadline > now;
            if !waiting {
                due.push(waker.clone());
            }
            waiting
        });
        due.into_iter().for_each(Waker::wake);
    }
}

impl Timer for CoarseTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        self.sleep_until(Instant::now() + duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Sleep>> {
        let id = {
            let mut armed = lock(&self.armed);
            armed.next_id += 1;
            armed.next_id
        };
        Box::pin(CoarseSleep { deadline, id, armed: self.armed.clone() })
    }
}

struct CoarseSleep {
    deadline: Instant,
    id: u64,
    armed: Arc<Mutex<Armed>>,
}

impl Future for CoarseSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            lock(&self.armed).waiting.remove(&self.id);
            return Poll::Ready(());
        }
        lock(&self.armed).waiting.insert(self.id, (self.deadline, cx.waker().clone()));
        Poll::Pending
    }
}

impl Sleep for CoarseSleep {}

impl Drop for CoarseSleep {
    fn drop(&mut self) {
        lock(&self.armed).waiting.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sleeps_end_at_their_deadline_and_leave_nothing_behind() {
        let timer = CoarseTimer::start();
        let deadline = Instant::now() + Duration::from_millis(50);
        let sleep = timer.sleep_until(deadline);
        tokio::time::timeout(GRAIN * 10, sleep).await.expect("the sleep ended");
        assert!(Instant::now() >= deadline);
        assert_eq!(timer.waiting(), 0);

        // A sleep dropped before its deadline is forgotten.
        let mut sleep = timer.sleep(Duration::from_secs(3600));
        let waker = std::task::Waker::noop();
        assert!(sleep.as_mut().poll(&mut Context::from_waker(waker)).is_pending());
        assert_eq!(timer.waiting(), 1);
        drop(sleep);
        assert_eq!(timer.waiting(), 0);
    }
}
