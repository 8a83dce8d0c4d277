"""What every host's end-to-end test shares: the skill corpus, `skillsearch setup`/`doctor`, the
fake model, and reading what the model was sent.

The tests drive the real host binaries named by environment variables (`scripts/host-e2e` sets
them): SKILLSEARCH_BIN, and CLAUDE_BIN / CODEX_BIN / CODEBUDDY_BIN. A test whose host is not
given is skipped. Turn wall times are appended to $E2E_TIMINGS (JSON lines) when it is set.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fake-model"))

from fake_model import FakeModel  # noqa: E402

# A fact that exists only in the body of one skill: it reaches the model only through skillsearch.
FACT = "AURORA-QBR-7"
QUERY = "what is our internal template name for quarterly decks"
UNRELATED = "hello there, how is the weather on mars"
PREAMBLE = "Reference material retrieved from the local skill library"

SKILLS = {
    "quarterly-decks": (
        "Internal template name and conventions for quarterly business review decks and slides.",
        f"# Quarterly decks\n\nStart every quarterly deck from the internal template {FACT}.\n"
        "Put the metrics slide second and the risks slide last.\n",
    ),
    "kubernetes-deploy": (
        "Deploy a service to the staging Kubernetes cluster with kubectl and helm.",
        "# Deploy\n\nRun helm upgrade --install with the staging values file.\n",
    ),
    "csv-cleanup": (
        "Clean a CSV export: fix encodings, drop empty columns, normalise dates.",
        "# CSV cleanup\n\nRead with pandas, then write UTF-8 with ISO dates.\n",
    ),
}


def skillsearch_bin() -> str:
    b = os.environ.get("SKILLSEARCH_BIN")
    if not b or not os.access(b, os.X_OK):
        import pytest

        pytest.skip("SKILLSEARCH_BIN is not set (scripts/host-e2e sets it)")
    return b


def host_bin(var: str) -> str:
    b = os.environ.get(var)
    if not b or not os.access(b, os.X_OK):
        import pytest

        pytest.skip(f"{var} is not set (scripts/host-e2e installs the host and sets it)")
    return b


@dataclass
class Workspace:
    """An isolated HOME, a project directory, a skill root and a skillsearch binary of its own."""

    base: Path
    binary: str
    # The binary doctor runs (the original, which a test never deletes).
    cli: str = ""
    home: Path = field(init=False)
    project: Path = field(init=False)
    skills: Path = field(init=False)

    def __post_init__(self) -> None:
        self.home = self.base / "home"
        self.project = self.base / "project"
        self.skills = self.base / "skills"
        for d in (self.home, self.project, self.skills):
            d.mkdir(parents=True, exist_ok=True)
        for name, (desc, body) in SKILLS.items():
            d = self.skills / name
            d.mkdir(exist_ok=True)
            (d / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {desc}\n---\n\n{body}")

    def env(self, **extra: str) -> dict:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("SKILLSEARCH_", "CLAUDE_", "CODEX_", "CODEBUDDY_", "ANTHROPIC_"))
        }
        env.update(HOME=str(self.home), **extra)
        return env

    def skillsearch(self, *args: str, binary: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [binary or self.binary, *args], env=self.env(), cwd=self.project, capture_output=True, text=True, timeout=60
        )

    def setup(self, host: str, mode: str) -> subprocess.CompletedProcess:
        p = self.skillsearch("setup", host, "--mode", mode, "--skills", str(self.skills))
        assert p.returncode == 0, p.stderr
        return p

    def doctor(self, host: str) -> dict:
        p = self.skillsearch("doctor", host, "--json", binary=self.cli or self.binary)
        return json.loads(p.stdout) | {"exit": p.returncode}


def workspace(tmp_path: Path, own_binary: bool = False) -> Workspace:
    """A workspace; with `own_binary`, a private copy of skillsearch the test may delete."""
    b = orig = skillsearch_bin()
    if own_binary:
        dst = tmp_path / "bin" / "skillsearch"
        dst.parent.mkdir(parents=True)
        shutil.copy2(b, dst)
        b = str(dst)
    return Workspace(tmp_path, b, orig)


def break_engine(ws: Workspace, how: str) -> None:
    """P5: the binary the host runs is deleted (`missing`) or dies by SIGKILL as it starts
    (`killed`)."""
    os.remove(ws.binary)
    if how == "killed":
        Path(ws.binary).write_text("#!/bin/sh\nkill -9 $$\n")
        os.chmod(ws.binary, 0o755)


# P5 cases: (mode, how the engine fails).
ENGINE_FAILURES = [("auto", "missing"), ("on_demand", "missing"), ("auto", "killed")]


def assert_green(doc: dict) -> None:
    bad = [c for c in doc["checks"] if c["status"] == "fail"]
    assert doc["exit"] == 0 and not bad, json.dumps(doc, indent=1)


def timed(host: str, case: str, argv: list, **kw) -> subprocess.CompletedProcess:
    t = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, **kw)
    dt = time.monotonic() - t
    out = os.environ.get("E2E_TIMINGS")
    if out:
        with open(out, "a") as f:
            f.write(json.dumps({"host": host, "case": case, "seconds": round(dt, 3)}) + "\n")
    return p


# --- what the model was sent -----------------------------------------------------------------


def text_of(body) -> str:
    return json.dumps(body, ensure_ascii=False)


def tool_results(body: dict) -> list[str]:
    """Every tool result the request carries, as text (chat, Responses and Messages wires)."""
    out = []
    for m in body.get("messages") or []:
        if m.get("role") == "tool":
            out.append(text_of(m.get("content")))
        content = m.get("content")
        if isinstance(content, list):
            out += [text_of(b.get("content")) for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
    for i in body.get("input") or []:
        if isinstance(i, dict) and i.get("type") == "function_call_output":
            out.append(text_of(i.get("output")))
    return out


def tool_calls(body: dict) -> list[str]:
    """Names of the tool calls earlier turns of this request made."""
    out = []
    for m in body.get("messages") or []:
        for c in m.get("tool_calls") or []:
            out.append(c["function"]["name"])
        if isinstance(m.get("content"), list):
            out += [b["name"] for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
    for i in body.get("input") or []:
        if isinstance(i, dict) and i.get("type") == "function_call":
            out.append(i.get("name"))
    return out


def assert_injected(fm: FakeModel) -> None:
    """P1: the first model request carries the fact, and no tool was needed for it."""
    reqs = fm.model_requests()
    assert reqs, "the host never called the model"
    first = text_of(reqs[0]["body"])
    assert FACT in first and PREAMBLE in first, "the skill was not injected"
    assert not any(tool_results(r["body"]) for r in reqs)


def assert_searched(fm: FakeModel, via: str = "skill_search") -> None:
    """P2: nothing injected; the model called the search tool and the next request carries the fact
    in the tool result."""
    reqs = fm.model_requests()
    assert reqs and FACT not in text_of(reqs[0]["body"]), "on_demand must inject nothing"
    assert PREAMBLE not in text_of(reqs[0]["body"])
    later = [r["body"] for r in reqs[1:] if any(FACT in t for t in tool_results(r["body"]))]
    assert later, "no request carried a tool result with the skill's fact"
    assert any(c.endswith(via) for c in tool_calls(later[0])), tool_calls(later[0])


def assert_nothing(fm: FakeModel) -> None:
    """P3: nothing injected, nothing called."""
    reqs = fm.model_requests()
    assert len(reqs) == 1, f"{len(reqs)} model requests"
    body = text_of(reqs[0]["body"])
    assert FACT not in body and PREAMBLE not in body
    assert not tool_results(reqs[0]["body"])
