#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
total=0
: > report.txt
while IFS= read -r name; do
  n=$(wc -l < "logs/$name")
  echo "$name $n" >> report.txt
  total=$((total + n))
done < <(find logs -maxdepth 1 -type f -name '*.log' -printf '%f\n' | LC_ALL=C sort)
echo "total $total" >> report.txt
