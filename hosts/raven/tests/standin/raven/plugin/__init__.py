"""Stand-in for `raven/plugin/` (manifest.py, discover.py, registry.py, context.py, bootstrap.py):
manifests under `<user_dir>/<dir>/raven-plugin.toml` with a `[plugin]` root; only plugins with
`enabled_by_default = true` activate; a user plugin's directory is appended to `sys.path`; each
`[[plugin.contributes.tools]]` factory `module:callable` is imported and called with a
`PluginContext(config, services=ServiceLocator(workspace))`."""

import importlib
import logging
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_FACTORY_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


@dataclass(frozen=True)
class ServiceLocator:
    workspace: Path


@dataclass(frozen=True)
class PluginContext:
    config: dict[str, Any]
    services: ServiceLocator
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("raven.plugin"))


class PluginRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, tuple[str, Any]] = {}

    def activate_dir(self, manifest_path: Path) -> None:
        raw = tomllib.loads(manifest_path.read_text())
        mf = raw["plugin"]
        if not mf.get("id") or not mf.get("version"):
            raise ValueError("manifest needs id and version")
        if not mf.get("enabled_by_default", False):
            return
        if str(manifest_path.parent) not in sys.path:
            sys.path.append(str(manifest_path.parent))
        for t in mf.get("contributes", {}).get("tools", []):
            if not _FACTORY_REF.match(t["factory"]):
                raise ValueError(f"bad factory {t['factory']}")
            module, _, attr = t["factory"].partition(":")
            self._tools[t["name"]] = (mf["id"], getattr(importlib.import_module(module), attr))

    def tool_names(self) -> list[str]:
        return sorted(self._tools)

    def tool_plugin_id(self, name: str) -> str | None:
        return self._tools[name][0] if name in self._tools else None

    def build_tool(self, name: str, *, config: dict[str, Any], services: ServiceLocator) -> Any:
        return self._tools[name][1](PluginContext(config=config, services=services))


def assemble_plugin_registry(*, user_dir: Path | None = None, entry_points_group: str | None = None, **_: Any) -> PluginRegistry:
    reg = PluginRegistry()
    for sub in sorted(user_dir.iterdir()) if user_dir else []:
        if (sub / "raven-plugin.toml").is_file():
            reg.activate_dir(sub / "raven-plugin.toml")
    return reg
