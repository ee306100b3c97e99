//! The weights file is an ONNX model, not safetensors.

kiln::network! {
    net Net(x: vec<20xf32>) -> vec<32xf32> {
        weights "../../data/mlp.onnx";
        dense(x, fc1: weights<20 -> 32>)
    }
}

fn main() {}
