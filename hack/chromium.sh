#!/usr/bin/env bash
# Make Debian's headless browser available for the review page's browser test
# (tests/gateway/test_review_browser.py), and print the chromedriver path on stdout.
#
#   DRIVER=$(bash hack/chromium.sh) && "$DRIVER" --version
#
# Installs `chromium` and `chromium-driver` with apt when they are missing (root needed; the test
# runs it, like hack/agents.sh for the agent CLIs). Idempotent: when both are on PATH nothing is
# installed. Exit 1 (message on stderr) when apt is missing, we are not root, or the install fails,
# so the caller can skip with that reason.
set -euo pipefail
log() { echo "$(basename "$0"): $*" >&2; }

if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  command -v chromedriver
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  log "apt-get is not available; install chromium and its chromedriver by hand"
  exit 1
fi
SUDO=
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=sudo
  else
    log "installing chromium needs root (or passwordless sudo)"
    exit 1
  fi
fi
log "installing chromium and chromium-driver with apt"
# shellcheck source=hack/apt-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt-lib.sh"
if ! apt_install chromium chromium-driver; then
  log "apt-get install chromium chromium-driver failed"
  exit 1
fi
command -v chromedriver
