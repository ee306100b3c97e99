//! Length checks that cannot wrap.
//!
//! The SIMD kernels hand raw pointers derived from their slices to micro-kernels, so their
//! "slice long enough" checks are what keeps them sound. Written as `a.len() >= m * k`, such a
//! check passes for sizes whose product wraps (`m = 2^63, k = 2` needs `0` floats), and the
//! micro-kernel then reads far outside the slice. These helpers compute the required length in
//! checked arithmetic and treat an overflowing requirement as unsatisfiable.

/// Whether `len` floats hold the product of `dims` (`false` when the product overflows).
#[inline]
pub(crate) fn holds(len: usize, dims: &[usize]) -> bool {
    let mut need = 1usize;
    for &d in dims {
        match need.checked_mul(d) {
            Some(n) => need = n,
            None => return dims.contains(&0),
        }
    }
    len >= need
}

/// Whether `len` floats hold `rows` rows of `cols` at a stride of `ld`: the last row ends at
/// `(rows - 1) * ld + cols` (`false` when that overflows; always `true` for `rows == 0`).
#[inline]
// Only the x86 GEMM engine takes strided operands; elsewhere (aarch64, 32-bit arm) it is unused.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) fn holds_strided(len: usize, rows: usize, ld: usize, cols: usize) -> bool {
    match rows.checked_sub(1) {
        None => true,
        Some(last) => last
            .checked_mul(ld)
            .and_then(|x| x.checked_add(cols))
            .is_some_and(|need| len >= need),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The top bit of a `usize`: doubled, it wraps.
    const HALF: usize = 1 << (usize::BITS - 1);

    #[test]
    fn wrapped_products_are_refused() {
        // 2^(bits-1) * 2 wraps to 0 in usize arithmetic (written for 32-bit targets too).
        assert!(!holds(0, &[HALF, 2]));
        assert!(!holds(usize::MAX, &[usize::MAX, 2]));
        assert!(holds(6, &[2, 3]) && !holds(5, &[2, 3]));
        // A zero dimension needs nothing, whatever the others are.
        assert!(holds(0, &[usize::MAX, usize::MAX, 0]));
        assert!(holds(1, &[]) && !holds(0, &[]));
    }

    #[test]
    fn wrapped_strides_are_refused() {
        // (2^(bits-1) - 1) * 2 + 2 wraps to 0.
        assert!(!holds_strided(0, HALF, 2, 2));
        assert!(!holds_strided(usize::MAX, 2, usize::MAX, 1));
        assert!(holds_strided(7, 2, 5, 2) && !holds_strided(6, 2, 5, 2));
        assert!(holds_strided(0, 0, usize::MAX, usize::MAX));
    }
}
