"""Shipped types (PEP 561): a user's type checker sees datapipe's annotations.

mypy runs once, in a subprocess, on two small user scripts against this checkout (its
py.typed markers), as a user's CI would run it. torch and numpy are not followed (their
stubs are most of the run time, and these scripts only need datapipe's signatures).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("mypy", reason="mypy is in the dev extra")

_BAD = """\
import datapipe as dp
ds = dp.range(10).map(lambda x: x * 2)
first = ds.take("3")
n: int = ds.cardinality()
"""

_GOOD = """\
import datapipe as dp
import preprocessing as pp
ds = dp.range(10).shuffle(10, seed=0).batch(4, drop_remainder=True).take(2)
n: int = ds.cardinality()
flip = pp.RandomFlip("horizontal", seed=0)
"""

_CONFIG = """\
[mypy]
[mypy-torch.*,numpy.*,pyarrow.*,PIL.*,tqdm.*,cloudpickle.*,fsspec.*,ray.*,cv2.*]
follow_imports = skip
ignore_missing_imports = True
"""


@pytest.fixture(scope="module")
def mypy_report(tmp_path_factory: pytest.TempPathFactory) -> str:
    d = tmp_path_factory.mktemp("user")
    (d / "bad_user.py").write_text(_BAD)
    (d / "good_user.py").write_text(_GOOD)
    (d / "mypy.ini").write_text(_CONFIG)
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(d / "mypy.ini"),
         "--follow-imports=silent", "--cache-dir", str(d / "cache"),
         str(d / "bad_user.py"), str(d / "good_user.py")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode in (0, 1), r.stdout + r.stderr  # 2: mypy itself failed
    return r.stdout


@pytest.mark.parametrize("package", ["datapipe", "preprocessing"])
def test_packages_ship_py_typed(package: str) -> None:
    assert (ROOT / package / "py.typed").is_file()
    text = (ROOT / "pyproject.toml").read_text()
    assert f'{package} = ["py.typed"]' in text  # installed with the package data


def test_user_passing_a_str_count_to_take_is_flagged(mypy_report: str) -> None:
    errors = [ln for ln in mypy_report.splitlines() if ": error:" in ln]
    assert len(errors) == 1, mypy_report
    assert errors[0].endswith(
        'bad_user.py:3: error: Argument 1 to "take" of "Dataset" has incompatible type '
        '"str"; expected "int"  [arg-type]'
    ), errors[0]


def test_correct_user_code_checks_clean(mypy_report: str) -> None:
    assert "good_user.py" not in mypy_report, mypy_report
    assert "Found 1 error in 1 file (checked 2 source files)" in mypy_report, mypy_report
