//! NEON fully connected layer for 32-bit arm: [`dense`], `out[b, o] = act(dot(input[b, :],
//! weight[o, :]) + bias[o])` with `weight` `[n_out, n_in]`. Same contract as the portable
//! kernel.
//!
//! A batch-1 dense layer is a GEMV: bound by reading the weights once, so the GEMM's packing
//! would only add traffic. Instead four weight rows at a time share each load of `x`: the
//! `asm!` loop keeps one q-register accumulator per row (four independent `vmla.f32` chains),
//! four floats of depth per step; the horizontal sums, the depth tail (`n_in % 4`), the last
//! `n_out % 4` rows (the portable dot product), bias and activation are plain Rust. Sums differ
//! from the portable kernel's (eight partial sums) by order only; `vmla` rounds like `+= *`.

use crate::arch::portable::epilogue::epilogue;
use crate::arch::portable::gemm::dot;
use crate::len::holds;
use crate::Activation;
use core::arch::asm;

/// Fully connected layer (see the module doc).
#[allow(clippy::too_many_arguments)] // The signature is the contract generated code calls.
pub(super) fn dense(
    batch: usize,
    n_in: usize,
    n_out: usize,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    out: &mut [f32],
) {
    // In release builds too, and without wrapping (`crate::len`); `dot4` checks the rows the
    // asm reads itself.
    assert!(
        holds(input.len(), &[batch, n_in])
            && holds(weight.len(), &[n_out, n_in])
            && bias.is_none_or(|b| b.len() >= n_out)
            && holds(out.len(), &[batch, n_out]),
        "dense: short slice"
    );
    let input = &input[..batch * n_in];
    let weight = &weight[..n_out * n_in];
    let out = &mut out[..batch * n_out];
    if n_out == 0 {
        return;
    }
    for (bi, out_row) in out.chunks_exact_mut(n_out).enumerate() {
        if n_in == 0 {
            // Empty dot products (and no rows of zero length to chunk the weights into).
            out_row.fill(0.0);
        } else {
            let x = &input[bi * n_in..][..n_in];
            let mut rows = weight.chunks_exact(4 * n_in);
            let mut outs = out_row.chunks_exact_mut(4);
            for (w4, y4) in (&mut rows).zip(&mut outs) {
                y4.copy_from_slice(&dot4(x, w4));
            }
            let rest = rows.remainder().chunks_exact(n_in);
            for (w, y) in rest.zip(outs.into_remainder()) {
                *y = dot(x, w);
            }
        }
        if let Some(bias) = bias {
            for (y, &b) in out_row.iter_mut().zip(&bias[..n_out]) {
                *y += b;
            }
        }
        epilogue(out_row, 1.0, 0.0, act);
    }
}

/// The dot products of `x` with the four consecutive rows (of length `x.len()`) in `w4`.
fn dot4(x: &[f32], w4: &[f32]) -> [f32; 4] {
    let n = x.len();
    let rows = [
        &w4[..n],
        &w4[n..2 * n],
        &w4[2 * n..3 * n],
        &w4[3 * n..4 * n],
    ];
    let steps = n / 4;
    // Row r's four lane sums, after the vector loop.
    let mut lanes = [0.0f32; 16];
    if steps > 0 {
        // SAFETY: only reachable through a table built after detecting NEON (crate::table),
        // the one feature these instructions need. The loop runs `steps >= 1` times and reads
        // `4 * steps <= n` floats from `x` and from each of the four rows, all of length `n`;
        // the two 32-byte stores fill exactly `lanes`. The pointers and the counter advance in
        // registers declared clobbered (`inout ... => _`); every vector register written is
        // declared (`d0`-`d7`, `d16`-`d25`), `subs` writes the flags (assumed clobbered
        // without `preserves_flags`), and nothing touches the stack.
        unsafe {
            asm!(
                // The target's baseline (VFPv3) does not include NEON; the table checked it.
                ".fpu neon",
                "vmov.i32 q8, #0",
                "vmov.i32 q9, #0",
                "vmov.i32 q10, #0",
                "vmov.i32 q11, #0",
                "2:",
                "vld1.32 {{d0, d1}}, [{x}]!",
                "vld1.32 {{d2, d3}}, [{w0}]!",
                "vld1.32 {{d4, d5}}, [{w1}]!",
                "vld1.32 {{d6, d7}}, [{w2}]!",
                "vld1.32 {{d24, d25}}, [{w3}]!",
                "vmla.f32 q8, q0, q1",
                "vmla.f32 q9, q0, q2",
                "vmla.f32 q10, q0, q3",
                "vmla.f32 q11, q0, q12",
                "subs {steps}, {steps}, #1",
                "bne 2b",
                "vst1.32 {{d16, d17, d18, d19}}, [{lanes}]!",
                "vst1.32 {{d20, d21, d22, d23}}, [{lanes}]",
                x = inout(reg) x.as_ptr() => _,
                w0 = inout(reg) rows[0].as_ptr() => _,
                w1 = inout(reg) rows[1].as_ptr() => _,
                w2 = inout(reg) rows[2].as_ptr() => _,
                w3 = inout(reg) rows[3].as_ptr() => _,
                steps = inout(reg) steps => _,
                lanes = inout(reg) lanes.as_mut_ptr() => _,
                out("d0") _, out("d1") _, out("d2") _, out("d3") _,
                out("d4") _, out("d5") _, out("d6") _, out("d7") _,
                out("d16") _, out("d17") _, out("d18") _, out("d19") _,
                out("d20") _, out("d21") _, out("d22") _, out("d23") _,
                out("d24") _, out("d25") _,
                options(nostack),
            );
        }
    }
    let done = steps * 4;
    let mut sums = [0.0f32; 4];
    for ((s, l), row) in sums.iter_mut().zip(lanes.chunks_exact(4)).zip(rows) {
        let tail: f32 = x[done..].iter().zip(&row[done..]).map(|(a, b)| a * b).sum();
        *s = ((l[0] + l[2]) + (l[1] + l[3])) + tail;
    }
    sums
}
