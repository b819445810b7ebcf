"""An installed wheel runs on its own: the shipped configs and assets come from the package, not
from a clone, and `rerag fit` runs the shipped demo config from any directory."""

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_a_wheel_installed_elsewhere_fits_the_shipped_demo_config(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(ROOT)],
        check=True,
    )
    (wheel,) = wheels.glob("rerag-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # The fresh venv reuses this environment's dependencies through a .pth file, not the checkout:
    # the editable install's finder is left out, so `rerag` can only come from the wheel.
    deps = Path(sysconfig.get_paths()["purelib"])
    (site / "deps.pth").write_text(f"{deps}\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)], check=True
    )
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"WANDB_MODE": "offline"}
    where = subprocess.run(
        [python, "-c", "import rerag, erag, json; print(json.dumps([rerag.__file__, erag.__file__]))"],
        cwd=work,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert all(str(site) in f and str(ROOT) not in f for f in json.loads(where))
    assert (site / "rerag" / "configs" / "demo.yaml").is_file()  # the configs travel inside the package

    fit = subprocess.run(
        [
            venv / "bin" / "rerag",
            "fit",
            "--config",
            "rerag:configs/demo.yaml",
            "--trainer.max_steps",
            "2",
            "--trainer.limit_val_batches",
            "1",
            "--validation.every_n_steps",
            "2",
            "--data.init_args.world.n_train_people",
            "8",
            "--data.init_args.world.n_dev_people",
            "2",
            "--data.init_args.world.n_test_people",
            "2",
            "--test_after_fit",
            "false",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    assert fit.returncode == 0, fit.stderr[-3000:]
    assert list((work / "outputs").rglob("*.ckpt")), "the fit wrote no checkpoint under the working directory"
