#!/usr/bin/env bash
set -euo pipefail
mkdir -p data/a data/b/c data/.archive
head -c 5000 /dev/zero > data/a/one.bin
head -c 8999 /dev/zero > data/b/c/two.dat
head -c 9000 /dev/zero > data/.archive/dump.bin
head -c 700 /dev/zero > data/b/small.bin
ln -s .archive/dump.bin data/link-to-dump
