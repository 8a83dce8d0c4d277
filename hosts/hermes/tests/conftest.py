"""Fixtures shared by the provider unit tests and the Hermes end-to-end tests."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
PLUGIN_DIR = HERE.parent / "plugin"
GOLDEN = REPO / "crates" / "skillsearch-core" / "tests" / "golden"

#: A fact that exists only in the body of the quarterly-decks skill.
FACT = "MARIGOLD-QX-7731"
#: The on_demand question of the issue.
QUESTION = "what is our internal template name for quarterly decks"
#: A prompt no skill matches.
UNRELATED = "hello there, how are you feeling"

SKILLS = {
    "quarterly-decks": (
        "quarterly-decks",
        "Build the quarterly business review slide deck with our internal template.",
        f"# Quarterly decks\n\nOur internal template name for quarterly decks is {FACT}.\n"
        "Open it from the shared drive, fill the revenue and churn slides, export as PDF.\n",
    ),
    "widget-deploy": (
        "widget-deploy",
        "Deploy the widget service to staging and production.",
        "# Deploy the widget\n\nRun `make deploy ENV=staging`, check the dashboard, then promote.\n",
    ),
}


def skillsearch_binary() -> Path:
    """The binary under test: $HERMES_E2E_BINARY, else the cargo target dir's debug build."""
    env = os.environ.get("HERMES_E2E_BINARY")
    if env:
        return Path(env)
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    for profile in ("debug", "release"):
        p = target / profile / "skillsearch"
        if p.exists():
            return p
    found = shutil.which("skillsearch")
    if found:
        return Path(found)
    pytest.exit("no skillsearch binary: build it (cargo build) or set HERMES_E2E_BINARY", 2)


def write_skills(root: Path) -> Path:
    for d, (name, desc, body) in SKILLS.items():
        p = root / d
        p.mkdir(parents=True, exist_ok=True)
        (p / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {desc}\n---\n\n{body}")
    return root


def load_plugin():
    """The plugin module, imported from the repo the way Hermes imports it from a directory."""
    name = "skillsearch_hermes_plugin"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, PLUGIN_DIR / "__init__.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def binary() -> Path:
    return skillsearch_binary()


@pytest.fixture
def skills(tmp_path: Path) -> Path:
    return write_skills(tmp_path / "skills")
