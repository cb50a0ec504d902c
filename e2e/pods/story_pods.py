"""Helpers for the user story on real pods (e2e/pods/test_pods_story.py): the chart installed with
the images of `make images`, the in-cluster helpers (a git server, the fake LLM upstream), and the
user's view of the gateway through its Service address (routed from the host to kube-proxy).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import yaml
from tests.kit.poll import wait_for

from .conftest import RealNode

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "brain-operator"
SAMPLES = ROOT / "samples"
REG = "ghcr.io/brain-operator"
#: hack/images.sh's IMAGE_TAG: two people sharing one Docker store test their own builds.
TAG = os.environ.get("IMAGE_TAG", "dev")
#: the model the embedder image bakes offline (images/embedder/Dockerfile), which the sample names
#: too; kept explicit so the story does not depend on the sample's choice.
EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def helm_values(*watch: str, tag: str = TAG) -> list[str]:
    """`--set`s for `helm install` with the images of `make images` (or of another build's `tag`,
    e2e/pods/test_upgrade.py's previous release). ``watch``: the namespaces the operator watches (the
    chart's default since issue #26 is its own namespace only; a Role is made in each, so they must
    exist before the install)."""
    sets = {
        "image.tag": tag,
        "dataPlaneImages.gateway": f"{REG}/gateway:{tag}",
        "dataPlaneImages.embedder": f"{REG}/embedder:{tag}",
        "dataPlaneImages.jobs": f"{REG}/jobs:{tag}",
        "dataPlaneImages.postgres": f"{REG}/postgres:17-pgvector-{tag}",
        "dataPlaneImages.cloudflared": f"{REG}/cloudflared:{tag}",
        "operator.healthSeconds": "2",
        # the story's git server is plain http:// in a pod, which a cluster refuses without this
        "operator.allowInsecureGitUrls": "true",
    }
    if watch:
        sets["watch.namespaces"] = "{" + ",".join(watch) + "}"
    return [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]


def brain_manifest(ns: str, **gateway: Any) -> str:
    """samples/brain.yaml with the echo model at the in-cluster fake upstream and the embedder's model."""
    brain = yaml.safe_load((SAMPLES / "brain.yaml").read_text())
    for m in brain["spec"]["gateway"]["models"]:
        m["apiBase"] = f"http://fake-llm.{ns}.svc.cluster.local:4001/v1"
    brain["spec"]["embedding"]["model"] = EMBEDDING_MODEL
    brain["spec"]["database"]["managed"]["storage"] = "1Gi"
    brain["spec"]["gateway"].update(gateway)
    return yaml.safe_dump(brain, sort_keys=False)


def helpers_manifest(ns: str, files: dict[str, str]) -> str:
    """The fake LLM upstream (gateway image) and a git server (jobs image) holding `files` in one
    commit of repository team-memories.git, both as Deployments with Services and readiness probes."""
    script = (ROOT / "e2e" / "pods" / "gitserver.py").read_text()
    keys = {f"f{i}": path for i, path in enumerate(files)}
    seed = " && ".join(f"mkdir -p /tmp/w/$(dirname {p}) && cp /seed/{k} /tmp/w/{p}" for k, p in keys.items())
    git = "git -c user.name=team -c user.email=team@example.com"
    start = (
        f"set -e; {seed} && cd /tmp/w && git init -q -b main && {git} add -A && {git} commit -qm 'first memories' "
        "&& git clone -q --bare /tmp/w /tmp/srv/team-memories.git "
        "&& exec python /seed/gitserver.py --root /tmp/srv --port 8000"
    )
    sec = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    }
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "git-seed"},
            "data": {**{k: files[p] for k, p in keys.items()}, "gitserver.py": script},
        }
    ]
    for name, image, command, port, volumes, mounts in (
        (
            "fake-llm",
            f"{REG}/gateway:{TAG}",
            ["python", "-m", "brain.local.fakeupstream", "--host", "0.0.0.0", "--port", "4001"],
            4001,
            [],
            [],
        ),
        (
            "git-server",
            f"{REG}/jobs:{TAG}",
            ["sh", "-c", start],
            8000,
            [{"name": "seed", "configMap": {"name": "git-seed"}}],
            [{"name": "seed", "mountPath": "/seed", "readOnly": True}],
        ),
    ):
        docs.append(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": name},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": name}},
                    "template": {
                        "metadata": {"labels": {"app": name}},
                        "spec": {
                            "containers": [
                                {
                                    "name": name,
                                    "image": image,
                                    "imagePullPolicy": "Never",
                                    "command": command,
                                    "env": [{"name": "HOME", "value": "/tmp"}],
                                    "ports": [{"containerPort": port}],
                                    "readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 1},
                                    "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}},
                                    "securityContext": sec,
                                    "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, *mounts],
                                }
                            ],
                            "securityContext": {"runAsNonRoot": True, "runAsUser": 65532},
                            "volumes": [{"name": "tmp", "emptyDir": {}}, *volumes],
                        },
                    },
                },
            }
        )
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": name},
                "spec": {"selector": {"app": name}, "ports": [{"port": port, "targetPort": port}]},
            }
        )
    return yaml.safe_dump_all(docs, sort_keys=False)


def pods_ready(node: RealNode, ns: str, selector: str = "") -> tuple[bool, str]:
    """(every pod Running with every container Ready, a one-line summary for messages)."""
    args = ["get", "pods", "-n", ns] + (["-l", selector] if selector else [])
    pods = node.json(*args)["items"]
    lines, ok = [], bool(pods)
    for p in pods:
        if p["status"].get("phase") == "Succeeded":
            continue  # a finished Job's pod
        statuses = p["status"].get("containerStatuses") or []
        ready = bool(statuses) and all(s.get("ready") for s in statuses)
        ok = ok and p["status"].get("phase") == "Running" and ready
        restarts = sum(s.get("restartCount", 0) for s in statuses)
        lines.append(
            f"{p['metadata']['name']}={p['status'].get('phase')}/{'ready' if ready else 'unready'}/r{restarts}"
        )
    return ok, " ".join(lines)


def service_url(node: RealNode, ns: str, name: str, port: int) -> str:
    ip = node.kubectl("get", "svc", name, "-n", ns, "-o", "jsonpath={.spec.clusterIP}").strip()
    return f"http://{ip}:{port}"


def run_job(
    node: RealNode, ns: str, cronjob: str, timeout: float = 300, expect: str = "Complete"
) -> tuple[dict[str, Any], str]:
    """`kubectl create job --from=cronjob/...`, wait for it to finish as `expect` (Complete, or Failed
    for a run that must fail), return (its summary line, its log)."""
    name = f"{cronjob[:40]}-{int(time.time() * 1000) % 100000}"
    node.kubectl("create", "job", name, f"--from=cronjob/{cronjob}", "-n", ns)

    def finished() -> str | None:
        st = node.json("get", "job", name, "-n", ns).get("status") or {}
        for c in st.get("conditions") or []:
            if c["type"] in ("Complete", "Failed") and c["status"] == "True":
                return str(c["type"])
        return None

    outcome = wait_for(f"Job {name}", finished, timeout=timeout, every=1)
    log = node.kubectl("logs", f"job/{name}", "-n", ns, "--tail=200", check=False)
    assert outcome == expect, f"Job {name} {outcome}, expected {expect}:\n{log[-3000:]}"
    summary: dict[str, Any] = {}
    for line in reversed(log.strip().splitlines()):
        try:
            summary = json.loads(line)
            break
        except json.JSONDecodeError:
            continue
    return summary, log


#: the chart's release and namespace in the pod stories (helm install brain-operator -n brain-system)
OPERATOR_NS = "brain-system"
RELEASE = "brain-operator"


def scale_gateway(node: RealNode, ns: str, replicas: int) -> None:
    """Change the Brain `team`'s spec.gateway.replicas: the smallest spec change an operator converges."""
    patch = json.dumps({"spec": {"gateway": {"replicas": replicas}}})
    node.kubectl("patch", "brain", "team", "-n", ns, "--type=merge", "-p", patch)


def kill_active_operator(node: RealNode, ns: str, replicas: int, timeout: float) -> tuple[str, float]:
    """Force-delete the active operator replica (the highest priority in the namespace's KopfPeering,
    the chart's default peering) and change the Brain at once: the standby must take over and scale
    the gateway to `replicas`. Returns the killed pod and the seconds from the kill to the change."""
    peering = node.json("get", "kopfpeering", RELEASE, "-n", ns)
    peers = sorted(
        (v.get("priority", 0), k.split("@", 1)[-1].split("/")[0])
        for k, v in (peering.get("status") or {}).items()
    )
    assert len(peers) == 2, peering.get("status")
    active = peers[-1][1]
    t_kill = time.monotonic()
    node.kubectl("delete", "pod", active, "-n", OPERATOR_NS, "--grace-period=0", "--force")
    scale_gateway(node, ns, replicas)
    wait_for(
        f"the standby to take over and scale the gateway to {replicas}",
        lambda: node.json("get", "deploy", "team-gateway", "-n", ns)["spec"]["replicas"] == replicas,
        timeout=timeout,
    )
    return active, time.monotonic() - t_kill
