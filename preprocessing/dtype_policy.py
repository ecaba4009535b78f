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


def _as_policy(value: Any, who: str) -> DTypePolicy | None:
    if value is None or isinstance(value, DTypePolicy):
        return value
    if isinstance(value, str) and value in POLICY_NAMES:
        return DTypePolicy(value)
    raise ValueError(
        f"{who}: dtype must be one of {POLICY_NAMES}, a DTypePolicy or None; got {value!r}"
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
