#!/usr/bin/env bash
set -euo pipefail
git config --global user.name "Turnbon Agent"
git config --global user.email "agent@example.com"
git config --global init.defaultBranch main
export GIT_AUTHOR_DATE GIT_COMMITTER_DATE
at() { GIT_AUTHOR_DATE="2024-01-01T$1:00:00Z"; GIT_COMMITTER_DATE="$GIT_AUTHOR_DATE"; }
