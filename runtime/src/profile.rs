//! Per-layer timing: with the `profile` cargo feature, every op a model runs records its wall
//! time on the calling thread, under a label the compiler wrote (the op's result name, kind,
//! shapes and, for a convolution, the algorithm the compiler chose).
//!
//! Without the feature the hooks the generated code calls ([`start`], [`stop`]) are empty
//! inline functions and there is nothing to read; with it, each op costs two clock reads and a
//! table update (a few tens of nanoseconds), so a profiling build is for finding the slow
//! layers, not for timing the whole model. Ops that a model splits over its worker threads are
//! timed on the caller, which waits for the job: their wall time.

#[cfg(feature = "profile")]
mod imp {
    use std::cell::RefCell;
    use std::time::{Duration, Instant};

    /// The time one labelled op took, summed over the runs since the last [`take`].
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct OpTime {
        /// `name: kind input -> output [algorithm]`, as the compiler wrote it.
        pub label: &'static str,
        /// How many times the op ran.
        pub calls: u64,
        /// Its wall time over those runs.
        pub total: Duration,
    }

    struct Table {
        ops: Vec<OpTime>,
        /// Where the next op is expected: a model runs its ops in the same order every time.
        cursor: usize,
    }

    thread_local! {
        static TABLE: RefCell<Table> = const { RefCell::new(Table { ops: Vec::new(), cursor: 0 }) };
    }

    /// Started before an op (generated code only).
    #[derive(Clone, Copy, Debug)]
    pub struct Stamp(Instant);

    #[inline]
    pub fn start() -> Stamp {
        Stamp(Instant::now())
    }

    #[inline]
    pub fn stop(stamp: Stamp, label: &'static str) {
        let took = stamp.0.elapsed();
        TABLE.with(|t| {
            let mut t = t.borrow_mut();
            let same = |o: &OpTime| core::ptr::eq(o.label, label);
            let at = match t.ops.get(t.cursor) {
                Some(o) if same(o) => t.cursor,
                _ => match t.ops.iter().position(same) {
                    Some(i) => i,
                    None => {
                        t.ops.push(OpTime {
                            label,
                            calls: 0,
                            total: Duration::ZERO,
                        });
                        t.ops.len() - 1
                    }
                },
            };
            let o = &mut t.ops[at];
            o.calls += 1;
            o.total += took;
            t.cursor = at + 1;
        });
    }

    /// The ops this thread ran since the last call, in the order they first ran, and clears
    /// the table.
    ///
    /// ```ignore
    /// model.run(&x)?; // warm up
    /// kiln::profile::take();
    /// for _ in 0..100 { model.run(&x)?; }
    /// let mut ops = kiln::profile::take();
    /// ops.sort_by_key(|o| std::cmp::Reverse(o.total));
    /// for o in &ops[..10] { println!("{:>8.3} ms  {}", o.total.as_secs_f64() * 1e3 / o.calls as f64, o.label); }
    /// ```
    pub fn take() -> Vec<OpTime> {
        TABLE.with(|t| {
            let mut t = t.borrow_mut();
            t.cursor = 0;
            core::mem::take(&mut t.ops)
        })
    }
}

#[cfg(feature = "profile")]
pub use imp::{start, stop, take, OpTime, Stamp};

#[cfg(not(feature = "profile"))]
#[inline(always)]
pub fn start() {}

#[cfg(not(feature = "profile"))]
#[inline(always)]
pub fn stop(_stamp: (), _label: &'static str) {}
