"""The Hermes memory provider against the real skillsearch binary, without Hermes."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from conftest import FACT, GOLDEN, QUESTION, UNRELATED, load_plugin

plugin = load_plugin()


def configure(hermes: Path, **section) -> Path:
    import yaml

    hermes.mkdir(parents=True, exist_ok=True)
    cfg = {"memory": {"provider": "skillsearch"}, "plugins": {"skillsearch": section}}
    (hermes / "config.yaml").write_text(yaml.safe_dump(cfg))
    return hermes


@pytest.fixture
def provider(tmp_path, monkeypatch, binary, skills):
    """A provider factory: configure config.yaml, then build and initialise a provider."""

    def make(**section):
        section.setdefault("binary", str(binary))
        section.setdefault("skills", [str(skills)])
        section.setdefault("home", str(tmp_path / "sshome"))
        home = configure(tmp_path / "hermes", **section)
        monkeypatch.setenv("HERMES_HOME", str(home))
        p = plugin.SkillsearchProvider()
        p.initialize("sess-1", platform="cli", hermes_home=str(home))
        return p

    yield make
    plugin._stop_engines()
    plugin._ENGINES.clear()


def test_settings_defaults_and_errors_name_the_key(tmp_path):
    home = configure(tmp_path / "h")
    s = plugin.load_settings(home)
    assert s["mode"] == "on_demand"
    assert s["deadline_ms"] == plugin.DEFAULT_DEADLINE_MS <= 6000
    assert s["skills"] == [str(home / "skills")]
    configure(home, mode="atuo")
    with pytest.raises(plugin.ConfigError, match=r"`plugins\.skillsearch\.mode`.*`atuo`"):
        plugin.load_settings(home)
    configure(home, moode="auto")
    with pytest.raises(plugin.ConfigError, match=r"unknown key `plugins\.skillsearch\.moode`"):
        plugin.load_settings(home)
    configure(home, deadline_ms="soon")
    with pytest.raises(plugin.ConfigError, match=r"`plugins\.skillsearch\.deadline_ms`"):
        plugin.load_settings(home)


def test_a_stray_skillsearch_variable_does_not_stop_the_engine(provider, monkeypatch):
    monkeypatch.setenv("SKILLSEARCH_BIN", "/somewhere/else")
    p = provider(mode="auto")
    assert FACT in p.prefetch(QUESTION, session_id="")


def test_waits_stay_inside_the_hermes_cap():
    assert plugin.wait_seconds(5000) == pytest.approx(5.5)
    assert plugin.wait_seconds(60_000) < 8.0


def test_auto_prefetch_returns_the_skill_and_nothing_for_unrelated_prompts(provider):
    p = provider(mode="auto")
    assert p.get_tool_schemas() == []
    started = time.monotonic()
    text = p.prefetch(QUESTION, session_id="")
    assert FACT in text
    assert "<memory-context>" not in text
    warm = time.monotonic()
    assert p.prefetch(QUESTION + " please") and time.monotonic() - warm < 1.0
    assert warm - started < 6.0
    assert p.prefetch(UNRELATED) == ""
    assert p.prefetch("") == ""


def test_on_demand_offers_the_golden_tools_and_answers_them(provider):
    p = provider(mode="on_demand")
    assert p.prefetch(QUESTION) == ""
    tools = p.get_tool_schemas()
    assert [t["name"] for t in tools] == ["skill_search", "skill_read"]
    for t in tools:
        golden = (GOLDEN / f"{t['name']}.description.txt").read_text()
        assert t["description"].strip() == golden.strip()
        assert t["parameters"] == json.loads((GOLDEN / f"{t['name']}.schema.json").read_text())
    out = json.loads(p.handle_tool_call("skill_search", {"query": QUESTION}))
    assert FACT in out["result"]
    out = json.loads(p.handle_tool_call("skill_read", {"id": "local/quarterly-decks"}))
    assert FACT in out["result"]
    miss = json.loads(p.handle_tool_call("skill_search", {"query": UNRELATED}))
    assert FACT not in miss["result"] and "No skill" in miss["result"]
    assert "error" in json.loads(p.handle_tool_call("other_tool", {}))


def test_one_warm_engine_shared_and_restarted_when_killed(provider, tmp_path):
    p = provider(mode="auto")
    q = plugin.SkillsearchProvider()  # a second agent in the same process
    assert FACT in p.prefetch(QUESTION)
    assert FACT in q.prefetch(QUESTION + " now")
    assert len(plugin._ENGINES) == 1
    eng = next(iter(plugin._ENGINES.values()))
    assert eng.starts == 1
    pid = eng.proc.pid
    eng.proc.kill()
    eng.proc.wait()
    time.sleep(plugin.RESTART_BACKOFF_S)
    assert FACT in p.prefetch(QUESTION)
    assert eng.starts == 2 and eng.proc.pid != pid


def test_missing_binary_fails_open(provider, tmp_path):
    p = provider(mode="on_demand", binary=str(tmp_path / "no-such-skillsearch"))
    started = time.monotonic()
    assert p.get_tool_schemas() == []
    assert p.prefetch(QUESTION) == ""
    out = json.loads(p.handle_tool_call("skill_search", {"query": QUESTION}))
    assert out["result"] == plugin.UNAVAILABLE_REPLY
    assert time.monotonic() - started < 1.0


def test_unavailable_reply_is_the_engines_golden_text():
    replies = (GOLDEN / "replies.txt").read_text().splitlines()
    assert plugin.UNAVAILABLE_REPLY in replies


def test_stuck_engine_costs_at_most_the_deadline(provider, tmp_path):
    stuck = tmp_path / "stuck-skillsearch"
    stuck.write_text("#!/bin/sh\nexec sleep 20\n")
    stuck.chmod(0o755)
    p = provider(mode="auto", binary=str(stuck), deadline_ms=300)
    started = time.monotonic()
    assert p.prefetch(QUESTION) == ""
    elapsed = time.monotonic() - started
    assert elapsed < plugin.wait_seconds(300) + 0.5, elapsed


def test_bad_mode_is_reported_naming_the_key_and_does_nothing(provider, capfd):
    p = provider(mode="atuo")
    err = capfd.readouterr().err
    assert "plugins.skillsearch.mode" in err and "atuo" in err
    assert p.prefetch(QUESTION) == "" and p.get_tool_schemas() == []
    out = json.loads(p.handle_tool_call("skill_search", {"query": QUESTION}))
    assert out["result"] == plugin.UNAVAILABLE_REPLY
    assert not plugin._ENGINES


def test_read_offset_takes_whole_numbers_only():
    assert plugin.read_offset(None) == 0
    assert plugin.read_offset(40) == 40
    assert plugin.read_offset(" 12 ") == 12
    assert plugin.read_offset(-3) == 0
    assert plugin.read_offset("next") == 0
