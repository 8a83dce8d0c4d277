"""The DSH plugin's contract tests (plugin.test.mjs, Node's own test runner) inside the real Cordis
runtime and DSH tool registry, against the real skillsearch binary: the shapes the end-to-end
test (test_dsh_e2e.py) cannot reach, such as Cordis refusing a misspelled key or a stuck engine.
Not an end-to-end test. The packages come from the dsh install scripts/host-e2e makes
(DSH_E2E_DIR), or any node_modules holding them (DSH_CONTRACT_MODULES)."""

import os
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]


def test_dsh_plugin_contract():
    modules = os.environ.get("DSH_CONTRACT_MODULES") or (
        os.environ.get("DSH_E2E_DIR") and str(Path(os.environ["DSH_E2E_DIR"]) / "node_modules")
    )
    assert modules and Path(modules, "@deepseek-ai", "dsh-tools").is_dir(), (
        "set DSH_E2E_DIR (scripts/host-e2e dsh installs dsh there) or DSH_CONTRACT_MODULES to a "
        "node_modules with @deepseek-ai/cordis and @deepseek-ai/dsh-tools"
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
