#!/usr/bin/env python3
"""Writes the reference that Quire's local embedder is tested against: token ids and
sentence-transformers embeddings of a fixed set of sentences, for all-MiniLM-L6-v2.

A developer tool, not run by the tests (they read its output, committed as
crates/quire-models/tests/data/minilm-reference.json). Needs `pip install
sentence-transformers` and the model directory (see DEVELOPERS.md):

    python3 scripts/dev/reference-embeddings.py MODEL_DIR > crates/quire-models/tests/data/minilm-reference.json
"""

import json
import sys

from sentence_transformers import SentenceTransformer

SENTENCES = [
    "The pump must be primed before it is started.",
    "Replace the mechanical seal every two years.",
    "What are the side effects of metformin?",
    "Vitamin D supplementation reduces the risk of fractures in elderly women.",
    "0-dimensional biomaterials show inductive properties.",
    "ALDH1 expression is associated with poorer prognosis for breast cancer primary tumors.",
    "A deficiency of vitamin B12 increases blood levels of homocysteine.",
    "Hello, world!",
    "hello world",
    "HELLO WORLD",
    "Café, naïve, résumé, Zürich, São Paulo.",
    "Привет, как дела?",
    "日本語のテキストも埋め込みます。",
    "Emoji 🙂 and symbols: ©®™ ±×÷ → ∞",
    "Numbers: 3.14159, 1,000,000 and 42%.",
    "e-mail: someone@example.com, URL: https://example.org/path?q=1&r=2",
    "C++ and Rust's borrow checker; Python's GIL.",
    "Row 1, Cell 1 | Row 1, Cell 2",
    "Team: Boston; Wins: 57",
    "a",
    " ",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "The quick brown fox jumps over the lazy dog. " * 3,
    # Longer than the model's 256-token window: the end is cut off.
    " ".join(f"Sentence number {i} talks about turbines, pumps and valves." for i in range(60)),
]


def main() -> None:
    model_dir = sys.argv[1]
    model = SentenceTransformer(model_dir, device="cpu")
    tokenizer = model.tokenizer
    vectors = model.encode(SENTENCES, normalize_embeddings=True, batch_size=8)
    out = {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "max_seq_length": model.max_seq_length,
        "normalized": True,
        "cases": [
            {
                "text": text,
                "token_ids": tokenizer(text, truncation=True, max_length=model.max_seq_length)["input_ids"],
                "embedding": [round(float(x), 6) for x in vector],
            }
            for text, vector in zip(SENTENCES, vectors)
        ],
    }
    json.dump(out, sys.stdout, ensure_ascii=False, indent=0)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
