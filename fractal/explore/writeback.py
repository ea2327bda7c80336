"""A machine from the results store, written back as a machine file: `fractal machines
--from-store KEY --store STORE.sqlite -o machine.toml`.

Every design-point and timing evaluation of the store holds the whole machine it was computed
on (`fractal.store.plain`); KEY is such an evaluation's key (as `points.csv` and
`fractal store export` list them), or a prefix of at least eight of its characters that names
one evaluation alone. The machine is rebuilt, validated as a machine file is, and written with
`machine.writer.machine_toml`, so the file loads back to the same machine.
"""
from __future__ import annotations

import re
from pathlib import Path

from fractal.store import Store
from isa.errors import UserError
from machine import Compute, Level, Machine, machine_from_dict
from machine.writer import machine_dict, machine_toml

__all__ = ["machine_from_store", "write_machine"]

#: the fewest characters of a key that name it
MIN_PREFIX = 8


def _rebuilt(d: dict, where: str) -> Machine:
    """The machine of a store row's `machine` table, validated as a machine file is."""
    try:
        levels = tuple(Level(**{**lv, "physical_memory": tuple(lv.get("physical_memory", ()))})
                       for lv in d["levels"])
        c = d["compute"]
        compute = Compute(**{**c, "mac_array": tuple(c.get("mac_array", ())),
                             "mac_ops_per_cycle_by_dtype": tuple(
                                 tuple(x) for x in c.get("mac_ops_per_cycle_by_dtype", ()))})
        m = Machine(**{**d, "levels": levels, "compute": compute})
        data = machine_dict(m)
    except (TypeError, KeyError, ValueError, AttributeError, IndexError) as e:
        raise UserError(f"the evaluation's machine is not a machine ({type(e).__name__}: {e})",
                        where) from None
    return machine_from_dict(data, where)


def machine_from_store(store: Store, key: str) -> tuple[str, Machine]:
    """The full key and the machine of the evaluation `key` (or a unique prefix of it)."""
    key = key.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{%d,64}" % MIN_PREFIX, key):
        raise UserError(f"a key is {MIN_PREFIX} to 64 hexadecimal digits, got {key[:80]!r}",
                        "--from-store")
    found = [row for row in store.evaluations() if row[0].startswith(key)]
    if not found:
        raise UserError(f"no evaluation in {store.path} has a key starting {key}",
                        "--from-store", hint="the keys are the 'key' column of points.csv and "
                                             "of fractal store export")
    if len(found) > 1:
        raise UserError(f"{len(found)} evaluations have keys starting {key}", "--from-store",
                        hint="give more of the key")
    full, kind, _, inputs, _ = found[0]
    if not isinstance(inputs.get("machine"), dict):
        raise UserError(f"the evaluation {full[:16]} ({kind}) has no machine", "--from-store")
    return full, _rebuilt(inputs["machine"], f"{store.where}: evaluation {full[:16]}")


def write_machine(store_path: str, key: str, out: str | None) -> tuple[str, Machine, str]:
    """Write the machine of an evaluation as a machine file (`out`; None: return the text
    only): (its full key, the machine, the text)."""
    with Store(store_path, "--store", create=False) as store:
        full, m = machine_from_store(store, key)
    text = machine_toml(m, f"{m.name}: the machine of evaluation {full} of the results store "
                           f"{Path(store_path).name}\n{m.description}".rstrip())
    if out is not None:
        try:
            Path(out).write_text(text, encoding="utf-8")
        except OSError as e:
            raise UserError(f"cannot write {out}: {e.strerror}", f"-o {out}") from None
    return full, m, text


def from_store_command(args, out) -> int:
    """`fractal machines --from-store KEY --store FILE [-o FILE.toml]`."""
    if args.from_store is None:
        raise UserError("--store and -o go with --from-store KEY", "--store" if args.store
                        else "-o")
    if args.store is None:
        raise UserError("--from-store needs the results store it reads: --store FILE.sqlite",
                        "--store")
    if args.json:
        raise UserError("--from-store writes a machine file, not JSON: drop --json", "--json")
    full, m, text = write_machine(args.store, args.from_store, args.out)
    if args.out is None:
        out.write(text)
    else:
        print(f"machine {m.name} of evaluation {full[:16]} written to {args.out} "
              f"({m.leaves:,} leaves)", file=out)
    return 0
