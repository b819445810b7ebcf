"""Load a FiD-format file as a Hugging Face `datasets.Dataset`, validated once and cached.

The Arrow cache is keyed on the file's path, size and modification time and on
`fid_format.VALIDATION_VERSION`, so an edited file, or any file after the validation rules
changed, is validated again and an unchanged one loads from the cache.
"""

from __future__ import annotations

from pathlib import Path

import datasets

from rerag.data.fid_format import VALIDATION_VERSION, FiDFormatError, read_fid

FEATURES = datasets.Features(
    {
        "id": datasets.Value("string"),
        "question": datasets.Value("string"),
        "answers": datasets.List(datasets.Value("string")),
        "unanswerable": datasets.Value("bool"),  # known to have no answer (answers: [])
        "ctxs": datasets.List(
            {
                "id": datasets.Value("string"),
                "title": datasets.Value("string"),
                "text": datasets.Value("string"),
                "score": datasets.Value("float32"),
                "has_answer": datasets.Value("bool"),
                "gold": datasets.Value("bool"),  # the passage holding the question's own answer span; None if unknown
            }
        ),
    }
)


def _records(path: str, require_answers: bool, skip_invalid: bool, stamp: str):
    for record in read_fid(path, require_answers=require_answers, skip_invalid=skip_invalid):
        yield {"unanswerable": False} | record


def load_fid_dataset(
    path: str | Path,
    require_answers: bool = True,
    skip_invalid: bool = False,
    cache_dir: str | None = None,
) -> datasets.Dataset:
    """Validate `path` (JSON list or JSONL) and return it as a cached `datasets.Dataset`.

    Raises `FiDFormatError` naming the file, line or record, and field, as `read_fid` does
    (see it for ids, duplicates and what `skip_invalid` skips)."""
    path = Path(path).resolve()
    if not path.is_file():
        raise FiDFormatError(path, None, None, "file not found")
    st = path.stat()
    try:
        return datasets.Dataset.from_generator(
            _records,
            features=FEATURES,
            cache_dir=cache_dir,
            gen_kwargs={
                "path": str(path),
                "require_answers": require_answers,
                "skip_invalid": skip_invalid,
                # datasets' fingerprint of `_records` does not see read_fid's code; the version does.
                "stamp": f"{st.st_size}:{st.st_mtime_ns}:v{VALIDATION_VERSION}",
            },
        )
    except datasets.exceptions.DatasetGenerationError as err:
        # datasets wraps errors raised inside the generator; surface ours unchanged.
        cause = err.__cause__ or err.__context__
        if isinstance(cause, FiDFormatError):
            raise cause from None
        raise
