#!/bin/bash
# clawd passes the arguments as one JSON object on stdin, e.g.
# {"name":"Ada","times":2}. Plain sed keeps the demo free of jq/python.
args=$(cat)
name=$(printf '%s' "$args" | sed -n 's/.*"name":"\([^"\\]*\)".*/\1/p')
times=$(printf '%s' "$args" | sed -n 's/.*"times":\([0-9]*\).*/\1/p')
for _ in $(seq "${times:-1}"); do
  printf 'Hello, %s!\n' "${name:-stranger}"
done
