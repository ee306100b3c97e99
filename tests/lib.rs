//! The networks kiln's integration tests run, written in the DSL, and helpers to compare them
//! with onnxruntime's outputs.
//!
//! `scripts/gen_testdata.py` builds the same networks as ONNX models with the same weights,
//! runs onnxruntime on them and writes `data/<net>_io.safetensors` (`x`: input, `y`: output).
//! The tests only read those files: no Python at test time.

use safetensors::SafeTensors;

kiln::network! {
    /// A three-layer perceptron over a batch of 3.
    pub net Mlp(x: vec<20xf32, batch = 3>) -> vec<5xf32, batch = 3> {
        weights "data/mlp.safetensors";
        let h = dense(x, fc1: weights<20 -> 32>).relu();
        let h = dense(h, fc2: weights<32 -> 16>).tanh();
        let h = dense(h, fc3: weights<16 -> 5>);
        softmax(h)
    }
}

kiln::network! {
    /// LeNet-5 style: conv, max pool, conv, average pool, three dense layers.
    pub net LeNet(x: fm<1xf32[28,28]>) -> vec<10xf32> {
        weights "data/lenet.safetensors";
        let h = conv2d(x, conv1: weights<1 -> 5x5xf32 -> 6>, pad = 2).relu();
        let h = max_pool(h, 2x2, stride = 2);
        let h = conv2d(h, conv2: weights<6 -> 5x5xf32 -> 16>).relu6();
        let h = avg_pool(h, 2x2, stride = 2);
        let h = dense(flatten(h), fc1: weights<400 -> 120>).sigmoid();
        let h = dense(h, fc2: weights<120 -> 84>).leaky_relu(alpha = 0.1);
        dense(h, fc3: weights<84 -> 10>)
    }
}

kiln::network! {
    /// Convolutions deeper than one depth block of the x86 GEMM (`k` = 900 and 450 per group),
    /// whose weights are stored pre-packed: one with a bias and a folded batch norm, one
    /// grouped.
    pub net Deep(x: fm<8xf32[6,6]>) -> vec<10xf32> {
        weights "data/deep.safetensors";
        let a = conv2d(x, c1: weights<8 -> 1x1xf32 -> 100>, bias = false);
        let a = batch_norm(a, bn1: norm<100xf32>).relu();
        let b = conv2d(a, c2: weights<100 -> 3x3xf32 -> 16>, pad = 1);
        let b = batch_norm(b, bn2: norm<16xf32>);
        let c = conv2d(a, c3: weights<100 -> 3x3xf32 -> 8>, groups = 2, pad = 1).relu();
        let d = concat(b, c);
        dense(flatten(global_avg_pool(d)), head: weights<24 -> 10>)
    }
}

kiln::network! {
    /// `Deep` on a 112x112 map (same weights): its pointwise, im2col and grouped convolutions
    /// are large enough for `set_threads` to split them (`tests/threads.rs`).
    pub net DeepWide(x: fm<8xf32[112,112]>) -> vec<10xf32> {
        weights "data/deep.safetensors";
        let a = conv2d(x, c1: weights<8 -> 1x1xf32 -> 100>, bias = false);
        let a = batch_norm(a, bn1: norm<100xf32>).relu();
        let b = conv2d(a, c2: weights<100 -> 3x3xf32 -> 16>, pad = 1);
        let b = batch_norm(b, bn2: norm<16xf32>);
        let c = conv2d(a, c3: weights<100 -> 3x3xf32 -> 8>, groups = 2, pad = 1).relu();
        let d = concat(b, c);
        dense(flatten(global_avg_pool(d)), head: weights<24 -> 10>)
    }
}

kiln::network! {
    /// An inverted-residual block (expand, depthwise, project, batch norms, residual add) with
    /// side branches joined by concat, a squeeze-excitation style broadcast multiply, pooling
    /// and a classifier head.
    pub net Block(x: fm<8xf32[16,16]>) -> vec<10xf32> {
        weights "data/block.safetensors";
        let a = conv2d(x, expand: weights<8 -> 1x1xf32 -> 16>, bias = false);
        let a = batch_norm(a, bn1: norm<16xf32>).relu6();
        let a = conv2d(a, dw: weights<16 -> 3x3xf32 -> 16>, groups = 16, pad = same, bias = false);
        let a = batch_norm(a, bn2: norm<16xf32>).relu();
        let a = conv2d(a, project: weights<16 -> 1x1xf32 -> 8>, bias = false);
        let a = batch_norm(a, bn3: norm<8xf32>);
        let r = add(a, x);
        let r = batch_norm(r, bn4: norm<8xf32>);
        let b = conv2d(pad(x, 1), side: weights<8 -> 3x3xf32 -> 8>, stride = 2);
        let b = leaky_relu(b, alpha = 0.2);
        let d = conv2d(x, dil: weights<8 -> 3x3xf32 -> 8>, dilation = 2, pad = 2, stride = 2);
        let r = max_pool(r, 2x2, stride = 2);
        let c = concat(r, b, d);
        let s = global_avg_pool(c).sigmoid();
        let c = mul(c, s);
        let c = avg_pool(c, 3x3, stride = 2, pad = 1);
        let g = flatten(global_avg_pool(c));
        softmax(dense(g, head: weights<24 -> 10>))
    }
}

/// Residual blocks (`scripts/gen_testdata.py`'s `residual`), written twice: with `add`, which the
/// compiler fuses into the convolution feeding it (its GEMM epilogue adds the other operand),
/// and with `add_`, which it never fuses (a declared in-place op keeps its own kernel), so
/// `tests/fusion.rs` can compare the fused network with onnxruntime and with the unfused one.
/// The cases: an im2col grouped convolution plus the network's input, then ReLU; a pointwise
/// one after a folded batch norm, then ReLU6; two convolutions added together (the later one,
/// the `add`'s second operand, takes the first as its residual); a convolution deeper than one
/// GEMM depth block (`c2`, `k = 900`) plus a branch with a sigmoid, then tanh.
macro_rules! residual_net {
    ($(#[$doc:meta])* $name:ident, $add:ident) => {
        kiln::network! {
            $(#[$doc])*
            pub net $name(x: fm<8xf32[10,10]>) -> vec<10xf32> {
                weights "data/residual.safetensors";
                let a = conv2d(x, c1: weights<8 -> 1x1xf32 -> 100>, bias = false);
                let a = batch_norm(a, bn1: norm<100xf32>).relu();
                let c = conv2d(a, c3: weights<100 -> 3x3xf32 -> 8>, groups = 2, pad = 1);
                let c = $add(c, x).relu();
                let q = conv2d(c, c4: weights<8 -> 1x1xf32 -> 100>, bias = false);
                let q = batch_norm(q, bn4: norm<100xf32>);
                let q = $add(q, a).relu6();
                let s = conv2d(q, c5: weights<100 -> 3x3xf32 -> 8>, groups = 2, pad = 1);
                let t = conv2d(a, c6: weights<100 -> 3x3xf32 -> 8>, groups = 2, pad = 1);
                let s = $add(s, t);
                let u = conv2d(a, c7: weights<100 -> 3x3xf32 -> 16>, pad = 1).sigmoid();
                let b = conv2d(q, c2: weights<100 -> 3x3xf32 -> 16>, pad = 1);
                let b = $add(b, u).tanh();
                let d = concat(b, s);
                dense(flatten(global_avg_pool(d)), head: weights<24 -> 10>)
            }
        }
    };
}

residual_net!(
    /// The residual blocks with their `add`s fused into the convolutions.
    Residual,
    add
);
residual_net!(
    /// The same blocks with every `add` a separate (in-place) op.
    ResidualUnfused,
    add_
);

kiln::network! {
    /// Two 3x3 stride-1 convolutions the compiler runs with Winograd F(4x4, 3x3) (64 channels
    /// in, 72 out, at least 49 output tiles): a folded batch norm and a ReLU on the first,
    /// asymmetric padding (ragged tiles), a bias and a leaky ReLU on the second.
    pub net Wino(x: fm<64xf32[28,28]>) -> fm<72xf32[29,27]> {
        weights "data/wino.safetensors";
        let a = conv2d(x, c1: weights<64 -> 3x3xf32 -> 72>, pad = 1, bias = false);
        let a = batch_norm(a, bn1: norm<72xf32>).relu();
        let b = conv2d(a, c2: weights<72 -> 3x3xf32 -> 72>, pad = (2, 1, 1, 0));
        leaky_relu(b, alpha = 0.1)
    }
}

kiln::network! {
    /// A 3x3 stride-1 convolution of 256 channels on 16 output tiles (ResNet-50's 14x14
    /// layers), whose algorithm the CPU decides (`contract::few_tiles`): Winograd, or im2col +
    /// GEMM where `Kernels::few_tiles_winograd` is unset (AVX-512 on Intel,
    /// `KILN_FEW_TILES=im2col`), both weight preparations in the parameters; a folded batch
    /// norm and a ReLU.
    pub net WinoWide(x: fm<256xf32[14,14]>) -> fm<256xf32[14,14]> {
        weights "data/wino_wide.safetensors";
        let a = conv2d(x, c1: weights<256 -> 3x3xf32 -> 256>, pad = 1, bias = false);
        batch_norm(a, bn1: norm<256xf32>).relu()
    }
}

kiln::network! {
    /// Convolutions the compiler also plans in the blocked channel layout NCHW16c (3x3 through
    /// im2col on 28x28 maps, channels in whole blocks of 16, four blocks out, a batch of two):
    /// values stored blocked between convolutions, a residual stored blocked (`a`) and one
    /// converted from the model's input (`x`), the input converted on the way in and the
    /// stride-2 result on the way out to the pool; the stride-1 layers run through the blocked
    /// Winograd convolution, the stride-2 one through the direct one (see
    /// `scripts/gen_testdata.py`).
    pub net Blocked(x: fm<64xf32[28,28], batch = 2>) -> vec<10xf32, batch = 2> {
        weights "data/blocked.safetensors";
        let a = conv2d(x, c1: weights<64 -> 3x3xf32 -> 64>, pad = 1, bias = false);
        let a = batch_norm(a, bn1: norm<64xf32>).relu();
        let b = conv2d(a, c2: weights<64 -> 3x3xf32 -> 64>, pad = 1).relu();
        let e = add(conv2d(b, c5: weights<64 -> 3x3xf32 -> 64>, pad = 1), a);
        let c = add(conv2d(e, c3: weights<64 -> 3x3xf32 -> 64>, pad = 1), x).relu();
        let d = conv2d(c, c4: weights<64 -> 3x3xf32 -> 64>, stride = 2, pad = 1).relu();
        let f = conv2d(c, c8: weights<64 -> 3x3xf32 -> 32>, pad = 1).relu();
        let h = concat(global_avg_pool(d), global_avg_pool(f));
        dense(flatten(h), head: weights<96 -> 10>)
    }
}

kiln::network! {
    /// The digits example's network, over a batch of 32 (see examples/digits).
    pub net Digits32(x: fm<1xf32[8,8], batch = 32>) -> vec<10xf32, batch = 32> {
        weights "../examples/digits/data/digits.safetensors";
        let h = conv2d(x, conv1: weights<1 -> 3x3xf32 -> 16>, pad = same).relu();
        let h = max_pool(h, 2x2, stride = 2);
        let h = dense(flatten(h), fc1: weights<256 -> 64>).relu();
        softmax(dense(h, fc2: weights<64 -> 10>))
    }
}

kiln::network! {
    /// A transformer-style block on a `[1, 6, 16]` sequence: layer norm written from reduce
    /// ops, two-head attention (matmul, transpose, softmax on the last axis), a residual add,
    /// and two reductions of the result (see `data/typed/README.md`).
    pub net Transformer(x: tensor<f32[1, 6, 16]>) -> (tensor<f32[1, 6, 16]>, tensor<f32[1, 16]>, tensor<f32[6]>) {
        weights "data/typed/transformer.safetensors";
        let mu = reduce_mean(x, axes = [-1]);
        let d = sub(x, mu);
        let var = reduce_mean(mul(d, d), axes = [-1]);
        let h = div(d, sqrt(add(var, 1e-5)));
        let h = add(mul(h, ln_g: tensor<f32[16]>), ln_b: tensor<f32[16]>);
        let q = matmul(h, wq: tensor<f32[16, 16]>);
        let k = matmul(h, wk: tensor<f32[16, 16]>);
        let v = matmul(h, wv: tensor<f32[16, 16]>);
        let q = transpose(reshape(q, [1, 6, 2, 8]), [0, 2, 1, 3]);
        let k = transpose(reshape(k, [1, 6, 2, 8]), [0, 2, 3, 1]);
        let v = transpose(reshape(v, [1, 6, 2, 8]), [0, 2, 1, 3]);
        let s = softmax(mul(matmul(q, k), 0.35355339), axis = -1);
        let o = reshape(transpose(matmul(s, v), [0, 2, 1, 3]), [1, 6, 16]);
        let o = add(matmul(o, wo: tensor<f32[16, 16]>), bo: tensor<f32[16]>);
        let y0 = add(x, o);
        let y1 = log_softmax(reduce_max(y0, axes = [1], keepdims = false), axis = -1);
        let y2 = reduce_sum(y0, axes = [0, 2], keepdims = false);
        (y0, y1, y2)
    }
}

kiln::network! {
    /// A ShuffleNet-v2 unit: split the channels, a 1x1 / depthwise 3x3 / 1x1 branch on one
    /// half, concat, and the channel shuffle as a rank-5 reshape + transpose.
    pub net Shuffle(x: fm<16xf32[8, 8]>) -> fm<16xf32[8, 8]> {
        weights "data/typed/shuffle.safetensors";
        let (a, b) = split(x, axis = 1, sizes = [8, 8]);
        let b = conv2d(b, pw1: weights<8 -> 1x1xf32 -> 8>, bias = false);
        let b = batch_norm(b, bn1: norm<8xf32>).relu();
        let b = conv2d(b, dw: weights<8 -> 3x3xf32 -> 8>, groups = 8, pad = 1, bias = false);
        let b = batch_norm(b, bn2: norm<8xf32>);
        let b = conv2d(b, pw2: weights<8 -> 1x1xf32 -> 8>, bias = false);
        let b = batch_norm(b, bn3: norm<8xf32>).relu();
        let y = reshape(concat(a, b), [1, 2, 8, 8, 8]);
        reshape(transpose(y, [0, 2, 1, 3, 4]), [1, 16, 8, 8])
    }
}

kiln::network! {
    /// One network precompiled for three input sizes: `run` picks the variant (its own shapes,
    /// kernels and memory plan) from the input's shape.
    pub net MultiShape(x: tensor<f32[1, 3, h, w]>) -> fm<4xf32[1, 1]>
    where (h, w) in [8x8, 12x12, (16, 10)]
    {
        weights "data/typed/multishape.safetensors";
        let a = conv2d(x, c1: weights<3 -> 3x3xf32 -> 8>, pad = 1).relu();
        let a = max_pool(a, 2x2, stride = 2);
        let a = conv2d(a, c2: weights<8 -> 3x3xf32 -> 4>, pad = 1);
        global_avg_pool(a)
    }
}

kiln::network! {
    /// 1-D convolutions on a `[1, 4, 32]` sequence: conv, batch norm (folded) and relu (fused),
    /// max pool, a strided dilated conv, average pool, dense (see `data/typed/README.md`).
    pub net Conv1d(x: tensor<f32[1, 4, 32]>) -> vec<5xf32> {
        weights "data/typed/conv1d.safetensors";
        let h = conv(x, c1: weights<4 -> 3xf32 -> 8>, pad = 1);
        let h = batch_norm(h, bn1: norm<8xf32>).relu();
        let h = max_pool(h, 2, stride = 2);
        let h = conv(h, c2: weights<8 -> 5xf32 -> 8>, stride = 2, dilation = 2, pad = 4);
        let h = avg_pool(h, 2);
        dense(flatten(h), fc: weights<32 -> 5>)
    }
}

kiln::network! {
    /// Data movement and arithmetic on every dtype: gather with run-time i64 indices and with
    /// constant ones, transpose of u8, casts, a strided slice and a reduction of f64, squeeze /
    /// unsqueeze, and an f64 matmul.
    pub net DataMove(x: tensor<f32[4, 5]>, idx: tensor<i64[3]>, b: tensor<u8[2, 3, 4]>, d: tensor<f64[3, 4]>)
        -> (tensor<f32[3, 5]>, tensor<u8[4, 2, 3]>, tensor<f32[2, 3, 4]>, tensor<f64[2, 2]>,
            tensor<f64[3, 1]>, tensor<f64[3]>, tensor<f32[20, 1]>, tensor<u8[2, 3, 4]>, tensor<f64[3, 3]>)
    {
        let y0 = gather(x, idx, axis = 0);
        let y1 = transpose(b, [2, 0, 1]);
        let y2 = cast(b, f32);
        let y3 = slice(d, starts = [1, 0], ends = [3, 4], axes = [0, 1], steps = [1, 2]);
        let y4 = reduce_sum(d, axes = [1]);
        let y5 = cast(idx, f64);
        let y6 = unsqueeze(squeeze(reshape(x, [1, 20, 1]), axes = [0, 2]), axes = [1]);
        let y7 = gather(b, [1, 0, 1], axis = 1);
        let y8 = matmul(d, transpose(d, [1, 0]));
        (y0, y1, y2, y3, y4, y5, y6, y7, y8)
    }
}

kiln::network! {
    /// `MultiShape` at 8x8 on a channels-last (NHWC) buffer: dlnn's layout map makes kiln
    /// transpose the input once, at the model boundary.
    pub net Nhwc(x: fm<3xf32[8, 8], (H, W, C)[N] -> (N, C, H, W)>) -> fm<4xf32[1, 1]> {
        weights "data/typed/multishape.safetensors";
        let a = conv2d(x, c1: weights<3 -> 3x3xf32 -> 8>, pad = 1).relu();
        let a = max_pool(a, 2x2, stride = 2);
        let a = conv2d(a, c2: weights<8 -> 3x3xf32 -> 4>, pad = 1);
        global_avg_pool(a)
    }
}

kiln::network! {
    /// 3-D convolutions on a `[1, 2, 6, 8, 8]` volume: conv, batch norm (folded) and relu
    /// (fused), max pool, conv, an anisotropic average pool, global average pool, dense (see
    /// `data/typed/README.md`).
    pub net Conv3d(x: tensor<f32[1, 2, 6, 8, 8]>) -> vec<3xf32> {
        weights "data/typed/conv3d.safetensors";
        let h = conv(x, c1: weights<2 -> 3x3x3xf32 -> 4>, pad = 1);
        let h = batch_norm(h, bn1: norm<4xf32>).relu();
        let h = max_pool(h, 2x2x2, stride = 2);
        let h = conv(h, c2: weights<4 -> 3x3x3xf32 -> 6>, pad = 1);
        let h = avg_pool(h, 1x2x2, stride = (1, 2, 2));
        dense(flatten(global_avg_pool(h)), fc: weights<6 -> 3>)
    }
}

kiln::network! {
    /// Transposed convolutions, each followed by a dilated max pool: 1-D with dilation, output
    /// padding and an asymmetric crop; 3-D with two groups, no bias and anisotropic strides (see
    /// `data/typed/README.md`).
    pub net Deconv(a: tensor<f32[1, 4, 10]>, b: tensor<f32[1, 4, 3, 4, 5]>)
        -> (tensor<f32[1, 6, 10]>, tensor<f32[1, 6, 3, 6, 7]>)
    {
        weights "data/typed/deconv.safetensors";
        let y0 = conv_transpose(a, u1: weights<4 -> 3xf32 -> 6>, stride = 2, dilation = 2,
                                pad = (1, 0), output_padding = 1);
        let y0 = max_pool(y0, 3, stride = 2, dilation = 2);
        let y1 = conv_transpose(b, u3: weights<4 -> 2x3x3xf32 -> 6>, stride = (1, 2, 2),
                                pad = (0, 1, 1, 1, 0, 1), groups = 2, bias = false);
        (y0, max_pool(y1, 1x2x2, stride = 1, dilation = (1, 2, 2)))
    }
}

kiln::network! {
    /// A data-dependent chain: rows `s..e` of `x` (run-time bounds, clamped as ONNX does), then
    /// arithmetic on the run-time-sized result, and a reduction back to a static size.
    pub net DynSlice(x: tensor<f32[10, 4]>, s: tensor<i64[1]>, e: tensor<i64[1]>)
        -> (tensor<f32[?, 4]>, tensor<f32[4]>)
    {
        let t = slice(x, starts = s, ends = e, axes = [0]);
        let y0 = mul(relu(t), 2.0);
        (y0, reduce_sum(y0, axes = [0], keepdims = false))
    }
}

kiln::network! {
    /// The positive elements of `x`: `nonzero` finds how many at run time.
    pub net NonZero(x: tensor<f32[12]>) -> tensor<f32[?]> {
        let idx = nonzero(greater(x, 0.0));
        gather(x, reshape(idx, [-1]), axis = 0)
    }
}

/// A reference input/output pair computed by onnxruntime.
#[derive(Debug)]
pub struct Golden {
    pub x: Vec<f32>,
    pub y: Vec<f32>,
    pub y_shape: Vec<usize>,
}

/// Reads `data/<name>_io.safetensors`.
pub fn golden(name: &str) -> Golden {
    let path = format!("{}/data/{name}_io.safetensors", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let st = SafeTensors::deserialize(&bytes).unwrap_or_else(|e| panic!("{path}: {e}"));
    let read = |key: &str| -> (Vec<f32>, Vec<usize>) {
        let t = st
            .tensor(key)
            .unwrap_or_else(|e| panic!("{path}: `{key}`: {e}"));
        let data = t
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        (data, t.shape().to_vec())
    };
    let (x, _) = read("x");
    let (y, y_shape) = read("y");
    Golden { x, y, y_shape }
}

/// Every tensor of `data/<path>` (a safetensors file of F32 tensors), by name: data and shape.
pub fn f32_tensors(path: &str) -> std::collections::HashMap<String, (Vec<f32>, Vec<usize>)> {
    let path = format!("{}/data/{path}", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let st = SafeTensors::deserialize(&bytes).unwrap_or_else(|e| panic!("{path}: {e}"));
    st.tensors()
        .into_iter()
        .filter(|(_, t)| t.dtype() == safetensors::Dtype::F32)
        .map(|(name, t)| {
            let data = t
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            (name, (data, t.shape().to_vec()))
        })
        .collect()
}

/// One tensor of `data/<path>` in its own element type (little-endian in the file), with its
/// shape. Panics if it is missing or has another dtype.
pub fn tensor_of<T: bytemuck::Pod>(path: &str, name: &str) -> (Vec<T>, Vec<usize>) {
    let full = format!("{}/data/{path}", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(&full).unwrap_or_else(|e| panic!("{full}: {e}"));
    let st = SafeTensors::deserialize(&bytes).unwrap_or_else(|e| panic!("{full}: {e}"));
    let t = st
        .tensor(name)
        .unwrap_or_else(|e| panic!("{full}: `{name}`: {e}"));
    assert_eq!(
        t.dtype().bitsize(),
        8 * std::mem::size_of::<T>(),
        "{full}: `{name}` has dtype {:?}",
        t.dtype()
    );
    // The file is little-endian; so is every target kiln's tests run on.
    let data = t
        .data()
        .chunks_exact(std::mem::size_of::<T>())
        .map(bytemuck::pod_read_unaligned)
        .collect();
    (data, t.shape().to_vec())
}

/// Bytes of a test data file.
pub fn data_file(name: &str) -> Vec<u8> {
    let path = format!("{}/data/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Asserts `|got - want| <= 1e-4 * max(1, |want|)` everywhere, naming the first index that
/// is off.
pub fn assert_close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "output length");
    let mut worst = (0.0f32, 0);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g - w).abs() / w.abs().max(1.0);
        assert!(err.is_finite(), "element {i}: got {g}, want {w}");
        if err > worst.0 {
            worst = (err, i);
        }
    }
    let (err, i) = worst;
    assert!(
        err <= 1e-4,
        "element {i}: got {}, want {} (relative error {err:e})",
        got[i],
        want[i]
    );
}

/// A global allocator that counts the allocations each thread makes, for the tests that prove a
/// steady-state run allocates nothing. A test binary installs it with
/// `#[global_allocator] static GLOBAL: kiln_tests::Counting = kiln_tests::Counting;` and measures
/// with [`allocations_during`]. Counts are per thread, so tests running in parallel do not mix.
#[derive(Debug)]
pub struct Counting;

thread_local! {
    static ALLOCATIONS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; only counts them.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which we pass on.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: as above, for `dealloc`.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: as above, for `realloc`.
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }
}

/// How many allocations this thread made while running `f` (with [`Counting`] installed).
pub fn allocations_during(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(std::cell::Cell::get);
    f();
    ALLOCATIONS.with(std::cell::Cell::get) - before
}
