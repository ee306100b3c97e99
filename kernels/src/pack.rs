//! Weight layouts: how a table's convolution wants its weights laid out, and the functions
//! that put them there, once, when a model prepares its parameters (at compile time for
//! embedded weights, at load time otherwise). A run never re-packs weights.
//!
//! A convolution's weights `[c_out, c_in / groups, kh, kw]` are, per group, the row-major
//! left-hand matrix `A[m, k]` of a GEMM (`m = c_out / groups`, `k = c_in / groups * kh * kw`).
//! The x86 GEMM (`arch/x86_64/avx2/blis.rs`) walks `k` in equal depth blocks of at most
//! [`KC`] and, per block, reads slivers of `MR` rows of `A`, broadcasting one element per row
//! and step. Read in place, those rows are `k` floats apart; for the many convolutions whose
//! `k` is a multiple of 256 (1x1 over 256, 512, 1024 channels) that puts every row in the same
//! few L1 sets, and the GEMM used to copy each sliver into a contiguous buffer, once per
//! column panel of every call. [`WeightLayout::DepthBlocked`] stores each depth block of each
//! group's matrix contiguously instead (`m` rows of `kc` floats), so any sliver, whatever the
//! ISA's `MR`, is one contiguous run of `rows * kc` floats that the micro-kernel reads in
//! place: AVX2 (`MR = 6`) and AVX-512 (`MR = 12`) share it, and so does the embedded buffer
//! the compiler writes.
//!
//! Depthwise convolutions (one channel per group) keep [`WeightLayout::Rows`]: their SIMD
//! kernels read the weights directly. When `k <= KC` there is one block and both layouts are
//! the same bytes. The portable, aarch64 and 32-bit arm tables use `Rows` (their GEMMs pack
//! `A` themselves, with their own block sizes).

use crate::Conv2d;

/// Depth of a block of the x86 GEMM (the `k` extent of one micro-kernel call): see
/// `arch/x86_64/avx2/blis.rs` for why 384. Here because the layout depends on it.
pub const KC: usize = 384;

/// How a table's `conv2d` expects the weights of a non-depthwise convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WeightLayout {
    /// As in the model file: `[c_out, c_in / groups, kh, kw]`, row-major.
    Rows,
    /// Per group, per depth block ([`depth_blocks`]), the `m x kc` block row-major.
    DepthBlocked,
}

/// The depth blocks of a `k`-deep GEMM: `(blocks, kc)` with `blocks` equal blocks of `kc`
/// (the last one shorter), `kc <= KC`; `k = 0` is one empty block.
pub const fn depth_blocks(k: usize) -> (usize, usize) {
    let blocks = k.div_ceil(KC);
    let blocks = if blocks == 0 { 1 } else { blocks };
    (blocks, k.div_ceil(blocks))
}

/// The shape of a convolution's weights as GEMM operands: `(groups, m, k)`, or `None` if
/// its weights are never a GEMM operand (depthwise), so every layout is [`WeightLayout::Rows`].
pub fn conv2d_weight_matrix(p: &Conv2d) -> Option<(usize, usize, usize)> {
    if p.is_depthwise() || p.groups == 0 {
        return None;
    }
    Some((
        p.groups,
        p.c_out / p.groups,
        p.c_in / p.groups * p.kh * p.kw,
    ))
}

/// Writes a convolution's weights (`[c_out, c_in / groups, kh, kw]`, from `src`) to `dst` in
/// the layout a table with `layout` reads them in (depthwise weights: a copy).
///
/// # Panics
///
/// If `src` or `dst` is shorter than the weights.
pub fn pack_conv2d(layout: WeightLayout, p: &Conv2d, src: &[f32], dst: &mut [f32]) {
    match conv2d_weight_matrix(p) {
        Some((groups, m, k)) => pack(layout, groups, m, k, src, dst),
        None => {
            let len = p.c_out * p.kh * p.kw;
            dst[..len].copy_from_slice(&src[..len]);
        }
    }
}

/// Writes `groups` row-major `m x k` matrices from `src` to `dst` in `layout`.
///
/// # Panics
///
/// If `src` or `dst` is shorter than `groups * m * k`.
pub fn pack(layout: WeightLayout, groups: usize, m: usize, k: usize, src: &[f32], dst: &mut [f32]) {
    relayout::<true>(layout, groups, m, k, src, dst);
}

/// The inverse of [`pack`]: `groups` matrices in `layout` from `src` to row-major in `dst`.
///
/// # Panics
///
/// If `src` or `dst` is shorter than `groups * m * k`.
pub fn unpack(
    layout: WeightLayout,
    groups: usize,
    m: usize,
    k: usize,
    src: &[f32],
    dst: &mut [f32],
) {
    relayout::<false>(layout, groups, m, k, src, dst);
}

/// [`pack`] (`PACK`) or [`unpack`]: the same walk, with source and destination swapped.
fn relayout<const PACK: bool>(
    layout: WeightLayout,
    groups: usize,
    m: usize,
    k: usize,
    src: &[f32],
    dst: &mut [f32],
) {
    let len = groups * m * k;
    let (src, dst) = (&src[..len], &mut dst[..len]);
    let (blocks, kc_step) = depth_blocks(k);
    if layout == WeightLayout::Rows || blocks == 1 {
        dst.copy_from_slice(src);
        return;
    }
    for g in 0..groups {
        let base = g * m * k;
        for blk in 0..blocks {
            let pc = blk * kc_step;
            let kc = kc_step.min(k - pc);
            for i in 0..m {
                // Row `i` of the matrix, columns `pc..pc + kc`, and its place in the block.
                let rows = base + i * k + pc;
                let blocked = base + m * pc + i * kc;
                let (from, to) = if PACK {
                    (rows, blocked)
                } else {
                    (blocked, rows)
                };
                dst[to..to + kc].copy_from_slice(&src[from..from + kc]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_equal_and_cover_k() {
        assert_eq!(depth_blocks(0), (1, 0));
        assert_eq!(depth_blocks(384), (1, 384));
        assert_eq!(depth_blocks(385), (2, 193));
        assert_eq!(depth_blocks(1024), (3, 342));
        assert_eq!(depth_blocks(4608), (12, 384));
    }

    #[test]
    fn depth_blocked_puts_each_block_contiguously() {
        // Two groups of a 3 x 800 matrix: blocks of 267, 267 and 266 columns.
        let (groups, m, k) = (2, 3, 800);
        let src: [f32; 4800] = core::array::from_fn(|i| i as f32);
        let mut packed = [0.0; 4800];
        pack(WeightLayout::DepthBlocked, groups, m, k, &src, &mut packed);
        // Group 1, block 2 (columns 534..800), row 2: after 3 rows of 534 in the first blocks
        // and 2 rows of 266 in this one.
        let at = 2400 + 3 * 534 + 2 * 266;
        assert_eq!(packed[at], src[2400 + 2 * 800 + 534]);
        assert_eq!(packed[at + 265], src[2400 + 2 * 800 + 799]);
        let mut back = [0.0; 4800];
        unpack(WeightLayout::DepthBlocked, groups, m, k, &packed, &mut back);
        assert_eq!(back, src);
        // Rows is the identity.
        pack(WeightLayout::Rows, groups, m, k, &src, &mut packed);
        assert_eq!(packed, src);
    }
}
