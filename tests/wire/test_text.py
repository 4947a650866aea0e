"""Text from another process made safe to show a person: hostile values from the red-team
audit of 2026-11-27 (B8) and their kin, and ordinary text that must pass unchanged."""

from __future__ import annotations

import pytest

from loadfleet.wire.text import ELLIPSIS, is_printable, printable

ESC = "\x1b"


@pytest.mark.parametrize(
    "text, shown",
    [
        # The audit's engine stderr: an OSC 52 clipboard write, a screen clear, a fake verdict in red.
        (
            "\x1b]52;c;ZWNobyBwd25lZAo=\x07\x1b[2J\x1b[1;31mFAKE: all targets passed\x1b[0m",
            "FAKE: all targets passed",
        ),
        ("h\x1b[31mRED\x1b[0m", "hRED"),  # the audit's host name
        ("0.1.0\x1b]0;owned\x07", "0.1.0"),  # a window title, BEL-terminated
        ("a\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\b", "alinkb"),  # an OSC 8 hyperlink, ST-terminated
        ("a\x1bPdevice control\x1b\\b", "ab"),  # DCS
        ("a\x1b_app\x9cb", "ab"),  # APC ended by a C1 ST
        ("a\x9b31mb", "ab"),  # CSI as one C1 character
        ("a\x9d0;title\x07b", "ab"),  # OSC as one C1 character
        ("a\x1b7b\x1b8c", "abc"),  # save/restore cursor
        ("a\x1bc", "a"),  # reset the terminal
        ("a\x1b", "a"),  # a lone ESC at the end
        ("a\x1b[", "a"),  # a CSI cut short
        ("a\x1b]0;never ended", "a"),  # an OSC never terminated swallows the rest
        ("line\nFAKE: passed", "line FAKE: passed"),  # no forged line of its own
        ("a\r\n\tb", "a b"),
        ("a\rb", "a b"),  # carriage return: overwrite the line
        ("a\u2028b\u2029c\x85d", "a b c d"),  # Unicode line and paragraph separators, NEL
        ("a\x00b\x07c\x08d\x7fe", "a\ufffdb\ufffdc\ufffdd\ufffde"),  # NUL, BEL, backspace, DEL
        ("a\x80b\x8fc", "a\ufffdb\ufffdc"),  # C1 controls
        ("a\x9fapp\x9cb", "ab"),  # a C1 APC string
        ("abc\u202edcba", "abc\ufffddcba"),  # a right-to-left override (Trojan Source)
        ("a\u2066b\u2069c\u200fd", "a\ufffdb\ufffdc\ufffdd"),  # isolates and a direction mark
        # Ordinary text passes as it is.
        ("web-01.example.com", "web-01.example.com"),
        ("Grüße, 世界 🚀 café", "Grüße, 世界 🚀 café"),
        ("a\u00a0b", "a\u00a0b"),  # a no-break space is printable text
        ("👩\u200d💻", "👩\u200d💻"),  # a zero-width joiner inside an emoji stays
        ("", ""),
    ],
)
def test_escape_sequences_and_control_characters_never_pass(text, shown):
    assert printable(text, 1000) == shown
    assert is_printable(shown)
    assert is_printable(text) == (text == shown)


@pytest.mark.parametrize(
    "text, max_chars, shown",
    [
        ("abcdef", 6, "abcdef"),
        ("abcdefg", 6, "abcde" + ELLIPSIS),
        ("x" * 10_000_000, 8, "xxxxxxx" + ELLIPSIS),
        ("ab\x1b[31mcdef", 5, "ab" + ELLIPSIS),  # cut first (bounded work), then cleaned
        ("abc\x1b", 4, "abc"),  # not cut: the ESC alone goes
        ("a\nb", 1, ELLIPSIS),
    ],
)
def test_text_is_cut_to_its_length_and_marked(text, max_chars, shown):
    assert printable(text, max_chars) == shown
    assert len(printable(text, max_chars)) <= max_chars


def test_no_escape_or_control_character_survives_before_or_after_any_character():
    for code in range(0x10000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        c = chr(code)
        for text in (f"a{c}[31mb", f"a{ESC}{c}b", f"a{c}{ESC}]0;t\x07b"):
            shown = printable(text, 100)
            assert is_printable(shown), repr(text)
            assert not any(ch in shown for ch in (ESC, "\x9b", "\x9d", "\n", "\r", "\x07")), repr(text)
