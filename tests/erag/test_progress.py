"""Progress for log files: timed newline lines when the stream is not a terminal."""

import io

from erag.progress import clock, progress, progress_line


class Log(io.StringIO):
    """A stream that is not a terminal, like a scheduler's log file."""


def test_lines_in_a_log_file_carry_count_rate_and_eta():
    log = Log()
    assert list(progress(range(4), "rerank", unit="questions", interval=0, stream=log)) == [0, 1, 2, 3]
    lines = log.getvalue().splitlines()
    assert len(lines) == 5 and "\r" not in log.getvalue()  # one per item and a closing one
    assert lines[1].startswith("[rerank] 2/4 questions (50.0%) | ") and "questions/s" in lines[1] and "ETA" in lines[1]


def test_a_short_loop_under_the_interval_stays_quiet():
    log = Log()
    list(progress(range(3), "reader", interval=30, stream=log))
    assert log.getvalue() == ""


def test_other_ranks_stay_quiet(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    log = Log()
    list(progress(range(3), "reader", interval=0, stream=log))
    assert log.getvalue() == ""


def test_line_format():
    assert clock(37) == "0:37" and clock(3724) == "1:02:04"
    line = progress_line("fit", 50, 200, 25.0, "steps", {"train/loss": 1.23456})
    assert line == "[fit] 50/200 steps (25.0%) | 2.00 steps/s | elapsed 0:25 | ETA 1:15 | train/loss 1.235"
