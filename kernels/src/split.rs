//! The memory-bound kernels on several threads: [`Kernels`]' `_on` entries for element-wise
//! operations, batch norms, pooling, global average pooling, concatenation copies and
//! depthwise convolutions.
//!
//! None of these kernels knows about threads. Each entry here cuts its NCHW data into runs of
//! whole channel planes, `(image, channels c0..c1)`, and calls the table's serial kernel once
//! per run on the matching sub-slices (the kernels are per plane, so a run is a complete,
//! smaller problem of the same kind). A run's output is its own contiguous part of the
//! output, so the tasks write disjoint parts ([`SharedMut`]). Below
//! [`MIN_PARALLEL_ELEMENTS`], or on one thread, each entry makes exactly the serial call, so
//! one thread runs what it always ran.

use core::ops::Range;

use crate::par::{Parallel, SharedMut};
use crate::{Activation, BinaryOp, Broadcast, Conv2d, Kernels, Pool2d};

/// Below this many output (or, for pooling, input) elements a memory-bound kernel runs on
/// the calling thread: it takes about 10 us, a few times what handing half of it to a
/// spinning worker costs.
pub const MIN_PARALLEL_ELEMENTS: usize = 1 << 15;

/// Runs are cut at multiples of this many channels where there are enough, so that kernels
/// that put channels in SIMD lanes keep full vectors.
const ALIGN: usize = 16;

/// How many band buffers the compiler plans for a depthwise convolution that needs one
/// (`Conv2d::scratch_len` floats each; `model-dsl/src/layout.rs` copies this number): one per
/// task of [`Kernels::depthwise_on`], so that up to this many channel runs can run at once.
/// Four, so that two threads claim two runs each dynamically (one finishing early takes the
/// other's last run); at most 4 x 128 KiB.
pub const DEPTHWISE_SCRATCH_SLOTS: usize = 4;

/// Below this many multiply-adds (outputs times taps) a depthwise convolution runs on the
/// calling thread: about 8 us of the SIMD kernels.
const MIN_PARALLEL_DEPTHWISE_FMAS: usize = 4 * MIN_PARALLEL_ELEMENTS;

/// Runs `f(image, c0..c1)` over the `batch x channels` planes (of `plane` elements each, for
/// the threshold), in about four runs per thread claimed dynamically; `false` (and nothing
/// run) if the data is too small to split or `par` has one thread.
fn for_each_run(
    par: &dyn Parallel,
    batch: usize,
    channels: usize,
    plane: usize,
    f: &(dyn Fn(usize, Range<usize>) + Sync),
) -> bool {
    let planes = batch.saturating_mul(channels);
    if par.threads() <= 1 || planes < 2 || planes.saturating_mul(plane) < MIN_PARALLEL_ELEMENTS {
        return false;
    }
    let target = 4 * par.threads();
    let align = if planes >= target * ALIGN { ALIGN } else { 1 };
    let units = planes.div_ceil(align);
    let tasks = target.min(units);
    par.run(tasks, &|t| {
        let start = (units * t / tasks * align).min(planes);
        let end = (units * (t + 1) / tasks * align).min(planes);
        // The task's planes `start..end`, cut at image boundaries.
        let mut i = start;
        while i < end {
            let (image, c0) = (i / channels, i % channels);
            let c1 = channels.min(c0 + (end - i));
            f(image, c0..c1);
            i += c1 - c0;
        }
    });
    true
}

impl Kernels {
    /// A depthwise `conv2d` on `par`'s threads, by runs of whole channels, each the table's
    /// serial `conv2d` on its channels' planes, weights, bias and output, with a band buffer
    /// of its own: `scratch` holds [`DEPTHWISE_SCRATCH_SLOTS`] of them where the compiler
    /// planned them (fewer: fewer runs; one: no split). Runs start at multiples of 16 channels
    /// of an image, so a channels-in-lanes kernel groups the channels into vectors exactly as
    /// in one call, and the result is the same to the bit. Returns `false`, having done
    /// nothing, if `p` is not depthwise or too small to split, or `par` has one thread.
    #[allow(clippy::too_many_arguments)] // conv2d's contract plus the threads.
    pub(crate) fn depthwise_on(
        &self,
        par: &dyn Parallel,
        p: &Conv2d,
        input: &[f32],
        weight: &[f32],
        bias: Option<&[f32]>,
        act: Activation,
        scratch: &mut [f32],
        out: &mut [f32],
    ) -> bool {
        let channels = p.c_out;
        let (in_plane, out_plane, taps) = (p.h * p.w, p.out_h * p.out_w, p.kh * p.kw);
        let fmas = (p.batch * channels)
            .saturating_mul(out_plane)
            .saturating_mul(taps);
        if par.threads() <= 1
            || !p.is_depthwise()
            || p.c_in != channels
            || fmas < MIN_PARALLEL_DEPTHWISE_FMAS
        {
            return false;
        }
        let need = p.scratch_len();
        let slots = scratch.len().checked_div(need).unwrap_or(usize::MAX);
        // Units of 16 channels of one image; a task takes a run of whole units.
        let per_image = channels.div_ceil(ALIGN);
        let units = p.batch * per_image;
        let tasks = units.min(slots).min(4 * par.threads());
        if tasks < 2 {
            return false;
        }
        p.check_operands(input, weight, bias, out);
        let (out, scratch) = (SharedMut::new(out), SharedMut::new(scratch));
        par.run(tasks, &|t| {
            // SAFETY: task `t` takes slot `t` only (`tasks <= slots`), and `Parallel` runs
            // each index once.
            let scratch = unsafe { scratch.part(t * need, need) };
            let (mut u, end) = (units * t / tasks, units * (t + 1) / tasks);
            while u < end {
                // The task's units in this image: channels `c0..c1`.
                let (image, first) = (u / per_image, u % per_image);
                let last = per_image.min(first + (end - u));
                let (c0, c1) = (first * ALIGN, channels.min(last * ALIGN));
                let sub = Conv2d {
                    batch: 1,
                    c_in: c1 - c0,
                    c_out: c1 - c0,
                    groups: c1 - c0,
                    ..*p
                };
                let plane = image * channels + c0;
                let input = &input[plane * in_plane..(plane + sub.c_in) * in_plane];
                let weight = &weight[c0 * taps..c1 * taps];
                // SAFETY: runs are disjoint planes of the output, and `Parallel` runs each
                // task once.
                let out = unsafe { out.part(plane * out_plane, sub.c_out * out_plane) };
                let bias = bias.map(|b| &b[c0..c1]);
                (self.conv2d)(&sub, input, weight, bias, act, scratch, out);
                u += last - first;
            }
        });
        true
    }

    /// `global_avg_pool` on `par`'s threads when it is large enough, else on the calling
    /// thread.
    pub fn global_avg_pool_on(
        &self,
        par: &dyn Parallel,
        batch: usize,
        channels: usize,
        spatial: usize,
        input: &[f32],
        out: &mut [f32],
    ) {
        let out = SharedMut::new(out);
        if !for_each_run(par, batch, channels, spatial, &|n, c| {
            let plane = n * channels + c.start;
            let input = &input[plane * spatial..(plane + c.len()) * spatial];
            // SAFETY: runs are disjoint outputs, and `Parallel` runs each once.
            let part = unsafe { out.part(plane, c.len()) };
            (self.global_avg_pool)(1, c.len(), spatial, input, part);
        }) {
            let len = out.len();
            // SAFETY: no task ran, so nothing else refers to `out`.
            let out = unsafe { out.part(0, len) };
            (self.global_avg_pool)(batch, channels, spatial, input, out);
        }
    }

    /// `unary` on `par`'s threads when it is large enough, else on the calling thread.
    pub fn unary_on(&self, par: &dyn Parallel, act: Activation, input: &[f32], out: &mut [f32]) {
        let len = input.len();
        let chunk = Self::chunk(par, len);
        let out = SharedMut::new(out);
        if !for_each_run(par, 1, len.div_ceil(chunk), chunk, &|_, r| {
            let (start, end) = (r.start * chunk, (r.end * chunk).min(len));
            // SAFETY: runs are disjoint, and `Parallel` runs each once.
            let part = unsafe { out.part(start, end - start) };
            (self.unary)(act, &input[start..end], part);
        }) {
            let all = out.len();
            // SAFETY: no task ran, so nothing else refers to `out`.
            (self.unary)(act, input, unsafe { out.part(0, all) });
        }
    }

    /// `unary_inplace` on `par`'s threads when it is large enough, else on the calling thread.
    pub fn unary_inplace_on(&self, par: &dyn Parallel, act: Activation, data: &mut [f32]) {
        let len = data.len();
        let chunk = Self::chunk(par, len);
        let data = SharedMut::new(data);
        if !for_each_run(par, 1, len.div_ceil(chunk), chunk, &|_, r| {
            let (start, end) = (r.start * chunk, (r.end * chunk).min(len));
            // SAFETY: runs are disjoint, and `Parallel` runs each once.
            (self.unary_inplace)(act, unsafe { data.part(start, end - start) });
        }) {
            // SAFETY: no task ran, so nothing else refers to `data`.
            (self.unary_inplace)(act, unsafe { data.part(0, len) });
        }
    }

    /// The run length for flat element-wise data of `len` elements: about four runs per
    /// thread, in whole 64-float (cache line and vector) multiples.
    fn chunk(par: &dyn Parallel, len: usize) -> usize {
        len.div_ceil(4 * par.threads()).next_multiple_of(64).max(64)
    }

    /// `scale_shift` on `par`'s threads when it is large enough, else on the calling thread.
    #[allow(clippy::too_many_arguments)] // scale_shift's contract plus the threads.
    pub fn scale_shift_on(
        &self,
        par: &dyn Parallel,
        batch: usize,
        channels: usize,
        spatial: usize,
        input: &[f32],
        scale: &[f32],
        shift: &[f32],
        act: Activation,
        out: &mut [f32],
    ) {
        let out = SharedMut::new(out);
        if !for_each_run(par, batch, channels, spatial, &|n, c| {
            let at = (n * channels + c.start) * spatial;
            let len = c.len() * spatial;
            (self.scale_shift)(
                1,
                c.len(),
                spatial,
                &input[at..at + len],
                &scale[c.clone()],
                &shift[c],
                act,
                // SAFETY: runs are disjoint planes, and `Parallel` runs each once.
                unsafe { out.part(at, len) },
            );
        }) {
            let len = out.len();
            // SAFETY: no task ran, so nothing else refers to `out`.
            let out = unsafe { out.part(0, len) };
            (self.scale_shift)(batch, channels, spatial, input, scale, shift, act, out);
        }
    }

    /// `scale_shift_inplace` on `par`'s threads when it is large enough, else on the calling
    /// thread.
    #[allow(clippy::too_many_arguments)] // scale_shift_inplace's contract plus the threads.
    pub fn scale_shift_inplace_on(
        &self,
        par: &dyn Parallel,
        batch: usize,
        channels: usize,
        spatial: usize,
        data: &mut [f32],
        scale: &[f32],
        shift: &[f32],
        act: Activation,
    ) {
        let data = SharedMut::new(data);
        if !for_each_run(par, batch, channels, spatial, &|n, c| {
            let at = (n * channels + c.start) * spatial;
            // SAFETY: runs are disjoint planes, and `Parallel` runs each once.
            let part = unsafe { data.part(at, c.len() * spatial) };
            (self.scale_shift_inplace)(
                1,
                c.len(),
                spatial,
                part,
                &scale[c.clone()],
                &shift[c],
                act,
            );
        }) {
            let len = data.len();
            // SAFETY: no task ran, so nothing else refers to `data`.
            let data = unsafe { data.part(0, len) };
            (self.scale_shift_inplace)(batch, channels, spatial, data, scale, shift, act);
        }
    }

    /// `binary` on `par`'s threads when it is large enough, else on the calling thread. Split
    /// on the output's two outer dimensions.
    pub fn binary_on(
        &self,
        par: &dyn Parallel,
        op: BinaryOp,
        bc: &Broadcast,
        a: &[f32],
        b: &[f32],
        out: &mut [f32],
    ) {
        let [d0, d1, d2, d3] = bc.shape;
        let inner = d2 * d3;
        let out = SharedMut::new(out);
        if !for_each_run(par, d0, d1, inner, &|i, r| {
            let sub = Broadcast {
                shape: [1, r.len(), d2, d3],
                ..*bc
            };
            let at = |s: [usize; 4]| i * s[0] + r.start * s[1];
            // SAFETY: runs are disjoint parts of the contiguous output, and `Parallel` runs
            // each once.
            let part = unsafe { out.part((i * d1 + r.start) * inner, r.len() * inner) };
            (self.binary)(
                op,
                &sub,
                &a[at(bc.a_strides)..],
                &b[at(bc.b_strides)..],
                part,
            );
        }) {
            let len = out.len();
            // SAFETY: no task ran, so nothing else refers to `out`.
            (self.binary)(op, bc, a, b, unsafe { out.part(0, len) });
        }
    }

    /// `binary_inplace` on `par`'s threads when it is large enough, else on the calling
    /// thread. Split on the output's two outer dimensions.
    pub fn binary_inplace_on(
        &self,
        par: &dyn Parallel,
        op: BinaryOp,
        bc: &Broadcast,
        acc: &mut [f32],
        other: &[f32],
        acc_is_lhs: bool,
    ) {
        let [d0, d1, d2, d3] = bc.shape;
        let inner = d2 * d3;
        let so = if acc_is_lhs {
            bc.b_strides
        } else {
            bc.a_strides
        };
        let acc = SharedMut::new(acc);
        if !for_each_run(par, d0, d1, inner, &|i, r| {
            let sub = Broadcast {
                shape: [1, r.len(), d2, d3],
                ..*bc
            };
            // SAFETY: runs are disjoint parts of the contiguous accumulator, and `Parallel`
            // runs each once.
            let part = unsafe { acc.part((i * d1 + r.start) * inner, r.len() * inner) };
            let other = &other[i * so[0] + r.start * so[1]..];
            (self.binary_inplace)(op, &sub, part, other, acc_is_lhs);
        }) {
            let len = acc.len();
            // SAFETY: no task ran, so nothing else refers to `acc`.
            (self.binary_inplace)(op, bc, unsafe { acc.part(0, len) }, other, acc_is_lhs);
        }
    }

    /// `dense` on `par`'s threads when it is large enough (one row of inputs, a matrix-vector
    /// product, memory-bound on its weights), else on the calling thread. Split by runs of
    /// outputs, each the serial kernel on its rows of `weight`.
    #[allow(clippy::too_many_arguments)] // dense's contract plus the threads.
    pub fn dense_on(
        &self,
        par: &dyn Parallel,
        batch: usize,
        n_in: usize,
        n_out: usize,
        input: &[f32],
        weight: &[f32],
        bias: Option<&[f32]>,
        act: Activation,
        out: &mut [f32],
    ) {
        let out = SharedMut::new(out);
        if batch != 1
            || !for_each_run(par, 1, n_out, n_in, &|_, o| {
                let rows = &weight[o.start * n_in..o.end * n_in];
                let bias = bias.map(|b| &b[o.clone()]);
                // SAFETY: runs are disjoint outputs, and `Parallel` runs each once.
                let part = unsafe { out.part(o.start, o.len()) };
                (self.dense)(1, n_in, o.len(), input, rows, bias, act, part);
            })
        {
            let len = out.len();
            // SAFETY: no task ran, so nothing else refers to `out`.
            let out = unsafe { out.part(0, len) };
            (self.dense)(batch, n_in, n_out, input, weight, bias, act, out);
        }
    }

    /// `max_pool2d` on `par`'s threads when it is large enough, else on the calling thread.
    pub fn max_pool2d_on(&self, par: &dyn Parallel, p: &Pool2d, input: &[f32], out: &mut [f32]) {
        self.pool2d_on(self.max_pool2d, par, p, input, out);
    }

    /// `avg_pool2d` on `par`'s threads when it is large enough, else on the calling thread.
    pub fn avg_pool2d_on(&self, par: &dyn Parallel, p: &Pool2d, input: &[f32], out: &mut [f32]) {
        self.pool2d_on(self.avg_pool2d, par, p, input, out);
    }

    fn pool2d_on(
        &self,
        pool: fn(&Pool2d, &[f32], &mut [f32]),
        par: &dyn Parallel,
        p: &Pool2d,
        input: &[f32],
        out: &mut [f32],
    ) {
        let (in_plane, out_plane) = (p.h * p.w, p.out_h * p.out_w);
        let out = SharedMut::new(out);
        // Images and channels are one run of planes to a per-plane pooling.
        if !for_each_run(par, 1, p.batch * p.channels, in_plane, &|_, c| {
            let sub = Pool2d {
                batch: 1,
                channels: c.len(),
                ..*p
            };
            let input = &input[c.start * in_plane..c.end * in_plane];
            // SAFETY: runs are disjoint planes, and `Parallel` runs each once.
            pool(&sub, input, unsafe {
                out.part(c.start * out_plane, c.len() * out_plane)
            });
        }) {
            let len = out.len();
            // SAFETY: no task ran, so nothing else refers to `out`.
            pool(p, input, unsafe { out.part(0, len) });
        }
    }

    /// `copy_into_channels` on `par`'s threads when it is large enough, else on the calling
    /// thread.
    #[allow(clippy::too_many_arguments)] // copy_into_channels' contract plus the threads.
    pub fn copy_into_channels_on(
        &self,
        par: &dyn Parallel,
        batch: usize,
        c_src: usize,
        spatial: usize,
        src: &[f32],
        c_dst: usize,
        c_offset: usize,
        dst: &mut [f32],
    ) {
        let dst = SharedMut::new(dst);
        if !for_each_run(par, batch, c_src, spatial, &|n, c| {
            let from = (n * c_src + c.start) * spatial;
            let to = (n * c_dst + c_offset + c.start) * spatial;
            let len = c.len() * spatial;
            // SAFETY: runs are disjoint planes of this input's channels of `dst`, and
            // `Parallel` runs each once.
            let part = unsafe { dst.part(to, len) };
            (self.copy_into_channels)(
                1,
                c.len(),
                spatial,
                &src[from..from + len],
                c.len(),
                0,
                part,
            );
        }) {
            let len = dst.len();
            // SAFETY: no task ran, so nothing else refers to `dst`.
            let dst = unsafe { dst.part(0, len) };
            (self.copy_into_channels)(batch, c_src, spatial, src, c_dst, c_offset, dst);
        }
    }
}
