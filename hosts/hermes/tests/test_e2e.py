"""End to end on the real Hermes Agent (hermes-agent==0.19.0 from PyPI): `skillsearch setup
hermes`, then Hermes' plain headless command `hermes -z "<msg>"` against the shared fake model
server, asserting on the requests the model received.

Hermes is looked up in $HERMES_VENV (default /var/cache/skillsearch-ci/hosts/hermes-0.19.0, the
venv `hosts/hermes/run-e2e` installs); without it these tests are skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FACT, QUESTION, REPO, UNRELATED, write_skills

sys.path.insert(0, str(REPO / "tests" / "fake-model"))
from fake_model import FakeModel  # noqa: E402

VENV = Path(os.environ.get("HERMES_VENV", "/var/cache/skillsearch-ci/hosts/hermes-0.19.0"))
HERMES = VENV / "bin" / "hermes"
TURN_TIMEOUT_S = 180
#: Turn times, printed by run-e2e.
TIMES = Path(os.environ.get("HERMES_E2E_TIMES", "/dev/null"))

pytestmark = pytest.mark.skipif(not HERMES.exists(), reason=f"no Hermes at {HERMES}")


class Host:
    """One isolated Hermes install: HOME, HERMES_HOME, skillsearch home, skills."""

    def __init__(self, root: Path, binary: Path, fm: FakeModel) -> None:
        self.root = root
        self.binary = binary
        self.hermes_home = root / "hermes"
        self.ss_home = root / "skillsearch"
        self.skills = write_skills(root / "skills")
        self.hermes_home.mkdir(parents=True)
        (root / "home").mkdir()
        (self.hermes_home / "config.yaml").write_text(
            "model:\n"
            "  provider: custom\n"
            f"  base_url: {fm.base_url}/v1\n"
            "  default: fake-model\n"
            "  api_key: sk-fake\n"
        )
        self.fm = fm

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SKILLSEARCH_", "OPENAI_"))}
        env.update(HOME=str(self.root / "home"), HERMES_HOME=str(self.hermes_home))
        return env

    def skillsearch(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.binary), "--home", str(self.ss_home), *args],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=60,
        )

    def setup(self, mode: str) -> None:
        r = self.skillsearch("setup", "hermes", "--skills", str(self.skills), "--mode", mode)
        assert r.returncode == 0, r.stdout + r.stderr
        d = self.skillsearch("doctor", "hermes", "--json")
        report = json.loads(d.stdout)
        bad = [c for c in report["checks"] if c["status"] != "ok"]
        assert d.returncode == 0 and not bad, bad

    def edit_config(self, old: str, new: str) -> None:
        p = self.hermes_home / "config.yaml"
        text = p.read_text()
        assert old in text, text
        p.write_text(text.replace(old, new))

    def turn(self, prompt: str, label: str) -> subprocess.CompletedProcess:
        started = time.monotonic()
        r = subprocess.run(
            [str(HERMES), "-z", prompt],
            env=self.env(),
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=TURN_TIMEOUT_S,
        )
        elapsed = time.monotonic() - started
        with open(TIMES, "a") as f:
            f.write(f"{label}\t{elapsed:.2f}\n")
        assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
        assert "Done." in r.stdout, r.stdout + r.stderr
        r.elapsed = elapsed  # type: ignore[attr-defined]
        return r

    def chats(self) -> list[dict]:
        return [r["body"] for r in self.fm.model_requests()]

    def decisions(self) -> list[dict]:
        p = self.ss_home / "logs" / "decisions.jsonl"
        return [json.loads(line) for line in p.read_text().splitlines()] if p.exists() else []


def user_text(body: dict) -> str:
    users = [m for m in body["messages"] if m.get("role") == "user"]
    content = users[-1]["content"]
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content


def tool_names(body: dict) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or []]


def tool_messages(body: dict) -> list[dict]:
    return [m for m in body["messages"] if m.get("role") == "tool"]


@pytest.fixture
def host(tmp_path, binary, request):
    plan = getattr(request, "param", None)
    with FakeModel(log_path=str(tmp_path / "requests.jsonl"), tools=plan) as fm:
        yield Host(tmp_path, binary, fm)


def test_p1_auto_injects_the_skill_body(host):
    host.setup("auto")
    host.turn(QUESTION, "P1 auto")
    chats = host.chats()
    assert len(chats) == 1
    text = user_text(chats[0])
    assert text.startswith(QUESTION)
    assert "<memory-context>" in text and FACT in text
    assert "skill_search" not in tool_names(chats[0])
    retrieves = [d for d in host.decisions() if d.get("mode") == "auto" and d.get("query")]
    assert retrieves, host.decisions()
    # The engine's part of the prefetch, well inside Hermes' 8.0 s cap.
    assert max(d["elapsed_ms"]["total"] for d in retrieves) < 1000, retrieves


@pytest.mark.parametrize("host", [[("skill_search", {"query": QUESTION})]], indirect=True)
def test_p2_on_demand_tool_result_carries_the_fact(host):
    host.setup("on_demand")
    host.turn(QUESTION, "P2 on_demand")
    chats = host.chats()
    assert len(chats) == 2, [tool_messages(c) for c in chats]
    first, second = chats
    assert {"skill_search", "skill_read"} <= set(tool_names(first))
    assert "<memory-context>" not in user_text(first)
    calls = [
        c
        for m in second["messages"]
        if m.get("role") == "assistant"
        for c in m.get("tool_calls") or []
    ]
    assert calls and calls[0]["function"]["name"] == "skill_search"
    results = tool_messages(second)
    assert len(results) == 1 and results[0]["tool_call_id"] == calls[0]["id"]
    assert FACT in results[0]["content"]


@pytest.mark.parametrize("mode", ["auto", "on_demand"])
def test_p3_unrelated_prompt_injects_and_calls_nothing(host, mode):
    host.setup(mode)
    host.turn(UNRELATED, f"P3 unrelated {mode}")
    chats = host.chats()
    assert len(chats) == 1
    assert user_text(chats[0]) == UNRELATED
    assert not tool_messages(chats[0])
    assert FACT not in json.dumps(chats[0])


def test_p4_misspelled_mode_is_rejected_naming_the_key(host):
    r = host.skillsearch("setup", "hermes", "--skills", str(host.skills), "--mode", "atuo")
    assert r.returncode == 2 and "--mode" in r.stderr and "atuo" in r.stderr, r.stderr
    host.setup("auto")
    host.edit_config("mode: auto", "mode: atuo")
    d = host.skillsearch("doctor", "hermes")
    assert d.returncode == 1 and "plugins.skillsearch.mode" in d.stdout, d.stdout
    r = host.turn(QUESTION, "P4 misspelled mode")
    said = r.stdout + r.stderr
    assert "plugins.skillsearch.mode" in said and "atuo" in said, said
    chats = host.chats()
    assert "<memory-context>" not in user_text(chats[0])
    assert "skill_search" not in tool_names(chats[0])


def test_p5_missing_binary_the_turn_completes(host):
    host.setup("auto")
    host.edit_config(str(host.binary), str(host.root / "gone" / "skillsearch"))
    r = host.turn(QUESTION, "P5 binary missing")
    assert "<memory-context>" not in user_text(host.chats()[0])
    assert "skillsearch doctor hermes" in r.stderr, r.stderr


def test_p5_killed_engine_the_turn_completes(host):
    host.setup("auto")
    # An engine that is killed (SIGKILL) half a second after every start.
    killer = host.root / "killed-skillsearch"
    killer.write_text(
        "#!/bin/sh\n"
        f'"{host.binary}" "$@" <&0 &\n'
        "pid=$!\nsleep 0.5\nkill -9 $pid\nwait $pid\nexit 137\n"
    )
    killer.chmod(0o755)
    host.edit_config(str(host.binary), str(killer))
    host.turn(QUESTION, "P5 engine killed")
    assert len(host.chats()) == 1


def test_p5_stuck_engine_costs_at_most_its_deadline(host):
    host.setup("auto")
    stuck = host.root / "stuck-skillsearch"
    stuck.write_text("#!/bin/sh\nexec sleep 20\n")
    stuck.chmod(0o755)
    host.edit_config(str(host.binary), str(stuck))
    host.edit_config("deadline_ms: 5000", "deadline_ms: 1000")
    r = host.turn(QUESTION, "P5 engine stuck")
    assert "<memory-context>" not in user_text(host.chats()[0])
    assert "timed out" not in r.stderr  # Hermes' own 8.0 s cap was never reached
