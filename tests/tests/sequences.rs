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
    /// test_sequence_model8: the length of a split whose sizes are given at run time. ONNX's
    /// stored case splits an empty `X` (`[0]`), which kiln cannot declare (sizes are at least
    /// 1), so `X` has 6 elements here; the length does not depend on them.
    pub net Model8(x: tensor<f32[6]>, splits: tensor<i64[3]>) -> tensor<i64[]> {
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
    let x = [1.0f32; 6];
    let mut m = Model8::new();
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
