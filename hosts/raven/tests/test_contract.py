"""Contract tests of the Raven plugin (hosts/raven/plugin) against the real skillsearch binary.

Not end-to-end tests: no Raven runs here (see conftest.py). Each test names the Raven source it
pins, as `file:line` in EverMind-AI/Raven at 442f2fa (version 0.1.9). The host side is the
stand-in package under `standin/`, or Raven's own modules when `RAVEN_SRC` is set.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import re
import time
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import FACT, GOLDEN, QUESTION, RAVEN_SRC, UNRELATED


def raven_config(section: dict | None) -> SimpleNamespace:
    """The two fields of RavenConfig that build_plugin_tools reads: `plugins.disabled` and
    `plugins.config` (raven/config/raven.py:1080-1097)."""
    slices = {} if section is None else {"skillsearch": section}
    return SimpleNamespace(plugins=SimpleNamespace(disabled=[], config=slices))


def build_tools(plugins_dir: Path, workspace: Path, section: dict | None) -> list:
    """Raven's boot path for plugin tools: discovery of the user plugin dir, activation, then
    build_plugin_tools (raven/cli/agent_commands.py:314-324 → raven/cli/_plugin_stack.py:163-217,
    raven/plugin/bootstrap.py:19-42)."""
    from raven.cli._plugin_stack import build_plugin_tools
    from raven.plugin import assemble_plugin_registry

    registry = assemble_plugin_registry(user_dir=plugins_dir, entry_points_group=None)
    return build_plugin_tools(workspace, raven_config(section), registry=registry)


def section(binary, skills, tmp_path, **kw) -> dict:
    """The plugin's config slice; a generous deadline so a loaded machine's first index build
    does not cost the answer (the deadline tests set their own)."""
    s = {"binary": str(binary), "skills": [str(skills)], "home": str(tmp_path / "sshome"), "deadline_ms": 20000}
    s.update(kw)
    return s


def plugin():
    return importlib.import_module("skillsearch_raven")


def run(coro):
    return asyncio.run(coro)


def manifest(plugins_dir: Path) -> dict:
    return tomllib.loads((plugins_dir / "skillsearch" / "raven-plugin.toml").read_text())


def test_manifest_has_the_fields_raven_reads(plugins_dir):
    """raven/plugin/manifest.py:98-112 (id and version required, `enabled_by_default`,
    `contributes`, `config_schema`), :40 (factory = `module.path:callable`), :152-160 (a
    `[plugin]` root table); raven/plugin/registry.py:103-114 (a plugin without
    `enabled_by_default = true` is skipped); raven/plugin/discover.py:102-144
    (`<user_dir>/<dir>/raven-plugin.toml`)."""
    mf = manifest(plugins_dir)["plugin"]
    assert mf["id"] == "skillsearch" and mf["version"]
    assert mf["enabled_by_default"] is True
    tools = mf["contributes"]["tools"]
    assert [t["name"] for t in tools] == ["skill_search", "skill_read"]
    for entry in tools + mf["contributes"]["context_segments"]:
        assert re.match(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$", entry["factory"]), entry
    seg = mf["contributes"]["context_segments"]
    assert seg == [{"name": "skills", "factory": "skillsearch_raven:make_segment", "replaces": "skills"}]
    assert mf["config_schema"]["additionalProperties"] is False
    if RAVEN_SRC:
        from raven.plugin import PluginDiscovery, PluginManifest

        parsed = PluginManifest.from_toml_path(plugins_dir / "skillsearch" / "raven-plugin.toml")
        assert parsed.enabled_by_default and [t.name for t in parsed.contributes.tools] == ["skill_search", "skill_read"]
        found = PluginDiscovery(user_dir=plugins_dir).discover()
        assert [d.manifest.id for d in found] == ["skillsearch"]


def test_on_demand_factories_return_raven_tools_with_the_engines_strings(plugins_dir, binary, skills, tmp_path):
    """raven/plugin/registry.py:285-310 (`build_tool` calls the factory with a PluginContext);
    raven/plugin/context.py:28-51 (`config`, `services.workspace`); raven/agent/tools/base.py:36-65
    (abstract `name`, `description`, `parameters`, async `execute`), :180-189 (`to_schema`)."""
    from raven.agent.tools.base import Tool

    tools = build_tools(plugins_dir, tmp_path / "ws", section(binary, skills, tmp_path))
    assert [t.name for t in tools] == ["skill_read", "skill_search"]
    for t in tools:
        assert isinstance(t, Tool)
        fn = t.to_schema()["function"]
        assert fn["description"].strip() == (GOLDEN / f"{t.name}.description.txt").read_text().strip()
        assert fn["parameters"] == json.loads((GOLDEN / f"{t.name}.schema.json").read_text())


def test_registry_casts_validates_and_executes_the_tools(plugins_dir, binary, skills, tmp_path):
    """raven/agent/tools/registry.py:25-27 (`register` keys by `tool.name`), :45-76 (`execute`:
    `cast_params` :56, `validate_params` :59, `timeout_seconds` :63, `blocking_interaction` :64,
    `await tool.execute(**params)` under `asyncio.wait_for` :68; a reply starting with "Error"
    gets a hint appended :70-71)."""
    from raven.agent.tools.registry import ToolRegistry

    reg = ToolRegistry()
    for t in build_tools(plugins_dir, tmp_path / "ws", section(binary, skills, tmp_path)):
        reg.register(t)
        assert 1.0 < t.timeout_seconds < 60 and t.blocking_interaction is False
    found = run(reg.execute("skill_search", {"query": QUESTION}))
    assert FACT in found and not found.startswith("Error")
    read = run(reg.execute("skill_read", {"id": "local/quarterly-decks", "offset": "0"}))
    assert FACT in read
    miss = run(reg.execute("skill_search", {"query": UNRELATED}))
    assert miss.startswith("No skill in the library matches")
    invalid = run(reg.execute("skill_search", {}))
    assert invalid.startswith("Error: Invalid parameters") and "query" in invalid


def test_auto_declines_the_tools_and_builds_the_skills_segment(plugins_dir, binary, skills, tmp_path):
    """raven/cli/_plugin_stack.py:207-215 (a factory returning None is skipped quietly);
    raven/context_engine/base.py:65-80 (`AssemblyContext.current_message`), :84-98 (`Segment`:
    text, history, meta), :101-117 (a builder's `name`, `order`, `needs_prefix`, async `build`).
    The `context_segments` contribution itself is not in Raven 0.1.9: the factory is called the
    way the manifest names it."""
    from raven.context_engine.base import AssemblyContext, Segment

    s = section(binary, skills, tmp_path, mode="auto")
    assert build_tools(plugins_dir, tmp_path / "ws", s) == []
    module, _, attr = manifest(plugins_dir)["plugin"]["contributes"]["context_segments"][0]["factory"].partition(":")
    make = getattr(importlib.import_module(module), attr)
    from raven.plugin import PluginContext, ServiceLocator

    seg = make(PluginContext(config=s, services=ServiceLocator(workspace=tmp_path / "ws")))
    assert (seg.name, seg.order, seg.needs_prefix) == ("skills", 5, False)

    def ctx(message: str) -> AssemblyContext:
        return AssemblyContext(
            session_key="cli:1", current_message=message, media=None, channel="cli", chat_id="1",
            session_messages=[{"role": "user", "content": message}], budget=None,
        )

    out = run(seg.build(ctx(QUESTION)))
    assert isinstance(out, Segment) and FACT in out.text and out.history is None
    assert run(seg.build(ctx(UNRELATED))) is None
    assert run(seg.build(ctx(""))) is None
    on_demand = make(PluginContext(config=section(binary, skills, tmp_path), services=ServiceLocator(workspace=tmp_path)))
    assert on_demand is None


def test_config_is_checked_against_the_manifest_schema_naming_the_key(plugins_dir, binary, skills, tmp_path, capfd):
    """raven/plugin/context.py:6-8 says the slice arrives validated, but raven/cli/_plugin_stack.py:
    189-199 passes `plugins.config[<id>]` on unchecked: the plugin checks it against its own
    `[plugin.config_schema]` and keeps skills off until it is fixed."""
    p = plugin()
    bad = section(binary, skills, tmp_path, mode="atuo", moode=1)
    assert build_tools(plugins_dir, tmp_path / "ws", bad) == []
    err = capfd.readouterr().err
    assert "`plugins.config.skillsearch.mode`: `atuo` is not one of `on_demand`, `auto`" in err
    assert "unknown key `plugins.config.skillsearch.moode`" in err
    # Said once per process, however many factories read it.
    assert err.count("plugins.config.skillsearch.mode") == 1
    with pytest.raises(p.ConfigError, match=r"deadline_ms` must be at least 1"):
        p.load_settings({"deadline_ms": 0}, tmp_path)
    defaults = p.load_settings(None, tmp_path / "ws")
    assert defaults["mode"] == "on_demand" and defaults["skills"] == [str(tmp_path / "ws" / "skills")]
    assert defaults["deadline_ms"] == p.DEFAULT_DEADLINE_MS


def test_missing_binary_fails_open_and_says_why_once(plugins_dir, skills, tmp_path, capfd):
    """A factory that declines leaves Raven without the tool and the agent boots
    (raven/cli/_plugin_stack.py:194-215); the segment returns None and the turn goes on."""
    p = plugin()
    missing = tmp_path / "no-such-skillsearch"
    started = time.monotonic()
    assert build_tools(plugins_dir, tmp_path / "ws", section(missing, skills, tmp_path)) == []
    seg = p.SkillsSegment(p.load_settings(section(missing, skills, tmp_path, mode="auto"), tmp_path))
    assert seg.text_for(QUESTION) == ""
    assert p.call_tool(p.load_settings(section(missing, skills, tmp_path), tmp_path), "skill_search", {"query": QUESTION}) == p._engine.UNAVAILABLE_REPLY
    assert time.monotonic() - started < 2.0
    err = capfd.readouterr().err
    assert err.count("the engine is not answering") == 1 and "skillsearch doctor raven" in err


def test_killed_engine_is_restarted_and_a_stuck_one_costs_at_most_the_deadline(plugins_dir, binary, skills, tmp_path):
    """The tool's own wait ends inside the registry's `asyncio.wait_for` ceiling
    (raven/agent/tools/registry.py:63-68), so a stuck engine yields skillsearch's fixed reply,
    not Raven's timeout error."""
    p = plugin()
    s = p.load_settings(section(binary, skills, tmp_path), tmp_path)
    assert FACT in p.call_tool(s, "skill_search", {"query": QUESTION})
    eng = p._engine.engine_for(s)
    eng.proc.kill()
    eng.proc.wait()
    time.sleep(p._engine.RESTART_BACKOFF_S)
    assert FACT in p.call_tool(s, "skill_search", {"query": QUESTION})
    assert eng.starts == 2

    stuck = tmp_path / "stuck-skillsearch"
    stuck.write_text("#!/bin/sh\nexec sleep 30\n")
    stuck.chmod(0o755)
    slow = p.load_settings(section(stuck, skills, tmp_path, mode="auto", deadline_ms=300), tmp_path)
    started = time.monotonic()
    assert p.SkillsSegment(slow).text_for(QUESTION) == ""
    assert time.monotonic() - started < p.wait_seconds(300) + 0.5


def test_the_engine_client_is_the_hermes_one():
    """The plugin reuses the Hermes plugin's `serve --stdio` client rather than a copy of it."""
    p = plugin()
    hermes = (Path(__file__).resolve().parents[2] / "hermes" / "plugin" / "__init__.py").read_text()
    assert Path(p._engine.__file__).read_text() == hermes
    assert p._engine.UNAVAILABLE_REPLY in (GOLDEN / "replies.txt").read_text().splitlines()


@pytest.mark.skipif(not RAVEN_SRC, reason="needs Raven's source (RAVEN_SRC) and the mcp package")
def test_ravens_mcp_client_lists_and_calls_skillsearch_mcp(binary, skills, tmp_path):
    """The route without a plugin: `tools.mcpServers.<name>` (raven/config/schema.py:540-549,
    :581) connected by raven/agent/tools/mcp.py:78-167 (stdio `command`/`args`/`env`; each
    server tool registered as `mcp_<server>_<tool>` :24, its text blocks joined :69-75)."""
    from contextlib import AsyncExitStack

    from raven.agent.tools.mcp import connect_mcp_servers
    from raven.agent.tools.registry import ToolRegistry

    cfg = SimpleNamespace(
        type=None, command=str(binary),
        args=["--home", str(tmp_path / "sshome"), "mcp", "--mode", "on_demand", "--skills", str(skills)],
        env={}, url="", headers={}, tool_timeout=30,
    )

    async def go():
        reg = ToolRegistry()
        async with AsyncExitStack() as stack:
            await connect_mcp_servers({"skillsearch": cfg}, reg, stack)
            names = sorted(reg.tool_names)
            text = await reg.execute("mcp_skillsearch_skill_search", {"query": QUESTION})
        return names, text

    names, text = run(go())
    assert names == ["mcp_skillsearch_skill_read", "mcp_skillsearch_skill_search"]
    assert FACT in text

