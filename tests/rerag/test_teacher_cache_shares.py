"""The teacher cache built in shares, one per process: the shares cover the rows once, balanced by
length; merged, they are the cache one process builds; a stopped build resumes from the shares
written; a missing share is waited for while its process makes progress, and named when it does not."""

import copy
import threading
import time

import pytest

import rerag.teacher_cache
from rerag.data.datamodule import RERAGDataModule
from rerag.module import RERAGModule
from rerag.stages import RE_ALONE
from rerag.teacher_cache import (
    CacheShares,
    TeacherSpec,
    build_in_shares,
    build_teacher_scores,
    row_batches,
    score_share,
    scoring_work,
    share_of,
)

QUESTION_TEMPLATE = "Passage: {text}\nWrite a question about it."


@pytest.fixture
def teacher_and_triples(causal_module_kwargs, causal_data_kwargs):
    """The tiny causal generator as the teacher (eval mode) and the triples of the tiny world's first epoch."""
    teacher = RERAGModule(**causal_module_kwargs, stages=RE_ALONE).generator.eval()
    data = RERAGDataModule(**causal_data_kwargs)
    data.setup("fit")
    return teacher, list(data.teacher_triples(1))


def built_in_threads(teacher, triples, folder, processes, batch_size=4):
    """The cache each of `processes` threads builds, standing in for processes (`build_in_shares`), each
    with its own copy of the teacher (a tokenizer's truncation and padding settings are its state)."""
    built = [None] * processes

    def build(rank):
        shares = CacheShares(folder, "k", rank, processes, batch_size)
        built[rank] = build_in_shares(
            copy.deepcopy(teacher), triples, shares, folder / "k.pt", question_template=QUESTION_TEMPLATE, timeout=60
        )

    threads = [threading.Thread(target=build, args=(rank,)) for rank in range(processes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return built


def test_the_shares_cover_the_batches_once_in_order_balanced_by_length(teacher_and_triples):
    teacher, triples = teacher_and_triples
    batches = row_batches(scoring_work(teacher, triples, None).answers, batch_size=2)
    for processes in (2, 3):
        shares = [share_of(batches, rank, processes) for rank in range(processes)]
        assert [b for share in shares for b in share] == batches
        length = [sum(len(p) + len(t) for batch in share for _, (p, t, _) in batch) for share in shares]
        assert max(length) <= 1.1 * min(length)
    assert share_of(batches, 0, 1) == batches


def test_two_processes_build_the_cache_one_process_builds_entry_for_entry(teacher_and_triples, tmp_path):
    teacher, triples = teacher_and_triples
    single = build_teacher_scores(teacher, triples, batch_size=4, key="k", question_template=QUESTION_TEMPLATE)
    built = built_in_threads(teacher, triples, tmp_path, processes=2)
    for scores in built:
        assert scores.scores == single.scores and scores.question_scores == single.question_scores
    shares = [CacheShares(tmp_path, "k", rank, 2, 4).load(rank)[0] for rank in range(2)]
    assert shares[0].keys().isdisjoint(shares[1].keys())
    assert abs(len(shares[0]) - len(shares[1])) <= 0.1 * len(single)  # about half each


def test_a_stopped_build_resumes_from_the_shares_written(teacher_and_triples, tmp_path, monkeypatch):
    teacher, triples = teacher_and_triples
    work = scoring_work(teacher, triples, QUESTION_TEMPLATE)
    CacheShares(tmp_path, "k", 1, 2, 4).save(*score_share(teacher, work, 4, (1, 2)))  # a build stopped after it
    scored = []

    def recording(teacher, work, batch_size, share=(0, 1), on_batch=None):
        scored.append(share)
        return score_share(teacher, work, batch_size, share, on_batch)

    monkeypatch.setattr(rerag.teacher_cache, "score_share", recording)
    built = built_in_threads(teacher, triples, tmp_path, processes=2)
    assert scored == [(0, 2)]
    single = build_teacher_scores(teacher, triples, batch_size=4, key="k", question_template=QUESTION_TEMPLATE)
    assert built[0].scores == built[1].scores == single.scores


def test_a_missing_share_is_waited_for_while_its_process_notes_progress_then_named(tmp_path, monkeypatch):
    monkeypatch.setattr(rerag.teacher_cache, "POLL_SECONDS", 0.01)
    mine, other = CacheShares(tmp_path, "k", 0, 2, 4), CacheShares(tmp_path, "k", 1, 2, 4)
    mine.save({}, {})
    with pytest.raises(TimeoutError, match=r"no share of process\(es\) \[1\] of 2 .*model\.teacher\.share_timeout"):
        mine.wait_for_all(tmp_path / "k.pt", timeout=0.1)

    def slow_but_scoring():
        for _ in range(20):  # 0.4 s of notes, four times the timeout
            other.note()
            time.sleep(0.02)
        other.save({}, {})

    thread = threading.Thread(target=slow_but_scoring)
    thread.start()
    assert mine.wait_for_all(tmp_path / "k.pt", timeout=0.1)
    thread.join()
    mine.remove()
    assert list(tmp_path.iterdir()) == []


def test_a_cache_written_meanwhile_ends_the_wait(tmp_path):
    (tmp_path / "k.pt").touch()
    assert not CacheShares(tmp_path, "k", 0, 2, 4).wait_for_all(tmp_path / "k.pt", timeout=0.1)


def test_the_share_timeout_is_checked(causal_module_kwargs, tmp_path):
    with pytest.raises(ValueError, match=r"model\.teacher\.share_timeout: 0"):
        RERAGModule(**causal_module_kwargs, stages=RE_ALONE, teacher=TeacherSpec(str(tmp_path), share_timeout=0))
