"""A small byte-level BPE tokenizer for models built from configs (the demo and the tests).

Byte-level, so any text encodes without unknown tokens; "true" and "false" are single tokens,
as the relevance estimator needs. The copy shipped in `rerag/assets/demo_tokenizer` is what
`rerag make-tokenizer` writes with its defaults.
"""
from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

SPECIAL = {"pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>"}


def train_tokenizer(texts: list[str], vocab_size: int = 4096) -> PreTrainedTokenizerFast:
    """Train byte-level BPE on `texts`; ids 0, 1, 2 are <pad>, </s>, <unk> as in T5."""
    tok = Tokenizer(models.BPE(unk_token=SPECIAL["unk_token"]))
    # A prefix space makes a word the same token at the start of a text as inside one, so an
    # answer label ("Mofel") has the ids it has inside a passage ("... the Mofel Guild").
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL.values()),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_tokens(["true", "false"])  # single tokens whatever the training text held
    eos = SPECIAL["eos_token"]
    tok.post_processor = processors.TemplateProcessing(
        single=f"$A {eos}", pair=f"$A {eos} $B {eos}", special_tokens=[(eos, tok.token_to_id(eos))]
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, **SPECIAL)


def make_demo_tokenizer(out_dir: str | Path, vocab_size: int = 4096, seed: int = 0) -> Path:
    """Train on the synthetic world of `seed` and save a Hugging Face tokenizer folder."""
    from rerag.data.synthetic import WorldConfig, build_world

    corpus, questions = build_world(WorldConfig(seed=seed))
    texts = [f"{d['title']} {d['text']}" for d in corpus]
    texts += [q["question"] + " " + q["answers"][0] for qs in questions.values() for q in qs]
    tokenizer = train_tokenizer(texts, vocab_size)
    tokenizer.save_pretrained(str(out_dir))
    return Path(out_dir)
