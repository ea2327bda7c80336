"""ONNX models as fractal programs.

`import_model(path or ModelProto)` returns the program text and its param arrays (one per
`param` tensor, for the .npz that `fractal run` loads beside the program). Shapes must be static;
every op is mapped exactly to core instructions or reported as unsupported, naming the node.
See docs/onnx.md.
"""
from fractal.onnx_import.builder import identifier
from fractal.onnx_import.convert import import_model
from fractal.onnx_import.ops import CONVERTERS          # filled by ops, ops_index and ops_norm

__all__ = ["import_model", "identifier", "SUPPORTED_OPS"]

#: the ONNX op types the importer converts (besides any node of constants, which it folds)
SUPPORTED_OPS = tuple(sorted(CONVERTERS))
