//! Sequences of tensors: the eight ONNX sequence test models (`simple/test_sequence_model1..8`
//! from the `onnx` package, inputs and outputs copied into `data/sequences/` by
//! `scripts/gen_sequence_testdata.py`) written in the DSL, with positions known at compile time
//! (as the models' initializers are) and given at run time as `i64` inputs; negative positions;
//! run-time positions out of range (`Err`, never a panic); and the plans (no copies, membership).

use kiln::{Error, Tensor};
use kiln_tests::{assert_close, tensor_of};

#[global_allocator]
static GLOBAL: kiln_tests::Counting = kiln_tests::Counting;

kiln::network! {
    /// test_sequence_model1: an empty sequence, two inserts at the end, one at position 1.
    pub net Model1(x: tensor<f32[2,3,4]>, y: tensor<f32[1,3,4]>, z: tensor<f32[3,3,4]>) -> tensor<f32[1,3,4]> {
        let s = seq_empty(f32);
        let s = insert(s, x);
        let s = insert(s, y);
        let s = insert(s, z, 1);
        at(s, 2)
    }
}

kiln::network! {
    /// test_sequence_model2: construct, erase position 1, take position 1.
    pub net Model2(x: tensor<f32[2,3,4]>, y: tensor<f32[2,3,4]>, z: tensor<f32[2,3,4]>) -> tensor<f32[2,3,4]> {
        let s = seq_construct(x, y, z);
        let s = erase(s, 1);
        at(s, 1)
    }
}

kiln::network! {
    /// test_sequence_model2 with its positions given at run time.
    pub net Model2Run(x: tensor<f32[2,3,4]>, y: tensor<f32[2,3,4]>, z: tensor<f32[2,3,4]>,
                      pos_erase: tensor<i64[]>, pos_at: tensor<i64[]>) -> tensor<f32[2,3,4]> {
        let s = seq_construct(x, y, z);
        let s = erase(s, pos_erase);
        at(s, pos_at)
    }
}

kiln::network! {
    /// test_sequence_model3: negative positions everywhere.
    pub net Model3(x: tensor<f32[2,3,4]>, y: tensor<f32[2,3,4]>, z: tensor<f32[2,3,4]>) -> tensor<f32[2,3,4]> {
        let s = seq_construct(x, y, z);
        let s = erase(s, -3);
        let s = insert(s, x, -1);
        at(s, -1)
    }
}

kiln::network! {
    /// test_sequence_model3 with its positions given at run time.
    pub net Model3Run(x: tensor<f32[2,3,4]>, y: tensor<f32[2,3,4]>, z: tensor<f32[2,3,4]>,
                      pos_erase: tensor<i64[]>, pos_insert: tensor<i64[]>, pos_at: tensor<i64[]>) -> tensor<f32[2,3,4]> {
        let s = seq_construct(x, y, z);
        let s = erase(s, pos_erase);
        let s = insert(s, x, pos_insert);
        at(s, pos_at)
    }
}

kiln::network! {
    /// test_sequence_model4: concatenation along axis 1.
    pub net Model4(x: tensor<f32[2,3,4]>, y: tensor<f32[2,3,4]>, z: tensor<f32[2,3,4]>) -> tensor<f32[2,9,4]> {
        concat_from_seq(seq_construct(x, y, z), axis = 1)
    }
}

kiln::network! {
    /// test_sequence_model5: stacking along a new last axis.
    pub net Model5(x: tensor<f32[2,3,4]>, y: tensor<f32[2,3,4]>, z: tensor<f32[2,3,4]>) -> tensor<f32[2,3,4,3]> {
        concat_from_seq(seq_construct(x, y, z), axis = -1, new_axis = true)
    }
}

kiln::network! {
    /// test_sequence_model6: the length of a split into pieces of size 1 along the last axis.
    pub net Model6(x: tensor<f32[2,3,4]>) -> tensor<i64[]> {
        len(split_to_seq(x, axis = -1))
    }
}

kiln::network! {
    /// test_sequence_model7: split along axis 0 without keeping it, take position 1 (f64).
    pub net Model7(x: tensor<f64[2,3,4]>) -> tensor<f64[3,4]> {
        let s = split_to_seq(x, axis = 0, keepdims = false);
        at(s, 1)
    }
}

kiln::network! {
    /// test_sequence_model7 with the position given at run time.
    pub net Model7Run(x: tensor<f64[2,3,4]>, pos_at: tensor<i64[]>) -> tensor<f64[3,4]> {
        let s = split_to_seq(x, axis = 0, keepdims = false);
        at(s, pos_at)
    }
}

kiln::network! {
    /// test_sequence_model8: the length of a split whose sizes are given at run time, on ONNX's
    /// stored empty `X` (`[0]`, three pieces of size 0).
    pub net Model8(x: tensor<f32[0]>, splits: tensor<i64[3]>) -> tensor<i64[]> {
        len(split_to_seq(x, splits))
    }
}

kiln::network! {
    /// Model 8's graph on a non-empty `X`: the length does not depend on the sizes.
    pub net Model8Six(x: tensor<f32[6]>, splits: tensor<i64[3]>) -> tensor<i64[]> {
        len(split_to_seq(x, splits))
    }
}

kiln::network! {
    /// Returns a sequence: two pieces of a computed tensor (views, no copy) and an input
    /// inserted in front (copied into the arena, which the caller borrows).
    pub net SeqOut(x: tensor<f32[2,3,4]>, y: tensor<f32[3,4]>) -> (seq<tensor<f32[?,4]>>, tensor<i64[]>) {
        let s = split_to_seq(relu(x), axis = 0, keepdims = false);
        let s = insert(s, y, 0);
        (s, len(s))
    }
}

fn f32s(model: usize, name: &str) -> (Vec<f32>, Vec<usize>) {
    tensor_of::<f32>(&format!("sequences/model{model}.safetensors"), name)
}

fn i64s(model: usize, name: &str) -> i64 {
    tensor_of::<i64>(&format!("sequences/model{model}.safetensors"), name).0[0]
}

fn xyz(model: usize) -> [Vec<f32>; 3] {
    ["X", "Y", "Z"].map(|n| f32s(model, n).0)
}

#[test]
fn model1_matches_onnx() {
    let [x, y, z] = xyz(1);
    assert_eq!(
        (i64s(1, "pos"), i64s(1, "pos_at")),
        (1, 2),
        "the DSL writes these positions"
    );
    let mut m = Model1::new();
    let out = m.run(&x, &y, &z).unwrap();
    let (want, shape) = f32s(1, "out");
    assert_eq!(out.shape(), shape.as_slice());
    assert_close(&out, &want);
}

#[test]
fn model2_matches_onnx() {
    let [x, y, z] = xyz(2);
    assert_eq!((i64s(2, "pos_erase"), i64s(2, "pos_at")), (1, 1));
    let (want, _) = f32s(2, "out");
    assert_close(&Model2::new().run(&x, &y, &z).unwrap(), &want);
}

#[test]
fn model2_with_run_time_positions_matches_onnx() {
    let [x, y, z] = xyz(2);
    let (pe, pa) = ([i64s(2, "pos_erase")], [i64s(2, "pos_at")]);
    let (want, _) = f32s(2, "out");
    assert_close(&Model2Run::new().run(&x, &y, &z, &pe, &pa).unwrap(), &want);
}

#[test]
fn model3_matches_onnx() {
    let [x, y, z] = xyz(3);
    assert_eq!(
        (
            i64s(3, "pos_erase"),
            i64s(3, "pos_insert"),
            i64s(3, "pos_at")
        ),
        (-3, -1, -1)
    );
    let (want, _) = f32s(3, "out");
    assert_close(&Model3::new().run(&x, &y, &z).unwrap(), &want);
}

#[test]
fn model3_with_run_time_positions_matches_onnx() {
    let [x, y, z] = xyz(3);
    let p = |n| [i64s(3, n)];
    let (want, _) = f32s(3, "out");
    let mut m = Model3Run::new();
    let out = m.run(&x, &y, &z, &p("pos_erase"), &p("pos_insert"), &p("pos_at"));
    assert_close(&out.unwrap(), &want);
}

#[test]
fn model4_matches_onnx() {
    let [x, y, z] = xyz(4);
    let (want, shape) = f32s(4, "out");
    let mut m = Model4::new();
    let out = m.run(&x, &y, &z).unwrap();
    assert_eq!(out.shape(), shape.as_slice());
    assert_close(&out, &want);
}

#[test]
fn model5_matches_onnx() {
    let [x, y, z] = xyz(5);
    let (want, shape) = f32s(5, "out");
    let mut m = Model5::new();
    let out = m.run(&x, &y, &z).unwrap();
    assert_eq!(out.shape(), shape.as_slice());
    assert_close(&out, &want);
}

#[test]
fn model6_matches_onnx() {
    let (x, _) = f32s(6, "X");
    let mut m = Model6::new();
    assert_eq!(m.run(&x).unwrap()[..], [i64s(6, "len")]);
}

#[test]
fn model7_matches_onnx() {
    let (x, _) = tensor_of::<f64>("sequences/model7.safetensors", "X");
    let (want, shape) = tensor_of::<f64>("sequences/model7.safetensors", "out");
    assert_eq!(i64s(7, "pos_at"), 1);
    let mut m = Model7::new();
    let out = m.run(&x).unwrap();
    assert_eq!(out.shape(), shape.as_slice());
    assert_eq!(out[..], want[..]);
    let mut m = Model7Run::new();
    assert_eq!(m.run(&x, &[1i64]).unwrap()[..], want[..]);
}

#[test]
fn model8_matches_onnx() {
    let (splits, shape) = tensor_of::<i64>("sequences/model8.safetensors", "Splits");
    assert_eq!(
        (splits.as_slice(), shape.as_slice()),
        (&[0i64, 0, 0][..], &[3][..])
    );
    let want = i64s(8, "len");
    // ONNX's own case: the stored empty `X` and sizes [0, 0, 0].
    let (x0, x_shape) = f32s(8, "X");
    assert_eq!((x0.len(), x_shape.as_slice()), (0, &[0][..]));
    let mut m = Model8::new();
    assert_eq!(m.run(&x0, &splits).unwrap()[..], [want]);
    assert_eq!(m.run(&x0, &splits).unwrap().shape(), &[] as &[usize]);
    // Sizes that do not add up to 0, and an X that is not empty, are errors.
    assert!(matches!(
        m.run(&x0, &[1i64, 0, -1]),
        Err(Error::SplitSizes { dim: 0, .. })
    ));
    assert!(m.run(&[1.0f32], &splits).is_err());
    let x = [1.0f32; 6];
    let mut m = Model8Six::new();
    assert_eq!(m.run(&x, &[1i64, 2, 3]).unwrap()[..], [want]);
    assert_eq!(m.run(&x, &[6i64, 0, 0]).unwrap()[..], [want]);
    // Sizes that do not add up to the axis (ONNX's own [0, 0, 0] here, with 6 elements) or are
    // negative are errors, as for `split`.
    for bad in [[0i64, 0, 0], [4, 4, -2], [1, 2, 4]] {
        assert!(
            matches!(m.run(&x, &bad), Err(Error::SplitSizes { dim: 6, .. })),
            "{bad:?}"
        );
    }
}

/// Python-style positions given at run time: every one in range picks what Python's list
/// would, every one out of range is `Err(SeqPosition)` naming the op.
#[test]
fn run_time_positions_follow_python_lists() {
    let [x, y, z] = xyz(2);
    let mut m = Model2Run::new();
    for pe in -3i64..3 {
        for pa in -2i64..2 {
            let mut list = vec![&x, &y, &z];
            list.remove(pe.rem_euclid(3) as usize);
            let want = list[pa.rem_euclid(2) as usize];
            let out = m.run(&x, &y, &z, &[pe], &[pa]).unwrap();
            assert_close(&out, want);
        }
    }
}

#[test]
fn run_time_erase_out_of_range_is_an_error() {
    let [x, y, z] = xyz(2);
    let mut m = Model2Run::new();
    for bad in [3, -4, i64::MAX, i64::MIN] {
        match m.run(&x, &y, &z, &[bad], &[0]) {
            Err(Error::SeqPosition { op, pos, len }) => {
                assert_eq!((op, pos, len), ("erase", bad, 3))
            }
            other => panic!("erase at {bad}: {:?}", other.map(|t| t.to_vec())),
        }
    }
}

#[test]
fn run_time_at_out_of_range_is_an_error() {
    let [x, y, z] = xyz(2);
    let mut m = Model2Run::new();
    for bad in [2, -3] {
        let err = m.run(&x, &y, &z, &[0], &[bad]).unwrap_err();
        assert!(
            matches!(
                err,
                Error::SeqPosition {
                    op: "at",
                    len: 2,
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            err.to_string().contains("valid positions are -2 to 1"),
            "{err}"
        );
    }
    let (x7, _) = tensor_of::<f64>("sequences/model7.safetensors", "X");
    let mut m7 = Model7Run::new();
    assert!(matches!(
        m7.run(&x7, &[2i64]),
        Err(Error::SeqPosition {
            op: "at",
            len: 2,
            ..
        })
    ));
    assert_eq!(m7.run(&x7, &[-2i64]).unwrap()[..], x7[..12]);
}

#[test]
fn run_time_insert_out_of_range_is_an_error() {
    let [x, y, z] = xyz(3);
    let mut m = Model3Run::new();
    for bad in [3, -4] {
        let err = m.run(&x, &y, &z, &[0], &[bad], &[0]).unwrap_err();
        assert!(
            matches!(
                err,
                Error::SeqPosition {
                    op: "insert",
                    len: 2,
                    ..
                }
            ),
            "{err}"
        );
    }
    // Inserting at the end (position len) is allowed, as in Python.
    let out = m.run(&x, &y, &z, &[0], &[2], &[-1]).unwrap();
    assert_close(&out, &x);
}

kiln::network! {
    /// construct -> insert -> erase -> at on tensors the network computes (so they live in the
    /// arena): no op copies anything, `at` is a view, and `a` stays live while a sequence holds
    /// it although nothing reads it directly after `seq_construct`.
    pub net Chain(x: tensor<f32[4,8]>, y: tensor<f32[4,8]>) -> tensor<f32[4,8]> {
        let a = relu(x);
        let b = sigmoid(y);
        let c = tanh(x);
        let s = seq_construct(a, b);
        let s = insert(s, c, 0);
        let s = erase(s, -1);
        let e = at(s, 1);
        add(e, c)
    }
}

/// The plan of `Chain`: no copy op, the sequences hold their members, `at` is a member view.
#[test]
fn sequence_chain_plan_copies_nothing() {
    let plan = Chain::PLAN;
    assert!(!plan.contains("= copy"), "{plan}");
    assert!(plan.contains("= seq_construct"), "{plan}");
    let held = |names: &[&str]| {
        let list: Vec<String> = names.iter().map(|n| format!("{n} = activation")).collect();
        format!("sequence, holds {} (kept live)", list.join(", "))
    };
    assert!(plan.contains(&held(&["%2 a", "%3 b"])), "{plan}");
    assert!(plan.contains(&held(&["%4 c", "%2 a", "%3 b"])), "{plan}");
    assert!(plan.contains(&held(&["%4 c", "%2 a"])), "{plan}");
    assert!(plan.contains("%8 e = at"), "{plan}");
    assert!(
        plan.contains("member at byte 0 of %2 a = activation (no copy)"),
        "{plan}"
    );
    // Escape: `b` is read directly only by seq_construct (step 3) but held until `erase`
    // (step 5) drops it; `a` is held, then viewed by `at` and read by the add (step 7); the
    // add overwrites `c` in place (never a member view, which sits inside another buffer).
    let live = |name: &str| {
        let line = plan.lines().find(|l| l.contains(name)).unwrap();
        line.split_whitespace()
            .skip_while(|w| !w.starts_with('['))
            .take(2)
            .collect::<String>()
    };
    assert_eq!(live("%3 b = "), "[1,5]", "{plan}");
    assert_eq!(live("%2 a = "), "[0,7]", "{plan}");
    assert!(
        plan.contains("in-place, storage of %4 c = activation, output"),
        "{plan}"
    );
    // a, b and c are all live while the sequences hold them: three 128-byte tensors.
    assert_eq!(Chain::ARENA_BYTES, 3 * 128, "{plan}");
}

#[test]
fn sequence_chain_computes_python_list_semantics() {
    let x: Vec<f32> = (0..32).map(|i| (i as f32 - 16.0) / 8.0).collect();
    let y: Vec<f32> = (0..32).map(|i| (i as f32) / 10.0 - 1.0).collect();
    let mut m = Chain::new();
    let out = m.run(&x, &y).unwrap();
    // s = [a, b]; insert c at 0 -> [c, a, b]; erase -1 -> [c, a]; at 1 -> a = relu(x).
    let want: Vec<f32> = x.iter().map(|&v| v.max(0.0) + v.tanh()).collect();
    assert_close(&out, &want);
}

kiln::network! {
    /// concat_from_seq, stacking and the ordinary concat on parts the network computes: the
    /// producers write straight into the concatenated buffer.
    pub net FreeConcat(x: tensor<f32[2,8]>, y: tensor<f32[3,8]>, z: tensor<f32[2,8]>)
        -> (tensor<f32[5,8]>, tensor<f32[2,2,8]>, tensor<f32[4,8]>)
    {
        let a = relu(x);
        let b = tanh(y);
        let c = concat_from_seq(seq_construct(a, b), axis = 0);
        let d = sigmoid(x);
        let e = neg(z);
        let f = concat_from_seq(seq_construct(d, e), axis = 0, new_axis = true);
        let g = exp(x);
        let h = abs(z);
        (c, f, concat(g, h, axis = 0))
    }
}

/// All three concatenations are free: their parts are members of their buffers, the results
/// aliases of them, and no op copies.
#[test]
fn concatenations_of_computed_parts_are_free() {
    let plan = FreeConcat::PLAN;
    for part in ["%3 a", "%4 b", "%7 d", "%8 e", "%11 g", "%12 h"] {
        let line = plan
            .lines()
            .find(|l| l.contains(&format!("{part} = ")))
            .unwrap();
        assert!(line.contains("member at byte"), "{part}: {plan}");
    }
    assert_eq!(plan.matches("alias of %").count(), 3, "{plan}");
    // Without copies the arena holds just the three results (160, 128 and 128 bytes).
    assert_eq!(FreeConcat::ARENA_BYTES, 192 + 128 + 128, "{plan}");

    let x: Vec<f32> = (0..16).map(|i| i as f32 / 4.0 - 2.0).collect();
    let y: Vec<f32> = (0..24).map(|i| i as f32 / 6.0 - 2.0).collect();
    let z: Vec<f32> = (0..16).map(|i| 1.5 - i as f32 / 5.0).collect();
    let mut m = FreeConcat::new();
    let (c, f, cat) = m.run(&x, &y, &z).unwrap();
    let want_c: Vec<f32> = x
        .iter()
        .map(|v| v.max(0.0))
        .chain(y.iter().map(|v| v.tanh()))
        .collect();
    let want_f: Vec<f32> = x
        .iter()
        .map(|v| 1.0 / (1.0 + (-v).exp()))
        .chain(z.iter().map(|v| -v))
        .collect();
    let want_cat: Vec<f32> = x
        .iter()
        .map(|v| v.exp())
        .chain(z.iter().map(|v| v.abs()))
        .collect();
    assert_eq!(c.shape(), [5, 8]);
    assert_eq!(f.shape(), [2, 2, 8]);
    assert_close(&c, &want_c);
    assert_close(&f, &want_f);
    assert_close(&cat, &want_cat);
}

kiln::network! {
    /// A concatenation of a concatenation (DenseNet's pattern: each layer concatenates the
    /// previous concatenation with a new feature map). A free concatenation's result cannot
    /// also be a member of a second one (its parts would be placed in a buffer of their own,
    /// and the first concat emits no copy), so the second one copies.
    pub net ChainedConcat(x: tensor<f32[2,8]>) -> tensor<f32[6,8]> {
        let a = relu(x);
        let b = tanh(x);
        let c = concat(a, b, axis = 0);
        let d = exp(x);
        let e = concat(c, d, axis = 0);
        mul(e, 2.0)
    }
}

#[test]
fn a_concatenation_of_a_concatenation_is_computed() {
    let x: Vec<f32> = (0..16).map(|i| i as f32 / 4.0 - 2.0).collect();
    let want: Vec<f32> = x
        .iter()
        .map(|v| v.max(0.0))
        .chain(x.iter().map(|v| v.tanh()))
        .chain(x.iter().map(|v| v.exp()))
        .map(|v| 2.0 * v)
        .collect();
    let mut m = ChainedConcat::new();
    assert_close(&m.run(&x).unwrap(), &want);
}

/// A sequence saved as one safetensors file (`<name>.0`, `<name>.1`, ...) reads back equal,
/// and the file is what the `safetensors` crate itself reads.
#[test]
fn sequence_saves_and_loads_as_safetensors() {
    let a = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let b = [7.0f32, -8.5];
    let seq = kiln::Seq::new([Tensor::new(&a, &[2, 3]), Tensor::new(&b, &[2])]);
    let bytes = seq.to_safetensors("hidden").unwrap();

    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut names = st.names();
    names.sort();
    assert_eq!(names, ["hidden.0", "hidden.1"]);
    let t1 = st.tensor("hidden.1").unwrap();
    assert_eq!(
        (t1.dtype(), t1.shape()),
        (safetensors::Dtype::F32, &[2][..])
    );
    assert_eq!(
        t1.data(),
        [7.0f32.to_le_bytes(), (-8.5f32).to_le_bytes()].concat()
    );

    let back = kiln::SeqBuf::<f32>::from_safetensors(&bytes, "hidden").unwrap();
    assert_eq!(back.len(), 2);
    assert_eq!(back.at(0).unwrap().shape(), [2, 3]);
    assert_eq!(back.at(0).unwrap()[..], a);
    assert_eq!(back.at(-1).unwrap()[..], b);
    assert!(back.at(2).is_none() && back.at(-3).is_none());
    assert_eq!(back.to_safetensors("hidden").unwrap(), bytes);
    // Other tensors in the file are not part of the sequence.
    assert!(kiln::SeqBuf::<f32>::from_safetensors(&bytes, "other")
        .unwrap()
        .is_empty());

    let ids = [3i64, -1, 7];
    let seq = kiln::Seq::new([Tensor::new(&ids, &[3])]);
    let back = kiln::SeqBuf::<i64>::from_safetensors(&seq.to_safetensors("ids").unwrap(), "ids");
    assert_eq!(back.unwrap().at(0).unwrap()[..], ids);
}

#[test]
fn malformed_sequence_files_are_errors() {
    let a = [1.0f32, 2.0];
    let good = kiln::Seq::new([Tensor::new(&a, &[2]), Tensor::new(&a, &[1, 2])])
        .to_safetensors("s")
        .unwrap();
    let is_seq_err = |bytes: &[u8], name: &str| -> String {
        match kiln::SeqBuf::<f32>::from_safetensors(bytes, name) {
            Err(e @ Error::SeqFile { .. }) => e.to_string(),
            other => panic!("{name}: {other:?}"),
        }
    };
    // Every truncation, and garbage.
    for n in 0..good.len() {
        is_seq_err(&good[..n], "s");
    }
    is_seq_err(&[0xff; 64], "s");
    // The wrong dtype.
    let err = match kiln::SeqBuf::<f64>::from_safetensors(&good, "s") {
        Err(e) => e.to_string(),
        Ok(_) => panic!("f32 read as f64"),
    };
    assert!(err.contains("F32") && err.contains("f64"), "{err}");
    // A gap in the numbering, and names that are not numbers.
    let gap = [("s.0", &a[..]), ("s.2", &a[..])];
    let odd = [("s.0", &a[..]), ("s.01", &a[..])];
    let word = [("s.first", &a[..])];
    for (tensors, want) in [
        (&gap[..], "`s.1` is missing"),
        (&odd[..], "`s.01` is not numbered"),
        (&word[..], "`s.first` is not numbered"),
    ] {
        let views: Vec<_> = tensors
            .iter()
            .map(|(k, d)| {
                let v = safetensors::tensor::TensorView::new(
                    safetensors::Dtype::F32,
                    vec![d.len()],
                    bytemuck::cast_slice(d),
                )
                .unwrap();
                (*k, v)
            })
            .collect();
        let bytes = safetensors::serialize(views, None).unwrap();
        let err = is_seq_err(&bytes, "s");
        assert!(err.contains(want), "{err}");
    }
}

/// A model returning a sequence gives a `kiln::Seq` borrowing its arena, without allocating
/// per run; the sequence saves and loads back.
#[test]
fn sequences_are_returned_without_allocating() {
    let x: Vec<f32> = (0..24).map(|i| i as f32 - 11.5).collect();
    let y: Vec<f32> = (0..12).map(|i| i as f32 * 0.5).collect();
    let mut m = SeqOut::new();
    let (s, n) = m.run(&x, &y).unwrap();
    assert_eq!((s.len(), n[0]), (3, 3));
    let relu: Vec<f32> = x.iter().map(|v| v.max(0.0)).collect();
    assert_eq!(s.at(0).unwrap()[..], y[..]);
    assert_eq!(s.at(1).unwrap()[..], relu[..12]);
    assert_eq!(s.at(-1).unwrap()[..], relu[12..]);
    assert_eq!(s.at(2).unwrap().shape(), [3, 4]);
    assert!(s.at(3).is_none());
    let bytes = s.to_safetensors("s").unwrap();
    let back = kiln::SeqBuf::<f32>::from_safetensors(&bytes, "s").unwrap();
    assert_eq!(
        back.iter().collect::<Vec<_>>(),
        s.iter().collect::<Vec<_>>()
    );

    let n = kiln_tests::allocations_during(|| {
        for _ in 0..3 {
            let (s, _) = m.run(&x, &y).unwrap();
            assert_eq!(s.at(0).unwrap()[..], y[..]);
        }
    });
    assert_eq!(n, 0, "runs allocated");
    // The input element is copied into the arena, the pieces are views of relu's result.
    assert!(
        SeqOut::PLAN.contains(
            "= copy (an output is borrowed from the arena, and this is an input's bytes)"
        ),
        "{}",
        SeqOut::PLAN
    );
    // A run-time position copies the chosen element, and the plan says why.
    assert!(
        Model2Run::PLAN.contains("= at (copied: the element is chosen at run time)"),
        "{}",
        Model2Run::PLAN
    );
    assert!(
        SeqOut::PLAN.contains("member at byte 48"),
        "{}",
        SeqOut::PLAN
    );
}

kiln::network! {
    /// Declared in-place ops and a declared view: `relu_` and `add_` write over `h` (proven
    /// safe: nothing reads the old `h` again), and `v` is rows 2..4 of the result, no copy.
    pub net InPlace(x: tensor<f32[4,8]>, y: tensor<f32[4,8]>) -> (tensor<f32[2,8]>, tensor<f32[4,8]>) {
        let h = mul(x, 2.0);
        let h = h.relu_();
        let h = add_(h, y);
        let v = view(h, tensor<f32[2,8]>, offset = 16);
        (sigmoid(v), tanh(h))
    }
}

#[test]
fn declared_in_place_ops_and_views_share_the_buffer() {
    let plan = InPlace::PLAN;
    let line = |name: &str| plan.lines().find(|l| l.contains(name)).unwrap().to_string();
    assert!(
        line("= activation").contains("in-place, storage of"),
        "{plan}"
    );
    assert!(line("= add").contains("in-place, storage of"), "{plan}");
    assert!(line("v = view").contains("member at byte 64 of"), "{plan}");
    let x: Vec<f32> = (0..32).map(|i| i as f32 / 8.0 - 2.0).collect();
    let y: Vec<f32> = (0..32).map(|i| 1.0 - i as f32 / 16.0).collect();
    let h: Vec<f32> = x
        .iter()
        .zip(&y)
        .map(|(a, b)| (2.0 * a).max(0.0) + b)
        .collect();
    let mut m = InPlace::new();
    let (s, t) = m.run(&x, &y).unwrap();
    let want_s: Vec<f32> = h[16..].iter().map(|v| 1.0 / (1.0 + (-v).exp())).collect();
    let want_t: Vec<f32> = h.iter().map(|v| v.tanh()).collect();
    assert_eq!(s.shape(), [2, 8]);
    assert_close(&s, &want_s);
    assert_close(&t, &want_t);
}

kiln::network! {
    /// The README's example.
    pub net Pick(x: tensor<f32[2,3,4]>, y: tensor<f32[2,3,4]>, z: tensor<f32[2,3,4]>,
                 pos: tensor<i64[]>) -> (tensor<f32[2,9,4]>, tensor<f32[2,3,4]>) {
        let s = seq_construct(x, y, z);
        let t = erase(s, -3);                       // [y, z]
        (concat_from_seq(s, axis = 1), at(t, pos))  // pos given at run time
    }
}

#[test]
fn readme_example_runs() {
    let [x, y, z] = xyz(4);
    let (want, _) = f32s(4, "out");
    let mut m = Pick::new();
    let (c, e) = m.run(&x, &y, &z, &[-1i64]).unwrap();
    assert_close(&c, &want);
    assert_close(&e, &z);
    assert!(matches!(
        m.run(&x, &y, &z, &[2i64]),
        Err(Error::SeqPosition { op: "at", .. })
    ));
}

kiln::network! {
    /// A sequence input: the caller passes one `kiln::Seq` of three tensors.
    pub net SeqIn(s: seq<tensor<f32[2,3]>, 3>, pos: tensor<i64[]>)
        -> (tensor<f32[2,3]>, tensor<f32[6,3]>, seq<tensor<f32[2,3]>>)
    {
        (at(s, pos), concat_from_seq(s, axis = 0), erase(s, 0))
    }
}

#[test]
fn sequences_as_inputs() {
    let data: Vec<f32> = (0..18).map(|i| i as f32).collect();
    let parts: Vec<Tensor> = data.chunks(6).map(|c| Tensor::new(c, &[2, 3])).collect();
    let seq = kiln::Seq::new([parts[0], parts[1], parts[2]]);
    let mut m = SeqIn::new();
    let (a, c, rest) = m.run(&seq, &[-1i64]).unwrap();
    assert_eq!(a[..], data[12..]);
    assert_eq!((c.shape(), &c[..]), (&[6, 3][..], &data[..]));
    assert_eq!(rest.len(), 2);
    assert_eq!(rest.at(0).unwrap()[..], data[6..12]);
    assert!(matches!(
        m.run(&seq, &[3i64]),
        Err(Error::SeqPosition {
            op: "at",
            len: 3,
            ..
        })
    ));
    // A sequence read back from a file is an input too.
    let bytes = seq.to_safetensors("s").unwrap();
    let back = kiln::SeqBuf::<f32>::from_safetensors(&bytes, "s").unwrap();
    let loaded = kiln::Seq::new([
        back.at(0).unwrap(),
        back.at(1).unwrap(),
        back.at(2).unwrap(),
    ]);
    assert_eq!(m.run(&loaded, &[0i64]).unwrap().0[..], data[..6]);
    // Elements of the wrong size are an input error naming the element.
    let short = Tensor::new(&data[..5], &[5]);
    let bad = kiln::Seq::new([parts[0], short, parts[2]]);
    let err = m.run(&bad, &[0i64]).unwrap_err();
    assert!(err.to_string().contains("s.1"), "{err}");
}

kiln::network! {
    /// Views that change dtype: `h`'s 32 bytes read as i32 (same size), its bytes 8..24 as two
    /// i64 (offset 2 f32 elements = byte 8, aligned for i64), and its first 6 bytes as u8.
    pub net Retype(x: tensor<f32[2,4]>) -> (tensor<i32[2,4]>, tensor<i64[2]>, tensor<i32[6]>) {
        let h = relu(x);
        let bits = view(h, tensor<i32[2,4]>);
        let wide = view(h, tensor<i64[2]>, offset = 2);
        let bytes = view(h, tensor<u8[6]>);
        (add(bits, bits), add(wide, wide), cast(bytes, i32))
    }
}

#[test]
fn views_that_change_dtype_read_the_same_bytes() {
    let x: Vec<f32> = vec![1.5, -2.0, 3.25, 0.1, -0.5, 7.0, 1e-3, 42.0];
    // The reference: the bytes of relu(x), reinterpreted by the standard library.
    let h: Vec<f32> = x.iter().map(|v| v.max(0.0)).collect();
    let bytes: Vec<u8> = h.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let want_bits: Vec<i32> = h
        .iter()
        .map(|v| (v.to_bits() as i32).wrapping_mul(2))
        .collect();
    let want_wide: Vec<i64> = bytes[8..24]
        .chunks(8)
        .map(|c| i64::from_ne_bytes(c.try_into().unwrap()).wrapping_mul(2))
        .collect();
    let want_bytes: Vec<i32> = bytes[..6].iter().map(|&b| i32::from(b)).collect();
    let mut m = Retype::new();
    let (bits, wide, b) = m.run(&x).unwrap();
    assert_eq!(bits.shape(), [2, 4]);
    assert_eq!(bits[..], want_bits[..]);
    assert_eq!(wide[..], want_wide[..]);
    assert_eq!(b[..], want_bytes[..]);
    let plan = Retype::PLAN;
    assert!(
        plan.lines()
            .any(|l| l.contains("wide = view") && l.contains("member at byte 8 of")),
        "{plan}"
    );
}

kiln::network! {
    /// A split whose sizes are given at run time: a run-time sequence (its length and pieces
    /// are data), read by `at`, `len`, `erase`, `insert` and `concat_from_seq`. The sizes are
    /// the first `n` of `sizes` (a slice with a run-time end: their number is data too).
    pub net RunSplit(x: tensor<f32[2,6]>, sizes: tensor<i64[8]>, n: tensor<i64[1]>, pos: tensor<i64[]>, y: tensor<f32[2,1]>)
        -> (tensor<i64[]>, tensor<f32[2,?]>, tensor<f32[2,?]>, tensor<i64[]>, tensor<f32[2,?]>)
    {
        let first = slice(sizes, starts = sub(n, n), ends = n, axes = [0]);
        let s = split_to_seq(mul(x, 2.0), first, axis = 1);
        let piece = relu(at(s, pos));
        let t = erase(s, 0);
        let t = insert(t, y, -1);
        (len(s), piece, concat_from_seq(t, axis = 1), len(t), concat_from_seq(s, axis = -1))
    }
}

/// A naive `split` of `x` (`rows` x `cols`, row-major) along the columns.
fn split_cols(x: &[f32], cols: usize, sizes: &[usize]) -> Vec<Vec<f32>> {
    let mut at = 0;
    sizes
        .iter()
        .map(|&s| {
            let piece = x
                .chunks(cols)
                .flat_map(|row| row[at..at + s].to_vec())
                .collect();
            at += s;
            piece
        })
        .collect()
}

/// Joins pieces of `rows` rows along the columns (the reference `concat`).
fn join_cols(pieces: &[Vec<f32>], rows: usize) -> Vec<f32> {
    (0..rows)
        .flat_map(|r| {
            pieces.iter().flat_map(move |p| {
                let w = p.len() / rows;
                p[r * w..(r + 1) * w].to_vec()
            })
        })
        .collect()
}

/// `sizes` as `RunSplit`'s padded sizes input and its count.
fn padded(sizes: &[i64]) -> ([i64; 8], [i64; 1]) {
    let mut p = [0i64; 8];
    p[..sizes.len()].copy_from_slice(sizes);
    (p, [sizes.len() as i64])
}

#[test]
fn split_with_run_time_sizes_is_a_run_time_sequence() {
    let x: Vec<f32> = (0..12).map(|i| i as f32 - 5.0).collect();
    let x2: Vec<f32> = x.iter().map(|v| v * 2.0).collect();
    let y = [10.0f32, 20.0];
    let mut m = RunSplit::new();
    for (sizes, pos) in [
        (vec![1usize, 2, 3], 1i64),
        (vec![5, 1], -1),
        (vec![2, 0, 1, 3], -3),
    ] {
        let pieces = split_cols(&x2, 6, &sizes);
        let n = sizes.len();
        let sizes_i: Vec<i64> = sizes.iter().map(|&s| s as i64).collect();
        let (p, k) = padded(&sizes_i);
        let (len_s, piece, joined, len_t, whole) = m.run(&x, &p, &k, &[pos], &y).unwrap();
        assert_eq!(len_s[..], [n as i64]);
        let want = &pieces[pos.rem_euclid(n as i64) as usize];
        assert_eq!(piece.shape(), [2, want.len() / 2]);
        let relu: Vec<f32> = want.iter().map(|v| v.max(0.0)).collect();
        assert_eq!(piece[..], relu[..]);
        // erase(s, 0), then y before the last element (Python's insert(-1, y)).
        let mut t: Vec<Vec<f32>> = pieces[1..].to_vec();
        let at = t.len() - 1;
        t.insert(at, y.to_vec());
        assert_eq!(len_t[..], [t.len() as i64]);
        let want_joined = join_cols(&t, 2);
        assert_eq!(joined.shape(), [2, want_joined.len() / 2]);
        assert_eq!(joined[..], want_joined[..]);
        assert_eq!((whole.shape(), &whole[..]), (&[2, 6][..], &x2[..]));
    }
    // One piece: erasing it leaves an empty sequence, where position -1 does not exist (ONNX
    // inserts at `-len..=len`, unlike Python's list).
    let (p, k) = padded(&[6]);
    assert_eq!(
        m.run(&x, &p, &k, &[0], &y).unwrap_err(),
        Error::SeqPosition {
            op: "insert",
            pos: -1,
            len: 0
        }
    );
}

#[test]
fn run_time_sequences_refuse_bad_positions_and_sizes() {
    let x: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let y = [1.0f32, 2.0];
    let mut m = RunSplit::new();
    // Three pieces: positions -3..3 exist, 3 and -4 do not.
    for pos in [3i64, -4, i64::MAX, i64::MIN] {
        let (p, k) = padded(&[2, 2, 2]);
        let err = m.run(&x, &p, &k, &[pos], &y).unwrap_err();
        assert_eq!(
            err,
            Error::SeqPosition {
                op: "at",
                pos,
                len: 3
            }
        );
    }
    // Sizes that are negative or do not add up to the axis.
    for bad in [vec![7i64, -1], vec![1, 2], vec![]] {
        assert!(
            matches!(
                m.run(&x, &padded(&bad).0, &padded(&bad).1, &[0], &y),
                Err(Error::SplitSizes { dim: 6, .. })
            ),
            "{bad:?}"
        );
    }
    // The model still runs after errors.
    let (p, k) = padded(&[3, 3]);
    assert!(m.run(&x, &p, &k, &[0], &y).is_ok());
}

kiln::network! {
    /// A sequence input of any length (`kiln::AsSeq`): rows of 4 values, a different number
    /// per element. The element at `pos` is read, `pos` is erased, `x` inserted in front.
    pub net SeqAny(s: seq<tensor<f32[?,4]>>, pos: tensor<i64[]>, x: tensor<f32[1,4]>)
        -> (tensor<i64[]>, tensor<f32[?,4]>, tensor<f32[?,4]>, tensor<f32[?,4]>)
    {
        let picked = at(s, pos);
        let t = insert(erase(s, pos), x, 0);
        (len(s), add(picked, 1.0), concat_from_seq(s, axis = 0), concat_from_seq(t, axis = 0))
    }
}

/// Elements of `rows[i]` rows of 4 values each, counting up from `start`.
fn row_blocks(rows: &[usize], start: f32) -> (Vec<Vec<f32>>, Vec<[usize; 2]>) {
    let mut next = start;
    let data = rows
        .iter()
        .map(|&r| {
            (0..r * 4)
                .map(|_| {
                    next += 1.0;
                    next
                })
                .collect()
        })
        .collect();
    (data, rows.iter().map(|&r| [r, 4]).collect())
}

/// `data[i]` with `shapes[i]`, as tensors (a sequence input of any length).
fn tensors<'a, T: kiln::Scalar, const R: usize>(
    data: &'a [Vec<T>],
    shapes: &'a [[usize; R]],
) -> Vec<Tensor<'a, T>> {
    data.iter()
        .zip(shapes)
        .map(|(d, s)| Tensor::new(d, s))
        .collect()
}

#[test]
fn a_sequence_input_of_any_length() {
    let x = [-1.0f32, -2.0, -3.0, -4.0];
    let mut m = SeqAny::new();
    for (rows, pos) in [
        (vec![2usize, 1, 3], 1i64),
        (vec![1], 0),
        (vec![0, 2, 1, 1, 4], -2),
    ] {
        let (data, shapes) = row_blocks(&rows, 0.0);
        let elems = tensors(&data, &shapes);
        let (n, picked, all, t) = m.run(&elems, &[pos], &x).unwrap();
        assert_eq!(n[..], [rows.len() as i64]);
        let p = pos.rem_euclid(rows.len() as i64) as usize;
        let want: Vec<f32> = data[p].iter().map(|v| v + 1.0).collect();
        assert_eq!(
            (picked.shape(), &picked[..]),
            (&[rows[p], 4][..], &want[..])
        );
        let flat: Vec<f32> = data.concat();
        assert_eq!(
            (all.shape(), &all[..]),
            (&[flat.len() / 4, 4][..], &flat[..])
        );
        let mut list = data.clone();
        list.remove(p);
        list.insert(0, x.to_vec());
        let flat_t = list.concat();
        assert_eq!(
            (t.shape(), &t[..]),
            (&[flat_t.len() / 4, 4][..], &flat_t[..])
        );
    }
    // A `kiln::Seq`, and a sequence read back from a file, are inputs too.
    let (data, shapes) = row_blocks(&[1, 2], 0.0);
    let seq = kiln::Seq::new([
        Tensor::new(&data[0], &shapes[0]),
        Tensor::new(&data[1], &shapes[1]),
    ]);
    assert_eq!(
        m.run(&seq, &[1], &x).unwrap().1[..],
        data[1].iter().map(|v| v + 1.0).collect::<Vec<_>>()[..]
    );
    let back =
        kiln::SeqBuf::<f32>::from_safetensors(&seq.to_safetensors("s").unwrap(), "s").unwrap();
    assert_eq!(m.run(&back, &[0], &x).unwrap().0[..], [2]);
}

#[test]
fn a_sequence_input_of_any_length_is_checked() {
    let x = [0.0f32; 4];
    let mut m = SeqAny::new();
    let good = [1.0f32; 8];
    let bad = [1.0f32; 6];
    // An element whose size along a fixed axis is not 4, or of another rank: `Err` naming it.
    let err = m
        .run(
            &[Tensor::new(&good, &[2, 4]), Tensor::new(&bad, &[2, 3])],
            &[0],
            &x,
        )
        .unwrap_err();
    assert_eq!(
        err,
        Error::SeqElement {
            seq: "s",
            index: 1,
            expected: "tensor<f32[?,4]>",
            shape: vec![2, 3]
        }
    );
    assert!(err.to_string().contains("element 1"), "{err}");
    assert!(m.run(&[Tensor::new(&good, &[8])], &[0], &x).is_err());
    // An empty sequence has no element 0 to read or erase.
    let none: Vec<Tensor<'_>> = Vec::new();
    assert_eq!(
        m.run(&none, &[0], &x).unwrap_err(),
        Error::SeqPosition {
            op: "at",
            pos: 0,
            len: 0
        }
    );
    // Out of range positions.
    for pos in [1i64, -2] {
        assert!(matches!(
            m.run(&[Tensor::new(&good, &[2, 4])], &[pos], &x),
            Err(Error::SeqPosition {
                op: "at",
                len: 1,
                ..
            })
        ));
    }
}

/// Run-time sequences live in grow-only buffers: the first run allocates, later runs with the
/// same or smaller sequences allocate nothing.
#[test]
fn run_time_sequences_allocate_nothing_in_steady_state() {
    let x = [0.5f32; 4];
    let mut m = SeqAny::new();
    let (big, big_shapes) = row_blocks(&[3, 1, 4, 2], 0.0);
    let (small, small_shapes) = row_blocks(&[2, 2], 0.0);
    let big = tensors(&big, &big_shapes);
    let small = tensors(&small, &small_shapes);
    let first = kiln_tests::allocations_during(|| {
        m.run(&big, &[2], &x).unwrap();
    });
    assert!(first > 0, "the first run fills the buffers");
    let n = kiln_tests::allocations_during(|| {
        for _ in 0..3 {
            assert_eq!(m.run(&big, &[2], &x).unwrap().0[..], [4]);
            assert_eq!(m.run(&small, &[-1], &x).unwrap().0[..], [2]);
        }
    });
    assert_eq!(n, 0, "steady-state runs allocated");
    let mut s = RunSplit::new();
    let xs: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let y = [0.0f32; 2];
    let (six, six_n) = padded(&[1, 1, 1, 1, 1, 1]);
    let (two, two_n) = padded(&[4, 2]);
    // The larger sizes first: the piece at -1 of [4, 2] is larger than any of six 1s.
    s.run(&xs, &six, &six_n, &[0], &y).unwrap();
    s.run(&xs, &two, &two_n, &[-1], &y).unwrap();
    let n = kiln_tests::allocations_during(|| {
        for _ in 0..3 {
            s.run(&xs, &six, &six_n, &[0], &y).unwrap();
            s.run(&xs, &two, &two_n, &[-1], &y).unwrap();
        }
    });
    assert_eq!(n, 0, "steady-state runs allocated");
}

kiln::network! {
    /// A sequence input of any length whose elements all have one shape: `at` gives a static
    /// tensor (in the arena), elements stack along a new axis, and `insert`/`erase` take their
    /// default positions (the end, the last).
    pub net Stack(s: seq<tensor<i32[2,3]>>, pos: tensor<i64[]>, y: tensor<i32[2,3]>)
        -> (tensor<i32[?,2,3]>, tensor<i32[2,3]>, tensor<i32[2,?]>)
    {
        let t = erase(insert(s, y));
        let u = insert(s, y);
        (concat_from_seq(t, axis = 0, new_axis = true), add(at(u, pos), y), concat_from_seq(u, axis = -1))
    }
}

#[test]
fn run_time_sequences_stack_and_take_default_positions() {
    let y: Vec<i32> = (0..6).map(|i| 100 + i).collect();
    let elems: Vec<Vec<i32>> = (0..3)
        .map(|k| (0..6).map(|i| k * 10 + i).collect())
        .collect();
    let shapes = [[2usize, 3]; 3];
    let seq = tensors(&elems, &shapes);
    let mut m = Stack::new();
    for n in 0..=3 {
        let part = &seq[..n];
        let (stacked, picked, joined) = m.run(&part, &[-1], &y).unwrap();
        assert_eq!(stacked.shape(), [n, 2, 3]);
        assert_eq!(stacked[..], elems[..n].concat()[..]);
        // `u` ends with `y`: position -1 is `y` itself.
        let twice: Vec<i32> = y.iter().map(|v| 2 * v).collect();
        assert_eq!((picked.shape(), &picked[..]), (&[2, 3][..], &twice[..]));
        let mut u: Vec<&[i32]> = elems[..n].iter().map(|e| &e[..]).collect();
        u.push(&y);
        let want: Vec<i32> = (0..2)
            .flat_map(|r| u.iter().flat_map(move |e| e[r * 3..r * 3 + 3].to_vec()))
            .collect();
        assert_eq!(
            (joined.shape(), &joined[..]),
            (&[2, 3 * (n + 1)][..], &want[..])
        );
    }
    let part = &seq[..2];
    assert_eq!(
        m.run(&part, &[3], &y).unwrap_err(),
        Error::SeqPosition {
            op: "at",
            pos: 3,
            len: 3
        }
    );
}

kiln::network! {
    /// A run-time sequence holds copies: `h` may be overwritten in place after it was inserted
    /// (which a compile-time sequence holding `h` would refuse), and the sequence keeps the
    /// value `h` had.
    pub net CopyIn(s: seq<tensor<f32[?,4]>>, x: tensor<f32[1,4]>) -> (tensor<f32[?,4]>, tensor<f32[1,4]>) {
        let h = mul(x, 2.0);
        let t = insert(s, h, 0);
        let h = h.relu_();
        (concat_from_seq(t, axis = 0), h)
    }
}

#[test]
fn run_time_sequences_hold_copies() {
    let x = [-1.0f32, 2.0, -3.0, 4.0];
    let e = [7.0f32; 8];
    let mut m = CopyIn::new();
    let (t, h) = m.run(&[Tensor::new(&e, &[2, 4])], &x).unwrap();
    assert_eq!(t.shape(), [3, 4]);
    assert_eq!(t[..4], [-2.0, 4.0, -6.0, 8.0]);
    assert_eq!(t[4..], e[..]);
    assert_eq!(h[..], [0.0, 4.0, 0.0, 8.0]);
    // Nothing of the arena is held by the sequence: the plan has no sequence value.
    assert!(!CopyIn::PLAN.contains("sequence"), "{}", CopyIn::PLAN);
}

kiln::network! {
    /// Inserting a tensor whose sizes are known only at run time (an element read back, through
    /// a reshape) into a run-time sequence.
    pub net Reinsert(s: seq<tensor<f32[?,2]>>) -> (tensor<f32[?,2]>, tensor<i64[]>) {
        let first = reshape(relu(at(s, 0)), [-1, 2]);
        let t = insert(s, first);
        (concat_from_seq(t, axis = 0), len(t))
    }
}

#[test]
fn run_time_sized_tensors_go_into_run_time_sequences() {
    let a = [-1.0f32, 2.0, 3.0, -4.0];
    let b = [5.0f32, 6.0];
    let mut m = Reinsert::new();
    let (all, n) = m
        .run(&[Tensor::new(&a, &[2, 2]), Tensor::new(&b, &[1, 2])])
        .unwrap();
    assert_eq!(n[..], [3]);
    assert_eq!(all.shape(), [5, 2]);
    assert_eq!(
        all[..],
        [-1.0, 2.0, 3.0, -4.0, 5.0, 6.0, 0.0, 2.0, 3.0, 0.0]
    );
}

kiln::network! {
    /// Returns run-time sequences (`kiln::RunSeq`, borrowed from the model's buffers).
    pub net SeqBack(s: seq<tensor<f32[?,4]>>, x: tensor<f32[1,4]>, y: tensor<f32[2,5]>, sizes: tensor<i64[2]>)
        -> (seq<tensor<f32[?,4]>>, seq<tensor<f32[2,?]>>)
    {
        (insert(s, relu(x), 0), split_to_seq(y, sizes, axis = 1))
    }
}

#[test]
fn run_time_sequences_are_returned_borrowed() {
    let x = [-1.0f32, 1.0, -2.0, 2.0];
    let y: Vec<f32> = (0..10).map(|i| i as f32).collect();
    let (data, shapes) = row_blocks(&[2, 1], 0.0);
    let elems = tensors(&data, &shapes);
    let mut m = SeqBack::new();
    {
        let (t, parts) = m.run(&elems, &x, &y, &[1i64, 4]).unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t.at(0).unwrap()[..], [0.0, 1.0, 0.0, 2.0]);
        assert_eq!(
            (t.at(-1).unwrap().shape(), &t.at(-1).unwrap()[..]),
            (&[1, 4][..], &data[1][..])
        );
        assert!(t.at(3).is_none());
        let pieces = split_cols(&y, 5, &[1, 4]);
        let got: Vec<Vec<f32>> = parts.iter().map(|p| p.to_vec()).collect();
        assert_eq!(got, pieces);
        assert_eq!(parts.at(1).unwrap().shape(), [2, 4]);
        // Saved and read back as any sequence.
        let back =
            kiln::SeqBuf::<f32>::from_safetensors(&t.to_safetensors("t").unwrap(), "t").unwrap();
        assert_eq!(back.len(), 3);
        assert_eq!(back.at(2).unwrap()[..], data[1][..]);
    }
    let n = kiln_tests::allocations_during(|| {
        for _ in 0..3 {
            let (t, parts) = m.run(&elems, &x, &y, &[3i64, 2]).unwrap();
            assert_eq!((t.len(), parts.len()), (3, 2));
        }
    });
    assert_eq!(n, 0, "runs allocated");
}
