"""The review page's edges, without a browser: what is served at `/review`, with which headers, to
whom; the owner-only reads the page uses; the word diff; and that the assets ship as package data
and point at nothing outside the gateway (air-gapped clusters)."""

from __future__ import annotations

import itertools
import re
import tomllib
from pathlib import Path

import httpx
import pytest

from brain.gateway.review import ASSETS, CSP, PAGE, word_diff
from brain.services import proposals

from .conftest import Gateway

ROOT = Path(__file__).resolve().parents[2]
ASSET_DIR = ROOT / "operator" / "brain" / "gateway" / "review_assets"


async def get(gw: Gateway, path: str, **kw: object) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as c:
        return await c.get(gw.url + path, **kw)  # type: ignore[arg-type]


async def test_the_page_and_its_assets_are_served_with_a_strict_policy(gw: Gateway) -> None:
    for path in ("/review", "/review/"):
        r = await get(gw, path)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html"), path
        assert r.headers["content-security-policy"] == CSP
        assert "script-src 'self';" in CSP and "unsafe" not in CSP and "frame-ancestors 'none'" in CSP
        assert r.headers["x-frame-options"] == "DENY" and r.headers["cache-control"] == "no-store"
        assert '<script src="/review/assets/review.js" defer></script>' in r.text
    async with httpx.AsyncClient(timeout=30) as c:
        head = await c.head(gw.url + "/review")
    assert head.status_code == 200 and head.headers["content-security-policy"] == CSP and not head.content
    js = await get(gw, "/review/assets/review.js")
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    assert js.text == (ASSET_DIR / "review.js").read_text()
    css = await get(gw, "/review/assets/review.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")


@pytest.mark.parametrize(
    "path", ["/review/assets/index.htm", "/review/assets/..%2Freview.py", "/review/assets/%2e%2e/review.py"]
)
async def test_nothing_but_the_pages_files_is_served(gw: Gateway, path: str) -> None:
    r = await get(gw, path)
    assert r.status_code == 404 and r.json()["code"] == "not_found", r.text
    assert "import" not in r.text


def test_the_assets_load_nothing_from_elsewhere_and_have_no_inline_script() -> None:
    html = (ASSET_DIR / PAGE).read_text()
    assert re.findall(r"<script[^>]*>", html) == ['<script src="/review/assets/review.js" defer>']
    assert "<style" not in html and " style=" not in html, "inline style needs 'unsafe-inline'"
    assert not re.search(r"\bon[a-z]+=", html), "inline event handlers need 'unsafe-inline'"
    for f in ASSET_DIR.iterdir():
        text = f.read_text()
        assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/", text), (
            f"{f.name} points outside the gateway"
        )
        assert "@import" not in text and "fonts.g" not in text
    js = (ASSET_DIR / "review.js").read_text()
    assert "innerHTML" not in js and "eval(" not in js and "document.write" not in js
    assert sorted(p.name for p in ASSET_DIR.iterdir()) == sorted([PAGE, *ASSETS])


def test_the_assets_are_package_data_and_in_the_gateway_image() -> None:
    """A wheel or sdist has only what package-data names; the image copies operator/brain whole
    (its Dockerfile and build-context ignore file), so the page is in it with no CDN behind it."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    globs = data["brain.gateway"]
    for f in ASSET_DIR.iterdir():
        assert any(Path("review_assets", f.name).match(g) for g in globs), f.name
    image = ROOT / "images" / "gateway"
    assert "COPY operator/brain /tmp/src/brain" in (image / "Dockerfile").read_text()
    ignore = (image / "Dockerfile.dockerignore").read_text().split()
    assert "!operator/brain/" in ignore
    assert not [p for p in ignore if p.endswith((".js", ".css", ".html")) or "review" in p]


async def test_only_an_owner_key_opens_a_session(gw: Gateway) -> None:
    r = await gw.rest("GET", "/review/session", key="owner")
    assert r.status_code == 200 and r.json()["name"] == "owner" and r.json()["role"] == "owner"
    for key, role in (("agent", "agent"), ("reader", "read")):
        r = await gw.rest("GET", "/review/session", key=key)
        assert r.status_code == 403 and r.json()["code"] == "forbidden"
        assert r.json()["message"].startswith(
            f"key {key!r} has the role {role!r}: the review page needs an owner key"
        )
    for key in ("not-a-key", "stale"):  # unknown, expired
        r = await gw.rest("GET", "/review/session", key=key)
        assert r.status_code == 401 and r.json()["code"] == "unauthorized", (key, r.text)


async def test_the_review_reads_are_closed_to_agent_keys(gw: Gateway, ns: str) -> None:
    pid = await proposals.create(
        gw.store, kind="convention", namespace=ns, title="t", body="b", evidence=[], authors=["a"], score=0.5
    )
    for path in (f"/review/proposals/{pid}", "/review/namespaces", "/review/memories"):
        for key in ("agent", "reader", "confined"):
            r = await gw.rest("GET", path, key=key)
            assert r.status_code == 403, (path, key, r.text)


async def test_a_proposal_comes_with_its_records_and_its_diff(gw: Gateway, ns: str) -> None:
    ep = (
        await gw.rest(
            "POST",
            "/memories",
            key="agent",
            json={
                "body": "the flaky pull again, retried",
                "namespace": ns,
                "kind": "experience",
                "episode": "e-9",
            },
        )
    ).json()
    old = (
        await gw.rest("POST", "/memories", key="agent", json={"body": "Never retry.", "namespace": ns})
    ).json()
    pid = await proposals.create(
        gw.store,
        kind="convention",
        namespace=ns,
        title="Retry",
        body="Retry twice.",
        evidence=[{"type": "episode", "memory_id": ep["id"]}, {"type": "episode", "memory_id": "gone"}],
        authors=["agent"],
        score=0.5,
        supersedes=old["id"],
    )
    out = (await gw.rest("GET", f"/review/proposals/{pid}", key="owner")).json()
    [rec] = out["records"]
    assert rec["id"] == ep["id"] and rec["author"] == "agent" and rec["episode"] == "e-9"
    assert rec["body"] == "the flaky pull again, retried"
    assert out["diff"] == [{"op": "delete", "text": "Never retry."}, {"op": "insert", "text": "Retry twice."}]
    assert out["current"]["body"] == "Never retry."
    listing = (
        await gw.rest("GET", "/review/memories", key="owner", params={"namespace": ns, "author": "agent"})
    ).json()
    assert {e["id"] for e in listing["entries"]} == {ep["id"], old["id"]}
    assert any(a["author"] == "agent" for a in listing["authors"])
    names = (await gw.rest("GET", "/review/namespaces", key="owner")).json()["namespaces"]
    assert {"name": ns, "entries": 2} in names


def test_word_diff_keeps_both_texts() -> None:
    old = "Staging deploys are never retried; a failure pages at once."
    new = "Staging deploys are retried twice; the third failure pages."
    ops = word_diff(old, new)
    assert "".join(o["text"] for o in ops if o["op"] != "insert") == old
    assert "".join(o["text"] for o in ops if o["op"] != "delete") == new
    assert any(o["op"] == "delete" and "never" in o["text"] for o in ops)
    assert any(o["op"] == "insert" and "twice;" in o["text"] for o in ops)
    assert ops[0] == {"op": "equal", "text": "Staging deploys are "}
    assert all(a["op"] != b["op"] for a, b in itertools.pairwise(ops))
    assert word_diff("same", "same") == [{"op": "equal", "text": "same"}]
    assert word_diff("", "new") == [{"op": "insert", "text": "new"}]
