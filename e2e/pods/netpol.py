"""NetworkPolicies on the real node (kube-router's policy controller, hack/node-up.sh): probe pods
in other namespaces, and a probe run inside a pod that connects to a list of addresses.

What a probe reports, per target: ``postgres`` (Postgres answered its SSLRequest), ``http <status>``
(an HTTP GET answered), ``open`` (TCP connected), ``refused`` or ``timeout``. kube-router rejects
what no policy admits (iptables REJECT, an ICMP port-unreachable), so a fenced port answers
``refused`` at once rather than timing out; ``refused`` is also what a port nobody listens on says,
so :func:`rejects` reads kube-router's own REJECT counter for the target pod to tell the two apart.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from typing import Any

import yaml

from .conftest import RealNode
from .story_pods import REG, TAG

#: hack/node-lib.sh's BRAIN_NODE_NETNS: kube-router's chains live in the node's network namespace.
NETNS = os.environ.get("BRAIN_NODE_NETNS", "brain-node")
#: Seconds one connection attempt may take: bounded, so a dropped packet fails fast too.
CONNECT_TIMEOUT = 3

PROBE = r"""
import json, socket, sys
out = {}
for name, host, port, kind in json.loads(sys.argv[1]):
    s = socket.socket()
    s.settimeout(@TIMEOUT@)
    try:
        s.connect((host, port))
        if kind == "postgres":  # SSLRequest: Postgres answers one byte, S or N
            s.sendall(bytes([0, 0, 0, 8, 4, 210, 22, 47]))
            out[name] = "postgres" if s.recv(1) in (b"S", b"N") else "open"
        elif kind == "http":
            s.sendall(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
            line = s.recv(64).split(b"\r\n")[0].decode(errors="replace")
            out[name] = "http " + (line.split(" ")[1] if line.startswith("HTTP/") else "?")
        else:
            out[name] = "open"
    except socket.timeout:
        out[name] = "timeout"
    except ConnectionRefusedError:
        out[name] = "refused"
    except OSError as e:
        out[name] = "error " + str(e.errno)
    finally:
        s.close()
print(json.dumps(out))
""".replace("@TIMEOUT@", str(CONNECT_TIMEOUT))


def probe_pod_manifest(ns: str, name: str, labels: dict[str, str]) -> str:
    """A pod that only waits (the gateway image: it has Python), with the labels it claims."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {
            "containers": [
                {
                    "name": "probe",
                    "image": f"{REG}/gateway:{TAG}",
                    "imagePullPolicy": "Never",
                    "command": ["python", "-c", "import time; time.sleep(86400)"],
                    "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                        "readOnlyRootFilesystem": True,
                    },
                }
            ],
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65532},
            "terminationGracePeriodSeconds": 0,
        },
    }
    return yaml.safe_dump(pod, sort_keys=False)


def probe(node: RealNode, ns: str, pod: str, targets: list[tuple[str, str, int, str]]) -> dict[str, str]:
    """Connect from inside `pod` to each (name, host, port, kind); one result per name."""
    out = node.kubectl(
        "exec", "-n", ns, pod, "-c", container_of(node, ns, pod), "--",
        "python", "-c", PROBE, json.dumps(targets),
        timeout=30 + CONNECT_TIMEOUT * len(targets),
    )  # fmt: skip
    return dict(json.loads(out.strip().splitlines()[-1]))


def container_of(node: RealNode, ns: str, pod: str) -> str:
    """The pod's first container (the gateway's, not its cloudflared sidecar)."""
    spec: dict[str, Any] = node.json("get", "pod", pod, "-n", ns)["spec"]
    return str(spec["containers"][0]["name"])


def node_iptables() -> str:
    """The node's filter table with packet counters (iptables-save -c inside its netns)."""
    proc = subprocess.run(
        ["ip", "netns", "exec", NETNS, "iptables-save", "-c", "-t", "filter"],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    return proc.stdout


def rejects(ns: str, pod: str) -> int:
    """Packets kube-router has rejected on their way to `pod`: the counter of its per-pod REJECT rule
    ("rule to REJECT traffic destined for POD name:<pod> namespace: <ns>")."""
    total = 0
    needle = f"destined for POD name:{pod} namespace: {ns}"
    for line in node_iptables().splitlines():
        m = re.match(r"\[(\d+):\d+\] ", line)
        if m and needle in line and "-j REJECT" in line:
            total += int(m[1])
    return total
