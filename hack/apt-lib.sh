# Shared by the hack/ scripts that install Debian packages (sourced, not run): docker-up (docker.io),
# base-images (mmdebstrap), node-build (runc, the CNI plugins), chromium, promtool (a download).
#
# Under `make test` several of them run at once: the background builds (hack/prebuild.sh) and the
# test workers' fixtures. apt-get gives up at once when another apt holds dpkg's lock ("Could not
# get lock /var/lib/dpkg/lock-frontend"); on a fresh machine that failed every container test of a
# CI run while the browser test installed chromium. So each install takes one lock of ours first
# (our installs queue instead of failing) and asks apt-get to wait for dpkg's lock as well (for an
# apt that is not ours). A fresh machine has no package lists: a failed install updates them once
# and retries. SUDO (empty, or `sudo`) prefixes apt-get for callers that allow it.

APT_WAIT=${APT_WAIT:-900}

# apt_locked CMD...: run CMD holding our apt lock (waiting up to APT_WAIT seconds for it).
apt_locked() {
  local lock=${BRAIN_CACHE:-$HOME/.cache/brain-operator}/apt.lock
  mkdir -p "$(dirname "$lock")"
  (
    flock -w "$APT_WAIT" 8 || {
      echo "apt: another install held $lock for ${APT_WAIT}s (APT_WAIT)" >&2
      exit 1
    }
    "$@"
  ) 8>"$lock"
}

_apt() { ${SUDO:-} env DEBIAN_FRONTEND=noninteractive apt-get -q -o "DPkg::Lock::Timeout=$APT_WAIT" "$@"; }

_apt_install() {
  _apt install -y --no-install-recommends "$@" >/dev/null 2>&1 \
    || { _apt update >/dev/null && _apt install -y --no-install-recommends "$@" >/dev/null; }
}

# apt_install PKG...: install Debian packages (root, or SUDO); non-zero with apt's words on stderr.
apt_install() { apt_locked _apt_install "$@"; }

# apt_download PKG: fetch PKG's .deb into the current folder, updating the lists once if needed.
apt_download() {
  _apt download "$1" >/dev/null 2>&1 || { apt_locked _apt update >/dev/null && _apt download "$1" >/dev/null; }
}
