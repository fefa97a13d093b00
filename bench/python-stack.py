#!/usr/bin/env python3
"""The Python stack a user would pick instead of Quire, on a BEIR corpus: sentence-transformers
(all-MiniLM-L6-v2) embeddings in Chroma, BM25 from bm25s, fused by reciprocal rank (k = 60).

Ingest is what `quire bench ingest` measures for Quire: from the corpus in memory to every
document searchable (embedded and stored in a persistent Chroma collection, BM25 index built).
Each document is embedded whole, as such a stack usually does, so sentence-transformers cuts it
at the model's 256-token window. Then every judged query is asked: nDCG@10 of the hybrid
ranking, and the median latency of one query (embedding, both searches, fusion).

Not part of CI. Needs `pip install sentence-transformers chromadb bm25s` and the model directory
(`scripts/fetch-model`). Prints one JSON object. `bench/side-by-side` runs it beside Quire.

    python3 bench/python-stack.py CORPUS.jsonl QUERIES.jsonl QRELS.tsv MODEL_DIR
"""

import json
import math
import statistics
import sys
import tempfile
import time

import bm25s
import chromadb
from sentence_transformers import SentenceTransformer

RRF_K = 60
CANDIDATES = 100


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def read_qrels(path):
    judged = {}
    with open(path) as f:
        for number, line in enumerate(f):
            fields = line.rstrip("\n").split("\t")
            if number == 0 and fields[0] == "query-id":
                continue
            query, document, grade = fields
            if int(grade) > 0:
                judged.setdefault(query, {})[document] = int(grade)
    return judged


def ndcg_at_10(ranked, judged):
    dcg = sum(judged.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted(judged.values(), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def main():
    corpus_path, queries_path, qrels_path, model_dir = sys.argv[1:5]
    corpus = read_jsonl(corpus_path)
    ids = [d["_id"] for d in corpus]
    # The text Quire indexes for a BEIR document: its title as a heading, then the text.
    texts = [f"# {d.get('title', '')}\n\n{d.get('text', '')}" for d in corpus]
    model = SentenceTransformer(model_dir, device="cpu")
    scratch = tempfile.mkdtemp(prefix="python-stack-")

    started = time.perf_counter()
    vectors = model.encode(texts, batch_size=32, normalize_embeddings=True)
    embedded = time.perf_counter()
    client = chromadb.PersistentClient(path=scratch)
    collection = client.create_collection("corpus", metadata={"hnsw:space": "cosine"})
    for start in range(0, len(ids), 5000):
        collection.add(
            ids=ids[start : start + 5000],
            embeddings=vectors[start : start + 5000].tolist(),
        )
    stored = time.perf_counter()
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    finished = time.perf_counter()

    judged = read_qrels(qrels_path)
    queries = [q for q in read_jsonl(queries_path) if q["_id"] in judged]
    scores, latencies = [], []
    for query in queries:
        asked = time.perf_counter()
        vector = model.encode([query["text"]], normalize_embeddings=True)
        by_meaning = collection.query(query_embeddings=vector.tolist(), n_results=CANDIDATES)["ids"][0]
        hits, _ = retriever.retrieve(
            bm25s.tokenize([query["text"]], stopwords="en", show_progress=False),
            k=CANDIDATES,
            show_progress=False,
        )
        by_words = [ids[i] for i in hits[0]]
        fused = {}
        for ranking in (by_meaning, by_words):
            for rank, document in enumerate(ranking):
                fused[document] = fused.get(document, 0.0) + 1.0 / (RRF_K + rank + 1)
        ranked = sorted(fused, key=fused.get, reverse=True)
        latencies.append(time.perf_counter() - asked)
        scores.append(ndcg_at_10(ranked, judged[query["_id"]]))

    seconds = finished - started
    print(
        json.dumps(
            {
                "documents": len(ids),
                "seconds": round(seconds, 2),
                "documents_per_second": round(len(ids) / seconds, 2),
                "embed_seconds": round(embedded - started, 2),
                "store_seconds": round(stored - embedded, 2),
                "bm25_seconds": round(finished - stored, 2),
                "judged_queries": len(queries),
                "hybrid_ndcg_at_10": round(sum(scores) / len(scores), 4),
                "query_p50_ms": round(1000 * statistics.median(latencies), 2),
            }
        )
    )


if __name__ == "__main__":
    main()
