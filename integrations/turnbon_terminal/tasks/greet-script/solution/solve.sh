#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
cat > greet.sh <<'SH'
#!/usr/bin/env bash
if [ "$#" -gt 1 ]; then
  echo "usage: greet.sh [NAME]" >&2
  exit 2
fi
echo "Hello, ${1:-world}!"
SH
chmod +x greet.sh
