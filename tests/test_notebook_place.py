"""The notebook's import path and directory as each %%hvd cell carries them to the ranks."""
import os
import sys

import pytest

from jupyter_hvd.magic import notebook_place
from jupyter_hvd.magic.notebook_place import NotebookPlace, add_missing_entries, follow_notebook


@pytest.mark.parametrize("path, wanted, expected", [
    (["a", "b"], ("new", "a", "b"), ["new", "a", "b"]),  # sys.path.insert(0, ...)
    (["a", "b"], ("a", "b", "new"), ["a", "b", "new"]),  # sys.path.append(...)
    (["a", "mine", "b"], ("a", "x", "y", "b", "z"), ["a", "mine", "x", "y", "b", "z"]),
    (["b", "a"], ("a", "x", "b"), ["x", "b", "a"]),  # before the next shared entry, wherever the rank has it
    (["a", "b"], ("a", "b"), ["a", "b"]),
    (["a"], ("x", "x", "a"), ["x", "a"]),
])
def test_missing_entries_keep_the_notebooks_order(path, wanted, expected):
    add_missing_entries(path, wanted)
    assert path == expected


def test_relative_entries_are_made_absolute_against_the_notebooks_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend("lib")
    place = notebook_place.notebook_place()
    assert place.cwd == str(tmp_path) and place.path[0] == str(tmp_path / "lib")
    assert "" not in place.path


def test_a_rank_follows_the_notebook_only_when_the_notebook_moves(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(notebook_place, "_last_cwd", None)
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    follow_notebook(NotebookPlace(str(tmp_path / "a"), ()))  # the first cell: the rank started where it is
    assert os.getcwd() == str(tmp_path)
    follow_notebook(NotebookPlace(str(tmp_path / "a"), ()))
    assert os.getcwd() == str(tmp_path)
    follow_notebook(NotebookPlace(str(tmp_path / "b"), ()))
    assert os.getcwd() == str(tmp_path / "b")
    with pytest.warns(RuntimeWarning, match="cannot enter"):
        follow_notebook(NotebookPlace(str(tmp_path / "gone"), ()))
    assert os.getcwd() == str(tmp_path / "b")


def test_a_removed_directory_is_no_error_on_either_side(tmp_path, monkeypatch):
    """A notebook (or rank) whose directory was removed under it: os.getcwd() raises there."""
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    monkeypatch.setattr(sys, "path", ["relative", str(tmp_path), *sys.path])
    gone.rmdir()
    place = notebook_place.notebook_place()
    assert place.cwd is None and place.path[0] == str(tmp_path)
    monkeypatch.setattr(notebook_place, "_last_cwd", str(gone))
    follow_notebook(place)  # the notebook's directory is unknown: the rank stays
    follow_notebook(NotebookPlace(str(tmp_path), ()))  # the notebook moved on; this rank's directory is gone too
    assert os.getcwd() == str(tmp_path)
