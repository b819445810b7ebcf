"""Shared pytest setup. Runs offline; every model is built from a tiny config in a fixture."""

import os

# Triton reads TRITON_INTERPRET when a @triton.jit decorator runs, so set it before `kernels`
# (or anything importing it) is imported: the Triton kernels then run on the CPU.
os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Tiny models run faster on one thread, and a busy 2-core machine slows multi-threaded torch
# many times over; subprocesses (DDP) inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
