"""Fixtures of the Raven contract tests: the plugin as `skillsearch setup raven` installs it, the
host classes it is checked against, and the real skillsearch binary.

These are contract tests, not end-to-end tests: Raven (EverMind-AI/Raven) is not on PyPI and
needs Python >= 3.12, so no Raven runs here. By default the host side is `standin_raven`, a
minimal package of our own that has exactly the shapes Raven 0.1.9 calls (each pinned, with
file and line, in the tests' docstrings). With `RAVEN_SRC` pointing at a checkout of Raven's
source, the same tests run against Raven's own modules instead (its plugin discovery, registry,
`build_plugin_tools`, `Tool` base class, `ToolRegistry`, `Segment` and MCP client); that needs
pydantic (plus tiktoken, loguru, httpx and mcp for the segment and MCP tests) in the Python
that runs pytest.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
PLUGIN_SRC = HERE.parent / "plugin"
GOLDEN = REPO / "crates" / "skillsearch-core" / "tests" / "golden"
RAVEN_SRC = os.environ.get("RAVEN_SRC") or None

#: A fact that exists only in the body of the quarterly-decks skill.
FACT = "MARIGOLD-QX-7731"
QUESTION = "what is our internal template name for quarterly decks"
UNRELATED = "hello there, how are you feeling"

SKILLS = {
    "quarterly-decks": (
        "Build the quarterly business review slide deck with our internal template.",
        f"# Quarterly decks\n\nOur internal template name for quarterly decks is {FACT}.\n",
    ),
    "widget-deploy": (
        "Deploy the widget service to staging and production.",
        "# Deploy the widget\n\nRun `make deploy ENV=staging`, check the dashboard, then promote.\n",
    ),
}

if RAVEN_SRC:
    sys.path.insert(0, RAVEN_SRC)
else:
    sys.path.insert(0, str(HERE / "standin"))


def skillsearch_binary() -> Path:
    """$SKILLSEARCH_BIN (scripts/host-e2e sets it), else the cargo target dir's debug build."""
    env = os.environ.get("SKILLSEARCH_BIN")
    if env:
        return Path(env)
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    for profile in ("debug", "release"):
        p = target / profile / "skillsearch"
        if p.exists():
            return p
    pytest.exit("no skillsearch binary: build it (cargo build) or set SKILLSEARCH_BIN", 2)


@pytest.fixture(scope="session")
def binary() -> Path:
    return skillsearch_binary()


@pytest.fixture
def skills(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    for name, (desc, body) in SKILLS.items():
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {desc}\n---\n\n{body}")
    return root


@pytest.fixture(scope="session")
def plugins_dir(tmp_path_factory) -> Path:
    """`~/.raven/plugins` with the plugin copied in as setup writes it: the manifest and the
    `skillsearch_raven` package, its `_engine.py` a real file (the Hermes client), not a link."""
    root = tmp_path_factory.mktemp("raven-plugins")
    shutil.copytree(PLUGIN_SRC, root / "skillsearch", symlinks=False)
    return root


@pytest.fixture(autouse=True)
def _fresh_engines():
    """Every test starts with no engine child and no warning said yet."""
    yield
    mod = sys.modules.get("skillsearch_raven")
    if mod is not None:
        mod._engine._stop_engines()
        mod._engine._ENGINES.clear()
        mod._warned.clear()
