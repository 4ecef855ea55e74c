"""What both release test files share: `portkit verify` run as a user runs it, and its JSON read."""

from __future__ import annotations

import json
import os
import subprocess
import sys

#: the variant each family agrees on (mixtral's legacy save is refused, gemma3's prefill needs one KV head)
AGREEING = {"mixtral": "int-window", "gemma3": "kv-heads-1"}


def verify(*argv: object) -> tuple[int, dict, str]:
    proc = subprocess.run([sys.executable, "-m", "portkit", "verify", *map(str, argv), "--format", "json"],
                          capture_output=True, text=True, env=dict(os.environ), timeout=3000)  # fmt: skip
    doc = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    return proc.returncode, doc, proc.stderr


def verdicts(doc: dict) -> dict[str, str]:
    sections = (doc.get("paths") or {}).get("sections", [])
    return {
        f["code"]: f["verdict"]
        for f in [*doc.get("findings", []), *(f for s in sections for f in s.get("findings", []))]
    }


def path_failure(doc: dict, path: str) -> str:
    checks = [c for s in doc["paths"]["sections"] for c in s["checks"] if c["path"] == path]
    return checks[0]["run"]["failure"]["message"] if checks and checks[0]["run"].get("failure") else ""
