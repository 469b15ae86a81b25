#!/bin/bash
# The verifier, offline (bash only): reward 1 when /app/done.txt holds exactly the line.
mkdir -p /logs/verifier
if [ "$(cat /app/done.txt 2>/dev/null)" = "done" ]; then
  echo "PASS: /app/done.txt is right"; echo 1 > /logs/verifier/reward.txt
else
  echo "FAIL: /app/done.txt is missing or wrong"; echo 0 > /logs/verifier/reward.txt
fi
