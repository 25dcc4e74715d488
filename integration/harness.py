"""Shared by the Python SDK scenario scripts: PASS/FAIL bookkeeping, result
text, and running an async main that always ends with a summary line and an
exit status (a crash counts as a failure)."""

import sys
import traceback

import anyio

results = []


def check(name, ok, detail=""):
    results.append((name, ok))
    print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail and not ok else ''}", flush=True)


def text_of(result):
    return "".join(getattr(c, "text", "") for c in result.content)


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
