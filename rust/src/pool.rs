//! Jobs run on a few threads of their own, their results handed back in the order the jobs
//! were submitted, with at most `limit` submitted and not yet taken (so the memory they hold
//! stays flat). The reader scans chunks on it while Python decodes the ones before
//! (traceview/read/threaded.py).

use std::collections::VecDeque;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

type Queue<J, R> = Arc<Mutex<Receiver<(J, Sender<R>)>>>;

/// Why a result cannot be had.
#[derive(Debug, PartialEq, Eq)]
pub enum Lost {
    /// Nothing was submitted that is not taken already.
    Nothing,
    /// The job's thread failed (a bug), or the pool was closed or forked.
    Failed,
}

/// The pool (see the module's comment).
pub struct Ordered<J, R> {
    jobs: Option<Sender<(J, Sender<R>)>>,
    pending: VecDeque<Receiver<R>>,
    threads: Vec<JoinHandle<()>>,
    limit: usize,
    owner: u32, // the process that started the threads: a forked child has none
}

impl<J: Send + 'static, R: Send + 'static> Ordered<J, R> {
    /// `threads` threads (at least one) running `work`; at most `limit` jobs in flight.
    pub fn start(
        threads: usize,
        limit: usize,
        work: impl Fn(J) -> R + Send + Sync + 'static,
    ) -> io::Result<Self> {
        let (jobs, queue) = mpsc::channel();
        let queue: Queue<J, R> = Arc::new(Mutex::new(queue));
        let work = Arc::new(work);
        let mut pool = Ordered {
            jobs: Some(jobs),
            pending: VecDeque::new(),
            threads: Vec::new(),
            limit: limit.max(1),
            owner: std::process::id(),
        };
        for n in 0..threads.max(1) {
            let (queue, work) = (Arc::clone(&queue), Arc::clone(&work));
            let thread = std::thread::Builder::new()
                .name(format!("traceview-scan-{n}"))
                .spawn(move || run_jobs(&queue, &*work))?;
            pool.threads.push(thread);
        }
        Ok(pool)
    }

    /// Queue a job; given back when `limit` jobs are in flight already (take one first) or
    /// the pool is closed.
    pub fn submit(&mut self, job: J) -> Result<(), J> {
        let Some(jobs) = &self.jobs else {
            return Err(job);
        };
        if self.pending.len() >= self.limit || std::process::id() != self.owner {
            return Err(job);
        }
        let (done, result) = mpsc::channel();
        jobs.send((job, done)).map_err(|e| e.0 .0)?;
        self.pending.push_back(result);
        Ok(())
    }

    /// The result of the oldest job not yet taken (waits for it).
    pub fn take(&mut self) -> Result<R, Lost> {
        if self.pending.is_empty() {
            return Err(Lost::Nothing);
        }
        if std::process::id() != self.owner {
            return Err(Lost::Failed); // its channel is left as it is (see close)
        }
        let result = self.pending.pop_front().ok_or(Lost::Nothing)?;
        result.recv().map_err(|_| Lost::Failed)
    }
}

impl<J, R> Ordered<J, R> {
    /// The most jobs in flight.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Jobs submitted and not yet taken.
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// Drop the jobs not yet taken, stop the threads (each ends after its current job) and
    /// wait for them.
    pub fn close(&mut self) {
        if std::process::id() != self.owner {
            // A forked child: the threads are not here, and a lock of the channels one held
            // at the fork stays held; dropping them would wait on it for ever. Left as they are.
            std::mem::forget(self.jobs.take());
            std::mem::forget(std::mem::take(&mut self.pending));
            std::mem::forget(std::mem::take(&mut self.threads));
            return;
        }
        self.jobs = None;
        self.pending.clear();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl<J, R> Drop for Ordered<J, R> {
    fn drop(&mut self) {
        self.close();
    }
}

/// A thread's loop: the next job, until the pool is closed. A job that panics drops its
/// result's sender, so the taker sees `Lost::Failed`; the thread goes on.
fn run_jobs<J, R>(queue: &Mutex<Receiver<(J, Sender<R>)>>, work: &(impl Fn(J) -> R + ?Sized)) {
    loop {
        // A panic never happens while the lock is held (recv only): a poisoned lock is usable.
        let next = queue.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok((job, done)) = next else {
            return; // the pool is closed
        };
        if let Ok(result) = catch_unwind(AssertUnwindSafe(|| work(job))) {
            let _ = done.send(result); // the taker may be gone (closed): nothing to do
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_submission_order() {
        // The later jobs finish first: the order is still the submission order.
        let mut pool = Ordered::start(3, 3, |n: u64| {
            std::thread::sleep(std::time::Duration::from_millis(
                30u64.saturating_sub(10 * n),
            ));
            n * 2
        })
        .unwrap();
        for n in 0..3 {
            pool.submit(n).unwrap();
        }
        assert_eq!(pool.in_flight(), 3);
        assert_eq!(pool.take(), Ok(0));
        assert_eq!(pool.take(), Ok(2));
        pool.submit(7).unwrap();
        assert_eq!(pool.take(), Ok(4));
        assert_eq!(pool.take(), Ok(14));
        assert_eq!(pool.take(), Err(Lost::Nothing));
    }

    #[test]
    fn no_more_than_the_limit_in_flight() {
        let mut pool = Ordered::start(2, 2, |n: u32| n).unwrap();
        assert_eq!(pool.submit(1), Ok(()));
        assert_eq!(pool.submit(2), Ok(()));
        assert_eq!(pool.submit(3), Err(3));
        assert_eq!(pool.take(), Ok(1));
        assert_eq!(pool.submit(3), Ok(()));
        assert_eq!(pool.in_flight(), 2);
    }

    #[test]
    fn a_panicking_job_is_lost_and_the_pool_goes_on() {
        let mut pool = Ordered::start(1, 4, |n: u32| {
            assert!(n != 1, "a bug");
            n
        })
        .unwrap();
        for n in 0..3 {
            pool.submit(n).unwrap();
        }
        assert_eq!(pool.take(), Ok(0));
        assert_eq!(pool.take(), Err(Lost::Failed));
        assert_eq!(pool.take(), Ok(2));
    }

    #[test]
    fn closed_it_takes_no_job() {
        let mut pool = Ordered::start(2, 4, |n: u32| n).unwrap();
        pool.submit(1).unwrap();
        pool.close();
        assert_eq!(pool.submit(2), Err(2));
        assert_eq!(pool.take(), Err(Lost::Nothing));
    }
}
