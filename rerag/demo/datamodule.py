"""The demo's data: the synthetic world written to `data_dir` on first use, then read as FiD files."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from rerag.data.datamodule import RERAGDataModule
from rerag.demo.world import WorldConfig, write_world


class DemoDataModule(RERAGDataModule):
    """`RERAGDataModule` over the synthetic world (`world`, see `WorldConfig`): train, dev and test
    are `data_dir/{train,dev,test}.jsonl`, written by `prepare_data` when missing; predict reads
    the test split unless `predict_file` is given. Every other argument is `RERAGDataModule`'s."""

    def __init__(
        self, world: WorldConfig | None = None, data_dir: str = "data/demo", predict_file: str | None = None, **kwargs
    ):
        folder = Path(data_dir)
        test_file = str(folder / "test.jsonl")
        super().__init__(
            train_file=str(folder / "train.jsonl"),
            val_file=str(folder / "dev.jsonl"),
            test_file=test_file,
            predict_file=predict_file or test_file,
            **kwargs,
        )
        self.world = WorldConfig(**world) if isinstance(world, dict) else (world or WorldConfig())
        self.data_dir = data_dir

    def prepare_data(self) -> None:
        """Write the world unless `data_dir` holds this very one (its `world.json` says which), then
        validate and cache the files the stage reads (`RERAGDataModule.prepare_data`)."""
        stamp = Path(self.data_dir) / "world.json"
        wanted = json.dumps(asdict(self.world), sort_keys=True)
        present = all(Path(f).is_file() for f in (self.train_file, self.val_file, self.test_file))
        if not (present and stamp.is_file() and stamp.read_text() == wanted):
            write_world(self.data_dir, self.world)
            stamp.write_text(wanted)
        super().prepare_data()
