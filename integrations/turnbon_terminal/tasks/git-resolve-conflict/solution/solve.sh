#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
cd app
printf 'name = demo\ntimeout = 30\nretries = 3\nlog = info\n' > settings.conf
git add settings.conf
git commit -q --no-edit
