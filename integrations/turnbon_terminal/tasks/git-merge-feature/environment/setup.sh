#!/usr/bin/env bash
set -euo pipefail
git config --global user.name "Turnbon Agent"
git config --global user.email "agent@example.com"
git config --global init.defaultBranch main
export GIT_AUTHOR_DATE GIT_COMMITTER_DATE
at() { GIT_AUTHOR_DATE="2024-01-01T$1:00:00Z"; GIT_COMMITTER_DATE="$GIT_AUTHOR_DATE"; }

    mkdir repo && cd repo && git init -q -b main
    echo "app v1" > app.txt && git add . && at 10 && git commit -qm "Add app"
    git checkout -qb feature
    echo "feature flag" > feature.txt && git add . && at 11 && git commit -qm "Add feature flag"
    echo "more feature" >> feature.txt && at 12 && git commit -qam "Extend feature"
    git checkout -q main
    echo "timeout=30" > config.txt && git add . && at 13 && git commit -qm "Update config"
