"""Train the weights for kiln's `examples/digits` network and the data to check it.

The example is meant to show a real, trained network running through kiln, so it needs
weights that actually classify something.  scikit-learn ships the 8x8 handwritten
digits (1797 images, no download), which is small enough to train on in seconds with
plain numpy and a hand-written backward pass (no torch dependency for one script).

The network (PyTorch naming and layouts, which is what the kiln DSL reads):

    x [N,1,8,8] = pixels / 16
    conv1: 1->16, 3x3, pad 1, bias, Relu   -> [N,16,8,8]
    MaxPool 2x2 stride 2                    -> [N,16,4,4]
    Flatten (channel-major, like ONNX)      -> [N,256]
    fc1: 256->64, Relu;  fc2: 64->10;  Softmax

Training: stratified 80/20 split with a fixed seed, Adam on minibatches, softmax
cross-entropy.  The backward pass is checked against finite differences before
training starts, so a wrong gradient fails loudly instead of merely training worse.

Writes:
* `examples/digits/data/digits.safetensors`  the float32 weights;
* `examples/digits/data/test.safetensors`    `images` U8 [N_test,64] (raw 0..16) and
                                             `labels` U8 [N_test], the held-out set;
* `tests/data/digits.onnx`, `tests/data/digits_io.safetensors`: the same network as
  ONNX and onnxruntime's softmax outputs `y` [32,10] for the first 32 test images `x`
  [32,1,8,8], so kiln's output on the trained weights can be checked independently.
The script asserts that the numpy forward pass and onnxruntime agree (values and
held-out accuracy) and that held-out accuracy is at least 97%.

Usage: python3 scripts/train_digits.py        (from anywhere; paths are repo-relative)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import save_file
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_DIR = ROOT / "examples" / "digits" / "data"
TEST_DIR = ROOT / "tests" / "data"

SEED = 20240607
EPOCHS = 30
BATCH = 32
LR = 2e-3
N_IO = 32  # test images written to digits_io.safetensors
MIN_ACCURACY = 0.97
OPSET = 17
IR_VERSION = 8  # the IR version that goes with opset 17


# --------------------------------------------------------------------------------------
# Forward and backward passes (float64 during training, float32 for the final check)
# --------------------------------------------------------------------------------------


def im2col_3x3(x):
    """[N,1,8,8] -> [N,8,8,9]: the 3x3 neighbourhood (zero padded by 1) of every pixel,
    taps in row-major (ky, kx) order to match a [16,1,3,3] weight reshaped to [16,9]."""
    n, _, h, w = x.shape
    xp = np.pad(x[:, 0], ((0, 0), (1, 1), (1, 1)))
    return np.stack([xp[:, i:i + h, j:j + w] for i in range(3) for j in range(3)], axis=-1)


def forward(p, x):
    """Returns the logits [N,10] and a cache of what the backward pass needs."""
    n = x.shape[0]
    cols = im2col_3x3(x)                                        # [N,8,8,9]
    z1 = cols @ p["conv1.weight"].reshape(16, 9).T + p["conv1.bias"]  # [N,8,8,16] (NHWC)
    a1 = np.maximum(z1, 0.0)
    # 2x2 max pool: view each window as a trailing axis of 4 and take its argmax, so the
    # backward pass can send the gradient to exactly the element that won.
    win = a1.reshape(n, 4, 2, 4, 2, 16).transpose(0, 1, 3, 5, 2, 4).reshape(n, 4, 4, 16, 4)
    arg = win.argmax(axis=-1)
    pooled = np.take_along_axis(win, arg[..., None], axis=-1)[..., 0]  # [N,4,4,16] (NHWC)
    # Flatten in channel-major (C,H,W) order, which is what ONNX Flatten on NCHW gives.
    flat = pooled.transpose(0, 3, 1, 2).reshape(n, 256)
    z2 = flat @ p["fc1.weight"].T + p["fc1.bias"]
    a2 = np.maximum(z2, 0.0)
    logits = a2 @ p["fc2.weight"].T + p["fc2.bias"]
    return logits, (cols, z1, arg, flat, z2, a2)


def softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def loss_and_grads(p, x, labels):
    """Mean softmax cross-entropy and its gradient with respect to every parameter."""
    n = x.shape[0]
    logits, (cols, z1, arg, flat, z2, a2) = forward(p, x)
    prob = softmax(logits)
    loss = -np.mean(np.log(prob[np.arange(n), labels] + 1e-300))

    g = {}
    dlogits = prob.copy()
    dlogits[np.arange(n), labels] -= 1.0
    dlogits /= n
    g["fc2.weight"] = dlogits.T @ a2
    g["fc2.bias"] = dlogits.sum(axis=0)
    dz2 = (dlogits @ p["fc2.weight"]) * (z2 > 0)
    g["fc1.weight"] = dz2.T @ flat
    g["fc1.bias"] = dz2.sum(axis=0)
    dflat = dz2 @ p["fc1.weight"]                                 # [N,256] (C,H,W order)
    dpooled = dflat.reshape(n, 16, 4, 4).transpose(0, 2, 3, 1)   # [N,4,4,16]
    dwin = np.zeros((n, 4, 4, 16, 4))
    np.put_along_axis(dwin, arg[..., None], dpooled[..., None], axis=-1)
    da1 = dwin.reshape(n, 4, 4, 16, 2, 2).transpose(0, 1, 4, 2, 5, 3).reshape(n, 8, 8, 16)
    dz1 = da1 * (z1 > 0)
    g["conv1.weight"] = (dz1.reshape(-1, 16).T @ cols.reshape(-1, 9)).reshape(16, 1, 3, 3)
    g["conv1.bias"] = dz1.sum(axis=(0, 1, 2))
    return loss, g


def init_params(rng):
    """He-normal weights (the layers feed ReLUs), zero biases."""
    def he(shape, fan_in):
        return rng.normal(0.0, np.sqrt(2.0 / fan_in), shape)
    return {
        "conv1.weight": he((16, 1, 3, 3), 9), "conv1.bias": np.zeros(16),
        "fc1.weight": he((64, 256), 256), "fc1.bias": np.zeros(64),
        "fc2.weight": he((10, 64), 64), "fc2.bias": np.zeros(10),
    }


def check_gradients(rng):
    """Compare the analytic gradient with central differences on a few random
    coordinates of each parameter, in float64 on random inputs."""
    p = init_params(rng)
    for k in p:  # non-zero biases so their gradients are exercised at a generic point
        p[k] = p[k] + rng.normal(0.0, 0.1, p[k].shape)
    x = rng.uniform(0.0, 1.0, (5, 1, 8, 8))
    labels = rng.integers(0, 10, 5)
    _, g = loss_and_grads(p, x, labels)
    eps = 1e-6
    worst = 0.0
    for k in p:
        for _ in range(6):
            idx = tuple(rng.integers(0, s) for s in p[k].shape)
            old = p[k][idx]
            p[k][idx] = old + eps
            lp, _ = loss_and_grads(p, x, labels)
            p[k][idx] = old - eps
            lm, _ = loss_and_grads(p, x, labels)
            p[k][idx] = old
            numeric = (lp - lm) / (2 * eps)
            err = abs(numeric - g[k][idx]) / max(1e-6, abs(numeric) + abs(g[k][idx]))
            worst = max(worst, err)
    assert worst < 1e-4, f"analytic and numeric gradients disagree (relative error {worst:.2e})"
    print(f"gradient check: worst relative error {worst:.2e}")


def accuracy(p, x, labels):
    logits, _ = forward(p, x)
    return float(np.mean(logits.argmax(axis=1) == labels))


# --------------------------------------------------------------------------------------
# ONNX
# --------------------------------------------------------------------------------------


def build_onnx(weights):
    nodes = [
        helper.make_node("Conv", ["x", "conv1.weight", "conv1.bias"], ["conv1"], name="conv1",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv1"], ["relu1"], name="relu1"),
        helper.make_node("MaxPool", ["relu1"], ["pool1"], name="pool1",
                         kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["pool1"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc1.weight", "fc1.bias"], ["fc1"], name="fc1", transB=1),
        helper.make_node("Relu", ["fc1"], ["relu2"], name="relu2"),
        helper.make_node("Gemm", ["relu2", "fc2.weight", "fc2.bias"], ["fc2"], name="fc2", transB=1),
        helper.make_node("Softmax", ["fc2"], ["y"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "digits",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])],
        initializer=[numpy_helper.from_array(v, name=k) for k, v in weights.items()],
    )
    model = helper.make_model(graph, producer_name="kiln/scripts/train_digits.py",
                              opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model


def run_onnxruntime(model, x):
    opts = ort.SessionOptions()
    # Computes the graph as written, on one thread, like gen_testdata.py.
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    (y,) = sess.run(["y"], {"x": x})
    return y


# --------------------------------------------------------------------------------------


def write(path: Path, write_fn) -> None:
    write_fn(str(path))
    print(f"  wrote {path.relative_to(ROOT)} ({path.stat().st_size} bytes)")


def main() -> int:
    start = time.time()
    rng = np.random.default_rng(SEED)
    check_gradients(np.random.default_rng(SEED + 1))

    digits = load_digits()
    pixels = digits.data.astype(np.uint8)      # [1797,64], values 0..16
    targets = digits.target.astype(np.int64)
    px_train, px_test, y_train, y_test = train_test_split(
        pixels, targets, test_size=0.2, random_state=SEED % (2**32), stratify=targets)
    x_train = px_train.reshape(-1, 1, 8, 8) / 16.0
    x_test = px_test.reshape(-1, 1, 8, 8) / 16.0
    print(f"train {len(y_train)} images, test {len(y_test)} images")

    p = init_params(rng)
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v = {k: np.zeros_like(val) for k, val in p.items()}
    beta1, beta2, eps, step = 0.9, 0.999, 1e-8, 0
    for epoch in range(1, EPOCHS + 1):
        order = rng.permutation(len(y_train))
        total = 0.0
        for i in range(0, len(order), BATCH):
            idx = order[i:i + BATCH]
            loss, g = loss_and_grads(p, x_train[idx], y_train[idx])
            total += loss * len(idx)
            step += 1
            for k in p:
                m[k] = beta1 * m[k] + (1 - beta1) * g[k]
                v[k] = beta2 * v[k] + (1 - beta2) * g[k] ** 2
                mhat = m[k] / (1 - beta1 ** step)
                vhat = v[k] / (1 - beta2 ** step)
                p[k] -= LR * mhat / (np.sqrt(vhat) + eps)
        if epoch % 5 == 0 or epoch == 1:
            print(f"epoch {epoch:2d}: loss {total / len(y_train):.4f}, "
                  f"train acc {accuracy(p, x_train, y_train):.4f}, "
                  f"test acc {accuracy(p, x_test, y_test):.4f}")

    # From here on everything uses the float32 weights that are actually written out.
    weights = {k: np.ascontiguousarray(val, dtype=np.float32) for k, val in p.items()}
    x32_test = np.ascontiguousarray(x_test, dtype=np.float32)
    logits32, _ = forward(weights, x32_test)
    prob_np = softmax(logits32.astype(np.float64))
    acc_np = float(np.mean(prob_np.argmax(axis=1) == y_test))
    assert acc_np >= MIN_ACCURACY, f"held-out accuracy {acc_np:.4f} < {MIN_ACCURACY}"

    model = build_onnx(weights)
    prob_ort = run_onnxruntime(model, x32_test)
    acc_ort = float(np.mean(prob_ort.argmax(axis=1) == y_test))
    diff = float(np.max(np.abs(prob_ort.astype(np.float64) - prob_np)))
    assert diff < 1e-5, f"numpy and onnxruntime softmax outputs differ by {diff}"
    assert acc_ort == acc_np, f"onnxruntime accuracy {acc_ort} != numpy accuracy {acc_np}"
    print(f"held-out accuracy (float32 weights): numpy {acc_np:.4f}, onnxruntime {acc_ort:.4f} "
          f"({int(round(acc_ort * len(y_test)))}/{len(y_test)}); "
          f"max |onnxruntime - numpy| = {diff:.3g}")

    EXAMPLE_DIR.mkdir(parents=True, exist_ok=True)
    TEST_DIR.mkdir(parents=True, exist_ok=True)
    write(EXAMPLE_DIR / "digits.safetensors", lambda f: save_file(weights, f))
    test_set = {"images": np.ascontiguousarray(px_test, dtype=np.uint8),
                "labels": np.ascontiguousarray(y_test, dtype=np.uint8)}
    write(EXAMPLE_DIR / "test.safetensors", lambda f: save_file(test_set, f))
    io = {"x": np.ascontiguousarray(x32_test[:N_IO]),
          "y": np.ascontiguousarray(run_onnxruntime(model, x32_test[:N_IO]), dtype=np.float32)}
    assert io["y"].shape == (N_IO, 10)
    write(TEST_DIR / "digits_io.safetensors", lambda f: save_file(io, f))
    write(TEST_DIR / "digits.onnx", lambda f: onnx.save(model, f))
    print(f"done in {time.time() - start:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
