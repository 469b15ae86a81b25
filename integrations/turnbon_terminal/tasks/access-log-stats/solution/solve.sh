#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
python3 - <<'PY'
import collections, json, re
statuses, ips = collections.Counter(), collections.Counter()
for line in open("access.log"):
    m = re.match(r'(\S+) \S+ \S+ \[[^]]*\] "[^"]*" (\d{3}) ', line)
    if m:
        ips[m.group(1)] += 1
        statuses[m.group(2)] += 1
json.dump(dict(statuses), open("status_counts.json", "w"), indent=2)
top = sorted(ips.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
open("top_ips.txt", "w").write("".join(f"{ip} {n}\n" for ip, n in top))
PY
