"""Stand-in for `raven/agent/tools/registry.py`: `register` keys by `tool.name`; `execute` calls
`cast_params`, `validate_params`, then `execute(**params)` under `asyncio.wait_for` with the
tool's `timeout_seconds` (300 s when unset), unless `blocking_interaction`."""

import asyncio
from typing import Any


class ToolRegistry:
    DEFAULT_TOOL_TIMEOUT_S = 300.0

    def __init__(self) -> None:
        self._tools: dict[str, Any] = {}

    def register(self, tool: Any) -> None:
        self._tools[tool.name] = tool

    def get_definitions(self) -> list[dict[str, Any]]:
        return [t.to_schema() for t in self._tools.values()]

    async def execute(self, name: str, params: dict[str, Any]) -> str:
        tool = self._tools.get(name)
        if not tool:
            return f"Error: Tool '{name}' not found"
        try:
            params = tool.cast_params(params)
            errors = tool.validate_params(params)
            if errors:
                return f"Error: Invalid parameters for tool '{name}': " + "; ".join(errors)
            ceiling = tool.timeout_seconds or self.DEFAULT_TOOL_TIMEOUT_S
            if tool.blocking_interaction:
                return await tool.execute(**params)
            return await asyncio.wait_for(tool.execute(**params), timeout=ceiling)
        except asyncio.TimeoutError:
            return f"Error: Tool '{name}' timed out"
        except Exception as e:
            return f"Error executing {name}: {e}"
