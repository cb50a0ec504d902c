"""`python -m brain_operator --help` explains itself; flags and env map onto the config."""

from __future__ import annotations

import subprocess
import sys

import pytest

from brain_operator.main import config_from_args, parse_args


def test_help_explains() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "brain_operator", "--help"], capture_output=True, text=True, check=True
    )
    for words in ("Brain", "server-side apply", "--namespace", "--peering", "/metrics", "KUBECONFIG"):
        assert words in out.stdout


def test_flags_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAIN_OPERATOR_NAMESPACES", "a, b")
    monkeypatch.setenv("BRAIN_OPERATOR_GATEWAY_IMAGE", "registry.local/gw:1")
    cfg = config_from_args(parse_args([]))
    assert cfg.namespaces == ["a", "b"] and cfg.images.gateway == "registry.local/gw:1"
    cfg = config_from_args(parse_args(["-n", "x", "--resync-seconds", "5", "--metrics-port", "0"]))
    assert cfg.namespaces == ["x"] and cfg.resync_seconds == 5 and cfg.metrics_port == 0
    assert config_from_args(parse_args(["--all-namespaces"])).namespaces == []
    gateway = "http://team-gateway.ns.svc:4000/brain/v1/health"
    assert cfg.health_url("team", "ns", {}) == gateway
    # whoever writes a Brain writes its annotations: by default the annotation is not followed
    annotated = {"brain.dev/health-url": "http://h/x"}
    assert cfg.health_url("team", "ns", annotated) == gateway and cfg.health_url_is_gateway(
        "team", "ns", annotated
    )
    test = config_from_args(parse_args(["--allow-health-url-override"]))
    assert test.health_url("team", "ns", annotated) == "http://h/x"
    assert not test.health_url_is_gateway("team", "ns", annotated)  # so the master key is not sent there
    monkeypatch.setenv("BRAIN_OPERATOR_ALLOW_HEALTH_URL_OVERRIDE", "1")
    assert config_from_args(parse_args([])).allow_health_url_override


def test_peering_lifetime_from_flag_or_env_and_a_bad_one_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert config_from_args(parse_args([])).peering_lifetime_seconds == 60  # kopf's default
    assert config_from_args(parse_args(["--peering-lifetime-seconds", "20"])).peering_lifetime_seconds == 20
    monkeypatch.setenv("BRAIN_OPERATOR_PEERING_LIFETIME_SECONDS", "30")
    assert config_from_args(parse_args([])).peering_lifetime_seconds == 30
    for bad in ("5", "1.5", "soon"):
        with pytest.raises(SystemExit):
            parse_args(["--peering-lifetime-seconds", bad])
        err = capsys.readouterr().err
        assert "--peering-lifetime-seconds" in err and "at least 10" in err and repr(bad) in err
