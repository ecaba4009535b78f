"""Keras 3's own preprocessing-layer tests, translated: one ``test_<layer>.py`` per layer.

Each test names, in its docstring, the upstream file (under
``keras/src/layers/preprocessing/``) and test method it translates, and keeps the upstream
literal inputs and expected values (or computes them in numpy/torch from the upstream
formula). The test code is ours, written against ``preprocessing``'s API; none of it needs
Keras or TensorFlow. A test narrowed to a deliberate difference cites its row of
``docs/guides/differences.md`` (``D-K-n``). ``_upstream.METHODS`` lists every upstream
test method; ``test_coverage.py`` checks each is translated or in ``SKIPPED`` below.

``SKIPPED``: upstream methods about Keras's own machinery only (symbolic ``KerasTensor``
shapes, ``.keras`` files, ``SparseTensor``/``RaggedTensor`` inputs, ``tf.data`` graphs
inside a layer, backend-specific dtype policies), each with a one-line reason.
``NOT_SHIPPED``: upstream test files of layers this package does not ship.
"""

_SPARSE = "tf.SparseTensor input (TensorFlow machinery); the same values dense are tested"
_RAGGED = "tf.RaggedTensor boxes densified (TensorFlow machinery); MaxNumBoundingBoxes pads here"

SKIPPED: dict[str, str] = {
    "hashed_crossing_test.py::test_sparse_input_fails": (
        "tf.SparseTensor inputs refused (TensorFlow machinery: no sparse inputs exist here)"
    ),
    "hashing_test.py::test_hash_sparse_input_farmhash": _SPARSE,
    "hashing_test.py::test_hash_sparse_input_mask_value_farmhash": _SPARSE,
    "hashing_test.py::test_hash_sparse_int_input_farmhash": _SPARSE,
    "hashing_test.py::test_hash_sparse_input_siphash": _SPARSE,
    "hashing_test.py::test_hash_sparse_int_input_siphash": _SPARSE,
    "string_lookup_test.py::test_sparse_inputs": _SPARSE,
    "image_preprocessing/bounding_boxes/validation_test.py::"
    "test_densify_ragged_bounding_boxes_batched": _RAGGED,
    "image_preprocessing/bounding_boxes/validation_test.py::"
    "test_densify_ragged_bounding_boxes_unbatched": _RAGGED,
}

NOT_SHIPPED: dict[str, str] = {
    "data_layer_test.py": "Keras's DataLayer base (backend switching inside tf.data/grain)",
    "feature_space_test.py": "FeatureSpace is not shipped (a Keras model-building utility)",
    "image_preprocessing/bounding_boxes/iou_test.py": (
        "keras.utils.bounding_boxes.compute_iou / compute_ciou are not shipped (box metrics)"
    ),
}
