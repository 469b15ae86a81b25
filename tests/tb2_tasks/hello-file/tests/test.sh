#!/bin/bash
# Terminal-Bench 2's contract: write the reward to /logs/verifier/reward.txt.
# This one needs no network (real TB2 scripts install pytest with uv first).
mkdir -p /logs/verifier
if [ "$(cat /app/hello.txt 2>/dev/null)" = "Hello, world!" ]; then
  echo "PASS: /app/hello.txt is right"
  echo 1 > /logs/verifier/reward.txt
else
  echo "FAIL: /app/hello.txt is missing or wrong"
  echo 0 > /logs/verifier/reward.txt
fi
