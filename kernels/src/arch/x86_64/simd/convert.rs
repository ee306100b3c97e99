//! The blocked layout's converters ([`crate::nchwc::to_blocked`] and
//! [`crate::nchwc::from_blocked`]) with in-register transposes: the same results, bit for bit
//! (they only move floats).
//!
//! ```text
//! for each image, block of 16 channels, run of L pixels (L = lanes), group of L channels:
//!     rows[j] = the L pixels of channel j of the group       // one load per plane (to_blocked)
//!     transpose rows                                         // rows[q] = pixel q's L channels
//!     store rows[q] at pixel q of the blocked plane          // L contiguous vectors
//! ```
//!
//! `from_blocked` runs the same steps backwards. A plane whose pixel count is not a multiple
//! of `L` ends with a run of fewer pixels (masked loads and stores, the lanes past it zeros),
//! a last block of fewer than 16 channels loads zeros for the padding channels (`to_blocked`,
//! which must write them) or skips their stores (`from_blocked`, which drops them).
//!
//! Why. The portable converters move one float at a time through a 16-pixel tile: about 1.2
//! cycles per float even from L2, which is what made a blocked convolution's conversions cost
//! up to a fifth of its time in networks (docs/performance.md, "SIMD converters"). A 16x16
//! transpose is 64 shuffles for 256 floats, with every load and store a whole vector.

use super::vector::Simd;
use crate::nchwc::{blocks, check_conversion, BLOCK};

/// [`crate::nchwc::to_blocked`]: NCHW `src` (`[n, c, h, w]`) into NCHW16c `dst`, the padding
/// channels zeroed.
///
/// Panics if a slice is shorter than that.
#[inline(always)]
pub(crate) fn to_blocked<S: Simd>(
    s: S,
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    src: &[f32],
    dst: &mut [f32],
) {
    let plane = h * w;
    check_conversion([n, c, h, w], src.len(), dst.len(), "to_blocked");
    let l = S::LANES;
    debug_assert!(BLOCK.is_multiple_of(l) && l <= BLOCK);
    for i in 0..n {
        for cb in 0..blocks(c) {
            let lanes = BLOCK.min(c - cb * BLOCK);
            let planes = &src[(i * c + cb * BLOCK) * plane..][..lanes * plane];
            let blk = &mut dst[(i * blocks(c) + cb) * plane * BLOCK..][..plane * BLOCK];
            let mut px = 0;
            while px < plane {
                let np = l.min(plane - px);
                for cg in (0..BLOCK).step_by(l) {
                    let mut rows = [s.zero(); BLOCK];
                    for (j, row) in rows[..l].iter_mut().enumerate() {
                        let ch = cg + j;
                        if ch < lanes {
                            let run = &planes[ch * plane + px..][..np];
                            *row = if np == l {
                                s.load(run)
                            } else {
                                s.load_partial(run)
                            };
                        }
                    }
                    s.transpose(&mut rows[..l]);
                    for (q, &row) in rows[..np].iter().enumerate() {
                        s.store(&mut blk[(px + q) * BLOCK + cg..][..l], row);
                    }
                }
                px += np;
            }
        }
    }
}

/// [`crate::nchwc::from_blocked`]: NCHW16c `src` back into NCHW `dst` (`[n, c, h, w]`), the
/// padding channels dropped.
///
/// Panics if a slice is shorter than that.
#[inline(always)]
pub(crate) fn from_blocked<S: Simd>(
    s: S,
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    src: &[f32],
    dst: &mut [f32],
) {
    let plane = h * w;
    check_conversion([n, c, h, w], dst.len(), src.len(), "from_blocked");
    let l = S::LANES;
    debug_assert!(BLOCK.is_multiple_of(l) && l <= BLOCK);
    for i in 0..n {
        for cb in 0..blocks(c) {
            let lanes = BLOCK.min(c - cb * BLOCK);
            let blk = &src[(i * blocks(c) + cb) * plane * BLOCK..][..plane * BLOCK];
            let planes = &mut dst[(i * c + cb * BLOCK) * plane..][..lanes * plane];
            let mut px = 0;
            while px < plane {
                let np = l.min(plane - px);
                for cg in (0..lanes).step_by(l) {
                    let mut rows = [s.zero(); BLOCK];
                    for (q, row) in rows[..np].iter_mut().enumerate() {
                        *row = s.load(&blk[(px + q) * BLOCK + cg..][..l]);
                    }
                    s.transpose(&mut rows[..l]);
                    for (j, &row) in rows[..l.min(lanes - cg)].iter().enumerate() {
                        let run = &mut planes[(cg + j) * plane + px..][..np];
                        if np == l {
                            s.store(run, row);
                        } else {
                            s.store_partial(run, row);
                        }
                    }
                }
                px += np;
            }
        }
    }
}
