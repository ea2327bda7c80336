"""`fractal import`: an ONNX model as a fractal program, with its params in an .npz beside it."""
from __future__ import annotations

import argparse
import zipfile
from pathlib import Path

from isa.checker import parse_program
from isa.errors import UserError


def input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """NAME=D0,D1,... (the name may itself hold '='; the dimensions follow the last one)."""
    name, eq, dims = text.rpartition("=")
    try:
        shape = tuple(int(d) for d in dims.split(","))
    except ValueError:
        shape = ()
    if not eq or not name or not shape or min(shape) < 1:
        raise argparse.ArgumentTypeError(f"expected NAME=D0,D1,... with every size at least 1, "
                                         f"got {text!r}")
    if max(shape) >= 2**63:                 # an ONNX dimension is a signed 64-bit integer
        raise argparse.ArgumentTypeError(f"every size must be below 2**63, got {text!r}")
    return name, shape


def register(sub):
    p = sub.add_parser("import", help="translate an ONNX model into a fractal program (.fasm) "
                                      "and its params (.npz beside it)")
    p.add_argument("model", metavar="MODEL.onnx")
    p.add_argument("-o", "--output", metavar="FILE.fasm",
                   help="program to write (default: MODEL.fasm beside the model); its params "
                        "go to FILE.npz, which `fractal run FILE.fasm` loads by itself")
    p.add_argument("--shape", type=input_shape, action="append", default=[],
                   metavar="NAME=D0,D1,...",
                   help="fix the shape of a graph input with dynamic sizes (repeatable)")
    p.set_defaults(handler=run)


def write_npz(path: Path, arrays: dict):
    """An .npz archive as np.savez writes it, for any array names (np.savez(f, **arrays) would
    take names such as 'file' or 'allow_pickle' as its own arguments)."""
    import numpy as np          # lazy: ~0.15 s, and every `fractal` start loads this module
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asarray(array), allow_pickle=False)


def run(args, out) -> int:
    from fractal.onnx_import import import_model  # lazy: onnx takes ~1 s to import
    program = Path(args.output) if args.output else Path(args.model).with_suffix(".fasm")
    data = program.with_suffix(".npz")
    if program.suffix == ".npz" or program.resolve() == Path(args.model).resolve():
        raise UserError(f"the program cannot be written to {program}: it would overwrite the "
                        f"model or its param data", "--output", hint="name a .fasm file")
    if not program.parent.is_dir():
        raise UserError(f"cannot write {program}: no folder {program.parent}", "--output",
                        hint="create the folder first")
    text, params = import_model(args.model, dict(args.shape))
    try:
        program.write_text(text)
        write_npz(data, params)
    except OSError as e:
        raise UserError(f"cannot write {e.filename or program}: {e.strerror or e}",
                        "--output") from None
    checked = parse_program(text, str(program))
    print(f"{program}: {len(checked.tensors)} tensors, {len(checked.instructions)} instructions",
          file=out)
    print(f"{data}: {len(params)} params, {sum(a.nbytes for a in params.values()):,} bytes",
          file=out)
    return 0
