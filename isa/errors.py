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
    "env_limit",
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

    def format(self) -> str:
        head = f"{self.where}: error: {self.message}" if self.where else f"error: {self.message}"
        lines = [head]
        if self.source_line is not None and isinstance(self.where, SourceLocation):
            text = self.source_line.rstrip("\n").expandtabs(1)
            lines.append("    " + text)
            lines.append("    " + " " * (self.where.col - 1) + "^")
        if self.hint:
            lines.append(f"    hint: {self.hint}")
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
        parts = [e.format() for e in self.errors]
        n = len(self.errors)
        parts.append(f"{n} error{'s' if n != 1 else ''} found")
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
