//! Kernels split among threads (`Kernels::gemm_on`, `conv2d_on` (depthwise ones by channels on
//! every table), `conv2d_winograd_on`, `conv2d_nchwc_on`, and the memory-bound `_on` entries: element-wise, batch
//! norm, pooling, global average pooling, concatenation) give
//! the same result, to the bit, as the same table on one thread, for every ISA this CPU has,
//! on shapes large enough to be split (column panels, row slivers when there is only one
//! panel, groups, ragged edges); and that result is within the usual tolerance of the
//! portable reference. A test `Parallel` made of scoped threads counts the jobs it ran, so a
//! table that claims parallel entries is proved to have used them.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use kiln_kernels::par::{Parallel, MIN_PARALLEL_FMAS};
use kiln_kernels::{
    pack, winograd, Activation, BinaryOp, Broadcast, Conv2d, Kernels, Pool2d, PORTABLE,
};

/// `threads` scoped threads claiming tasks from a counter; counts the jobs of several tasks.
struct Scoped {
    threads: usize,
    jobs: AtomicUsize,
}

// SAFETY: every index is claimed once from the counter, and the scope joins every thread
// before `run` returns.
unsafe impl Parallel for Scoped {
    fn threads(&self) -> usize {
        self.threads
    }

    fn run(&self, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        if tasks > 1 {
            self.jobs.fetch_add(1, Ordering::Relaxed);
        }
        let next = AtomicUsize::new(0);
        let claim = || loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= tasks {
                break;
            }
            f(i);
        };
        std::thread::scope(|s| {
            for _ in 1..self.threads {
                s.spawn(claim);
            }
            claim();
        });
    }
}

fn data(len: usize, seed: u32) -> Vec<f32> {
    let mut rng = common::Rng::new(seed);
    (0..len).map(|_| rng.uniform(-1.0, 1.0) as f32).collect()
}

/// Every table to check: the reference (which has no parallel entries and must fall back) and
/// each ISA this CPU runs.
fn tables(test: &'static str) -> Vec<Kernels> {
    let mut t = vec![PORTABLE];
    t.extend(common::isas(test));
    t
}

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let tol = 1e-4 * w.abs().max(1.0);
        assert!((g - w).abs() <= tol, "{what}: [{i}] {g} vs {w}");
    }
}

/// Checks `run(par, out)` for one and several threads: bit-identical, and parallel jobs ran
/// when the table has parallel entries.
fn same_on_threads(kt: &Kernels, what: &str, run: &dyn Fn(&dyn Parallel, &mut [f32]), len: usize) {
    on_threads(kt, what, len, kt.par.is_some(), run);
}

/// Checks `run(par, out)` on 2 and 3 threads: bit-identical to one thread, and split into
/// parallel jobs exactly when `split`.
fn on_threads(
    kt: &Kernels,
    what: &str,
    len: usize,
    split: bool,
    run: &dyn Fn(&dyn Parallel, &mut [f32]),
) {
    let mut one = vec![f32::NAN; len];
    run(&kiln_kernels::par::Serial, &mut one);
    for threads in [2, 3] {
        let par = Scoped {
            threads,
            jobs: AtomicUsize::new(0),
        };
        let mut got = vec![f32::NAN; len];
        run(&par, &mut got);
        let differ = one
            .iter()
            .zip(&got)
            .position(|(a, b)| a.to_bits() != b.to_bits());
        assert!(
            differ.is_none(),
            "{what} on {:?}, {threads} threads: element {differ:?} differs from one thread",
            kt.isa
        );
        let jobs = par.jobs.load(Ordering::Relaxed);
        assert_eq!(
            jobs > 0,
            split,
            "{what} on {:?}: {jobs} parallel jobs",
            kt.isa
        );
    }
}

#[test]
fn gemm_split_matches_one_thread() {
    // Many column panels; one panel (rows split); ragged everything; two panels.
    for (m, n, k) in [
        (64, 1000, 300),
        (500, 49, 512),
        (37, 333, 700),
        (256, 256, 256),
    ] {
        assert!(m * n * k >= MIN_PARALLEL_FMAS);
        let (a, b) = (data(m * k, 1), data(k * n, 2));
        let mut want = vec![0.0; m * n];
        (PORTABLE.gemm)(m, n, k, &a, &b, &mut want);
        for kt in tables("gemm_on") {
            let what = format!("gemm {m}x{n}x{k}");
            same_on_threads(
                &kt,
                &what,
                &|par, c| {
                    kt.gemm_on(par, m, n, k, &a, &b, c);
                    assert_close(c, &want, &what);
                },
                m * n,
            );
        }
    }
}

fn conv(
    c_in: usize,
    c_out: usize,
    hw: usize,
    k: usize,
    stride: usize,
    pad: usize,
    groups: usize,
) -> Conv2d {
    let out = (hw + 2 * pad - k) / stride + 1;
    Conv2d {
        batch: 1,
        c_in,
        h: hw,
        w: hw,
        c_out,
        kh: k,
        kw: k,
        stride: [stride; 2],
        dilation: [1; 2],
        pad: [pad; 4],
        groups,
        out_h: out,
        out_w: out,
    }
}

#[test]
fn conv2d_split_matches_one_thread() {
    let cases = [
        // Stride 2 (x86: through the input's phases, written by runs of channels on the
        // threads): a 3x3 over several panels, and a 1x1 projection reading its phase in place.
        conv(64, 96, 56, 3, 2, 1, 1),
        conv(256, 128, 28, 1, 2, 0, 1),
        conv(64, 128, 28, 1, 1, 0, 1),  // pointwise
        conv(256, 128, 7, 3, 1, 1, 1),  // a 7x7 map: one panel, rows split
        conv(256, 128, 14, 1, 1, 0, 1), // DenseNet's 14x14 pointwise: two unequal panels
        conv(64, 96, 12, 3, 1, 1, 1),   // 12x12: two panels, a half-width micro-panel
        conv(128, 128, 28, 3, 1, 1, 2), // grouped
        conv(48, 40, 30, 5, 1, 2, 1),   // ragged
        conv(24, 150, 27, 1, 1, 0, 1),  // short expansion: wide panels, 729 = 512 + 217
        // Few output channels (x86 AVX-512: the GEMM on the padded input, `avx2::flat`):
        // DenseNet-121's 128 -> 32 on 14x14 (two panels) and 7x7 (one, rows split).
        conv(128, 32, 14, 3, 1, 1, 1),
        conv(128, 32, 7, 3, 1, 1, 1),
        // Stems (x86 AVX-512: the direct stem kernel, its output rows split): 7x7 and 3x3,
        // and channel blocks that overlap (40 = 16 + 16 + the last 16 from channel 24).
        conv(3, 64, 112, 7, 2, 3, 1),
        conv(3, 32, 96, 3, 2, 1, 1),
        conv(3, 40, 64, 3, 2, 1, 1),
    ];
    for p in cases {
        let input = data(p.batch * p.c_in * p.h * p.w, 3);
        let weight = data(p.c_out * (p.c_in / p.groups) * p.kh * p.kw, 4);
        let bias = data(p.c_out, 5);
        let out_len = p.batch * p.c_out * p.out_h * p.out_w;
        let mut want = vec![0.0; out_len];
        let mut scratch = vec![0.0; p.scratch_len()];
        (PORTABLE.conv2d)(
            &p,
            &input,
            &weight,
            Some(&bias),
            Activation::Relu,
            &mut scratch,
            &mut want,
        );
        for kt in tables("conv2d_on") {
            let mut packed = vec![0.0; weight.len()];
            pack::pack_conv2d(kt.weights, &p, &weight, &mut packed);
            let what = format!("conv2d {p:?}");
            same_on_threads(
                &kt,
                &what,
                &|par, out| {
                    let mut scratch = vec![f32::NAN; p.scratch_len()];
                    let act = Activation::Relu;
                    kt.conv2d_on(
                        par,
                        &p,
                        &input,
                        &packed,
                        Some(&bias),
                        act,
                        &mut scratch,
                        out,
                    );
                    assert_close(out, &want, &what);
                },
                out_len,
            );
        }
    }
}

/// `conv2d_res_on` (a residual in the GEMM epilogue) splits like `conv2d_on`: each task reads
/// the residual of its own part of the output.
#[test]
fn conv2d_res_split_matches_one_thread() {
    for p in [
        conv(64, 128, 28, 1, 1, 0, 1),
        conv(48, 40, 30, 5, 1, 2, 1),
        conv(256, 128, 14, 1, 1, 0, 1),
    ] {
        let input = data(p.batch * p.c_in * p.h * p.w, 3);
        let weight = data(p.c_out * (p.c_in / p.groups) * p.kh * p.kw, 4);
        let bias = data(p.c_out, 5);
        let out_len = p.batch * p.c_out * p.out_h * p.out_w;
        let res = data(out_len, 6);
        let mut want = vec![0.0; out_len];
        let mut scratch = vec![0.0; p.scratch_len()];
        let act = Activation::Relu;
        let bias = Some(&bias[..]);
        (PORTABLE.conv2d_res)(
            &p,
            &input,
            &weight,
            bias,
            &res,
            act,
            &mut scratch,
            &mut want,
        );
        for kt in tables("conv2d_res_on") {
            let mut packed = vec![0.0; weight.len()];
            pack::pack_conv2d(kt.weights, &p, &weight, &mut packed);
            let what = format!("conv2d_res {p:?}");
            same_on_threads(
                &kt,
                &what,
                &|par, out| {
                    let mut scratch = vec![f32::NAN; p.scratch_len()];
                    kt.conv2d_res_on(par, &p, &input, &packed, bias, &res, act, &mut scratch, out);
                    assert_close(out, &want, &what);
                },
                out_len,
            );
        }
    }
}

/// The blocked convolution split by output rows (`conv2d_nchwc_on`): a 3x3 on 28x28, a strided
/// 5x5 with a residual on two images (tasks of both images), a 1x1 on 14x14 with partial blocks.
#[test]
fn nchwc_split_matches_one_thread() {
    use kiln_kernels::nchwc::{blocked_len, pack_weights, packed_weight_len, to_blocked};
    for (p, res) in [
        (conv(64, 64, 28, 3, 1, 1, 1), false),
        (
            Conv2d {
                batch: 2,
                ..conv(40, 48, 30, 5, 2, 2, 1)
            },
            true,
        ),
        (conv(250, 120, 14, 1, 1, 0, 1), false),
    ] {
        assert!(p.batch * p.out_h * p.out_w * p.c_out * p.c_in * p.kh * p.kw >= MIN_PARALLEL_FMAS);
        let input = data(p.batch * p.c_in * p.h * p.w, 3);
        let weight = data(p.c_out * p.c_in * p.kh * p.kw, 4);
        let bias = data(p.c_out, 5);
        let out_len = blocked_len(p.batch, p.c_out, p.out_h, p.out_w);
        let residual = data(out_len, 6);
        let residual = res.then_some(&residual[..]);
        let mut xb = vec![0.0; blocked_len(p.batch, p.c_in, p.h, p.w)];
        to_blocked(p.batch, p.c_in, p.h, p.w, &input, &mut xb);
        let mut packed = vec![0.0; packed_weight_len(p.c_out, p.c_in, p.kh, p.kw)];
        pack_weights(p.c_out, p.c_in, p.kh, p.kw, &weight, &mut packed);
        let act = Activation::Relu;
        let mut want = vec![0.0; out_len];
        (PORTABLE.conv2d_nchwc)(&p, &xb, &packed, Some(&bias), residual, act, &mut want);
        for kt in tables("conv2d_nchwc_on") {
            let what = format!("conv2d_nchwc {p:?}");
            same_on_threads(
                &kt,
                &what,
                &|par, out| {
                    kt.conv2d_nchwc_on(par, &p, &xb, &packed, Some(&bias), residual, act, out);
                    assert_close(out, &want, &what);
                },
                out_len,
            );
        }
    }
}

#[test]
fn winograd_split_matches_one_thread() {
    // The third runs several blocks (15 tile rows of 15 tiles) on two images, so a block's
    // output transform shares its job with the next block's input transform.
    let two_images = Conv2d {
        batch: 2,
        ..conv(48, 64, 60, 3, 1, 1, 1)
    };
    for p in [
        conv(64, 64, 28, 3, 1, 1, 1),
        conv(64, 48, 30, 3, 1, 1, 1),
        two_images,
    ] {
        assert!(p.is_winograd_shape());
        let input = data(p.batch * p.c_in * p.h * p.w, 6);
        let weight = data(p.c_out * p.c_in * 9, 7);
        let bias = data(p.c_out, 8);
        let mut u = vec![0.0; 36 * p.c_out * p.c_in];
        winograd::transform_filter(p.c_out, p.c_in, &weight, &mut u);
        let out_len = p.batch * p.c_out * p.out_h * p.out_w;
        let mut want = vec![0.0; out_len];
        let mut scratch = vec![0.0; p.scratch_len()];
        let act = Activation::Relu;
        (PORTABLE.conv2d)(
            &p,
            &input,
            &weight,
            Some(&bias),
            act,
            &mut scratch,
            &mut want,
        );
        for kt in tables("conv2d_winograd_on") {
            let what = format!("winograd {p:?}");
            same_on_threads(
                &kt,
                &what,
                &|par, out| {
                    let mut scratch = vec![f32::NAN; p.winograd_scratch_len()];
                    kt.conv2d_winograd_on(par, &p, &input, &u, Some(&bias), act, &mut scratch, out);
                    // Winograd rounds differently from the direct convolution.
                    for (i, (&g, &w)) in out.iter().zip(&want).enumerate() {
                        assert!((g - w).abs() <= 1e-3, "{what}: [{i}] {g} vs {w}");
                    }
                },
                out_len,
            );
        }
    }
}

#[test]
fn depthwise_split_matches_one_thread() {
    // Channels-in-lanes (stride 2, and 7 columns), planar, a 5x5 window, direct loops (no
    // band buffer), two images of ragged channel counts; each with scratch for several tasks.
    let mut cases = [
        conv(96, 96, 56, 3, 2, 1, 96),
        conv(960, 960, 7, 3, 1, 1, 960),
        conv(144, 144, 56, 3, 1, 1, 144),
        conv(72, 72, 28, 5, 1, 2, 72),
        conv(40, 40, 60, 3, 3, 1, 40),
        conv(58, 58, 56, 3, 1, 1, 58),
    ];
    cases[5].batch = 2;
    for p in cases {
        assert!(p.c_out * p.out_h * p.out_w * 9 >= 4 * kiln_kernels::MIN_PARALLEL_ELEMENTS);
        let input = data(p.batch * p.c_in * p.h * p.w, 9);
        let weight = data(p.c_out * p.kh * p.kw, 10);
        let bias = data(p.c_out, 11);
        let out_len = p.batch * p.c_out * p.out_h * p.out_w;
        let mut want = vec![0.0; out_len];
        let mut scratch = vec![0.0; p.scratch_len()];
        let act = Activation::Clip { min: 0.0, max: 6.0 };
        (PORTABLE.conv2d)(
            &p,
            &input,
            &weight,
            Some(&bias),
            act,
            &mut scratch,
            &mut want,
        );
        for kt in tables("depthwise_on") {
            let what = format!("depthwise {p:?}");
            let slots = kiln_kernels::DEPTHWISE_SCRATCH_SLOTS;
            on_threads(&kt, &what, out_len, true, &|par, out| {
                let mut scratch = vec![f32::NAN; slots * p.scratch_len()];
                kt.conv2d_on(
                    par,
                    &p,
                    &input,
                    &weight,
                    Some(&bias),
                    act,
                    &mut scratch,
                    out,
                );
                assert_close(out, &want, &what);
            });
            // With one band buffer it stays on one thread.
            if p.scratch_len() > 0 {
                on_threads(&kt, &what, out_len, false, &|par, out| {
                    let mut scratch = vec![f32::NAN; p.scratch_len()];
                    kt.conv2d_on(
                        par,
                        &p,
                        &input,
                        &weight,
                        Some(&bias),
                        act,
                        &mut scratch,
                        out,
                    );
                });
            }
        }
    }
}

/// Checks `run(par, out)` of a memory-bound entry (which every table splits, whatever its
/// ISA) on 2 and 3 threads: bit-identical to one thread, and split into parallel jobs.
fn split_on_threads(kt: &Kernels, what: &str, len: usize, run: &dyn Fn(&dyn Parallel, &mut [f32])) {
    on_threads(kt, what, len, true, run);
}

#[test]
fn memory_bound_entries_split_like_one_thread() {
    // Two images of 40 channels of 30 x 30 (72,000 elements, above the threshold); ragged
    // channel counts so that runs cross image boundaries.
    let (n, c, h, w) = (2, 40, 30, 30);
    let sp = h * w;
    let len = n * c * sp;
    let x = data(len, 1);
    let y = data(len, 2);
    let per_c = data(c, 3);
    let scale = data(c, 4);
    let act = Activation::Relu;
    for kt in tables("memory_bound_entries_split_like_one_thread") {
        let kt = &kt;
        split_on_threads(kt, "unary", len, &|par, out| kt.unary_on(par, act, &x, out));
        split_on_threads(kt, "unary_inplace", len, &|par, out| {
            out.copy_from_slice(&x);
            kt.unary_inplace_on(par, act, out);
        });
        split_on_threads(kt, "scale_shift", len, &|par, out| {
            kt.scale_shift_on(par, n, c, sp, &x, &scale, &per_c, act, out)
        });
        split_on_threads(kt, "scale_shift_inplace", len, &|par, out| {
            out.copy_from_slice(&x);
            kt.scale_shift_inplace_on(par, n, c, sp, out, &scale, &per_c, act);
        });
        let contiguous = [c * sp, sp, w, 1];
        let same = Broadcast {
            shape: [n, c, h, w],
            a_strides: contiguous,
            b_strides: contiguous,
        };
        let channel = Broadcast {
            b_strides: [0, 1, 0, 0],
            ..same
        };
        split_on_threads(kt, "binary", len, &|par, out| {
            kt.binary_on(par, BinaryOp::Add, &same, &x, &y, out)
        });
        split_on_threads(kt, "binary per channel", len, &|par, out| {
            kt.binary_on(par, BinaryOp::Sub, &channel, &x, &per_c, out)
        });
        split_on_threads(kt, "binary_inplace", len, &|par, out| {
            out.copy_from_slice(&x);
            kt.binary_inplace_on(par, BinaryOp::Mul, &channel, out, &per_c, true);
        });
        split_on_threads(kt, "binary_inplace rhs", len, &|par, out| {
            out.copy_from_slice(&x);
            kt.binary_inplace_on(par, BinaryOp::Div, &same, out, &y, false);
        });
        let pool = Pool2d {
            batch: n,
            channels: c,
            h,
            w,
            kh: 3,
            kw: 3,
            stride: [2, 2],
            pad: [1, 1, 1, 1],
            out_h: 15,
            out_w: 15,
            count_include_pad: false,
        };
        let pooled = n * c * 15 * 15;
        split_on_threads(kt, "max_pool2d", pooled, &|par, out| {
            kt.max_pool2d_on(par, &pool, &x, out)
        });
        split_on_threads(kt, "avg_pool2d", pooled, &|par, out| {
            kt.avg_pool2d_on(par, &pool, &x, out)
        });
        // A matrix-vector product of 300 x 250 (ragged runs of outputs).
        let wt = data(300 * 250, 5);
        let bias = data(300, 6);
        split_on_threads(kt, "dense", 300, &|par, out| {
            kt.dense_on(par, 1, 250, 300, &x[..250], &wt, Some(&bias), act, out)
        });
        split_on_threads(kt, "global_avg_pool", n * c, &|par, out| {
            kt.global_avg_pool_on(par, n, c, sp, &x, out)
        });
        // Concatenation: 40 channels into channels 7..47 of 50, the rest left as it was.
        split_on_threads(kt, "copy_into_channels", n * 50 * sp, &|par, out| {
            out.fill(0.5);
            kt.copy_into_channels_on(par, n, c, sp, &x, 50, 7, out);
        });
    }
}
