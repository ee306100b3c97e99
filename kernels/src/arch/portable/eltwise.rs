//! Element-wise kernels: activations ([`unary`]) and broadcasting arithmetic ([`binary`]).
//!
//! Algorithm sketch for the broadcasting kernels. The output is contiguous with the rank-4
//! `shape`; the three outer dimensions are walked with nested loops that keep the operands'
//! base offsets, and the innermost dimension is one tight loop specialised on the innermost
//! strides: both contiguous (a zip of two slices), one broadcast (a slice against a scalar),
//! or anything else (general strided indexing). The operator is matched once, outside all
//! loops, so each loop body is a single arithmetic instruction that LLVM can vectorise.

use super::epilogue::{epilogue, epilogue_from};
use crate::{Activation, BinaryOp, Broadcast};

/// `out[i] = act(input[i])` for every `i` in `input`.
pub fn unary(act: Activation, input: &[f32], out: &mut [f32]) {
    debug_assert!(out.len() >= input.len(), "unary: out too short");
    epilogue_from(input, out, 1.0, 0.0, act);
}

/// `data[i] = act(data[i])`.
pub fn unary_inplace(act: Activation, data: &mut [f32]) {
    epilogue(data, 1.0, 0.0, act);
}

/// One past the largest element offset `strides` can reach within `shape` (0 if empty).
fn extent(shape: [usize; 4], strides: [usize; 4]) -> usize {
    if shape.contains(&0) {
        return 0;
    }
    1 + (0..4).map(|d| (shape[d] - 1) * strides[d]).sum::<usize>()
}

/// Calls `row(out_offset, a_offset, b_offset)` for each innermost row, in output order.
#[inline(always)]
fn for_each_row(
    shape: [usize; 4],
    sa: [usize; 4],
    sb: [usize; 4],
    mut row: impl FnMut(usize, usize, usize),
) {
    let mut o = 0;
    for i0 in 0..shape[0] {
        for i1 in 0..shape[1] {
            for i2 in 0..shape[2] {
                let a = i0 * sa[0] + i1 * sa[1] + i2 * sa[2];
                let b = i0 * sb[0] + i1 * sb[1] + i2 * sb[2];
                row(o, a, b);
                o += shape[3];
            }
        }
    }
}

/// `out = f(a, b)` under broadcasting, for one statically known `f`.
#[inline(always)]
fn binary_with(bc: &Broadcast, a: &[f32], b: &[f32], out: &mut [f32], f: impl Fn(f32, f32) -> f32) {
    let n = bc.shape[3];
    let (sa, sb) = (bc.a_strides[3], bc.b_strides[3]);
    for_each_row(bc.shape, bc.a_strides, bc.b_strides, |o, ia, ib| {
        let dst = &mut out[o..o + n];
        match (sa, sb) {
            (1, 1) => {
                for ((d, &x), &y) in dst.iter_mut().zip(&a[ia..ia + n]).zip(&b[ib..ib + n]) {
                    *d = f(x, y);
                }
            }
            (1, 0) => {
                let y = b[ib];
                for (d, &x) in dst.iter_mut().zip(&a[ia..ia + n]) {
                    *d = f(x, y);
                }
            }
            (0, 1) => {
                let x = a[ia];
                for (d, &y) in dst.iter_mut().zip(&b[ib..ib + n]) {
                    *d = f(x, y);
                }
            }
            _ => {
                for (j, d) in dst.iter_mut().enumerate() {
                    *d = f(a[ia + j * sa], b[ib + j * sb]);
                }
            }
        }
    });
}

/// `out = a op b` with broadcasting; see [`Broadcast`].
pub fn binary(op: BinaryOp, bc: &Broadcast, a: &[f32], b: &[f32], out: &mut [f32]) {
    let total: usize = bc.shape.iter().product();
    debug_assert!(
        a.len() >= extent(bc.shape, bc.a_strides),
        "binary: a too short"
    );
    debug_assert!(
        b.len() >= extent(bc.shape, bc.b_strides),
        "binary: b too short"
    );
    debug_assert!(out.len() >= total, "binary: out too short");
    if total == 0 {
        return;
    }
    match op {
        BinaryOp::Add => binary_with(bc, a, b, out, |x, y| BinaryOp::Add.apply(x, y)),
        BinaryOp::Sub => binary_with(bc, a, b, out, |x, y| BinaryOp::Sub.apply(x, y)),
        BinaryOp::Mul => binary_with(bc, a, b, out, |x, y| BinaryOp::Mul.apply(x, y)),
        BinaryOp::Div => binary_with(bc, a, b, out, |x, y| BinaryOp::Div.apply(x, y)),
    }
}

/// `acc = f(acc, other)` under broadcasting, `other` indexed by `so`.
#[inline(always)]
fn inplace_with(
    shape: [usize; 4],
    so: [usize; 4],
    acc: &mut [f32],
    other: &[f32],
    f: impl Fn(f32, f32) -> f32,
) {
    let n = shape[3];
    let s = so[3];
    // `for_each_row` hands out the offsets of both "operands"; the accumulator's own offset
    // is the output offset, so its stride slot is unused (zeros).
    for_each_row(shape, [0; 4], so, |o, _, io| {
        let dst = &mut acc[o..o + n];
        match s {
            1 => {
                for (d, &y) in dst.iter_mut().zip(&other[io..io + n]) {
                    *d = f(*d, y);
                }
            }
            0 => {
                let y = other[io];
                for d in dst.iter_mut() {
                    *d = f(*d, y);
                }
            }
            _ => {
                for (j, d) in dst.iter_mut().enumerate() {
                    *d = f(*d, other[io + j * s]);
                }
            }
        }
    });
}

/// In place, with `acc` contiguous with `bc.shape` and holding the result.
///
/// With `acc_is_lhs`, `acc = acc op other` and `other` is indexed by `bc.b_strides`;
/// otherwise `acc = other op acc` and `other` is indexed by `bc.a_strides`.
pub fn binary_inplace(
    op: BinaryOp,
    bc: &Broadcast,
    acc: &mut [f32],
    other: &[f32],
    acc_is_lhs: bool,
) {
    let total: usize = bc.shape.iter().product();
    let so = if acc_is_lhs {
        bc.b_strides
    } else {
        bc.a_strides
    };
    debug_assert!(acc.len() >= total, "binary_inplace: acc too short");
    debug_assert!(
        other.len() >= extent(bc.shape, so),
        "binary_inplace: other too short"
    );
    if total == 0 {
        return;
    }
    let shape = bc.shape;
    // The closures receive (acc element, other element) and put them on the right sides.
    match (op, acc_is_lhs) {
        (BinaryOp::Add, true) => {
            inplace_with(shape, so, acc, other, |x, y| BinaryOp::Add.apply(x, y))
        }
        (BinaryOp::Add, false) => {
            inplace_with(shape, so, acc, other, |x, y| BinaryOp::Add.apply(y, x))
        }
        (BinaryOp::Sub, true) => {
            inplace_with(shape, so, acc, other, |x, y| BinaryOp::Sub.apply(x, y))
        }
        (BinaryOp::Sub, false) => {
            inplace_with(shape, so, acc, other, |x, y| BinaryOp::Sub.apply(y, x))
        }
        (BinaryOp::Mul, true) => {
            inplace_with(shape, so, acc, other, |x, y| BinaryOp::Mul.apply(x, y))
        }
        (BinaryOp::Mul, false) => {
            inplace_with(shape, so, acc, other, |x, y| BinaryOp::Mul.apply(y, x))
        }
        (BinaryOp::Div, true) => {
            inplace_with(shape, so, acc, other, |x, y| BinaryOp::Div.apply(x, y))
        }
        (BinaryOp::Div, false) => {
            inplace_with(shape, so, acc, other, |x, y| BinaryOp::Div.apply(y, x))
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use crate::testutil::{assert_close, XorShift};
    use std::format;
    use std::vec;
    use std::vec::Vec;

    const OPS: [BinaryOp; 4] = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div];

    fn op_f64(op: BinaryOp, x: f64, y: f64) -> f64 {
        match op {
            BinaryOp::Add => x + y,
            BinaryOp::Sub => x - y,
            BinaryOp::Mul => x * y,
            BinaryOp::Div => x / y,
        }
    }

    /// Row-major strides of a contiguous tensor, with 0 wherever the operand's dim is 1 and
    /// the output's is not (numpy broadcasting).
    fn strides(out_shape: [usize; 4], shape: [usize; 4]) -> [usize; 4] {
        let mut s = [0; 4];
        let mut step = 1;
        for d in (0..4).rev() {
            s[d] = if shape[d] == 1 && out_shape[d] != 1 {
                0
            } else {
                step
            };
            step *= shape[d];
        }
        s
    }

    /// Independent reference: decompose each linear output index into (i0, i1, i2, i3) with
    /// div/mod and fold each index into the operand's own shape (index 0 where it has size 1).
    fn naive_binary(
        op: BinaryOp,
        out_shape: [usize; 4],
        sa: [usize; 4],
        a: &[f32],
        sb: [usize; 4],
        b: &[f32],
    ) -> Vec<f64> {
        let total: usize = out_shape.iter().product();
        let offset = |shape: [usize; 4], idx: [usize; 4]| {
            let mut off = 0;
            for d in 0..4 {
                off = off * shape[d] + if shape[d] == 1 { 0 } else { idx[d] };
            }
            off
        };
        (0..total)
            .map(|mut lin| {
                let mut idx = [0; 4];
                for d in (0..4).rev() {
                    idx[d] = lin % out_shape[d];
                    lin /= out_shape[d];
                }
                op_f64(
                    op,
                    f64::from(a[offset(sa, idx)]),
                    f64::from(b[offset(sb, idx)]),
                )
            })
            .collect()
    }

    /// (output shape, a shape, b shape) cases covering every innermost-stride specialisation.
    const CASES: [([usize; 4], [usize; 4], [usize; 4]); 8] = [
        ([2, 3, 4, 5], [2, 3, 4, 5], [2, 3, 4, 5]), // same shape
        ([2, 3, 4, 5], [2, 3, 4, 5], [1, 1, 1, 1]), // scalar rhs
        ([2, 3, 4, 5], [1, 1, 1, 1], [2, 3, 4, 5]), // scalar lhs
        ([2, 3, 4, 5], [2, 3, 4, 5], [1, 3, 1, 1]), // per-channel bias
        ([1, 1, 3, 4], [1, 1, 3, 1], [1, 1, 1, 4]), // outer product
        ([2, 3, 4, 5], [2, 1, 4, 1], [1, 3, 1, 5]), // both broadcast, strided inner
        ([1, 2, 1, 7], [1, 2, 1, 7], [1, 1, 1, 7]), // row vector
        ([3, 1, 5, 1], [3, 1, 5, 1], [1, 1, 5, 1]), // inner dim 1
    ];

    fn operand(rng: &mut XorShift, shape: [usize; 4], op: BinaryOp) -> Vec<f32> {
        let n: usize = shape.iter().product();
        // Keep divisors away from zero so the comparison is about the kernel, not conditioning.
        (0..n)
            .map(|_| {
                let x = rng.uniform(-1.0, 1.0);
                if op == BinaryOp::Div {
                    x.signum() * (0.5 + x.abs())
                } else {
                    x
                }
            })
            .collect()
    }

    #[test]
    fn binary_matches_naive_broadcasting() {
        let mut rng = XorShift::new(29);
        for (shape, sa_shape, sb_shape) in CASES {
            for op in OPS {
                let a = operand(&mut rng, sa_shape, op);
                let b = operand(&mut rng, sb_shape, op);
                let bc = Broadcast {
                    shape,
                    a_strides: strides(shape, sa_shape),
                    b_strides: strides(shape, sb_shape),
                };
                let total: usize = shape.iter().product();
                let want = naive_binary(op, shape, sa_shape, &a, sb_shape, &b);
                let what = format!("{op:?} {shape:?} {sa_shape:?} {sb_shape:?}");

                let mut out = vec![f32::NAN; total];
                binary(op, &bc, &a, &b, &mut out);
                assert_close(&out, &want, &what);

                // In place with the accumulator on either side, when it has the output shape.
                if sa_shape == shape {
                    let mut acc = a.clone();
                    binary_inplace(op, &bc, &mut acc, &b, true);
                    assert_close(&acc, &want, &format!("{what} inplace lhs"));
                }
                if sb_shape == shape {
                    let mut acc = b.clone();
                    binary_inplace(op, &bc, &mut acc, &a, false);
                    assert_close(&acc, &want, &format!("{what} inplace rhs"));
                }
            }
        }
    }

    #[test]
    fn binary_hand_computed() {
        // [[1], [2]] + [10, 20, 30] = [[11, 21, 31], [12, 22, 32]].
        let bc = Broadcast {
            shape: [1, 1, 2, 3],
            a_strides: [0, 0, 1, 0],
            b_strides: [0, 0, 0, 1],
        };
        let mut out = [f32::NAN; 6];
        binary(
            BinaryOp::Add,
            &bc,
            &[1.0, 2.0],
            &[10.0, 20.0, 30.0],
            &mut out,
        );
        assert_eq!(out, [11.0, 21.0, 31.0, 12.0, 22.0, 32.0]);
        // Operand order matters for Sub and Div, in place on either side.
        let bc = Broadcast {
            shape: [1, 1, 1, 2],
            a_strides: [0, 0, 0, 1],
            b_strides: [0, 0, 0, 0],
        };
        let mut acc = [8.0, 6.0];
        binary_inplace(BinaryOp::Div, &bc, &mut acc, &[2.0], true);
        assert_eq!(acc, [4.0, 3.0]);
        let bc = Broadcast {
            shape: [1, 1, 1, 2],
            a_strides: [0, 0, 0, 0],
            b_strides: [0, 0, 0, 1],
        };
        let mut acc = [8.0, 6.0];
        binary_inplace(BinaryOp::Sub, &bc, &mut acc, &[10.0], false);
        assert_eq!(acc, [2.0, 4.0]);
    }

    #[test]
    fn binary_general_inner_strides() {
        // `a` is a 5x3 matrix read transposed (inner stride 3) against a contiguous 3x5 `b`.
        let mut rng = XorShift::new(37);
        let bc = Broadcast {
            shape: [1, 1, 3, 5],
            a_strides: [0, 0, 1, 3],
            b_strides: [0, 0, 5, 1],
        };
        for op in OPS {
            let a = operand(&mut rng, [1, 1, 5, 3], op);
            let b = operand(&mut rng, [1, 1, 3, 5], op);
            let mut want = Vec::new();
            for i in 0..3 {
                for j in 0..5 {
                    want.push(op_f64(op, f64::from(a[j * 3 + i]), f64::from(b[i * 5 + j])));
                }
            }
            let mut out = vec![f32::NAN; 15];
            binary(op, &bc, &a, &b, &mut out);
            assert_close(&out, &want, &format!("{op:?} transposed lhs"));
            let mut acc = b.clone();
            binary_inplace(op, &bc, &mut acc, &a, false);
            assert_close(&acc, &want, &format!("{op:?} transposed lhs, in place rhs"));
        }
    }

    /// An activation and its f64 reference definition.
    type Case = (Activation, fn(f64) -> f64);

    #[test]
    fn unary_matches_definitions() {
        let mut rng = XorShift::new(31);
        let x: Vec<f32> = (0..101).map(|_| rng.uniform(-4.0, 4.0)).collect();
        let cases: [Case; 6] = [
            (Activation::None, |v| v),
            (Activation::Relu, |v| v.max(0.0)),
            (
                Activation::Clip {
                    min: -1.0,
                    max: 2.0,
                },
                |v| v.clamp(-1.0, 2.0),
            ),
            (Activation::LeakyRelu { alpha: 0.01 }, |v| {
                if v < 0.0 {
                    0.01 * v
                } else {
                    v
                }
            }),
            (Activation::Sigmoid, |v| 1.0 / (1.0 + (-v).exp())),
            (Activation::Tanh, f64::tanh),
        ];
        for (act, reference) in cases {
            let want: Vec<f64> = x.iter().map(|&v| reference(f64::from(v))).collect();
            let mut out = vec![f32::NAN; x.len()];
            unary(act, &x, &mut out);
            assert_close(&out, &want, &format!("unary {act:?}"));
            let mut data = x.clone();
            unary_inplace(act, &mut data);
            assert_close(&data, &want, &format!("unary_inplace {act:?}"));
        }
    }
}
