//! Stride-1 convolutions as a GEMM whose right-hand matrix is read in place from a
//! zero-padded copy of the input ([`conv2d_flat`]): no im2col panel is packed, the
//! micro-kernel loads each row of the implicit im2col matrix straight from the padded planes
//! through a table of row offsets ([`MicroKernel::tile_strided`] with `Tile::b_rows`).
//!
//! Algorithm sketch (one image; `wp = w + max(pad_left, pad_right)`):
//!
//! ```text
//! padded[ci] = the input plane, rows wp floats apart, each row led by max(pl, pr) zeros
//!              (shared: a row's right padding reads the next row's leading zeros), pt zero
//!              rows above, pb + 1 below
//! table[(ci, ky, kx)] = ci * plane + ky * dh * wp + kx * dw + max(pl, pr) - pl
//! C[c_out, q] = W[c_out, k] * B[k, q]   for q in 0..round_up(oh * wp, 16),
//!              B[p, q] = padded[table[p] + q]                // read in place
//! out[co, oy, ox] = C[co, oy * wp + ox] for ox < ow          // the other columns are dropped
//! ```
//!
//! Output position `(oy, ox)` is column `q = oy * wp + ox`; its tap `(ky, kx)` over channel
//! `ci` is `padded[ci][(oy + ky dh) * wp + ox + kx dw + max(pl, pr) - pl]`, so every row of
//! the im2col matrix is one contiguous run of the padded input, `table[p]` floats in. The
//! columns `ox >= ow` of each row (`wp - ow` of them, one for a "same" 3x3) and the round-up
//! to 16 are computed and thrown away.
//!
//! **Why.** The implicit im2col packer (`super::im2col`) writes every element of `B` once
//! per call into the GEMM's panel, and the GEMM reuses it for each output channel; with few
//! output channels (DenseNet-121's 128 -> 32 3x3 layers) or small maps, whose rows of 7 or 14
//! columns also leave ragged tiles, the packing and the ragged tiles cost as much as the
//! FMAs. Here the copy is of the input (`c_in * h * w`, nine times less than the im2col
//! matrix of a 3x3), every tile is full width, and the cost is the dropped columns:
//! `(oh * wp) / (oh * ow)`, 1.14 for 14x14, 1.31 for 7x7, 1.04 for 28x28 ("same" 3x3).
//!
//! The sums are the im2col GEMM's tiles' (same depth blocks, same order of `k`, same
//! epilogue), so an output is the same to the bit as the packed path's wherever that path
//! computes it in a tile; its ragged last columns (`oh * ow` past a multiple of 16) are dot
//! products there, summed in another order. With a residual the GEMM applies
//! only the bias and the copy-out adds the residual and applies the activation, in the
//! epilogue's order.
//!
//! **The rule** ([`Flat::new`]): AVX-512 (a micro-kernel that reads `B` in place,
//! [`MicroKernel::IN_PLACE`], 32 columns wide), one group, at most [`MAX_C_OUT`] output channels,
//! stride 1, a window larger than 1x1,
//! `min(pl, pr) <= (kw - 1) dw` (so a padded row holds an output row), at most
//! [`MAX_WASTE`] computed columns per output, and a scratch ([`Conv2d::scratch_len`], the
//! im2col matrix the portable kernel writes) that holds the offset table, the padded input
//! and `C`. (The table lives in the scratch, not on the stack: a 32 KiB array in the frame of
//! the `#[target_feature]` function every x86 convolution enters made every call probe eight
//! stack pages, including the calls this path declines.)

use super::blis::{self, scatter_row, BRows, Bias, InPlace, MicroKernel, PackB};
use crate::par::Parallel;
use crate::{Activation, Conv2d};

/// The most output channels taken. The packer's cost is shared by the output channels, so
/// the more there are, the less reading `B` in place saves; and the packed panel is aligned
/// and contiguous, where the rows read in place are neither. Kernel bench, AMD EPYC Zen 4
/// (`-- 3x3/im2col`, of peak, packed -> in place): 32 channels 0.53-0.66 -> 0.75-0.77 (14x14),
/// 0.52 -> 0.60-0.62 (7x7), 0.75 -> 0.83-0.87 (28x28), 0.78-0.80 -> 0.84-0.87 (56x56); 64
/// channels level (0.86 on 56x56, 0.82-0.83 on 55x55); 128 about 1-2 % slower; 256 and 512
/// 8-15 % slower (ResNet-50's 14x14 and 7x7 layers, VGG-19's).
const MAX_C_OUT: usize = 64;

/// The most computed GEMM columns per output element, as a ratio `num / den`: a 7x7 map
/// ("same" 3x3, 64 columns for 49 outputs, 1.31) is taken, a 3x3 one (16 for 9) is not.
const MAX_WASTE: (usize, usize) = (3, 2);

/// The padded layout of one image's input, and the GEMM it feeds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Flat {
    /// Floats per padded row: the image row and `lead` zeros.
    wp: usize,
    /// Zeros leading each padded row: `max(pl, pr)`.
    lead: usize,
    /// Floats per padded channel plane: `(pt + h + pb + 1) * wp`.
    plane: usize,
    /// GEMM columns: `oh * wp` rounded up to 16.
    n: usize,
    /// Reduction: `c_in * kh * kw`.
    k: usize,
    /// Floats of the padded input, including the zeros the last channel's dropped columns
    /// read past its plane.
    len: usize,
}

impl Flat {
    /// The layout for `p`, or `None` if the rule (module docs) declines it; `scratch` is the
    /// length of the scratch the caller has.
    pub(crate) fn new(p: &Conv2d, scratch: usize) -> Option<Flat> {
        let [pt, pl, pb, pr] = p.pad;
        let [dh, dw] = p.dilation;
        if p.groups != 1
            || p.c_out > MAX_C_OUT
            || p.stride != [1, 1]
            || p.kh.max(p.kw) <= 1
            || p.c_in == 0
            || p.c_out == 0
            || p.out_h == 0
            || p.out_w == 0
            || p.h == 0
            || p.w == 0
        {
            return None;
        }
        // The output size of a stride-1 convolution, checked: anything else (a size the
        // compiler computed otherwise) goes to the general path.
        let span_h = (p.kh - 1).checked_mul(dh)?;
        let span_w = (p.kw - 1).checked_mul(dw)?;
        let rows = p.h.checked_add(pt)?.checked_add(pb)?;
        let cols = p.w.checked_add(pl)?.checked_add(pr)?;
        if rows.checked_sub(span_h)? != p.out_h || cols.checked_sub(span_w)? != p.out_w {
            return None;
        }
        if pl.min(pr) > span_w {
            return None;
        }
        let lead = pl.max(pr);
        let wp = p.w.checked_add(lead)?;
        let plane = rows.checked_add(1)?.checked_mul(wp)?;
        let n = p.out_h.checked_mul(wp)?.checked_next_multiple_of(16)?;
        let k = p.c_in.checked_mul(p.kh)?.checked_mul(p.kw)?;
        let outputs = p.out_h.checked_mul(p.out_w)?;
        if n.checked_mul(MAX_WASTE.1)? > outputs.checked_mul(MAX_WASTE.0)? {
            return None;
        }
        // The farthest float a column reads: the last channel's last tap, last column
        // (`lead >= pl`).
        let last_tap = span_h
            .checked_mul(wp)?
            .checked_add(span_w)?
            .checked_add(lead - pl)?;
        let len = (p.c_in - 1)
            .checked_mul(plane)?
            .checked_add(last_tap)?
            .checked_add(n)?
            .max(p.c_in.checked_mul(plane)?);
        let c_len = p.c_out.checked_mul(n)?;
        let need = k.checked_add(len)?.checked_add(c_len)?;
        (len <= u32::MAX as usize && need <= scratch).then_some(Flat {
            wp,
            lead,
            plane,
            n,
            k,
            len,
        })
    }

    /// Writes the row offsets of the im2col matrix, `table[(ci, ky, kx)]` (module docs), into
    /// `dst` (`k` floats holding the bits of `u32`s) and returns them.
    fn table<'t>(&self, p: &Conv2d, dst: &'t mut [f32]) -> &'t [u32] {
        let [dh, dw] = p.dilation;
        let shift = self.lead - p.pad[1];
        let dst = &mut dst[..self.k];
        let taps = (0..p.c_in)
            .flat_map(|ci| (0..p.kh).flat_map(move |ky| (0..p.kw).map(move |kx| (ci, ky, kx))));
        for (slot, (ci, ky, kx)) in dst.iter_mut().zip(taps) {
            // Below `len` (checked in `new`), which fits `u32`.
            *slot = f32::from_bits((ci * self.plane + ky * dh * self.wp + kx * dw + shift) as u32);
        }
        // SAFETY: `f32` and `u32` have the same size and alignment and every bit pattern is a
        // `u32`; the view borrows `dst` for as long as the result lives.
        unsafe { core::slice::from_raw_parts(dst.as_ptr().cast::<u32>(), dst.len()) }
    }

    /// Writes one image's input (`c_in` planes of `h x w`) into `dst` (`len` floats) in the
    /// padded layout.
    fn pad(&self, p: &Conv2d, src: &[f32], dst: &mut [f32]) {
        let (pt, plane_len) = (p.pad[0], p.h * p.w);
        let (planes, tail) = dst[..self.len].split_at_mut(p.c_in * self.plane);
        for (plane, src) in planes
            .chunks_exact_mut(self.plane)
            .zip(src.chunks_exact(plane_len))
        {
            let (top, rest) = plane.split_at_mut(pt * self.wp);
            top.fill(0.0);
            let (body, bottom) = rest.split_at_mut(p.h * self.wp);
            for (row, src) in body.chunks_exact_mut(self.wp).zip(src.chunks_exact(p.w)) {
                row[..self.lead].fill(0.0);
                row[self.lead..].copy_from_slice(src);
            }
            bottom.fill(0.0);
        }
        tail.fill(0.0);
    }
}

/// The implicit im2col matrix over the padded input: `B[p, j] = data[table[p] + j]`.
struct Padded<'a> {
    data: &'a [f32],
    table: &'a [u32],
    /// Columns: every `table[p] + n <= data.len()` (checked when built).
    n: usize,
}

impl<'a> Padded<'a> {
    fn new(data: &'a [f32], table: &'a [u32], n: usize) -> Self {
        let fits = |&off: &u32| {
            (off as usize)
                .checked_add(n)
                .is_some_and(|e| e <= data.len())
        };
        assert!(table.iter().all(fits), "conv2d_flat: table past the input");
        Padded { data, table, n }
    }
}

impl PackB for Padded<'_> {
    #[inline(always)]
    fn pack<const NR: usize>(&self, pc: usize, kc: usize, jc: usize, nc: usize, dst: &mut [f32]) {
        for p in 0..kc {
            let row = &self.data[self.table[pc + p] as usize + jc..][..nc];
            scatter_row::<NR>(row, p, kc, dst);
        }
    }

    fn in_place(&self, k: usize, n: usize) -> Option<InPlace<'_>> {
        // Real checks: the micro-kernel reads through the pointer (`new` checked every row
        // for `self.n` columns).
        (k <= self.table.len() && n <= self.n).then_some(InPlace {
            b: self.data.as_ptr(),
            rows: BRows::Table(self.table),
        })
    }
}

/// Runs the convolution through the padded input if [`Flat::new`] takes it (and `K` reads
/// `B` in place), and returns whether it did; `false` means nothing was written. The weights
/// are in [`crate::pack::WeightLayout::DepthBlocked`], `res` (if any) is laid out as `out`,
/// `scratch` is the caller's [`Conv2d::scratch_len`] floats (the offset table, the padded
/// input, then `C`).
///
/// Panics if a slice is shorter than the shapes in `p` require.
///
/// # Safety
///
/// The CPU has every feature `K` needs; `inline(always)` compiles it inside the caller's
/// `#[target_feature]` function.
#[inline(always)]
#[allow(clippy::too_many_arguments)] // conv2d's contract plus the threads and the scratch.
pub(crate) unsafe fn conv2d_flat<K: MicroKernel<NR> + Sync, const NR: usize>(
    par: &dyn Parallel,
    p: &Conv2d,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    res: Option<&[f32]>,
    act: Activation,
    scratch: &mut [f32],
    out: &mut [f32],
) -> bool {
    // AVX2's tile reads `B` in place too, but only for the narrow projections
    // (`blis::reads_in_place`); this path was measured on AVX-512 alone.
    if !K::IN_PLACE || NR < 32 {
        return false;
    }
    let Some(f) = Flat::new(p, scratch.len()) else {
        return false;
    };
    let (table, scratch) = scratch.split_at_mut(f.k);
    let table = f.table(p, table);
    let (in_plane, out_plane) = (p.h * p.w, p.out_h * p.out_w);
    let (padded, rest) = scratch.split_at_mut(f.len);
    let c = &mut rest[..p.c_out * f.n];
    for img in 0..p.batch {
        f.pad(
            p,
            &input[img * p.c_in * in_plane..][..p.c_in * in_plane],
            padded,
        );
        let gemm = blis::Gemm {
            m: p.c_out,
            n: f.n,
            k: f.k,
            a: &weight[..p.c_out * f.k],
            lda: f.k,
            a_blocked: true,
            c: &mut *c,
            ldc: f.n,
            bias: bias.map_or(Bias::None, |b| Bias::Row(&b[..p.c_out])),
            res: None,
            act: if res.is_some() { Activation::None } else { act },
        };
        // SAFETY: the caller guarantees the CPU features.
        unsafe { blis::gemm_par::<K, NR, _>(par, gemm, &Padded::new(padded, table, f.n)) };
        let dst = &mut out[img * p.c_out * out_plane..][..p.c_out * out_plane];
        let res = res.map(|r| &r[img * p.c_out * out_plane..][..p.c_out * out_plane]);
        for (co, dst) in dst.chunks_exact_mut(out_plane).enumerate() {
            let src = &c[co * f.n..][..p.out_h * f.wp];
            let rows = dst.chunks_exact_mut(p.out_w).zip(src.chunks_exact(f.wp));
            match res {
                None => rows.for_each(|(d, s)| d.copy_from_slice(&s[..p.out_w])),
                Some(r) => {
                    let r = r[co * out_plane..][..out_plane].chunks_exact(p.out_w);
                    for ((d, s), r) in rows.zip(r) {
                        for ((d, &s), &r) in d.iter_mut().zip(s).zip(r) {
                            *d = act.apply(s + r);
                        }
                    }
                }
            }
        }
    }
    true
}
