"""One default embedding model everywhere (issue #28, step 1).

A Brain that names no model must get an embedder that holds the model the CRD defaults to, or
the embedder refuses to start (it holds only what its image baked) and the Brain never turns
Ready. That was the bug: the CRD defaulted to bge-small while the image and `brainctl up` held
only MiniLM. These tests read each place from its own file, so a change to one fails here.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from brain.core.contract import DEFAULT_EMBEDDING_DIM, DEFAULT_EMBEDDING_MODEL
from brain.embedder.__main__ import HELD_MODEL_ENV, unheld_model
from brain.embedder.model import DEFAULT_MODEL
from brain.local import up
from brain_operator.api import Brain

from .helpers import ROOT, render, sample


def _crd_embedding_default() -> dict[str, Any]:
    crd = yaml.safe_load((ROOT / "crds" / "brain.dev_brains.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    emb = spec["properties"]["embedding"]
    assert emb["properties"]["model"]["default"] == emb["default"]["model"]
    out: dict[str, Any] = emb["default"]
    return out


def _image_model() -> str:
    """The model the embedder image bakes and names as held (its Dockerfile's ARG and CMD)."""
    text = (ROOT / "images" / "embedder" / "Dockerfile").read_text()
    (held,) = set(re.findall(r"ARG EMBEDDING_MODEL=(\S+)", text))
    assert f'"--model", "{held}"' in text, "the image's CMD serves the model it holds"
    assert f'test "${{EMBEDDING_MODEL}}" = {held}' in text, "the offline build refuses any other"
    return held


def test_crd_default_is_the_model_the_embedder_image_holds() -> None:
    default = _crd_embedding_default()
    held = _image_model()
    assert default["model"] == held == DEFAULT_EMBEDDING_MODEL == DEFAULT_MODEL == up.DEFAULT_MODEL
    assert default["dim"] == DEFAULT_EMBEDDING_DIM
    chart = yaml.safe_load(
        (ROOT / "charts" / "brain-operator" / "crds" / "brain.dev_brains.yaml").read_text()
    )
    chart_emb = chart["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert chart_emb["embedding"]["default"] == default, "the chart ships the same CRD"
    # The embedder started with the default model in that image does not refuse it.
    assert unheld_model(default["model"], held) is None, HELD_MODEL_ENV


def test_samples_and_chart_values_name_the_held_model() -> None:
    held = _image_model()
    assert sample("brain.yaml")["spec"]["embedding"]["model"] == held
    values = (ROOT / "charts" / "brain-operator" / "values.yaml").read_text()
    models = re.findall(r"^\s+embedding:\n\s+model: (\S+)", values, flags=re.M)
    assert models and set(models) == {held}


def test_a_brain_without_embedding_gets_an_embedder_that_starts() -> None:
    """What a user notices: no spec.embedding, and the embedder pod serves the image's model."""
    doc = sample("brain.yaml")
    del doc["spec"]["embedding"]
    doc.setdefault("metadata", {}).update(namespace="team-ns", uid="uid-team", generation=1)
    b = Brain.model_validate(doc)
    held = _image_model()
    assert (b.spec.embedding.model, b.spec.embedding.dim) == (held, DEFAULT_EMBEDDING_DIM)
    out = {(m["kind"], m["metadata"]["name"]): m for m in render(b)}
    emb = out[("Deployment", "team-embedder")]["spec"]["template"]["spec"]["containers"][0]
    args = emb["args"]
    assert args[args.index("--model") + 1] == held
    assert unheld_model(args[args.index("--model") + 1], held) is None
