"""preprocessing._augment_ops: the op sets RandAugment and AugMix build, configured as Keras
configures them from one magnitude. Applying a slot (each image its own op) is tested
through the layers (test_rand_augment.py, test_aug_mix.py).

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

from differential import keras

import preprocessing as pp


def keras_policy_configuration(factor):
    """How Keras's RandAugment and AugMix configure their ops for ``factor``."""
    theirs = keras().layers.RandAugment(value_range=(0, 1), factor=factor)
    kmix = keras().layers.AugMix(factor=factor)
    return {
        "ops": list(theirs._AUGMENT_LAYERS),
        "factor": tuple(float(f) for f in theirs.factor),
        "sharpness": tuple(theirs.random_sharpness.factor),
        "solarization_addition": tuple(theirs.solarization.addition_factor),
        "posterization_bits": tuple(theirs.random_posterization.factor),
        "aug_mix_ops": list(kmix._augment_layers),
        "aug_mix_contrast_upper": kmix.random_contrast.factor[1],
    }


def test_rand_augment_and_aug_mix_configure_ops_as_keras(ref):
    for factor in (0.5, (0.2, 0.7)):
        ours = pp.RandAugment(value_range=(0, 1), factor=factor)
        theirs = ref(keras_policy_configuration, factor)
        assert list(ours.ops) == theirs["ops"]
        lo, hi = theirs["factor"]
        assert ours.ops["random_shear"]._x == (lo, hi)
        assert ours.ops["random_translation"]._width_factor == (lo, hi)
        assert ours.ops["random_rotation"]._factor == (lo, hi)
        assert ours.ops["random_brightness"]._factor[0] == lo
        assert ours.ops["random_sharpness"]._factor == theirs["sharpness"]
        assert ours.ops["solarization"]._addition_factor == theirs["solarization_addition"]
        # Keras draws bits with randint(1, b), leaving b out; ours include it.
        assert ours.ops["random_posterization"]._bits == theirs["posterization_bits"]
        mix = pp.AugMix(factor=factor)
        assert list(mix.ops) == theirs["aug_mix_ops"]
        assert mix.ops["random_contrast"]._factor[1] == theirs["aug_mix_contrast_upper"]
