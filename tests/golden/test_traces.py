"""Exact traces of small instructions on hand-built machines (tests/golden/machines/), each
derived cycle by cycle in its test's docstring from the timing rules of docs/simulator.md:

- a split node decodes once (ID, its level's decode_cycles);
- a transfer (LD or WB) queues for the node's one memory port, holds it for
  ceil(bytes through the port / memory_bandwidth), then waits
  max(0, ceil(busiest child's link bytes / child link_bandwidth) - port cycles) + child link_latency;
- a leaf takes its decode, then RUN = max(ceil(ops / rate of the op class),
  ceil(operand bytes / leaf memory_bandwidth));
- EX spans the slowest child, plus ceil(ops / child lfu_ops_per_cycle) when the children add a
  piece's partial result into the one they keep;
- RD = ceil(reduction ops / the node's lfu_ops_per_cycle), on the node's one LFU;
- a piece takes one of the children's 2 buffering slots (two pieces in flight) before its LD
  and frees it after its last stage; one piece executes at a time.

Every trace is compared whole, as (node, stage, piece, start, end) tuples; zero-length stages
are not recorded. The expected lists are written out literally.
"""
from pathlib import Path

import fractal
from simulator.engine import Engine

MACHINES = Path(__file__).resolve().parent / "machines"


def machine(name):
    return fractal.build_machine(str(MACHINES / f"{name}.toml"))


def trace(plan):
    """Cycles of each instruction and the sorted stage events of an exact, traced run; the
    symmetric mode must give the same cycles."""
    engine = Engine(plan, "exact", trace=True)
    cycles = engine.instruction_cycles()
    assert Engine(plan, "symmetric").instruction_cycles() == cycles
    return cycles, literal((e.node, e.stage, e.piece, e.start, e.end) for e in engine.events
                          if e.value is None)


def literal(events):
    """Events in time order (ties by node, stage and piece)."""
    return sorted(events, key=lambda e: (e[3], e[4], e[0], e[1], e[2]))


OUTER = """\
tensor a : f32[16, 1] input
tensor b : f32[1, 4] input
tensor c : f32[16, 4] output
matmul c, a, b
"""


def test_two_pieces_contend_for_the_root_port():
    """c[16,4] = a[16,1] b[1,4] (an outer product: each piece stores more than it loads) on
    `pipe2`: root port 8 B/cycle, decode 3; two leaves with 8 B/cycle links, latency 10,
    decode 1, 8 mac ops/cycle, 64 B/cycle memories of 256 B (128 B per piece).

    One piece per leaf does not fit: cutting M two ways a leaf would hold a[8,1] 32 B + b 16 B
    + c[8,4] 128 B = 176 B; cutting N two ways, 64 + 8 + 128 = 200 B. With M also cut into 2
    serial pieces either way fits (96 B or 104 B) and moves the same bytes: 48 B down in the
    first piece (the operand both leaves share goes once), 32 B in the second (b does not
    depend on M: the leaves keep it), and 2 x 64 B up per piece. The trace below holds for
    either choice: a leaf's link carries at most 40 B, 5 cycles, under the port's 6 (then 4),
    and its RUN is 2*4*4*1 or 2*8*2*1 = 32 ops either way, its operands 96 B or 104 B.

      ID   root decode                                                 0 ->  3
      LD 0 port 48 B / 8 = 6 (3-9); link <= 6 adds 0; + latency 10       3 -> 19
      LD 1 the second slot: 32 B, queued for the port 3-9, holds it 9-13; + 10   3 -> 23
      EX 0 leaves: decode 1 (19-20); RUN 32 ops / 8 = 4
           (memory <= 104 B / 64 -> 2, less)                           19 -> 24
      WB 0 port 2 x 64 B = 128 B / 8 = 16 (24-40); link 64 / 8 = 8 adds 0; + 10   24 -> 50
      EX 1 loaded at 23, the leaves free at 24: 1 + 4                    24 -> 29
      WB 1 queued for the port 29-40 behind WB 0, holds it 40-56; + 10   29 -> 66
    No reduction axis is cut, so no RD: 66 cycles.
    """
    plan = fractal.compile(OUTER, machine("pipe2"))
    root = plan.roots[0]
    assert (root.pieces, root.busy, root.bytes_down, root.bytes_up) == (2, 2, 80, 256)
    cycles, events = trace(plan)
    assert cycles == [66]
    assert events == literal([
        ("0", "ID", -1, 0, 3),
        ("0", "LD", 0, 3, 19), ("0", "LD", 1, 3, 23),
        ("0", "EX", 0, 19, 24),
        ("0.0", "ID", -1, 19, 20), ("0.1", "ID", -1, 19, 20),
        ("0.0", "RUN", 0, 20, 24), ("0.1", "RUN", 0, 20, 24),
        ("0", "WB", 0, 24, 50),
        ("0", "EX", 1, 24, 29),
        ("0.0", "ID", -1, 24, 25), ("0.1", "ID", -1, 24, 25),
        ("0.0", "RUN", 0, 25, 29), ("0.1", "RUN", 0, 25, 29),
        ("0", "WB", 1, 29, 66),
    ])


SHARED = """\
tensor a : f32[16, 16] input
tensor b : f32[16, 2] param
tensor c : f32[16, 2] output
matmul c, a, b
"""


def test_the_shared_operand_is_broadcast_once_per_piece():
    """c[16,2] = a[16,16] b[16,2] on `bcast`: root port 16 B/cycle, decode 2, broadcast on; two
    leaves with 12 B/cycle links, latency 20, decode 1, 8 mac ops/cycle, 32 B/cycle memories of
    1 KiB (512 B per piece).

    The root cuts M into 2 serial pieces of 2 parallel parts: per piece each leaf receives
    a[4,16] (256 B) and all of b (128 B), and returns c[4,2] (32 B). b is the same for both
    leaves, so it crosses the root's port once: 2 x 256 + 128 = 640 B in the first piece
    (768 B without broadcast); b does not depend on M, so the leaves keep it and the second
    piece loads a's 512 B alone: 1,152 B for the two pieces.

      ID   root decode                                                 0 ->   2
      LD 0 port 640 / 16 = 40 (2-42); link 384 / 12 = 32 adds 0; + 20   2 ->  62
      LD 1 queued for the port 2-42, holds it 42-74 (512 / 16); link 256 / 12 -> 22
           adds 0; + 20                                                  2 ->  94
      EX 0 leaves: decode 1 (62-63); RUN 2*4*2*16 = 256 ops / 8 = 32
           (memory 256 + 128 + 32 = 416 B / 32 = 13, less)            62 ->  95
      WB 0 port 2 x 32 = 64 B / 16 = 4 (95-99); link 32 / 12 -> 3 adds 0; + 20    95 -> 119
      EX 1 loaded at 94, the leaves free at 95: 1 + 32                 95 -> 128
      WB 1 the port is free: 4 + 20                                   128 -> 152
    152 cycles.
    """
    plan = fractal.compile(SHARED, machine("bcast"))
    root = plan.roots[0]
    assert [(s.name, s.pieces, s.ways) for s in root.splits] == [("M", 2, 2), ("N", 1, 1),
                                                                   ("K", 1, 1)]
    assert (root.bytes_down, root.bytes_up) == (640 + 512, 2 * 64)
    cycles, events = trace(plan)
    assert cycles == [152]
    assert events == literal([
        ("0", "ID", -1, 0, 2),
        ("0", "LD", 0, 2, 62), ("0", "LD", 1, 2, 94),
        ("0", "EX", 0, 62, 95),
        ("0.0", "ID", -1, 62, 63), ("0.1", "ID", -1, 62, 63),
        ("0.0", "RUN", 0, 63, 95), ("0.1", "RUN", 0, 63, 95),
        ("0", "WB", 0, 95, 119),
        ("0", "EX", 1, 95, 128),
        ("0.0", "ID", -1, 95, 96), ("0.1", "ID", -1, 95, 96),
        ("0.0", "RUN", 0, 96, 128), ("0.1", "RUN", 0, 96, 128),
        ("0", "WB", 1, 128, 152),
    ])


DOT = """\
tensor a : f32[1, 200] input
tensor b : f32[200, 1] param
tensor c : f32[1, 1] output
matmul c, a, b
"""


def test_kept_partial_results_are_written_back_once():
    """c[1,1] = a[1,200] b[200,1] on `keep`: root port 16 B/cycle, decode 2, LFU 4 ops/cycle;
    two leaves with 16 B/cycle links, latency 6, decode 1, LFU 2 ops/cycle, 16 mac ops/cycle,
    32 B/cycle memories of 512 B (256 B per piece).

    K is the only axis longer than 1. Halved for each of the 2 leaves, 100 values of a and b
    (804 B with c) do not fit 256 B, nor do 50; 25 do (204 B): 4 serial pieces of 2 parallel
    parts of 25. Each leaf keeps its partial c across the 4 pieces, adding each later one into
    it (1 op on its LFU), and writes it back once, after piece 3; the root then adds the two
    leaves' results (1 op on its LFU).

      ID   root decode                                                 0 ->   2
      LD 0 port 2 x (100 + 100) = 400 B / 16 = 25 (2-27);
           link 200 / 16 -> 13 adds 0; + 6                              2 ->  33
      LD 1 queued for the port 2-27, holds it 27-52; + 6                 2 ->  58
      EX 0 leaves: decode 1 (33-34); RUN max(50 ops / 16 -> 4,
           memory 204 B / 32 -> 7) = 7; piece 0 adds nothing and
           stores nothing, so its slot frees at 41                     33 ->  41
      LD 2 takes that slot at 41, queued until LD 1 frees the port at 52,
           holds it 52-77; + 6                                        41 ->  83
      EX 1 loaded at 58: 1 + 7                                        58 ->  66
      AC 1 the leaves add on their LFUs: 1 / 2 -> 1                    66 ->  67
      LD 3 takes piece 1's slot at 67, queued until 77, holds the port
           77-102; + 6                                                67 -> 108
      EX 2 loaded at 83: 1 + 7, AC 1                                  83 ->  92
      EX 3 loaded at 108: 1 + 7, AC 1                                108 -> 117
      WB 3 port 2 x 4 B = 8 / 16 -> 1; link 4 / 16 -> 1 adds 0; + 6   117 -> 124
      RD 3 1 op x (2 ways - 1) / 4 -> 1                               124 -> 125
    125 cycles. Bytes: 4 x 400 = 1,600 down, 8 up; 1 op on the root's LFU and
    3 pieces x 2 leaves x 1 = 6 on the leaves'.
    """
    plan = fractal.compile(DOT, machine("keep"))
    root = plan.roots[0]
    assert [(s.name, s.pieces, s.ways) for s in root.splits] == [("M", 1, 1), ("N", 1, 1),
                                                                   ("K", 4, 2)]
    assert (root.bytes_down, root.bytes_up, root.reduction_ops, root.child_reduction_ops) == (
        1600, 8, 1, 6)
    cycles, events = trace(plan)
    assert cycles == [125]
    leaves = [("0.0", "ID", -1, s, s + 1) for s in (33, 58, 83, 108)] + \
             [("0.0", "RUN", 0, s + 1, s + 8) for s in (33, 58, 83, 108)]
    leaves += [("0.1",) + e[1:] for e in leaves]
    assert events == literal([
        ("0", "ID", -1, 0, 2),
        ("0", "LD", 0, 2, 33), ("0", "LD", 1, 2, 58),
        ("0", "EX", 0, 33, 41),
        ("0", "LD", 2, 41, 83),
        ("0", "EX", 1, 58, 66), ("0", "AC", 1, 66, 67),
        ("0", "LD", 3, 67, 108),
        ("0", "EX", 2, 83, 91), ("0", "AC", 2, 91, 92),
        ("0", "EX", 3, 108, 116), ("0", "AC", 3, 116, 117),
        ("0", "WB", 3, 117, 124),
        ("0", "RD", 3, 124, 125),
    ] + leaves)


SORT = """\
tensor x : f32[1, 96] input
tensor y : f32[1, 96] output
sort y, x
"""


def test_sorted_runs_are_merged_once_at_the_end():
    """y = sort(x[1,96]) on `keep` (as above; the leaves compare 4 values per cycle).

    The row is the only axis longer than 1. Halved for each of the 2 leaves, 48 values of x
    and y (384 B) do not fit 256 B; 24 do (192 B): 2 serial pieces of 2 parallel runs of 24. A
    leaf sorts its run (24 x ceil(log2 24) = 120 compares) and sends it back whole; nothing is
    kept, since the sorted runs must all be merged. After the last piece the root merges the 4
    runs: 96 values x ceil(log2 4) = 192 ops on its LFU, recorded as an RD of piece 2 (the
    piece count).

      ID   root decode                                                 0 ->   2
      LD 0 port 2 x 96 B = 192 / 16 = 12 (2-14); link 96 / 16 = 6
           adds 0; + 6                                                 2 ->  20
      LD 1 just in time: EX 0 (31) outlasts this load (12 + 6 = 18), so it
           starts to end when the leaves are free, 51 - 18 = 33: port
           33-45; + 6                                                  33 ->  51
      EX 0 leaves: decode 1 (20-21); RUN 120 ops / 4 = 30
           (memory 192 B / 32 = 6, less)                               20 ->  51
      WB 0 port 192 B / 16 = 12 (51-63); link 6 adds 0; + 6             51 ->  69
      EX 1 loaded at 51, the leaves free at 51: 1 + 30                   51 ->  82
      WB 1 the port is free since 63: 12 + 6                             82 -> 100
      RD 2 the merge: 192 / 4                                        100 -> 148
    148 cycles.
    """
    plan = fractal.compile(SORT, machine("keep"))
    root = plan.roots[0]
    assert [(s.name, s.pieces, s.ways) for s in root.splits] == [("d0", 1, 1), ("n", 2, 2)]
    assert (root.bytes_down, root.bytes_up, root.reduction_ops, root.reduce) == (
        384, 384, 192, "merge")
    cycles, events = trace(plan)
    assert cycles == [148]
    assert events == literal([
        ("0", "ID", -1, 0, 2),
        ("0", "LD", 0, 2, 20), ("0", "LD", 1, 33, 51),
        ("0", "EX", 0, 20, 51),
        ("0.0", "ID", -1, 20, 21), ("0.1", "ID", -1, 20, 21),
        ("0.0", "RUN", 0, 21, 51), ("0.1", "RUN", 0, 21, 51),
        ("0", "WB", 0, 51, 69),
        ("0", "EX", 1, 51, 82),
        ("0.0", "ID", -1, 51, 52), ("0.1", "ID", -1, 51, 52),
        ("0.0", "RUN", 0, 52, 82), ("0.1", "RUN", 0, 52, 82),
        ("0", "WB", 1, 82, 100),
        ("0", "RD", 2, 100, 148),
    ])
