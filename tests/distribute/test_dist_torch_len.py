"""``len()`` of ``as_torch_dataset()`` and of a DataLoader over it is exact (issue 32,
item 5): loader workers split the elements before batching."""

from __future__ import annotations

import pytest
from torch.utils.data import DataLoader

import datapipe as dp

pytestmark = pytest.mark.usefixtures("clean_env")


def count(loader) -> int:
    return sum(1 for _ in loader)


@pytest.mark.parametrize(
    "pipeline, batch_size, num_workers, drop_last, expected",
    [
        (dp.range(100).batch(8), None, 2, False, 14),  # 2 x ceil(50 / 8), not 13
        (dp.range(100).batch(8), None, 0, False, 13),
        (dp.range(100).batch(8, drop_remainder=True), None, 2, False, 12),
        (dp.range(100), 8, 2, False, 14),
        (dp.range(100), 8, 2, True, 12),
        (dp.range(100), 8, 3, False, 15),  # uneven="drop": 3 x 33 elements -> 3 x 5
        (dp.range(100), 10, 2, False, 10),  # the element count already gives 10
        (dp.range(100), None, 2, False, 100),
        (dp.range(7).map(lambda x: x * 2), 2, 0, True, 3),
    ],
)
def test_loader_length_is_what_it_yields(pipeline, batch_size, num_workers, drop_last, expected):
    loader = DataLoader(
        pipeline.as_torch_dataset(),
        batch_size=batch_size,
        num_workers=num_workers,
        drop_last=drop_last,
    )
    assert len(loader) == expected
    assert count(loader) == expected


def test_rank_share_counts(clean_env):
    clean_env.setenv("RANK", "1")
    clean_env.setenv("WORLD_SIZE", "2")
    tds = dp.range(100).as_torch_dataset()
    assert len(tds) == 50  # this rank's share, with no loader workers
    loader = DataLoader(tds, batch_size=8, num_workers=2)  # 4 shares of 25
    assert len(loader) == count(loader) == 8


@pytest.mark.parametrize(
    "pipeline, what",
    [(dp.range(10).filter(lambda x: x > 3), "unknown"), (dp.range(3).repeat(), "infinite")],
)
def test_unknown_length_raises_type_error(pipeline, what):
    loader = DataLoader(pipeline.as_torch_dataset(), batch_size=2)
    with pytest.raises(TypeError) as info:
        len(loader)
    assert str(info.value).startswith(
        f"TorchIterableDataset: the pipeline's length is {what} (cardinality() == "
    )
    assert "assert_cardinality(n)" in str(info.value)


def test_lightning_sees_the_exact_number_of_training_batches():
    lightning = pytest.importorskip("lightning")
    import torch

    class Model(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)
            self.seen = 0

        def training_step(self, batch, batch_idx):
            self.seen += batch.shape[0]
            return self.layer(batch.float().reshape(-1, 1)).sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.0)

    loader = DataLoader(dp.range(100).as_torch_dataset(), batch_size=8, num_workers=2)
    trainer = lightning.Trainer(
        max_epochs=1,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    model = Model()
    trainer.fit(model, loader)
    assert trainer.num_training_batches == 14
    assert model.seen == 100  # every element, no batch skipped at the end
