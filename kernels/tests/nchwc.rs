//! Every ISA's blocked (NCHW16c) convolution against the portable reference
//! (`kiln_kernels::nchwc::conv2d`, itself tested against the NCHW convolution in the crate's
//! unit tests), on random convolutions: channel counts that leave partial blocks and groups
//! of fewer than four output blocks (AVX-512 computes four or two at a time, by map size), rectangular kernels up
//! to 7x7, strides up to 3 and asymmetric padding (so rows have border pixels on either side
//! and rows whose taps leave the image), maps narrower than a step of six pixels, two images,
//! with and without bias and residual, and every activation. The whole blocked output, the
//! padding channels included, must match to a relative 1e-4; one float past it must survive.

mod common;

use kiln_kernels::nchwc::{
    blocked_len, from_blocked, pack_weights, packed_weight_len, to_blocked, winograd,
};
use kiln_kernels::{Activation, Conv2d, PORTABLE};
use proptest::prelude::*;

use common::ACTS;

fn data(len: usize, rng: &mut common::Rng) -> Vec<f32> {
    (0..len).map(|_| rng.uniform(-1.0, 1.0) as f32).collect()
}

#[allow(clippy::too_many_arguments)]
fn check(
    batch: usize,
    c_in: usize,
    c_out: usize,
    [h, w]: [usize; 2],
    [kh, kw]: [usize; 2],
    stride: [usize; 2],
    pad: [usize; 4],
    with_bias: bool,
    with_res: bool,
    act: Activation,
    seed: u32,
) -> Result<(), TestCaseError> {
    let (ph, pw) = (h + pad[0] + pad[2], w + pad[1] + pad[3]);
    if ph < kh || pw < kw {
        return Ok(());
    }
    let p = Conv2d {
        batch,
        c_in,
        h,
        w,
        c_out,
        kh,
        kw,
        stride,
        dilation: [1, 1],
        pad,
        groups: 1,
        out_h: (ph - kh) / stride[0] + 1,
        out_w: (pw - kw) / stride[1] + 1,
    };
    let mut rng = common::Rng::new(seed);
    let mut input = vec![0.0; blocked_len(batch, c_in, h, w)];
    to_blocked(
        batch,
        c_in,
        h,
        w,
        &data(batch * c_in * h * w, &mut rng),
        &mut input,
    );
    let mut weight = vec![f32::NAN; packed_weight_len(c_out, c_in, kh, kw)];
    pack_weights(
        c_out,
        c_in,
        kh,
        kw,
        &data(c_out * c_in * kh * kw, &mut rng),
        &mut weight,
    );
    let bias = data(c_out, &mut rng);
    let bias = with_bias.then_some(&bias[..]);
    let out_len = blocked_len(batch, c_out, p.out_h, p.out_w);
    let mut res = vec![0.0; out_len];
    let res_nchw = data(batch * c_out * p.out_h * p.out_w, &mut rng);
    to_blocked(batch, c_out, p.out_h, p.out_w, &res_nchw, &mut res);
    let res = with_res.then_some(&res[..]);
    let mut want = vec![7.0f32; out_len + 1];
    (PORTABLE.conv2d_nchwc)(&p, &input, &weight, bias, res, act, &mut want);
    for kt in common::isas("conv2d_nchwc") {
        let mut got = vec![7.0f32; out_len + 1];
        (kt.conv2d_nchwc)(&p, &input, &weight, bias, res, act, &mut got);
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            prop_assert!(
                (g - w).abs() <= 1e-4 * w.abs().max(1.0),
                "{:?} {:?} bias {} residual {} {:?}: [{}] got {} want {}",
                kt.isa,
                p,
                with_bias,
                with_res,
                act,
                i,
                g,
                w
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn conv2d_nchwc_matches_portable(
        batch in 1..=2usize,
        c_in in 1..=40usize,
        c_out in 1..=90usize,
        // Maps up to 256 pixels take AVX-512's 2-block x 12-pixel steps, larger ones its
        // 4-block x 6-pixel ones.
        hw in prop_oneof![[1..=13usize, 1..=13usize], [16..=20usize, 16..=20usize]],
        k in prop_oneof![Just([1, 1]), Just([3, 3]), Just([7, 7]), [1..=5usize, 1..=5usize]],
        stride in prop_oneof![Just([1, 1]), Just([2, 2]), [1..=3usize, 1..=3usize]],
        pad in prop_oneof![Just([0; 4]), Just([1; 4]), [0..=3usize, 0..=3usize, 0..=3usize, 0..=3usize]],
        with_bias in any::<bool>(),
        with_res in any::<bool>(),
        act in 0..ACTS.len(),
        seed in any::<u32>(),
    ) {
        check(batch, c_in, c_out, hw, k, stride, pad, with_bias, with_res, ACTS[act], seed)?;
    }
}

/// The blocked Winograd convolution (`nchwc::winograd`, 3x3 stride 1) of the portable table
/// and of every ISA against the direct blocked reference: the output within a relative 1e-4
/// of the largest |output| (Winograd's transforms round differently), padding channels
/// included; one float past the output must survive.
#[allow(clippy::too_many_arguments)]
fn check_winograd(
    batch: usize,
    c_in: usize,
    c_out: usize,
    [h, w]: [usize; 2],
    pad: [usize; 4],
    with_bias: bool,
    with_res: bool,
    act: Activation,
    seed: u32,
) -> Result<(), TestCaseError> {
    let (ph, pw) = (h + pad[0] + pad[2], w + pad[1] + pad[3]);
    if ph < 3 || pw < 3 {
        return Ok(());
    }
    let p = Conv2d {
        batch,
        c_in,
        h,
        w,
        c_out,
        kh: 3,
        kw: 3,
        stride: [1, 1],
        dilation: [1, 1],
        pad,
        groups: 1,
        out_h: ph - 2,
        out_w: pw - 2,
    };
    let mut rng = common::Rng::new(seed);
    let mut input = vec![0.0; blocked_len(batch, c_in, h, w)];
    to_blocked(
        batch,
        c_in,
        h,
        w,
        &data(batch * c_in * h * w, &mut rng),
        &mut input,
    );
    let weight = data(c_out * c_in * 9, &mut rng);
    let mut packed = vec![f32::NAN; packed_weight_len(c_out, c_in, 3, 3)];
    pack_weights(c_out, c_in, 3, 3, &weight, &mut packed);
    let mut u = vec![f32::NAN; winograd::filter_len(c_out, c_in)];
    winograd::transform_filter(c_out, c_in, &weight, &mut u);
    let bias = data(c_out, &mut rng);
    let bias = with_bias.then_some(&bias[..]);
    let out_len = blocked_len(batch, c_out, p.out_h, p.out_w);
    let mut res = vec![0.0; out_len];
    let res_nchw = data(batch * c_out * p.out_h * p.out_w, &mut rng);
    to_blocked(batch, c_out, p.out_h, p.out_w, &res_nchw, &mut res);
    let res = with_res.then_some(&res[..]);
    let mut want = vec![7.0f32; out_len + 1];
    (PORTABLE.conv2d_nchwc)(&p, &input, &packed, bias, res, act, &mut want);
    let scale = want.iter().fold(1.0f32, |m, v| m.max(v.abs()));
    let mut tables = vec![PORTABLE];
    tables.extend(common::isas("conv2d_nchwc_winograd"));
    for kt in tables {
        let mut scratch = vec![f32::NAN; winograd::scratch_len(&p)];
        let mut got = vec![7.0f32; out_len + 1];
        (kt.conv2d_nchwc_winograd)(&p, &input, &u, bias, res, act, &mut scratch, &mut got);
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            prop_assert!(
                (g - w).abs() <= 1e-4 * scale,
                "{:?} {:?} bias {} residual {} {:?}: [{}] got {} want {}",
                kt.isa,
                p,
                with_bias,
                with_res,
                act,
                i,
                g,
                w
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    #[test]
    fn winograd_matches_direct(
        batch in 1..=2usize,
        c_in in 1..=40usize,
        c_out in 1..=70usize,
        // Partial tiles at the right and bottom edges; maps of one tile and of several rows.
        hw in prop_oneof![[1..=13usize, 1..=13usize], [14..=30usize, 14..=30usize]],
        pad in prop_oneof![Just([1; 4]), Just([0; 4]), [0..=2usize, 0..=2usize, 0..=2usize, 0..=2usize]],
        with_bias in any::<bool>(),
        with_res in any::<bool>(),
        act in 0..ACTS.len(),
        seed in any::<u32>(),
    ) {
        check_winograd(batch, c_in, c_out, hw, pad, with_bias, with_res, ACTS[act], seed)?;
    }
}

/// Every ISA's converters against the portable ones (which the crate's unit tests check
/// against the layout's index formula): exactly the same floats (they only move them), the padding channels zeroed by `to_blocked` and ignored by `from_blocked` (the
/// blocked source has NaN there), nothing written past the end; planes whose pixel counts
/// leave partial vectors, partial last blocks, two images.
fn check_converters(
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    seed: u32,
) -> Result<(), TestCaseError> {
    let mut rng = common::Rng::new(seed);
    let nchw = data(n * c * h * w, &mut rng);
    let len = blocked_len(n, c, h, w);
    let mut want = vec![7.0f32; len + 1];
    to_blocked(n, c, h, w, &nchw, &mut want);
    // A blocked tensor with NaN in its padding channels, for `from_blocked`.
    let mut blocked = want.clone();
    let plane = h * w;
    for (i, v) in blocked[..len].iter_mut().enumerate() {
        let ch = (i / (plane * 16)) % c.div_ceil(16) * 16 + i % 16;
        if ch >= c {
            *v = f32::NAN;
        }
    }
    let mut back_want = vec![7.0f32; nchw.len() + 1];
    from_blocked(n, c, h, w, &blocked, &mut back_want);
    prop_assert!(back_want[..nchw.len()] == nchw[..]);
    for kt in common::isas("nchwc_converters") {
        let mut got = vec![7.0f32; len + 1];
        (kt.to_blocked)(n, c, h, w, &nchw, &mut got);
        prop_assert!(
            got == want,
            "{:?} to_blocked {}x{}x{}x{}",
            kt.isa,
            n,
            c,
            h,
            w
        );
        let mut back = vec![7.0f32; nchw.len() + 1];
        (kt.from_blocked)(n, c, h, w, &blocked, &mut back);
        prop_assert!(
            back == back_want,
            "{:?} from_blocked {}x{}x{}x{}",
            kt.isa,
            n,
            c,
            h,
            w
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn converters_match_portable(
        n in 1..=2usize,
        c in 0..=50usize,
        h in 0..=20usize,
        w in 1..=20usize,
        seed in any::<u32>(),
    ) {
        check_converters(n, c, h, w, seed)?;
    }
}

/// The converters on maps of whole and partial vectors at the sizes networks have.
#[test]
fn converters_on_network_maps() {
    for (c, hw) in [(64, 56), (128, 28), (256, 14), (48, 7), (32, 8), (16, 4)] {
        check_converters(1, c, hw, hw, 5).unwrap();
    }
}

/// ResNet-50's shapes the kernel is meant for: a 1x1 expansion with a residual, a 3x3 and a
/// strided 3x3, at sizes where the six-pixel steps and the four-block groups are whole; and a
/// deep 7x7 one that takes several passes over its input blocks.
#[test]
fn resnet_shapes_match_portable() {
    for (c_in, c_out, hw, k, s, pad) in [
        (64, 256, 14, 1, 1, 0),
        (64, 64, 14, 3, 1, 1),
        (128, 128, 14, 3, 2, 1),
        // 13 input blocks of 7x7 taps: several passes over the input blocks on every ISA
        // (a pass's weights fit a quarter of the L2), and a group of four blocks plus one.
        (200, 70, 6, 7, 1, 3),
        // More than 256 pixels (AVX-512's wide steps), with a group of four blocks and one.
        (40, 70, 18, 3, 1, 1),
        // No input channels: the bias, residual and activation alone.
        (0, 20, 5, 3, 1, 1),
    ] {
        check(
            1,
            c_in,
            c_out,
            [hw, hw],
            [k, k],
            [s, s],
            [pad; 4],
            true,
            true,
            Activation::Relu,
            9,
        )
        .unwrap();
    }
}
