#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
cat > backup.sh <<'SH'
#!/usr/bin/env bash
set -euo pipefail
if [ "$#" -ne 2 ] || [ ! -d "$1" ]; then
  echo "usage: backup.sh SOURCE_DIR DEST_DIR" >&2
  exit 1
fi
name=$(basename -- "$1")
parent=$(dirname -- "$1")
mkdir -p -- "$2"
tar -czf "$2/$name.tar.gz" -C "$parent" -- "$name"
echo "$2/$name.tar.gz"
SH
chmod +x backup.sh
