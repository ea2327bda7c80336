"""The results store: the evaluations that sweeps have made, in one SQLite database, each under a
content hash of everything its result depends on.

An evaluation's key is the SHA-256 of the canonical JSON (sorted keys, shortest round-trip
numbers) of its kind, the tool version and its inputs:

- a program: the name its messages print, and the SHA-256 of its text and of the text of every
  library its includes brought in, as the parser resolved them (`program_inputs`);
- a machine: every field of the built `Machine`, after re-scaling (`plain(machine)`), never its
  file name, so that an edited machine file is a new key;
- a GPU baseline: every field of the `Gpu`, the efficiency factors and the precision;
- the options that change the result (timing-only simulation, the compiler's objective);
- the tool version: the package's version and a digest of its source (`tool_version`), so an
  upgrade or an edited model is a new key too.

A changed input is therefore a new key, and an old result is never returned for it. Each result
is one row written in its own transaction (WAL journal, a busy timeout): several processes may
write one store at once, and a writer killed at any moment, even by SIGKILL, leaves whole rows
only. A row is checked when read: its key must be the hash of its kind, version and inputs.
`export_csv` writes the rows as CSV, units in the column names. `docs/sweeps.md` describes it.
"""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import math
import numbers
import os
import sqlite3
import time
from pathlib import Path

from fractal.version import tool_version as release_and_source
from isa.errors import InternalError, UserError

__all__ = ["Store", "evaluation_key", "program_inputs", "plain", "tool_version", "export_csv",
           "FORMAT", "SCHEMA"]

FORMAT = "fractal results store"
SCHEMA = 1
#: how long a write waits for another process's transaction before giving up
BUSY_SECONDS = 60.0


def tool_version() -> str:
    """The version in every key: `fractal.version.tool_version()`, the release and a digest of
    the source that computes results; FRACTAL_STORE_VERSION, when set, instead (tests whose
    processes must share keys while the source may change between them)."""
    return os.environ.get("FRACTAL_STORE_VERSION") or release_and_source()


def plain(value):
    """`value` as JSON data: a dataclass as the table of all its fields, tuples as lists,
    numbers as int or float."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    raise InternalError("store inputs and results are JSON data", type(value).__name__,
                        repr(value)[:200])


def canonical(value) -> str:
    """The one text of `value`: sorted keys, no spaces, finite numbers in shortest form."""
    try:
        return json.dumps(plain(value), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except ValueError:
        raise InternalError("store inputs and results are finite numbers", "canonical JSON",
                            repr(value)[:200]) from None


def program_inputs(program) -> dict:
    """What a program contributes to a key: the name its messages print, and the SHA-256 of its
    text and of each library its includes read (each declaration keeps its library's text)."""
    digest = hashlib.sha256(program.source.encode())
    libraries = {}
    for decl in program.extensions:
        if decl.loc is not None and decl.loc.file != program.file:
            libraries.setdefault(decl.loc.file, decl.source)
    for name, text in libraries.items():
        digest.update(f"\0{name}\0".encode())
        digest.update(text.encode())
    return {"file": program.file, "sha256": digest.hexdigest()}


def evaluation_key(kind: str, inputs: dict, version: str | None = None) -> str:
    """The content hash naming one evaluation."""
    document = {"kind": kind, "version": tool_version() if version is None else version,
                "inputs": inputs}
    return hashlib.sha256(canonical(document).encode()).hexdigest()


def _checksum(key: str, result: str) -> str:
    """What a row's result text must hash to (with its key): a damaged page is caught."""
    return hashlib.sha256(f"{key}\0{result}".encode()).hexdigest()[:16]


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS evaluations (
    key TEXT PRIMARY KEY, kind TEXT NOT NULL, version TEXT NOT NULL,
    inputs TEXT NOT NULL, result TEXT NOT NULL, checksum TEXT NOT NULL);
"""


class Store:
    """An open results store. `where` names it in messages (`--store PATH`); `create=False`
    opens an existing store read-only."""

    def __init__(self, path: str | Path, where: str | None = None, create: bool = True):
        self.path = str(path)
        self.where = where or self.path
        if os.path.isdir(self.path):
            raise UserError(f"cannot open the results store {self.path}: it is a directory",
                            self.where)
        if not create and not os.path.isfile(self.path):
            why = "not a regular file" if os.path.exists(self.path) else "no such file"
            raise UserError(f"cannot open the results store {self.path}: {why}", self.where)
        try:
            uri = Path(os.path.abspath(self.path)).as_uri() + ("" if create else "?mode=ro")
            self.db = sqlite3.connect(uri, uri=True, timeout=BUSY_SECONDS, isolation_level=None)
        except sqlite3.Error as e:
            raise self._error(e) from None
        try:
            self._open(create)
        except BaseException:
            self.db.close()
            raise

    def _error(self, e: Exception, what: str = "cannot use the results store") -> UserError:
        return UserError(f"{what} {self.path}: {e}", self.where,
                         hint="give another --store, or delete a damaged store (every row in it "
                              "is computed again)")

    def _open(self, create: bool):
        # A new store's first writers race to switch its journal to WAL, which needs the file to
        # itself: SQLite answers "locked" at once rather than waiting, so that step is retried.
        deadline = time.monotonic() + BUSY_SECONDS
        while True:
            try:
                tables, meta = self._read_meta(create)
                break
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise self._error(e, "cannot read the results store") from None
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                time.sleep(0.02)
            except (sqlite3.Error, UnicodeDecodeError) as e:     # text that is not UTF-8: damage
                raise self._error(e, "cannot read the results store") from None
        if meta.get("format") != FORMAT or "evaluations" not in tables:
            raise UserError(f"{self.path} is not a results store (an SQLite file without its "
                            f"'{FORMAT}' mark)", self.where,
                            hint="give another --store, or delete the file")
        if meta.get("schema") != str(SCHEMA):
            raise UserError(f"the results store {self.path} has schema {meta.get('schema')!r}; "
                            f"this version reads schema {SCHEMA}", self.where,
                            hint="give another --store")

    def _read_meta(self, create: bool) -> tuple[set, dict]:
        """The store's tables and marks; a new (or empty) file is made a store first, in one
        transaction that checks again, under its lock, that no other process made it."""
        def tables_now() -> set:
            return {r[0] for r in self.db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()}
        tables = tables_now()
        if not tables and create:
            self.db.execute("BEGIN IMMEDIATE")
            if not tables_now():
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self.db.execute(statement)
                self.db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?), ('schema', ?)",
                                (FORMAT, str(SCHEMA)))
            self.db.execute("COMMIT")
            tables = tables_now()
        meta = dict(self.db.execute("SELECT name, value FROM meta").fetchall()
                    ) if "meta" in tables else {}
        if create and meta.get("format") == FORMAT:
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = FULL")
        return tables, meta

    def get_many(self, keys) -> dict[str, dict]:
        """The results stored under these keys (absent keys are left out)."""
        found = {}
        keys = list(dict.fromkeys(keys))
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            rows = self._read("SELECT key, kind, version, inputs, result, checksum FROM "
                              f"evaluations WHERE key IN ({','.join('?' * len(chunk))})", chunk)
            for row in rows:
                found[row[0]] = self._checked(row)[4]
        return found

    def _checked(self, row) -> tuple:
        """A row read back: (key, kind, version, inputs, result), its key and checksum
        checked."""
        key, kind, version, inputs, result, checksum = row
        at = f"{self.where}: evaluation {str(key)[:16]}"
        hint = "the store is damaged: give another --store or delete it"
        if not all(isinstance(v, str) for v in row):
            raise UserError("a column of the row is not text", at, hint=hint)
        if _checksum(key, result) != checksum:
            raise UserError("the row's checksum does not match its result", at, hint=hint)
        try:
            inputs, result = json.loads(inputs), json.loads(result)
        except ValueError as e:
            raise UserError(f"the row is not JSON ({e})", at, hint=hint) from None
        if not isinstance(result, dict) or not isinstance(inputs, dict):
            raise UserError("the row's inputs and result are not tables", at, hint=hint)
        try:
            expected = evaluation_key(kind, inputs, version)
        except InternalError:
            expected = None
        if expected != key:
            raise UserError("the key is not the hash of the row's inputs", at, hint=hint)
        return key, kind, version, inputs, result

    def put(self, key: str, kind: str, inputs: dict, result: dict):
        """Store one evaluation in one transaction; a key already there is kept (a result is a
        pure function of its key, so another process's row is the same)."""
        if evaluation_key(kind, inputs) != key:
            raise InternalError("an evaluation is stored under the hash of its inputs", key[:16])
        try:
            text = json.dumps(plain(result), allow_nan=False)
        except ValueError:
            raise InternalError("store results are finite numbers", key[:16]) from None
        row = (key, kind, tool_version(), canonical(inputs), text, _checksum(key, text))
        try:
            self.db.execute("INSERT OR IGNORE INTO evaluations VALUES (?, ?, ?, ?, ?, ?)", row)
        except sqlite3.Error as e:
            raise self._error(e, "cannot write to the results store") from None

    def evaluations(self, kind: str | None = None):
        """Every row (key, kind, version, inputs, result), checked, in key order."""
        query = "SELECT key, kind, version, inputs, result, checksum FROM evaluations"
        args = ()
        if kind is not None:
            query, args = query + " WHERE kind = ?", (kind,)
        return [self._checked(row) for row in self._read(query + " ORDER BY key", args)]

    def _read(self, query: str, args=()) -> list:
        try:
            return self.db.execute(query, args).fetchall()
        except (sqlite3.Error, UnicodeDecodeError) as e:    # text that is not UTF-8: damage
            raise self._error(e, "cannot read the results store") from None

    def close(self):
        self.db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _describe(kind: str, version: str, inputs: dict) -> dict:
    """The export's columns naming an evaluation's inputs."""
    out = {"kind": kind, "tool_version": version}
    program = inputs.get("program")
    if isinstance(program, dict):
        out.update(program=program.get("file"), program_sha256=program.get("sha256"))
    machine = inputs.get("machine")
    if isinstance(machine, dict):
        levels = machine.get("levels") if isinstance(machine.get("levels"), list) else []
        fanouts = [lv.get("fanout") for lv in levels[:-1] if isinstance(lv, dict)]
        out.update(machine=machine.get("name"), machine_frequency_hz=machine.get("frequency_hz"),
                   machine_depth=len(fanouts),
                   machine_leaves=math.prod(f for f in fanouts if isinstance(f, int)))
    gpu = inputs.get("gpu")
    if isinstance(gpu, dict):
        out.update(gpu=gpu.get("name"), precision=inputs.get("precision"))
    return out


def export_csv(store: Store, out: str | Path, kind: str | None = None) -> int:
    """Write the store's rows (of one kind, or all) as CSV: `key`, the inputs' names, then the
    result's columns (units in their names, as `docs/sweeps.md` lists them); return the count."""
    rows, names, metrics = [], {"key": None}, {}
    for key, k, version, inputs, result in store.evaluations(kind):
        described = _describe(k, version, inputs)
        names.update(dict.fromkeys(described))
        metrics.update(dict.fromkeys(result))
        rows.append({"key": key, **described, **result})
    header = list(names) + [m for m in metrics if m not in names]
    try:
        with open(out, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(header)
            for row in rows:
                writer.writerow("" if row.get(c) is None else str(row[c]) for c in header)
    except OSError as e:
        raise UserError(f"cannot write {out}: {e.strerror}", f"-o {out}") from None
    return len(rows)
