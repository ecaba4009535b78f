"""Dtype policies (Keras's ``keras.DTypePolicy`` names) and the package default.

A policy names two dtypes: the *compute* dtype (what a layer's image output is, and what
its arithmetic runs in) and the *variable* dtype (what state such as ``Normalization``'s
statistics is stored in). ``"mixed_float16"`` / ``"mixed_bfloat16"`` compute in half
precision and keep state in float32, as Keras's mixed-precision policies do.

Without a policy (``None``, the package default until ``set_dtype_policy`` is called)
layers follow the 0.1 rule: float inputs keep their dtype, other inputs (uint8, ...) are
computed and returned as float32, and ``Normalization`` keeps float64 statistics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

_DTYPES = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
}
POLICY_NAMES = (*_DTYPES, "mixed_float16", "mixed_bfloat16")


@dataclass(frozen=True)
class DTypePolicy:
    """A named (compute dtype, variable dtype) pair; ``name`` is one of ``POLICY_NAMES``.

    Raises:
        ValueError: an unknown name.

    Example:
        >>> policy = DTypePolicy("mixed_bfloat16")
        >>> policy.compute_dtype, policy.variable_dtype
        (torch.bfloat16, torch.float32)
    """

    name: str

    def __post_init__(self) -> None:
        if self.name not in POLICY_NAMES:
            raise ValueError(f"DTypePolicy: name must be one of {POLICY_NAMES}; got {self.name!r}")

    @property
    def compute_dtype(self) -> torch.dtype:
        return _DTYPES[self.name.removeprefix("mixed_")]

    @property
    def variable_dtype(self) -> torch.dtype:
        return torch.float32 if self.name.startswith("mixed_") else _DTYPES[self.name]


_default: DTypePolicy | None = None

#: The class names of a serialized Keras 3 dtype policy that name one dtype or a mixed
#: pair: ``DTypePolicy`` (Keras >= 3.4; 3.15.1 writes it) and ``FloatDTypePolicy``
#: (Keras 3.0-3.3). Quantized policies and ``DTypePolicyMap`` have no meaning here.
KERAS_POLICY_CLASSES = ("DTypePolicy", "FloatDTypePolicy")
_KERAS_POLICY_KEYS = {"module", "class_name", "config", "registered_name"}


def keras_dtype_name(value: Any) -> Any:
    """The ``dtype`` entry Keras 3 writes in a layer config -> the name it holds; any
    other value is returned unchanged (for the caller's own check).

    Keras 3.15.1's ``keras.layers.RandomFlip().get_config()["dtype"]`` is ``{"module":
    "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
    "registered_name": None}`` (``keras.saving.serialize_keras_object`` of the layer's
    ``DTypePolicy``); the name may be a mixed policy (``"mixed_float16"``) or, for a
    feature layer, its output dtype (``"int64"``). A dict of another shape, class or
    module is returned unchanged, so the caller's error shows it as it is.

    Example:
        >>> keras_dtype_name({"module": "keras", "class_name": "DTypePolicy",
        ...                   "config": {"name": "mixed_float16"}, "registered_name": None})
        'mixed_float16'
        >>> keras_dtype_name("float32")
        'float32'
    """
    if not isinstance(value, dict) or not set(value) <= _KERAS_POLICY_KEYS:
        return value
    config = value.get("config")
    if (
        value.get("class_name") in KERAS_POLICY_CLASSES
        and str(value.get("module", "keras")).split(".")[0] == "keras"
        and value.get("registered_name") is None
        and isinstance(config, dict)
        and set(config) == {"name"}
        and isinstance(config["name"], str)
    ):
        return config["name"]
    return value


def _as_policy(given: Any, who: str) -> DTypePolicy | None:
    value = keras_dtype_name(given)
    if value is None or isinstance(value, DTypePolicy):
        return value
    if isinstance(value, str) and value in POLICY_NAMES:
        return DTypePolicy(value)
    value = given  # the error shows the argument as given
    raise ValueError(
        f"{who}: dtype must be one of {POLICY_NAMES}, a DTypePolicy, Keras's serialized "
        f"DTypePolicy of one of them or None; got {value!r}"
    )


def set_dtype_policy(policy: str | DTypePolicy | None) -> None:
    """Set the package default policy (Keras's ``keras.config.set_dtype_policy``).

    Layers created afterwards with ``dtype=None`` take it (their config records the name);
    existing layers keep theirs. ``None`` restores the default: no policy (float inputs
    keep their dtype, other inputs become float32).

    Raises:
        ValueError: an unknown policy name.
    """
    global _default
    _default = _as_policy(policy, "set_dtype_policy")


def dtype_policy() -> DTypePolicy | None:
    """The package default policy (Keras's ``keras.config.dtype_policy``); None if unset."""
    return _default


def resolve_dtype(value: Any, who: str) -> str | None:
    """A layer's ``dtype`` argument -> the policy name it records (None: no policy)."""
    policy = _as_policy(value, who) if value is not None else _default
    return None if policy is None else policy.name
