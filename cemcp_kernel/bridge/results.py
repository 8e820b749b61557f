"""What a tool call gives back to the sandbox: plain JSON, never SDK objects."""

from __future__ import annotations

from typing import Any

from mcp.types import (
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    TextContent,
)


class ToolFailed(Exception):
    """The server ran the tool and reported an error (``is_error``); the message is its text."""


def tool_value(result: CallToolResult) -> Any:
    """Structured content when the server gives it, else the text; several items as a list.

    Images and audio become ``{"type", "mime_type", "data"}`` dicts with base64 data.
    """
    if result.is_error:
        text = "\n".join(
            block.text for block in result.content if isinstance(block, TextContent)
        ).strip()
        raise ToolFailed(text or "the tool reported an error without a message")
    if result.structured_content is not None:
        return result.structured_content
    items = [content_value(block) for block in result.content]
    if not items:
        return None
    return items[0] if len(items) == 1 else items


def content_value(block: Any) -> Any:
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent | AudioContent):
        return {"type": block.type, "mime_type": block.mime_type, "data": block.data}
    if isinstance(block, EmbeddedResource):
        return {"type": "resource", **block.resource.model_dump(mode="json", exclude_none=True)}
    if hasattr(block, "model_dump"):
        return block.model_dump(mode="json", exclude_none=True)
    return block
