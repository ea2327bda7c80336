"""What machine a benchmark ran on, for the header of its report."""
from __future__ import annotations

import datetime
import os
import platform
import time
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), or what `platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def header(title: str, what: str) -> list[str]:
    """Markdown lines: the title, the date, the host, Python, and what was measured."""
    now = datetime.datetime.now().astimezone()
    return [f"## {title}", "", f"- date: {now:%Y-%m-%d %H:%M %Z}",
            f"- host: {platform.platform()}, {platform.machine()}, {cpu_model()}, "
            f"{os.cpu_count()} CPUs",
            f"- Python {platform.python_version()} ({platform.python_implementation()})",
            f"- {what}", ""]


def best(fn, repeat: int):
    """The shortest wall time of `repeat` calls of fn, and the last call's result."""
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def paired(fn, other, repeat: int):
    """`repeat` rounds of one call of fn then one of other, back to back, so that both see the
    host as it is at that moment: (fn's best time, other's best time, the median over the rounds
    of fn's time / other's, its least and greatest, fn's last result, other's last result)."""
    mine, theirs, a, b = [], [], None, None
    for _ in range(repeat):
        start = time.perf_counter()
        a = fn()
        mid = time.perf_counter()
        b = other()
        mine.append(mid - start)
        theirs.append(time.perf_counter() - mid)
    ratios = sorted(x / y for x, y in zip(mine, theirs))
    k = len(ratios)
    median = (ratios[(k - 1) // 2] + ratios[k // 2]) / 2
    return min(mine), min(theirs), median, ratios[0], ratios[-1], a, b


def emit(lines: list[str], out: str | None) -> None:
    """Print the report, and write it to `out` when given."""
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if out:
        Path(out).write_text(text, encoding="utf-8")


def report(lines: list[str], out: str | None) -> None:
    """Print a report's markdown lines, and write them to `out` too when given."""
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        Path(out).write_text(text)
