"""tf.data spellings (issue 33 item 4): ``Dataset.list_files`` as tf.data's static method,
and hints naming datapipe's spelling for ``tf.data.experimental.*``, ``tf.data.*`` and
``.numpy()`` on an element (differences D-TF-29)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import datapipe as dp
from datapipe import _spellings
from datapipe.errors import PipelineError


@pytest.fixture
def csv_dir(tmp_path):
    for name in ["b.csv", "a.csv", "c.txt", "d.csv"]:
        (tmp_path / name).write_text("x")
    return tmp_path


def test_list_files_is_a_static_method_of_dataset(csv_dir):
    pattern = os.path.join(csv_dir, "*.csv")
    got = [os.path.basename(p) for p in dp.Dataset.list_files(pattern, shuffle=False)]
    assert got == ["a.csv", "b.csv", "d.csv"]
    # tf.data's default shuffles (shuffle=None means True); a seed fixes the order, and it
    # is the same dataset as datapipe.list_files
    a = list(dp.Dataset.list_files(pattern, seed=3))
    assert a == list(dp.list_files(pattern, seed=3))
    assert sorted(os.path.basename(p) for p in a) == ["a.csv", "b.csv", "d.csv"]
    assert dp.Dataset.list_files(pattern).cardinality() == 3
    with pytest.raises(FileNotFoundError, match=r"\*\.png"):
        dp.Dataset.list_files(os.path.join(csv_dir, "*.png"))


def test_list_files_is_documented_by_the_function():
    assert dp.Dataset.list_files.__doc__.startswith(
        "A dataset of the paths matching ``file_pattern`` (``tf.data.Dataset.list_files``)"
    )


def test_tf_data_experimental_names_the_spelling():
    with pytest.raises(AttributeError) as info:
        dp.experimental  # noqa: B018 - the attribute access is the test
    message = str(info.value)
    assert message.startswith("module 'datapipe' has no attribute 'experimental': ")
    assert "AUTOTUNE -> dp.AUTOTUNE" in message
    assert "sample_from_datasets -> dp.sample_from_datasets" in message
    with pytest.raises(AttributeError, match=r"tf.data.Dataset is dp.Dataset"):
        dp.data  # noqa: B018


@pytest.mark.parametrize("name", sorted(_spellings.EXPERIMENTAL))
def test_every_named_spelling_exists(name):
    target = _spellings.EXPERIMENTAL[name].split("(")[0]
    root, _, rest = target.partition(".")
    obj = {"dp": dp, "ds": dp.range(3), "datapipe": dp}[root]
    for part in rest.split("."):
        obj = getattr(obj, part)
    assert obj is not None


def test_other_missing_names_keep_pythons_message():
    with pytest.raises(AttributeError, match=r"^module 'datapipe' has no attribute 'nope'$"):
        dp.nope  # noqa: B018


def test_numpy_call_on_an_element_says_elements_are_numpy_already():
    ds = dp.from_tensor_slices(np.arange(4.0)).map(lambda x: x.numpy() * 2)
    with pytest.raises(PipelineError) as info:
        list(ds)
    assert str(info.value) == (
        "map at element 0: AttributeError: 'numpy.float64' object has no attribute 'numpy' "
        "(datapipe's elements are numpy arrays already, not tf's EagerTensor: use the "
        "element itself where tf needed x.numpy(); torch.as_tensor(x) makes a tensor)"
    )
