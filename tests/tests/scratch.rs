//! The compiler's copy of the conv2d scratch formula (`kiln_dsl::contract::conv_scratch`, which
//! sizes the arena's scratch) against the kernels' own (`Conv2d::scratch_len`), over a grid of
//! geometries that crosses every branch and boundary of both: pointwise, depthwise with and
//! without the band buffer (window, stride, dilation, padding), grouped and plain im2col,
//! planes below, at and above the band's 16 rows and 16 columns. Likewise for conv3d
//! (`conv3d_scratch` against `Conv3d::scratch_len`): pointwise or not, by window, stride,
//! padding, groups and output volume. (A 1-D convolution runs as a 2-D one of height 1.) And
//! for the transposed convolution (`conv_transpose_scratch` against `ConvTranspose::scratch_len`)
//! by input volume, kernel, channels and groups, and the Winograd kernel's (`winograd_scratch`
//! against `Conv2d::winograd_scratch_len`).

use kiln_kernels::{Conv2d, Conv3d, ConvTranspose};

#[test]
fn compiler_and_kernels_agree_on_conv_transpose_scratch() {
    let mut checked = 0;
    for input in [[1, 1, 1], [1, 1, 7], [1, 5, 6], [3, 4, 5]] {
        for k in [[1, 1, 1], [1, 1, 3], [1, 3, 3], [2, 3, 4]] {
            for (c_in, c_out, groups) in [(1, 1, 1), (4, 6, 1), (4, 6, 2), (8, 8, 8)] {
                let p = ConvTranspose {
                    batch: 2,
                    c_in,
                    c_out,
                    groups,
                    input,
                    k,
                    stride: [1, 2, 2],
                    dilation: [1, 1, 2],
                    pad: [0; 6],
                    out: [1, 1, 1],
                };
                let vol = input.iter().product();
                let taps = k.iter().product();
                let ours = kiln_dsl::contract::conv_transpose_scratch(
                    vol,
                    c_in / groups,
                    c_out / groups,
                    taps,
                );
                assert_eq!(ours, Some(p.scratch_len()), "{p:?}");
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 64);
}

#[test]
fn compiler_and_kernels_agree_on_conv_scratch() {
    let mut checked = 0;
    for k in [1, 2, 3, 5, 7] {
        for s in [[1, 1], [2, 2], [3, 3], [1, 2]] {
            for d in [[1, 1], [2, 2]] {
                for pad in [
                    [0, 0, 0, 0],
                    [1, 1, 1, 1],
                    [2, 0, 1, 3],
                    [4, 4, 0, 0],
                    [5, 5, 5, 5],
                ] {
                    for (c_in, c_out, groups) in
                        [(8, 8, 8), (1, 1, 1), (8, 16, 8), (8, 16, 1), (6, 9, 3)]
                    {
                        for [oh, ow] in [[1, 1], [3, 7], [15, 16], [16, 17], [40, 9], [7, 40]] {
                            let p = Conv2d {
                                batch: 2,
                                c_in,
                                h: 30,
                                w: 30,
                                c_out,
                                kh: k,
                                kw: k,
                                stride: s,
                                dilation: d,
                                pad,
                                groups,
                                out_h: oh,
                                out_w: ow,
                            };
                            let dsl = kiln_dsl::contract::conv_scratch(
                                [k, k],
                                s,
                                d,
                                pad,
                                c_in / groups,
                                c_out / groups,
                                [oh, ow],
                            );
                            assert_eq!(dsl, Some(p.scratch_len()), "{p:?}");
                            checked += 1;
                        }
                    }
                }
            }
        }
    }
    assert_eq!(checked, 5 * 4 * 2 * 5 * 5 * 6);
}

#[test]
fn compiler_and_kernels_agree_on_conv3d_scratch() {
    let mut checked = 0;
    for k in [[1, 1, 1], [3, 3, 3], [1, 2, 3], [2, 1, 1]] {
        for stride in [[1, 1, 1], [2, 2, 2], [1, 2, 1]] {
            for pad in [[0; 6], [1; 6], [0, 0, 0, 0, 0, 1], [2, 0, 1, 0, 3, 0]] {
                for (c_in, c_out, groups) in [(8, 8, 8), (1, 1, 1), (8, 16, 1), (6, 9, 3)] {
                    for out in [[1, 1, 1], [3, 7, 5], [16, 1, 17]] {
                        let p = Conv3d {
                            batch: 2,
                            c_in,
                            d: 20,
                            h: 20,
                            w: 20,
                            c_out,
                            k,
                            stride,
                            dilation: [1, 2, 1],
                            pad,
                            groups,
                            out,
                        };
                        let dsl =
                            kiln_dsl::contract::conv3d_scratch(k, stride, pad, c_in / groups, out);
                        assert_eq!(dsl, Some(p.scratch_len()), "{p:?}");
                        checked += 1;
                    }
                }
            }
        }
    }
    assert_eq!(checked, 4 * 3 * 4 * 4 * 3);
}

/// The Winograd kernel's scratch (`Conv2d::winograd_scratch_len`) against the compiler's copy
/// (`contract::winograd_scratch`), over maps below, at and above one block of 96 tiles and
/// one chunk of 32 tiles per row, and ragged tile edges.
#[test]
fn compiler_and_kernels_agree_on_winograd_scratch() {
    let mut checked = 0;
    for (c_in, c_out) in [(1, 1), (64, 64), (3, 200), (512, 128)] {
        for oh in [0, 1, 4, 7, 13, 28, 56, 129] {
            for ow in [0, 1, 5, 14, 40, 127, 130, 224] {
                let p = Conv2d {
                    batch: 1,
                    c_in,
                    h: oh,
                    w: ow,
                    c_out,
                    kh: 3,
                    kw: 3,
                    stride: [1, 1],
                    dilation: [1, 1],
                    pad: [1; 4],
                    groups: 1,
                    out_h: oh,
                    out_w: ow,
                };
                let dsl = kiln_dsl::contract::winograd_scratch(c_in, c_out, [oh, ow]);
                assert_eq!(dsl, Some(p.winograd_scratch_len()), "{p:?}");
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 4 * 8 * 8);
}

/// The compiler plans as many depthwise band buffers as the kernels' split uses tasks.
#[test]
fn compiler_and_kernels_agree_on_depthwise_slots() {
    assert_eq!(
        kiln_dsl::contract::DEPTHWISE_SCRATCH_SLOTS,
        kiln_kernels::DEPTHWISE_SCRATCH_SLOTS
    );
}
