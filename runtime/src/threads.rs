//! [`Threads`]: the worker pool a model runs its large kernels on when asked for several threads
//! (`model.set_threads(n)`), the runtime's implementation of the kernels' [`Parallel`].
//!
//! Design: `n - 1` workers are spawned once, when the pool is made. A kernel's `run(tasks, f)`
//! stores a pointer to `f` and the task count, then opens the job by bumping an epoch in one
//! atomic state word, and claims tasks itself from the same atomic counter as the workers.
//! A worker enters a job with one compare-and-swap on that word (which also counts it in),
//! without any lock. When no task is left the caller closes the job (a worker that has not
//! entered by then does not enter it any more: on a busy machine that can be milliseconds
//! late) and waits for the workers inside it to leave, so `f`, which borrows the caller's
//! stack, is never used after `run` returns. Nothing is allocated per job: the job is a
//! pointer, the counter and the state live in the pool, which is allocated when it is made.
//! Dropping the pool stops and joins the workers.
//!
//! Staying hot: a network runs one parallel kernel after another with short serial ones in
//! between, and a sleeping worker takes tens of microseconds to wake (a futex wake-up, in a
//! virtual machine an interrupt to a halted vCPU), more than many kernels take. So a worker
//! that finishes a job spins on the state word for [`SPIN`] (a bounded *time*, read from the
//! clock every few dozen spins, like OpenMP's blocktime) and only then parks on a condition
//! variable; the caller wakes parked workers only when there are any. The caller waiting for
//! the last worker to leave a job spins the same way and then yields. A second `run` while one
//! is in progress (two threads calling `run_in` on one model) does not wait: it runs its tasks
//! on its own thread.
//!
//! Placement: before waking parked workers the caller keeps them off its own CPU ([`placement`]:
//! in a virtual machine Linux otherwise wakes them onto it after the pool was idle).
//!
//! This is the runtime's `unsafe`: the job pointer's lifetime is erased to hand it to the
//! workers, which is sound because `run` does not return (or unwind) before they are done
//! with it; and on Linux the affinity calls of [`placement`].

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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
    /// Where woken workers may run (see [`placement`]).
    placement: placement::Placement,
}

#[derive(Debug)]
struct Shared {
    /// The job word: `epoch << 32 | OPEN | busy` ([`epoch`], [`OPEN`], [`busy`]). The epoch
    /// counts jobs; `OPEN` is set while workers may enter the current one; `busy` counts the
    /// workers inside it.
    state: AtomicU64,
    /// The current job and its task count. Written by the caller only while no worker can be
    /// inside a job (closed, `busy == 0`), read by a worker only once it has entered one.
    job: Mutex<Option<(Job, usize)>>,
    /// The next task index to claim.
    next: AtomicUsize,
    /// Whether a task of the current job panicked on a worker.
    panicked: AtomicBool,
    /// Set once, when the pool is dropped.
    shutdown: AtomicBool,
    /// Workers parked (or about to park) on `wake`; changed only under `park`.
    sleepers: AtomicUsize,
    /// Guards parking and waking (and counts started workers, for [`Threads::new`]).
    park: Mutex<usize>,
    /// Parked workers wait here for a new job (or the shutdown).
    wake: Condvar,
    /// [`Threads::new`] waits here for the workers to start.
    started: Condvar,
    /// When the current job was published ([`now_ns`]), for [`PoolStats`].
    published: AtomicU64,
}

/// The bit of [`Shared::state`] that says the current job is open.
const OPEN: u64 = 1 << 31;

fn epoch(state: u64) -> u64 {
    state >> 32
}

fn busy(state: u64) -> u64 {
    state & (OPEN - 1)
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
    /// The time the callers spent running tasks (claiming until none was left), summed.
    pub caller_task_ns: u64,
    /// The time the workers spent running tasks, summed.
    pub worker_task_ns: u64,
}

/// [`PoolStats`]' counters, process-wide.
static STATS: [AtomicU64; 8] = [const { AtomicU64::new(0) }; 8];
const JOBS: usize = 0;
const TASKS: usize = 1;
const WORKER_TASKS: usize = 2;
const ENTRIES: usize = 3;
const ENTRY_DELAY_NS: usize = 4;
const JOB_NS: usize = 5;
const CALLER_TASK_NS: usize = 6;
const WORKER_TASK_NS: usize = 7;

fn count(counter: usize, n: u64) {
    STATS[counter].fetch_add(n, Ordering::Relaxed);
}

/// Nanoseconds since the first call in this process: a clock every thread shares.
fn now_ns() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// How long a worker spins for the next job before it parks, and the caller for the last
/// worker to leave a job before it yields. Long enough to bridge the serial kernels between
/// two parallel ones (and back-to-back inferences), short enough that an idle pool stops
/// burning a core within a millisecond.
const SPIN: Duration = Duration::from_micros(500);

/// Spins of `spin_loop` between two readings of the clock (about 40 ns each on Zen 4).
const SPINS_PER_CHECK: u32 = 32;

/// Spins until `ready()` or until [`SPIN`] has passed; returns whether `ready()`.
fn spin_until(ready: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    loop {
        for _ in 0..SPINS_PER_CHECK {
            if ready() {
                return true;
            }
            std::hint::spin_loop();
        }
        if start.elapsed() >= SPIN {
            return ready();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Tasks run outside the locks and their panics are caught, so they are never poisoned by
    // a kernel; if one were, what it guards is still consistent.
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
            state: AtomicU64::new(0),
            job: Mutex::new(None),
            next: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            sleepers: AtomicUsize::new(0),
            park: Mutex::new(0),
            wake: Condvar::new(),
            started: Condvar::new(),
            published: AtomicU64::new(0),
        });
        let mut pool = Pool {
            shared,
            workers: Vec::with_capacity(n - 1),
            submit: Mutex::new(()),
            placement: placement::Placement::of_this_thread(),
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
        let mut started = lock(&shared.park);
        while *started < n - 1 {
            started = shared
                .started
                .wait(started)
                .unwrap_or_else(PoisonError::into_inner);
        }
        drop(started);
        // The clock's start, so that the first job does not set it.
        now_ns();
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
            caller_task_ns: get(CALLER_TASK_NS),
            worker_task_ns: get(WORKER_TASK_NS),
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

/// A worker's loop: wait for a job, enter it, help with it, leave.
fn work(shared: &Shared) {
    {
        // Started (see `Threads::new`).
        *lock(&shared.park) += 1;
        shared.started.notify_one();
    }
    let mut seen = 0;
    while let Some(mut state) = next_job(shared, seen) {
        seen = epoch(state);
        // Enter: count this worker in, if the job is still open (else it is over already:
        // its tasks were all claimed while this worker was waking up).
        let entered = loop {
            if epoch(state) != seen || state & OPEN == 0 {
                break false;
            }
            match shared.state.compare_exchange_weak(
                state,
                state + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break true,
                Err(now) => state = now,
            }
        };
        if !entered {
            continue;
        }
        let inside = now_ns();
        count(ENTRIES, 1);
        count(
            ENTRY_DELAY_NS,
            inside.saturating_sub(shared.published.load(Ordering::Relaxed)),
        );
        // Inside the job, the caller does not change it (`Shared::job`).
        let current = *lock(&shared.job);
        if let Some((job, tasks)) = current {
            // SAFETY: the caller keeps the closure alive until every worker that entered the
            // job (`busy`) has left it below (`Finish`).
            let f = unsafe { &*job.0 };
            match catch_unwind(AssertUnwindSafe(|| claim(&shared.next, tasks, f))) {
                Ok(ran) => {
                    count(WORKER_TASKS, ran);
                    count(WORKER_TASK_NS, now_ns().saturating_sub(inside));
                }
                Err(_) => shared.panicked.store(true, Ordering::Relaxed),
            }
        }
        // Leave (the release orders this worker's writes before the caller's return).
        shared.state.fetch_sub(1, Ordering::Release);
    }
}

/// Waits for a job newer than epoch `seen`: spins for [`SPIN`], then parks. Returns the state
/// word that shows it, or `None` when the pool shuts down.
fn next_job(shared: &Shared, seen: u64) -> Option<u64> {
    let fresh = || epoch(shared.state.load(Ordering::Acquire)) != seen;
    let stop = || shared.shutdown.load(Ordering::Acquire);
    if !spin_until(|| fresh() || stop()) {
        let mut guard = lock(&shared.park);
        // Announce the nap before checking once more: the caller publishes a job and then
        // reads `sleepers` (both sequentially consistent), so either it sees this worker
        // here and wakes it (under `park`, so not before this worker waits), or this check
        // sees its job.
        shared.sleepers.fetch_add(1, Ordering::SeqCst);
        while epoch(shared.state.load(Ordering::SeqCst)) == seen
            && !shared.shutdown.load(Ordering::SeqCst)
        {
            guard = shared
                .wake
                .wait(guard)
                .unwrap_or_else(PoisonError::into_inner);
        }
        shared.sleepers.fetch_sub(1, Ordering::SeqCst);
    }
    if stop() {
        return None;
    }
    Some(shared.state.load(Ordering::Acquire))
}

/// When dropped (also while unwinding): closes the current job, so no worker enters it any
/// more, and waits until every worker that did has left it. A worker that has not entered
/// yet is not waited for: on a busy machine it may not be scheduled for milliseconds.
struct Finish<'a>(&'a Shared);

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        let state = &self.0.state;
        state.fetch_and(!OPEN, Ordering::AcqRel);
        let left = || busy(state.load(Ordering::Acquire)) == 0;
        // The workers inside are finishing their last task: usually microseconds.
        while !spin_until(left) {
            std::thread::yield_now();
        }
    }
}

// SAFETY: every index in `0..tasks` is claimed exactly once from the shared atomic counter
// (by a worker or the caller), and `run` returns only after the caller has run out of tasks
// and every worker that entered the job has left it (`Finish`), i.e. after every call of `f`
// has returned; a worker enters only an open job, and the caller closes it before waiting.
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
        // The previous job is closed and empty (its `Finish`), so no worker reads these now.
        *lock(&shared.job) = Some((Job(job), tasks));
        shared.next.store(0, Ordering::Relaxed);
        shared.panicked.store(false, Ordering::Relaxed);
        let published = now_ns();
        shared.published.store(published, Ordering::Relaxed);
        // Open the next epoch (`busy` is 0); sequentially consistent for the parking protocol
        // (`next_job`).
        let epoch = epoch(shared.state.load(Ordering::Relaxed)).wrapping_add(1) & 0xffff_ffff;
        shared.state.store(epoch << 32 | OPEN, Ordering::SeqCst);
        if shared.sleepers.load(Ordering::SeqCst) > 0 {
            pool.placement.keep_off_caller(&pool.workers);
            let _park = lock(&shared.park);
            shared.wake.notify_all();
        }
        let finish = Finish(shared);
        claim(&shared.next, tasks, f);
        let claimed = now_ns();
        drop(finish);
        count(CALLER_TASK_NS, claimed.saturating_sub(published));
        count(JOBS, 1);
        count(TASKS, tasks as u64);
        count(JOB_NS, now_ns().saturating_sub(published));
        if shared.panicked.load(Ordering::Relaxed) {
            panic!("kiln: a kernel task panicked on a worker thread");
        }
    }
}

/// Where parked workers wake up: not on the caller's CPU.
///
/// Linux places a thread it wakes on an idle CPU near the waker, but in a virtual machine a
/// vCPU that has been idle for a while is halted, reports itself preempted, and does not count
/// as idle; the woken worker then lands on the caller's own CPU and the two take turns on it in
/// slices of milliseconds while the other CPU stays idle, until the load balancer moves one of
/// them (measured on a 2-vCPU EPYC guest: an inference after 100 ms of idleness ran 2x slower
/// than the same one back to back, `perf sched timehist` showing caller and worker alternating
/// on one CPU for 20 ms). So before it wakes parked workers the caller takes its own CPU out of
/// their affinity masks (the CPUs the pool's creator was allowed, minus the caller's), which
/// makes the wake-up pick another one. Only when the caller's CPU changed since the last time:
/// one `sched_getcpu` per wake-up, a syscall per worker per migration. Failures are ignored:
/// this only places threads, it never decides what runs.
#[cfg(target_os = "linux")]
mod placement {
    use std::os::unix::thread::JoinHandleExt;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::thread::JoinHandle;

    pub(super) struct Placement {
        /// The CPUs the pool's creator may run on, if more than one.
        pub(super) allowed: Option<libc::cpu_set_t>,
        /// The CPU the workers are kept off now (`usize::MAX`: none yet).
        pub(super) avoided: AtomicUsize,
    }

    impl std::fmt::Debug for Placement {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Placement")
                .field("avoided", &self.avoided.load(Ordering::Relaxed))
                .finish_non_exhaustive()
        }
    }

    impl Placement {
        pub(super) fn of_this_thread() -> Placement {
            // SAFETY: `cpu_set_t` is plain bits (all zero is the empty set); `sched_getaffinity`
            // writes at most `size_of::<cpu_set_t>()` bytes into it.
            let allowed = unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                let got = libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set);
                (got == 0 && libc::CPU_COUNT(&set) > 1).then_some(set)
            };
            Placement {
                allowed,
                avoided: AtomicUsize::new(usize::MAX),
            }
        }

        /// Takes the calling thread's CPU out of the `workers`' affinity masks.
        pub(super) fn keep_off_caller(&self, workers: &[JoinHandle<()>]) {
            let Some(allowed) = &self.allowed else {
                return;
            };
            // SAFETY: no arguments; returns -1 on failure.
            let Ok(cpu) = usize::try_from(unsafe { libc::sched_getcpu() }) else {
                return;
            };
            // SAFETY: `CPU_ISSET` and `CPU_CLR` index the set's bits, checked against its size.
            let outside =
                cpu >= libc::CPU_SETSIZE as usize || !unsafe { libc::CPU_ISSET(cpu, allowed) };
            // (A caller on a CPU the creator was not allowed, e.g. another thread with a mask of
            // its own: nothing to avoid.)
            if outside || self.avoided.load(Ordering::Relaxed) == cpu {
                return;
            }
            let mut mask = *allowed;
            // SAFETY: as above, `cpu` is inside the set.
            unsafe { libc::CPU_CLR(cpu, &mut mask) };
            for w in workers {
                // SAFETY: the handle's thread has not been joined (the pool owns it), so its
                // `pthread_t` is valid; the mask is a valid set of the given size.
                unsafe {
                    libc::pthread_setaffinity_np(
                        w.as_pthread_t(),
                        size_of::<libc::cpu_set_t>(),
                        &mask,
                    )
                };
            }
            self.avoided.store(cpu, Ordering::Relaxed);
        }
    }
}

/// Elsewhere: the scheduler's placement as it is.
#[cfg(not(target_os = "linux"))]
mod placement {
    #[derive(Debug)]
    pub(super) struct Placement;

    impl Placement {
        pub(super) fn of_this_thread() -> Placement {
            Placement
        }

        pub(super) fn keep_off_caller(&self, _workers: &[std::thread::JoinHandle<()>]) {}
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        {
            let _park = lock(&self.shared.park);
            self.shared.wake.notify_all();
        }
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

    /// Jobs further apart than the workers' spin: each finds them parked and must wake them
    /// (or run alone); back-to-back jobs find them spinning. Every task still runs once.
    #[test]
    fn parked_and_spinning_workers_both_take_jobs() {
        let t = Threads::new(3).unwrap();
        for gap in [SPIN * 4, Duration::ZERO, SPIN * 4, Duration::ZERO] {
            for _ in 0..20 {
                std::thread::sleep(gap);
                let hits: Vec<AtomicUsize> = (0..50).map(|_| AtomicUsize::new(0)).collect();
                t.run(50, &|i| {
                    hits[i].fetch_add(1, Ordering::Relaxed);
                });
                assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
            }
        }
    }

    /// A parked worker is woken with the caller's CPU out of its mask (where the machine
    /// lets this process run on more than one CPU).
    #[cfg(target_os = "linux")]
    #[test]
    fn woken_workers_are_kept_off_the_callers_cpu() {
        let t = Threads::new(2).unwrap();
        let pool = t.pool.as_ref().unwrap();
        let Some(allowed) = pool.placement.allowed else {
            return;
        };
        std::thread::sleep(SPIN * 4);
        t.run(4, &|_| {});
        let avoided = pool.placement.avoided.load(Ordering::Relaxed);
        assert_ne!(avoided, usize::MAX, "the wake-up did not place the worker");
        use std::os::unix::thread::JoinHandleExt;
        // SAFETY: the worker is alive (the pool owns it); the set is plain bits.
        let mask = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            let handle = pool.workers[0].as_pthread_t();
            let got = libc::pthread_getaffinity_np(handle, size_of::<libc::cpu_set_t>(), &mut set);
            assert_eq!(got, 0);
            set
        };
        for cpu in 0..libc::CPU_SETSIZE as usize {
            // SAFETY: `cpu` is inside both sets.
            let (is_allowed, in_mask) =
                unsafe { (libc::CPU_ISSET(cpu, &allowed), libc::CPU_ISSET(cpu, &mask)) };
            assert_eq!(in_mask, is_allowed && cpu != avoided, "cpu {cpu}");
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
