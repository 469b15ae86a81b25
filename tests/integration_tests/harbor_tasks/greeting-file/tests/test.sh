#!/bin/bash
# The verifier, offline (bash only): reward 1 when /app/greeting.txt holds exactly the line.
mkdir -p /logs/verifier
if [ "$(cat /app/greeting.txt 2>/dev/null)" = "Good morning" ]; then
  echo "PASS: /app/greeting.txt is right"; echo 1 > /logs/verifier/reward.txt
else
  echo "FAIL: /app/greeting.txt is missing or wrong"; echo 0 > /logs/verifier/reward.txt
fi
