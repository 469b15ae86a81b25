#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
cd calc
git bisect start main "$(git rev-list --max-parents=0 main)" > /dev/null
git bisect run sh -c 'cd .. && python3 check_calc.py' > ../bisect.log
git rev-parse refs/bisect/bad > ../first_bad.txt
git bisect reset main > /dev/null 2>&1
