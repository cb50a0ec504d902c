"""The two CloudNativePG images (hack/images.sh cnpg cnpg-postgres): what CNPG 1.27 expects of them,
read from the Dockerfiles, and the manifest hack/cnpg-install.sh renders (no cluster needed).
e2e/pods/test_ha.py runs both on the real node."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from .test_images import OCI_LABELS, ROOT, parse


def _labels(image: str) -> str:
    (stage,) = parse(image)
    return " ".join(rest for o, rest in stage.instructions if o == "LABEL")


def test_operator_image_has_cnpgs_layout() -> None:
    """CNPG hands Postgres pods the file operator/manager_<GOARCH> (relative to /) and runs /manager;
    without that file every Cluster failed with "invalid architecture" on the real node."""
    (stage,) = parse("cnpg")
    copies = [rest for o, rest in stage.instructions if o == "COPY"]
    assert copies == [".build/cnpg/ /operator/"], copies
    assert any("/manager" in rest and "operator/" in rest for o, rest in stage.instructions if o == "RUN")
    assert [rest for o, rest in stage.instructions if o == "USER"] == ["65532:65532"]
    assert [rest for o, rest in stage.instructions if o == "WORKDIR"] == ["/"]
    assert 'manager_$goarch"' in (ROOT / "hack" / "images.sh").read_text()
    for key in OCI_LABELS:
        assert f"org.opencontainers.image.{key}=" in _labels("cnpg"), key


def test_operand_image_meets_cnpgs_requirements() -> None:
    (stage,) = parse("cnpg-postgres")
    text = (ROOT / "images" / "cnpg-postgres" / "Dockerfile").read_text()
    assert [rest for o, rest in stage.instructions if o == "USER"] == ["26:26"], "CNPG's default postgresUID"
    assert re.search(r"useradd [^&]*--uid 26 --gid 26", text), "initdb needs a passwd entry for uid 26"
    env = " ".join(rest for o, rest in stage.instructions if o == "ENV")
    assert "PATH=/usr/lib/postgresql/17/bin:$PATH" in env, "the instance manager runs initdb & co by name"
    assert "postgresql-17 postgresql-17-pgvector" in text
    ref = subprocess.run(
        ["bash", str(ROOT / "hack" / "images.sh"), "--ref", "cnpg-postgres"], capture_output=True, text=True
    ).stdout.strip()
    assert re.search(r":17[-.]", ref), f"CNPG reads the major version from the tag: {ref}"
    for key in OCI_LABELS:
        assert f"org.opencontainers.image.{key}=" in _labels("cnpg-postgres"), key


def test_cnpg_images_are_optional() -> None:
    """`make images` builds the five without a Go build; the CNPG two only on request."""
    out = subprocess.run(
        ["bash", str(ROOT / "hack" / "images.sh"), "nope"], capture_output=True, text=True
    ).stderr
    assert "cnpg cnpg-postgres" in out
    script = (ROOT / "hack" / "images.sh").read_text()
    assert "ALL=(operator gateway embedder jobs database cloudflared)" in script


def test_install_renders_cnpgs_release_manifest_with_our_image(tmp_path: Path) -> None:
    """hack/cnpg-install.sh --render: CNPG's config/default through the overlay (kubectl kustomize).
    The controller runs our image, never pulls, and keeps CNPG's own webhook configuration."""
    import yaml

    kube_bin = subprocess.run(
        ["bash", str(ROOT / "hack" / "kube-build.sh")], capture_output=True, text=True, check=True
    ).stdout.strip()
    env = {**os.environ, "PATH": f"{kube_bin}{os.pathsep}{os.environ['PATH']}", "BRAIN_CACHE": str(tmp_path)}
    proc = subprocess.run(
        ["bash", str(ROOT / "hack" / "cnpg-install.sh"), "--render"], capture_output=True, text=True, env=env,
        timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    kinds = {d["kind"] for d in docs}
    assert {
        "CustomResourceDefinition",
        "Deployment",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    } <= kinds
    assert "postgresql.cnpg.io" in {
        d["spec"]["group"] for d in docs if d["kind"] == "CustomResourceDefinition"
    }
    [deploy] = [d for d in docs if d["kind"] == "Deployment"]
    [c] = deploy["spec"]["template"]["spec"]["containers"]
    ours = subprocess.run(
        ["bash", str(ROOT / "hack" / "images.sh"), "--ref", "cnpg"], capture_output=True, text=True
    ).stdout.strip()
    assert (c["image"], c["imagePullPolicy"]) == (ours, "IfNotPresent")
    env_vars = {e["name"]: e.get("value") for e in c["env"]}
    assert env_vars["OPERATOR_IMAGE_NAME"] == ours, "the image CNPG copies into every instance pod"
