#!/usr/bin/env python3
"""Writes the reference that the local embedder's pooling, normalisation and prompts are
tested against: sentence-transformers' own vectors for tiny random BERT models in several
sentence-transformers configurations (CLS, mean, max, mean/sqrt(len), weighted mean, last
token, a concatenation; prompts in and out of the pooling; with and without Normalize;
lower-casing).

A developer tool, not run by the tests (they read its output, committed as
crates/quire-models/tests/data/tiny-sentence-reference.json). The models are the ones the test
`sentence::tests::tiny_models_embed_as_sentence_transformers_does` makes (random weights from
a fixed seed): it writes them into QUIRE_WRITE_TINY_MODELS instead of comparing. Needs
`pip install sentence-transformers` (with PyTorch):

    QUIRE_WRITE_TINY_MODELS=/tmp/tiny cargo test -p quire-models --lib tiny_models_embed
    python3 scripts/dev/tiny-model-references.py /tmp/tiny > crates/quire-models/tests/data/tiny-sentence-reference.json
"""

import json
import os
import sys

from sentence_transformers import SentenceTransformer

TEXTS = [
    "pumps prime valves",
    "seal",
    "Pumps Prime The Seal",
    "valves valves valves pumps",
    "unknown words here",
]


def prompt_name(saved, names):
    """The first of `names` the model's saved configuration has a prompt for, else None (the
    default prompt, if it names one).

    Read from the saved file rather than `model.prompts`: sentence-transformers 6 adds empty
    `query` and `document` prompts of its own, so its `encode_document` would pick the empty
    `document` prompt over a model's `passage` prompt (E5's, for one). Quire follows the
    model's own file, as its authors intend; the vectors compared are `encode` with that
    prompt named explicitly.
    """
    for name in names:
        if name in saved:
            return name
    return None


def main():
    root = sys.argv[1]
    reference = {}
    for name in sorted(os.listdir(root)):
        directory = os.path.join(root, name)
        model = SentenceTransformer(directory, device="cpu")
        with open(os.path.join(directory, "config_sentence_transformers.json")) as f:
            saved = json.load(f).get("prompts") or {}
        query = prompt_name(saved, ["query"])
        document = prompt_name(saved, ["document", "passage", "corpus"])
        reference[name] = {
            "query_prompt": query,
            "document_prompt": document,
            "cases": [
                {
                    "text": text,
                    "query": model.encode(text, prompt_name=query).tolist(),
                    "document": model.encode(text, prompt_name=document).tolist(),
                }
                for text in TEXTS
            ],
        }
    json.dump(reference, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
