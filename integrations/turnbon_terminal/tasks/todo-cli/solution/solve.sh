#!/usr/bin/env bash
set -euo pipefail
cd "${TASK_WORKDIR:-.}"
cat > todo.py <<'PY'
import json
import sys
from pathlib import Path

STORE = Path("todo.json")


def load():
    if STORE.exists():
        return json.loads(STORE.read_text())
    return {"next": 1, "items": []}


def usage():
    print("usage: todo.py add TEXT... | done ID | remove ID | list", file=sys.stderr)
    sys.exit(2)


def find(state, raw):
    for item in state["items"]:
        if str(item["id"]) == raw:
            return item
    print(f"no such item: {raw}", file=sys.stderr)
    sys.exit(1)


def main(args):
    if not args:
        usage()
    command, rest = args[0], args[1:]
    state = load()
    if command == "add" and rest:
        item = {"id": state["next"], "text": " ".join(rest), "done": False}
        state["items"].append(item)
        state["next"] += 1
        print(f"added {item['id']}")
    elif command in ("done", "remove") and len(rest) == 1:
        item = find(state, rest[0])
        if command == "done":
            item["done"] = True
            print(f"done {item['id']}")
        else:
            state["items"].remove(item)
            print(f"removed {item['id']}")
    elif command == "list" and not rest:
        for item in state["items"]:
            print(f"{item['id']} [{'x' if item['done'] else ' '}] {item['text']}")
        return
    else:
        usage()
    STORE.write_text(json.dumps(state))


main(sys.argv[1:])
PY
