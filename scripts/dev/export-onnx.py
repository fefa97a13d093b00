#!/usr/bin/env python3
"""Exports the BERT encoder of a sentence-transformers model directory (all-MiniLM-L6-v2) to
ONNX, for the engine comparison of tools/embed-bench (results in docs/retrieval.md).

A developer step, not used by the product, which loads only model.safetensors. The graph takes
input_ids, attention_mask and token_type_ids (int64, [batch, sequence], both axes dynamic) and
returns last_hidden_state ([batch, sequence, hidden], float32); pooling (masked mean, L2
normalisation) is left to the caller, as in quire-models. Attention is exported in its plain
("eager") form so that every ONNX engine can load it.

Needs torch, transformers and onnx (`pip install torch transformers onnx`). Writes outside the
repository:

    python3 scripts/dev/export-onnx.py ~/.cache/quire-models/all-MiniLM-L6-v2 /tmp/onnx-minilm/model.onnx
"""

import argparse
import os

import torch
from transformers import AutoModel


class Encoder(torch.nn.Module):
    """The BERT encoder with a plain tensor output (no pooler, no output dataclass).

    By default the padding mask is turned into the additive attention bias here (0 for real
    tokens, the float minimum for padding, as transformers' eager attention expects), and the
    embeddings and layers are called directly. transformers' own mask builder (`stock_mask`)
    traces into index arithmetic over batch × sequence that tract cannot type with symbolic
    axes ("Can not compute a shape with square of symbols" at /bert/Flatten); both graphs
    compute the same thing.
    """

    def __init__(self, bert: torch.nn.Module, stock_mask: bool = False) -> None:
        super().__init__()
        self.bert = bert
        self.stock_mask = stock_mask

    def forward(self, input_ids, attention_mask, token_type_ids):
        if self.stock_mask:
            return self.bert(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=token_type_ids,
            ).last_hidden_state
        hidden = self.bert.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
        padding = 1.0 - attention_mask[:, None, None, :].to(hidden.dtype)
        bias = padding * torch.finfo(hidden.dtype).min
        return self.bert.encoder(hidden, attention_mask=bias).last_hidden_state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", help="directory with config.json and model.safetensors")
    parser.add_argument("output", help="the .onnx file to write (outside the repository)")
    parser.add_argument("--opset", type=int, default=17)
    parser.add_argument(
        "--stock-mask",
        action="store_true",
        help="let transformers build the attention mask (a graph tract cannot load)",
    )
    args = parser.parse_args()

    bert = AutoModel.from_pretrained(
        args.model_dir, attn_implementation="eager", add_pooling_layer=False
    )
    model = Encoder(bert, args.stock_mask).eval()

    # A sample with padding, so the traced graph keeps the mask's path.
    ids = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]], dtype=torch.int64)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]], dtype=torch.int64)
    types = torch.zeros_like(ids)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {name: {0: "batch", 1: "sequence"} for name in names}
    axes["last_hidden_state"] = {0: "batch", 1: "sequence"}

    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with torch.no_grad():
        expected = model(ids, mask, types)
        # The TorchScript exporter: dynamic axes by name, one self-contained file.
        torch.onnx.export(
            model,
            (ids, mask, types),
            args.output,
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=args.opset,
            do_constant_folding=True,
            dynamo=False,
        )

    import onnx

    graph = onnx.load(args.output)
    onnx.checker.check_model(graph)
    check(model, args.output)
    print(
        f"wrote {args.output}: opset {args.opset}, {os.path.getsize(args.output) / 1e6:.1f} MB, "
        f"{len(graph.graph.node)} nodes, torch {torch.__version__}; "
        f"sample output {tuple(expected.shape)}"
    )


def check(model: torch.nn.Module, path: str) -> None:
    """Runs the file on another batch and length than the traced sample, with padding, and
    compares it with torch where onnxruntime is installed: the axes must really be dynamic."""
    try:
        import onnxruntime
    except ImportError:
        print("onnxruntime not installed: the exported graph was not run")
        return
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 30000, (3, 37), generator=generator)
    mask = torch.ones_like(ids)
    for row, length in enumerate([37, 20, 5]):
        mask[row, length:] = 0
        ids[row, length:] = 0
    types = torch.zeros_like(ids)
    with torch.no_grad():
        expected = model(ids, mask, types)
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    (actual,) = session.run(
        None,
        {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), "token_type_ids": types.numpy()},
    )
    real = mask.bool()
    diff = (torch.from_numpy(actual) - expected)[real].abs().max().item()
    print(f"onnxruntime {onnxruntime.__version__} vs torch, batch 3 x 37 with padding: max |diff| {diff:.2e}")
    if diff > 1e-3:
        raise SystemExit("the exported graph does not reproduce the model")


if __name__ == "__main__":
    main()
