"""What a leaf's compute units take for a task: the one rate the simulator runs and the
compiler's cost model estimates with.

Each (op class, ops) of the task runs at its class's rate (for MACs, the rate of the task's data
type when the machine gives one), scaled by how much of the unit the task's tile fills:

- **MAC array** (`mac_array = [rows, columns]`): DianNao-family and NVDLA-style arrays reduce
  along the rows and produce outputs along the columns, one tile of rows x columns
  multiply-accumulates per cycle, and iterate everything else (the output rows, pixels and
  kernel taps) in time. A matmul `C[M,N] = A[M,K] B[K,N]` (and `eucdist`) puts K on the rows and
  N on the columns (a batched matmul, each batch element in turn: its batch counts like M); a
  conv2d puts the input channels C on the rows and the output channels O on the columns. A dimension smaller than the array, or a remainder, wastes the rest:

      cycles = ops / (2 x rows x columns) x (ceil(K / rows) rows / K) x (ceil(N / columns) columns / N)
             = M x ceil(K / rows) x ceil(N / columns) for a matmul (one MAC = two ops)

  plus `array_fill_cycles` once per instruction (a systolic array's fill and drain). SCALE-Sim's
  analytical compute cycles for a weight-stationary array (Samajdar et al., ISPASS 2020) fold
  the operands the same way, ceil(K / rows) x ceil(N / columns) folds.
- **Vector units** (`vector_width`): the element-wise and compare units process the innermost
  dimension of the task's largest operand in rows of `vector_width` lanes; a row shorter than
  the lanes, or a remainder, wastes the rest: `ops x ceil(W / lanes) lanes / W / rate`.

An extension's body runs at the flat class rates: the body's instructions are not shaped here.
"""
from __future__ import annotations


from compiler.rules import Task, ceil_cycles, ceil_div
from isa.opcodes import OpClass

__all__ = ["leaf_cycles", "fill_fraction"]

#: per MAC opcode, which dimensions lie on the array: (operand, dim) of the rows (the
#: reduction) and of the columns (the outputs), operands counted destinations first
_ARRAY_DIMS = {
    "matmul": ((1, -1), (0, -1)),       # K of A[..., M, K]; N of C[..., M, N]
    "eucdist": ((1, 1), (0, 1)),        # K of X[M,K]; N of D[M,N]
    "conv2d": ((1, 1), (0, 1)),         # C of X[N,C,H,W]; O of Y[N,O,Ho,Wo]
}


def _filled(n: int, lanes: int) -> float:
    """The fraction of `lanes` that n elements fill, over ceil(n / lanes) passes."""
    return n / (ceil_div(n, lanes) * lanes) if n else 1.0


def fill_fraction(task: Task, op_class: str, compute) -> float:
    """How much of the unit of `op_class` a leaf running this task keeps busy (1: all of it)."""
    if task.ext:
        return 1.0
    if op_class == OpClass.MAC and compute.mac_array and task.opcode in _ARRAY_DIMS:
        (ri, rd), (ci, cd) = _ARRAY_DIMS[task.opcode]
        rows, cols = compute.mac_array
        return (_filled(task.types[ri].shape[rd], rows) * _filled(task.types[ci].shape[cd], cols))
    if op_class in (OpClass.ELEMENTWISE, OpClass.COMPARE) and compute.vector_width:
        widest = max(task.types, key=lambda t: t.size)
        return _filled(widest.shape[-1] if widest.rank else 1, compute.vector_width)
    return 1.0


def leaf_cycles(task: Task, compute) -> int:
    """Cycles a leaf's compute units take for a task (data movement excluded)."""
    dtype = task.inputs[0].dtype if task.inputs else task.outputs[0].dtype
    cycles = 0
    for op_class, ops in task.work:
        if op_class == OpClass.MOVE or not ops:
            continue
        rate = compute.ops_per_cycle(op_class, dtype) * fill_fraction(task, op_class, compute)
        cycles += ceil_cycles(ops / rate)
        if op_class == OpClass.MAC and compute.mac_array:
            cycles += compute.array_fill_cycles
    return cycles
