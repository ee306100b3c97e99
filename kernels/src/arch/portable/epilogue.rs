//! The one shared epilogue: `y = act(x * scale + shift)` over a slice, and its form with a
//! residual operand, `y = act((x + shift) + r)`.
//!
//! Every kernel that produces values with an optional per-channel affine and an activation
//! (conv bias, dense bias, folded batch norm, plain activations) finishes through here, so each
//! activation is defined once, in [`Activation::apply`], and fused the same way everywhere.
//!
//! The `match` on the activation happens once per call, outside the loop: each arm calls
//! `apply` on a value whose variant is known, so after inlining the per-element `match`
//! folds away and the loop body is straight-line (and vectorisable for the cheap activations).

use crate::{Activation, Conv2d};

/// Runs `$body` with `$a` bound to `$act` rebuilt as a value of statically known variant.
macro_rules! specialise {
    ($act:expr, $a:ident => $body:expr) => {
        match $act {
            Activation::None => {
                let $a = Activation::None;
                $body
            }
            Activation::Relu => {
                let $a = Activation::Relu;
                $body
            }
            Activation::Clip { min, max } => {
                let $a = Activation::Clip { min, max };
                $body
            }
            Activation::LeakyRelu { alpha } => {
                let $a = Activation::LeakyRelu { alpha };
                $body
            }
            Activation::Sigmoid => {
                let $a = Activation::Sigmoid;
                $body
            }
            Activation::Tanh => {
                let $a = Activation::Tanh;
                $body
            }
        }
    };
}

/// In place: `data[i] = act(data[i] * scale + shift)`.
pub(crate) fn epilogue(data: &mut [f32], scale: f32, shift: f32, act: Activation) {
    // The common "no bias, no activation" case costs nothing.
    if scale == 1.0 && shift == 0.0 && act == Activation::None {
        return;
    }
    specialise!(act, a => {
        for x in data.iter_mut() {
            *x = a.apply(*x * scale + shift);
        }
    });
}

/// Out of place: `dst[i] = act(src[i] * scale + shift)` for `i < src.len()`.
///
/// Inlined into every caller, so that the SIMD tables' Winograd output transform (portable
/// code compiled inside their `#[target_feature]` entries) runs it with their vectors: as an
/// out-of-line call it was baseline SSE2 code, 0.4-1.5 % of the networks with Winograd layers.
#[inline(always)]
pub(crate) fn epilogue_from(src: &[f32], dst: &mut [f32], scale: f32, shift: f32, act: Activation) {
    debug_assert!(dst.len() >= src.len());
    specialise!(act, a => {
        for (d, &x) in dst.iter_mut().zip(src) {
            *d = a.apply(x * scale + shift);
        }
    });
}

/// With a residual: `data[i] = act((data[i] + shift) + res[i])` for `i < data.len()`, the
/// sums in the order of the unfused graph (the convolution's bias, then the `add`), so a
/// fused residual gives the same bits as the two passes did.
#[inline(always)]
pub(crate) fn epilogue_res(data: &mut [f32], shift: f32, res: &[f32], act: Activation) {
    debug_assert!(res.len() >= data.len());
    specialise!(act, a => {
        for (x, &r) in data.iter_mut().zip(res) {
            *x = a.apply((*x + shift) + r);
        }
    });
}

/// `out = act(out + res)` over `p`'s output, with `out`'s bias already added: a convolution
/// with a residual operand whose kernel has no residual epilogue (the depthwise ones, which
/// the compiler never gives a residual) computes the convolution with no activation, then
/// this. The caller checked both lengths (`Conv2d::check_operands`, `check_residual`).
// Unused on 32-bit arm, whose convolution is the portable one (residual in its epilogue).
#[allow(dead_code)]
pub(crate) fn add_residual(p: &Conv2d, out: &mut [f32], res: &[f32], act: Activation) {
    let len = p.batch * p.c_out * p.out_h * p.out_w;
    epilogue_res(&mut out[..len], 0.0, &res[..len], act);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::XorShift;

    const ACTS: [Activation; 6] = [
        Activation::None,
        Activation::Relu,
        Activation::Clip {
            min: -0.25,
            max: 0.5,
        },
        Activation::LeakyRelu { alpha: 0.125 },
        Activation::Sigmoid,
        Activation::Tanh,
    ];

    #[test]
    fn epilogue_matches_scalar_definition_for_every_activation() {
        let mut rng = XorShift::new(1);
        let src = rng.vec(37);
        // (2, 0) with no activation must still scale: only (1, 0) may take the shortcut.
        for (act, (scale, shift)) in ACTS
            .iter()
            .flat_map(|&a| [(a, (1.5, -0.25)), (a, (2.0, 0.0))])
        {
            let mut inplace = src.clone();
            epilogue(&mut inplace, scale, shift, act);
            let mut out = [f32::NAN; 37];
            epilogue_from(&src, &mut out, scale, shift, act);
            for i in 0..src.len() {
                let want = act.apply(src[i] * scale + shift);
                assert_eq!(
                    inplace[i].to_bits(),
                    want.to_bits(),
                    "{act:?} in place [{i}]"
                );
                assert_eq!(
                    out[i].to_bits(),
                    want.to_bits(),
                    "{act:?} out of place [{i}]"
                );
            }
        }
    }

    #[test]
    fn residual_epilogue_adds_bias_then_residual_then_activation() {
        let mut rng = XorShift::new(2);
        let (src, res) = (rng.vec(37), rng.vec(37));
        for act in ACTS {
            let mut got = src.clone();
            epilogue_res(&mut got, -0.375, &res, act);
            for i in 0..src.len() {
                let want = act.apply((src[i] + -0.375) + res[i]);
                assert_eq!(got[i].to_bits(), want.to_bits(), "{act:?} [{i}]");
            }
        }
    }

    #[test]
    fn identity_epilogue_leaves_data_untouched() {
        let mut data = [1.0, -2.0, f32::NAN, -0.0];
        epilogue(&mut data, 1.0, 0.0, Activation::None);
        assert_eq!(data[0], 1.0);
        assert_eq!(data[1], -2.0);
        assert!(data[2].is_nan());
        assert_eq!(data[3].to_bits(), (-0.0f32).to_bits());
    }
}
