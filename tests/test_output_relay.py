"""The kernel side of rank output, without ranks: carriage returns, tqdm meters, and display bookkeeping."""
import pytest

from jupyter_hvd.magic.cleared_lines import MAX_CHARS, ClearedLines
from jupyter_hvd.magic.output import overwrite
from jupyter_hvd.magic.progress_bars import Meter, parse_meter
from jupyter_hvd.magic.rank_displays import WIDGET_VIEW, RankDisplays


@pytest.mark.parametrize("written, shown", [
    ("step 0\rstep 1\rstep 2\r", "step 2"),
    ("abcdef\rxy", "xycdef"),  # as a terminal and Jupyter show it: only what is written over changes
    ("done\r\n", "done\n"),
    ("plain", "plain"),
    ("\r  0%|   | 0/5\r 40%|#  | 2/5", " 40%|#  | 2/5"),
])
def test_overwrite_applies_carriage_returns(written, shown):
    assert overwrite(written) == shown


def test_parse_meter_reads_tqdm_meters_only():
    assert parse_meter("epoch:  40%|####      | 2/5 [00:00<00:01,  3.30it/s]") == Meter(
        "epoch", 40, "2/5 [00:00<00:01,  3.30it/s]")
    assert parse_meter("100%|##########| 3/3 [00:00<00:00, 9.1it/s]").percent == 100
    assert parse_meter("3it [00:00, 256.12it/s]") is None  # no total: no bar to draw
    assert parse_meter("step 2") is None
    assert parse_meter("250%|#| x") is None


class Published(list):
    """Records what RankDisplays publishes, as (data, display id, update)."""

    def __call__(self, data, metadata, transient, update=False):
        self.append((data, transient["display_id"], update))


def displays(**options):
    published = Published()
    return RankDisplays(2, options.pop("only_rank", None), options.pop("all_displays", False), published,
                        options.pop("known_widget", lambda model_id: True)), published


def content(text, display_id=None):
    return {"data": {"text/plain": text}, "metadata": {}, "transient": {"display_id": display_id} if display_id else {}}


def test_other_ranks_are_counted_in_one_note_updated_in_place():
    shower, published = displays()
    shower.handle(1, "display_data", content("a"))
    shower.handle(1, "display_data", content("b"))
    shower.handle(0, "display_data", content("c"))
    notes = [p for p in published if p[0].get("text/plain", "").startswith("[hvd]")]
    assert [n[2] for n in notes] == [False, True] and notes[0][1] == notes[1][1]
    assert "2 outputs displayed by rank 1 not shown" in notes[-1][0]["text/plain"]
    assert [p[0] for p in published if not p[0]["text/plain"].startswith("[hvd]")] == [
        {"text/plain": "[rank 0]"}, {"text/plain": "c"}]


def test_rank_option_and_all_displays_choose_the_ranks_shown():
    assert [displays(only_rank=1)[0].shown(r) for r in (0, 1)] == [False, True]
    assert [displays(all_displays=True)[0].shown(r) for r in (0, 1)] == [True, True]


def test_updates_keep_only_the_latest_until_flushed_and_reach_the_ranks_display_id():
    shower, published = displays()
    shower.handle(0, "display_data", content("v0", "bar"))
    content_id = published[-1][1]
    for i in range(1, 4):
        shower.handle(0, "update_display_data", content(f"v{i}", "bar"))
    shower.flush()
    assert published[-1] == ({"text/plain": "v3"}, content_id, True) and len(published) == 3


def test_clear_output_empties_only_that_ranks_outputs_and_wait_reuses_the_first_place():
    shower, published = displays(all_displays=True)
    shower.handle(0, "display_data", content("frame 0"))
    shower.handle(1, "display_data", content("other rank"))
    first = published[1][1]
    shower.handle(0, "clear_output", {"wait": True})
    shower.handle(0, "display_data", content("frame 1"))
    assert published[-1] == ({"text/plain": "frame 1"}, first, True)  # in place, nothing emptied first
    shower.handle(0, "clear_output", {"wait": False})
    emptied = [p[1] for p in published if p[0] == {}]
    assert first in emptied and published[3][1] not in emptied  # rank 1's output stays


def test_updates_to_a_cleared_display_are_dropped():
    shower, published = displays()
    shower.handle(0, "display_data", content("v0", "bar"))
    shower.handle(0, "clear_output", {"wait": False})
    count = len(published)
    shower.handle(0, "update_display_data", content("v1", "bar"))
    shower.flush()
    assert len(published) == count


def test_a_widget_this_kernel_does_not_know_shows_its_text():
    shower, published = displays(known_widget=lambda model_id: model_id == "known")
    for model_id in ("known", "gone"):
        shower.handle(0, "display_data", {"data": {WIDGET_VIEW: {"model_id": model_id}, "text/plain": model_id}})
    assert WIDGET_VIEW in published[1][0] and published[3][0] == {"text/plain": "gone"}


def test_what_ranks_print_between_cells_is_kept_up_to_a_limit_for_the_next_cell():
    from jupyter_hvd.magic.rank_messages import BetweenCells

    def line(text):
        return ("stream", {"name": "stdout", "text": text})

    between = BetweenCells(2, limit=10)
    for text in ("aaaa\n", "bbbb\n", "cccc\n"):
        between.add(1, line(text))
    between.add(1, ("display_data", {"data": {"text/plain": "x"}}))  # its cell is over: no place to show it
    assert between.take(0) == []
    assert between.take(1) == [
        ("stream", {"name": "stderr", "text": "[hvd] 5 earlier characters printed between cells were not kept\n"}),
        line("bbbb\n"), line("cccc\n")]
    assert between.take(1) == []


def test_a_request_between_cells_gives_what_it_printed_and_what_came_after_to_the_next_cell():
    """What a rank printed while ``%hvd pull`` ran (in the request's metadata), what came after the client forgot
    the request (fresh metadata it files under the id), and what comes later through the stand-in; a request the
    client still follows keeps its own metadata."""
    from types import SimpleNamespace

    from jupyter_hvd.magic.rank_messages import BetweenCells

    def line(text):
        return ("stream", {"name": "stdout", "text": text})

    between = BetweenCells(1)
    client = SimpleNamespace(_futures={}, metadata={"pull": {"stdout": "after\n"}})
    result = SimpleNamespace(msg_ids=["pull"], metadata={"stdout": "during\n", "stderr": ""})
    between.keep_from(0, client, result)
    assert "pull" not in client.metadata
    client._futures["pull"].iopub_callbacks[0]({"header": {"msg_type": "stream"}, "content": line("later\n")[1]})
    assert between.take(0) == [line("during\n"), line("after\n"), line("later\n")]

    followed = SimpleNamespace(_futures={"status": object()}, metadata={"status": result.metadata})
    between.keep_from(0, followed, SimpleNamespace(msg_ids=["status"], metadata=result.metadata))
    assert between.take(0) == [line("during\n")] and followed.metadata == {"status": result.metadata}


def cleared_lines():
    published, count = Published(), iter(range(1000))
    return ClearedLines(lambda: f"id{next(count)}", published, interval=0.0), published


def shown_by_id(published) -> dict:
    """Each output's last content, by display id: what the notebook shows."""
    return {display_id: data.get("text/plain", "") for data, display_id, _ in published}


def test_a_ranks_lines_after_a_clear_are_one_output_that_its_next_clear_empties():
    lines, published = cleared_lines()
    assert not lines.takes(0)
    lines.clear(0, wait=True)
    assert lines.takes(0) and not lines.takes(1)
    assert lines.add(0, "[rank 0] epoch 0\n")  # a new output: drawn now, where it first appears
    lines.draw(final=False)
    lines.clear(0, wait=True)
    assert shown_by_id(published) == {"id0": "[rank 0] epoch 0"}  # wait=True: kept until the next line
    assert not lines.add(0, "[rank 0] epoch 1\n")
    lines.draw(final=True)
    assert shown_by_id(published) == {"id0": "[rank 0] epoch 1"} and [p[2] for p in published] == [False, True]
    lines.clear(0, wait=False)
    lines.draw(final=True)
    assert shown_by_id(published) == {"id0": ""}


def test_a_rank_that_prints_on_after_one_clear_fills_outputs_of_bounded_size_which_a_clear_empties():
    lines, published = cleared_lines()
    lines.clear(0, wait=False)
    line = "[rank 0] " + "x" * 1000 + "\n"
    new = [lines.add(0, line) for _ in range(3 * (MAX_CHARS // len(line)))]
    lines.draw(final=True)
    assert new.count(True) == 3  # three outputs: none redraws more than MAX_CHARS
    assert all(len(text) <= MAX_CHARS for text in shown_by_id(published).values())
    assert sum(text.count("x" * 1000) for text in shown_by_id(published).values()) == len(new)
    lines.clear(0, wait=False)
    lines.draw(final=True)
    assert set(shown_by_id(published).values()) == {""}
