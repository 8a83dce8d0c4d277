"""The DSH plugin's contract tests (plugin.test.mjs, Node's own test runner) inside the real Cordis
runtime and DSH tool registry, against the real skillsearch binary. Not an end-to-end test: no
`dsh` runs here. scripts/host-e2e installs the host packages the tests load and sets
DSH_CONTRACT_MODULES to their node_modules."""

import os
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]


def test_dsh_plugin_contract():
    modules = os.environ.get("DSH_CONTRACT_MODULES")
    assert modules and Path(modules, "@deepseek-ai", "dsh-tools").is_dir(), (
        "DSH_CONTRACT_MODULES must name a node_modules with @deepseek-ai/cordis and dsh-tools "
        "(scripts/host-e2e dsh installs them)"
    )
    binary = os.environ.get("SKILLSEARCH_BIN") or str(REPO / "target" / "debug" / "skillsearch")
    node = shutil.which("node")
    assert node, "node is not on PATH"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLSEARCH_")}
    env |= {"SKILLSEARCH_BIN": binary, "DSH_CONTRACT_MODULES": modules}
    p = subprocess.run(
        [node, "--test", str(HERE / "plugin.test.mjs")], env=env, capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-2000:]
    assert "# fail 0" in p.stdout and "# pass 6" in p.stdout, p.stdout[-2000:]
