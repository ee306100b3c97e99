"""Write the tiny safetensors files that kiln's `weights/` compile-fail tests read.

The trybuild cases in `tests/ui/weights/` each declare one dense layer `fc` over 4 features
with 2 outputs, so the tensors a correct declaration needs are `fc.weight` (float32, [2, 4])
and `fc.bias` (float32, [2]). Each file here gets exactly one thing wrong (or nothing, for
`fc.safetensors`, which the cases with a mistake in the network itself read), so every case
fails for one reason only:

* `fc.safetensors`         both tensors, float32, right shapes;
* `fc_no_bias.safetensors` `fc.weight` only;
* `fc_f16.safetensors`     `fc.weight` stored as float16, `fc.bias` float32;
* `model.pt`               not safetensors at all: a zip archive shaped like a PyTorch
                           checkpoint, the file a user most likely points at by mistake.

The values are a fixed ramp (the tests never run these networks), so rerunning the script
rewrites identical files.

Usage: python3 scripts/gen_ui_weights.py     (from anywhere; paths are repo-relative)
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

OUT = Path(__file__).resolve().parent.parent / "tests" / "ui" / "weights"


def main() -> None:
    weight = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
    bias = np.array([0.5, -0.5], dtype=np.float32)
    files = {
        "fc.safetensors": {"fc.weight": weight, "fc.bias": bias},
        "fc_no_bias.safetensors": {"fc.weight": weight},
        "fc_f16.safetensors": {"fc.weight": weight.astype(np.float16), "fc.bias": bias},
    }
    OUT.mkdir(parents=True, exist_ok=True)
    for name, tensors in files.items():
        save_file(tensors, str(OUT / name))
        print(f"wrote {OUT / name}")
    # A fixed timestamp keeps the archive byte-for-byte reproducible.
    with zipfile.ZipFile(OUT / "model.pt", "w", zipfile.ZIP_STORED) as z:
        z.writestr(zipfile.ZipInfo("archive/version", date_time=(2024, 1, 1, 0, 0, 0)), "3\n")
    print(f"wrote {OUT / 'model.pt'}")


if __name__ == "__main__":
    main()
