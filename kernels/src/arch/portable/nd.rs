//! Walking rank-N index spaces: the one odometer the shape-generic kernels share.
//!
//! A [`Layout`] is an index space (`dims`, rank at most [`MAX_RANK`]) with `S` element-stride
//! sets, one per operand (signed, so a slice with negative steps is just negative strides;
//! 0 broadcasts). Before walking it, [`Layout::simplify`] drops axes of size 1 and merges each
//! pair of adjacent axes that every operand steps through as one (for all operands,
//! `stride[a] == stride[a + 1] * dims[a + 1]`), so e.g. a transpose that keeps axes 2 and 3 together, or a
//! broadcast along a whole contiguous block, costs one loop level instead of two. The visiting
//! order (row-major over the original axes) is unchanged by either step, so a contiguous output
//! can simply be written in order.
//!
//! [`Layout::for_each_outer`] then runs the odometer over the leading axes, keeping every
//! operand's offset up to date incrementally (one add per step, a subtract on wrap-around), and
//! hands the offsets to a closure that does the innermost axis (or the innermost two) as a
//! tight loop.

/// The largest rank the generic kernels accept (ONNX tensors in practice stay far below it).
pub(crate) const MAX_RANK: usize = 8;

/// An index space with `S` operands' strides; see the module doc.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout<const S: usize> {
    pub(crate) rank: usize,
    pub(crate) dims: [usize; MAX_RANK],
    /// `strides[s][a]`: operand `s`'s element stride along axis `a`.
    pub(crate) strides: [[isize; MAX_RANK]; S],
}

/// Row-major strides of `dims` (as `isize`), written into the first `dims.len()` entries.
pub(crate) fn contiguous(dims: &[usize]) -> [isize; MAX_RANK] {
    let mut s = [0isize; MAX_RANK];
    let mut step = 1isize;
    for a in (0..dims.len()).rev() {
        s[a] = step;
        step = step.wrapping_mul(dims[a] as isize);
    }
    s
}

impl<const S: usize> Layout<S> {
    /// The index space `dims` with `stride(s, a)` for operand `s`, axis `a`.
    pub(crate) fn new(dims: &[usize], stride: impl Fn(usize, usize) -> isize) -> Self {
        assert!(dims.len() <= MAX_RANK, "rank {} > {MAX_RANK}", dims.len());
        let mut l = Layout {
            rank: dims.len(),
            dims: [1; MAX_RANK],
            strides: [[0; MAX_RANK]; S],
        };
        l.dims[..dims.len()].copy_from_slice(dims);
        for (s, st) in l.strides.iter_mut().enumerate() {
            for (a, v) in st[..dims.len()].iter_mut().enumerate() {
                *v = stride(s, a);
            }
        }
        l
    }

    /// The number of index tuples (1 for rank 0).
    pub(crate) fn total(&self) -> usize {
        self.dims[..self.rank].iter().product()
    }

    /// Drops axes of size 1 and merges adjacent axes every operand walks as one, keeping at
    /// least one axis (a rank-0 space becomes `[1]`). Call only on a non-empty space.
    pub(crate) fn simplify(&mut self) {
        let mut r = 0;
        for a in 0..self.rank {
            if self.dims[a] == 1 {
                continue;
            }
            let mergeable = r > 0
                && (0..S).all(|s| {
                    self.strides[s][r - 1] == self.strides[s][a].wrapping_mul(self.dims[a] as isize)
                });
            if mergeable {
                self.dims[r - 1] *= self.dims[a];
                for s in 0..S {
                    self.strides[s][r - 1] = self.strides[s][a];
                }
            } else {
                self.dims[r] = self.dims[a];
                for s in 0..S {
                    self.strides[s][r] = self.strides[s][a];
                }
                r += 1;
            }
        }
        if r == 0 {
            self.dims[0] = 1;
            for s in 0..S {
                self.strides[s][0] = 0;
            }
            r = 1;
        }
        self.rank = r;
    }

    /// Moves axis `from` to position `to` (`to >= from`), shifting the ones between left.
    /// The set of (index, offsets) pairs visited is unchanged; only the order is.
    pub(crate) fn move_axis(&mut self, from: usize, to: usize) {
        self.dims[from..=to].rotate_left(1);
        for s in 0..S {
            self.strides[s][from..=to].rotate_left(1);
        }
    }

    /// Calls `f(offsets)` for every index of the first `outer` axes, in row-major order, where
    /// `offsets[s] = base[s] + sum(index[a] * strides[s][a])`. With `outer == 0`, once.
    #[inline(always)]
    pub(crate) fn for_each_outer(
        &self,
        outer: usize,
        base: [isize; S],
        mut f: impl FnMut([isize; S]),
    ) {
        if self.dims[..outer].contains(&0) {
            return;
        }
        let mut idx = [0usize; MAX_RANK];
        let mut off = base;
        'walk: loop {
            f(off);
            let mut a = outer;
            while a > 0 {
                a -= 1;
                idx[a] += 1;
                if idx[a] < self.dims[a] {
                    for (o, st) in off.iter_mut().zip(&self.strides) {
                        *o += st[a];
                    }
                    continue 'walk;
                }
                idx[a] = 0;
                for (o, st) in off.iter_mut().zip(&self.strides) {
                    *o -= st[a] * (self.dims[a] as isize - 1);
                }
            }
            return;
        }
    }
}

/// `offset` as an index; a negative offset (only from a caller's wrong geometry) becomes a
/// huge one, so the slice access panics instead of reading something else.
#[inline(always)]
pub(crate) fn at(offset: isize) -> usize {
    offset as usize
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use std::vec::Vec;

    #[test]
    fn simplify_merges_contiguous_axes_and_drops_unit_ones() {
        // [2, 1, 3, 4] contiguous: one axis of 24.
        let c = contiguous(&[2, 1, 3, 4]);
        let mut l = Layout::<1>::new(&[2, 1, 3, 4], |_, a| c[a]);
        l.simplify();
        assert_eq!((l.rank, l.dims[0], l.strides[0][0]), (1, 24, 1));
        // Transpose [2, 3, 4] by (2, 0, 1): input axes 0 and 1 stay together.
        let ci = contiguous(&[2, 3, 4]);
        let perm = [2, 0, 1];
        let co = contiguous(&[4, 2, 3]);
        let mut l = Layout::<2>::new(&[4, 2, 3], |s, a| if s == 0 { co[a] } else { ci[perm[a]] });
        l.simplify();
        assert_eq!(l.rank, 2);
        assert_eq!(&l.dims[..2], &[4, 6]);
        assert_eq!(&l.strides[1][..2], &[1, 4]);
        // Rank 0 becomes [1].
        let mut l = Layout::<1>::new(&[], |_, _| 0);
        l.simplify();
        assert_eq!((l.rank, l.dims[0]), (1, 1));
    }

    #[test]
    fn for_each_outer_visits_row_major_offsets() {
        let l = Layout::<2>::new(&[2, 3, 5], |s, a| [[15, 5, 1], [-1, 2, 0]][s][a]);
        let mut seen = Vec::new();
        l.for_each_outer(2, [0, 10], |o| seen.push(o));
        let mut want = Vec::new();
        for i in 0..2 {
            for j in 0..3 {
                want.push([15 * i + 5 * j, 10 - i + 2 * j]);
            }
        }
        assert_eq!(seen, want);
        let mut n = 0;
        l.for_each_outer(0, [0, 0], |_| n += 1);
        assert_eq!(n, 1);
        let l = Layout::<1>::new(&[2, 0, 5], |_, _| 1);
        l.for_each_outer(2, [0], |_| panic!("empty"));
    }
}
