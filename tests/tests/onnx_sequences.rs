//! ONNX sequences at the model boundary, through the build.rs path: `data/onnx-seq-io/model.onnx`
//! (`scripts/gen_onnx_seq_io.py`) takes a sequence input `S` (its length, 3, given to the builder
//! with `.seq_input("S", 3)`) and returns a sequence; compiled by the tests' build script and
//! compared with onnxruntime's outputs stored beside it.

use kiln::Error;
use kiln_tests::tensor_of;

#[allow(dead_code, clippy::all)]
mod model {
    kiln::include_model!("onnx_seq_io");
}
use model::OnnxSeqIo;

fn f32s(name: &str) -> Vec<f32> {
    tensor_of::<f32>("onnx-seq-io/io.safetensors", name).0
}
fn i64s(name: &str) -> i64 {
    tensor_of::<i64>("onnx-seq-io/io.safetensors", name).0[0]
}

#[test]
fn sequence_input_and_output_match_onnxruntime() {
    let s: Vec<Vec<f32>> = (0..3).map(|k| f32s(&format!("S.{k}"))).collect();
    let (x, y) = (f32s("X"), f32s("Y"));
    let seq = kiln::Seq::new([
        kiln::Tensor::new(&s[0][..], &[2, 3]),
        kiln::Tensor::new(&s[1][..], &[2, 3]),
        kiln::Tensor::new(&s[2][..], &[2, 3]),
    ]);
    let mut m = OnnxSeqIo::new();
    let (s1, n, e, stacked) = m.run(&seq, &x, &y, &[i64s("pos")], &[i64s("at")]).unwrap();
    assert_eq!(s1.len(), 4);
    for (k, t) in s1.iter().enumerate() {
        assert_eq!(
            (t.shape(), &t[..]),
            (&[2, 3][..], &f32s(&format!("S1.{k}"))[..])
        );
    }
    assert_eq!(n[..], [i64s("n")]);
    assert_eq!(&e[..], &f32s("e")[..]);
    assert_eq!(
        (stacked.shape(), &stacked[..]),
        (&[4, 2, 3][..], &f32s("stacked")[..])
    );
}

#[test]
fn run_time_positions_out_of_range_are_errors() {
    let s = vec![0.0f32; 6];
    let seq = kiln::Seq::new([
        kiln::Tensor::new(&s[..], &[2, 3]),
        kiln::Tensor::new(&s[..], &[2, 3]),
        kiln::Tensor::new(&s[..], &[2, 3]),
    ]);
    let mut m = OnnxSeqIo::new();
    // Insert into 4 elements: -4..=4 are positions; picking from 5: -5..5.
    assert!(m
        .run(&seq, &s, &s, &[5], &[0])
        .is_err_and(|e| matches!(e, Error::SeqPosition { .. })));
    assert!(m
        .run(&seq, &s, &s, &[0], &[5])
        .is_err_and(|e| matches!(e, Error::SeqPosition { .. })));
    assert!(m.run(&seq, &s, &s, &[-4], &[-5]).is_ok());
}
