//! The BLIS-structured GEMM driver shared by the AVX2 and AVX-512 kernels: cache blocking,
//! packing into bounded stack buffers, and the loops that hand register tiles to an ISA's
//! micro-kernels.
//!
//! Algorithm sketch (`C[m, n] = epilogue(A[m, k] * B[k, n])`, all row-major):
//!
//! ```text
//! for jc in 0..n step nc:                          // a column panel of B and C (nc: 128
//!                                                  //   or 512, see `panel_cols`)
//!     for pc in 0..k step kc (kc <= KC):           // a depth block
//!         pack B[pc.., jc..] -> panel              // kc x nc: NR-wide micro-panels, an
//!                                                  //   NR/2-wide one if that many columns
//!                                                  //   remain, the rest transposed
//!         for ir in 0..m step MR (tails balanced): // a sliver of A's rows (L1)
//!             sliver = A[ir.., pc..], copied if its rows would collide in cache
//!             for each NR- or NR/2-wide micro-panel:   // streams from L2
//!                 C[ir.., j..] (+)= sliver * micro-panel       // the micro-kernel
//!             C[ir.., rest] (+)= dots of sliver rows and the rest's columns
//! ```
//!
//! Why this shape. The vectors run along `n` (rows of `B` and `C` are contiguous), so `B` is
//! the operand that is packed: an `NR`-wide micro-panel becomes one aligned, contiguous stream
//! whatever `B`'s real layout is (row-major, the transpose of a weight matrix, or an image seen
//! through the im2col map, so a convolution never materialises its im2col matrix). `A` is only
//! broadcast, one element per row and step, so its sliver is read where it lies unless its
//! row stride would put the rows in the same few L1 sets (a multiple of 4 KiB, as in a
//! 1024-wide GEMM); then it is copied to a contiguous buffer first. The sliver is reused from
//! L1 across the whole panel, so re-reading it once per column panel costs little
//! (`1 / (2 nc)` loads per flop) while `A`'s depth block stays in L2; when it does not fit
//! there, the panels are four times wider so that `A` streams from L3 fewer times
//! ([`panel_cols`], with the L2 size from CPUID). Either panel lives on the stack, in a frame
//! sized for the call ([`with_panel`]): at most [`PANEL_LEN`] floats plus the sliver buffer,
//! about 800 KiB in all, no heap. The next sliver's rows are prefetched during the last tiles
//! of the current one ([`NextSliver`]), and the packers prefetch the rows of `B` they will read
//! next: both are streams of short bursts far apart in memory that the hardware prefetchers
//! pick up too late.
//!
//! Tails. Rows: the last `MR + r` rows are split into two nearly equal slivers, so no tile has
//! only one or two rows (too few accumulators to hide the FMA latency). Columns: computing a
//! full `NR`-wide tile for a ragged remainder would waste most of its lanes (a 49-wide output
//! leaves one column in the last tile). If at least `NR / 2` columns remain, `NR / 2` of them
//! form a half-width micro-panel that a tile with one vector per row computes; the last
//! `< NR / 2` are stored transposed, each contiguous in `k`, and the driver computes them as
//! dot products of sliver rows and those columns, vectorised along `k`, which wastes nothing
//! ([`PanelLayout`]).
//!
//! `k` is split into equal blocks of at most `KC`. The first block overwrites `C`, later ones
//! add to it, and only the last applies the epilogue (bias, then a residual operand if there
//! is one, then the activation, with exactly the semantics of [`Activation::apply`]) while the
//! tile is still in registers.

use core::mem::MaybeUninit;

use crate::len::holds_strided;
use crate::Activation;

/// Depth of a packed block (the `k` extent of one micro-kernel call). The sliver, `MR x KC`
/// (9 KiB for AVX2, 18 KiB for AVX-512), stays in L1 while the micro-panels stream from L2.
/// Deeper blocks mean fewer passes over C (each depth block after the first reads C back)
/// and less per-call overhead; measured on Zen 3, 384 beat 256 and 512 (with the panel's
/// size fixed, a deeper block is a narrower panel, and A is copied once per panel). Defined
/// in [`crate::pack`], because pre-packed convolution weights are laid out by it. An `A` that
/// is not pre-packed goes deeper where the L1d allows ([`KC_DEEP`]).
pub(crate) use crate::pack::KC;

/// Columns of the widest packed panel: a multiple of both ISAs' `NR` (16 and 32). With
/// [`KC`], 768 KiB, three quarters of a 1 MiB L2, like BLIS's Zen 4 `MC` (480) for its
/// 32-row micro-panels.
pub(crate) const NC_MAX: usize = 512;

/// Columns of a narrow panel, used when `A`'s depth block fits in half the L2.
const NC_MIN: usize = 128;

/// Floats in the packed-panel stack buffer, 768 KiB. This, the sliver buffer (24 KiB, for
/// [`KC_DEEP`]) and the convolution packer's row (2 KiB) are the whole stack cost of a GEMM,
/// about 800 KiB plus locals: threads that run models need stacks of 1 MiB or more (Rust's
/// default for spawned threads is 2 MiB).
pub(crate) const PANEL_LEN: usize = KC * NC_MAX;

/// Depth of a block of an `A` that is not pre-packed ([`Gemm::a_blocked`] false), on cores
/// whose L1d holds such a sliver in half of it ([`deep_blocks`]).
///
/// Why deeper there. A deeper block is fewer passes over `C` and fewer tile epilogues per
/// flop, and the `A` sliver, copied or read in place, serves more steps per copy; it is held
/// back only by the L1d, which must keep the sliver while the micro-panels stream through.
/// With 48 KiB of L1d a 12 x 512 sliver (24 KiB) fits in half: the kernel bench on AMD EPYC
/// Zen 5 (48 KiB L1d, AVX-512), the two depths in turns in one process, measured 512 over 384
/// at 1.03-1.05x for 512^3, 1.01-1.05x for 1024^3 and 1.01-1.10x for 2048^3
/// (docs/performance.md, "Zen 5 again"). Pre-packed weights keep [`KC`]: their layout is
/// fixed before the CPU is known (at compile time for embedded weights).
const KC_DEEP: usize = 512;

/// Columns of a panel of [`KC_DEEP`]-deep blocks: 512 KiB, half a 1 MiB L2, like the
/// [`KC`]-deep panels of [`NC_MAX`] columns (which at this depth would fill all of it).
const NC_DEEP: usize = 256;

// A deep panel fits the largest stack frame, and deep blocks are deeper.
const _: () = assert!(KC_DEEP * NC_DEEP <= PANEL_LEN && KC_DEEP > KC);

/// Whether `A`'s depth blocks may be [`KC_DEEP`] deep on a core with `l1d` bytes of L1 data
/// cache: the widest sliver (`MR_MAX` rows, 24 KiB) takes at most half of it, so 48 KiB or
/// more (Zen 5, Intel since Ice Lake). Cores with 32 KiB (Zen 3, Zen 4, Intel's before Ice
/// Lake) keep [`KC`], which measured best on Zen 3, for AVX2's 6-row slivers as well.
fn deep_blocks(l1d: usize) -> bool {
    l1d >= 2 * MR_MAX * KC_DEEP * core::mem::size_of::<f32>()
}

/// `(blocks, kc)`: `k` in equal depth blocks of at most [`KC`], or of [`KC_DEEP`] if `A` is
/// not pre-packed and the core has the L1d for it ([`deep_blocks`]); `k = 0` is one empty
/// block.
fn depth_blocks(k: usize, a_blocked: bool) -> (usize, usize) {
    if a_blocked || !deep_blocks(crate::arch::x86_64::cache::l1d_bytes()) {
        return crate::pack::depth_blocks(k);
    }
    let blocks = k.div_ceil(KC_DEEP).max(1);
    (blocks, k.div_ceil(blocks))
}

/// Columns per packed panel for a GEMM with `m` rows and depth blocks of `kc`.
///
/// Every panel reads the whole depth block of `A` (`m x kc`), sliver by sliver. If that block
/// fits in half the L2 it stays there from one panel to the next, and narrow panels cost
/// nothing; they measured as fast or faster on ResNet-50's 56x56 convolutions (AMD EPYC
/// Zen 4). If it does not, every panel streams `A` from L3 again, and wider panels read it
/// fewer times and reuse each sliver across more tiles: GEMM 1024^3 went from 0.87-0.95 to
/// 0.97-0.99 of the `gemm` crate's speed with 512 columns instead of 128, on both ISAs.
///
/// Short, wide products (`kc <= SHORT_KC` and more rows than depth: a 1x1 expansion such as
/// ResNet-50's 64 -> 256 at 56x56, which packs `B`) get wide panels too, though `A` fits: a
/// 64-deep tile is only 64 steps, so what each panel costs besides them (the slivers' loop,
/// the prefetch of the next sliver in the last tile, the panel's own setup) weighs more, and
/// four times as many tiles per sliver spread it thinner (kernel bench, AMD EPYC Zen 4:
/// ResNet-50's 64-256 at 56x56 5-9 % faster with AVX-512, the other expansions within the
/// noise; docs/performance.md, "The blocked GEMM's parameters"). The products that read `B` in place
/// (`m <= k`) keep narrow panels: there they measured the same or slower.
fn panel_cols(m: usize, kc: usize) -> usize {
    /// The deepest block counted as short.
    const SHORT_KC: usize = 128;
    if kc > KC {
        return NC_DEEP;
    }
    let a_block = m
        .saturating_mul(kc)
        .saturating_mul(core::mem::size_of::<f32>());
    if a_block > crate::arch::x86_64::cache::l2_bytes() / 2 || (kc <= SHORT_KC && m > kc) {
        NC_MAX
    } else {
        NC_MIN
    }
}

/// The largest `MR` of any micro-kernel, for the sliver buffer.
const MR_MAX: usize = 12;

/// The stack buffer for one packed panel, aligned to a cache line so every micro-panel row
/// (`NR` floats, a multiple of 64 bytes) starts on one.
#[repr(C, align(64))]
struct PanelBuf<const CAP: usize>([MaybeUninit<f32>; CAP]);

/// The stack buffer for one sliver of `A`.
#[repr(C, align(64))]
struct SliverBuf([f32; MR_MAX * KC_DEEP]);

/// How the epilogue's bias is indexed.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Bias<'a> {
    /// No bias.
    None,
    /// One value per row of `C` (a convolution's output channel).
    Row(&'a [f32]),
    /// One value per column of `C` (a dense layer's output feature).
    Col(&'a [f32]),
}

/// A tile's view of the bias: a pointer to the value for its first row or column.
#[derive(Clone, Copy, Debug)]
pub(crate) enum TileBias {
    None,
    Row(*const f32),
    Col(*const f32),
}

impl TileBias {
    /// The bias of element `(i, j)` of the tile.
    ///
    /// # Safety
    ///
    /// `i` / `j` is inside the tile's rows / columns (the pointer covers them).
    #[inline(always)]
    pub(crate) unsafe fn at(self, i: usize, j: usize) -> f32 {
        // SAFETY: forwarded from the caller.
        unsafe {
            match self {
                TileBias::None => 0.0,
                TileBias::Row(p) => *p.add(i),
                TileBias::Col(p) => *p.add(j),
            }
        }
    }
}

/// One call of a micro-kernel on `rows` rows of `C` and some of its columns, for one depth
/// block, then, on the last block, the epilogue.
#[derive(Debug)]
pub(crate) struct Tile {
    /// Depth of this block (may be 0: then the tile is just the epilogue of zeros).
    pub kc: usize,
    /// The sliver: `A[i, p]` is at `a + i * lda + p`.
    pub a: *const f32,
    pub lda: usize,
    /// If not null, `MR` rows of `A` (at stride `lda_next`, `kc` long) to prefetch for the
    /// next sliver's copy; never read.
    pub a_next: *const f32,
    pub lda_next: usize,
    /// The packed right-hand side. For [`MicroKernel::tile`], an aligned `kc x NR` micro-panel
    /// (`B[p, j]` at `b + p * NR + j`); for [`MicroKernel::dots`], `cols` columns each
    /// contiguous (`B[p, j]` at `b + j * kc + p`); for [`MicroKernel::tile_strided`], `B`
    /// where it lies (`B[p, j]` at `b + p * ldb + j`).
    pub b: *const f32,
    /// Floats between rows of an in-place `B` ([`MicroKernel::tile_strided`] only).
    pub ldb: usize,
    /// Where the rows of an in-place `B` start, if they are not `ldb` apart
    /// ([`MicroKernel::tile_strided`] only): `B[p, j]` at `b + b_rows[p] + j` for `p < kc`;
    /// null otherwise.
    pub b_rows: *const u32,
    /// `C[i, j]` is at `c + i * ldc + j`.
    pub c: *mut f32,
    pub ldc: usize,
    /// `1..=MR` rows of `C`.
    pub rows: usize,
    /// Columns of `C`: `NR` for `tile`, `1..NR` for `dots`.
    pub cols: usize,
    /// Add to `C` (every depth block but the first) instead of overwriting it.
    pub accumulate: bool,
    /// Apply `bias`, `res` and `act` (the last depth block only).
    pub last: bool,
    pub bias: TileBias,
    /// If not null, the residual added after the bias: `R[i, j]` at `res + i * ldc + j`
    /// (laid out as `C`).
    pub res: *const f32,
    pub act: Activation,
}

/// An ISA's register-blocked micro-kernels.
///
/// `NR` is the number of columns of `C` per full tile (vector lanes times vectors per row); it
/// is a parameter of the trait rather than an associated constant so that the packing code
/// can be specialised on it.
pub(crate) trait MicroKernel<const NR: usize> {
    /// Rows of `C` per tile (broadcasts of `A`).
    const MR: usize;

    /// Runs one tile, `C[0..rows, 0..cols] (+)= A * B`, then the epilogue; `cols` is `NR`
    /// (a full micro-panel) or `NR / 2` (the half-width one, rows `NR / 2` floats apart).
    ///
    /// # Safety
    ///
    /// The CPU has the ISA's features, and every pointer in `t` is valid for the elements the
    /// fields say it covers (`rows x kc` of the sliver, `kc x cols` of `B`, `rows x cols` of `C`,
    /// `rows` or `NR` bias values).
    unsafe fn tile(t: &Tile);

    /// Runs the ragged columns: `C[0..rows, 0..cols] (+)= A * B` as dot products, then the
    /// epilogue.
    ///
    /// # Safety
    ///
    /// As for [`tile`](Self::tile), with `B` holding `cols` contiguous columns of `kc` floats
    /// and `cols` columns of `C` (and bias values).
    unsafe fn dots(t: &Tile);

    /// Whether [`tile_strided`](Self::tile_strided) exists.
    const IN_PLACE: bool = false;

    /// [`tile`](Self::tile) with `B` read in place, no packing, `cols` `NR` or `NR / 2`:
    /// `B[p, j]` at `t.b + p * t.ldb + j` (a 1x1 convolution's input), or, if `t.b_rows` is
    /// not null, at `t.b + t.b_rows[p] + j` (a convolution's padded input seen through its
    /// taps, [`super::flat`]).
    ///
    /// # Safety
    ///
    /// As for [`tile`](Self::tile), with `B` valid for `kc` rows of `cols` floats `ldb` apart,
    /// or `t.b_rows` holding `kc` offsets and `B` valid for `cols` floats from each; only
    /// called if [`IN_PLACE`](Self::IN_PLACE).
    unsafe fn tile_strided(_t: &Tile) {
        unreachable!("tile_strided without IN_PLACE")
    }

    /// [`gemm_part_in`] for this micro-kernel. An ISA overrides it with a call into a
    /// `#[target_feature]` function, so that the body, called through [`with_panel`]'s
    /// closure (closures do not inherit the caller's features), still gets packers compiled
    /// for the ISA's vectors.
    ///
    /// # Safety
    ///
    /// As for [`gemm_part_in`].
    #[inline(always)]
    unsafe fn part<B: PackB>(g: &Shared<'_>, b: &B, task: usize, split: Split, panel: &mut [f32])
    where
        Self: Sized,
    {
        // SAFETY: forwarded from the caller.
        unsafe { gemm_part_in::<Self, NR, B>(g, b, task, split, panel) }
    }
}

/// How the `nc` columns of a `kc x nc` panel are packed: `full` micro-panels of `NR` columns
/// (`dst[q * kc * NR + p * NR + j]`), then, if `NR >= 32` and at least `NR / 2` columns
/// remain, one
/// half-width micro-panel of `half = NR / 2` columns (`dst[full * kc * NR + p * half + j]`),
/// then the last `rest < NR / 2` columns transposed, each contiguous in `k`
/// (`dst[full * kc * NR + half * kc + j * kc + p]`).
///
/// The half-width micro-panel runs as a tile with one vector per row rather than as `NR / 2`
/// dot products: a 7x7 output plane (49 columns) leaves 17 after one 32-wide tile, which as
/// dot products made the AVX-512 7x7 layers the slowest of ResNet-50.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PanelLayout {
    pub full: usize,
    /// `NR / 2` if the panel has a half-width micro-panel, else 0.
    pub half: usize,
    pub rest: usize,
}

impl PanelLayout {
    #[inline(always)]
    pub(crate) const fn new<const NR: usize>(nc: usize) -> Self {
        let full = nc / NR;
        let tail = nc % NR;
        // Only the 32-wide AVX-512 panel has one: AVX2's half tile (6 x 8) would have six
        // accumulators, too few to cover the FMA latency, against dot products that waste
        // nothing.
        let half = if NR >= 32 && tail >= NR / 2 {
            NR / 2
        } else {
            0
        };
        PanelLayout {
            full,
            half,
            rest: tail - half,
        }
    }

    /// Where packed element `(p, jj)` of a `kc`-deep panel lives.
    #[inline(always)]
    pub(crate) const fn at<const NR: usize>(self, kc: usize, p: usize, jj: usize) -> usize {
        let body = self.full * NR;
        if jj < body {
            (jj / NR) * kc * NR + p * NR + jj % NR
        } else if jj < body + self.half {
            body * kc + p * self.half + (jj - body)
        } else {
            body * kc + self.half * kc + (jj - body - self.half) * kc + p
        }
    }
}

/// Writes one row `p` (`row`, `nc` values) of a `kc x nc` panel into the packed layout
/// ([`PanelLayout`]).
///
/// Panics unless `p < kc` and `dst` holds the panel ([`packed_len`]`(kc, nc)` floats): one
/// check for the row, then raw copies. Indexing every micro-panel's piece instead cost
/// 17 instructions per 16 floats (two bounds checks, the offsets reloaded from the stack);
/// on short products, whose panels serve few steps of the tile, that was a third of the
/// instructions outside the tile (callgrind, MobileNet-v2's 32 -> 16 at 112x112, AMD EPYC
/// Zen 3).
#[inline(always)]
pub(crate) fn scatter_row<const NR: usize>(row: &[f32], p: usize, kc: usize, dst: &mut [f32]) {
    let nc = row.len();
    assert!(
        p < kc && kc.checked_mul(nc).is_some_and(|len| dst.len() >= len),
        "scatter_row: row {p} outside a {kc} x {nc} panel of {} floats",
        dst.len()
    );
    let l = PanelLayout::new::<NR>(nc);
    let (src, d) = (row.as_ptr(), dst.as_mut_ptr());
    // SAFETY: every write below is inside the `kc x nc` layout (checked above): piece `q <
    // full` ends at `q kc NR + p NR + NR <= full kc NR`; the half-width piece at `full kc NR
    // + (p + 1) NR / 2 <= full kc NR + kc half`; rest column `j` at `full kc NR + half kc +
    // j kc + p < kc nc`. The reads are the row's `nc` floats in order.
    unsafe {
        let mut at = d.add(p * NR);
        for q in 0..l.full {
            core::ptr::copy_nonoverlapping(src.add(q * NR), at, NR);
            at = at.add(kc * NR);
        }
        let base = l.full * kc * NR;
        // `half` is `NR / 2` or 0: a copy of a length known at compile time, a few vector
        // moves rather than a `memcpy` call on every row (most often of nothing).
        if l.half > 0 {
            core::ptr::copy_nonoverlapping(src.add(l.full * NR), d.add(base + p * l.half), NR / 2);
        }
        let base = base + l.half * kc + p;
        for j in 0..l.rest {
            *d.add(base + j * kc) = *src.add(l.full * NR + l.half + j);
        }
    }
}

/// Hints that the cache line at `p` will be read soon.
#[inline(always)]
pub(crate) fn prefetch(p: *const f32) {
    // SAFETY: SSE is part of the x86_64 baseline, and a prefetch never faults, whatever the
    // address.
    unsafe { core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast()) }
}

/// [`prefetch`]es each cache line of the `len` floats from `p` (one per 16 floats; any
/// address is harmless).
#[inline(always)]
pub(crate) fn prefetch_run(p: *const f32, len: usize) {
    for l in (0..len).step_by(16) {
        prefetch(p.wrapping_add(l));
    }
}

/// Length of the packed layout of a `kc x nc` panel.
#[inline(always)]
pub(crate) const fn packed_len(kc: usize, nc: usize) -> usize {
    kc * nc
}

/// A source of the right-hand matrix `B[k, n]` that knows how to pack itself.
pub(crate) trait PackB {
    /// Writes `B[pc..pc + kc, jc..jc + nc]` into `dst` (exactly [`packed_len`] long) in the
    /// layout of [`scatter_row`].
    fn pack<const NR: usize>(&self, pc: usize, kc: usize, jc: usize, nc: usize, dst: &mut [f32]);

    /// `B` as rows the micro-kernel can read where they lie, if it is stored so and reading
    /// it in place pays, valid for `k` rows of `n` floats.
    fn in_place(&self, _k: usize, _n: usize) -> Option<InPlace<'_>> {
        None
    }
}

/// `B` read where it lies: `B[p, j]` at `b + rows.start(p) + j`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct InPlace<'a> {
    pub b: *const f32,
    pub rows: BRows<'a>,
}

/// Where the rows of an in-place `B` start.
#[derive(Clone, Copy, Debug)]
pub(crate) enum BRows<'a> {
    /// Row `p` at `p * ldb` (a 1x1 convolution's input, one image plane per row).
    Stride(usize),
    /// Row `p` at `table[p]` (a convolution's zero-padded input through its taps).
    Table(&'a [u32]),
}

impl BRows<'_> {
    /// The offset of row `p` from `B[0, 0]`, in floats.
    #[inline(always)]
    fn start(self, p: usize) -> usize {
        match self {
            BRows::Stride(ldb) => p * ldb,
            BRows::Table(t) => t[p] as usize,
        }
    }
}

/// `B` stored row-major: `B[p, j] = data[p * ld + j]` (a plain GEMM, a 1x1 convolution).
#[derive(Debug)]
pub(crate) struct RowMajor<'a> {
    pub data: &'a [f32],
    pub ld: usize,
    /// Offer `B` to be read in place ([`PackB::in_place`]): a 1x1 convolution's input.
    pub in_place: bool,
}

impl PackB for RowMajor<'_> {
    #[inline(always)]
    fn pack<const NR: usize>(&self, pc: usize, kc: usize, jc: usize, nc: usize, dst: &mut [f32]) {
        // Row by row of B. The rows are far apart (a whole image plane for a 1x1
        // convolution), so each is a short burst the hardware prefetcher barely notices:
        // fetch a few rows ahead by hand.
        const AHEAD: usize = 6;
        for p in 0..kc {
            if p + AHEAD < kc {
                prefetch_run(
                    self.data[(pc + p + AHEAD) * self.ld + jc..][..nc].as_ptr(),
                    nc,
                );
            }
            scatter_row::<NR>(&self.data[(pc + p) * self.ld + jc..][..nc], p, kc, dst);
        }
    }

    fn in_place(&self, k: usize, n: usize) -> Option<InPlace<'_>> {
        // A real check: the micro-kernel reads through the pointer.
        (self.in_place && self.ld >= n && holds_strided(self.data.len(), k, self.ld, n)).then_some(
            InPlace {
                b: self.data.as_ptr(),
                rows: BRows::Stride(self.ld),
            },
        )
    }
}

/// `B` stored transposed: `B[p, j] = data[j * ld + p]` (a dense layer's `[n_out, n_in]`
/// weights used as the right-hand side).
#[derive(Debug)]
pub(crate) struct ColMajor<'a> {
    pub data: &'a [f32],
    pub ld: usize,
}

impl PackB for ColMajor<'_> {
    #[inline(always)]
    fn pack<const NR: usize>(&self, pc: usize, kc: usize, jc: usize, nc: usize, dst: &mut [f32]) {
        let l = PanelLayout::new::<NR>(nc);
        // Full and half-width micro-panels: column by column of B (a contiguous row of the
        // weights), scattered down the panel.
        for jj in 0..l.full * NR + l.half {
            let (start, width, j) = if jj < l.full * NR {
                ((jj / NR) * kc * NR, NR, jj % NR)
            } else {
                (l.full * kc * NR, l.half, jj - l.full * NR)
            };
            let src = &self.data[(jc + jj) * self.ld + pc..][..kc];
            let panel = &mut dst[start..][..kc * width];
            for (row, &x) in panel.chunks_exact_mut(width).zip(src) {
                row[j] = x;
            }
        }
        // The rest is stored transposed, which for this source is a plain copy.
        let base = l.full * kc * NR + l.half * kc;
        for j in 0..l.rest {
            let jj = l.full * NR + l.half + j;
            dst[base + j * kc..][..kc]
                .copy_from_slice(&self.data[(jc + jj) * self.ld + pc..][..kc]);
        }
    }
}

/// The operands of one GEMM call.
#[derive(Debug)]
pub(crate) struct Gemm<'a> {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// `A[i, p] = a[i * lda + p]`, or, if `a_blocked`, `A` in
    /// [`WeightLayout::DepthBlocked`](crate::pack::WeightLayout) (`lda` is then `k`): depth
    /// block `pc..pc + kc` is `m` rows of `kc` floats from `a[m * pc]`, so a sliver is read
    /// in place, contiguously, and never copied.
    pub a: &'a [f32],
    pub lda: usize,
    pub a_blocked: bool,
    /// `C[i, j] = c[i * ldc + j]`.
    pub c: &'a mut [f32],
    pub ldc: usize,
    pub bias: Bias<'a>,
    /// A residual added in the epilogue, after the bias and before the activation, laid out
    /// as `C` (`R[i, j] = res[i * ldc + j]`).
    pub res: Option<&'a [f32]>,
    pub act: Activation,
}

/// Rows of the sliver starting at row `ir` of `m`: `mr`, except that the last `mr + r`
/// rows (`0 < r < mr`) are split into two nearly equal slivers.
#[inline(always)]
fn sliver_rows(m: usize, ir: usize, mr: usize) -> usize {
    let left = m - ir;
    if left >= 2 * mr || left <= mr {
        left.min(mr)
    } else {
        left.div_ceil(2)
    }
}

/// Whether `mr` rows of `A` at stride `lda` floats would crowd into the same L1 sets (more
/// than half of the 8 ways of one set) if used in place. The micro-kernel walks the rows in
/// step: at depth `p` it reads line `p / 16` of every row, and row `r`'s lines sit in sets
/// `(r * lda / 16 + p / 16) % 64`, so rows collide when they *start* in the same set — a row
/// stride that is a multiple of 4 KiB puts all of them there, 2 KiB half of them. Most strides
/// (`c_in * 9`, `c_in`, a Winograd filter's `c_in`) spread the rows out and are read where they
/// lie. (Counting every line of a whole `KC` block instead, as this once did, crowds 12 rows
/// x 24 lines into 64 sets whatever the stride: every AVX-512 call copied its A slivers, 6 %
/// of Inception-v2 in `memcpy`.)
fn rows_collide(lda: usize, mr: usize) -> bool {
    // 64 sets of 64-byte lines: set = (byte address / 64) % 64.
    let mut starts = [0u8; 64];
    for r in 0..mr {
        starts[(r * lda / 16) % 64] += 1;
    }
    starts.iter().any(|&o| o > 4)
}

/// Runs the blocked GEMM with micro-kernel `K`.
///
/// Panics if a slice is too short for its dimensions (so the raw pointers handed to the
/// micro-kernel are in bounds).
///
/// # Safety
///
/// The CPU has every feature `K` needs. The function is `inline(always)` so that it is
/// compiled inside the caller's `#[target_feature]` function.
#[inline(always)]
pub(crate) unsafe fn gemm<K: MicroKernel<NR>, const NR: usize, B: PackB>(g: Gemm<'_>, b: &B) {
    // SAFETY: forwarded from the caller; the only task is the whole product.
    unsafe { gemm_part::<K, NR, B>(&Shared::from(g), b, 0, Split::ONE) }
}

/// The blocked GEMM with micro-kernel `K`, its output split among `par`'s threads when it is
/// large enough to pay for waking them ([`crate::par::worth_splitting`]); else [`gemm`].
///
/// # Safety
///
/// As for [`gemm`].
#[inline(always)]
pub(crate) unsafe fn gemm_par<K: MicroKernel<NR>, const NR: usize, B: PackB + Sync>(
    par: &dyn crate::par::Parallel,
    g: Gemm<'_>,
    b: &B,
) {
    let fmas = g.m.saturating_mul(g.n).saturating_mul(g.k);
    if !crate::par::worth_splitting(par, fmas) {
        // SAFETY: forwarded from the caller.
        return unsafe { gemm::<K, NR, B>(g, b) };
    }
    let split = Split::new(g.m, g.n, g.k, g.a_blocked, K::MR, par.threads());
    let shared = Shared::from(g);
    par.run(split.tasks(), &|task| {
        // SAFETY: the caller guarantees the CPU features; `Parallel` runs each task once, and
        // different tasks own disjoint parts of `C`.
        unsafe { gemm_part::<K, NR, B>(&shared, b, task, split) }
    });
}

/// A [`Gemm`] whose `C` the tasks of a parallel run share: each writes only its own part
/// ([`Split`]), through raw pointers, as the serial driver always did.
#[derive(Debug)]
pub(crate) struct Shared<'a> {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: &'a [f32],
    pub lda: usize,
    pub a_blocked: bool,
    pub c: crate::par::SharedMut<'a>,
    pub ldc: usize,
    pub bias: Bias<'a>,
    pub res: Option<&'a [f32]>,
    pub act: Activation,
}

impl<'a> From<Gemm<'a>> for Shared<'a> {
    fn from(g: Gemm<'a>) -> Self {
        Shared {
            m: g.m,
            n: g.n,
            k: g.k,
            a: g.a,
            lda: g.lda,
            a_blocked: g.a_blocked,
            c: crate::par::SharedMut::new(g.c),
            ldc: g.ldc,
            bias: g.bias,
            res: g.res,
            act: g.act,
        }
    }
}

/// How a GEMM's `C` is cut into tasks for several threads: `cols` runs of whole panels (of
/// [`panel_cols`] columns) times `rows` runs of whole slivers. Columns are cut first, since a column part packs
/// only its own panels of `B`; rows only when there are too few panels (a 7x7 map is one),
/// and each row part then packs the same panels again. Every element of `C` is computed by
/// the same micro-kernel steps as in one piece, so the result is the same to the bit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Split {
    pub rows: usize,
    pub cols: usize,
}

impl Split {
    /// One task: the whole product.
    pub(crate) const ONE: Split = Split { rows: 1, cols: 1 };

    /// Up to four column parts per thread (claimed dynamically, so unequal parts even out),
    /// for an `m x n x k` product with `mr`-row slivers. Row parts only when there are fewer
    /// than two column parts per thread: each row part packs the same panels of `B` again (on
    /// ResNet-50's 14x14 and 7x7 layers that repacking was the larger part of what a second
    /// thread lost), so with one panel there is one row part per thread (each thread packs the
    /// panel once, as one thread would; four parts packed it twice per thread), and with two
    /// or three panels as many as make two tasks per thread. Finer column parts did not pay:
    /// with the machine to itself a worker enters a job within a microsecond or two and the
    /// two threads idle 0-4 % of a job (`Threads::stats`; up to sixteen parts per thread
    /// measured the same as four), so there is little tail to shorten and per-part costs to
    /// add.
    pub(crate) fn new(
        m: usize,
        n: usize,
        k: usize,
        a_blocked: bool,
        mr: usize,
        threads: usize,
    ) -> Split {
        if threads <= 1 {
            return Split::ONE;
        }
        let panel_nc = panel_cols(m, depth_blocks(k, a_blocked).1);
        let cols = n.div_ceil(panel_nc).clamp(1, 4 * threads);
        let enough = 2 * threads;
        // Only the last row part holds the rows' ragged tail, and it keeps at least two
        // slivers to balance it when there are fewer parts than slivers (it gets
        // `ceil(slivers / rows)`); the other parts are whole slivers. So one panel splits into
        // up to `slivers - 1` parts: three slivers (25-36 rows, DenseNet-121's 32-channel 3x3
        // layers on 7x7 maps) into 12 | 10 + 10 rows, where they used to stay on one thread.
        let slivers = m.div_ceil(mr);
        let rows = if cols >= enough {
            1
        } else if cols == 1 {
            threads.min(slivers.saturating_sub(1).max(1))
        } else {
            enough.div_ceil(cols).min((m.div_ceil(mr) / 2).max(1))
        };
        Split { rows, cols }
    }

    pub(crate) fn tasks(self) -> usize {
        self.rows * self.cols
    }
}

/// Task `task` of [`Split`] `split` of the blocked GEMM with micro-kernel `K`: the rows and
/// column panels of `C` that task owns. [`gemm`] is the one task of [`Split::ONE`].
///
/// Panics if a slice is too short for its dimensions (so the raw pointers handed to the
/// micro-kernel are in bounds).
///
/// # Safety
///
/// The CPU has every feature `K` needs, and no other task of the same `g` runs with the same
/// `task` at the same time (different tasks write disjoint parts of `C`). `inline(always)`, so
/// that it is compiled inside the caller's `#[target_feature]` function.
#[inline(always)]
pub(crate) unsafe fn gemm_part<K: MicroKernel<NR>, const NR: usize, B: PackB>(
    g: &Shared<'_>,
    b: &B,
    task: usize,
    split: Split,
) {
    let kc_step = depth_blocks(g.k, g.a_blocked).1;
    let used = if reads_in_place::<K, NR, B>(g, b).is_some() {
        0
    } else {
        packed_len(kc_step, panel_cols(g.m, kc_step).min(g.n))
    };
    // SAFETY: forwarded from the caller; `with_panel` hands over `used` floats, what
    // `gemm_part_in` needs.
    with_panel(used, &mut |panel| unsafe {
        K::part(g, b, task, split, panel)
    });
}

/// Which tiles on a sliver prefetch the next sliver ([`Tile::a_next`]), and which part each.
///
/// The last full tile (or the ragged part, if there is no full tile) fetches it all, unless
/// `A` is blocked: then the next sliver is one contiguous run of `MR * kc` floats, and the
/// last [`NextSliver::SPREAD`] tiles each fetch a `1 / spread` part of it. In a network the
/// weights come from memory once per run, and one tile's burst of a whole blocked sliver
/// (18 KiB) was more than the fill buffers could hold in flight: 10-14 % of ResNet-50's tile
/// samples sat on those prefetches. Spread over four tiles (and with C prefetched only where
/// it is loaded, [`prefetch_c`](super::kern::prefetch_c)), ResNet-50 ran in 0.954 of the time (Intel Xeon,
/// family 6 model 207, pinned A/B of whole runs). The in-place products
/// ([`in_place_part`]) spread the same way; there it measured neutral (MobileNet-v2 1.003,
/// ShuffleNet-v2 0.990, whose slivers are few and short).
#[derive(Clone, Copy, Debug)]
struct NextSliver {
    /// Full tiles on the sliver, or 1 (the ragged part).
    fetchers: usize,
    spread: usize,
    /// Floats of the blocked next sliver each fetching tile covers.
    part: usize,
    mr: usize,
}

impl NextSliver {
    /// At most this many tiles share the prefetch of a blocked sliver.
    const SPREAD: usize = 4;

    fn new(tiles: usize, blocked: bool, mr: usize, kc: usize) -> NextSliver {
        let fetchers = tiles.max(1);
        let spread = if blocked {
            fetchers.min(Self::SPREAD)
        } else {
            1
        };
        NextSliver {
            fetchers,
            spread,
            part: (mr * kc).div_ceil(spread),
            mr,
        }
    }

    /// `(a_next, lda_next)` for call `q` on the sliver, `next` being the next sliver's start
    /// and row stride (`kc` if blocked), if there is one; null if `q` fetches nothing.
    ///
    /// A tile prefetches `MR` rows of `kc` floats `lda_next` apart; for a part of a blocked
    /// sliver those are `MR` overlapping pieces of the part, so that it is covered (`spread`
    /// prefetches per line, the extra ones hitting lines already on their way).
    fn part(&self, q: usize, next: Option<(*const f32, usize)>) -> (*const f32, usize) {
        let Some((next, lda)) = next else {
            return (core::ptr::null(), 0);
        };
        if q >= self.fetchers || q + self.spread < self.fetchers {
            return (core::ptr::null(), 0);
        }
        if self.spread == 1 {
            return (next, lda);
        }
        let s = q + self.spread - self.fetchers;
        (
            next.wrapping_add(s * self.part),
            self.part.div_ceil(self.mr),
        )
    }
}

/// `B`'s address and row stride if the product reads it in place ([`in_place_part`]).
///
/// Only when `A` has no more rows than the depth: a projection (`k -> m < k`) reuses each
/// packed panel over few slivers, so packing was a large part of its time, and reading `B`
/// in place measured 2-14 % faster (MobileNet-v2's projections, AMD EPYC Zen 4); an
/// expansion (`m > k`, a short reduction over many slivers) measured up to 20 % slower in
/// place.
///
/// With AVX2 (`NR` = 16) only when `A` has at most [`NARROW_IN_PLACE_SLIVERS`] slivers of 6
/// rows. The 6 x 16 tile reads 64 bytes of each row, and with more slivers a panel's rows,
/// a plane apart, served each of them from L2 at a latency the packed micro-panels do not
/// have. Kernel bench on AMD EPYC Zen 3 (family 25 model 1), packed against in place, of
/// peak, medians of four alternating runs, warm / with the operands in memory
/// (`KILN_BENCH_COLD=1`): the 16-row projections MobileNet-v2's 32 -> 16 at 112x112 0.48 /
/// 0.28 against 0.54 / 0.35, SqueezeNet's 96 -> 16 at 54x54 0.57 / 0.29 against 0.62 / 0.34,
/// 128 -> 16 0.59 / 0.31 against 0.62 / 0.35; but 24 rows (96 -> 24 at 56x56) 0.64 / 0.38
/// against 0.50 / 0.38, and deeper or wider projections up to 0.4 of peak lower in place
/// (MobileNet-v2's 576 -> 96 at 14x14 0.84 against 0.59, DenseNet-121's 320 -> 128 at 28x28
/// 0.87 against 0.45). Running the in-place tiles column by column instead, each column
/// through all the slivers with the next column prefetched, was slower still when `A` fit L1
/// (144 -> 24 at 56x56 0.44 -> 0.36 from memory).
///
/// On a core that runs 512-bit FMAs at full width
/// ([`cache::full_width_512`](crate::arch::x86_64::cache::full_width_512): Intel's, AMD's
/// from Zen 5 on) also only when `A` has fewer than [`WIDE_IN_PLACE_ROWS`] rows, and fewer
/// than [`WIDE_SPAN_ROWS`] if a depth block of `B` read at its stride spans more than the
/// L2. There the tile does its FMAs twice as fast as on Zen 4, and the in-place loop's rows,
/// a plane apart, each on its own page, cost more than packing once the panel is reused by
/// enough slivers. Kernel bench, in place against packed, of peak, Intel Xeon (family 6 model
/// 207): DenseNet-121's 224 -> 128 at 56x56 0.50 / 0.66, 512 -> 256 at 28x28 0.59 / 0.78,
/// ResNet-50's 2048 -> 512 at 7x7 0.64 / 0.71, its 256 -> 64 at 56x56, whose 256 rows span
/// 3.2 MB, 0.50 / 0.59; but MobileNet-v2's 144 -> 32 at 28x28 0.73 / 0.56, 384 -> 64 at
/// 14x14 0.72 / 0.62. AMD EPYC Zen 5 (family 26 model 2, 1 MiB L2; both in turns in one
/// run): packed over in place 1.03-1.12x for 128 or more rows (ResNet-50's 512 -> 128 at
/// 28x28 1.11, 2048 -> 512 at 7x7 1.12, MobileNet-v2's 960 -> 320 at 7x7 1.11, DenseNet-121's
/// 480 -> 128 at 28x28 1.07) and for 64 rows over a span beyond the L2 (ResNet-50's 256 -> 64
/// at 56x56 1.11, SqueezeNet's 384 -> 64 at 27x27 1.04), but 0.85-0.95x for fewer rows over
/// such spans (MobileNet-v2's 32 -> 16 at 112x112 0.88, 144 -> 24 at 56x56 0.89,
/// SqueezeNet's 128 -> 16 and 128 -> 32 at 54x54 0.85 / 0.95): two to four slivers do not
/// repay a packed panel.
#[inline(always)]
fn reads_in_place<'b, K: MicroKernel<NR>, const NR: usize, B: PackB>(
    g: &Shared<'_>,
    b: &'b B,
) -> Option<InPlace<'b>> {
    use crate::arch::x86_64::cache;
    if !K::IN_PLACE || g.m > g.k || (NR == 16 && g.m > NARROW_IN_PLACE_SLIVERS * K::MR) {
        return None;
    }
    let ib = b.in_place(g.k, g.n)?;
    if g.m >= WIDE_SPAN_ROWS && cache::full_width_512() {
        let kc = crate::pack::depth_blocks(g.k).1;
        let span = match ib.rows {
            BRows::Stride(ldb) => kc.saturating_mul(ldb).saturating_mul(4),
            BRows::Table(_) => 0,
        };
        if g.m >= WIDE_IN_PLACE_ROWS || span > cache::l2_bytes() {
            return None;
        }
    }
    Some(ib)
}

/// See [`reads_in_place`].
const NARROW_IN_PLACE_SLIVERS: usize = 3;

/// See [`reads_in_place`].
const WIDE_IN_PLACE_ROWS: usize = 128;

/// See [`reads_in_place`].
const WIDE_SPAN_ROWS: usize = 64;

/// [`gemm_part`] with its packed-panel buffer: at least [`packed_len`]`(kc, nc)` floats for
/// the call's depth block `kc` and panel width `nc` (checked).
///
/// # Safety
///
/// As for [`gemm_part`].
#[inline(always)]
pub(crate) unsafe fn gemm_part_in<K: MicroKernel<NR>, const NR: usize, B: PackB>(
    g: &Shared<'_>,
    b: &B,
    task: usize,
    split: Split,
    panel_all: &mut [f32],
) {
    let Shared {
        m,
        n,
        k,
        a,
        lda,
        a_blocked,
        ref c,
        ldc,
        bias,
        res,
        act,
    } = *g;
    if m == 0 || n == 0 {
        return;
    }
    // Real checks, not debug ones: the micro-kernels work on raw pointers derived from these.
    assert!(
        lda >= k && holds_strided(a.len(), m, lda, k),
        "gemm: a too short"
    );
    assert!(
        ldc >= n && holds_strided(c.len(), m, ldc, n),
        "gemm: c too short"
    );
    assert!(
        res.is_none_or(|r| holds_strided(r.len(), m, ldc, n)),
        "gemm: residual too short"
    );
    match bias {
        Bias::None => {}
        Bias::Row(v) => assert!(v.len() >= m, "gemm: bias too short"),
        Bias::Col(v) => assert!(v.len() >= n, "gemm: bias too short"),
    }
    let mr = K::MR;
    assert!(mr <= MR_MAX && NC_MAX.is_multiple_of(NR) && NC_MIN.is_multiple_of(NR));

    // Equal depth blocks of at most KC (or KC_DEEP); k = 0 still runs one (empty) block so
    // that C gets its zeros and epilogue.
    let (blocks, kc_step) = depth_blocks(k, a_blocked);
    let panel_nc = panel_cols(m, kc_step);
    // This task's rows `row0..m_end` and columns `jc..n_end` (whole slivers, whole panels;
    // `Split::new` counted panels of the same width).
    let (slivers, panels) = (m.div_ceil(mr), n.div_ceil(panel_nc));
    let (rp, cp) = (task / split.cols, task % split.cols);
    let row0 = (slivers * rp / split.rows * mr).min(m);
    let m_end = (slivers * (rp + 1) / split.rows * mr).min(m);
    let n_end = (panels * (cp + 1) / split.cols * panel_nc).min(n);

    if let Some(ib) = reads_in_place::<K, NR, B>(g, b) {
        let rows = row0..m_end;
        let first = (panels * cp / split.cols * panel_nc).min(n);
        // SAFETY: forwarded from the caller; `in_place` checked `B`'s extent, the other
        // operands were checked above.
        unsafe { in_place_part::<K, NR>(g, ib, rows, first..n_end, panel_nc) };
        return;
    }
    assert!(
        panel_all.len() >= packed_len(kc_step, panel_nc.min(n)),
        "gemm: panel buffer too short"
    );
    // The blocked layout's slivers are contiguous already (and `lda == k`, checked above, so
    // `a` holds `m * k` floats).
    let copy_a = !a_blocked && rows_collide(lda, mr);
    assert!(!a_blocked || lda == k, "gemm: blocked a needs lda == k");
    let a_ptr = a.as_ptr();
    let c_ptr = c.as_ptr();
    // The sliver buffer is initialised (zeroed) only when `A` is copied at all.
    let mut sliver_buf = MaybeUninit::<SliverBuf>::uninit();
    let sliver: &mut [f32] = if copy_a {
        // Only the floats a sliver copy writes (`mr` rows of at most `kc_step`).
        let len = mr * kc_step;
        assert!(len <= MR_MAX * KC_DEEP);
        // SAFETY: the buffer holds `len` floats (checked); zeroing them makes the slice
        // initialised.
        unsafe {
            let p = sliver_buf.as_mut_ptr().cast::<f32>();
            core::ptr::write_bytes(p, 0, len);
            core::slice::from_raw_parts_mut(p, len)
        }
    } else {
        &mut []
    };

    let mut jc = (panels * cp / split.cols * panel_nc).min(n);
    while jc < n_end {
        let nc = panel_nc.min(n_end - jc);
        let l = PanelLayout::new::<NR>(nc);
        // Full tiles, the half-width tile, then the rest as dot products.
        let tiles = l.full + usize::from(l.half > 0);
        for blk in 0..blocks {
            let pc = blk * kc_step;
            let kc = kc_step.min(k - pc);
            let panel = &mut panel_all[..packed_len(kc, nc)];
            b.pack::<NR>(pc, kc, jc, nc, panel);
            let panel = panel.as_ptr();
            let mut ir = row0;
            while ir < m_end {
                let rows = sliver_rows(m_end, ir, mr);
                let (sliver_ptr, sliver_ld) = if a_blocked {
                    (a_ptr.wrapping_add(m * pc + ir * kc), kc)
                } else if copy_a {
                    for r in 0..rows {
                        sliver[r * kc..][..kc].copy_from_slice(&a[(ir + r) * lda + pc..][..kc]);
                    }
                    (sliver.as_ptr(), kc)
                } else {
                    (a_ptr.wrapping_add(ir * lda + pc), lda)
                };
                let next = ir + rows;
                let calls = tiles + usize::from(l.rest > 0);
                let fetch = NextSliver::new(tiles, a_blocked, mr, kc);
                let next_sliver = (next < m_end).then(|| {
                    if a_blocked {
                        (a_ptr.wrapping_add(m * pc + next * kc), kc)
                    } else {
                        (a_ptr.wrapping_add(next * lda + pc), lda)
                    }
                });
                for q in 0..calls {
                    let (j, b_at, cols) = if q < l.full {
                        (jc + q * NR, q * kc * NR, NR)
                    } else if q < tiles {
                        (jc + l.full * NR, l.full * kc * NR, l.half)
                    } else {
                        let done = l.full * NR + l.half;
                        (jc + done, done * kc, l.rest)
                    };
                    let (a_next, lda_next) = fetch.part(q, next_sliver);
                    let t = Tile {
                        kc,
                        a: sliver_ptr,
                        lda: sliver_ld,
                        a_next,
                        lda_next,
                        b: panel.wrapping_add(b_at),
                        ldb: 0,
                        b_rows: core::ptr::null(),
                        c: c_ptr.wrapping_add(ir * ldc + j),
                        ldc,
                        rows,
                        cols,
                        accumulate: blk > 0,
                        last: blk + 1 == blocks,
                        bias: match bias {
                            Bias::Row(v) => TileBias::Row(v[ir..].as_ptr()),
                            Bias::Col(v) => TileBias::Col(v[j..].as_ptr()),
                            Bias::None => TileBias::None,
                        },
                        res: res.map_or(core::ptr::null(), |r| r[ir * ldc + j..].as_ptr()),
                        act,
                    };
                    // SAFETY: the caller guarantees the CPU features. The sliver holds
                    // `rows x kc` floats at stride `sliver_ld` (the copy, or rows
                    // `ir..ir + rows`, columns `pc..pc + kc` of A, checked above); rows
                    // `ir..ir + rows` and columns `j..j + cols` of C are inside the slice
                    // checked above; the micro-panel (`kc x cols`) or the rest (`rest x kc`)
                    // is inside `panel` (`PanelLayout`); the bias slices were checked to cover m / n, the residual as C. `a_next` is
                    // only prefetched.
                    unsafe {
                        if q < tiles {
                            K::tile(&t);
                        } else {
                            K::dots(&t);
                        }
                    }
                }
                ir = next;
            }
        }
        jc += nc;
    }
}

/// Smallest stack buffer for a packed panel: 64 KiB, enough for the Winograd products'
/// panels (`k` = the input channels, at most 128 columns) and most small maps' 1x1 convs.
const PANEL_SMALL: usize = 16 * 1024;

/// Runs `body` on a zeroed stack buffer of `used` floats (at most [`PANEL_LEN`]), in a frame
/// sized for it. Only the prefix the call's panels use is initialised, once: every packer
/// overwrites all of its panel, so no stale value is ever read.
///
/// Why three frames. With one frame of [`PANEL_LEN`] floats for every call, the stack probe
/// touched each of its 192 pages on entry, which cost more than most small GEMMs' packing (a
/// third of `gemm_compiled`'s samples on DenseNet-121, whose Winograd products call the GEMM
/// 36 times per block). A call takes the smallest of three frames that fits; each capacity is
/// a const parameter of a separate, never inlined function, since one frame holding the three
/// buffers (LLVM gives them one slot) would be probed for the largest.
#[inline(never)]
fn with_panel(used: usize, body: &mut dyn FnMut(&mut [f32])) {
    const NARROW: usize = KC * NC_MIN;
    if used == 0 {
        // Nothing packed (`B` read in place, or `k = 0`).
        body(&mut []);
    } else if used <= PANEL_SMALL {
        in_panel::<PANEL_SMALL>(used, body);
    } else if used <= NARROW {
        in_panel::<NARROW>(used, body);
    } else {
        in_panel::<PANEL_LEN>(used, body);
    }
}

/// [`with_panel`] with a buffer of `CAP` floats.
#[inline(never)]
fn in_panel<const CAP: usize>(used: usize, body: &mut dyn FnMut(&mut [f32])) {
    assert!(used <= CAP, "gemm: panel larger than its buffer");
    let mut buf = MaybeUninit::<PanelBuf<CAP>>::uninit();
    // SAFETY: `used <= CAP` floats fit the buffer; zeroing them makes the slice initialised,
    // so the safe packing code can write through it.
    let panel = unsafe {
        let p = buf.as_mut_ptr().cast::<f32>();
        core::ptr::write_bytes(p, 0, used);
        core::slice::from_raw_parts_mut(p, used)
    };
    body(panel);
}

/// [`gemm_part_in`] with `B` read where it lies (`B[p, j]` at `b + rows.start(p) + j`, valid
/// for `k x n`): no panel is packed, and each full or half-width tile reads its rows of `B`
/// straight from the input ([`MicroKernel::tile_strided`], rows a stride apart or through a
/// table). Only the last `< NR / 2` columns
/// of a panel ([`PanelLayout::rest`]) are copied, transposed, for `dots`: as masked tiles
/// they wasted most lanes (a 7x7 map's 49 = 32 + 17 columns as two tiles ran at 0.78 of the
/// packed path). The loops are those of the packed path (panels of `panel_nc` columns,
/// depth blocks, slivers, tiles), so a panel's rows of `B` stay in L2 across the slivers
/// that reuse them, and the last full tile on a sliver prefetches the next one, as there.
///
/// # Safety
///
/// As for [`gemm_part_in`], with `g`'s slices checked there, `B` as above, and `rows` / `cols`
/// this task's part of `C`.
#[inline(always)]
unsafe fn in_place_part<K: MicroKernel<NR>, const NR: usize>(
    g: &Shared<'_>,
    ib: InPlace<'_>,
    rows: core::ops::Range<usize>,
    cols: core::ops::Range<usize>,
    panel_nc: usize,
) {
    let mr = K::MR;
    let b = ib.b;
    let (blocks, kc_step) = crate::pack::depth_blocks(g.k);
    let a_ptr = g.a.as_ptr();
    let c_ptr = g.c.as_ptr();
    // The rest columns of one depth block, transposed (`rest x kc`, each contiguous in `k`).
    // `rest < NR / 2 <= 16` columns (`NR` is 16 or 32).
    let mut rest_buf = MaybeUninit::<[f32; KC * 16]>::uninit();
    assert!(NR / 2 <= 16);
    let rest_ptr = rest_buf.as_mut_ptr().cast::<f32>();
    let mut jc = cols.start;
    while jc < cols.end {
        let nc = panel_nc.min(cols.end - jc);
        let l = PanelLayout::new::<NR>(nc);
        let body = l.full * NR + l.half;
        // Full tiles, the half-width tile, then the rest as dot products.
        let tiles = l.full + usize::from(l.half > 0);
        let calls = tiles + usize::from(l.rest > 0);
        for blk in 0..blocks {
            let pc = blk * kc_step;
            let kc = kc_step.min(g.k - pc);
            for j in 0..l.rest {
                let src = b.wrapping_add(jc + body + j);
                for p in 0..kc {
                    // SAFETY: row `pc + p < k` and column `jc + body + j < n` of `B` are
                    // inside the caller's range; `j * kc + p < 16 KC` (`rest < 16`,
                    // `kc <= KC`) inside the buffer.
                    unsafe {
                        rest_ptr
                            .add(j * kc + p)
                            .write(*src.add(ib.rows.start(pc + p)))
                    };
                }
            }
            // This block's rows of `B`: the table from row `pc`, or the stride.
            let (block_b, ldb, b_rows) = match ib.rows {
                BRows::Stride(ldb) => (b.wrapping_add(pc * ldb), ldb, core::ptr::null()),
                BRows::Table(t) => (b, 0, t[pc..pc + kc].as_ptr()),
            };
            let mut ir = rows.start;
            while ir < rows.end {
                let r = sliver_rows(rows.end, ir, mr);
                let at = |i: usize| {
                    if g.a_blocked {
                        (a_ptr.wrapping_add(g.m * pc + i * kc), kc)
                    } else {
                        (a_ptr.wrapping_add(i * g.lda + pc), g.lda)
                    }
                };
                let (sliver, lda) = at(ir);
                let next = ir + r;
                let fetch = NextSliver::new(tiles, g.a_blocked, mr, kc);
                let next_sliver = (next < rows.end).then(|| at(next));
                for q in 0..calls {
                    let (j, b_at, w) = if q < l.full {
                        (jc + q * NR, block_b.wrapping_add(jc + q * NR), NR)
                    } else if q < tiles {
                        let j = jc + l.full * NR;
                        (j, block_b.wrapping_add(j), l.half)
                    } else {
                        (jc + body, rest_ptr.cast_const(), l.rest)
                    };
                    // As in the packed path: the last full tiles fetch the next sliver's
                    // rows, which in a model come from memory (a layer's weights are read
                    // once per run).
                    let (a_next, lda_next) = fetch.part(q, next_sliver);
                    let t = Tile {
                        kc,
                        a: sliver,
                        lda,
                        a_next,
                        lda_next,
                        b: b_at,
                        ldb,
                        b_rows,
                        c: c_ptr.wrapping_add(ir * g.ldc + j),
                        ldc: g.ldc,
                        rows: r,
                        cols: w,
                        accumulate: blk > 0,
                        last: blk + 1 == blocks,
                        bias: match g.bias {
                            Bias::Row(v) => TileBias::Row(v[ir..].as_ptr()),
                            Bias::Col(v) => TileBias::Col(v[j..].as_ptr()),
                            Bias::None => TileBias::None,
                        },
                        res: g
                            .res
                            .map_or(core::ptr::null(), |res| res[ir * g.ldc + j..].as_ptr()),
                        act: g.act,
                    };
                    // SAFETY: the caller guarantees the CPU features and `B`'s rows
                    // `pc..pc + kc` (columns `j..j + w` are inside `n`; the table's `kc`
                    // entries from `pc` were sliced above), and the rest was just written (`w x kc`); the sliver, C, the bias and the
                    // residual as in `gemm_part`.
                    unsafe {
                        if q < tiles {
                            K::tile_strided(&t);
                        } else {
                            K::dots(&t);
                        }
                    }
                }
                ir = next;
            }
        }
        jc += nc;
    }
}

#[cfg(test)]
mod tests {
    use super::{deep_blocks, packed_len, rows_collide, scatter_row, PanelLayout};

    /// Every element of a panel packed row by row lands where [`PanelLayout::at`] says, for
    /// both ISAs' widths (AVX-512's 32 with and without its half-width micro-panel), and
    /// nothing else is written.
    fn scatter_matches_layout<const NR: usize>() {
        for (kc, nc) in [
            (1, 1),
            (3, 5),
            (7, 16),
            (5, 31),
            (4, 32),
            (9, 48),
            (6, 61),
            (2, 100),
        ] {
            // (The crate is `no_std`: fixed buffers for the largest case, 9 x 100.)
            let mut all = [f32::NAN; 903];
            let dst = &mut all[..packed_len(kc, nc) + 3];
            for p in 0..kc {
                let mut row = [0.0f32; 100];
                for (j, x) in row.iter_mut().enumerate() {
                    *x = (p * 1000 + j) as f32;
                }
                scatter_row::<NR>(&row[..nc], p, kc, &mut dst[..packed_len(kc, nc)]);
            }
            let l = PanelLayout::new::<NR>(nc);
            for p in 0..kc {
                for j in 0..nc {
                    assert_eq!(
                        dst[l.at::<NR>(kc, p, j)],
                        (p * 1000 + j) as f32,
                        "{kc}x{nc}"
                    );
                }
            }
            assert!(dst[packed_len(kc, nc)..].iter().all(|x| x.is_nan()));
        }
    }

    #[test]
    fn scatter_row_writes_the_panel_layout() {
        scatter_matches_layout::<16>();
        scatter_matches_layout::<32>();
    }

    #[test]
    #[should_panic(expected = "outside")]
    fn scatter_row_rejects_a_short_panel() {
        let mut dst = [0.0f32; 15];
        scatter_row::<16>(&[1.0; 16], 0, 1, &mut dst);
    }

    #[test]
    fn only_cores_with_48_kib_of_l1d_take_deep_blocks() {
        // Zen 5 and Intel since Ice Lake (48 KiB), and larger L1ds.
        assert!(deep_blocks(48 << 10) && deep_blocks(64 << 10));
        // Zen 3 and Zen 4 (32 KiB) keep KC; so does an unknown L1d (the 32 KiB default).
        assert!(!deep_blocks(32 << 10) && !deep_blocks(40 << 10) && !deep_blocks(0));
    }

    #[test]
    fn only_strides_that_stack_rows_in_one_set_collide() {
        // 4 KiB and 2 KiB strides: all rows, or every other one, start in one set.
        assert!(rows_collide(1024, 12) && rows_collide(1024, 6));
        assert!(rows_collide(512, 12));
        // Winograd filters' and convolutions' usual strides spread the rows out.
        for lda in [64, 96, 128, 192, 256, 576, 3 * 3 * 64, 147] {
            assert!(!rows_collide(lda, 12), "lda {lda}");
        }
    }
}
