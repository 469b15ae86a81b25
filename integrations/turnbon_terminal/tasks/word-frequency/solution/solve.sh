#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
tr -cs 'A-Za-z' '\n' < book.txt | tr 'A-Z' 'a-z' | grep -v '^$' |
  LC_ALL=C sort | uniq -c | LC_ALL=C sort -k1,1nr -k2,2 | head -n 5 |
  awk '{print $2, $1}' > top5.txt
