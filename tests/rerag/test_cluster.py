"""Multi-node and FSDP settings parse through `rerag` and instantiate (running them needs GPUs)."""

import re
from pathlib import Path

import lightning as L
import pytest
import yaml
from jsonargparse import ArgumentParser
from lightning.pytorch.strategies import FSDPStrategy, Strategy
from transformers.models.t5.modeling_t5 import T5Block

from rerag.cli import main

ROOT = Path(__file__).resolve().parents[2]


def printed_config(capsys, *argv) -> dict:
    with pytest.raises(SystemExit) as exit_:
        main(["fit", *argv, "--print_config"])
    assert exit_.value.code == 0
    return yaml.safe_load(capsys.readouterr().out)


def test_fsdp_overlay_parses_and_builds_the_strategy(capsys):
    config = printed_config(
        capsys,
        "--config",
        str(ROOT / "configs" / "nq_t5_base.yaml"),
        "--config",
        str(ROOT / "configs" / "strategies" / "fsdp.yaml"),
        "--model.assembly.estimator_lora.r",
        "8",
        "--model.assembly.generator_lora.r",
        "8",
    )
    parser = ArgumentParser()
    parser.add_argument("--strategy", type=Strategy)
    strategy = parser.instantiate_classes(parser.parse_object({"strategy": config["trainer"]["strategy"]})).strategy
    assert isinstance(strategy, FSDPStrategy)
    assert strategy.kwargs["use_orig_params"]  # what LoRA's frozen + trainable parameters need
    assert strategy.kwargs["auto_wrap_policy"].__class__.__name__ == "ModuleWrapPolicy"
    assert T5Block in strategy.kwargs["auto_wrap_policy"]._module_classes


def test_two_nodes_of_eight_parse_and_keep_the_effective_batch(capsys):
    config = printed_config(
        capsys,
        "--config",
        str(ROOT / "configs" / "nq_t5_base.yaml"),
        "--trainer.num_nodes",
        "2",
        "--trainer.devices",
        "8",
        "--trainer.accumulate_grad_batches",
        "2",
    )
    t, d = config["trainer"], config["data"]["init_args"]
    t["devices"] = int(t["devices"])  # trainer.devices is int | str | list: the command line gives a string
    assert t["num_nodes"] * t["devices"] * t["accumulate_grad_batches"] * d["batch_size"] == 64
    # The Trainer accepts the layout (on CPU here: the launch itself happens at fit).
    trainer = L.Trainer(
        accelerator="cpu",
        devices=t["devices"],
        num_nodes=t["num_nodes"],
        strategy=t["strategy"],
        logger=False,
        enable_checkpointing=False,
    )
    assert trainer.world_size == 16 and trainer.num_nodes == 2


@pytest.mark.parametrize("script", ["slurm_2x8.sbatch", "torchrun_2x8.sh"])
def test_cluster_scripts_run_the_documented_layout(script, capsys):
    # Every `rerag fit ...` in the launch scripts parses, with its 2 x 8 layout and an effective batch of 64.
    text = (ROOT / "docs" / "cluster" / script).read_text().replace("\\\n", " ")
    argv = re.search(r"rerag fit (.*)", text)[1].split()
    config = printed_config(capsys, *[a.replace("configs/", str(ROOT / "configs") + "/") for a in argv])
    t, d = config["trainer"], config["data"]["init_args"]
    t["devices"] = int(t["devices"])
    assert (t["num_nodes"], t["devices"]) == (2, 8)
    assert t["num_nodes"] * t["devices"] * t["accumulate_grad_batches"] * d["batch_size"] == 64
