"""The secret gate in both directions: every detector fires, and tricky negatives pass untouched."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brain.core.errors import SecretRejected
from brain.core.redact import SecretGate, redact, scan, scan_all
from tests.kit.secret_corpus import FRESH_CLEAN, FRESH_SECRETS, NEGATIVES, POSITIVES


@pytest.mark.parametrize(("kind", "text"), POSITIVES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(POSITIVES)])
def test_each_detector_finds_its_secret(kind: str, text: str) -> None:
    found = {f.type for f in scan(text)}
    assert kind in found, f"{kind} not detected in {text!r}; found {found}"


@pytest.mark.parametrize("text", NEGATIVES)
def test_tricky_negatives_pass_untouched(text: str) -> None:
    assert scan(text) == []
    assert redact(text) == text


def test_every_detector_has_a_positive() -> None:
    from brain.core.redact import _DETECTORS

    covered = {k for k, _ in POSITIVES}
    assert {name for name, _, _ in _DETECTORS} | {"generic_secret", "high_entropy_string"} <= covered


@pytest.mark.parametrize(("kind", "text"), POSITIVES[:6])
def test_refuse_names_the_type_and_never_echoes_the_value(kind: str, text: str) -> None:
    finding = scan(text)[0]
    secret = text[finding.start : finding.end]
    with pytest.raises(SecretRejected) as err:
        SecretGate("refuse").check("body", text)
    assert kind in err.value.message and "body" in err.value.message
    assert secret not in err.value.message and secret[:12] not in err.value.message


def test_redact_mode_masks_only_the_secret() -> None:
    text = POSITIVES[2][1]
    out = SecretGate("redact").check("body", text)
    assert out == "export AWS_ACCESS_KEY_ID=«REDACTED:aws_access_key»"


def test_generic_secret_keeps_the_key_name() -> None:
    out = redact("db_password=Hunter2Hunter2xyz")
    assert out == "db_password=«REDACTED:generic_secret»"


@pytest.mark.parametrize(("kind", "text"), POSITIVES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(POSITIVES)])
def test_redaction_is_a_fixpoint_the_refusing_gate_accepts(kind: str, text: str) -> None:
    """Capture redacts, then the door's refusing gate re-reads the result: it must pass."""
    masked = SecretGate("redact").check("body", text)
    assert "«REDACTED:" in masked
    assert SecretGate("refuse").check("body", masked) == masked


def test_obfuscated_secrets_are_found_in_the_folded_view() -> None:
    token = POSITIVES[8][1].split()[1]  # a GitHub token
    fullwidth = "".join(chr(ord(c) + 0xFEE0) for c in token)
    zero_width = "\u200b".join(token)
    for text in (f"use {fullwidth} here", f"use {zero_width} here"):
        with pytest.raises(SecretRejected, match="github_token"):
            SecretGate("refuse").check("body", text)
        assert token not in SecretGate("redact").check("body", text)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([t for _, t in POSITIVES]),
    st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40),
    st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40),
)
def test_redaction_is_a_fixpoint_in_any_surrounding_text(secret: str, before: str, after: str) -> None:
    masked = SecretGate("redact").check("body", before + secret + after)
    assert not scan_all(masked)


@pytest.mark.parametrize("text", FRESH_SECRETS)
def test_round_two_secrets_are_found(text: str) -> None:
    with pytest.raises(SecretRejected):
        SecretGate("refuse").check("body", text)


@pytest.mark.parametrize("text", FRESH_CLEAN)
def test_round_two_negatives_pass(text: str) -> None:
    assert scan_all(text) == []
