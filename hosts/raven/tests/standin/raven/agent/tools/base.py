"""Stand-in for `raven/agent/tools/base.py`: the abstract members a tool must implement and the
concrete ones the registry calls (`to_schema`, `cast_params`, `validate_params`)."""

from abc import ABC, abstractmethod
from typing import Any

_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list, "object": dict}


class Tool(ABC):
    timeout_seconds: float | None = None
    blocking_interaction: bool = False

    @property
    @abstractmethod
    def name(self) -> str: ...

    @property
    @abstractmethod
    def description(self) -> str: ...

    @property
    @abstractmethod
    def parameters(self) -> dict[str, Any]: ...

    @abstractmethod
    async def execute(self, **kwargs: Any) -> str: ...

    def cast_params(self, params: dict[str, Any]) -> dict[str, Any]:
        props = (self.parameters or {}).get("properties", {})
        out = dict(params)
        for k, v in params.items():
            t = props.get(k, {}).get("type")
            if t == "integer" and isinstance(v, str) and v.strip().lstrip("-").isdigit():
                out[k] = int(v)
            elif t == "string" and v is not None and not isinstance(v, str):
                out[k] = str(v)
        return out

    def validate_params(self, params: dict[str, Any]) -> list[str]:
        schema = self.parameters or {}
        if schema.get("type", "object") != "object":
            raise ValueError("Schema must be object type")
        errors = [f"missing required {k}" for k in schema.get("required", []) if k not in params]
        for k, v in params.items():
            spec = schema.get("properties", {}).get(k)
            if spec is None:
                continue
            t = spec.get("type")
            if t in _TYPES and (not isinstance(v, _TYPES[t]) or (isinstance(v, bool) and t in ("integer", "number"))):
                errors.append(f"{k} should be {t}")
            elif "enum" in spec and v not in spec["enum"]:
                errors.append(f"{k} must be one of {spec['enum']}")
        return errors

    def to_schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}
