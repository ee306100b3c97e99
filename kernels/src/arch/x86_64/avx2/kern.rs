//! The register-blocked micro-kernels, written once over [`Lanes`] and instantiated for AVX2
//! (`N = 8`, tiles of 6 x 16) and AVX-512 (`N = 16`, tiles of 12 x 32).
//!
//! Algorithm sketch of the full tile (`R` rows, two vectors of `N` columns):
//!
//! ```text
//! acc[R][2] = 0                                   // R * 2 accumulator registers
//! for p in 0..kc:                                 // in groups of 16: one prefetch per row
//!     b0, b1 = packed B row p                     //   of the next sliver per group
//!     for i in 0..R:
//!         a = broadcast sliver[i, p]
//!         acc[i][0] += a * b0; acc[i][1] += a * b1
//! for each accumulator: (+ C on later depth blocks), on the last block + bias, + the
//! residual if any, and the activation in registers, store; sigmoid / tanh then per element
//! with `Activation::apply`
//! ```
//!
//! With `R * 2` independent accumulators (12 for AVX2, 24 for AVX-512) the FMA latency is
//! covered, and each step issues `2 R` FMAs against `R + 2` loads, inside the load ports'
//! budget. On the real ISAs the loop over `p` is assembly (`kloop`: LLVM spilled half of the
//! AVX-512 accumulators around each group of 16 steps) and the rest, `finish`, is the code
//! here; the loop written over [`Lanes`] (`tile`) is what the scalar emulation in the tests
//! runs. The ragged columns of a panel run as dot products (`dots`): `R x 2` sums of
//! sliver rows times packed tail columns, vectorised along `k`, reduced across lanes at the
//! end; the small-batch dense layer uses the same idea on rows of the input and the weights
//! (`dense_block`).

use super::blis::{Tile, TileBias};
use super::lanes::{act_vec, scalar_act, Lanes};
use crate::arch::x86_64::simd::vector::array;
use crate::len::holds;
use crate::Activation;

/// The most rows a full tile has (the AVX-512 tile's 12).
#[cfg(test)]
const MAX_ROWS: usize = 12;

/// The most rows an 8-lane tile has (AVX2's 6 x 16), for [`finish`]'s zero bias.
const MAX_TILE_ROWS: usize = 6;

/// Expands `$m!(i)` for every row index `0..MAX_ROWS`, as constants.
macro_rules! rows {
    ($m:ident) => {
        $m!(0);
        $m!(1);
        $m!(2);
        $m!(3);
        $m!(4);
        $m!(5);
        $m!(6);
        $m!(7);
        $m!(8);
        $m!(9);
        $m!(10);
        $m!(11);
    };
}

/// One `R x 2N` tile, or, for 16 lanes, `R x N` when `t.cols == N` (the half-width
/// micro-panel), written over [`Lanes`]: the tile of the scalar emulation in the tests below.
/// The AVX2 and AVX-512 tiles run the same reduction in assembly ([`super::kloop`]) and then
/// [`finish`].
///
/// # Safety
///
/// `R == t.rows`, and the pointers of `t` are valid as
/// [`MicroKernel::tile`](super::blis::MicroKernel::tile) requires, with `NR = 2 N` and the
/// micro-panel aligned to `4 N` bytes.
#[cfg(test)]
#[inline(always)]
pub(crate) unsafe fn tile<S: Lanes, const R: usize>(s: S, t: &Tile) {
    // SAFETY: forwarded; `cols` says which layout the micro-panel has. AVX2 panels have no
    // half-width micro-panel (`PanelLayout`), and its tile is instantiated at full width only:
    // with both widths in one function its full tile ran at half speed (gemm 256^3 0.41 of
    // the peak instead of 0.92, AMD EPYC Zen 4).
    unsafe {
        if S::N < 16 || t.cols == 2 * S::N {
            tile_w::<S, R, 2>(s, t)
        } else {
            tile_w::<S, R, 1>(s, t)
        }
    }
}

/// [`tile`] with `W` vectors per row: 2 for a full micro-panel, 1 for the half-width one a
/// panel's ragged columns get when there are at least `N` of them.
///
/// # Safety
///
/// As for [`tile`], with `t.cols == W * N`.
// The k loop indexes the accumulators only by constants (`rows!` expands every row; `R` is a
// constant, so the rows past it fold away), and so does the AVX-512 store below: then LLVM keeps
// all 24 zmm accumulators in registers. With `for i in 0..R` loops it left them in a stack array
// and stored every FMA's result: the AVX-512 GEMM ran at 0.31 of its FMA peak (AMD EPYC with
// AVX-512, 271 GFLOP/s), 0.77-0.84 with constant indices. AVX2's 12 accumulators were promoted
// either way, and its store loop measured faster as a plain loop (see below).
#[cfg(test)]
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn tile_w<S: Lanes, const R: usize, const W: usize>(s: S, t: &Tile) {
    const {
        assert!(
            R <= MAX_ROWS && (W == 1 || W == 2),
            "a tile has at most MAX_ROWS rows"
        )
    };
    let n = S::N;
    let nr = W * n;
    let mut acc = [[s.zero(); 2]; R];
    prefetch_c(s, t, R, nr);
    let a = t.a;
    let lda = t.lda;
    let kc = t.kc;
    let mut b = t.b;
    // One step of the reduction: row `p` of the micro-panel times column `p` of the sliver.
    // A macro rather than a closure: a closure taking `&mut acc` can make LLVM keep the
    // accumulators in memory.
    macro_rules! step {
        ($p:expr) => {
            // SAFETY: `p < kc`, so row `p` of the micro-panel (`2N` floats, aligned because
            // the panel is 64-byte aligned and each row is a multiple of 64 bytes) and
            // `A[i, p]` for `i < R` are in range.
            unsafe {
                let b0 = s.load_aligned(b);
                let b1 = if W == 2 { s.load_aligned(b.add(n)) } else { b0 };
                macro_rules! row {
                    ($i:expr) => {
                        if $i < R {
                            let ai = s.broadcast(a.add($i * lda + $p));
                            acc[$i][0] = s.fma(ai, b0, acc[$i][0]);
                            if W == 2 {
                                acc[$i][1] = s.fma(ai, b1, acc[$i][1]);
                            }
                        }
                    };
                }
                rows!(row);
            }
            b = b.wrapping_add(nr);
        };
    }
    // In groups of 16 steps (a cache line of each row of A), prefetching one line of each
    // row of the next sliver per group when asked.
    let mut p = 0;
    while p + 16 <= kc {
        if !t.a_next.is_null() {
            for i in 0..R {
                s.prefetch(t.a_next.wrapping_add(i * t.lda_next + p));
            }
        }
        for pp in p..p + 16 {
            step!(pp);
        }
        p += 16;
    }
    while p < kc {
        step!(p);
        p += 1;
    }
    // SAFETY: forwarded from the caller.
    unsafe { finish::<S, R, W, R>(s, t, acc) };
}

/// Starts fetching the tile's rows of C on later depth blocks, which load them after the
/// reduction (and, on the last depth block, the residual's): its rows are far apart in memory.
/// The first block only stores C, and its stores wait in the store buffer; prefetching them
/// too put two dozen misses in front of each tile's reduction (13 % of ResNet-50's tile
/// samples were on those prefetches on an Intel Xeon, whose fill buffers they exhausted).
#[inline(always)]
pub(crate) fn prefetch_c<S: Lanes>(s: S, t: &Tile, rows: usize, cols: usize) {
    if t.accumulate {
        for i in 0..rows {
            let c_row = t.c.wrapping_add(i * t.ldc);
            s.prefetch(c_row);
            s.prefetch(c_row.wrapping_add(cols - 1));
        }
    }
    // The residual's rows, read by the epilogue: as far apart, and often only in L3 (the value
    // was computed a few layers ago), too far for one tile's reduction to hide: this tile's
    // and the next one's (the same rows, the next columns; past the panel's end it is the
    // next panel's, or nothing anyone reads, which a prefetch may touch).
    if t.last && !t.res.is_null() {
        for i in 0..rows {
            let r_row = t.res.wrapping_add(i * t.ldc);
            s.prefetch(r_row);
            s.prefetch(r_row.wrapping_add(cols - 1));
            s.prefetch(r_row.wrapping_add(cols));
            s.prefetch(r_row.wrapping_add(2 * cols - 1));
        }
    }
}

/// The end of a tile: the first `R` rows of the accumulators `acc` (`W` vectors each) added
/// to C on later depth blocks, the epilogue on the last one, stored.
///
/// # Safety
///
/// As for [`tile`], with `R <= L` and `t.cols == W * N`.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
pub(crate) unsafe fn finish<S: Lanes, const R: usize, const W: usize, const L: usize>(
    s: S,
    t: &Tile,
    acc: [[S::V; 2]; L],
) {
    let n = S::N;
    let nr = W * n;
    // The common last-block epilogue with 8 lanes, without a branch per vector (see
    // `store_clamped`).
    if S::N < 16 && R <= MAX_TILE_ROWS && t.last && !matches!(t.bias, TileBias::Col(_)) {
        if let Some((lo, hi)) = clamp_bounds(t.act) {
            let res = !t.res.is_null();
            // Without a bias the general path still adds zeros when there is an activation
            // or a residual (which turns -0 into +0), so this one adds them too: the same
            // bits.
            static ZEROS: [f32; MAX_TILE_ROWS] = [0.0; MAX_TILE_ROWS];
            let bias = match (t.bias, t.act) {
                (TileBias::Row(b), _) => b,
                (_, Activation::None) if !res => core::ptr::null(),
                _ => ZEROS.as_ptr(),
            };
            let (lo, hi) = (s.splat(lo), s.splat(hi));
            macro_rules! store {
                ($($acc:literal, $bias:literal, $res:literal;)*) => {
                    match (t.accumulate, !bias.is_null(), res) {
                        $(
                            // SAFETY: forwarded from the caller; `bias`, if not null, covers
                            // the tile's rows.
                            ($acc, $bias, $res) => unsafe {
                                store_clamped::<S, R, W, L, $acc, $bias, $res>(
                                    s, t, &acc, bias, lo, hi,
                                )
                            },
                        )*
                    }
                };
            }
            store! {
                false, false, false; false, true, false; true, false, false; true, true, false;
                false, false, true; false, true, true; true, false, true; true, true, true;
            }
            return;
        }
    }
    let epilogue = t.last
        && (!t.res.is_null() || !matches!((t.bias, t.act), (TileBias::None, Activation::None)));
    // One row of the tile to C. Kept small (no scalar loop inside) so that it unrolls and the
    // accumulators never need a home in memory. The `match`es per vector are on loop
    // invariants and predict well; hoisting them into one copy of the loop per case measured
    // slower (the copies crowd the registers the k loop needs) before the k loop was assembly.
    // With 8 lanes the common last block now takes `store_clamped` above, one copy per
    // (accumulate, bias) pair: on AMD EPYC Zen 3, short 1x1 expansions (K = 16-32) went from
    // 0.74-0.90 to 0.90-1.00 of the `gemm` crate, deep ones unchanged or a little faster.
    // The AVX-512 tile stores its rows through constant indices (`rows!`), or LLVM keeps its
    // 24 accumulators in memory for the whole k loop; for AVX2's 12 a plain loop measured
    // faster (0.46 of the AVX-512 peak against 0.38 through `rows!`, i.e. 0.92 against 0.76 of
    // its own).
    macro_rules! store_row {
        ($i:expr, $acc_row:expr) => {{
            let i: usize = $i;
            let acc_row: [S::V; 2] = $acc_row;
            let c_row = t.c.wrapping_add(i * t.ldc);
            for (v, &x) in acc_row.iter().enumerate().take(W) {
                let dst = c_row.wrapping_add(n * v);
                let mut x = x;
                if t.accumulate {
                    // SAFETY: the `2N` columns of row `i < rows` of C are in range.
                    x = s.add(x, unsafe { s.load(dst) });
                }
                if epilogue {
                    // SAFETY: the bias pointer covers the tile's rows (`i < R`) or its columns.
                    let bias = unsafe {
                        match t.bias {
                            TileBias::None => s.zero(),
                            TileBias::Row(bias) => s.broadcast(bias.add(i)),
                            TileBias::Col(bias) => s.load(bias.add(n * v)),
                        }
                    };
                    x = s.add(x, bias);
                    if !t.res.is_null() {
                        // SAFETY: the residual is laid out as C (the tile's contract).
                        x = s.add(x, unsafe { s.load(t.res.wrapping_add(i * t.ldc + n * v)) });
                    }
                    x = act_vec(s, x, t.act);
                }
                // SAFETY: as for the load above.
                unsafe { s.store(dst, x) };
            }
        }};
    }
    if S::N >= 16 {
        macro_rules! finish_row {
            ($i:expr) => {
                if $i < R {
                    store_row!($i, acc[$i]);
                }
            };
        }
        rows!(finish_row);
    } else {
        for (i, acc_row) in acc.iter().enumerate().take(R) {
            store_row!(i, *acc_row);
        }
    }
    if epilogue && scalar_act(t.act) {
        // SAFETY: the tile (`rows x 2N` of C) was just written.
        unsafe { scalar_pass(t, nr) };
    }
}

/// `act` as a clamp to `[lo, hi]` (`min(hi, max(lo, x))`, the operand order of [`act_vec`]'s,
/// so NaN and -0 come through the same), where it is one: none, ReLU and clips with ordered
/// bounds, the activations of nearly every convolution.
#[inline(always)]
fn clamp_bounds(act: Activation) -> Option<(f32, f32)> {
    match act {
        Activation::None => Some((f32::NEG_INFINITY, f32::INFINITY)),
        Activation::Relu => Some((0.0, f32::INFINITY)),
        Activation::Clip { min, max } if min <= max => Some((min, max)),
        _ => None,
    }
}

/// The last depth block's store of an 8-lane tile: after adding C's old values if `ACC`, a
/// row bias if `BIAS` (at `bias`) and the residual if `RES` (at `t.res`, laid out as C),
/// clamped to `[lo, hi]` ([`clamp_bounds`]): the same values as the general path of
/// [`finish`], whose per-vector `match`es on the bias and the activation were about 200 of
/// the 835 instructions of a 24-deep 6 x 16 tile (callgrind, ShuffleNet-v2's 24 -> 58 1x1 at
/// 56x56). The residual projections of MobileNet-v2 (`6c -> c`, no activation) take it with
/// `RES`.
///
/// # Safety
///
/// As for [`finish`]; `bias` covers the tile's `R` rows if `BIAS` (`R <= MAX_TILE_ROWS`).
#[inline(always)]
unsafe fn store_clamped<
    S: Lanes,
    const R: usize,
    const W: usize,
    const L: usize,
    const ACC: bool,
    const BIAS: bool,
    const RES: bool,
>(
    s: S,
    t: &Tile,
    acc: &[[S::V; 2]; L],
    bias: *const f32,
    lo: S::V,
    hi: S::V,
) {
    let n = S::N;
    for (i, acc_row) in acc.iter().enumerate().take(R) {
        let c_row = t.c.wrapping_add(i * t.ldc);
        let res_row = t.res.wrapping_add(i * t.ldc);
        let b = if BIAS {
            // SAFETY: `bias` covers row `i < R` (the caller).
            unsafe { s.broadcast(bias.add(i)) }
        } else {
            s.zero()
        };
        for (v, &x) in acc_row.iter().enumerate().take(W) {
            let dst = c_row.wrapping_add(n * v);
            let mut x = x;
            if ACC {
                // SAFETY: the `W N` columns of row `i < rows` of C are in range.
                x = s.add(x, unsafe { s.load(dst) });
            }
            if BIAS {
                x = s.add(x, b);
            }
            if RES {
                // SAFETY: the residual is laid out as C (the tile's contract).
                x = s.add(x, unsafe { s.load(res_row.wrapping_add(n * v)) });
            }
            // SAFETY: as for the load above.
            unsafe { s.store(dst, s.min(hi, s.max(lo, x))) };
        }
    }
}

/// Applies a non-vectorised activation ([`Activation::apply`]) to `t.rows x cols` of C.
///
/// # Safety
///
/// That part of C is valid, as the tile's contract says.
#[inline(never)]
unsafe fn scalar_pass(t: &Tile, cols: usize) {
    for i in 0..t.rows {
        for j in 0..cols {
            // SAFETY: forwarded from the caller.
            unsafe {
                let y = t.c.add(i * t.ldc + j);
                *y = t.act.apply(*y);
            }
        }
    }
}

/// The ragged columns of a panel as dot products, two columns at a time.
///
/// # Safety
///
/// `R == t.rows`, and the pointers of `t` are valid as
/// [`MicroKernel::dots`](super::blis::MicroKernel::dots) requires.
#[inline(always)]
pub(crate) unsafe fn dots<S: Lanes, const R: usize>(s: S, t: &Tile) {
    let mut j = 0;
    while j < t.cols {
        // SAFETY: forwarded; columns `j..j + W` are inside `cols`.
        unsafe {
            if j + 2 <= t.cols {
                dot_group::<S, R, 2>(s, t, j);
            } else {
                dot_group::<S, R, 1>(s, t, j);
            }
        }
        j += 2;
    }
}

/// Columns `j0..j0 + W` of the ragged part: `R x W` dot products of length `kc`, `N`
/// products per FMA, then the epilogue per element.
///
/// # Safety
///
/// As for [`dots`], with `j0 + W <= t.cols`.
// Indexed loops over the accumulators on purpose: after unrolling, constant indices let
// LLVM keep every accumulator in a register.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn dot_group<S: Lanes, const R: usize, const W: usize>(s: S, t: &Tile, j0: usize) {
    let n = S::N;
    let kc = t.kc;
    let mut acc = [[s.zero(); W]; R];
    let cols: [*const f32; W] = array(|w| t.b.wrapping_add((j0 + w) * kc));
    let mut p = 0;
    while p + n <= kc {
        if !t.a_next.is_null() && p % 16 == 0 {
            for i in 0..R {
                s.prefetch(t.a_next.wrapping_add(i * t.lda_next + p));
            }
        }
        // SAFETY: `p + N <= kc`: inside every sliver row and tail column.
        unsafe {
            let bv: [S::V; W] = array(|w| s.load(cols[w].add(p)));
            for i in 0..R {
                let ai = s.load(t.a.add(i * t.lda + p));
                for w in 0..W {
                    acc[i][w] = s.fma(ai, bv[w], acc[i][w]);
                }
            }
        }
        p += n;
    }
    if p < kc {
        let left = kc - p;
        // SAFETY: only `p..kc` of every row and column is read.
        unsafe {
            let bv: [S::V; W] = array(|w| s.load_first(cols[w].add(p), left));
            for i in 0..R {
                let ai = s.load_first(t.a.add(i * t.lda + p), left);
                for w in 0..W {
                    acc[i][w] = s.fma(ai, bv[w], acc[i][w]);
                }
            }
        }
    }
    // Reduce everything first, so that no accumulator is live across the (possibly
    // out-of-line) scalar activation calls below.
    // (Plain indexed loops: a closure capturing `acc` would force it into memory for the
    // whole reduction loop above.)
    let mut sums = [[0.0f32; W]; R];
    for i in 0..R {
        for w in 0..W {
            sums[i][w] = s.hsum(acc[i][w]);
        }
    }
    for (i, sum_row) in sums.iter().enumerate() {
        for (w, &y) in sum_row.iter().enumerate() {
            let j = j0 + w;
            let dst = t.c.wrapping_add(i * t.ldc + j);
            let mut y = y;
            // SAFETY: element `(i, j)` of the tile is in range of C and of the bias.
            unsafe {
                if t.accumulate {
                    y += *dst;
                }
                if t.last {
                    y += t.bias.at(i, j);
                    if !t.res.is_null() {
                        y += *t.res.add(i * t.ldc + j);
                    }
                    y = t.act.apply(y);
                }
                *dst = y;
            }
        }
    }
}

/// One block of the small-batch dense layer: pointers to its first input row, weight row,
/// output and bias.
#[derive(Debug)]
pub(crate) struct DenseBlock {
    pub n_in: usize,
    pub n_out: usize,
    pub x: *const f32,
    pub w: *const f32,
    pub y: *mut f32,
    pub bias: Option<*const f32>,
    pub act: Activation,
}

/// `y[r, o] = act(dot(x[r], w[o]) + bias[o])` for `r < RB`, `o < O`, with `U` vectors per
/// accumulator chain (more independent chains when `RB * O` alone is too few).
///
/// # Safety
///
/// `RB` rows of `x` (stride `n_in`), `O` rows of `w` (stride `n_in`), `RB x O` outputs (row
/// stride `n_out`) and `O` bias values are valid.
// Indexed loops over the accumulators on purpose: after unrolling, constant indices let
// LLVM keep every accumulator in a register.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
pub(crate) unsafe fn dense_block<S: Lanes, const RB: usize, const O: usize, const U: usize>(
    s: S,
    d: &DenseBlock,
) {
    let n = S::N;
    let len = d.n_in;
    let mut acc = [[[s.zero(); U]; O]; RB];
    let mut p = 0;
    while p + n * U <= len {
        for u in 0..U {
            let q = p + n * u;
            // SAFETY: `q + N <= n_in`, inside every row.
            unsafe {
                let xs: [S::V; RB] = array(|r| s.load(d.x.add(r * len + q)));
                for o in 0..O {
                    let wv = s.load(d.w.add(o * len + q));
                    for r in 0..RB {
                        acc[r][o][u] = s.fma(xs[r], wv, acc[r][o][u]);
                    }
                }
            }
        }
        p += n * U;
    }
    while p < len {
        let left = (len - p).min(n);
        // SAFETY: only `p..p + left <= n_in` of every row is read.
        unsafe {
            let xs: [S::V; RB] = array(|r| {
                if left == n {
                    s.load(d.x.add(r * len + p))
                } else {
                    s.load_first(d.x.add(r * len + p), left)
                }
            });
            for o in 0..O {
                let wv = if left == n {
                    s.load(d.w.add(o * len + p))
                } else {
                    s.load_first(d.w.add(o * len + p), left)
                };
                for r in 0..RB {
                    acc[r][o][0] = s.fma(xs[r], wv, acc[r][o][0]);
                }
            }
        }
        p += left;
    }
    // Reduce everything first, so that no accumulator is live across the (possibly
    // out-of-line) scalar activation calls below.
    // (Plain indexed loops: a closure capturing `acc` would force it into memory for the
    // whole reduction loop above.)
    let mut sums = [[0.0f32; O]; RB];
    for r in 0..RB {
        for o in 0..O {
            let mut v = acc[r][o][0];
            for u in 1..U {
                v = s.add(v, acc[r][o][u]);
            }
            sums[r][o] = s.hsum(v);
        }
    }
    for (r, sum_r) in sums.iter().enumerate() {
        for (o, &y) in sum_r.iter().enumerate() {
            // SAFETY: output `(r, o)` and bias `o` are in the block.
            unsafe {
                let b = d.bias.map_or(0.0, |b| *b.add(o));
                *d.y.add(r * d.n_out + o) = d.act.apply(y + b);
            }
        }
    }
}

/// Blocks of up to 3 input rows times 4 weight rows for the small-batch dense layer; `block`
/// runs one `(rows, outs)` block (it dispatches to [`dense_block`] instantiations).
///
/// Each step of a 3 x 4 block loads 7 vectors for 12 FMAs, so it is FMA-bound, and the
/// weights, the big operand, are read once per three input rows. A single row is
/// memory-bound on the weights; it unrolls twice along `n_in` so its four accumulators become
/// eight.
#[allow(clippy::too_many_arguments)] // The dense contract plus the block runner.
#[inline(always)]
pub(crate) fn dense_blocks(
    batch: usize,
    n_in: usize,
    n_out: usize,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    out: &mut [f32],
    mut block: impl FnMut(usize, usize, &DenseBlock),
) {
    assert!(
        holds(input.len(), &[batch, n_in])
            && holds(weight.len(), &[n_out, n_in])
            && bias.is_none_or(|b| b.len() >= n_out)
            && holds(out.len(), &[batch, n_out]),
        "dense: short slice"
    );
    let mut b0 = 0;
    while b0 < batch {
        let rows = (batch - b0).min(3);
        let mut o0 = 0;
        while o0 < n_out {
            let outs = (n_out - o0).min(4);
            let blk = DenseBlock {
                n_in,
                n_out,
                x: input[b0 * n_in..].as_ptr(),
                w: weight[o0 * n_in..].as_ptr(),
                y: out[b0 * n_out + o0..].as_mut_ptr(),
                bias: bias.map(|b| b[o0..].as_ptr()),
                act,
            };
            block(rows, outs, &blk);
            o0 += outs;
        }
        b0 += rows;
    }
}

/// Dispatches one dense block to its [`dense_block`] instantiation.
///
/// # Safety
///
/// `rows <= 3` input/output rows and `outs <= 4` weight rows (and bias values) of `d` are
/// valid.
#[inline(always)]
pub(crate) unsafe fn dense_dispatch<S: Lanes>(s: S, rows: usize, outs: usize, d: &DenseBlock) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match (rows, outs) {
            (3, 4) => dense_block::<S, 3, 4, 1>(s, d),
            (3, 3) => dense_block::<S, 3, 3, 1>(s, d),
            (3, 2) => dense_block::<S, 3, 2, 1>(s, d),
            (3, _) => dense_block::<S, 3, 1, 1>(s, d),
            (2, 4) => dense_block::<S, 2, 4, 1>(s, d),
            (2, 3) => dense_block::<S, 2, 3, 1>(s, d),
            (2, 2) => dense_block::<S, 2, 2, 1>(s, d),
            (2, _) => dense_block::<S, 2, 1, 1>(s, d),
            (_, 4) => dense_block::<S, 1, 4, 2>(s, d),
            (_, 3) => dense_block::<S, 1, 3, 2>(s, d),
            (_, 2) => dense_block::<S, 1, 2, 2>(s, d),
            (_, _) => dense_block::<S, 1, 1, 2>(s, d),
        }
    }
}

/// The generic kernels at both widths through [`Emu`](super::lanes::Emu), the scalar
/// emulation of the vector unit, against the portable reference: the AVX-512 instantiation's
/// logic (16 lanes, 12-row slivers, 32-wide panels and their tails) is checked here even on
/// machines without AVX-512, where the integration tests can only run AVX2.
#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use crate::arch::portable;
    use crate::arch::x86_64::avx2::blis::{self, Bias, ColMajor, MicroKernel, RowMajor};
    use crate::arch::x86_64::avx2::im2col::conv2d_gemm;
    use crate::arch::x86_64::avx2::lanes::Emu;
    use crate::par::Serial;
    use crate::testutil::XorShift;
    use crate::Conv2d;
    use std::vec;
    use std::vec::Vec;

    /// Runs `$f::<Emu<N>, R>` for the `R` equal to `$rows` (1..=12).
    macro_rules! by_rows {
        ($f:ident, $s:expr, $t:expr) => {
            // SAFETY: forwarded from the caller.
            unsafe {
                match $t.rows {
                    12 => $f::<_, 12>($s, $t),
                    11 => $f::<_, 11>($s, $t),
                    10 => $f::<_, 10>($s, $t),
                    9 => $f::<_, 9>($s, $t),
                    8 => $f::<_, 8>($s, $t),
                    7 => $f::<_, 7>($s, $t),
                    6 => $f::<_, 6>($s, $t),
                    5 => $f::<_, 5>($s, $t),
                    4 => $f::<_, 4>($s, $t),
                    3 => $f::<_, 3>($s, $t),
                    2 => $f::<_, 2>($s, $t),
                    _ => $f::<_, 1>($s, $t),
                }
            }
        };
    }

    /// The AVX2 shape: 8 lanes, 6 x 16 tiles.
    impl MicroKernel<16> for Emu<8> {
        const MR: usize = 6;
        unsafe fn tile(t: &Tile) {
            by_rows!(tile, Emu::<8>, t)
        }
        unsafe fn dots(t: &Tile) {
            by_rows!(dots, Emu::<8>, t)
        }
    }

    /// The AVX-512 shape: 16 lanes, 12 x 32 tiles.
    impl MicroKernel<32> for Emu<16> {
        const MR: usize = 12;
        unsafe fn tile(t: &Tile) {
            by_rows!(tile, Emu::<16>, t)
        }
        unsafe fn dots(t: &Tile) {
            by_rows!(dots, Emu::<16>, t)
        }
    }

    #[track_caller]
    fn close(got: &[f32], want: &[f32], what: &str) {
        assert_eq!(got.len(), want.len(), "{what}: length");
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            let tol = 1e-4 * w.abs().max(1.0);
            assert!((g - w).abs() <= tol, "{what}: [{i}] got {g} want {w}");
        }
    }

    const ACTS: [Activation; 6] = [
        Activation::None,
        Activation::Relu,
        Activation::Clip {
            min: -0.5,
            max: 0.25,
        },
        Activation::LeakyRelu { alpha: 0.1 },
        Activation::Sigmoid,
        Activation::Tanh,
    ];

    /// `gemm` through the driver with micro-kernel `K` (plain, no epilogue).
    fn emu_gemm<K: MicroKernel<NR>, const NR: usize>(
        m: usize,
        n: usize,
        k: usize,
        a: &[f32],
        b: &[f32],
    ) -> Vec<f32> {
        let mut c = vec![f32::NAN; m * n + 1];
        c[m * n] = 7.0;
        let g = blis::Gemm {
            m,
            n,
            k,
            a,
            lda: k,
            a_blocked: false,
            c: &mut c,
            ldc: n,
            bias: Bias::None,
            res: None,
            act: Activation::None,
        };
        // SAFETY: the emulation needs no CPU features.
        unsafe {
            blis::gemm::<K, NR, _>(
                g,
                &RowMajor {
                    data: b,
                    ld: n,
                    in_place: false,
                },
            )
        };
        assert_eq!(c[m * n], 7.0, "wrote past C");
        c.truncate(m * n);
        c
    }

    #[test]
    fn gemm_at_both_widths_matches_portable() {
        let mut rng = XorShift::new(7);
        // Row slivers of every height (m), full and ragged panels (n around multiples of 16
        // and 32, past a 128-wide panel), depth blocks (k past KC = 384) and k = 0.
        let mut shapes = vec![
            (1, 1, 1),
            (13, 33, 0),
            (25, 193, 257),
            (12, 49, 600),
            (8, 16, 3),
            (30, 400, 40),
        ];
        for _ in 0..30 {
            shapes.push((1 + rng.below(30), 1 + rng.below(70), 1 + rng.below(70)));
        }
        for (m, n, k) in shapes {
            let a = rng.vec(m * k);
            let b = rng.vec(k * n);
            let mut want = vec![0.0; m * n];
            portable::gemm(m, n, k, &a, &b, &mut want);
            close(
                &emu_gemm::<Emu<8>, 16>(m, n, k, &a, &b),
                &want,
                &std::format!("emu8 {m}x{n}x{k}"),
            );
            close(
                &emu_gemm::<Emu<16>, 32>(m, n, k, &a, &b),
                &want,
                &std::format!("emu16 {m}x{n}x{k}"),
            );
        }
    }

    /// Dense through both paths at width `N`: the dot-product blocks and the packed GEMM with
    /// the bias per column.
    #[allow(clippy::too_many_arguments)]
    fn emu_dense<S: Lanes + MicroKernel<NR>, const NR: usize>(
        s: S,
        batch: usize,
        n_in: usize,
        n_out: usize,
        x: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
        act: Activation,
    ) -> [Vec<f32>; 2] {
        let mut dots = vec![f32::NAN; batch * n_out];
        dense_blocks(
            batch,
            n_in,
            n_out,
            x,
            w,
            bias,
            act,
            &mut dots,
            |rows, outs, d| {
                // SAFETY: the emulation needs no CPU features; the block is in range.
                unsafe { dense_dispatch(s, rows, outs, d) }
            },
        );
        let mut packed = vec![f32::NAN; batch * n_out];
        let g = blis::Gemm {
            m: batch,
            n: n_out,
            k: n_in,
            a: x,
            lda: n_in,
            a_blocked: false,
            c: &mut packed,
            ldc: n_out,
            bias: bias.map_or(Bias::None, Bias::Col),
            res: None,
            act,
        };
        // SAFETY: the emulation needs no CPU features.
        unsafe { blis::gemm::<S, NR, _>(g, &ColMajor { data: w, ld: n_in }) };
        [dots, packed]
    }

    #[test]
    fn dense_at_both_widths_matches_portable() {
        let mut rng = XorShift::new(8);
        for case in 0..36 {
            let (batch, n_in, n_out) = (1 + rng.below(8), rng.below(90), 1 + rng.below(80));
            let act = ACTS[case % ACTS.len()];
            let x = rng.vec(batch * n_in);
            let w = rng.vec(n_out * n_in);
            let b = rng.vec(n_out);
            let bias = (case % 4 != 0).then_some(&b[..]);
            let mut want = vec![0.0; batch * n_out];
            portable::dense(batch, n_in, n_out, &x, &w, bias, act, &mut want);
            let what = std::format!("dense b{batch} {n_in}->{n_out} {act:?}");
            for got in emu_dense::<Emu<8>, 16>(Emu, batch, n_in, n_out, &x, &w, bias, act) {
                close(&got, &want, &std::format!("emu8 {what}"));
            }
            for got in emu_dense::<Emu<16>, 32>(Emu, batch, n_in, n_out, &x, &w, bias, act) {
                close(&got, &want, &std::format!("emu16 {what}"));
            }
        }
    }

    #[test]
    fn conv_at_both_widths_matches_portable() {
        let out_len = |i: usize, k: usize, s: usize, d: usize, pads: usize| {
            (i + pads - d * (k - 1) - 1) / s + 1
        };
        #[allow(clippy::type_complexity)]
        let cases: [(
            usize,
            usize,
            [usize; 2],
            usize,
            [usize; 2],
            [usize; 2],
            [usize; 2],
            [usize; 4],
            usize,
        ); 10] = [
            // batch, c_in, hw, c_out, k, stride, dilation, pad, groups
            (1, 5, [9, 9], 13, [3, 3], [1, 1], [1, 1], [1; 4], 1), // linear "same" path
            (2, 6, [8, 11], 20, [3, 3], [2, 2], [1, 1], [1; 4], 2), // strided, grouped
            (1, 3, [23, 21], 16, [7, 7], [2, 2], [1, 1], [3; 4], 1), // a stem
            (1, 40, [7, 7], 25, [3, 3], [1, 1], [1, 1], [1; 4], 1), // 49-wide planes
            (2, 7, [6, 5], 9, [1, 1], [1, 1], [1, 1], [0; 4], 1),  // pointwise
            (1, 9, [10, 10], 14, [1, 1], [2, 2], [1, 1], [0; 4], 1), // strided 1x1
            (1, 4, [9, 8], 6, [2, 3], [1, 2], [2, 1], [0, 2, 3, 1], 2), // odd everything
            (1, 30, [12, 12], 12, [3, 3], [1, 1], [2, 2], [2; 4], 1), // dilated "same"
            (1, 4, [40, 37], 8, [3, 3], [2, 2], [1, 1], [1; 4], 1), // vector stride-2 gathers
            (1, 6, [35, 35], 7, [1, 1], [2, 2], [1, 1], [0; 4], 1), // the same, 1x1
        ];
        let mut rng = XorShift::new(9);
        for (idx, (batch, c_in, hw, c_out, k, stride, dilation, pad, groups)) in
            cases.into_iter().enumerate()
        {
            let p = Conv2d {
                batch,
                c_in,
                h: hw[0],
                w: hw[1],
                c_out,
                kh: k[0],
                kw: k[1],
                stride,
                dilation,
                pad,
                groups,
                out_h: out_len(hw[0], k[0], stride[0], dilation[0], pad[0] + pad[2]),
                out_w: out_len(hw[1], k[1], stride[1], dilation[1], pad[1] + pad[3]),
            };
            let input = rng.vec(batch * c_in * hw[0] * hw[1]);
            let weight = rng.vec(c_out * (c_in / groups) * k[0] * k[1]);
            let bias = rng.vec(c_out);
            let act = ACTS[idx % ACTS.len()];
            let n_out = batch * c_out * p.out_h * p.out_w;
            let mut scratch = vec![0.0; p.scratch_len()];
            let mut want = vec![0.0; n_out];
            portable::conv2d(
                &p,
                &input,
                &weight,
                Some(&bias),
                act,
                &mut scratch,
                &mut want,
            );
            let mut got8 = vec![f32::NAN; n_out];
            let mut got16 = vec![f32::NAN; n_out];
            let (x, w, b) = (&input[..], &weight[..], Some(&bias[..]));
            // SAFETY: the emulation needs no CPU features.
            unsafe {
                let sc = &mut scratch;
                conv2d_gemm::<Emu<8>, 16>(Emu, &Serial, &p, x, w, b, None, act, sc, &mut got8);
                conv2d_gemm::<Emu<16>, 32>(Emu, &Serial, &p, x, w, b, None, act, sc, &mut got16);
            }
            close(&got8, &want, &std::format!("emu8 {p:?}"));
            close(&got16, &want, &std::format!("emu16 {p:?}"));
        }
    }

    #[test]
    fn vector_activations_match_apply_bit_for_bit() {
        let s = Emu::<8>;
        let xs = [-2.0, -0.0, 0.0, 0.1, 0.3, 7.0, f32::NAN, -f32::INFINITY];
        // The bounds in both orders: `min > max` takes the blend path.
        let acts = [
            Activation::Relu,
            Activation::Clip {
                min: -0.5,
                max: 0.25,
            },
            Activation::Clip {
                min: 0.25,
                max: -0.5,
            },
            Activation::LeakyRelu { alpha: 0.1 },
        ];
        for act in acts {
            let got = act_vec(s, xs, act);
            for (&x, &g) in xs.iter().zip(&got) {
                let want = act.apply(x);
                assert_eq!(
                    g.to_bits(),
                    want.to_bits(),
                    "{act:?}({x}) = {g}, want {want}"
                );
            }
        }
    }
}
