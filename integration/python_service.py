"""The Python `mcp` SDK drives toolcage replicas behind HAProxy
(integration/service.sh). Every local tool of the project prints
`replica=NAME`, so a session learns which replica holds it.

Usage: python_service.py SCENARIO URL [ARGS...]
  sticky URL N              N sessions at once, interleaved: each keeps its
                            replica and sees only its own upstream notes;
                            both replicas hold some
  unstuck URL               control: without stickiness a session breaks
  limit URL TOOL N WANT alone|shared
                            N sessions, one call of TOOL each: exactly WANT
                            admitted, the rest denied by the rate limit;
                            each replica counts alone, or they share counts
  listed URL STATE...       new sessions until each replica named answered;
                            STATE is REPLICA=held or REPLICA=DESCRIPTION
                            (notes__remember offered with that description)
  calls URL SESSIONS EACH OUT   sessions one after another, EACH `where`
                            calls each; writes {replica: successes} to OUT
  only URL REPLICA N        N new sessions all land on REPLICA
  refused URL               a local call fails closed (isError, did not run)
  store_down URL            a limited call and an upstream call fail closed;
                            an unlimited local call runs
  recovers URL TRIES        a limited call succeeds again within TRIES tries
  bench URL SESSIONS EACH   SESSIONS concurrent sessions, EACH calls each;
                            prints calls per second (no assertion)
Prints one PASS/FAIL line per check; exits 1 if any failed.
"""

import json
import re
import sys
import time

import anyio
from mcp import ClientSession

from harness import check, http_transport, run, text_of

REPLICA = re.compile(r"replica=(\w+)")


def replica_of(result):
    m = REPLICA.search(text_of(result))
    return m.group(1) if m else None


async def where(session):
    r = await session.call_tool("where", {})
    return replica_of(r) if not r.is_error else None


async def sticky(url, n):
    seen = {}

    async def one(i):
        tag = f"note-{i}-{time.monotonic_ns()}"
        async with http_transport(url) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                home = await where(s)
                kept = await s.call_tool("notes__remember", {"text": tag})
                reps = []
                for _ in range(3):
                    await anyio.sleep(0.05)  # let the other sessions interleave
                    reps.append(await where(s))
                got = text_of(await s.call_tool("notes__recall", {}))
                seen[i] = home
                check(f"sticky-{i}-same-replica", home is not None and all(x == home for x in reps),
                      f"first {home}, then {reps}")
                check(f"sticky-{i}-own-state", not kept.is_error and got == f"notes={tag}",
                      f"remember: {text_of(kept)}; recall: {got}")

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i)
    homes = sorted(set(seen.values()) - {None})
    print(f"sessions by replica: {seen}")
    check("sticky-both-replicas", len(homes) >= 2, f"{homes}")


async def unstuck(url):
    # Round robin without a stick table: the session's requests alternate
    # between replicas, and the one that did not make it answers 404.
    broken = False
    try:
        with anyio.fail_after(30):
            async with http_transport(url) as (r, w):
                async with ClientSession(r, w) as s:
                    await s.initialize()
                    for _ in range(4):
                        res = await s.call_tool("where", {})
                        broken |= res.is_error
    except Exception as e:  # noqa: BLE001 - the failure is what we expect
        while isinstance(e, BaseExceptionGroup) and e.exceptions:
            e = e.exceptions[0]
        why = f"{type(e).__name__}: {e}"
        print(f"(the session failed as expected: {why[:300]})")
        broken = "404" in why or "not found" in why.lower()
    check("unstuck-session-breaks-with-404", broken, "every request reached the session's replica")


async def limit(url, tool, n, want, counting):
    admitted, denied, order = 0, 0, []
    with anyio.fail_after(180):
        for _ in range(n):
            async with http_transport(url) as (r, w):
                async with ClientSession(r, w) as s:
                    await s.initialize()
                    rep = await where(s)
                    res = await s.call_tool(tool, {})
                    if not res.is_error:
                        admitted += 1
                        order.append(f"{rep}:ok")
                    elif "rate limit" in text_of(res):
                        denied += 1
                        order.append(f"{rep}:denied")
                    else:
                        order.append(f"{rep}:error")
                        check(f"limit-{tool}-denial-reason", False, text_of(res)[:300])
                    if len(order) == n:
                        print(f"(the last: {text_of(res)[:200]})")
    print(f"{tool}: {admitted} admitted, {denied} denied by the rate limit, in order: {' '.join(order)}")
    check(f"limit-{tool}-both-replicas", len({o.split(':')[0] for o in order}) == 2, f"{order}")
    ok = {rep: sum(o == f"{rep}:ok" for o in order) for rep in {o.split(":")[0] for o in order}}
    limited = {o.split(":")[0] for o in order if o.endswith(":denied")}
    if counting == "shared":
        # A replica refused calls before it had admitted 4 itself: it counted the other's.
        check(f"limit-{tool}-counted-together", any(ok[rep] < 4 for rep in limited), f"{ok}")
    else:
        check(f"limit-{tool}-counted-alone", all(ok[rep] == 4 for rep in limited) and limited, f"{ok}")
    check(f"limit-{tool}-admits-{want}-of-{n}", admitted == want and denied == n - want,
          f"admitted {admitted}, denied {denied}")


async def listed(url, want):
    got = {}
    with anyio.fail_after(120):
        for _ in range(8):
            if set(want) <= set(got):
                break
            async with http_transport(url) as (r, w):
                async with ClientSession(r, w) as s:
                    await s.initialize()
                    rep = await where(s)
                    tools = {t.name: t for t in (await s.list_tools()).tools}
                    t = tools.get("notes__remember")
                    state = t.description if t else "held"
                    if t is None:
                        res = await s.call_tool("notes__remember", {"text": "x"})
                        meta = res.meta or {}
                        denial = meta.get("toolcage/denial")
                        check(f"listed-{rep}-held-call-denied", res.is_error, f"{res}")
                        if denial is not None:
                            check(f"listed-{rep}-denial", denial == "definition_changed", f"{denial}")
                    got[rep] = state
    print(f"notes__remember by replica: {got}")
    for rep, state in want.items():
        check(f"listed-{rep}-{state}", got.get(rep) == state, f"{got.get(rep)!r}")


async def calls(url, sessions, each, out):
    ok = {}
    with anyio.fail_after(180):
        for _ in range(sessions):
            async with http_transport(url) as (r, w):
                async with ClientSession(r, w) as s:
                    await s.initialize()
                    for _ in range(each):
                        rep = await where(s)
                        if rep:
                            ok[rep] = ok.get(rep, 0) + 1
    with open(out, "w", encoding="utf-8") as f:
        json.dump(ok, f)
    print(f"`where` answered by replica: {ok}")
    check("calls-all-answered", sum(ok.values()) == sessions * each, f"{ok}")


async def only(url, replica, n):
    reps, texts = [], []
    with anyio.fail_after(120):
        for _ in range(n):
            async with http_transport(url) as (r, w):
                async with ClientSession(r, w) as s:
                    await s.initialize()
                    res = await s.call_tool("where", {})
                    reps.append(None if res.is_error else replica_of(res))
                    texts.append(text_of(res)[:400])
    check(f"only-{replica}", reps == [replica] * n, f"{reps}: {texts}")


async def refused(url):
    with anyio.fail_after(60):
        async with http_transport(url) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                res = await s.call_tool("where", {})
                print(f"the call: {text_of(res)[:300]}")
                check("call-refused", res.is_error and "replica=" not in text_of(res), f"{res}")


async def store_down(url):
    with anyio.fail_after(60):
        async with http_transport(url) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                res = await s.call_tool("tock", {})
                print(f"limited call with the store down: {text_of(res)[:300]}")
                check("store-down-limited-fails-closed", res.is_error and "replica=" not in text_of(res),
                      f"{res}")
                res = await s.call_tool("where", {})
                check("store-down-unlimited-runs", not res.is_error and replica_of(res), f"{res}")
                # Upstream tools need the pins, which are in the store.
                res = await s.call_tool("notes__remember", {"text": "x"})
                print(f"upstream call with the store down: {text_of(res)[:300]}")
                check("store-down-upstream-fails-closed", res.is_error and "kept" not in text_of(res), f"{res}")


async def recovers(url, tries):
    last = ""
    for i in range(tries):
        try:
            with anyio.fail_after(60):
                async with http_transport(url) as (r, w):
                    async with ClientSession(r, w) as s:
                        await s.initialize()
                        res = await s.call_tool("tock", {})
                        last = text_of(res)[:300]
                        if not res.is_error:
                            check("store-back-limited-runs", True)
                            print(f"(recovered at try {i + 1})")
                            return
        except Exception as e:  # noqa: BLE001 - e.g. the balancer's 503 while no replica is ready
            last = f"{type(e).__name__}: {e}"[:300]
        await anyio.sleep(0.5)
    check("store-back-limited-runs", False, f"still refused after {tries} tries: {last}")


async def bench(url, sessions, each):
    done = 0

    async def one():
        nonlocal done
        async with http_transport(url) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                for _ in range(each):
                    if await where(s):
                        done += 1

    start = time.monotonic()
    with anyio.fail_after(600):
        async with anyio.create_task_group() as tg:
            for _ in range(sessions):
                tg.start_soon(one)
    secs = time.monotonic() - start
    print(f"BENCH {done} calls in {secs:.2f}s = {done / secs:.2f} calls/s")
    check("bench-all-answered", done == sessions * each, f"{done}")


def main():
    what, url, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    scenarios = {
        "sticky": lambda: sticky(url, int(args[0])),
        "unstuck": lambda: unstuck(url),
        "limit": lambda: limit(url, args[0], int(args[1]), int(args[2]), args[3]),
        "listed": lambda: listed(url, dict(a.split("=", 1) for a in args)),
        "calls": lambda: calls(url, int(args[0]), int(args[1]), args[2]),
        "only": lambda: only(url, args[0], int(args[1])),
        "refused": lambda: refused(url),
        "store_down": lambda: store_down(url),
        "recovers": lambda: recovers(url, int(args[0])),
        "bench": lambda: bench(url, int(args[0]), int(args[1])),
    }
    run(scenarios[what], f"service {what}")


if __name__ == "__main__":
    main()
