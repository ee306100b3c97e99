//! Run-time positions in sequences.
//!
//! Sequences are planned at compile time: their length and the tensors they may hold are known
//! there. What a position given at run time (an `i64` input) can change is only the *order*:
//! generated code keeps it as a fixed-size array of indices into the compile-time list of
//! candidates, and these functions update it. A position outside the sequence is an
//! [`Error::SeqPosition`], never a panic; nothing here allocates.

use crate::Error;

/// `pos` (negative counts from the end) as an index into a sequence of `len` elements, for
/// `erase` and `at`: `-len..len`.
pub fn seq_index(op: &'static str, len: usize, pos: i64) -> Result<usize, Error> {
    let n = len as i128;
    let p = if pos < 0 {
        i128::from(pos) + n
    } else {
        i128::from(pos)
    };
    if (0..n).contains(&p) {
        Ok(p as usize)
    } else {
        Err(Error::SeqPosition { op, pos, len })
    }
}

/// The order after inserting candidate `cand` at `pos` (`-len..=len`, `len` the end) of `prev`.
/// `N` is `prev.len() + 1`; the compiler guarantees it.
pub fn seq_insert<const N: usize>(
    prev: &[usize],
    cand: usize,
    pos: i64,
) -> Result<[usize; N], Error> {
    let len = prev.len();
    let n = len as i128;
    let p = if pos < 0 {
        i128::from(pos) + n
    } else {
        i128::from(pos)
    };
    if !(0..=n).contains(&p) || N != len + 1 {
        return Err(Error::SeqPosition {
            op: "insert",
            pos,
            len,
        });
    }
    let p = p as usize;
    Ok(core::array::from_fn(|i| match i.cmp(&p) {
        core::cmp::Ordering::Less => prev[i],
        core::cmp::Ordering::Equal => cand,
        core::cmp::Ordering::Greater => prev[i - 1],
    }))
}

/// The order after erasing position `pos` (`-len..len`) of `prev`. `N` is `prev.len() - 1`.
pub fn seq_erase<const N: usize>(prev: &[usize], pos: i64) -> Result<[usize; N], Error> {
    let p = seq_index("erase", prev.len(), pos)?;
    if N + 1 != prev.len() {
        return Err(Error::SeqPosition {
            op: "erase",
            pos,
            len: prev.len(),
        });
    }
    Ok(core::array::from_fn(|i| {
        if i < p {
            prev[i]
        } else {
            prev[i + 1]
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_and_erase_follow_python() {
        // Python: l = [0, 1, 2]; l.insert(-1, 9) -> [0, 1, 9, 2]
        assert_eq!(seq_insert::<4>(&[0, 1, 2], 9, -1).unwrap(), [0, 1, 9, 2]);
        assert_eq!(seq_insert::<4>(&[0, 1, 2], 9, 3).unwrap(), [0, 1, 2, 9]);
        assert_eq!(seq_insert::<4>(&[0, 1, 2], 9, -3).unwrap(), [9, 0, 1, 2]);
        assert!(seq_insert::<4>(&[0, 1, 2], 9, 4).is_err());
        assert!(seq_insert::<4>(&[0, 1, 2], 9, -4).is_err());
        assert_eq!(seq_erase::<2>(&[0, 1, 2], -3).unwrap(), [1, 2]);
        assert_eq!(seq_erase::<2>(&[0, 1, 2], 2).unwrap(), [0, 1]);
        assert!(seq_erase::<2>(&[0, 1, 2], 3).is_err());
        assert_eq!(seq_index("at", 3, -1).unwrap(), 2);
        assert!(seq_index("at", 0, 0).is_err());
        assert!(seq_index("at", 3, i64::MIN).is_err());
    }
}
