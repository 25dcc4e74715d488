"""The Python `mcp` SDK drives `toolcage serve` as a gateway in front of
real upstream servers, each in its own sandbox:

  everything  @modelcontextprotocol/server-everything (node)
  filesystem  @modelcontextprotocol/server-filesystem, asked for the project
              AND a directory outside it; the kernel grants only the project
  memory      @modelcontextprotocol/server-memory, its file in a write root
  time        mcp-server-time (PyPI)
  git         mcp-server-git --repository PROJECT (PyPI)

Through the gateway it also gets everything's image (get-tiny-image),
reads one of its resources (a template's URI) and gets one of its prompts.

Usage: python_gateway.py stdio BIN PROJECT POLICY MODE
       python_gateway.py http URL PROJECT MODE
       python_gateway.py sessions URL COUNT   (memtmp: one instance per session)
       python_gateway.py elicit BIN PROJECT POLICY
MODE: flat (server__tool names) or deferred (find_tools / call_mcp_tool).
Prints one PASS/FAIL line per scenario; exits 1 if any failed.
"""

import json
import os
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client

from harness import check, http_transport, run, text_of


def field(obj, snake):
    """A field by its mcp 2.x name (snake_case) or its 1.x one (camelCase)."""
    head, *rest = snake.split("_")
    camel = head + "".join(w.title() for w in rest)
    return getattr(obj, snake, None) if hasattr(obj, snake) else getattr(obj, camel)


async def call(session, mode, name, args):
    """Call upstream tool server__tool, flat or through call_mcp_tool."""
    if mode == "flat":
        return await session.call_tool(name, args)
    return await session.call_tool("call_mcp_tool", {"tool_name": name, "arguments": args})


async def scenarios(session, project, mode):
    await session.initialize()
    names = {t.name for t in (await session.list_tools()).tools}
    if mode == "flat":
        want = {"everything__echo", "filesystem__read_text_file", "memory__create_entities",
                "time__get_current_time", "git__git_status"}
        check("list-flat", want <= names, f"{sorted(names)}")
    else:
        check("list-deferred", {"find_tools", "call_mcp_tool"} <= names
              and not any("__" in n for n in names), f"{sorted(names)}")
        found = await session.call_tool("find_tools", {"query": "echo"})
        hits = json.loads(text_of(found))
        check("find-tools", any(h["name"] == "echo" for h in hits), text_of(found)[:300])

    r = await call(session, mode, "everything__echo", {"message": "hi"})
    check("everything-echo", not r.is_error and "hi" in text_of(r), f"{r}")
    check("enforcement-meta", mode == "deferred" or "toolcage/enforcement" in (r.meta or {}), f"{r.meta}")

    inside = os.path.join(project, "data", "a.txt")
    r = await call(session, mode, "filesystem__read_text_file", {"path": inside})
    check("filesystem-granted", not r.is_error and "inside the grant" in text_of(r), f"{r}")
    outside = os.environ["GATEWAY_OUTSIDE"]
    r = await call(session, mode, "filesystem__read_text_file", {"path": os.path.join(outside, "secret.txt")})
    check("filesystem-denied", r.is_error and "outside secret" not in text_of(r), f"{r}")

    r = await call(session, mode, "memory__create_entities", {"entities": [
        {"name": "toolcage", "entityType": "project", "observations": ["sandboxes tools"]}]})
    check("memory-create", not r.is_error, f"{r}")
    r = await call(session, mode, "memory__read_graph", {})
    check("memory-kept-in-session", not r.is_error and "sandboxes tools" in text_of(r), f"{r}")

    r = await call(session, mode, "time__get_current_time", {"timezone": "UTC"})
    check("time", not r.is_error and "UTC" in text_of(r), f"{r}")

    r = await call(session, mode, "git__git_status", {"repo_path": project})
    check("git-status", not r.is_error and "branch" in text_of(r).lower(), f"{r}")

    # Rich content, resources and prompts of server-everything, as it sent
    # them (its names carry the server; URIs pass unchanged).
    r = await call(session, mode, "everything__get-tiny-image", {})
    images = [c for c in r.content if c.type == "image"]
    check("everything-image", not r.is_error and images and field(images[0], "mime_type") == "image/png"
          and len(images[0].data) > 100, f"{[c.type for c in r.content]}")
    listed = await session.list_resource_templates()
    uris = [field(t, "uri_template") for t in field(listed, "resource_templates")]
    check("everything-resource-templates",
          any(u.startswith("demo://resource/dynamic/text/") for u in uris), f"{uris}")
    res = await session.read_resource("demo://resource/dynamic/text/1")
    check("everything-resource-read", res.contents and "Resource 1" in getattr(res.contents[0], "text", ""),
          f"{res}")
    prompts = {p.name for p in (await session.list_prompts()).prompts}
    check("everything-prompts-listed", {"everything__simple-prompt", "everything__args-prompt"} <= prompts,
          f"{sorted(prompts)}")
    got = await session.get_prompt("everything__args-prompt", {"city": "Lyon"})
    check("everything-prompt-get", any("Lyon" in getattr(m.content, "text", "") for m in got.messages),
          f"{got}")


async def main_stdio(binary, project, policy, mode):
    params = StdioServerParameters(
        command=binary, args=["-C", project, "serve", "--no-watch", "--policy", policy], cwd=project
    )
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as session:
            await scenarios(session, project, mode)


async def main_http(url, project, mode):
    async with http_transport(url) as (r, w, *_):
        async with ClientSession(r, w) as session:
            await scenarios(session, project, mode)


async def elicitation_stdio(binary, project, policy):
    """An upstream's elicitation reaches a client that declared it, marked
    with the server's name; a client that did not is never asked (the
    server does not even offer its elicitation tool to it)."""
    from mcp import types
    asked = []

    async def callback(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada", "check": True})

    params = StdioServerParameters(
        command=binary, args=["-C", project, "serve", "--no-watch", "--policy", policy], cwd=project
    )
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w, elicitation_callback=callback) as session:
            await session.initialize()
            names = {t.name for t in (await session.list_tools()).tools}
            check("elicitation-tool-offered", "everything__trigger-elicitation-request" in names, f"{sorted(names)}")
            res = await session.call_tool("everything__trigger-elicitation-request", {})
            # The label says what asks (the upstream change made it
            # "[upstream server 'NAME'] ", was "[NAME] "), as tests/gateway/upstreams.rs checks.
            check("elicitation-forwarded", not res.is_error and "Ada" in text_of(res)
                  and asked and asked[0].startswith("[upstream server 'everything'] "),
                  f"{asked} {res}")
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as session:
            await session.initialize()
            names = {t.name for t in (await session.list_tools()).tools}
            check("elicitation-not-declared", "everything__trigger-elicitation-request" not in names
                  and "everything__echo" in names, f"{sorted(names)}")


async def sessions_http(url, count):
    """`count` sessions at once, each with its own memory server instance
    (its file in the instance's private /tmp): none sees another's entity."""
    seen = {}

    async def one(i):
        async with http_transport(url) as (r, w, *_):
            async with ClientSession(r, w) as session:
                await session.initialize()
                await session.list_tools()
                name = f"session-{i}"
                r1 = await session.call_tool("memtmp__create_entities", {"entities": [
                    {"name": name, "entityType": "probe", "observations": [name]}]})
                r2 = await session.call_tool("memtmp__read_graph", {})
                seen[i] = (r1.is_error, text_of(r2))

    import anyio
    async with anyio.create_task_group() as tg:
        for i in range(count):
            tg.start_soon(one, i)
    for i in range(count):
        err, graph = seen.get(i, (True, ""))
        others = [j for j in range(count) if j != i and f"session-{j}" in graph]
        check(f"session-{i}-isolated", not err and f"session-{i}" in graph and not others,
              f"error={err} others={others} {graph[:200]}")


if __name__ == "__main__":
    if sys.argv[1] == "elicit":
        _, _, binary, project, policy = sys.argv
        run(lambda: elicitation_stdio(binary, project, policy), "gateway elicitation")
    elif sys.argv[1] == "sessions":
        _, _, url, count = sys.argv
        run(lambda: sessions_http(url, int(count)), f"gateway {count} sessions")
    elif sys.argv[1] == "stdio":
        _, _, binary, project, policy, mode = sys.argv
        run(lambda: main_stdio(binary, project, policy, mode), f"gateway stdio {mode}")
    else:
        _, _, url, project, mode = sys.argv
        run(lambda: main_http(url, project, mode), f"gateway http {mode}")
