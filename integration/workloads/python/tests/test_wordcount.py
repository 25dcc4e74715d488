"""Tests that use the temp dir the way real suites do: pytest's tmp_path
(under $TMPDIR/pytest-of-<user>) and tempfile.mkdtemp. The mkdtemp dir is
left in place on purpose: the suite checks that nothing appears outside the
project (the sandbox's temp dir is private and vanishes)."""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from wordcount import count_words  # noqa: E402


def test_tmp_path(tmp_path):
    f = tmp_path / "words.txt"
    f.write_text("one two three\n", encoding="utf-8")
    assert count_words(f) == 3


def test_tmp_path_subdir(tmp_path):
    d = tmp_path / "a" / "b"
    d.mkdir(parents=True)
    (d / "x.txt").write_text("x", encoding="utf-8")
    assert sorted(p.name for p in d.iterdir()) == ["x.txt"]


def test_mkdtemp():
    d = tempfile.mkdtemp(prefix="workload-")
    assert d.startswith(tempfile.gettempdir())
    f = os.path.join(d, "words.txt")
    with open(f, "w", encoding="utf-8") as out:
        out.write("alpha beta\n")
    assert count_words(f) == 2
