"""The Python `mcp` SDK as a real client of `toolcage serve`.

Usage: python_client.py stdio BIN PROJECT
       python_client.py http URL PROJECT   (token in $TOOLCAGE_HTTP_TOKEN)

Scenarios: list, call, error result, unknown tool, cancellation (the call's
background child stops), list_changed after adding a tool file. Prints one
PASS/FAIL line per scenario; exits 1 if any failed.
"""

import os
import stat
import sys
import time

import anyio
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client

from harness import check, http_transport, run, text_of


def mtime(path):
    try:
        return os.stat(path).st_mtime_ns
    except FileNotFoundError:
        return None


async def scenarios(session, project, changed):
    await session.initialize()

    # list
    tools = (await session.list_tools()).tools
    names = {t.name for t in tools}
    echo = next((t for t in tools if t.name == "echo"), None)
    check(
        "list",
        {"echo", "fail", "spin"} <= names
        and echo is not None
        and echo.input_schema.get("required") == ["message"]
        and echo.annotations is not None
        and echo.annotations.read_only_hint is False,
        f"{sorted(names)} {echo}",
    )

    # call
    r = await session.call_tool("echo", {"message": "hello from python"})
    meta = r.meta or {}
    check(
        "call",
        not r.is_error and text_of(r).strip() == "hello from python" and "toolcage/enforcement" in meta,
        f"{r}",
    )

    # error result
    r = await session.call_tool("fail", {})
    check("error-result", r.is_error and "disk on fire" in text_of(r), f"{r}")

    # invalid arguments are an error result too
    r = await session.call_tool("echo", {})
    check("invalid-arguments", r.is_error and "message" in text_of(r), f"{r}")

    # unknown tool: a JSON-RPC error
    try:
        r = await session.call_tool("no_such_tool", {})
        check("unknown-tool", False, f"got a result: {r}")
    except MCPError as e:
        check("unknown-tool", "no_such_tool" in str(e), str(e))

    # cancellation: abandon the call; the SDK sends notifications/cancelled
    beat = os.path.join(project, "beat")
    with anyio.move_on_after(60):
        async with anyio.create_task_group() as tg:

            async def long_call():
                await session.call_tool("spin", {"secs": 120})

            tg.start_soon(long_call)
            deadline = time.monotonic() + 30
            while mtime(beat) is None and time.monotonic() < deadline:
                await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
    started = mtime(beat) is not None
    stopped = False
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        a = mtime(beat)
        await anyio.sleep(0.7)
        if mtime(beat) == a:
            stopped = True
            break
    if stopped:
        a = mtime(beat)
        await anyio.sleep(1.5)
        stopped = mtime(beat) == a
    check("cancellation", started and stopped, f"started={started} stopped={stopped}")
    # the session still works
    r = await session.call_tool("echo", {"message": "after cancel"})
    check("after-cancellation", text_of(r).strip() == "after cancel", f"{r}")

    # list_changed after adding a tool file
    path = os.path.join(project, ".agents", "tools", "added_later")
    with open(path + ".tmp", "w") as f:
        f.write("#!/bin/sh\n# @description Added while serving.\necho added\n")
    os.chmod(path + ".tmp", 0o755)
    os.rename(path + ".tmp", path)
    with anyio.move_on_after(20):
        await changed.wait()
    tools = (await session.list_tools()).tools
    added = any(t.name == "added_later" for t in tools)
    check("list-changed", changed.is_set() and added, f"notified={changed.is_set()} listed={added}")
    if added:
        r = await session.call_tool("added_later", {})
        check("call-added-tool", text_of(r).strip() == "added", f"{r}")


async def main():
    mode, target, project = sys.argv[1], sys.argv[2], sys.argv[3]
    changed = anyio.Event()

    async def on_message(message):
        m = getattr(message, "root", message)
        if getattr(m, "method", None) == "notifications/tools/list_changed":
            changed.set()

    if mode == "stdio":
        params = StdioServerParameters(command=target, args=["-C", project, "serve"])
        transport = stdio_client(params)
    else:
        transport = http_transport(target)
    async with transport as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write, message_handler=on_message) as session:
            await scenarios(session, project, changed)


run(main, f"python {sys.argv[1]}")
