#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
find data -type f -printf '%s %p\n' | sort -k1,1nr | head -n 1 | cut -d' ' -f2- > largest.txt
