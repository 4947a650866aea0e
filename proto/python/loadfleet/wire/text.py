"""Text from another process, made safe to show a person.

Another process's text (an agent's host name, an engine's last words on stderr, a job's
message) reaches operators' terminals, logs and run files. A terminal obeys what it is given:
an escape sequence can clear the screen, recolour or move text, retitle the window or write
the clipboard (OSC 52), and a line break can print a line that seems to be the controller's
own. `printable` keeps the text and drops that power:

- escape sequences (ESC and C1 introducers: CSI, OSC/DCS/SOS/PM/APC strings up to their
  terminator, and two-character escapes) are removed whole: they format, they hold no text;
- line breaks and tabs become one space, so one text stays on one line;
- every other control character (C0, DEL, C1) and the bidirectional overrides (which reorder
  what a terminal shows, "Trojan Source") become U+FFFD, so a person sees that one was there;
- the text is cut to a length, its end marked with "…".

Ordinary text, any script and emoji included, passes unchanged.
"""

from __future__ import annotations

import re

__all__ = ["ELLIPSIS", "is_printable", "printable"]

ELLIPSIS = "…"
REPLACEMENT = "\ufffd"

_STRING_END = r"(?:\x07|\x1b\\|\x9c)"
_ESCAPE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"  # CSI: ESC [ parameters intermediates final
    r"|\x9b[0-?]*[ -/]*[@-~]?"  # CSI as one C1 character
    rf"|\x1b[\]PX^_][^\x07\x1b\x9c]*{_STRING_END}?"  # OSC, DCS, SOS, PM, APC strings
    rf"|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*{_STRING_END}?"  # the same as C1 characters
    r"|\x1b[ -~]?"  # any other escape: ESC and one character
)
_BREAKS = re.compile(r"[\t\n\v\f\r\x85\u2028\u2029]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str, max_chars: int) -> str:
    """`text` without escape sequences and control characters (see the module's docstring),
    at most `max_chars` long. Its work is bounded by `max_chars`, however long `text` is."""
    if len(text) <= max_chars and text.isprintable():  # the common case, at C speed
        return text
    cut = len(text) > max_chars
    text = text[: max_chars - 1] if cut else text
    text = _CONTROL.sub(REPLACEMENT, _BREAKS.sub(" ", _ESCAPE.sub("", text)))
    return text + ELLIPSIS if cut else text


def is_printable(text: str) -> bool:
    """Whether `printable` would leave `text` as it is, whatever its length: no escape
    sequence, line break or control character."""
    return text.isprintable() or not (_ESCAPE.search(text) or _BREAKS.search(text) or _CONTROL.search(text))
