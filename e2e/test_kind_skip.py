"""The kind e2e skips, with the reason, wherever it cannot run; it used to error where a Docker
engine existed but no kind node image could be had (no registry, as on this machine)."""

from __future__ import annotations

from .conftest import kind_skip_reason


def test_engine_but_no_node_image_skips_naming_the_node_image() -> None:
    why = kind_skip_reason(None, True, [], [], "brain")
    assert why and "no kind node image can be had" in why and "kindest/node" in why


def test_engine_and_node_image_but_no_cluster_says_how_to_make_one() -> None:
    why = kind_skip_reason(None, True, ["other"], ["kindest/node:v1.33.1"], "brain")
    assert why and "hack/kind-up.sh" in why and "'brain'" in why


def test_existing_cluster_runs() -> None:
    assert kind_skip_reason(None, True, ["brain"], [], "brain") is None


def test_no_engine_or_no_cli_skip_first() -> None:
    assert kind_skip_reason("no docker CLI on PATH", True, [], [], "brain") == "no docker CLI on PATH"
    assert kind_skip_reason(None, False, [], [], "brain") == "kind/kubectl not on PATH"
