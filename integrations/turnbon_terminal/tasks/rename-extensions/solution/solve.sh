#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
find photos -type f \( -name '*.jpeg' -o -name '*.JPEG' \) -print0 |
  while IFS= read -r -d '' f; do mv -- "$f" "${f%.*}.jpg"; done
