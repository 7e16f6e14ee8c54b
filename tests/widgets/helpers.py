"""Shared by the widget tests: play the front end, check that hostile text is escaped."""

from __future__ import annotations

from typing import Any

HOSTILE = "<script>alert('x')</script>"


def front_end_custom(widget: Any, content: dict[str, Any]) -> None:
    """Play the front end sending a custom message."""
    widget._handle_msg({"content": {"data": {"method": "custom", "content": content}}, "buffers": []})


def front_end_update(widget: Any, state: dict[str, Any]) -> None:
    """Play the front end changing synced state."""
    widget._handle_msg({"content": {"data": {"method": "update", "state": state}}, "buffers": []})


def assert_no_raw_markup(html: str, needle: str = HOSTILE) -> None:
    assert needle not in html
    assert "<script" not in html.lower()
