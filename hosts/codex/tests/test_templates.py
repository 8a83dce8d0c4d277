"""The templates in hosts/codex/templates are exactly what `skillsearch setup codex` writes."""

import json
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

import e2e  # noqa: E402

TEMPLATES = HERE.parent / "templates"


def render(text, ws):
    return (
        text.replace("@BIN@", ws.binary)
        .replace("@HOME@", str(ws.home / ".skillsearch"))
        .replace("@SKILLS@", str(ws.skills))
        .replace("@CODEX_HOME@", str(ws.home / ".codex"))
    )


def test_setup_writes_the_templates(tmp_path):
    ws = e2e.workspace(tmp_path)
    template = tomllib.loads(render((TEMPLATES / "config.toml").read_text(), ws))

    ws.setup("codex", "on_demand")
    written = tomllib.loads((ws.home / ".codex" / "config.toml").read_text())
    assert written["mcp_servers"]["skillsearch"] == template["mcp_servers"]["skillsearch"]

    ws.setup("codex", "auto")
    hooks = json.loads((ws.home / ".codex" / "hooks.json").read_text())
    assert hooks == json.loads(render((TEMPLATES / "hooks.json").read_text(), ws))
    written = tomllib.loads((ws.home / ".codex" / "config.toml").read_text())
    (key, state), = written["hooks"]["state"].items()
    assert key == next(iter(template["hooks"]["state"]))
    assert state["trusted_hash"].startswith("sha256:") and len(state["trusted_hash"]) == 71
    assert "mcp_servers" not in written
