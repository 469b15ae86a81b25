#!/usr/bin/env bash
set -euo pipefail
git config --global user.name "Turnbon Agent"
git config --global user.email "agent@example.com"
git config --global init.defaultBranch main
export GIT_AUTHOR_DATE GIT_COMMITTER_DATE
at() { GIT_AUTHOR_DATE="2024-01-01T$1:00:00Z"; GIT_COMMITTER_DATE="$GIT_AUTHOR_DATE"; }

    mkdir site && cd site && git init -q -b main
    printf '[server]\nport = 8080\nhost = example.org\n' > settings.ini
    echo "# Site" > README.md
    git add . && at 10 && git commit -qm "Add settings" && git tag v1.0
    printf '[server]\nport = 9090\nhost = example.org\ndebug = true\n' > settings.ini
    at 11 && git commit -qam "Change port"
    git rm -q settings.ini && echo "Settings moved elsewhere." >> README.md
    git add . && at 12 && git commit -qm "Remove legacy settings"
