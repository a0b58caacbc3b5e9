"""Fixtures shared by the host-side tests."""
import pytest
from IPython.core.interactiveshell import InteractiveShell


@pytest.fixture(scope="module")
def ip():
    """One IPython shell with the %%hvd extension loaded; its ranks are stopped at the end of the module."""
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "jupyter_hvd.magic")
    yield shell
    shell.run_line_magic("hvd", "stop")
