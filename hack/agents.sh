#!/usr/bin/env bash
# Install the real agent CLIs the agent tests drive, at pinned versions, into a cache folder outside
# the repository, and print that folder's bin directory (which holds `claude` and `codex`).
#
#   BIN=$(bash hack/agents.sh) && "$BIN/claude" --version
#
# Idempotent: a folder named after the versions is filled once (npm install --prefix), then reused.
# Nothing is installed globally; npm's own update notifier, audit and funding messages are off.
# Exit 1 (message on stderr) when node/npm are missing or the install fails.
set -euo pipefail

CLAUDE_CODE_VERSION=2.1.197
CODEX_VERSION=0.171.0
ROOT=${BRAIN_CACHE:-$HOME/.cache/brain-operator}/agents-claude${CLAUDE_CODE_VERSION}-codex${CODEX_VERSION}
log() { echo "$(basename "$0"): $*" >&2; }

if [[ -x $ROOT/node_modules/.bin/claude && -x $ROOT/node_modules/.bin/codex && -f $ROOT/.installed ]]; then
  echo "$ROOT/node_modules/.bin"
  exit 0
fi
for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    log "$tool is not on PATH; install Node.js >= 18 (the CLIs' engines) first"
    exit 1
  fi
done
mkdir -p "$ROOT"
log "installing @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION and @openai/codex@$CODEX_VERSION into $ROOT"
[[ -f $ROOT/package.json ]] || echo '{"name":"brain-agents","private":true}' >"$ROOT/package.json"
if ! npm install --prefix "$ROOT" --no-audit --no-fund --no-update-notifier --loglevel=error \
  --save-exact "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" "@openai/codex@$CODEX_VERSION" >&2; then
  log "npm install failed"
  exit 1
fi
touch "$ROOT/.installed"
echo "$ROOT/node_modules/.bin"
