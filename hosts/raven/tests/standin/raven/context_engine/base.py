"""Stand-in for `raven/context_engine/base.py`: the per-turn `AssemblyContext` a segment builder
reads and the `Segment` it returns."""

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class AssemblyContext:
    session_key: str
    current_message: str
    media: list[str] | None
    channel: str | None
    chat_id: str | None
    session_messages: list[dict[str, Any]]
    budget: Any
    prefix: Any = None


@dataclass
class Segment:
    text: str = ""
    history: list[dict[str, Any]] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
