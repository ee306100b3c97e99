"""Copies the inputs and outputs of the ONNX package's sequence test models into safetensors.

The `onnx` pip package ships backend test data for its eight sequence models
(`onnx/backend/test/data/simple/test_sequence_model1..8`): each has `model.onnx` and a
`test_data_set_0/` of TensorProtos (`input_<k>.pb`, `output_<k>.pb`). kiln's tests
(`tests/tests/sequences.rs`) write the same models in the DSL and compare with these outputs,
so this script only converts the files: `tests/data/sequences/model<k>.safetensors` holds each
input and output under its ONNX name, plus the model's constant initializers (the positions)
under their names. Deterministic: rerunning it rewrites identical files.

Usage: python3 scripts/gen_sequence_testdata.py
"""

import os

import numpy as np
import onnx
from onnx import numpy_helper
from safetensors.numpy import save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "sequences")
DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "simple")


def main():
    os.makedirs(OUT, exist_ok=True)
    for k in range(1, 9):
        d = os.path.join(DATA, f"test_sequence_model{k}")
        model = onnx.load(os.path.join(d, "model.onnx"))
        tensors = {}
        for init in model.graph.initializer:
            tensors[init.name] = np.array(numpy_helper.to_array(init), order="C")
        case = os.path.join(d, "test_data_set_0")
        for f in sorted(os.listdir(case)):
            t = onnx.TensorProto()
            with open(os.path.join(case, f), "rb") as fh:
                t.ParseFromString(fh.read())
            tensors[t.name] = np.array(numpy_helper.to_array(t), order="C")
        path = os.path.join(OUT, f"model{k}.safetensors")
        save_file(dict(sorted(tensors.items())), path)
        print(path, {n: (str(a.dtype), a.shape) for n, a in sorted(tensors.items())})


if __name__ == "__main__":
    main()
