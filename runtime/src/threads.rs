//! [`Threads`]: the worker pool a model runs its large kernels on when asked for several threads
//! (`model.set_threads(n)`), the runtime's implementation of the kernels' [`Parallel`].
//!
//! Design: `n - 1` workers are spawned once, when the pool is made, and park on a condition
//! variable. A kernel's `run(tasks, f)` publishes a pointer to `f` and a task count under the
//! pool's mutex, wakes the workers, and then claims tasks itself from the same atomic counter
//! as they do. When none is left it closes the job (a worker still waking up will not enter
//! it: on a busy machine that can take milliseconds) and waits for the workers inside it to
//! leave, so `f`, which borrows the caller's stack, is never used after `run` returns. Nothing is allocated per
//! job: the job is a pointer, the counter and the state live in the pool, which is allocated
//! when it is made. Dropping the pool stops and joins the workers.
//!
//! A worker that finishes a job spins briefly on the job counter before it sleeps: a network
//! runs one parallel kernel after another, and a worker still awake takes the next one without
//! a futex wake-up. A second `run` while one is in progress (two threads calling `run_in` on
//! one model) does not wait: it runs its tasks on its own thread.
//!
//! This is the runtime's one `unsafe`: the job pointer's lifetime is erased to hand it to the
//! workers, which is sound because `run` does not return (or unwind) before they are done
//! with it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use kiln_kernels::par::Parallel;

use crate::Error;

/// How many threads one inference runs on: the caller's plus parked workers that the large
/// kernels (GEMM-based convolutions, Winograd convolutions) split their work with.
///
/// The default, [`Threads::one`], has no workers and allocates nothing. A model owns one
/// (`model.set_threads(n)`); its workers are spawned once and joined when it is dropped, and a
/// run allocates nothing with or without them.
#[derive(Debug, Default)]
pub struct Threads {
    pool: Option<Pool>,
}

#[derive(Debug)]
struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Held for the whole of a job: one job at a time.
    submit: Mutex<()>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Workers wait here for a new job.
    wake: Condvar,
    /// The submitter waits here for the last worker to finish a job.
    done: Condvar,
    /// The next task index to claim.
    next: AtomicUsize,
    /// `State::epoch`, readable without the lock (for the workers' spin).
    epoch: AtomicU64,
    /// When the current job was published ([`now_ns`]).
    published: AtomicU64,
}

#[derive(Debug)]
struct State {
    job: Option<Job>,
    tasks: usize,
    epoch: u64,
    /// Workers inside the current job (before the first job: workers started).
    busy: usize,
    panicked: bool,
    shutdown: bool,
}

/// The current job's closure, its lifetime erased (see the module docs).
#[derive(Clone, Copy, Debug)]
struct Job(*const (dyn Fn(usize) + Sync + 'static));

// SAFETY: the closure is `Sync`, so calling it from several threads is allowed; the pointer is
// only dereferenced while `run` keeps the closure alive.
unsafe impl Send for Job {}

/// What the pools of this process did since it started (or since [`Threads::reset_stats`]):
/// how their jobs were shared between the callers and the workers. For diagnosis (the
/// end-to-end benchmark prints it); counting costs a few atomic additions per job.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Parallel jobs run on a pool (kernels that split their work while it had workers).
    pub jobs: u64,
    /// Their tasks, all together.
    pub tasks: u64,
    /// The tasks that workers ran (the callers ran the rest).
    pub worker_tasks: u64,
    /// Worker entries into jobs (a worker that entered a job at all counts once per job).
    pub entries: u64,
    /// The time from a job's publication to each worker's entry, summed over `entries`.
    pub entry_delay_ns: u64,
    /// The jobs' wall time, publication to return, summed.
    pub job_ns: u64,
}

/// [`PoolStats`]' counters, process-wide.
static STATS: [AtomicU64; 6] = [const { AtomicU64::new(0) }; 6];
const JOBS: usize = 0;
const TASKS: usize = 1;
const WORKER_TASKS: usize = 2;
const ENTRIES: usize = 3;
const ENTRY_DELAY_NS: usize = 4;
const JOB_NS: usize = 5;

fn count(counter: usize, n: u64) {
    STATS[counter].fetch_add(n, Ordering::Relaxed);
}

/// Nanoseconds since the first call in this process: a clock every thread shares.
fn now_ns() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Spins of a worker between jobs before it sleeps.
const SPINS: u32 = 1 << 11;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Tasks run outside the lock and their panics are caught, so it is never poisoned by a
    // kernel; if it were, its state is still consistent.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Threads {
    /// One thread: the caller's. Allocates nothing.
    pub const fn one() -> Threads {
        Threads { pool: None }
    }

    /// `n` threads: the caller's plus `n - 1` workers, spawned now (0 and 1 both mean one
    /// thread, no workers). `Err(Error::Threads)` if the system refuses a thread.
    pub fn new(n: usize) -> Result<Threads, Error> {
        if n <= 1 {
            return Ok(Threads::one());
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                job: None,
                tasks: 0,
                epoch: 0,
                busy: 0,
                panicked: false,
                shutdown: false,
            }),
            wake: Condvar::new(),
            done: Condvar::new(),
            next: AtomicUsize::new(0),
            epoch: AtomicU64::new(0),
            published: AtomicU64::new(0),
        });
        let mut pool = Pool {
            shared,
            workers: Vec::with_capacity(n - 1),
            submit: Mutex::new(()),
        };
        for i in 1..n {
            let shared = Arc::clone(&pool.shared);
            let worker = std::thread::Builder::new()
                .name(format!("kiln-worker-{i}"))
                // The x86 GEMM packs into about 790 KiB of stack buffers (`avx2::blis::PANEL_LEN`).
                .stack_size(2 << 20)
                .spawn(move || work(&shared))
                .map_err(|e| Error::Threads {
                    requested: n,
                    message: e.to_string(),
                })?;
            // (On an error, dropping `pool` stops and joins the workers spawned so far.)
            pool.workers.push(worker);
        }
        // Wait until every worker has started: a thread's start-up (its handle, thread-local
        // storage) allocates, and that belongs here, not in the first run.
        let shared = &*pool.shared;
        let mut st = lock(&shared.state);
        while st.busy < n - 1 {
            st = shared.done.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
        st.busy = 0;
        drop(st);
        Ok(Threads { pool: Some(pool) })
    }

    /// The number of threads, the caller's included.
    pub fn count(&self) -> usize {
        self.pool.as_ref().map_or(1, |p| p.workers.len() + 1)
    }

    /// What every pool of this process did so far (see [`PoolStats`]).
    pub fn stats() -> PoolStats {
        let get = |c: usize| STATS[c].load(Ordering::Relaxed);
        PoolStats {
            jobs: get(JOBS),
            tasks: get(TASKS),
            worker_tasks: get(WORKER_TASKS),
            entries: get(ENTRIES),
            entry_delay_ns: get(ENTRY_DELAY_NS),
            job_ns: get(JOB_NS),
        }
    }

    /// Sets [`Threads::stats`] back to zero.
    pub fn reset_stats() {
        for c in &STATS {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// Claims and runs tasks of `f` until none is left; returns how many this thread ran.
fn claim(next: &AtomicUsize, tasks: usize, f: &(dyn Fn(usize) + Sync)) -> u64 {
    let mut ran = 0;
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= tasks {
            return ran;
        }
        f(i);
        ran += 1;
    }
}

/// A worker's loop: wait for a job, help with it, report back.
fn work(shared: &Shared) {
    {
        // Started (see `Threads::new`).
        let mut st = lock(&shared.state);
        st.busy += 1;
        shared.done.notify_one();
    }
    let mut seen = 0u64;
    loop {
        // Between jobs, spin a little before sleeping (see the module docs).
        for _ in 0..SPINS {
            if shared.epoch.load(Ordering::Acquire) != seen {
                break;
            }
            std::hint::spin_loop();
        }
        let (job, tasks) = {
            let mut st = lock(&shared.state);
            while st.epoch == seen && !st.shutdown {
                st = shared.wake.wait(st).unwrap_or_else(PoisonError::into_inner);
            }
            if st.shutdown {
                return;
            }
            seen = st.epoch;
            // A job already closed (its tasks all claimed by others while this worker was
            // waking up): nothing to do, and the submitter did not wait for this worker.
            let Some(job) = st.job else { continue };
            st.busy += 1;
            (job, st.tasks)
        };
        // SAFETY: the submitter keeps the closure alive until every worker that entered the
        // job (`busy`) has left it below (`Finish`).
        let f = unsafe { &*job.0 };
        count(ENTRIES, 1);
        count(
            ENTRY_DELAY_NS,
            now_ns().saturating_sub(shared.published.load(Ordering::Relaxed)),
        );
        let result = catch_unwind(AssertUnwindSafe(|| claim(&shared.next, tasks, f)));
        if let Ok(ran) = result {
            count(WORKER_TASKS, ran);
        }
        let mut st = lock(&shared.state);
        st.panicked |= result.is_err();
        st.busy -= 1;
        if st.busy == 0 {
            shared.done.notify_one();
        }
    }
}

/// When dropped (also while unwinding): closes the current job, so no worker enters it any
/// more, and waits until every worker that did has left it. A worker that has not woken up
/// yet is not waited for: on a busy machine it may not be scheduled for milliseconds.
struct Finish<'a>(&'a Shared);

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        let mut st = lock(&self.0.state);
        st.job = None;
        while st.busy > 0 {
            st = self.0.done.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

// SAFETY: every index in `0..tasks` is claimed exactly once from the shared atomic counter
// (by a worker or the caller), and `run` returns only after the caller has run out of tasks
// and every worker has reported back (`Finish`), i.e. after every call of `f` has returned.
unsafe impl Parallel for Threads {
    fn threads(&self) -> usize {
        self.count()
    }

    fn run(&self, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        let serial = || (0..tasks).for_each(f);
        let Some(pool) = &self.pool else {
            return serial();
        };
        if tasks <= 1 {
            return serial();
        }
        // Another thread is running a job on this pool (`run_in` from two threads): do this
        // one alone rather than wait.
        let Ok(_one_job) = pool.submit.try_lock() else {
            return serial();
        };
        let shared = &*pool.shared;
        // SAFETY: only the lifetime is erased; `Finish` below keeps `f` in use no longer than
        // this call (see the module docs).
        let job = unsafe {
            core::mem::transmute::<
                *const (dyn Fn(usize) + Sync + '_),
                *const (dyn Fn(usize) + Sync + 'static),
            >(f)
        };
        shared.next.store(0, Ordering::Relaxed);
        let published = now_ns();
        shared.published.store(published, Ordering::Relaxed);
        {
            let mut st = lock(&shared.state);
            st.job = Some(Job(job));
            st.tasks = tasks;
            st.epoch += 1;
            st.busy = 0;
            st.panicked = false;
            shared.epoch.store(st.epoch, Ordering::Release);
        }
        shared.wake.notify_all();
        let finish = Finish(shared);
        claim(&shared.next, tasks, f);
        drop(finish);
        count(JOBS, 1);
        count(TASKS, tasks as u64);
        count(JOB_NS, now_ns().saturating_sub(published));
        if lock(&shared.state).panicked {
            panic!("kiln: a kernel task panicked on a worker thread");
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        lock(&self.shared.state).shutdown = true;
        self.shared.wake.notify_all();
        for w in self.workers.drain(..) {
            // A worker only ends by returning (its tasks' panics are caught).
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn every_task_runs_once() {
        for n in [1, 2, 3] {
            let t = Threads::new(n).unwrap();
            assert_eq!(t.threads(), n);
            for tasks in [0, 1, 2, 7, 100] {
                let hits: Vec<AtomicUsize> = (0..tasks).map(|_| AtomicUsize::new(0)).collect();
                t.run(tasks, &|i| {
                    hits[i].fetch_add(1, Ordering::Relaxed);
                });
                assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
            }
        }
    }

    #[test]
    fn a_task_panic_reaches_the_caller_and_the_pool_survives() {
        let t = Threads::new(2).unwrap();
        let r = catch_unwind(AssertUnwindSafe(|| {
            t.run(64, &|i| assert!(i != 63, "task 63"));
        }));
        assert!(r.is_err());
        let count = AtomicUsize::new(0);
        t.run(10, &|_| {
            count.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(count.load(Ordering::Relaxed), 10);
    }
}
