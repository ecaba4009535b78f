"""tf.data spellings datapipe writes differently: the hint an ``AttributeError`` carries.

A tf.data script ported line by line reaches for ``tf.data.experimental.*`` and
``tf.data.Dataset``; the names exist in datapipe under other spellings, and a bare
``AttributeError`` would not say which (issue 33 item 4). ``datapipe.__getattr__`` raises
these for the names below; ``errors._hint`` covers ``.numpy()`` on an element.
"""

from __future__ import annotations

# tf.data.experimental.X -> where datapipe has it (each target exists: tests/core/
# test_spellings.py resolves every one).
EXPERIMENTAL = {
    "AUTOTUNE": "dp.AUTOTUNE",
    "AutoShardPolicy": "dp.AutoShardPolicy",
    "sample_from_datasets": "dp.sample_from_datasets",
    "choose_from_datasets": "dp.choose_from_datasets",
    "cardinality": "ds.cardinality()",
    "INFINITE_CARDINALITY": "dp.INFINITE_CARDINALITY",
    "UNKNOWN_CARDINALITY": "dp.UNKNOWN_CARDINALITY",
    "assert_cardinality": "ds.assert_cardinality(n)",
    "ignore_errors": "ds.ignore_errors()",
    "enumerate_dataset": "ds.enumerate()",
    "unbatch": "ds.unbatch()",
    "save": "ds.save(path)",
    "load": "dp.Dataset.load(path)",
    "snapshot": "ds.snapshot(path)",
    "service": "datapipe.service",
    "DistributeOptions": "dp.DistributeOptions",
}


def namespace_hint(name: str) -> str | None:
    """The message for ``dp.<name>`` where ``name`` is a tf.data namespace, else None."""
    if name == "experimental":
        pairs = ", ".join(f"{k} -> {v}" for k, v in EXPERIMENTAL.items())
        return (
            "module 'datapipe' has no attribute 'experimental': tf.data.experimental's names "
            f"are datapipe's top level or Dataset methods ({pairs})"
        )
    if name == "data":
        return (
            "module 'datapipe' has no attribute 'data': datapipe is tf.data's counterpart, so "
            "tf.data.Dataset is dp.Dataset and tf.data.AUTOTUNE is dp.AUTOTUNE"
        )
    return None
