"""Human approval over MCP elicitation, with the Python `mcp` SDK client.

Usage: python_approval.py stdio BIN PROJECT
       python_approval.py http URL PROJECT BIN   (token in $TOOLCAGE_HTTP_TOKEN)

The fixture's `guarded` tool asks for approval (requires_approval = true).
Scenarios: a client that accepts (the tool runs), declines and cancels (it
does not run; isError with the reason), a client without the elicitation
capability (denied, with how to approve), and the audit log recording each
decision. Prints one PASS/FAIL line per scenario; exits 1 if any failed.
"""

import json
import os
import subprocess
import sys

import mcp.types as types
from mcp import ClientSession, StdioServerParameters, stdio_client

from harness import check, http_transport, run, text_of


def answering(action, asked):
    async def callback(context, params):
        asked.append(params.message)
        return types.ElicitResult(action=action, content={} if action == "accept" else None)

    return callback


def marker(project):
    try:
        with open(os.path.join(project, "approved_marker")) as f:
            return f.read().split()
    except FileNotFoundError:
        return []


async def one_call(mode, target, project, note, callback):
    if mode == "stdio":
        transport = stdio_client(StdioServerParameters(command=target, args=["-C", project, "serve"]))
    else:
        transport = http_transport(target)
    async with transport as streams:
        async with ClientSession(streams[0], streams[1], elicitation_callback=callback) as session:
            await session.initialize()
            return await session.call_tool("guarded", {"note": note})


async def main():
    mode, target, project = sys.argv[1], sys.argv[2], sys.argv[3]
    binary = target if mode == "stdio" else sys.argv[4]

    asked = []
    r = await one_call(mode, target, project, "accepted", answering("accept", asked))
    check(
        "approval-accept",
        not r.is_error and "ran accepted" in text_of(r) and "accepted" in marker(project),
        f"{r} marker={marker(project)}",
    )
    check(
        "approval-prompt-shows-call",
        len(asked) == 1 and "guarded" in asked[0] and "accepted" in asked[0],
        f"{asked}",
    )

    for action in ("decline", "cancel"):
        asked = []
        r = await one_call(mode, target, project, action, answering(action, asked))
        check(
            f"approval-{action}",
            r.is_error and len(asked) == 1 and action not in marker(project),
            f"{r} asked={len(asked)} marker={marker(project)}",
        )

    # No elicitation capability: nobody can be asked, so the call is denied.
    r = await one_call(mode, target, project, "nochannel", None)
    text = text_of(r)
    check(
        "approval-no-channel-denied",
        r.is_error and "nochannel" not in marker(project) and "approve" in text.lower(),
        f"{r}",
    )

    # Every decision is in the audit log, written before the result returned.
    out = subprocess.run(
        [binary, "-C", project, "audit", "--json"], capture_output=True, text=True, timeout=30
    )
    records = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    guarded = [r for r in records if r.get("tool") == "guarded"]
    # The log outlives the project copy: look at the last four records.
    decisions = [r.get("decision", {}) for r in guarded[-4:]]
    want = [
        ("approved", "elicitation"),
        ("denied", "approval_declined"),
        ("denied", "approval_cancelled"),
        ("denied", "approval_no_channel"),
    ]
    got = [(d.get("kind"), d.get("by") or d.get("reason")) for d in decisions]
    check(
        "audit-records-each-decision",
        out.returncode == 0 and got == want,
        f"rc={out.returncode} got={got} stderr={out.stderr}",
    )


run(main, f"python approval {sys.argv[1]}")
