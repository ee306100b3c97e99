//! Zero-size tensors (a size of 0, as ONNX allows): declared in the DSL, inferred, planned as
//! 0-byte values, run (ops with empty results call no kernel, `concat` skips empty parts) and
//! checked at run time like any input. The expected values are written out by hand from
//! numpy's semantics, not computed by kiln.

use kiln::Error;

kiln::network! {
    /// Empty tensors through elementwise ops, a transpose, an empty slice of a full tensor,
    /// `concat` and `concat_from_seq` with empty parts, and a sequence of empty elements.
    pub net Empty(x: tensor<f32[0,4]>, y: tensor<f32[3,4]>)
        -> (tensor<f32[3,4]>, tensor<f32[0,4]>, tensor<f32[4,0]>, tensor<f32[3,4]>, tensor<i64[]>)
    {
        let a = add(relu(x), 1.0);
        let c = concat(a, mul(y, 2.0), axis = 0);
        let t = transpose(a, [1, 0]);
        let e = slice(y, starts = [1], ends = [1], axes = [0]);
        let s = seq_construct(e, y, a);
        (c, add(e, 1.0), t, concat_from_seq(s, axis = 0), len(s))
    }
}

kiln::network! {
    /// Sequences of empty pieces: `split_to_seq` of a `[2, 0]` tensor along its empty axis (no
    /// pieces) and along the other (two empty pieces, copied by no kernel), and a run-time `at`.
    pub net EmptyPieces(x: tensor<f32[2,0]>, pos: tensor<i64[]>)
        -> (tensor<i64[]>, tensor<i64[]>, tensor<f32[1,0]>, tensor<f32[2,0]>)
    {
        let none = split_to_seq(x, axis = 1);
        let two = split_to_seq(x, axis = 0);
        (len(none), len(two), at(two, pos), concat_from_seq(two, axis = 0))
    }
}

kiln::network! {
    /// Sizes of 0 in `split` and `split_to_seq` are empty results (ONNX allows them).
    pub net ZeroParts(y: tensor<f32[3,4]>)
        -> (tensor<f32[0,4]>, tensor<f32[3,4]>, tensor<i64[]>, tensor<f32[3,4]>)
    {
        let (a, b) = split(y, axis = 0, sizes = [0, 3]);
        let s = split_to_seq(y, [1, 0, 2], axis = 0);
        (a, b, len(s), concat_from_seq(s, axis = 0))
    }
}

#[test]
fn zero_sizes_in_splits() {
    let y = y();
    let mut m = ZeroParts::new();
    let (a, b, n, c) = m.run(&y).unwrap();
    assert_eq!((a.shape(), a.len()), (&[0, 4][..], 0));
    assert_eq!(&b[..], &y[..]);
    assert_eq!(n[..], [3]);
    assert_eq!(&c[..], &y[..]);
}

#[test]
fn sequences_of_empty_pieces() {
    let mut m = EmptyPieces::new();
    let (n0, n2, e, c) = m.run(&[] as &[f32], &[-1i64]).unwrap();
    assert_eq!((n0[..].to_vec(), n2[..].to_vec()), (vec![0], vec![2]));
    assert_eq!((e.shape(), c.shape()), (&[1, 0][..], &[2, 0][..]));
    assert!(matches!(
        m.run(&[] as &[f32], &[2i64]),
        Err(Error::SeqPosition { .. })
    ));
}

fn y() -> Vec<f32> {
    (0..12).map(|i| i as f32 - 5.5).collect()
}

#[test]
fn empty_tensors_run_and_keep_their_shapes() {
    let y = y();
    let mut m = Empty::new();
    let (c, e, t, cs, n) = m.run(&[] as &[f32], &y).unwrap();
    let doubled: Vec<f32> = y.iter().map(|v| v * 2.0).collect();
    assert_eq!((c.shape(), &c[..]), (&[3, 4][..], &doubled[..]));
    assert_eq!((e.shape(), e.len()), (&[0, 4][..], 0));
    assert_eq!((t.shape(), t.len()), (&[4, 0][..], 0));
    assert_eq!((cs.shape(), &cs[..]), (&[3, 4][..], &y[..]));
    assert_eq!(n[..], [3]);
}

#[test]
fn an_empty_input_is_checked_like_any_other() {
    let y = y();
    let mut m = Empty::new();
    // Four values where the model expects none.
    assert!(matches!(
        m.run(&[1.0f32; 4], &y),
        Err(Error::InputLength { .. })
    ));
    assert!(m.run(&[] as &[f32], &y[..11]).is_err());
}

#[test]
fn the_plan_gives_empty_values_zero_bytes() {
    // The printed plan lists relu(x) (an empty result) with 0 bytes, at an address of its own.
    let relu = Empty::PLAN
        .lines()
        .find(|l| l.contains(" = activation "))
        .unwrap_or_else(|| panic!("no relu in\n{}", Empty::PLAN));
    let cols: Vec<&str> = relu.split_whitespace().collect();
    assert_eq!((cols[2], cols[4]), ("activation", "0"), "{relu}");
}
