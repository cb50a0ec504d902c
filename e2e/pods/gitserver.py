"""A git server for the pods e2e: `git http-backend` (smart HTTP, so shallow fetches work) behind
Python's http.server, serving the repositories under GIT_PROJECT_ROOT. Runs in the jobs image
(git + Python), mounted from a ConfigMap; stdlib only.

    python gitserver.py --root /srv/git --port 8000
"""

from __future__ import annotations

import argparse
import os
import subprocess
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def handler_for(root: str) -> type[BaseHTTPRequestHandler]:
    class GitHandler(BaseHTTPRequestHandler):
        def _cgi(self) -> None:
            path, _, query = self.path.partition("?")
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "GIT_PROJECT_ROOT": root,
                "GIT_HTTP_EXPORT_ALL": "1",
                "REQUEST_METHOD": self.command,
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "CONTENT_TYPE": self.headers.get("content-type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "REMOTE_ADDR": self.client_address[0],
            }
            if self.headers.get("git-protocol"):
                env["GIT_PROTOCOL"] = self.headers["git-protocol"]
            out = subprocess.run(
                ["git", "http-backend"], input=body, env=env, capture_output=True, timeout=120
            )
            head, _, payload = out.stdout.partition(b"\r\n\r\n")
            status, headers = 200, []
            for line in head.decode("latin-1").split("\r\n"):
                name, _, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.strip().split()[0])
                elif name:
                    headers.append((name, value.strip()))
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = _cgi

    return GitHandler


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--port", type=int, default=8000)
    a = p.parse_args()
    ThreadingHTTPServer(("0.0.0.0", a.port), handler_for(a.root)).serve_forever()


if __name__ == "__main__":
    main()
