"""The %%hvd rank's entry point starts its engine only once the controller's connection file is whole."""
import json
import threading
import time

import pytest

from jupyter_hvd.magic.rank_main import wait_for_connection_file

pytestmark = pytest.mark.timeout(30)


def test_waits_until_the_connection_file_is_whole_json(tmp_path):
    path = tmp_path / "ipcontroller-engine.json"
    path.write_text('{"key": "ab')  # as the controller leaves it mid-write
    writer = threading.Timer(0.2, lambda: path.write_text(json.dumps({"key": "abc"})))
    writer.start()
    began = time.monotonic()
    wait_for_connection_file(str(path), 20)
    assert time.monotonic() - began < 20  # it saw the whole file, rather than giving up
    assert json.loads(path.read_text()) == {"key": "abc"}
    writer.join()


def test_a_file_that_never_comes_ends_the_wait_at_the_timeout(tmp_path):
    wait_for_connection_file(str(tmp_path / "never.json"), 0.1)  # the engine then reports the missing file
