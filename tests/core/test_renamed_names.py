"""Names renamed for one name per concept (issue 24): the old public import paths still
work for now, each read warning with the new name; the new names are the objects."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import datapipe as dp
import datapipe.dataset_ops
import datapipe.service
import datapipe.service.op


def test_the_dataset_module_old_path_warns_and_gives_the_same_objects():
    with pytest.warns(
        DeprecationWarning, match=r"datapipe\.dataset was renamed to datapipe\.dataset_ops"
    ):
        from datapipe.dataset import Dataset
    assert Dataset is dp.Dataset is datapipe.dataset_ops.Dataset
    old = importlib.import_module("datapipe.dataset")
    with pytest.warns(DeprecationWarning, match="import AUTOTUNE from datapipe.dataset_ops"):
        assert old.AUTOTUNE == dp.AUTOTUNE
    with pytest.warns(DeprecationWarning):
        assert dp.dataset.REWRITES is datapipe.dataset_ops.REWRITES
    with pytest.raises(AttributeError), pytest.warns(DeprecationWarning):
        old.no_such_name  # noqa: B018


def test_the_service_op_old_module_and_class_warn():
    with pytest.warns(DeprecationWarning, match="import ServiceDataset from datapipe.service.op"):
        from datapipe.service.distribute import DistributeDataset
    assert DistributeDataset is datapipe.service.op.ServiceDataset
    with pytest.warns(DeprecationWarning, match="DistributeDataset was renamed to ServiceDataset"):
        assert datapipe.service.DistributeDataset is datapipe.service.ServiceDataset
    with pytest.warns(DeprecationWarning, match="import auto_split_size from datapipe.service.op"):
        from datapipe.service.distribute import auto_split_size
    assert auto_split_size is datapipe.service.op.auto_split_size
    # The attribute of that name is still the op, as before the rename.
    assert datapipe.service.distribute is datapipe.service.op.distribute
    assert callable(datapipe.service.distribute)


def test_new_names_do_not_warn_and_old_ones_are_gone_from_the_tree():
    code = (
        "import warnings; warnings.simplefilter('error')\n"
        "import datapipe as dp\n"
        "from datapipe.dataset_ops import Dataset\n"
        "from datapipe.service import ServiceDataset, distribute\n"
        "from datapipe.service.op import ServiceDataset as S\n"
        "assert S is ServiceDataset and dp.Dataset is Dataset\n"
        "assert not hasattr(Dataset, 'distributes') and ServiceDataset.uses_service\n"
        "print(dp.datasets.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "datapipe.datasets"
