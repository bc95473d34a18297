"""Choose the language of lessons_lib's messages (Vietnamese by default, English on request)."""

from __future__ import annotations

import os

_SUPPORTED = ("vi", "en")
_language = os.environ.get("LESSONS_LANG", "vi") if os.environ.get("LESSONS_LANG") in _SUPPORTED else "vi"


def set_language(language: str) -> None:
    """Set the language of user-facing messages: "vi" (default) or "en"."""
    global _language
    if not isinstance(language, str):
        raise TypeError(f"language must be a str such as 'vi' or 'en', got {type(language).__name__}")
    if language not in _SUPPORTED:
        raise ValueError(f"language must be one of {_SUPPORTED}, got {language!r}")
    _language = language


def get_language() -> str:
    """Return the current message language ("vi" or "en")."""
    return _language


def tr(vi: str, en: str) -> str:
    """Return the message in the current language."""
    return en if _language == "en" else vi
