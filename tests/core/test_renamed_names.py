"""Names renamed for one name per concept (issue 24): the old public import paths still
work for now, each read warning with the new name; the new names are the objects."""

from __future__ import annotations

import importlib
import json
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


def test_importing_the_old_module_warns_at_the_import_and_star_import_gives_its_names(
    tmp_path,
):
    # breaker2: `import datapipe.dataset` on its own did not warn, and `from
    # datapipe.dataset import *` imported nothing (the stand-in had no __all__).
    script = tmp_path / "old_user.py"
    script.write_text(
        "import json, warnings\n"
        "import datapipe as dp\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    import datapipe.dataset\n"
        "at_import = [(x.category.__name__, x.filename, x.lineno, str(x.message)) for x in w]\n"
        "ns = {}\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    exec('from datapipe.dataset import *', ns)\n"
        "print(json.dumps({'at_import': at_import, 'star_warnings': len(w),\n"
        "    'Dataset': ns['Dataset'] is dp.Dataset, 'AUTOTUNE': ns['AUTOTUNE'] == dp.AUTOTUNE,\n"
        "    'imported_modules': [k for k in ('os', 'threading', 'annotations') if k in ns],\n"
        "    'module': dp.dataset is datapipe.dataset}))\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    message = (
        "datapipe.dataset was renamed to datapipe.dataset_ops: import from datapipe.dataset_ops"
    )
    assert got["at_import"] == [["DeprecationWarning", str(script), 5, message]]
    assert got["Dataset"] and got["AUTOTUNE"] and got["module"]
    assert got["imported_modules"] == [] and got["star_warnings"] >= 2


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
