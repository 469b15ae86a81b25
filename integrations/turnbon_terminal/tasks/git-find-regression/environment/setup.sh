#!/usr/bin/env bash
set -euo pipefail
git config --global user.name "Turnbon Agent"
git config --global user.email "agent@example.com"
git config --global init.defaultBranch main
export GIT_AUTHOR_DATE GIT_COMMITTER_DATE
at() { GIT_AUTHOR_DATE="2024-01-01T$1:00:00Z"; GIT_COMMITTER_DATE="$GIT_AUTHOR_DATE"; }
cat > check_calc.py <<'PY'
import importlib.util
import sys

spec = importlib.util.spec_from_file_location("calc", "calc/calc.py")
calc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(calc)
ok = calc.add(2, 3) == 5 and calc.sub(5, 3) == 2 and calc.mul(3, 4) == 12
ok = ok and calc.mean([1, 2]) == 1.5 and calc.mean([4]) == 4
sys.exit(0 if ok else 1)
PY
mkdir calc && cd calc && git init -q -b main
printf '# calc\ndef add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n    return a * b\n\ndef mean(xs):\n    return sum(xs) / len(xs)\n' > calc.py && echo '__pycache__/' > .gitignore
git add -A && at 10 && git commit -qm "Add calculator"
python3 -c 'import sys; p="calc.py"; t=open(p).read(); open(p, "w").write(t.replace(sys.argv[1], sys.argv[2], 1))' "$(printf 'def add(a, b):')" "$(printf 'def add(a, b):\n    """a plus b"""')"
git add -A && at 11 && git commit -qm "Document add"
printf '\ndef power(a, b):\n    return a ** b\n' >> calc.py
git add -A && at 12 && git commit -qm "Add power"
python3 -c 'import sys; p="calc.py"; t=open(p).read(); open(p, "w").write(t.replace(sys.argv[1], sys.argv[2], 1))' "$(printf 'return a - b')" "$(printf 'return a + -b')"
git add -A && at 13 && git commit -qm "Simplify sub"
printf '\ndef median(xs):\n    s = sorted(xs)\n    return s[len(s) // 2]\n' >> calc.py
git add -A && at 14 && git commit -qm "Add median"
python3 -c 'import sys; p="calc.py"; t=open(p).read(); open(p, "w").write(t.replace(sys.argv[1], sys.argv[2], 1))' "$(printf 'return sum(xs) / len(xs)')" "$(printf 'return sum(xs) // len(xs)')"
git add -A && at 15 && git commit -qm "Speed up mean"
printf '\ndef square(a):\n    return a * a\n' >> calc.py
git add -A && at 16 && git commit -qm "Add square"
python3 -c 'import sys; p="calc.py"; t=open(p).read(); open(p, "w").write(t.replace(sys.argv[1], sys.argv[2], 1))' "$(printf 'def mul(a, b):')" "$(printf 'def mul(a, b):\n    """a times b"""')"
git add -A && at 17 && git commit -qm "Document mul"
printf '\ndef cube(a):\n    return a * a * a\n' >> calc.py
git add -A && at 18 && git commit -qm "Add cube"
python3 -c 'import sys; p="calc.py"; t=open(p).read(); open(p, "w").write(t.replace(sys.argv[1], sys.argv[2], 1))' "$(printf '# calc')" "$(printf '# calc: a tiny calculator')"
git add -A && at 19 && git commit -qm "Tidy comments"
printf '\ndef negate(a):\n    return -a\n' >> calc.py
git add -A && at 20 && git commit -qm "Add negate"
echo 'See git log.' > CHANGELOG
git add -A && at 21 && git commit -qm "Add changelog"
