"""skillsearch for Raven (EverMind-AI/Raven): the few skills a turn needs, from a warm engine.

Raven discovers ``raven-plugin.toml`` beside this package and calls the factories it names:

* ``on_demand`` (the default): ``make_skill_search_tool`` / ``make_skill_read_tool`` each return
  one tool, a subclass of Raven's own ``Tool`` base class, resolved when the factory runs; the
  names, descriptions and parameter schemas come from the engine (its ``tools`` request), so
  every host shows the model the same strings. In ``auto`` they return ``None`` (Raven skips a
  factory that declines).
* ``auto``: ``make_segment`` returns the ``skills`` context segment (order 5, phase A), whose
  ``build`` returns the rendered skills block for the turn's message. Stock Raven (0.1.9) has
  no ``context_segments`` contribution point and never calls it, so ``auto`` is inert there;
  ``skillsearch doctor raven`` says so. In ``on_demand`` it returns ``None``.

Every call goes to ONE warm engine per configuration in this process: a ``skillsearch serve
--stdio`` child owned by ``_engine.Engine``, the client the Hermes plugin uses (the same file,
installed beside this one by ``skillsearch setup raven``). A missing binary, a killed or stuck
engine, a bad configuration or a passed deadline costs the turn its skills, never the turn, and
is said once on stderr.

Configuration: ``plugins.config.skillsearch`` in ``~/.raven/config.json`` (``binary``, ``mode``,
``skills``, ``home``, ``deadline_ms``), checked against the manifest's ``[plugin.config_schema]``.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import shutil
import threading
import tomllib
from pathlib import Path
from typing import Any

from . import _engine

logger = logging.getLogger("skillsearch.raven")

HOST = "raven"
MANIFEST = Path(__file__).resolve().parent.parent / "raven-plugin.toml"
SECTION = "plugins.config.skillsearch"
DEFAULT_DEADLINE_MS = 5000
#: Waiting for the engine's tool list at factory time (no index involved).
TOOLS_WAIT_S = 3.0
#: Where Raven's ``Tool`` base class lives: 0.1.x first, then the layout of later trees.
TOOL_MODULES = ("raven.agent.tools.base", "raven.contracts.tool")
#: Where Raven's ``Segment`` lives (``raven/context_engine/base.py``).
SEGMENT_MODULE = "raven.context_engine.base"
#: Why the engine's gate never sees the agent's tools under Raven.
NO_TOOLS = "Raven passes plugin tools and segments no tool list"

_warned: set[str] = set()
_warn_lock = threading.Lock()


class ConfigError(Exception):
    """The plugin's configuration is wrong; the message names the key."""


def warn_once(msg: str) -> None:
    """Says ``msg`` once per process: to Raven's log and straight to file descriptor 2, so a
    configuration that turns skills off is never silent."""
    with _warn_lock:
        if msg in _warned:
            return
        _warned.add(msg)
    logger.warning(msg)
    try:
        os.write(2, (msg + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def engine_down(e: Exception) -> None:
    """Says once per cause that the engine cannot answer; every surface (tool factory, tool
    call, segment) reports the same cause the same way."""
    warn_once(
        f"skillsearch: the engine is not answering ({e}); turns go on without skills. "
        "Run `skillsearch doctor raven`"
    )


def config_schema(path: Path = MANIFEST) -> dict[str, Any]:
    """The manifest's ``[plugin.config_schema]``."""
    with open(path, "rb") as f:
        return tomllib.load(f)["plugin"]["config_schema"]


_JSON_TYPES = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "array": list,
    "object": dict,
}


def schema_errors(value: Any, schema: dict[str, Any], where: str) -> list[str]:
    """What in ``value`` breaks ``schema`` (the JSON Schema subset the manifest uses: type,
    enum, minimum, items, properties, additionalProperties), each naming the key."""
    t = schema.get("type")
    if t in _JSON_TYPES:
        ok = isinstance(value, _JSON_TYPES[t]) and not (isinstance(value, bool) and t in ("integer", "number"))
        if not ok:
            return [f"`{where}` must be {'an' if t[0] in 'aeiou' else 'a'} {t}, not {value!r}"]
    errors: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        accepted = ", ".join(f"`{v}`" for v in schema["enum"])
        errors.append(f"`{where}`: `{value}` is not one of {accepted}")
    if "minimum" in schema and isinstance(value, (int, float)) and value < schema["minimum"]:
        errors.append(f"`{where}` must be at least {schema['minimum']}, not {value}")
    if t == "array" and "items" in schema:
        for i, item in enumerate(value):
            errors += schema_errors(item, schema["items"], f"{where}[{i}]")
    if t == "object":
        props = schema.get("properties", {})
        for k, v in value.items():
            if k in props:
                errors += schema_errors(v, props[k], f"{where}.{k}")
            elif schema.get("additionalProperties") is False:
                accepted = ", ".join(f"`{p}`" for p in props)
                errors.append(f"unknown key `{where}.{k}`; accepted: {accepted}")
    return errors


def load_settings(config: Any, workspace: Path | None, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """The engine settings for Raven's config slice, checked against the manifest's schema,
    defaults filled in. Raises ``ConfigError`` naming every key at fault."""
    raw = {} if config is None else config
    errors = schema_errors(raw, schema if schema is not None else config_schema(), SECTION)
    if errors:
        raise ConfigError("; ".join(errors))
    skills = raw.get("skills")
    if skills is None:
        if workspace is None:
            raise ConfigError(f"`{SECTION}.skills` is not set and Raven named no workspace")
        skills = [str(Path(workspace) / "skills")]
    return {
        "binary": str(raw.get("binary") or shutil.which("skillsearch") or "skillsearch"),
        "mode": raw.get("mode", "on_demand"),
        "skills": [str(s) for s in skills],
        "home": raw.get("home"),
        "deadline_ms": raw.get("deadline_ms", DEFAULT_DEADLINE_MS),
    }


def wait_seconds(deadline_ms: int) -> float:
    """How long the client waits for one reply: the engine's own deadline plus a margin."""
    return deadline_ms / 1000.0 + _engine.MARGIN_S


def _settings(ctx: Any) -> dict[str, Any] | None:
    """The settings of a factory's ``PluginContext``, or ``None`` (said once) when they are
    wrong: skills stay off until the configuration is fixed."""
    services = getattr(ctx, "services", None)
    workspace = getattr(services, "workspace", None)
    try:
        return load_settings(getattr(ctx, "config", None), workspace)
    except ConfigError as e:
        warn_once(f"skillsearch: {e} (in ~/.raven/config.json); skills are off until it is fixed")
    except Exception as e:  # noqa: BLE001 - a factory must not break Raven's boot
        warn_once(f"skillsearch: cannot read the plugin configuration: {e}; skills are off")
    return None


def host_class(modules: tuple[str, ...], name: str) -> type:
    """Raven's own class ``name`` from the first of ``modules`` that has it."""
    problems = []
    for m in modules:
        try:
            return getattr(importlib.import_module(m), name)
        except Exception as e:  # noqa: BLE001
            problems.append(f"{m}: {e}")
    raise ImportError(f"Raven's `{name}` class was not found ({'; '.join(problems)})")


def engine_tools(settings: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The engine's ``on_demand`` tools by name (names, descriptions, JSON schemas)."""
    r = _engine.engine_for(settings).call("tools", {}, TOOLS_WAIT_S)
    return {t["name"]: t for t in r.get("tools") or [] if isinstance(t, dict) and "name" in t}


def call_tool(settings: dict[str, Any], name: str, args: dict[str, Any]) -> str:
    """The text a ``skill_search`` / ``skill_read`` call returns; the engine's own fixed reply
    when the engine cannot answer."""
    try:
        eng = _engine.engine_for(settings)
        wait = wait_seconds(settings["deadline_ms"])
        if name == "skill_search":
            params: dict[str, Any] = {"query": str(args.get("query", "")), "host": HOST, "tools_unknown": NO_TOOLS}
            if args.get("detail"):
                params["detail"] = str(args["detail"])
            r = eng.call("search", params, wait)
        else:
            params = {"id": str(args.get("id", "")), "host": HOST}
            if args.get("path"):
                params["path"] = str(args["path"])
            offset = _engine.read_offset(args.get("offset"))
            if offset:
                params["offset"] = offset
            r = eng.call("read", params, wait)
        return r.get("text") or ""
    except Exception as e:  # noqa: BLE001 - a tool reply, never an exception
        engine_down(e)
        return _engine.UNAVAILABLE_REPLY


def _make_tool(ctx: Any, name: str) -> Any:
    settings = _settings(ctx)
    if settings is None or settings["mode"] != "on_demand":
        return None
    try:
        base = host_class(TOOL_MODULES, "Tool")
    except ImportError as e:
        warn_once(f"skillsearch: {e}; Raven gets no {name} tool")
        return None
    try:
        spec = engine_tools(settings)[name]
    except Exception as e:  # noqa: BLE001 - the binary is missing or the engine is broken
        engine_down(e)
        return None

    class SkillsearchTool(base):  # type: ignore[misc, valid-type]
        """One engine tool as a Raven tool: strings from the engine, calls to the engine."""

        # Raven's registry wraps `execute` in asyncio.wait_for with this ceiling
        # (raven/agent/tools/registry.py); the engine answers inside its own deadline first.
        timeout_seconds = wait_seconds(settings["deadline_ms"]) + 1.0
        blocking_interaction = False

        @property
        def name(self) -> str:
            return spec["name"]

        @property
        def description(self) -> str:
            return spec["description"]

        @property
        def parameters(self) -> dict[str, Any]:
            return spec["parameters"]

        async def execute(self, **kwargs: Any) -> str:
            return await asyncio.to_thread(call_tool, settings, spec["name"], kwargs)

    return SkillsearchTool()


def make_skill_search_tool(ctx: Any) -> Any:
    """Raven tool factory (``[[plugin.contributes.tools]] name = "skill_search"``)."""
    return _make_tool(ctx, "skill_search")


def make_skill_read_tool(ctx: Any) -> Any:
    """Raven tool factory (``[[plugin.contributes.tools]] name = "skill_read"``)."""
    return _make_tool(ctx, "skill_read")


class SkillsSegment:
    """The ``skills`` context segment of ``auto`` mode: the rendered block for the turn's
    message, in the system slot between always-on skills (4) and the Curator (6)."""

    name = "skills"
    order = 5
    needs_prefix = False

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings

    def text_for(self, message: str) -> str:
        """The block for one message, or ``""``: never raises."""
        if not (message or "").strip():
            return ""
        try:
            r = _engine.engine_for(self.settings).call(
                "retrieve",
                {"query": message, "mode": "auto", "host": HOST, "tools_unknown": NO_TOOLS},
                wait_seconds(self.settings["deadline_ms"]),
            )
            return r.get("text") or ""
        except Exception as e:  # noqa: BLE001 - the turn goes on without skills
            engine_down(e)
            return ""

    async def build(self, ctx: Any) -> Any:
        text = await asyncio.to_thread(self.text_for, getattr(ctx, "current_message", "") or "")
        if not text:
            return None
        try:
            segment = host_class((SEGMENT_MODULE,), "Segment")
        except ImportError as e:
            warn_once(f"skillsearch: {e}; no skills segment")
            return None
        return segment(text=text, meta={"skillsearch": True})


def make_segment(ctx: Any) -> Any:
    """Raven context-segment factory (``[[plugin.contributes.context_segments]]``)."""
    settings = _settings(ctx)
    if settings is None or settings["mode"] != "auto":
        return None
    # Start the engine and open the index now, so the first turn finds it warm.
    eng = _engine.engine_for(settings)

    def warm() -> None:
        try:
            eng.call("warm", {}, wait_seconds(settings["deadline_ms"]))
        except Exception as e:  # noqa: BLE001
            engine_down(e)

    threading.Thread(target=warm, name="skillsearch-warm", daemon=True).start()
    return SkillsSegment(settings)
