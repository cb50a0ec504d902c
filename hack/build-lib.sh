# Shared by the hack/*-build.sh scripts (sourced, not run): the Go toolchain they use and the
# pruning of superseded cache folders. Callers set CACHE and define log/die first.

# find_go: set GO to a Go toolchain (GO from the environment, `go` on PATH, /usr/local/go).
find_go() {
  GO=${GO:-}
  [[ -n $GO ]] && return 0
  if command -v go >/dev/null 2>&1; then GO=$(command -v go)
  elif [[ -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go
  else die "no Go toolchain found (need go >= 1.26 on PATH or at /usr/local/go/bin/go)"
  fi
}

# mark_used DIR: note that DIR's build was just used (prune_old_builds keeps it a day).
mark_used() { touch "$1" 2>/dev/null || true; }

# prune_old_builds PREFIX KEEP: remove $CACHE/PREFIX* folders other than KEEP, except those whose
# binaries a running process still executes (a live node or control plane keeps its build) and
# those used in the last day (mark_used): two checkouts of different trees on one machine (git
# worktrees, a branch switch) would otherwise delete each other's build on every run.
prune_old_builds() {
  local prefix=$1 keep=$2 in_use old
  in_use=$(for e in /proc/[0-9]*/exe; do readlink "$e" 2>/dev/null; done | grep -F "$CACHE/$prefix" || true)
  for old in "$CACHE/$prefix"*; do
    [[ -d $old && $old != "$keep" ]] || continue
    [[ -n $(find "$old" -maxdepth 0 -mmin -1440 2>/dev/null) ]] && continue
    if grep -qF "$old/" <<<"$in_use"; then continue; fi
    log "removing old build $old"
    rm -rf "$old"
  done
}
