"""skillsearch for Hermes Agent: a memory provider that puts the few skills a turn needs in
front of the model.

* ``auto``: ``prefetch`` returns the rendered skills block; Hermes appends it to the user message
  inside ``<memory-context>``.
* ``on_demand``: ``get_tool_schemas`` offers ``skill_search`` and ``skill_read`` (names,
  descriptions and schemas come from the engine, so every host reads the same strings) and
  ``handle_tool_call`` answers them.

Every call goes to ONE warm engine: a ``skillsearch serve --stdio`` child this module owns (one
per distinct configuration, shared by every provider instance in the process, restarted when it
dies). Every call has a deadline well inside Hermes' fixed 8.0 s prefetch cap, and every failure
(binary missing, engine killed, bad configuration, deadline) costs the turn its skills, never the
turn.

Configuration: ``plugins.skillsearch`` in ``$HERMES_HOME/config.yaml``, written by
``skillsearch setup hermes``. Keys: ``binary``, ``mode``, ``skills``, ``home``, ``deadline_ms``.
An unknown key or a misspelled mode is reported loudly, naming the key, and the provider then
does nothing (it never falls back to a default silently).
"""

from __future__ import annotations

import atexit
import collections
import json
import logging
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

try:  # inside Hermes
    from agent.memory_provider import MemoryProvider
except Exception:  # unit tests without Hermes installed

    class MemoryProvider:  # type: ignore[no-redef]
        pass


logger = logging.getLogger("skillsearch")

NAME = "skillsearch"
SECTION = "plugins.skillsearch"
MODES = ("auto", "on_demand")
KEYS = ("binary", "mode", "skills", "home", "deadline_ms")
#: skillsearch's whole-turn deadline for Hermes, unless configured.
DEFAULT_DEADLINE_MS = 5000
#: Hermes abandons a prefetch after 8.0 s (agent/memory_manager.py, not configurable) and skips
#: the provider on later turns while the stuck call runs; never wait longer than this.
MAX_WAIT_S = 7.5
#: What the client adds to the engine's own deadline before giving up on a reply.
MARGIN_S = 0.5
#: Waiting for the engine's tool list (no index involved).
TOOLS_WAIT_S = 3.0
#: A child that died within this many seconds of starting is not restarted before it passes.
RESTART_BACKOFF_S = 2.0
#: ``skill_search``'s reply when the engine cannot answer (the engine's own fixed reply; pinned
#: against the golden file by the tests).
UNAVAILABLE_REPLY = "Skill search is unavailable right now. Proceed without a skill."
#: Why the engine's gate never sees the agent's tools under Hermes (the decision log says it).
NO_TOOLS = "Hermes passes memory providers no tool list (prefetch and tool calls alike)"


class ConfigError(Exception):
    """A configuration problem; the message names the key."""


def hermes_home() -> Path:
    try:
        from hermes_constants import get_hermes_home

        return Path(get_hermes_home())
    except Exception:
        env = os.environ.get("HERMES_HOME")
        return Path(env) if env else Path.home() / ".hermes"


def load_settings(home: Path) -> dict[str, Any]:
    """``plugins.skillsearch`` of ``<home>/config.yaml``, checked, with defaults filled in."""
    import yaml

    path = home / "config.yaml"
    try:
        with open(path, encoding="utf-8-sig") as f:
            cfg = yaml.safe_load(f) or {}
    except FileNotFoundError:
        cfg = {}
    except Exception as e:
        raise ConfigError(f"{path} is not valid YAML: {e}") from e
    plugins = cfg.get("plugins") if isinstance(cfg, dict) else None
    raw = plugins.get(NAME) if isinstance(plugins, dict) else None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"`{SECTION}` in {path} must be a mapping")
    for k in raw:
        if k not in KEYS:
            raise ConfigError(
                f"unknown key `{SECTION}.{k}` in {path}; accepted: "
                + ", ".join(f"`{x}`" for x in KEYS)
            )
    mode = raw.get("mode", "on_demand")
    if mode not in MODES:
        raise ConfigError(
            f"`{SECTION}.mode` in {path}: `{mode}` is not one of "
            + ", ".join(f"`{m}`" for m in MODES)
        )
    deadline = raw.get("deadline_ms", DEFAULT_DEADLINE_MS)
    if isinstance(deadline, bool) or not isinstance(deadline, int) or deadline < 1:
        raise ConfigError(
            f"`{SECTION}.deadline_ms` in {path}: `{deadline}` is not a whole number of milliseconds"
        )
    skills = raw.get("skills")
    if skills is None:
        skills = [str(home / "skills")]
    if isinstance(skills, str):
        skills = [skills]
    if not isinstance(skills, list) or not all(isinstance(s, str) for s in skills):
        raise ConfigError(f"`{SECTION}.skills` in {path} must be a list of directories")
    binary = raw.get("binary") or shutil.which("skillsearch") or "skillsearch"
    return {
        "binary": str(binary),
        "mode": mode,
        "skills": [str(s) for s in skills],
        "home": raw.get("home"),
        "deadline_ms": deadline,
    }


def read_offset(value: Any) -> int:
    """``skill_read``'s ``offset``: a whole number (or one written as a string), else 0."""
    try:
        n = int(str(value).strip()) if value is not None else 0
    except ValueError:
        return 0
    return max(n, 0)


def wait_seconds(deadline_ms: int) -> float:
    """How long the client waits for one reply: the engine's deadline plus a margin, capped
    inside Hermes' 8.0 s prefetch cap."""
    return min(deadline_ms / 1000.0 + MARGIN_S, MAX_WAIT_S)


class EngineError(Exception):
    pass


class Engine:
    """A ``skillsearch serve --stdio`` child: newline-delimited JSON requests with ids, answered
    in order. Requests may come from several threads; a reply that arrives after its caller gave
    up is dropped. A dead child is restarted on the next call."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.argv = argv
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.lock = threading.Lock()
        self.waiters: dict[int, list] = {}
        self.next_id = 0
        self.started_at = 0.0
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=20)
        self.starts = 0

    # -- process --------------------------------------------------------------------------

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _start_locked(self) -> None:
        if self.alive():
            return
        if self.proc is not None and time.monotonic() - self.started_at < RESTART_BACKOFF_S:
            raise EngineError(
                "skillsearch engine exited right after starting: " + self.last_error()
            )
        self.stderr_tail.clear()
        try:
            proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env,
                close_fds=True,
            )
        except OSError as e:
            self.proc = None
            raise EngineError(f"cannot start `{self.argv[0]}`: {e}") from e
        self.proc = proc
        self.started_at = time.monotonic()
        self.starts += 1
        threading.Thread(
            target=self._read_stdout, args=(proc,), name="skillsearch-engine-out", daemon=True
        ).start()
        threading.Thread(
            target=self._read_stderr, args=(proc,), name="skillsearch-engine-err", daemon=True
        ).start()
        logger.debug("skillsearch engine started: pid %s, %s", proc.pid, self.argv)

    def _read_stdout(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                slot = self.waiters.pop(msg.get("id"), None)
            if slot is not None:
                slot[1] = msg
                slot[0].set()
        proc.wait()
        with self.lock:
            if self.proc is proc:
                waiting = list(self.waiters.values())
                self.waiters.clear()
            else:
                waiting = []
        for slot in waiting:
            slot[1] = {"error": {"message": "skillsearch engine exited: " + self.last_error()}}
            slot[0].set()

    def _read_stderr(self, proc: subprocess.Popen) -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                self.stderr_tail.append(line)
                logger.debug("engine: %s", line)

    def last_error(self) -> str:
        code = self.proc.poll() if self.proc is not None else None
        tail = " | ".join(list(self.stderr_tail)[-3:])
        return f"exit code {code}" + (f": {tail}" if tail else "")

    def stop(self) -> None:
        with self.lock:
            proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            if proc.stdin:
                proc.stdin.close()
            proc.wait(timeout=2)
        except Exception:
            proc.kill()
            try:
                proc.wait(timeout=2)
            except Exception:
                pass

    # -- requests -------------------------------------------------------------------------

    def call(self, method: str, params: dict, timeout: float) -> dict:
        """The ``result`` of one request, or ``EngineError``."""
        event = threading.Event()
        slot: list = [event, None]
        with self.lock:
            self._start_locked()
            proc = self.proc
            self.next_id += 1
            rid = self.next_id
            self.waiters[rid] = slot
            line = json.dumps({"id": rid, "method": method, "params": params}) + "\n"
            try:
                assert proc is not None and proc.stdin is not None
                proc.stdin.write(line.encode("utf-8"))
                proc.stdin.flush()
            except (OSError, ValueError) as e:
                self.waiters.pop(rid, None)
                raise EngineError(f"cannot write to the skillsearch engine: {e}") from e
        if not event.wait(timeout):
            with self.lock:
                self.waiters.pop(rid, None)
            # The engine answers within its own deadline; one that does not is stuck. Replace
            # it rather than let later turns queue behind it.
            logger.warning("skillsearch engine did not answer %s within %.1f s; restarting it", method, timeout)
            self._kill(proc)
            raise EngineError(f"no answer within {timeout:.1f} s")
        reply = slot[1] or {}
        if "error" in reply:
            raise EngineError(str((reply.get("error") or {}).get("message", reply["error"])))
        return reply.get("result") or {}

    def _kill(self, proc: subprocess.Popen | None) -> None:
        if proc is None:
            return
        try:
            proc.kill()
        except Exception:
            pass
        with self.lock:
            if self.proc is proc:
                # Allow an immediate restart: this child did not die on its own.
                self.started_at = 0.0


_ENGINES: dict[tuple, Engine] = {}
_ENGINES_LOCK = threading.Lock()


def engine_for(settings: dict[str, Any]) -> Engine:
    """The one engine for this configuration (a workspace), shared in this process."""
    argv = [settings["binary"]]
    if settings.get("home"):
        argv += ["--home", str(settings["home"])]
    argv += ["serve", "--stdio", "--mode", settings["mode"]]
    for s in settings["skills"]:
        argv += ["--skills", s]
    # The engine rejects unknown SKILLSEARCH_* variables; settings come from config.yaml, so pass
    # on only the two that locate skillsearch's own files.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("SKILLSEARCH_") or k in ("SKILLSEARCH_HOME", "SKILLSEARCH_CONFIG")
    }
    env["SKILLSEARCH_DEADLINE_MS"] = str(settings["deadline_ms"])
    key = (tuple(argv), settings["deadline_ms"])
    with _ENGINES_LOCK:
        eng = _ENGINES.get(key)
        if eng is None:
            eng = _ENGINES[key] = Engine(argv, env)
        return eng


@atexit.register
def _stop_engines() -> None:
    with _ENGINES_LOCK:
        engines = list(_ENGINES.values())
    for e in engines:
        e.stop()


class SkillsearchProvider(MemoryProvider):
    """The Hermes memory provider. Never raises into Hermes."""

    def __init__(self) -> None:
        self._settings: dict[str, Any] | None = None
        self._error: str | None = None
        self._warned = False
        self._warn_cb = None
        self._session_id = ""
        self._tools: list[dict] | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return NAME

    # -- configuration --------------------------------------------------------------------

    def _config(self) -> dict[str, Any] | None:
        with self._lock:
            if self._settings is None and self._error is None:
                try:
                    self._settings = load_settings(hermes_home())
                except ConfigError as e:
                    self._error = f"skillsearch: {e}; skills are off until it is fixed"
                except Exception as e:  # noqa: BLE001 - never break Hermes
                    self._error = f"skillsearch: cannot read the configuration: {e}"
            if self._error:
                self._warn(self._error)
            return self._settings

    def _warn(self, msg: str) -> None:
        if self._warned:
            return
        self._warned = True
        logger.error(msg)
        # Straight to file descriptor 2: `hermes -z` points sys.stderr at /dev/null for the whole
        # turn, and a configuration that turns skills off must not be silent.
        try:
            os.write(2, (msg + "\n").encode("utf-8", "replace"))
        except OSError:
            pass
        if self._warn_cb is not None:
            try:
                self._warn_cb(msg)
            except Exception:
                pass

    def _engine(self) -> Engine | None:
        s = self._config()
        return engine_for(s) if s else None

    # -- MemoryProvider -------------------------------------------------------------------

    def is_available(self) -> bool:
        # Configuration problems are reported loudly from initialize(), not hidden here.
        return True

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        self._session_id = session_id or ""
        self._warn_cb = kwargs.get("warning_callback")
        s = self._config()
        if not s:
            return
        eng = engine_for(s)

        def warm() -> None:
            # Start the child and open the index now, so the first turn finds it warm.
            try:
                eng.call("warm", {}, wait_seconds(s["deadline_ms"]))
            except Exception as e:  # noqa: BLE001
                # Say it once, loudly: a missing binary or a configuration the engine rejects
                # would otherwise leave every turn without skills and nobody the wiser.
                self._warn(
                    f"skillsearch: the engine is not answering ({e}); turns go on without "
                    "skills. Run `skillsearch doctor hermes`"
                )

        threading.Thread(target=warm, name="skillsearch-warm", daemon=True).start()

    def system_prompt_block(self) -> str:
        return ""

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        s = self._config()
        if not s or s["mode"] != "auto" or not (query or "").strip():
            return ""
        try:
            r = engine_for(s).call(
                "retrieve",
                {"query": query, "mode": "auto", "host": "hermes", "tools_unknown": NO_TOOLS},
                wait_seconds(s["deadline_ms"]),
            )
            return r.get("text") or ""
        except Exception as e:  # noqa: BLE001 - the turn goes on without skills
            logger.warning("skillsearch prefetch failed: %s", e)
            return ""

    def queue_prefetch(self, query: str, *, session_id: str = "") -> None:
        return None

    def sync_turn(self, user_content: str, assistant_content: str, *, session_id: str = "", messages=None) -> None:
        return None

    def get_tool_schemas(self) -> list[dict]:
        s = self._config()
        if not s or s["mode"] != "on_demand":
            return []
        if self._tools is None:
            try:
                r = engine_for(s).call("tools", {}, TOOLS_WAIT_S)
                self._tools = [t for t in r.get("tools") or [] if isinstance(t, dict)]
            except Exception as e:  # noqa: BLE001 - no tools this session, the turn goes on
                logger.warning("skillsearch tools unavailable: %s", e)
                return []
        return list(self._tools)

    def handle_tool_call(self, tool_name: str, args: dict, **kwargs: Any) -> str:
        s = self._config()
        args = args if isinstance(args, dict) else {}
        try:
            if not s:
                raise EngineError(self._error or "not configured")
            eng = engine_for(s)
            wait = wait_seconds(s["deadline_ms"])
            if tool_name == "skill_search":
                params = {"query": str(args.get("query", "")), "host": "hermes", "tools_unknown": NO_TOOLS}
                if args.get("detail"):
                    params["detail"] = str(args["detail"])
                r = eng.call("search", params, wait)
            elif tool_name == "skill_read":
                params = {"id": str(args.get("id", "")), "host": "hermes"}
                if args.get("path"):
                    params["path"] = str(args["path"])
                offset = read_offset(args.get("offset"))
                if offset:
                    params["offset"] = offset
                r = eng.call("read", params, wait)
            else:
                return json.dumps({"error": f"skillsearch has no tool `{tool_name}`"})
            return json.dumps({"result": r.get("text") or ""})
        except Exception as e:  # noqa: BLE001 - a tool reply, never an exception
            logger.warning("skillsearch %s failed: %s", tool_name, e)
            return json.dumps({"result": UNAVAILABLE_REPLY})

    def shutdown(self) -> None:
        # The engine is shared by every provider in this process and stopped at exit.
        return None


def register(ctx: Any) -> None:
    """Hermes plugin entry point."""
    ctx.register_memory_provider(SkillsearchProvider())
