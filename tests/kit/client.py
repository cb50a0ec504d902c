"""The user's side of a running gateway over HTTP: what the e2e stories and the pod stories call.

One blocking client (the stories drive a real process or a Service from the host, outside any event
loop), where three copies had drifted; the in-process suite's async client is `tests.kit.gateway`.
Keys are held by a short name (`agent`, `owner`) and sent as `Authorization: Bearer`.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@dataclass
class GatewayClient:
    url: str
    master: str = ""
    keys: dict[str, str] = field(default_factory=dict)

    def headers(self, key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {self.keys.get(key, key)}"}

    def chat(
        self,
        text: str,
        key: str = "agent",
        timeout: float = 60,
        session: str = "",
        model: str = "echo",
        **headers: str,
    ) -> httpx.Response:
        """One chat; `session` opens it with its own system prompt, so a question asked again is a
        new conversation (the gateway puts an earlier block back for the same conversation resent,
        gateway/placement.py) while the question, the person's message, stays what a person types."""
        messages = [{"role": "system", "content": f"session {session}"}] if session else []
        body = {"model": model, "messages": [*messages, {"role": "user", "content": text}]}
        return httpx.post(
            f"{self.url}/v1/chat/completions",
            json=body,
            headers={**self.headers(key), **headers},
            timeout=timeout,
        )

    def rest(self, method: str, path: str, key: str, **kw: Any) -> httpx.Response:
        return httpx.request(
            method, f"{self.url}/brain/v1{path}", headers=self.headers(key), timeout=30, **kw
        )

    def mcp_tool(self, key: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        """One MCP `tools/call` over the streamable-HTTP endpoint (stateless JSON-RPC)."""
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": args},
        }
        r = httpx.post(f"{self.url}/mcp", json=body, headers={**MCP_HEADERS, **self.headers(key)}, timeout=30)
        assert r.status_code == 200, r.text
        result = r.json()["result"]
        assert not result.get("isError"), result
        return dict(json.loads(result["content"][0]["text"]))

    def make_key(self, name: str, role: str) -> str:
        """A key made with the master key, held as `name`. Its real name is run-unique, so a rerun on a
        kept node (BRAIN_NODE_KUBECONFIG) cannot reuse a revoked one."""
        unique = f"{name}-{uuid.uuid4().hex[:6]}"
        r = self.rest("POST", "/keys", self.master, json={"name": unique, "role": role})
        assert r.status_code == 201, r.text
        self.keys[name] = r.json()["key"]
        return self.keys[name]

    def health_ok(self, part: str = "status") -> bool:
        """Whether /brain/v1/health answers with `part` ok: `status` (the database and the embedder)
        or `database` alone (a failover, where only the database's return is the point)."""
        try:
            r = httpx.get(f"{self.url}/brain/v1/health", headers=self.headers(self.master), timeout=5)
        except httpx.HTTPError:
            return False
        return r.status_code == 200 and r.json().get(part) == "ok"

    def metrics(self) -> str:
        """The gateway's /metrics (public form), or "" while it does not answer."""
        try:
            return httpx.get(f"{self.url}/metrics", timeout=5).text
        except httpx.HTTPError:
            return ""


@dataclass
class FakeUpstream:
    """The echo provider's loopback control endpoints (brain.local.fakeupstream)."""

    url: str

    def requests(self) -> list[dict[str, Any]]:
        return list(httpx.get(f"{self.url}/_fake/requests", timeout=10).json())

    def clear(self) -> None:
        httpx.delete(f"{self.url}/_fake/requests", timeout=10)

    def script(self, *behaviours: dict[str, Any]) -> None:
        httpx.post(f"{self.url}/_fake/script", json=list(behaviours), timeout=10).raise_for_status()
