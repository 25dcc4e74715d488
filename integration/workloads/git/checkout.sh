#!/bin/sh
# What a CI job does in the checkout it was given: read the history (the
# project's .git stays read-only inside toolcage), change the work tree,
# and ask git what changed.
set -eu
git log --format=%s
test "$(git describe --tags)" = "v1.0"
git rev-parse --verify -q HEAD >/dev/null
test "$(git ls-files | wc -l)" -gt 2
echo "a change" >>README
test "$(git status --porcelain)" = " M README"
git diff --stat
git diff --quiet && exit 1
git show --stat HEAD >/dev/null
echo "git log/describe/status/diff in a checkout: passed"
