"""Host resource limits of a program: what the tool agrees to compute before it starts.

A program that would exhaust the host's memory or run for hours is refused up front with a
located `UserError` that names the limit and the environment variable that raises it:

    FRACTAL_MAX_DATA_BYTES   host memory for a run on data (functional
                             simulation or the reference interpreter)     (default 4 GiB)
    FRACTAL_MAX_HOST_OPS     arithmetic ops such a run computes on the
                             host                                         (default 10**12)
    FRACTAL_MAX_PIECES       serial pieces one node's task may be cut
                             into, and pieces a simulation steps through
                             (symmetric mode: once per distinct node
                             task; exact mode: at every node)             (default 10**6)

Timing-only simulation computes no data, so the first two do not apply to it. The limits on the
size of a machine (depth, fan-out, leaves) live with the machine description
(`machine/limits.py`).
"""
from __future__ import annotations


from isa.checker import opcode_table
from isa.errors import UserError, env_limit
from isa.extensions import leaf_pieces
from isa.opcodes import instruction_ops, pads

__all__ = ["LIMITS", "limit", "check_data_run", "check_plan_pieces", "check_sim_pieces"]

#: name -> (environment variable, default, what it bounds)
LIMITS = {
    "data_bytes": ("FRACTAL_MAX_DATA_BYTES", 4 * 2**30, "host memory of a run on data"),
    "host_ops": ("FRACTAL_MAX_HOST_OPS", 10**12, "ops a run on data computes on the host"),
    "pieces": ("FRACTAL_MAX_PIECES", 10**6, "serial pieces of one node's task or of a simulation"),
}


def limit(name: str) -> int:
    """The limit in force: its environment variable when set, else the default."""
    var, default, _ = LIMITS[name]
    return env_limit(var, default)


def _over(name: str, what: str, value: int, where, hint: str | None = None,
          unit: str = "") -> UserError:
    var, _, bounds = LIMITS[name]
    return UserError(f"{what} {value:,}{unit}, over the limit of {limit(name):,}{unit} ({bounds}; "
                     f"set {var} to raise it)", where, hint=hint)


def check_data_run(program, opcodes: dict | None = None) -> None:
    """Refuse a run on data (reference or functional) that would need more host memory or
    compute than the limits allow. Memory: every tensor, plus the largest scratch space one
    instruction may need (float64 copies of its operands, padded windows, the temporaries of an
    extension's body)."""
    if opcodes is None:
        opcodes = opcode_table(program)
    types = program.types
    tensors = sum(t.type.nbytes for t in program.tensors)
    biggest = max(program.tensors, key=lambda t: t.type.nbytes, default=None)
    scratch, at, ops, costly, most = 0, None, 0, None, -1
    for ins in program.instructions:
        spec = opcodes[ins.opcode]
        elems = sum(types[n].size for n in ins.operands)
        attrs = spec.full_attrs(ins.attr)
        if "pad" in attrs and types[ins.operands[1]].rank == 4:
            n, c, h, w = types[ins.operands[1]].shape
            t, l, b, r = pads(attrs)
            elems += 2 * n * c * (h + t + b) * (w + l + r)
        if spec.decl is not None:       # an extension's body also holds its temporaries
            elems += _temp_elements(spec, [types[n] for n in ins.operands], attrs)
        if 16 * elems > scratch:
            scratch, at = 16 * elems, ins
        n_ops = instruction_ops(ins, types, opcodes)
        ops += n_ops
        if n_ops > most:
            costly, most = ins, n_ops
    hint = "--timing-only simulates timing and energy without computing data"
    if tensors + scratch > limit("data_bytes"):
        culprit = biggest if biggest is not None and biggest.type.nbytes >= scratch else at
        raise _over("data_bytes", "a run on data needs about", tensors + scratch,
                    _located(program, culprit), hint, " bytes")
    if ops > limit("host_ops"):
        raise _over("host_ops", "a run on data computes", ops, _located(program, costly), hint,
                    " ops")


def _temp_elements(spec, types, attrs) -> int:
    """Elements of the temporaries of an extension's body on its largest piece (nested
    extensions' own temporaries included), as a run on data allocates them."""
    n_out, most = spec.outputs, 0
    for piece, _ in leaf_pieces(spec.decl, tuple(types), distinct=True):
        body = spec.body(piece[:n_out], piece[n_out:], attrs)
        ptypes = body.types
        elems = sum(t.type.size for t in body.tensors if t.role is None)
        for ins in body.instructions:
            sub = spec.table[ins.opcode]
            if sub.decl is not None:
                elems += _temp_elements(sub, [ptypes[n] for n in ins.operands], sub.full_attrs(ins.attr))
        most = max(most, elems)
    return most


def _located(program, item):
    """The source location of a declaration or instruction (the file when it has none)."""
    return getattr(item, "loc", None) or program.file


def check_sim_pieces(pieces_per_instruction, program) -> None:
    """Refuse a simulation that would step through too many serial pieces (it would run for
    hours); `pieces_per_instruction` holds one count per program instruction, in order."""
    counts = list(pieces_per_instruction)
    total = sum(counts)
    if total > limit("pieces"):
        worst = program.instructions[max(range(len(counts)), key=counts.__getitem__)]
        raise _over("pieces", "the simulation would step through", total,
                    _located(program, worst),
                    "smaller tensors, or a machine with larger memories, need fewer pieces",
                    " serial pieces")


def check_plan_pieces(pieces: int, where, source_line: str | None = None) -> None:
    """Refuse a node plan that cuts its task into more serial pieces than the limit (the plan
    and its simulation grow with the pieces)."""
    if pieces > limit("pieces"):
        e = _over("pieces", "fitting this instruction into the children's memories takes", pieces,
                  where, "smaller tensors, or a machine with larger memories, need fewer pieces",
                  " serial pieces at one node")
        e.source_line = source_line
        raise e
