#!/usr/bin/env bash
set -euo pipefail
git config --global user.name "Turnbon Agent"
git config --global user.email "agent@example.com"
git config --global init.defaultBranch main
export GIT_AUTHOR_DATE GIT_COMMITTER_DATE
at() { GIT_AUTHOR_DATE="2024-01-01T$1:00:00Z"; GIT_COMMITTER_DATE="$GIT_AUTHOR_DATE"; }

    mkdir app && cd app && git init -q -b main
    printf 'name = demo\ntimeout = 10\nretries = 1\nlog = info\n' > settings.conf
    git add . && at 10 && git commit -qm "Base settings"
    git checkout -qb upstream
    printf 'name = demo\ntimeout = 30\nretries = 1\nlog = info\n' > settings.conf
    echo "Upstream raised the timeout." > NOTES.txt
    git add . && at 11 && git commit -qm "Raise timeout"
    git checkout -q main
    printf 'name = demo\ntimeout = 20\nretries = 3\nlog = info\n' > settings.conf
    at 12 && git commit -qam "Tune retries"
    at 13
    if git merge upstream > /dev/null 2>&1; then echo "expected a conflict" >&2; exit 1; fi
