//! Intra-op parallelism, as a contract the kernels call and the runtime implements.
//!
//! The kernels crate is `no_std` and owns no threads. A kernel that can split its work takes a
//! [`Parallel`]: `run(tasks, f)` calls `f(0)`, ..., `f(tasks - 1)`, each exactly once, possibly
//! on several threads at once, and returns when all have returned. [`Serial`] runs them in
//! order on the caller's thread (the default: one thread); the runtime's worker pool
//! (`kiln::Threads`) runs them on parked worker threads plus the caller.
//!
//! The tasks of one kernel write disjoint parts of its output. [`SharedMut`] is the one place
//! that hands such parts out as `&mut` slices: it is sound because the trait is `unsafe` to
//! implement, and its contract (each index once, all done before `run` returns) is what makes
//! two tasks' parts never alias and never outlive the borrow they come from.

use core::marker::PhantomData;

/// Runs a kernel's tasks, on one thread or several.
///
/// # Safety
///
/// An implementation's `run(tasks, f)` calls `f(i)` exactly once for every `i` in `0..tasks`
/// and returns only after every call has returned (so nothing `f` borrows is used after `run`
/// returns). Kernels rely on this to hand each task its own `&mut` part of an output.
pub unsafe trait Parallel: Sync {
    /// How many threads may run tasks at once, the caller's included (1 for [`Serial`]).
    fn threads(&self) -> usize;

    /// Runs `f(0..tasks)`; see the trait's contract.
    fn run(&self, tasks: usize, f: &(dyn Fn(usize) + Sync));
}

/// The tasks in order, on the calling thread.
#[derive(Clone, Copy, Debug, Default)]
pub struct Serial;

// SAFETY: every index once, in order, before returning.
unsafe impl Parallel for Serial {
    fn threads(&self) -> usize {
        1
    }

    fn run(&self, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        for i in 0..tasks {
            f(i);
        }
    }
}

/// Below this many multiply-adds a kernel runs on the calling thread alone. The runtime's
/// workers spin between kernels, so handing them a job costs a few microseconds (a sleeping
/// one, tens); a million multiply-adds take about 20 us on one core.
pub const MIN_PARALLEL_FMAS: usize = 1 << 20;

/// Whether a kernel of `fmas` multiply-adds should split its work on `par`.
#[inline]
pub fn worth_splitting(par: &dyn Parallel, fmas: usize) -> bool {
    par.threads() > 1 && fmas >= MIN_PARALLEL_FMAS
}

/// A mutable slice that the tasks of one [`Parallel::run`] write disjoint parts of.
#[derive(Debug)]
pub struct SharedMut<'a> {
    ptr: *mut f32,
    len: usize,
    _borrow: PhantomData<&'a mut [f32]>,
}

// SAFETY: it only hands out disjoint parts (the callers' contract on `part`), like `&mut [f32]`
// split with `chunks_mut`, which is `Send`; `f32` is `Send + Sync`.
unsafe impl Sync for SharedMut<'_> {}
// SAFETY: as for `Sync`.
unsafe impl Send for SharedMut<'_> {}

impl<'a> SharedMut<'a> {
    pub fn new(data: &'a mut [f32]) -> Self {
        SharedMut {
            ptr: data.as_mut_ptr(),
            len: data.len(),
            _borrow: PhantomData,
        }
    }

    /// The whole slice's length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the slice is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pointer to element 0, for kernels that write through raw pointers (the GEMM driver).
    pub fn as_ptr(&self) -> *mut f32 {
        self.ptr
    }

    /// Elements `start..start + len`. Panics if they are outside the slice.
    ///
    /// # Safety
    ///
    /// No other live reference (from another task or call) overlaps this range while the
    /// returned slice is used.
    #[allow(clippy::mut_from_ref)] // The point of the type; the caller proves disjointness.
    pub unsafe fn part(&self, start: usize, len: usize) -> &mut [f32] {
        assert!(
            start.checked_add(len).is_some_and(|end| end <= self.len),
            "SharedMut::part out of range"
        );
        // SAFETY: in bounds (checked); exclusive by the caller's contract; the borrow `'a`
        // outlives `self`.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.add(start), len) }
    }
}

impl SharedMut<'_> {
    /// Elements `start..start + len`, to read. Panics if they are outside the slice.
    ///
    /// # Safety
    ///
    /// No live `&mut` from [`part`](Self::part) overlaps this range while the returned slice
    /// is used.
    pub unsafe fn read(&self, start: usize, len: usize) -> &[f32] {
        assert!(
            start.checked_add(len).is_some_and(|end| end <= self.len),
            "SharedMut::read out of range"
        );
        // SAFETY: in bounds (checked); nothing writes it meanwhile (the caller's contract).
        unsafe { core::slice::from_raw_parts(self.ptr.add(start), len) }
    }
}

/// Runs `f(i, &mut data[i * chunk..][..chunk])` for every whole chunk of `data` on `par`: the
/// safe form of [`SharedMut`] for outputs split into equal contiguous parts.
pub fn for_each_chunk(
    par: &dyn Parallel,
    data: &mut [f32],
    chunk: usize,
    f: &(dyn Fn(usize, &mut [f32]) + Sync),
) {
    if chunk == 0 {
        return;
    }
    let tasks = data.len() / chunk;
    let shared = SharedMut::new(data);
    par.run(tasks, &|i| {
        // SAFETY: task `i` takes chunk `i` only, and `Parallel` runs each index once.
        let part = unsafe { shared.part(i * chunk, chunk) };
        f(i, part);
    });
}
