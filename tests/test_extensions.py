"""Horovod's build checks that the frontends carry: hvd.check_extension, hvd.gpu_available, hvd.split_list."""
import sysconfig

import pytest

import jupyter_hvd
from jupyter_hvd import _C
from jupyter_hvd.extensions import check_extension, gpu_available
from jupyter_hvd.gpu import cuda_available

SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")


def test_the_engine_extension_is_found_where_it_was_built():
    check_extension("jupyter_hvd", "JUPYTER_HVD_BUILD", _C.__file__, "_C")


def test_a_nested_extension_is_found_below_the_package_folder(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / f"_lib{SUFFIX}").write_bytes(b"")
    check_extension("pkg", "PKG_BUILD", str(tmp_path / "__init__.py"), "sub", "_lib")


def test_horovods_own_check_fails_with_its_name_path_and_switch():
    """What horovod.torch runs at import: here its library is not there, so the same ImportError."""
    import jupyter_hvd.torch as hvd

    with pytest.raises(ImportError, match=r"horovod\.torch has not been built: .*mpi_lib_v2.* not found\n"
                                          r".*HOROVOD_WITH_PYTORCH=1"):
        hvd.check_extension("horovod.torch", "HOROVOD_WITH_PYTORCH", hvd.__file__, "mpi_lib_v2")


def test_an_extension_must_be_named():
    with pytest.raises(ValueError, match="name the extension"):
        check_extension("pkg", "PKG_BUILD", jupyter_hvd.__file__)


def test_gpu_available_answers_per_frontend_and_says_why_not(capsys):
    torch = pytest.importorskip("torch")
    assert gpu_available("torch") == (torch.cuda.is_available() and cuda_available())
    assert gpu_available("mxnet", verbose=True) is False
    assert gpu_available("tensorflow", verbose=True) is False
    out = capsys.readouterr().out
    assert "CPU arrays only" in out and "no 'tensorflow' frontend" in out


def test_both_frontends_carry_horovods_helpers():
    import jupyter_hvd.mxnet as hvd_mx
    import jupyter_hvd.torch as hvd_torch

    for hvd in (hvd_mx, hvd_torch):
        assert hvd.check_extension is check_extension
        assert hvd.split_list(list(range(7)), 3) == [[0, 1, 2], [3, 4], [5, 6]]
    assert hvd_torch.gpu_available is gpu_available
