"""Import real PyTorch exports of Hugging Face BERT and GPT-2 and compare with onnxruntime.

    pip install -e ".[export]"              # torch, transformers, onnxscript
    python3 scripts/onnx_export_check.py [--machine tiny]

Small BERT and GPT-2 models with random weights (built from a config: nothing is downloaded) are
exported by PyTorch's TorchScript exporter at opsets 14 (LayerNorm decomposed) and 17
(LayerNormalization), and by its dynamo exporter at opset 18, with dynamic batch and sequence
axes. Each is imported with `--shape` sizes fixed, run on the reference interpreter (and on a
machine when one is named) with token ids and a padding mask, and compared with onnxruntime
within the f32 tolerance of the tests. Prints one row per model; exits 1 if any fails.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BATCH, SEQ, VOCAB = 2, 8, 50


def models():
    import torch
    from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    bert = BertModel(BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                                num_attention_heads=4, intermediate_size=64,
                                max_position_embeddings=32, attn_implementation="eager")).eval()
    gpt = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4,
                                     n_positions=32, bos_token_id=0, eos_token_id=0,
                                     attn_implementation="eager", use_cache=False)).eval()

    class Bert(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = bert

        def forward(self, input_ids, attention_mask):
            out = self.m(input_ids=input_ids, attention_mask=attention_mask)
            return out.last_hidden_state, out.pooler_output

    class Gpt(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = gpt

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask,
                          use_cache=False).logits
    return {"bert": (Bert().eval(), ["last_hidden_state", "pooler_output"]),
            "gpt2": (Gpt().eval(), ["logits"])}


def export(module, outputs, path: Path, dynamo: bool, opset: int):
    import torch
    ids = torch.zeros((BATCH, SEQ), dtype=torch.long)
    mask = torch.ones((BATCH, SEQ), dtype=torch.long)
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    kw = dict(dynamic_shapes=({0: "batch", 1: "seq"}, {0: "batch", 1: "seq"})) if dynamo else \
        dict(dynamic_axes=axes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (ids, mask), str(path), input_names=list(axes),
                          output_names=outputs, opset_version=opset, dynamo=dynamo, **kw)


def check(path: Path, machine: str | None) -> tuple[bool, str]:
    import onnx
    import onnxruntime

    from fractal import api
    from fractal.onnx_import import import_model
    from isa.errors import UserError
    from tests.strategies import close_to_reference
    rng = np.random.default_rng(1)
    feeds = {"input_ids": rng.integers(0, VOCAB, (BATCH, SEQ)).astype(np.int64),
             "attention_mask": np.ones((BATCH, SEQ), np.int64)}
    feeds["attention_mask"][1, -3:] = 0                          # a padded second sequence
    model = onnx.load(str(path))
    try:
        text, params = import_model(model, {k: v.shape for k, v in feeds.items()})
    except UserError as e:
        return False, e.format().splitlines()[0]
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    runs = {"reference": api.reference(text, inputs={**feeds, **params}).outputs}
    if machine:
        runs[machine] = api.run(text, api.build_machine(machine),
                                inputs={**feeds, **params}).outputs
    worst, ok = 0.0, True
    for outputs in runs.values():
        for name, value in want.items():
            got = outputs[name]
            ok &= bool(close_to_reference(got, value).all())
            worst = max(worst, float(np.abs(got.astype(np.float64) - value).max()))
    ops = len({line.split()[0] for line in text.splitlines()
               if line and not line.startswith(("#", "tensor"))})
    return ok, (f"{len(model.graph.node)} nodes -> {text.count(chr(10))} lines, {ops} opcodes; "
                f"largest difference {worst:.2g} ({', '.join(runs)})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--machine", help="also run on this machine (a preset or a file)")
    args = ap.parse_args(argv)
    failed = 0
    with tempfile.TemporaryDirectory() as d:
        for name, (module, outputs) in models().items():
            for dynamo, opset in ((False, 14), (False, 17), (True, 18)):
                exporter = "dynamo" if dynamo else "torchscript"
                path = Path(d) / f"{name}_{exporter}_{opset}.onnx"
                export(module, outputs, path, dynamo, opset)
                ok, detail = check(path, args.machine)
                failed += not ok
                print(f"{name:5} {exporter:11} opset {opset}: {'ok  ' if ok else 'FAIL'} {detail}",
                      flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
