"""`skillsearch setup raven` against the Raven plugin contract (see test_contract.py): what setup
installs and writes is what Raven's boot path loads. A contract test, not an end-to-end test."""

from __future__ import annotations

import json
import os
import subprocess

from conftest import FACT, QUESTION
from test_contract import build_tools, run
def test_what_setup_raven_writes_is_what_the_plugin_loads(plugins_dir, binary, skills, tmp_path):
    """`skillsearch setup raven` writes the plugin into `~/.raven/plugins/skillsearch`
    (raven/cli/_plugin_stack.py:48-66: the user dir is `Path.home()/.raven/plugins`) and its slice
    into `~/.raven/config.json` `plugins.config.skillsearch` (raven/config/loader.py:44-48,
    raven/config/raven.py:1080-1097); Raven's boot path builds working tools from exactly that."""
    home = tmp_path / "user"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLSEARCH_")} | {"HOME": str(home)}
    subprocess.run(
        [str(binary), "--home", str(tmp_path / "sshome"), "setup", "raven", "--skills", str(skills)],
        env=env, check=True, capture_output=True, timeout=60,
    )
    installed = home / ".raven" / "plugins" / "skillsearch"
    for f in ("raven-plugin.toml", "skillsearch_raven/__init__.py", "skillsearch_raven/_engine.py"):
        assert (installed / f).read_text() == (plugins_dir / "skillsearch" / f).read_text(), f
    slice_ = json.loads((home / ".raven" / "config.json").read_text())["plugins"]["config"]["skillsearch"]
    assert slice_["skills"] == [str(skills)] and slice_["mode"] == "on_demand"
    tools = build_tools(installed.parent, home / ".raven" / "workspace", slice_)
    assert sorted(t.name for t in tools) == ["skill_read", "skill_search"]
    search = next(t for t in tools if t.name == "skill_search")
    assert FACT in run(search.execute(query=QUESTION))
