#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
cd project
git init -q -b main
git add -A
git commit -q -m "Initial commit"
