#!/usr/bin/env python3
"""Checks that the observability kit queries only metrics cardbenchd exports.

    check.py METRICS_FILE DASHBOARD_JSON ALERTS_YAML

METRICS_FILE is the text of a daemon's GET /metrics (Prometheus text exposition format).
Every PromQL expression of the Grafana dashboard (the targets' `expr`, the template variables'
queries) and of the alert rules (`expr:`) is searched for `cardbench_*` names; each must be a
series of the exposition. A histogram's series are its `_bucket`, `_sum` and `_count`: the
family name alone is not one, and is reported as such.

A counter of cardbenchd appears on /metrics only once it has been incremented, so the daemon
behind METRICS_FILE must have done what each counter counts (a card transaction, an API request,
a callback delivery attempt) before its metrics were read.

Exit status: 0 when every name is exported, 1 when one is not (each is named with the file that
uses it), 2 when a file cannot be read or parsed. Needs only the standard library; PyYAML, when
installed, reads the alert rules, and a scan of their `expr:` lines does otherwise.
"""

import json
import re
import sys

NAME = re.compile(r"(?<![A-Za-z0-9_:])cardbench_[A-Za-z0-9_:]*[A-Za-z0-9_]")
SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{|\s)")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


class CheckError(Exception):
    """A file that cannot be read or parsed (exit status 2)."""


def read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as error:
        raise CheckError(f"{path}: cannot read: {error.strerror}")
    except UnicodeDecodeError as error:
        raise CheckError(f"{path}: not UTF-8: {error}")


def exposition(path):
    """The sample names and the metric families (name -> type) of an exposition text."""
    samples, families = set(), {}
    for number, line in enumerate(read(path).splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                families[parts[2]] = parts[3].strip()
            continue
        match = SAMPLE.match(line + " ")
        if not match:
            raise CheckError(f"{path}:{number}: not a sample line: {line[:80]!r}")
        samples.add(match.group(1))
    if not any(name.startswith("cardbench_") for name in samples | set(families)):
        raise CheckError(f"{path}: no cardbench_* metric in it (is it the text of cardbenchd's GET /metrics?)")
    return samples, families


def dashboard_expressions(path):
    """(where, expression) for every PromQL text of a Grafana dashboard."""
    try:
        document = json.loads(read(path))
    except json.JSONDecodeError as error:
        raise CheckError(f"{path}: not JSON: {error}")
    found = []

    def walk(node, where):
        if isinstance(node, dict):
            title = node.get("title") or node.get("name")
            here = f"{where} / {title}" if isinstance(title, str) and title else where
            for key, value in node.items():
                if key in ("expr", "definition", "query") and isinstance(value, str):
                    found.append((f"{here} ({key})", value))
                else:
                    walk(value, here)
        elif isinstance(node, list):
            for item in node:
                walk(item, where)

    walk(document, "dashboard")
    return found


def alert_expressions(path):
    """(where, expression) for every rule of a Prometheus rule file."""
    text = read(path)
    try:
        import yaml
    except ImportError:
        yaml = None
    if yaml is None:
        return scanned_expressions(path, text)
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise CheckError(f"{path}: not YAML: {error}")
    if not isinstance(document, dict) or not isinstance(document.get("groups"), list):
        raise CheckError(f"{path}: not a Prometheus rule file (no `groups:` list)")
    found = []
    for group in document["groups"]:
        for rule in (group or {}).get("rules") or []:
            name = rule.get("alert") or rule.get("record") or "?"
            expr = rule.get("expr")
            if not isinstance(expr, (str, int, float)):
                raise CheckError(f"{path}: rule {name} has no expr")
            found.append((f"rule {name}", str(expr)))
    return found


def scanned_expressions(path, text):
    """The `expr:` values of a rule file without a YAML parser: a plain or quoted value on the
    line, or a block scalar (`|`, `>`) made of the lines indented deeper than the key."""
    found = []
    lines = text.splitlines()
    rule = "?"
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        named = re.match(r"^\s*(?:-\s+)?(?:alert|record):\s*(.+?)\s*$", line)
        if named:
            rule = named.group(1).strip("'\"")
            continue
        key = re.match(r"^(\s*)(?:-\s+)?expr:\s*(.*?)\s*$", line)
        if not key:
            continue
        indent, value = len(key.group(1)), key.group(2)
        if re.match(r"^[|>][-+0-9]*(\s+#.*)?$", value):
            block = []
            while index < len(lines):
                following = lines[index]
                if following.strip() and len(following) - len(following.lstrip()) <= indent:
                    break
                block.append(following.strip())
                index += 1
            value = " ".join(part for part in block if part)
        elif value[:1] in ("'", '"'):
            value = value[1:-1] if len(value) > 1 and value[-1] == value[0] else value[1:]
        if not value:
            raise CheckError(f"{path}: rule {rule} has an empty expr")
        found.append((f"rule {rule}", value))
    if not found:
        raise CheckError(f"{path}: no `expr:` in it")
    return found


def check(metrics_path, dashboard_path, alerts_path):
    samples, families = exposition(metrics_path)
    exported = sorted(n for n in samples | set(families) if n.startswith("cardbench_"))
    print(f"{metrics_path}: {len(exported)} cardbench series and families: {', '.join(exported)}")
    missing, used = [], set()
    for path, expressions in ((dashboard_path, dashboard_expressions(dashboard_path)),
                              (alerts_path, alert_expressions(alerts_path))):
        names = {}
        for where, expression in expressions:
            for name in NAME.findall(expression):
                names.setdefault(name, where)
        if not names:
            raise CheckError(f"{path}: no cardbench_* metric in any of its {len(expressions)} expressions")
        for name in sorted(names):
            used.add(name)
            base = next((name[: -len(s)] for s in HISTOGRAM_SUFFIXES if name.endswith(s)), None)
            if name in samples:
                status = "ok"
            elif base is not None and families.get(base) == "histogram":
                status = f"ok (histogram {base})"
            elif families.get(name) == "histogram":
                status = "MISSING: a histogram; query its _bucket, _sum or _count"
            elif name in families:
                status = "ok (family without samples)"
            else:
                status = "MISSING: not in the exposition"
            if status.startswith("MISSING"):
                missing.append(f"{path}: {name} ({names[name]}): {status[9:]}")
            print(f"{path}: {name}: {status}")
        print(f"{path}: {len(expressions)} expressions, {len(names)} cardbench metric names")
    covered = set(used)
    for name in used:
        for suffix in HISTOGRAM_SUFFIXES:
            if name.endswith(suffix):
                covered.add(name[: -len(suffix)])
    unused = sorted(f for f in families if f.startswith("cardbench_") and f not in covered)
    if unused:
        print(f"note: exported but used by neither file: {', '.join(unused)}")
    for line in missing:
        print(f"error: {line}", file=sys.stderr)
    return 1 if missing else 0


def main(argv):
    if len(argv) == 2 and argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(argv) != 4:
        print("usage: check.py METRICS_FILE DASHBOARD_JSON ALERTS_YAML", file=sys.stderr)
        return 2
    try:
        return check(argv[1], argv[2], argv[3])
    except CheckError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
