#!/bin/bash
# Terminal-Bench 2's contract: write the reward to /logs/verifier/reward.txt. The check
# uses jq, which the task's Dockerfile installed with apt.
mkdir -p /logs/verifier
want=$(jq -r .name /app/package.json) || { echo "jq failed"; exit 1; }
if [ "$(cat /app/name.txt 2>/dev/null)" = "$want" ]; then
  echo "PASS: /app/name.txt holds $want"
  echo 1 > /logs/verifier/reward.txt
else
  echo "FAIL: /app/name.txt does not hold $want"
  echo 0 > /logs/verifier/reward.txt
fi
