"""Fixtures for the eor tests: a small JSONL corpus and tiny random encoders saved to disk,
with a word-level tokenizer trained offline by the `tokenizers` library."""

import json

import pytest

PASSAGES = [
    ("p0", "France", "Paris is the capital of France and its largest city."),
    ("p1", "Germany", "Berlin is the capital of Germany."),
    ("p2", "Italy", "Rome is the capital of Italy, famous for the Colosseum."),
    ("p3", "Spain", "Madrid is the capital of Spain."),
    ("p4", "Mount Everest", "Everest is the highest mountain on Earth, in the Himalaya."),
    ("p5", "Nile", "The Nile is a major river flowing north through Africa."),
    ("p6", "Jupiter", "Jupiter is the largest planet in the Solar System."),
    ("p7", "Python", "Python is a programming language created by Guido van Rossum."),
]


@pytest.fixture
def corpus_path(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"id": i, "title": t, "text": x}) + "\n" for i, t, x in PASSAGES))
    return path


@pytest.fixture(scope="session")
def tokenizer():
    """A BERT-style word-level tokenizer trained on the corpus words."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    texts = [f"{t} {x}" for _, t, x in PASSAGES] + ["what which who is the capital of largest highest paris london"]
    tokenizer.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=specials))
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=64,
    )
    return fast


def _tiny_bert_config(tokenizer, **extra):
    from transformers import BertConfig

    return BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=64,
        **extra,
    )


@pytest.fixture(scope="session")
def encoder_dir(tokenizer, tmp_path_factory):
    """A tiny random BertModel (no sentence-transformers files): loads by path with mean pooling."""
    import torch
    from transformers import BertModel

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("encoder")
    BertModel(_tiny_bert_config(tokenizer)).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def sentence_transformer_dir(encoder_dir, tmp_path_factory):
    """The tiny encoder saved as a sentence-transformers folder (modules.json, mean pooling)."""
    from sentence_transformers import SentenceTransformer, models

    path = tmp_path_factory.mktemp("st")
    SentenceTransformer(modules=[models.Transformer(str(encoder_dir)), models.Pooling(32)]).save(str(path))
    return path


@pytest.fixture(scope="session")
def nli_dir(tokenizer, tmp_path_factory):
    """A tiny random BERT NLI classifier with labels entailment/neutral/contradiction."""
    import torch
    from transformers import BertForSequenceClassification

    torch.manual_seed(0)
    labels = {0: "contradiction", 1: "entailment", 2: "neutral"}
    config = _tiny_bert_config(tokenizer, num_labels=3, id2label=labels, label2id={v: k for k, v in labels.items()})
    path = tmp_path_factory.mktemp("nli")
    BertForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
