"""Run by test_ddp.py as a script: a 2-process DDP (gloo) fit of tiny T5s on CPU, the RE alone against
the frozen generator's teacher cache in `cache_dir` (built there by both processes, each its share,
unless found there). Each rank writes its training losses, the cache's key and the fit's epochs to
`rank<r>.json`. Lightning re-launches this script for rank 1, so it must be a file."""

import json
import sys

import lightning as L
from ddp_fit import build, ddp_trainer  # beside this script, first on its path

from rerag.teacher_cache import TeacherSpec


class LossRecord(L.Callback):
    """Each training step's loss on this rank."""

    def __init__(self):
        self.losses = []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.losses.append(float(outputs["loss"]))


if __name__ == "__main__":
    out_dir, world_dir, tokenizer_dir, config, cache_dir = sys.argv[1:6]
    L.seed_everything(0)
    module, data = build(world_dir, tokenizer_dir, json.loads(config), False, teacher=TeacherSpec(cache_dir))
    record = LossRecord()
    trainer = ddp_trainer(out_dir, limit_val_batches=0, callbacks=[record])
    trainer.fit(module, datamodule=data)
    written = {"losses": record.losses, "key": module.teacher_cache_key, "epochs": module.training_epochs()}
    json.dump(written, open(f"{out_dir}/rank{trainer.global_rank}.json", "w"))
