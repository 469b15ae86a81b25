#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
cd repo
git merge --no-ff --no-edit feature
