#!/usr/bin/env bash
# Runs a local PostgreSQL 18 + pgvector in the foreground and prints its DSN (Ctrl-C stops it).
# Usage: hack/postgres.sh [--data-dir DIR] [--port N] [--durable]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || make install >&2
exec .venv/bin/python -m brain.local.devdb "$@"
