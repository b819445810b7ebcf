"""The exported RE in the formats the field serves rerankers with, each scoring s = z_true - z_false
(eq. 4) at the position rerag reads, exactly as `RelevanceEstimator.predict` does (up to float32
rounding) for a (query, document) pair whose document is the passage's text:

- `cross_encoder`: sentence-transformers' `CrossEncoder` (>= 5.4) on a decoder-only RE: its
  `Transformer` module (`text-generation`, left padding), then `LogitScore(true_id, false_id)`
  with the ids rerag reads. These files go into the `estimator/` folder itself, so one copy of the
  weights serves rerag, transformers and sentence-transformers. `CrossEncoder(folder,
  activation_fn=torch.nn.Identity()).predict(pairs)` gives s; its default activation, a sigmoid,
  gives sigmoid(s).
- `sequence_classification`: `<Arch>ForSequenceClassification` with one label whose score row is
  the LM head's true row minus its false row (what vLLM's `/rerank` and `/score` and
  `AutoModelForSequenceClassification` read); its logit is s (vLLM returns sigmoid(s) by default).
  A folder of its own (`sequence_classification/`), since the architecture differs.

Both carry one `chat_template.jinja` (`pair_chat_template`): a pair of `query` and `document`
messages renders the RE's prompt (its template inside the base's chat wrapping, the generation
prompt included, since neither sentence-transformers nor vLLM asks for it); any other conversation
renders as the base model's template does, which is what rerag itself reads. The template's
`{title}` is empty (a pair has no title slot) and `{text}` / `{context}` is the document.

A Platt calibration (`rerag calibrate`, per context: P = sigmoid(a s + b)) is folded in: the
CrossEncoder gets a one-weight `Dense` layer after its score, so it returns the calibrated P (a s + b
with the identity activation); the sequence classifier's row is scaled by a (its logit a s; the
offset b has no place there, which the card says). An isotonic calibration cannot be folded: the
formats are refused for it. `rerag calibrate` rewrites the serving folders it finds.

An encoder-decoder (T5) RE reads its first decoder step, which neither format expresses: both are
skipped for it (refused when named). The `rerankers` library's `T5Ranker` reads a T5 RE's folder as
it is (`t5_ranker_arguments`: the label words' token pieces and the template in its `{query}` /
`{text}` form) and returns sigmoid(s), cutting inputs at 512 tokens.

What no server does: rerag cuts the passage to fit the RE's `max_length` and scores windows
(`context_words`); a server scores the whole prompt. Scores agree for prompts within `max_length`
and whole passages.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import torch

from erag.lm import chat_affixes
from rerag.models.calibration import PlattCalibrator
from rerag.models.estimator import RelevanceEstimator

#: The serving formats `rerag export` writes (`--serving`), each a folder name.
SERVING_FORMATS = ("cross_encoder", "sequence_classification")

CHAT_TEMPLATE_FILE = "chat_template.jinja"

# One message's text, whether the caller sends a string (vLLM) or a list of typed parts (sentence-transformers).
_CONTENT = (
    "{%- macro text_of(role) -%}{%- set m = (messages | selectattr('role', 'eq', role) | first) -%}"
    "{%- if m.content is string -%}{{ m.content }}{%- else -%}{{ m.content[0].text }}{%- endif -%}{%- endmacro -%}"
)


def _literal(text: str) -> str:
    """`text` as Jinja that renders it unchanged."""
    return "{% raw %}" + text + "{% endraw %}" if text else ""


_PAIR_BRANCH = "{%- if messages | selectattr('role', 'eq', 'query') | list -%}"
_BASE_BRANCH = "{%- else -%}{#- the base model's own template -#}"


def base_chat_template(template: str) -> str:
    """The base model's chat template inside a `pair_chat_template` (else `template` itself), so a
    folder exported again gets one pair branch, not two."""
    if not template.startswith(_CONTENT + _PAIR_BRANCH):
        return template
    return template.split(_BASE_BRANCH, 1)[1].removesuffix("{%- endif -%}")


def pair_chat_template(estimator: RelevanceEstimator) -> str:
    """The Jinja chat template described in the module's docstring."""
    affixes = chat_affixes(estimator.tokenizer)
    if affixes is None:
        raise ValueError("the RE's tokenizer has no chat template: a pair template needs the base's wrapping")
    before, after = affixes
    fields = {"question": "{{ text_of('query') }}", "title": "", "text": "{{ text_of('document') }}"}
    fields["context"] = fields["text"]
    parts = re.split(r"(\{\w+\})", estimator.template)
    body = "".join(fields[p[1:-1]] if re.fullmatch(r"\{\w+\}", p) else _literal(p) for p in parts)
    return (
        _CONTENT
        + _PAIR_BRANCH
        + _literal(before)
        + body
        + _literal(after)
        + _BASE_BRANCH
        + base_chat_template(estimator.tokenizer.chat_template)
        + "{%- endif -%}"
    )


#: (query, document) pairs whose rendering is checked against rerag's tokens before a format is written.
PROBES = (
    ("who founded the city?", "The city was founded in 1820 by Ana Brint, a surveyor from the north."),
    ("When did it open?", 'Opened in 2001; closed (briefly) in \'09 -- "for repairs".'),
)


def renders_as_rerag(estimator: RelevanceEstimator, special_tokens: bool) -> bool:
    """Whether `pair_chat_template` rendered whole and tokenized as a server does (sentence-transformers
    without special tokens, vLLM with them) gives the token ids rerag scores. A tokenizer that
    adds a prefix space at each call (`add_prefix_space`) tokenizes rerag's pieces otherwise."""
    tok, template = estimator.tokenizer, pair_chat_template(estimator)
    for question, document in PROBES:
        messages = [{"role": "query", "content": question}, {"role": "document", "content": document}]
        text = tok.apply_chat_template(messages, chat_template=template, tokenize=False)
        rerag_ids = estimator.encode([question], [document])["input_ids"][0].tolist()
        if tok(text, add_special_tokens=special_tokens).input_ids != rerag_ids:
            return False
    return True


def refusal(estimator: RelevanceEstimator, fmt: str) -> str | None:
    """Why `fmt` cannot serve this RE (None: it can)."""
    if fmt not in SERVING_FORMATS:
        raise ValueError(f"--serving: unknown format {fmt!r}; the formats are {', '.join(SERVING_FORMATS)}")
    if estimator.model.config.is_encoder_decoder:
        return (
            f"{fmt}: an encoder-decoder RE reads its first decoder step, which this format cannot express; "
            "serve it with the `rerankers` library's T5 ranker (the model card's 'Use')"
        )
    if estimator.tokenizer.chat_template is None:
        return f"{fmt}: the RE's tokenizer has no chat template to carry the (query, document) pair"
    if getattr(estimator.model, "peft_config", None):
        return f"{fmt}: the RE was exported as adapters only; export it merged"
    calibrator = estimator.calibration and estimator.calibration.per_context
    if calibrator is not None and not isinstance(calibrator, PlattCalibrator):
        return f"{fmt}: the {calibrator.kind} calibration is not a linear map of s and cannot be folded into a served score"
    special_tokens = fmt == "sequence_classification"  # vLLM tokenizes the rendered prompt with them
    if not renders_as_rerag(estimator, special_tokens):
        return (
            f"{fmt}: the RE's prompt rendered whole and tokenized{' with special tokens' if special_tokens else ''} "
            "gives other tokens than rerag scores (a tokenizer that adds a prefix space or a BOS at each call)"
        )
    return None


def write_chat_template(estimator: RelevanceEstimator, folder: str | Path) -> Path:
    """Write `pair_chat_template` as the folder's only chat template (transformers reads it first)."""
    path = Path(folder) / CHAT_TEMPLATE_FILE
    path.write_text(pair_chat_template(estimator))
    return path


def platt(estimator: RelevanceEstimator) -> tuple[float, float] | None:
    """The per-context Platt calibration's (a, b), None without one."""
    calibrator = estimator.calibration and estimator.calibration.per_context
    return (calibrator.a, calibrator.b) if isinstance(calibrator, PlattCalibrator) else None


def write_cross_encoder(estimator: RelevanceEstimator, folder: str | Path) -> Path:
    """Make the RE's exported folder a sentence-transformers CrossEncoder folder too (with the
    Platt calibration as a one-weight layer after the score)."""
    from sentence_transformers import CrossEncoder
    from sentence_transformers.cross_encoder.modules import Dense, LogitScore, Transformer

    folder = Path(folder)
    write_chat_template(estimator, folder)
    transformer = Transformer(
        str(folder),
        transformer_task="text-generation",
        processor_kwargs={"model_max_length": estimator.model.config.max_position_embeddings},
    )
    modules = [transformer, LogitScore(estimator.true_id, estimator.false_id)]
    if (ab := platt(estimator)) is not None:
        weight, bias = torch.tensor([[ab[0]]]), torch.tensor([ab[1]])
        modules.append(Dense(1, 1, True, torch.nn.Identity(), weight, bias, module_input_name="scores"))
    model = CrossEncoder(modules=modules)
    with warnings.catch_warnings():  # its model card's generic text says nothing of the RE: rerag writes its own
        warnings.simplefilter("ignore")
        model.save(str(folder), create_model_card=False)
    write_chat_template(estimator, folder)  # the tokenizer's save may have written the base's
    return folder


def write_sequence_classification(estimator: RelevanceEstimator, folder: str | Path) -> Path:
    """`<Arch>ForSequenceClassification` with one label: the score row W_lm[true] - W_lm[false],
    times a Platt calibration's a."""
    from transformers import AutoModelForSequenceClassification

    folder = Path(folder)
    lm = estimator.model
    config = lm.config.__class__.from_dict(lm.config.to_dict())
    config.num_labels = 1
    config.pad_token_id = estimator.tokenizer.pad_token_id
    if config.pad_token_id is None:
        config.pad_token_id = estimator.tokenizer.eos_token_id
    config.architectures = None
    classifier = AutoModelForSequenceClassification.from_config(config, dtype=lm.dtype)
    classifier.score.float()  # W_true - W_false of bf16 rows is not a bf16 row: kept in float32
    body = {k.removeprefix("model."): v for k, v in lm.state_dict().items() if k.startswith("model.")}
    classifier.model.load_state_dict(body)
    weight = lm.get_output_embeddings().weight
    with torch.no_grad():
        row = weight[estimator.true_id].float() - weight[estimator.false_id].float()
        classifier.score.weight.copy_(row[None] * (1.0 if (ab := platt(estimator)) is None else ab[0]))
    classifier.config.architectures = [type(classifier).__name__]
    classifier.save_pretrained(folder, safe_serialization=True)
    estimator.tokenizer.save_pretrained(folder)
    write_chat_template(estimator, folder)
    return folder


WRITERS = {"cross_encoder": write_cross_encoder, "sequence_classification": write_sequence_classification}


def update_serving(estimator: RelevanceEstimator, folder: str | Path) -> dict[str, Path]:
    """Rewrite the serving formats already beside the RE's exported `folder` (after `rerag calibrate`);
    where its calibration cannot be folded in, leave them and print why."""
    folder = Path(folder)
    markers = {
        "cross_encoder": folder / "modules.json",
        "sequence_classification": folder.parent / "sequence_classification",
    }
    present = [fmt for fmt, marker in markers.items() if marker.exists()]
    if why := next(filter(None, (refusal(estimator, fmt) for fmt in present)), None):
        print(f"serving formats left as they were (uncalibrated): {why}")
        return {}
    return export_serving(estimator, folder.parent, present)


def t5_ranker_arguments(estimator: RelevanceEstimator) -> dict[str, str]:
    """`rerankers.models.t5ranker.T5Ranker`'s arguments that make it score a T5 RE's exported folder as
    rerag does: the true/false token pieces (not ids) and the input template (no title slot)."""
    true_piece, false_piece = estimator.tokenizer.convert_ids_to_tokens([estimator.true_id, estimator.false_id])
    template = estimator.template.replace("{question}", "{query}").replace("{title}", "").replace("{context}", "{text}")
    return {"token_true": true_piece, "token_false": false_piece, "inputs_template": template}


def export_serving(
    estimator: RelevanceEstimator, out_dir: str | Path, formats: list[str] | None = None
) -> dict[str, Path]:
    """Write each of `formats` (None: every one the RE can take, each one it cannot skipped with a
    printed line; a named one it cannot take raises): the CrossEncoder files into
    `out_dir/estimator`, the sequence-classification folder into `out_dir/sequence_classification`."""
    written = {}
    for fmt in SERVING_FORMATS if formats is None else formats:
        if why := refusal(estimator, fmt):
            if formats is not None:
                raise ValueError(why)
            print(f"skipped {why}")
            continue
        folder = Path(out_dir) / ("estimator" if fmt == "cross_encoder" else fmt)
        written[fmt] = WRITERS[fmt](estimator, folder)
    if written and estimator.context_words:
        warnings.warn(
            f"the RE scores passages by windows of {estimator.context_words} words ({estimator.window_pooling} "
            "pooled); the serving formats score a passage whole, as the model card says",
            stacklevel=2,
        )
    return written
