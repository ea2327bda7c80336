"""One error root for the whole project.

A `UserError` is something the user can fix: bad program text, a bad machine file, bad arguments,
a bad data file, a program that cannot be fitted onto a machine. It always says where: a source
location (file:line:col with the source line and a caret), a key path in a machine file, or the
name of an argument. The CLI prints it and exits with status 2.

An `InternalError` is a broken invariant of the simulator or compiler itself (negative time,
utilization above one, ops not conserved). It names the invariant and where it broke.

This module imports nothing else of ours, so every layer can use it.
"""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass

__all__ = [
    "env_limit", "clip_line", "clip_text", "MAX_ERRORS_SHOWN", "MAX_ERRORS_COLLECTED", "LINE_SHOWN",
    "FractalError", "UserError", "ErrorGroup", "InternalError", "SourceLocation",
    "did_you_mean",
]


@dataclass(frozen=True)
class SourceLocation:
    """A position in a source file; `line` and `col` count from 1."""
    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


#: the most characters of a source line an error echoes (a window around the caret)
LINE_SHOWN = 120
#: the most characters of a message (names in it are the user's, and may be long)
MESSAGE_SHOWN = 400
#: the most errors one group prints; the rest are counted
MAX_ERRORS_SHOWN = 50
#: the most errors one file's checks collect; past it they stop looking
MAX_ERRORS_COLLECTED = 1000
#: control characters of an echoed line (terminal escapes, NUL) shown as '?'
_UNPRINTABLE = {c: "?" for c in [*range(0, 32), 127] if c != 9}


def clip_text(text: str, most: int = MESSAGE_SHOWN) -> str:
    """`text` cut to at most `most` characters, with the cut said."""
    if len(text) <= most:
        return text
    return text[:most] + f"... ({len(text) - most:,} more characters)"


def clip_line(line: str, col: int, width: int = LINE_SHOWN) -> tuple[str, int]:
    """A window of at most `width` characters of a source line around column `col` (from 1),
    and the caret's column in that window. Cut ends are marked with '...'."""
    line = line.rstrip("\n").expandtabs(1).translate(_UNPRINTABLE)
    if len(line) <= width:
        return line, col
    start = max(0, min(col - 1 - width // 2, len(line) - width))
    window = line[start:start + width]
    caret = col - start
    if start > 0:
        window, caret = "..." + window, caret + 3
    if start + width < len(line):
        window += "..."
    return window, caret


class FractalError(Exception):
    """Root of every error this project raises on purpose."""


class UserError(FractalError):
    """A located problem with the user's input.

    `where` is a SourceLocation, or a string such as `machine.toml: level[1].fanout` or
    `--input x=data.npy`. `source_line` is the text of the offending line, shown with a caret.
    """

    def __init__(self, message: str, where: SourceLocation | str | None = None,
                 source_line: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.where = where
        self.source_line = source_line
        self.hint = hint

    @property
    def source_line(self) -> str | None:
        return self._source_line

    @source_line.setter
    def source_line(self, line: str | None):
        # keep only what is shown: a window around the column (a line may be megabytes long)
        if line is not None and len(line) > LINE_SHOWN:
            col = self.where.col if isinstance(self.where, SourceLocation) else 1
            start = max(0, col - 1 - 2 * LINE_SHOWN)
            line = line[start:col - 1 + 2 * LINE_SHOWN]
            if isinstance(self.where, SourceLocation) and start:
                # the window keeps the caret's place: pad what was cut with the marker's width
                self._offset = start
        self._source_line = line

    def format(self) -> str:
        where = clip_text(str(self.where), 300) if self.where else None
        message = clip_text(self.message)
        head = f"{where}: error: {message}" if where else f"error: {message}"
        lines = [head]
        if self.source_line is not None and isinstance(self.where, SourceLocation):
            col = self.where.col - getattr(self, "_offset", 0)
            text, caret = clip_line(self.source_line, col)
            if getattr(self, "_offset", 0) and not text.startswith("..."):
                text, caret = "..." + text, caret + 3
            lines.append("    " + text)
            lines.append("    " + " " * (caret - 1) + "^")
        if self.hint:
            lines.append(f"    hint: {clip_text(self.hint, 200)}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


class ErrorGroup(UserError):
    """Several user errors found in one pass (a whole file checked, a whole machine validated)."""

    def __init__(self, errors: list[UserError]):
        self.errors = list(errors)
        n = len(self.errors)
        super().__init__(f"{n} error{'s' if n != 1 else ''}")

    def format(self) -> str:
        parts = [e.format() for e in self.errors[:MAX_ERRORS_SHOWN]]
        n = len(self.errors)
        if n > MAX_ERRORS_SHOWN:
            parts.append(f"... {n - MAX_ERRORS_SHOWN:,} more error(s) not shown")
        more = " (stopped looking there)" if n >= MAX_ERRORS_COLLECTED else ""
        parts.append(f"{n:,} error{'s' if n != 1 else ''} found{more}")
        return "\n".join(parts)


class InternalError(FractalError):
    """A broken invariant: `invariant` names it, `where` says where it broke."""

    def __init__(self, invariant: str, where: str, detail: str = ""):
        self.invariant = invariant
        self.where = where
        self.detail = detail
        # the arguments rebuild the error (SimPy re-raises a process's error from its args)
        super().__init__(invariant, where, detail)

    def __str__(self) -> str:
        msg = f"internal error: invariant '{self.invariant}' violated at {self.where}"
        return msg + (f": {self.detail}" if self.detail else "")


def did_you_mean(word: str, choices) -> str | None:
    """A 'did you mean' hint for a misspelt name, or None when nothing is close."""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else None


def env_limit(var: str, default: int) -> int:
    """A limit set by an environment variable, else `default`; a located error when the
    variable holds anything but a positive integer."""
    text = os.environ.get(var)
    if text is None or not text.strip():
        return default
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise UserError(f"{var} must be a positive integer, got {text!r}", var) from None
    if value < 1:
        raise UserError(f"{var} must be a positive integer, got {text!r}", var)
    return value
