#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
cd site
git checkout v1.0 -- settings.ini
git commit -qm "Restore settings.ini"
