#!/bin/sh
# git init, add, commit and log in one call, as a job that tests a
# git-using tool does. The project's .git is a protected path: toolcage
# moves a .git that a call created aside when the call ends (see the suite).
set -eu
commit() { git -c user.name=CI -c user.email=ci@example.invalid commit -q "$@"; }
git init -q .
git add -A
commit -m "first commit"
echo "second line" >>README
commit -a -m "second commit"
git log --format=%s
test "$(git log --format=%s | tr '\n' ' ')" = "second commit first commit "
test -z "$(git status --porcelain)"
echo "git init/add/commit/log: passed"
