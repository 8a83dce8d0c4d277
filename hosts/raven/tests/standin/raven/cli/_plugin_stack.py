"""Stand-in for `raven/cli/_plugin_stack.py` `build_plugin_tools`: one factory call per tool with
the slice `config.plugins.config[<plugin id>]` (else `[<tool name>]`, else `{}`); a factory that
raises is skipped with a warning, one that returns None is skipped quietly."""

import logging
from pathlib import Path
from typing import Any

from raven.plugin import ServiceLocator

logger = logging.getLogger(__name__)


def build_plugin_tools(workspace: Path, config: Any, *, registry: Any) -> list:
    services = ServiceLocator(workspace=workspace)
    slices = config.plugins.config
    tools = []
    for name in registry.tool_names():
        pid = registry.tool_plugin_id(name)
        plugin_slice = (pid and slices.get(pid)) or slices.get(name) or {}
        try:
            tool = registry.build_tool(name, config=plugin_slice, services=services)
        except Exception as e:
            logger.warning("plugin tool %r factory raised (%s); skipping it.", name, e)
            continue
        if tool is not None:
            tools.append(tool)
    return tools
