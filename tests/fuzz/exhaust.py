"""The resource-exhaustion class of the reliability campaign: small crafted inputs that used to
exhaust the host, read files outside the include rules, or end as an internal error.

`exhaust_case(rng)` draws one case (a `tests.fuzz.cases.Case` of kind "exhaust"); its files may
include special entries: b"<fifo>" (a named pipe), b"<symlink:TARGET>", b"<sparse:N>" (a .npy
header then a hole of N bytes). `run_contract(case, directory)` runs it in a forked child under
the resource contract of docs/reliability.md (an answer within CONTRACT_SECONDS and
CONTRACT_BYTES of memory above what the process held before) and `contract_problems` lists what
it broke, on top of `check_case`'s properties: the time, the memory, strict JSON, and the content
of files outside the include rules echoed in the output.
"""
from __future__ import annotations

import io
import json
import os
import resource
import signal
import time
import zipfile
from pathlib import Path

import numpy as np

from tests.fuzz.cases import ROOT, Case, Outcome, _in_process

CONTRACT_SECONDS = 10
CONTRACT_BYTES = 2**30
#: text that only files outside every include rule hold (checked absent from all output)
SECRETS = ("root:x:0:0", "PATH=", "HOME=", "SECRET-CONTENT")

SMALL = "tensor x : f32[4] input\ntensor y : f32[4] output\nrelu y, x\n"
MLP = str(ROOT / "programs" / "mlp.fasm")


def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def _chain(n: int, calls: int) -> str:
    s = "extension c0(y: f32[N] <- x: f32[N])\n  split N\n  relu y, x\nend\n"
    for i in range(1, n):
        body = "".join(f"  c{i - 1} {'t' if k == 0 and calls == 2 else 'y'}, "
                       f"{'t' if k == 1 else 'x'}\n" for k in range(calls))
        s += f"extension c{i}(y: f32[N] <- x: f32[N])\n  split N\n  tensor t : f32[N]\n{body}end\n"
    return s + f"tensor x : f32[4] input\ntensor y : f32[4] output\nc{n - 1} y, x\n"


def _program_argv(rng, name="p.fasm"):
    return _pick(rng, [["check", name], ["run", name, "--reference"],
                       ["compile", name, "--machine", "tiny", "--summary"],
                       ["run", name, "--machine", "tiny", "--json"]])


def long_lines(rng) -> Case:
    n = int(rng.integers(1, 250_000))
    per = int(rng.integers(1, 2200))
    lines = max(1, min(n // per, 1_000_000 // (5 * per + 10)))
    text = "tensor x : f32[4, 4] input\ntensor y : f32[4, 4] output\n" + \
        ("relu y, x" + ", a=1" * per + "\n") * lines
    return Case("exhaust", f"long-lines:{per}x{lines}", _program_argv(rng),
                {"p.fasm": text.encode()}, 2, "program")


def deep_includes(rng) -> Case:
    depth = int(rng.integers(2, 80))
    files = {}
    for i in range(depth):
        files[f"l{i}.fasm"] = (f'include "l{i + 1}.fasm"\n' if i + 1 < depth else "").encode()
    files["p.fasm"] = ('include "l0.fasm"\n' + SMALL).encode()
    return Case("exhaust", "deep-include", _program_argv(rng), files, 0 if depth <= 32 else 2,
                "program")


def diamond_includes(rng) -> Case:
    depth = int(rng.integers(4, 40))
    files = {}
    for i in range(depth):
        nxt = f'include "l{i + 1}.fasm"\ninclude "l{i + 1}.fasm"\n' if i + 1 < depth else ""
        files[f"l{i}.fasm"] = (nxt + f"extension e{i}(y: f32[N] <- x: f32[N])\n  split N\n"
                               "  relu y, x\nend\n").encode()
    files["p.fasm"] = ('include "l0.fasm"\ntensor x : f32[4] input\ntensor y : f32[4] output\n'
                       "e0 y, x\n").encode()
    return Case("exhaust", "diamond-include", _program_argv(rng), files,
                0 if depth <= 32 else 2, "program")


def chained_extensions(rng) -> Case:
    calls = _pick(rng, [1, 2])
    n = int(rng.integers(2, 26 if calls == 2 else 200))
    within = (2 ** (n - 1) <= 10_000) if calls == 2 else n <= 32
    return Case("exhaust", f"chained-extensions:{calls}", _program_argv(rng),
                {"p.fasm": _chain(n, calls).encode()}, 0 if within else 2, "program")


def many_extensions(rng) -> Case:
    n = int(rng.integers(100, 1500))
    text = "".join(f"extension e{i}(y: f32[N] <- x: f32[N])\n  split N\n  relu y, x\nend\n"
                   for i in range(n)) + f"tensor x : f32[4] input\ntensor y : f32[4] output\ne{n - 1} y, x\n"
    return Case("exhaust", "many-extensions", _program_argv(rng), {"p.fasm": text.encode()},
                0 if n <= 1000 else 2, "program")


def special_files(rng) -> Case:
    what = _pick(rng, ["/proc/self/environ", "/etc/passwd", "/dev/zero", "/dev/stdin",
                       "/dev/urandom", "fifo", "symlink", "direct-fifo", "folder", "nul"])
    files = {"outside/secret.fasm": b"SECRET-CONTENT\n"}
    if what == "direct-fifo":
        files["pipe.fasm"] = b"<fifo>"
        return Case("exhaust", "special:direct-fifo", ["check", "pipe.fasm"], files, 2, "program")
    if what == "fifo":
        files["prog/pipe.fasm"] = b"<fifo>"
        target = "pipe.fasm"
    elif what == "symlink":
        files["prog/lib.fasm"] = b"<symlink:../outside/secret.fasm>"
        target = "lib.fasm"
    elif what == "folder":
        files["prog/sub/keep"] = b""
        target = "sub"
    elif what == "nul":
        target = "a\x00b"
    else:
        target = what
    files["prog/p.fasm"] = (f'include "{target}"\n' + SMALL).encode()
    return Case("exhaust", f"special:{what.strip('/').replace('/', '-')}",
                _program_argv(rng, "prog/p.fasm"), files, 2, "program")


def huge_numbers(rng) -> Case:
    what = _pick(rng, ["digits", "parens", "operators", "underscore", "depth", "sweep", "shape",
                       "fanout-list"])
    if what == "digits":
        n = int(rng.integers(31, 20_000))
        text = f"tensor x : f32[{'9' * n}] input\n" + SMALL
        return Case("exhaust", "numbers:digits", _program_argv(rng), {"p.fasm": text.encode()},
                    2, "program")
    if what == "parens":
        n = int(rng.integers(70, 4000))
        text = SMALL + "relu y, x, a=" + "(" * n + "1" + ")" * n + "\n"
        return Case("exhaust", "numbers:parens", _program_argv(rng), {"p.fasm": text.encode()},
                    2, "program")
    if what == "operators":
        n = int(rng.integers(70, 3000))
        text = ("extension e(y: f32[N] <- x: f32[N])\n  tensor t : f32[" +
                _pick(rng, ["+", "*", "-"]).join(["N"] * n) + "]\n  relu y, x\nend\n" + SMALL)
        return Case("exhaust", "numbers:operators", _program_argv(rng),
                    {"p.fasm": text.encode()}, 2, "program")
    if what == "underscore":
        text = "tensor x : f32[4_, 4] input\n" + SMALL
        return Case("exhaust", "numbers:underscore", _program_argv(rng),
                    {"p.fasm": text.encode()}, 2, "program")
    if what == "depth":
        d = "9" * int(rng.integers(3, 40))
        return Case("exhaust", "numbers:depth", ["compile", MLP, "--machine", "tiny", "--depth", d],
                    {}, 2, "args")
    if what == "fanout-list":
        f = ",".join(["2"] * int(rng.integers(65, 5000)))
        return Case("exhaust", "numbers:fanout-list", ["compile", MLP, "--machine", "tiny",
                                                        "--fanout", f], {}, 2, "args")
    if what == "sweep":
        hi = int(rng.integers(10_001, 10**15))
        return Case("exhaust", "numbers:sweep", ["sweep", MLP, "--depth", f"1..{hi}", "-o", "r.csv"],
                    {}, 2, "args")
    return Case("exhaust", "numbers:shape", ["import", "m.onnx", "--shape",
                                             f"x={2**63 + int(rng.integers(0, 2**62))},3"],
                {}, 2, "args")


_BOMB: dict[str, bytes] = {}


def _npz_bomb(name: str) -> bytes:
    """An .npz of about 1 MB whose one member is a 1 GiB array of zeros (built once)."""
    if name not in _BOMB:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            with z.open(f"{name}.npy", "w", force_zip64=True) as m:
                np.lib.format.write_array_header_1_0(
                    m, {"descr": "<f4", "fortran_order": False, "shape": (2**28,)})
                chunk = bytes(2**24)
                for _ in range(64):
                    m.write(chunk)
        _BOMB[name] = buf.getvalue()
    return _BOMB[name]


def data_bombs(rng) -> Case:
    what = _pick(rng, ["sparse", "npz-unknown", "npz-sidecar", "npz-member", "device"])
    base = _pick(rng, [["run", "p.fasm", "--reference"], ["run", "p.fasm", "--machine", "tiny"]])
    files = {"p.fasm": open(MLP, "rb").read()}
    if what == "sparse":
        files["x.npy"] = f"<sparse:{int(rng.integers(2**20, 2**33))}>".encode()
        return Case("exhaust", "data:sparse", base + ["--input", "x=x.npy"], files, 2, "data")
    if what == "npz-unknown":
        files["d.npz"] = _npz_bomb("zzz")
        return Case("exhaust", "data:npz-unknown", base + ["--inputs", "d.npz"], files, 2, "data")
    if what == "npz-sidecar":
        files["p.npz"] = _npz_bomb("x")
        return Case("exhaust", "data:npz-sidecar", base, files, 2, "data")
    if what == "npz-member":
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr(_pick(rng, ["x.npy", "x.txt", "dir/x"]), rng.bytes(int(rng.integers(0, 300))))
        files["d.npz"] = buf.getvalue()
        return Case("exhaust", "data:npz-member", base + ["--inputs", "d.npz"], files, 2, "data")
    dev = _pick(rng, ["/dev/zero", "/dev/urandom", "."])
    return Case("exhaust", "data:device", base + ["--input", f"x={dev}"], files, 2, "data")


def folding_bombs(rng) -> Case:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    n = int(rng.integers(2**24, 2**34))
    op = _pick(rng, ["ConstantOfShape", "Expand", "Tile"])
    inits = []
    if op == "ConstantOfShape":
        inits.append(numpy_helper.from_array(np.array([n], np.int64), "s"))
        node = helper.make_node("ConstantOfShape", ["s"], ["c"],
                                value=numpy_helper.from_array(np.array([1.0], np.float32)))
    elif op == "Expand":
        inits += [numpy_helper.from_array(np.array([1.0], np.float32), "v"),
                  numpy_helper.from_array(np.array([n], np.int64), "s")]
        node = helper.make_node("Expand", ["v", "s"], ["c"])
    else:
        inits += [numpy_helper.from_array(np.array([1.0], np.float32), "v"),
                  numpy_helper.from_array(np.array([n], np.int64), "s")]
        node = helper.make_node("Tile", ["v", "s"], ["c"])
    add = helper.make_node("Add", ["c", "x"], ["y"])
    g = helper.make_graph([node, add], "bomb",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return Case("exhaust", f"folding:{op}", ["import", "m.onnx", "-o", "m.fasm"],
                {"m.onnx": model.SerializeToString()}, 2, "any")


def non_finite_machines(rng) -> Case:
    """Machine values whose products overflow to inf (reported as null in strict JSON, or
    refused by the machine file's ranges, as a subnormal frequency is)."""
    from machine import preset
    from tests.strategies import machine_toml
    key, value = _pick(rng, [("memory_pj_per_byte", "1e308"), ("link_pj_per_byte", "1e308"),
                             ("frequency_hz", "1.7e308"), ("frequency_hz", "5e-324"),
                             ("mac_pj_per_op", "1e308"), ("memory_pj_per_byte", "1e-320")])
    text = machine_toml(preset("tiny"))
    lines = text.splitlines()
    hits = [i for i, line in enumerate(lines) if line.strip().startswith(key + " ")]
    if hits:
        i = _pick(rng, hits)
        lines[i] = f"{key} = {value}"
    argv = _pick(rng, [["run", MLP, "--machine", "m.toml", "--timing-only", "--json"],
                       ["compare", MLP, MLP, "--machine", "m.toml", "--json"],
                       ["compile", MLP, "--machine", "m.toml", "--json"]])
    return Case("exhaust", f"non-finite:{key}", argv, {"m.toml": "\n".join(lines).encode()},
                None, "machine")


GENERATORS = {"long-lines": long_lines, "deep-include": deep_includes,
              "diamond-include": diamond_includes, "chained-extensions": chained_extensions,
              "many-extensions": many_extensions, "special": special_files,
              "numbers": huge_numbers, "data": data_bombs, "folding": folding_bombs,
              "non-finite": non_finite_machines}


def exhaust_case(rng) -> Case:
    return GENERATORS[_pick(rng, sorted(GENERATORS))](rng)


# ---------------------------------------------------------------- running under the contract

def write_files(case: Case, directory: Path):
    for rel, data in case.files.items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if data == b"<fifo>":
            os.mkfifo(path)
        elif data.startswith(b"<symlink:"):
            os.symlink(data[len(b"<symlink:"):-1].decode(), path)
        elif data.startswith(b"<sparse:"):
            with open(path, "wb") as f:
                np.lib.format.write_array_header_1_0(
                    f, {"descr": "<f4", "fortran_order": False, "shape": (2**29,)})
                f.truncate(f.tell() + int(data[len(b"<sparse:"):-1]))
        else:
            path.write_bytes(data)


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def run_contract(case: Case, directory: Path, seconds: int = CONTRACT_SECONDS) -> tuple[Outcome, int]:
    """Run the case in a forked child (in process there: `fractal.cli.main`) and return its
    outcome and the peak memory it added, in bytes. A child past the time gets status -1."""
    directory.mkdir(parents=True, exist_ok=True)
    write_files(case, directory)
    read, write = os.pipe()
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:                                    # the child: run, report, exit at once
        try:
            os.close(read)
            try:
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")                    # peak RSS starts again from now
            except OSError:
                pass
            base = _status_kb("VmRSS")
            status, out, err = _in_process(case.argv, directory, seconds)
            peak = max(0, _status_kb("VmHWM") - base) * 1024
            payload = json.dumps({"status": status, "out": out[-200_000:], "err": err[-200_000:],
                                  "peak": peak}).encode()
            with os.fdopen(write, "wb") as f:
                f.write(payload)
        finally:
            os._exit(0)
    os.close(write)
    chunks = []
    with os.fdopen(read, "rb") as f:
        while True:
            block = f.read(1 << 16)
            if not block:
                break
            chunks.append(block)
    _, wstatus, usage = os.wait4(pid, 0)
    elapsed = time.perf_counter() - start
    try:
        r = json.loads(b"".join(chunks).decode())
    except ValueError:                              # killed before it reported
        sig = os.WTERMSIG(wstatus) if os.WIFSIGNALED(wstatus) else 0
        return Outcome(-2, "", f"the child ended without a report (signal {sig})", elapsed), 0
    return Outcome(r["status"], r["out"], r["err"], elapsed), r["peak"]


def strict_json_problem(argv, status: int, stdout: str) -> str | None:
    if status != 0 or "--json" not in argv:
        return None

    def refuse(token):
        raise ValueError(token)
    try:
        json.loads(stdout, parse_constant=refuse)
    except ValueError as e:
        return f"not strict JSON: {str(e)[:100]}"
    return None


def contract_problems(case: Case, outcome: Outcome, peak: int) -> list[str]:
    problems = []
    if outcome.seconds > CONTRACT_SECONDS:
        problems.append(f"contract: {outcome.seconds:.1f} s, over {CONTRACT_SECONDS} s")
    if peak > CONTRACT_BYTES:
        problems.append(f"contract: {peak / 2**20:,.0f} MiB of memory, over "
                        f"{CONTRACT_BYTES / 2**20:,.0f} MiB")
    if outcome.status == -2:
        problems.append(f"contract: {outcome.stderr}")
    text = outcome.stdout + outcome.stderr
    for s in SECRETS:
        if s in text:
            problems.append(f"output holds '{s}', from a file outside the include rules")
    bad = strict_json_problem(case.argv, outcome.status, outcome.stdout)
    if bad:
        problems.append(bad)
    return problems
