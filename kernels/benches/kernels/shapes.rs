//! The benchmark's cases: square GEMMs, every distinct convolution of ResNet-50, every
//! distinct 1x1 convolution of MobileNet-v2 and ShuffleNet-v2 and a sample of DenseNet-121's
//! (its 1x1 layers grow by 32 input channels each), every distinct depthwise convolution of
//! MobileNet-v2, the pooling layers of the benchmark's CNNs and the stride-2 stems of
//! MobileNet-v2 and ShuffleNet-v2 (3x3), ResNet-50 and SqueezeNet 1.0 (7x7), all at batch 1 on
//! a 224x224 input.
//!
//! The layer lists are written out by hand from the torchvision definitions (ResNet-50 v1.5,
//! with the stride on the 3x3 of each stage's first block; MobileNet-v2 width 1.0), keeping one
//! entry per distinct (channels, size, kernel, stride): a repeated shape would only weight the
//! medians towards it.

use kiln_kernels::{nchwc, Activation, Conv2d, Pool2d};

/// Which group of cases a case belongs to; the summary takes medians per family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Square GEMMs.
    Gemm,
    /// ResNet-50's convolutions as plain GEMMs: `M = c_out`, `N = out_h * out_w`,
    /// `K = c_in * kh * kw`.
    ResnetGemm,
    /// ResNet-50's convolutions through the table's `conv2d`.
    ResnetConv,
    /// ResNet-50's convolutions (but the 3-channel stem) in the blocked channel layout,
    /// through the table's `conv2d_nchwc` (input, weights and output already blocked, as
    /// inside a blocked part of a model).
    ResnetNchwc,
    /// MobileNet-v2's depthwise convolutions through the table's `conv2d`.
    MobilenetDw,
    /// MobileNet-v2's, ShuffleNet-v2's and DenseNet-121's 1x1 convolutions through the
    /// table's `conv2d`.
    Pointwise,
    /// The 3x3 stride-1 layers of ResNet-50, VGG-19, DenseNet-121 and SqueezeNet through the
    /// table's `conv2d` (im2col GEMM), to compare with [`Family::Winograd`] case by case.
    Im2col3x3,
    /// The same layers through `conv2d_winograd` (flops counted as the direct convolution's).
    Winograd,
    /// The same layers (whole blocks of 16 channels) in the blocked channel layout through
    /// `conv2d_nchwc_winograd`, its `NCHWC` lines against the NCHW `conv2d_winograd`.
    NchwcWinograd,
    /// The same layers (whole blocks of 16 channels, at least 64 out: the blocked kernel's
    /// step) through the direct `conv2d_nchwc`, its `NCHWC` lines against the NCHW `conv2d`
    /// (im2col), so that the three blocked and NCHW algorithms compare layer by layer.
    Nchwc3x3,
    /// The max and average pools of SqueezeNet, Inception-v2, ResNet-50, DenseNet-121 and
    /// ShuffleNet-v2 through the table's `max_pool2d` / `avg_pool2d`.
    Pool,
    /// The 3-channel stride-2 stems (3x3: MobileNet-v2, ShuffleNet-v2; 7x7: ResNet-50,
    /// SqueezeNet 1.0) through the table's `conv2d`.
    Stem,
    /// The classifiers of MobileNet-v2 (1280 -> 1000) and ResNet-50 (2048 -> 1000) at batch 1
    /// through the table's `dense` (a matrix-vector product: bound by reading the weights).
    Dense,
}

impl Family {
    pub const ALL: [Family; 13] = [
        Family::Gemm,
        Family::ResnetGemm,
        Family::ResnetConv,
        Family::ResnetNchwc,
        Family::MobilenetDw,
        Family::Pointwise,
        Family::Im2col3x3,
        Family::Winograd,
        Family::NchwcWinograd,
        Family::Nchwc3x3,
        Family::Pool,
        Family::Stem,
        Family::Dense,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Family::Gemm => "gemm",
            Family::ResnetGemm => "resnet50_gemm",
            Family::ResnetConv => "resnet50_conv2d",
            Family::ResnetNchwc => "resnet50_nchwc",
            Family::MobilenetDw => "mobilenetv2_dw",
            Family::Pointwise => "pointwise",
            Family::Im2col3x3 => "im2col3x3",
            Family::Winograd => "winograd3x3",
            Family::NchwcWinograd => "nchwc_winograd3x3",
            Family::Nchwc3x3 => "nchwc3x3",
            Family::Pool => "pool",
            Family::Stem => "stem",
            Family::Dense => "dense",
        }
    }
}

/// What a case computes.
#[derive(Clone, Copy, Debug)]
pub enum Op {
    /// `C[m, n] = A[m, k] B[k, n]`.
    Gemm { m: usize, n: usize, k: usize },
    /// A convolution with bias and the activation the real network fuses into it.
    Conv(Conv2d, Activation),
    /// The same through the Winograd kernel, on filters transformed once beforehand.
    Winograd(Conv2d, Activation),
    /// The same in the blocked channel layout (`conv2d_nchwc`).
    Nchwc(Conv2d, Activation),
    /// A 3x3 stride-1 one in the blocked layout through `conv2d_nchwc_winograd`, on filters
    /// transformed once beforehand.
    NchwcWinograd(Conv2d, Activation),
    /// Max pooling (`true`) or average pooling (`false`, padding not counted: ONNX's default).
    Pool(Pool2d, bool),
    /// `y[o] = sum_i x[i] w[o, i] + b[o]` for one input row.
    Dense { n_in: usize, n_out: usize },
}

/// One line of the benchmark.
#[derive(Clone, Debug)]
pub struct Case {
    pub name: String,
    pub family: Family,
    pub op: Op,
}

impl Case {
    /// Useful flops: two per multiply-add of the mathematical definition (padding taps and
    /// bias/activation epilogues are not counted); for a pool, one per window element of each
    /// output (a comparison or an addition), so its `of_peak` is against a peak of two flops per
    /// FMA lane: pooling's honest ceiling is half of it, and memory bounds it well before that.
    pub fn flops(&self) -> f64 {
        match self.op {
            Op::Gemm { m, n, k } => 2.0 * (m * n * k) as f64,
            Op::Conv(p, _) | Op::Winograd(p, _) | Op::Nchwc(p, _) | Op::NchwcWinograd(p, _) => {
                let per_out = (p.c_in / p.groups) * p.kh * p.kw;
                2.0 * (p.batch * p.c_out * p.out_h * p.out_w * per_out) as f64
            }
            Op::Pool(p, _) => (p.batch * p.channels * p.out_h * p.out_w * p.kh * p.kw) as f64,
            Op::Dense { n_in, n_out } => 2.0 * (n_in * n_out) as f64,
        }
    }

    /// The GEMM a reference crate would run for the same work, if there is one: the case
    /// itself for GEMMs, the im2col GEMM of a dense convolution. Depthwise convolutions have
    /// no GEMM equivalent (one row per channel), so no crate line.
    pub fn crate_gemm(&self) -> Option<(usize, usize, usize)> {
        match self.op {
            Op::Gemm { m, n, k } => Some((m, n, k)),
            Op::Conv(p, _) | Op::Winograd(p, _) | Op::Nchwc(p, _) | Op::NchwcWinograd(p, _)
                if p.groups == 1 =>
            {
                Some(conv_as_gemm(&p))
            }
            Op::Dense { n_in, n_out } => Some((1, n_out, n_in)),
            Op::Conv(..)
            | Op::Winograd(..)
            | Op::Nchwc(..)
            | Op::NchwcWinograd(..)
            | Op::Pool(..) => None,
        }
    }
}

/// `(M, N, K)` of a single-group convolution's im2col GEMM.
fn conv_as_gemm(p: &Conv2d) -> (usize, usize, usize) {
    (p.c_out, p.out_h * p.out_w, p.c_in * p.kh * p.kw)
}

/// A square convolution layer at batch 1: `k x k` kernel, padding `k / 2` (what both
/// networks use), input `h x h`.
struct Layer {
    c_in: usize,
    c_out: usize,
    h: usize,
    k: usize,
    stride: usize,
    groups: usize,
}

impl Layer {
    fn conv(&self) -> Conv2d {
        let pad = self.k / 2;
        let out = (self.h + 2 * pad - self.k) / self.stride + 1;
        Conv2d {
            batch: 1,
            c_in: self.c_in,
            h: self.h,
            w: self.h,
            c_out: self.c_out,
            kh: self.k,
            kw: self.k,
            stride: [self.stride; 2],
            dilation: [1, 1],
            pad: [pad; 4],
            groups: self.groups,
            out_h: out,
            out_w: out,
        }
    }

    /// `k3s2_128-128_56`: kernel, stride, channels in and out, input size.
    fn name(&self) -> String {
        format!(
            "k{}s{}_{}-{}_{}",
            self.k, self.stride, self.c_in, self.c_out, self.h
        )
    }
}

/// MobileNet-v2's (width 1.0) distinct 1x1 convolutions as `(c_in, c_out, size)`: the
/// expansions (`c -> 6c`), the projections (`6c -> c'`) and the last 320 -> 1280.
const MOBILENET_V2_PW: [(usize, usize, usize); 19] = [
    (32, 16, 112),
    (16, 96, 112),
    (96, 24, 56),
    (24, 144, 56),
    (144, 24, 56),
    (144, 32, 28),
    (32, 192, 28),
    (192, 32, 28),
    (192, 64, 14),
    (64, 384, 14),
    (384, 64, 14),
    (384, 96, 14),
    (96, 576, 14),
    (576, 96, 14),
    (576, 160, 7),
    (160, 960, 7),
    (960, 160, 7),
    (960, 320, 7),
    (320, 1280, 7),
];

/// ShuffleNet-v2 (x1.0)'s distinct 1x1 convolutions as `(c_in, c_out, size)`: the branch
/// convolutions of each stage (58, 116 and 232 channels) at the sizes they run, and conv5.
const SHUFFLENET_V2_PW: [(usize, usize, usize); 7] = [
    (24, 58, 56),
    (58, 58, 28),
    (116, 116, 28),
    (116, 116, 14),
    (232, 232, 14),
    (232, 232, 7),
    (464, 1024, 7),
];

/// SqueezeNet 1.0's 1x1 convolutions as `(c_in, c_out, size)`: each fire module's squeeze
/// (to 16-64 channels, few output rows for the GEMM) and 1x1 expand, then conv10.
const SQUEEZENET_PW: [(usize, usize, usize); 15] = [
    (96, 16, 54),
    (128, 16, 54),
    (16, 64, 54),
    (128, 32, 54),
    (32, 128, 54),
    (256, 32, 27),
    (32, 128, 27),
    (256, 48, 27),
    (48, 192, 27),
    (384, 48, 27),
    (384, 64, 27),
    (64, 256, 27),
    (512, 64, 13),
    (64, 256, 13),
    (512, 1000, 13),
];

/// DenseNet-121's 1x1 convolutions as `(c_in, c_out, size)`: in each dense block the
/// bottlenecks (`c_in -> 128`, `c_in` growing by 32 per layer: the first, a middle and the
/// last of each block), then the transition that halves the channels (before its 2x2 average
/// pool). All are projections or square (`c_out <= c_in`) but the first two at 56x56.
const DENSENET121_PW: [(usize, usize, usize); 14] = [
    (64, 128, 56),
    (128, 128, 56),
    (224, 128, 56),
    (256, 128, 56),
    (128, 128, 28),
    (320, 128, 28),
    (480, 128, 28),
    (512, 256, 28),
    (256, 128, 14),
    (608, 128, 14),
    (992, 128, 14),
    (1024, 512, 14),
    (512, 128, 7),
    (992, 128, 7),
];

/// ResNet-50's distinct convolutions as `(c_in, c_out, input size, kernel, stride)`.
const RESNET50: [(usize, usize, usize, usize, usize); 23] = [
    // Stem.
    (3, 64, 224, 7, 2),
    // layer1, 56x56.
    (64, 64, 56, 1, 1),
    (64, 64, 56, 3, 1),
    (64, 256, 56, 1, 1),
    (256, 64, 56, 1, 1),
    // layer2: the first block reduces at 56x56, strides in its 3x3 and its shortcut.
    (256, 128, 56, 1, 1),
    (128, 128, 56, 3, 2),
    (128, 512, 28, 1, 1),
    (256, 512, 56, 1, 2),
    (512, 128, 28, 1, 1),
    (128, 128, 28, 3, 1),
    // layer3.
    (512, 256, 28, 1, 1),
    (256, 256, 28, 3, 2),
    (256, 1024, 14, 1, 1),
    (512, 1024, 28, 1, 2),
    (1024, 256, 14, 1, 1),
    (256, 256, 14, 3, 1),
    // layer4.
    (1024, 512, 14, 1, 1),
    (512, 512, 14, 3, 2),
    (512, 2048, 7, 1, 1),
    (1024, 2048, 14, 1, 2),
    (2048, 512, 7, 1, 1),
    (512, 512, 7, 3, 1),
];

/// MobileNet-v2's distinct depthwise 3x3 convolutions as `(channels, input size, stride)`.
const MOBILENET_V2_DW: [(usize, usize, usize); 10] = [
    (32, 112, 1),
    (96, 112, 2),
    (144, 56, 1),
    (144, 56, 2),
    (192, 28, 1),
    (192, 28, 2),
    (384, 14, 1),
    (576, 14, 1),
    (576, 14, 2),
    (960, 7, 1),
];

/// The distinct 3x3 stride-1 convolutions (padding 1) of ResNet-50, VGG-19 (but its 3-channel
/// stem), DenseNet-121 and SqueezeNet 1.0 (its expand layers), as `(network, c_in, c_out,
/// input size)`: channel counts from 16 to 512 and maps from 7 to 224, which is what the
/// compiler's Winograd rule is measured on.
const CONV3X3: [(&str, usize, usize, usize); 19] = [
    ("resnet50", 64, 64, 56),
    ("resnet50", 128, 128, 28),
    ("resnet50", 256, 256, 14),
    ("resnet50", 512, 512, 7),
    ("vgg19", 64, 64, 224),
    ("vgg19", 128, 128, 112),
    ("vgg19", 256, 256, 56),
    ("vgg19", 512, 512, 28),
    ("vgg19", 512, 512, 14),
    ("densenet121", 128, 32, 56),
    ("densenet121", 128, 32, 28),
    ("densenet121", 128, 32, 14),
    ("densenet121", 128, 32, 7),
    ("squeezenet", 16, 64, 55),
    ("squeezenet", 32, 128, 54),
    ("squeezenet", 32, 128, 27),
    ("squeezenet", 48, 192, 27),
    ("squeezenet", 64, 256, 27),
    ("squeezenet", 64, 256, 13),
];

/// A pooling layer as `(network, max, channels, input size, window, stride, padding before,
/// padding after)`.
type PoolLayer = (&'static str, bool, usize, usize, usize, usize, usize, usize);

/// The distinct pooling layers of the benchmark's CNNs: the ceil-mode pools of SqueezeNet
/// and Inception-v2 have one more row and column of padding after (as kiln compiles them).
const POOLS: [PoolLayer; 16] = [
    ("squeezenet", true, 96, 109, 3, 2, 0, 0),
    ("squeezenet", true, 256, 54, 3, 2, 0, 1),
    ("squeezenet", true, 512, 27, 3, 2, 0, 0),
    ("resnet50", true, 64, 112, 3, 2, 1, 1),
    ("shufflenetv2", true, 24, 112, 3, 2, 1, 1),
    ("inceptionv2", true, 64, 112, 3, 2, 0, 1),
    ("inceptionv2", true, 192, 56, 3, 2, 0, 1),
    ("inceptionv2", true, 320, 28, 3, 2, 0, 1),
    ("inceptionv2", true, 608, 14, 3, 2, 0, 1),
    ("inceptionv2", false, 256, 28, 3, 1, 1, 1),
    ("inceptionv2", false, 576, 14, 3, 1, 1, 1),
    ("inceptionv2", false, 1056, 7, 3, 1, 1, 1),
    ("inceptionv2", true, 1024, 7, 3, 1, 1, 1),
    ("densenet121", false, 128, 56, 2, 2, 0, 0),
    ("densenet121", false, 256, 28, 2, 2, 0, 0),
    ("densenet121", false, 512, 14, 2, 2, 0, 0),
];

/// Every case, in the order they are run and printed.
pub fn all() -> Vec<Case> {
    let mut cases = Vec::new();
    for n in [256, 512, 1024, 2048] {
        cases.push(Case {
            name: format!("gemm/{n}"),
            family: Family::Gemm,
            op: Op::Gemm { m: n, n, k: n },
        });
    }
    let resnet: Vec<Layer> = RESNET50
        .iter()
        .map(|&(c_in, c_out, h, k, stride)| Layer {
            c_in,
            c_out,
            h,
            k,
            stride,
            groups: 1,
        })
        .collect();
    for layer in &resnet {
        let (m, n, k) = conv_as_gemm(&layer.conv());
        cases.push(Case {
            name: format!("resnet50/gemm/{}", layer.name()),
            family: Family::ResnetGemm,
            op: Op::Gemm { m, n, k },
        });
    }
    for layer in &resnet {
        // Batch norm folds into bias, and ReLU fuses into the epilogue, as kiln compiles it.
        cases.push(Case {
            name: format!("resnet50/conv2d/{}", layer.name()),
            family: Family::ResnetConv,
            op: Op::Conv(layer.conv(), Activation::Relu),
        });
    }
    for layer in resnet.iter().filter(|l| l.c_in > 3) {
        cases.push(Case {
            name: format!("resnet50/nchwc/{}", layer.name()),
            family: Family::ResnetNchwc,
            op: Op::Nchwc(layer.conv(), Activation::Relu),
        });
    }
    // Each layer twice, im2col then Winograd, so that one filter (`3x3`) runs both.
    for &(net, c_in, c_out, h) in &CONV3X3 {
        let layer = Layer {
            c_in,
            c_out,
            h,
            k: 3,
            stride: 1,
            groups: 1,
        };
        cases.push(Case {
            name: format!("3x3/im2col/{net}/{}", layer.name()),
            family: Family::Im2col3x3,
            op: Op::Conv(layer.conv(), Activation::Relu),
        });
        cases.push(Case {
            name: format!("3x3/winograd/{net}/{}", layer.name()),
            family: Family::Winograd,
            op: Op::Winograd(layer.conv(), Activation::Relu),
        });
        if c_in % 16 == 0 && c_out % 16 == 0 {
            cases.push(Case {
                name: format!("3x3/nchwc_winograd/{net}/{}", layer.name()),
                family: Family::NchwcWinograd,
                op: Op::NchwcWinograd(layer.conv(), Activation::Relu),
            });
            if c_out >= nchwc::GROUP * nchwc::BLOCK {
                cases.push(Case {
                    name: format!("3x3/nchwc/{net}/{}", layer.name()),
                    family: Family::Nchwc3x3,
                    op: Op::Nchwc(layer.conv(), Activation::Relu),
                });
            }
        }
    }
    for (net, shapes) in [
        ("mobilenetv2", &MOBILENET_V2_PW[..]),
        ("shufflenetv2", &SHUFFLENET_V2_PW[..]),
        ("densenet121", &DENSENET121_PW[..]),
        ("squeezenet", &SQUEEZENET_PW[..]),
    ] {
        for &(c_in, c_out, h) in shapes {
            let layer = Layer {
                c_in,
                c_out,
                h,
                k: 1,
                stride: 1,
                groups: 1,
            };
            // The expansions end in ReLU6 (MobileNet) or ReLU (ShuffleNet, DenseNet's
            // bottlenecks, whose batch norm folds into the bias), the projections and
            // DenseNet's transitions in nothing; the epilogue's cost is the same either way,
            // so ReLU for all.
            cases.push(Case {
                name: format!("{net}/pw/{}", layer.name()),
                family: Family::Pointwise,
                op: Op::Conv(layer.conv(), Activation::Relu),
            });
        }
    }
    // The stems, stride 2 on the 224x224 image, batch norm folded into the bias: 3x3 3 -> 32
    // (MobileNet-v2, ReLU6) and 3 -> 24 (ShuffleNet-v2, ReLU); 7x7 3 -> 64 (ResNet-50, padding
    // 3) and 3 -> 96 (SqueezeNet 1.0, no padding: 109x109 out).
    for (net, c_out, k, pad, act) in [
        (
            "mobilenetv2",
            32,
            3,
            1,
            Activation::Clip { min: 0.0, max: 6.0 },
        ),
        ("shufflenetv2", 24, 3, 1, Activation::Relu),
        ("resnet50", 64, 7, 3, Activation::Relu),
        ("squeezenet", 96, 7, 0, Activation::Relu),
    ] {
        let layer = Layer {
            c_in: 3,
            c_out,
            h: 224,
            k,
            stride: 2,
            groups: 1,
        };
        let mut conv = layer.conv();
        conv.pad = [pad; 4];
        conv.out_h = (224 + 2 * pad - k) / 2 + 1;
        conv.out_w = conv.out_h;
        cases.push(Case {
            name: format!("{net}/stem/{}", layer.name()),
            family: Family::Stem,
            op: Op::Conv(conv, act),
        });
    }
    for &(c, h, stride) in &MOBILENET_V2_DW {
        let layer = Layer {
            c_in: c,
            c_out: c,
            h,
            k: 3,
            stride,
            groups: c,
        };
        cases.push(Case {
            name: format!("mobilenetv2/dw/{}", layer.name()),
            family: Family::MobilenetDw,
            // MobileNet-v2 follows every depthwise convolution with ReLU6.
            op: Op::Conv(layer.conv(), Activation::Clip { min: 0.0, max: 6.0 }),
        });
    }
    for (net, n_in) in [("mobilenetv2", 1280), ("resnet50", 2048)] {
        cases.push(Case {
            name: format!("{net}/dense/{n_in}-1000"),
            family: Family::Dense,
            op: Op::Dense { n_in, n_out: 1000 },
        });
    }
    for &(net, max, c, h, k, stride, before, after) in &POOLS {
        let out = (h + before + after - k) / stride + 1;
        let p = Pool2d {
            batch: 1,
            channels: c,
            h,
            w: h,
            kh: k,
            kw: k,
            stride: [stride; 2],
            pad: [before, before, after, after],
            out_h: out,
            out_w: out,
            count_include_pad: false,
        };
        let kind = if max { "max" } else { "avg" };
        cases.push(Case {
            name: format!("pool/{net}/{kind}_k{k}s{stride}_{c}_{h}"),
            family: Family::Pool,
            op: Op::Pool(p, max),
        });
    }
    cases
}
