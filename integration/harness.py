"""Shared by the Python SDK scenario scripts: PASS/FAIL bookkeeping, result
text, the HTTP transport with the server's bearer token, and running an
async main that always ends with a summary line and an exit status (a crash
counts as a failure)."""

import os
import sys
import traceback
from contextlib import asynccontextmanager

import anyio
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

results = []


def check(name, ok, detail=""):
    results.append((name, ok))
    print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail and not ok else ''}", flush=True)


def text_of(result):
    return "".join(getattr(c, "text", "") for c in result.content)


@asynccontextmanager
async def http_transport(url):
    """Streamable HTTP to `url`, sending `Authorization: Bearer $TOOLCAGE_HTTP_TOKEN`
    (run.sh reads the token from the file `serve --http` names)."""
    token = os.environ.get("TOOLCAGE_HTTP_TOKEN", "")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with create_mcp_http_client(headers=headers) as client:
        async with streamable_http_client(url, http_client=client) as streams:
            yield streams


def run(main, label):
    """Run `main` under anyio, print `label: N passed, M failed`, exit."""
    try:
        anyio.run(main)
    except Exception:
        traceback.print_exc()
        check("session", False, "the client crashed")
    failed = [n for n, ok in results if not ok]
    print(f"{label}: {len(results) - len(failed)} passed, {len(failed)} failed")
    sys.exit(1 if failed else 0)
