"""The review page in a real headless browser (Debian's chromium, driven by its chromedriver), against
the real gateway: an agent key is turned away, an owner signs in, reads a proposal's evidence and its
diff, approves it, rejects another with a reason, browses the memory's lineage and reads the digest.
The results are checked through the REST API, and the approved memory is then injected into a chat.

chromium and chromium-driver come from apt through hack/chromium.sh (skip, with its reason, only where
they cannot be installed). Screenshots go to `BRAIN_REVIEW_SCREENSHOTS` when set (docs/img/ for the
docs: `BRAIN_REVIEW_SCREENSHOTS=docs/img pytest tests/gateway/test_review_browser.py`), else the
test's tmp folder.

Selenium is synchronous, and the embedder the gateway calls is served from this test's event loop, so
every browser step runs in a thread (`asyncio.to_thread`): a blocked loop would stall the gateway.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest

from brain.embedder import LocalEmbedder
from brain.jobs.digest import run_digest
from brain.services import proposals
from tests.kit.poll import until
from tests.kit.retry_convention import NEW, OLD, QUESTION, RECORDS, cited, draft_convention

from .conftest import Gateway

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")

NOISE = "Use tabs for indentation in every YAML manifest of the staging cluster."


@pytest.fixture(scope="module")
def chromedriver() -> str:
    proc = subprocess.run(
        ["bash", str(ROOT / "hack" / "chromium.sh")], capture_output=True, text=True, timeout=900
    )
    if proc.returncode != 0:
        pytest.skip(f"no headless chromium: {proc.stderr.strip()[-500:]}")
    return proc.stdout.strip()


@pytest.fixture
def browser(chromedriver: str) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in (
        "--headless=new",
        "--no-sandbox",  # the tests run as root, where chromium's sandbox cannot start
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1440,1000",
        "--no-first-run",
        "--disable-extensions",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    env = {**os.environ, "TZ": "UTC"}  # datetime-local inputs are read in the browser's zone
    driver = webdriver.Chrome(service=Service(chromedriver, env=env), options=opts)
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    where = os.environ.get("BRAIN_REVIEW_SCREENSHOTS")
    out = (ROOT / where) if where and not os.path.isabs(where) else Path(where) if where else tmp_path
    out.mkdir(parents=True, exist_ok=True)
    return out


async def step(fn: Callable[[], T]) -> T:
    return await asyncio.to_thread(fn)


def wait_for(driver: Any, css: str, text: str | None = None, timeout: float = 20) -> Any:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(driver, timeout)
    try:
        if text is not None:
            wait.until(ec.text_to_be_present_in_element((By.CSS_SELECTOR, css), text))
        return wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, css)))
    except TimeoutException:  # say what the page showed instead, so a red run says where it stopped
        shown = [e.text for e in driver.find_elements(By.CSS_SELECTOR, css)]
        raise AssertionError(
            f"{css} never showed {text!r} within {timeout:.0f} s; it shows {shown!r}"
        ) from None


def css(driver: Any, selector: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, selector)


def all_css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, selector))


#: Refusals the test asks for (the agent's sign-in, the reject without a reason): Chrome logs every
#: 4xx answer to fetch as a console error.
EXPECTED_REFUSALS = (
    "/brain/v1/review/session - Failed to load resource: the server responded with a status of 403",
    "/reject - Failed to load resource: the server responded with a status of 422",
)


def page_errors(driver: Any) -> list[str]:
    """Console errors: a CSP violation, a failed asset or a script error all land here."""
    return [
        e["message"]
        for e in driver.get_log("browser")
        if e["level"] == "SEVERE" and not any(r in e["message"] for r in EXPECTED_REFUSALS)
    ]


async def test_an_owner_reviews_proposals_in_a_real_browser(
    gw: Gateway, ns: str, browser: Any, shots: Path, embedder: LocalEmbedder
) -> None:
    # Two session records an agent captured, the memory they contradict, and what distill drafted.
    records = []
    for body, episode in RECORDS:
        r = await gw.rest(
            "POST",
            "/memories",
            key="agent",
            json={"body": body, "namespace": ns, "kind": "experience", "episode": episode},
        )
        assert r.status_code == 201, r.text
        records.append(r.json()["id"])
    old = (await gw.rest("POST", "/memories", key="agent", json={"body": OLD, "namespace": ns})).json()
    approve_id = await draft_convention(gw.store, ns, records, old["id"], old["content_hash"])
    reject_id = await proposals.create(
        gw.store,
        kind="convention",
        namespace=ns,
        title="Tabs in YAML manifests <img src=x id=pwned>",  # shown as text, never as markup
        body=NOISE,
        evidence=cited(records[:1]),
        authors=["agent"],
        score=0.98,
    )

    waiting = await proposals.create(  # left pending, drafted nine days ago: the digest lists it
        gw.store,
        kind="fact",
        namespace=ns,
        title="The staging registry mirror is pull-through",
        body="The staging registry mirror is a pull-through cache of ghcr.io.",
        evidence=cited(records[1:2]),
        authors=["agent"],
        score=0.4,
    )
    await gw.store.pool_for_tests.execute(
        "UPDATE proposals SET created_at = now() - interval '9 days' WHERE id = $1", waiting
    )

    url = gw.url + "/review"
    d = browser

    # An agent key is turned away, with a sentence saying why.
    def agent_signs_in() -> str:
        d.get(url)
        wait_for(d, "#key").send_keys(gw.keys["agent"])
        css(d, "#login-button").click()
        return str(wait_for(d, "#login-error", "owner key").text)

    refusal = await step(agent_signs_in)
    assert "key 'agent' has the role 'agent'" in refusal and "needs an owner key" in refusal
    assert await step(lambda: css(d, "#proposals").is_displayed()) is False

    # The owner signs in and opens the proposal: evidence records and the diff.
    def owner_opens() -> dict[str, Any]:
        key = css(d, "#key")
        key.clear()
        key.send_keys(gw.keys["owner"])
        css(d, "#login-button").click()
        wait_for(d, f'#proposal-list li[data-id="{approve_id}"]').click()
        wait_for(d, "#p-title", "Staging deploys retry twice")
        wait_for(d, "#p-diff ins")
        d.save_screenshot(str(shots / "review-proposal.png"))
        return {
            "who": css(d, "#whoami-name").text,
            "deleted": " ".join(e.text for e in all_css(d, "#p-diff del")),
            "inserted": " ".join(e.text for e in all_css(d, "#p-diff ins")),
            "evidence": css(d, "#p-evidence").text,
            "stored": d.execute_script("return sessionStorage.getItem('brain-review-key')"),
            "cookies": d.get_cookies(),
        }

    seen = await step(owner_opens)
    assert seen["who"] == "signed in as owner (owner)"
    assert "never" in seen["deleted"] and "twice;" in seen["inserted"]
    assert "flaky registry pull" in seen["evidence"] and "episode s-101" in seen["evidence"]
    assert seen["stored"] == gw.keys["owner"] and seen["cookies"] == []  # a header session, no cookie

    # Approve it with a reason (the browser's clock is UTC: TZ below, for the as_of step later).
    before_approval = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    await asyncio.sleep(1.1)

    def approve() -> str:
        css(d, "#p-reason").send_keys("matches the deploy runbook")
        css(d, "#p-approve").click()
        return str(wait_for(d, "#p-result.ok", "Approved").text)

    assert "curated" in await step(approve)

    # Reject the other: first without a reason (refused, the page says why), then with one.
    def reject() -> tuple[str, str]:
        wait_for(d, "#proposal-status")
        wait_for(d, f'#proposal-list li[data-id="{reject_id}"]').click()
        wait_for(d, "#p-title", "Tabs in YAML")
        assert css(d, "#p-title").text.endswith("<img src=x id=pwned>") and not all_css(d, "#pwned")
        css(d, "#p-reject").click()
        refused = str(wait_for(d, "#p-result.bad", "reason").text)
        css(d, "#p-reason").send_keys("we indent YAML with spaces; tabs break kubectl")
        css(d, "#p-reject").click()
        return refused, str(wait_for(d, "#p-result.ok", "Rejected").text)

    refused, rejected = await step(reject)
    assert "needs a reason" in refused and "Tabs in YAML" in rejected
    left = await step(lambda: [li.get_attribute("data-id") for li in all_css(d, "#proposal-list li")])
    assert approve_id not in left and reject_id not in left and waiting in left

    # Through the API: both decisions, with their reasons and their decider.
    shown = (await gw.rest("GET", f"/proposals/{approve_id}", key="owner")).json()
    assert shown["status"] == "approved" and shown["reason"] == "matches the deploy runbook"
    assert shown["decided_by"] == "owner"
    memory = (await gw.rest("GET", f"/memories/{shown['memory_id']}", key="agent")).json()
    assert memory["memory"]["body"] == NEW and memory["memory"]["tier"] == "curated"
    assert OLD in [v["body"] for v in memory["history"]]
    gone = (await gw.rest("GET", f"/proposals/{reject_id}", key="owner")).json()
    assert gone["status"] == "rejected" and gone["reason"].startswith("we indent YAML with spaces")

    await run_digest(gw.store, embedder)  # the week's digest, with the two decisions in it

    # The approved memory is what a chat now gets. The session records it was distilled from say
    # "retried twice" too, each alone in its episode, and an entry without an episode gained nothing
    # from episode context, so which of them led depended on what the rest of the
    # shared gateway's brain held (tests/retrieval/test_episode_of_one.py). In one CI run no chat was
    # given the approved memory for 60 s (what they were given went unrecorded: a failure now says,
    # `served_state`). Under the suite's load the question may be embedded late (the
    # answer says it is degraded): it is asked again, and an answer on the keyword legs alone that
    # holds the approved memory counts, as it is what the agent was given.
    answers: list[dict[str, str]] = []

    async def served() -> dict[str, str] | None:
        r = await gw.chat(QUESTION, headers={"x-brain-namespaces": ns})
        assert r.status_code == 200, r.text
        said = {k: v for k, v in r.headers.items() if k.startswith("x-brain-memory")}
        answers.append(said)
        return said if shown["memory_id"] in said.get("x-brain-memory-ids", "") else None

    try:
        await until("the approved memory to be what a chat is given", served)
    except AssertionError as e:  # say what the chats were given, and where the approved row stood
        raise AssertionError(f"{e}\n{await served_state(gw, shown['memory_id'], answers)}") from None
    assert NEW in gw.upstream_bodies()[-1]["messages"][0]["content"]

    # The page reads a memory's exposure once, when it opens; the chat's receipt is written within a
    # second (brain.gateway.retractions). What the owner's API says is what the page must show.
    async def exposed() -> dict[str, Any] | None:
        r = await gw.rest("GET", f"/memories/{shown['memory_id']}/exposure", key="owner")
        assert r.status_code == 200, r.text
        return r.json() if r.json()["count"] else None

    receipts = await until("the chat's exposure receipt", exposed, timeout=30)
    assert (receipts["count"], receipts["keys"]) == (1, ["agent"]), receipts

    # The memory browser: search, then the lineage with both versions and their authors.
    def browse() -> dict[str, Any]:
        css(d, 'nav a[data-view="memories"]').click()
        wait_for(d, "#m-namespace")
        from selenium.webdriver.support.ui import Select

        wait_for(d, f'#m-namespace option[value="{ns}"]', timeout=20)
        Select(css(d, "#m-namespace")).select_by_value(ns)
        wait_for(d, "#m-caption", "active entries")
        css(d, "#q").send_keys("staging deploy retried")
        css(d, "#search-button").click()
        wait_for(d, "#m-caption", "hits for")
        now = [r.get_attribute("data-id") for r in all_css(d, "#m-rows tr")]
        css(d, f'#m-rows tr[data-id="{shown["memory_id"]}"]').click()
        wait_for(d, "#mem-history li.current-version")
        wait_for(d, "#mem-exposure-summary", "1 conversation of 1 key")  # the chat above was given it
        d.save_screenshot(str(shots / "review-memory.png"))
        meta, history = css(d, "#mem-meta").text, [li.text for li in all_css(d, "#mem-history li")]
        # as_of: the same search, as the brain stood before the approval
        as_of = css(d, "#as-of")
        d.execute_script("arguments[0].value = arguments[1]", as_of, before_approval)
        css(d, "#search-button").click()
        wait_for(d, "#m-caption", "as of")
        then = [r.get_attribute("data-id") for r in all_css(d, "#m-rows tr")]
        return {"meta": meta, "history": history, "now": now, "then": then}

    mem = await step(browse)
    assert shown["memory_id"] in mem["now"] and old["id"] not in mem["now"]
    assert old["id"] in mem["then"] and shown["memory_id"] not in mem["then"]
    assert "written by owner" in mem["meta"] and "curated" in mem["meta"]
    assert len(mem["history"]) == 2 and OLD in mem["history"][0] and NEW in mem["history"][1]
    assert "superseded" in mem["history"][0]

    # The digest, readable.
    def digest() -> str:
        css(d, 'nav a[data-view="digest"]').click()
        wait_for(d, "#digest-doc h1", "Team brain digest")
        d.save_screenshot(str(shots / "review-digest.png"))
        return str(css(d, "#digest-doc").text)

    text = await step(digest)
    assert "Retrieval" in text and "Proposals" in text and "Retrieval hit rate" in text
    assert "The staging registry mirror is pull-through (9 days)" in text.split("Waiting for an owner")[1]
    assert await step(lambda: page_errors(d)) == []

    # Signing out forgets the key: a reload shows the sign-in form again.
    def sign_out() -> tuple[Any, bool]:
        css(d, "#signout").click()
        wait_for(d, "#key")
        d.refresh()
        return d.execute_script("return sessionStorage.getItem('brain-review-key')"), wait_for(
            d, "#key"
        ).is_displayed()

    assert await step(sign_out) == (None, True)


async def served_state(gw: Gateway, memory_id: str, answers: list[dict[str, str]]) -> str:
    """What a failed wait for an approved memory saw: the chats' headers (first and last three), the
    memory's rows (with or without a vector), the gateway's mend and degraded counters, its log's end."""
    rows = await gw.store.pool_for_tests.fetch(
        """SELECT id, status, tier, kind, embedding IS NOT NULL AS vector, created_at
             FROM memories WHERE namespace = (SELECT namespace FROM memories WHERE id = $1)
            ORDER BY created_at""",
        memory_id,
    )
    counters = [
        line
        for line in (await gw.metrics()).splitlines()
        if line.startswith(("brain_gateway_vectors_mended_total", "brain_retrieval_degraded_total"))
    ]
    log = gw.log.read_text()[-3000:] if gw.log is not None else ""
    return "\n".join(
        [
            f"{len(answers)} chats; first and last: {answers[:1] + answers[-3:]}",
            *(str(dict(r)) for r in rows),
            *counters,
            "gateway log's end:",
            log,
        ]
    )
