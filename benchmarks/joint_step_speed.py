"""How fast is the joint training step (eq. 12: RE and generator both train) on a real LM?

Builds the joint config's module joint from step 0 (`model.stages [{}]`: the
generator scores F_ij live, as in the joint stage) and times its training step (forward and
backward over both adapters; the optimizer step is left out) on the same training questions under
several settings, in one run, each on the data its settings make and with the config's number of
training contexts per question (4: BM25's top 4 when the rows below were measured, BM25's top 2 and two
of ranks 3-20 now). Rows 1-7 keep the adapters' dropout (0.05), as the config had when
they were measured; rows 8-9 are the config as it is, without it:

1. the earlier joint config: the title and the long instruction in both prompts, 256 prompt tokens,
   whole passages, label words "true"/"false", the RE and the generator adapted on q/k/v/o of the
   top 8 layers, float32;
2. the config: no title, 192 tokens, "True"/"False", the RE on 60-word training windows and the
   generator on whole passages, both adapted on all 7 linear modules of all 30 layers, float32;
3. the config with the base's weights in bfloat16 and the step under the trainer's bf16-mixed
   autocast (what bf16 saves; the adapters stay float32);
4. the config with whole passages for the RE too (what the RE's windows save);
5. the config with the RE adapted as in 1 (what adapting every layer of the RE costs);
6. the config with the generator adapted as in 1 (what adapting every layer of the generator costs);
7. the config with the generator on the RE's windows (what whole passages cost the generator);
8. the config in bf16 (as 3) without the adapters' dropout (`lora_dropout` 0, the config's value now:
   PEFT's dropout draws a mask on every adapted layer's input, three times over one input for
   q/k/v, which a profile of `rerag fit` put at 31% of the joint step on the CPU);
9. the config in float32 (as 2) without the adapters' dropout;
10. 8 with the prompt prefix that a batch's rows share run once (`erag.lm.decoder_states`: the RE's
    rows of one question share the chat template and the question, the generator's the template
    and its instruction), as the models do now;
11. 9 with the shared prefix run once;
12. 10 with the base's decoder stack, which both adapters run through, compiled (`model.assembly.compile true`:
    torch.compile's inductor; `--warmup` as many as `--questions` compiles every shape before the timed steps).
Rows 1-9 run every row whole, as they were measured (the models' `share_prefix = False`). Rows 1, 2,
4-7, 9 and 11 run in float32, whatever the config's precision.

Printed per setting: RE and generator prompt tokens per context (real, and padded to the batch's
longest), seconds per question and the speed-up against 1.

    python benchmarks/joint_step_speed.py --questions 4
    python benchmarks/joint_step_speed.py --questions 4 --rows 1 3 8   # the baseline, bf16, no dropout
    python benchmarks/joint_step_speed.py --questions 3 --rows 1 9 11  # float32: the shared prefix
    python benchmarks/joint_step_speed.py --questions 4 --warmup 4 --rows 1 10 12  # the decoder compiled
"""

from __future__ import annotations

import argparse

import torch
from common import (
    BF16,
    FLOAT32,
    LONG_GEN,
    LONG_RE,
    RE_DROPOUT,
    add_config_argument,
    batches,
    build,
    config_args,
    rebuilt_data,
    time_steps,
)

TOP_8 = "[22, 23, 24, 25, 26, 27, 28, 29]"
EARLIER_RE = ["--model.assembly.estimator_lora.target_modules", "[q_proj, k_proj, v_proj, o_proj]"]
EARLIER_RE += ["--model.assembly.estimator_lora.layers_to_transform", TOP_8]
EARLIER_PROMPTS = {
    "inputs": {
        "re_template": LONG_RE,
        "generator_template": LONG_GEN,
        "re_max_length": 256,
        "generator_max_length": 256,
    },
    "train_context_words": None,
    "train_windows_keep_answer": False,  # no window to place
}
EARLIER_GEN = ["--model.assembly.generator_lora.target_modules", "[q_proj, k_proj, v_proj, o_proj]"]
EARLIER_GEN += ["--model.assembly.generator_lora.layers_to_transform", TOP_8]
EARLIER_WORDS = ["--model.inputs.true_word", "true", "--model.inputs.false_word", "false"]
# both adapters' dropout before the speed work
DROPOUT = RE_DROPOUT + ["--model.assembly.generator_lora.dropout", "0.05"]


def settings() -> dict[str, tuple[list[str], dict]]:
    """Each row's model overrides (a build of its own when they differ) and datamodule overrides
    (`common.rebuilt_data`: `inputs` holds the prompt fields the datamodule reads)."""
    with_dropout = {  # rows 1-7: measured when the config still had the adapters' dropout
        "earlier joint config": (EARLIER_RE + EARLIER_GEN + EARLIER_WORDS + FLOAT32, EARLIER_PROMPTS),
        "the config": (FLOAT32, {}),
        "the config, bf16": (BF16, {}),
        "the config, whole passages for the RE too": (
            FLOAT32,
            {"train_context_words": None, "train_windows_keep_answer": False},
        ),
        "the config, RE on the top 8 layers' attention": (EARLIER_RE + FLOAT32, {}),
        "the config, generator on the top 8 layers' attention": (EARLIER_GEN + FLOAT32, {}),
        "the config, generator on the RE's windows": (FLOAT32, {"window_generator_contexts": True}),
    }
    whole = {"share_prefix": False}  # rows 1-9: every row run whole, as measured before the models shared prefixes
    return {name: (model + DROPOUT, data | whole) for name, (model, data) in with_dropout.items()} | {
        "the config, bf16, no adapter dropout": (BF16, whole),
        "the config, float32, no adapter dropout": (FLOAT32, whole),
        "the config, bf16, no adapter dropout, shared prefix (as shipped now)": (BF16, {}),
        "the config, float32, no adapter dropout, shared prefix": (FLOAT32, {}),
        "the config as shipped, the decoder compiled": (BF16 + ["--model.assembly.compile", "true"], {}),
    }


def tokens(rows: list[dict], key: str) -> tuple[float, float]:
    """Real and padded prompt tokens per context of one model's inputs (`re` or `gen`)."""
    mask = [b[key]["attention_mask"] for b in rows]
    contexts = sum(m.shape[0] for m in mask)
    return sum(int(m.sum()) for m in mask) / contexts, sum(m.numel() for m in mask) / contexts


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_config_argument(p, "squad_smollm2.yaml")
    p.add_argument("--questions", type=int, default=4, help="timed training questions per setting")
    p.add_argument(
        "--rows",
        type=int,
        nargs="+",
        choices=range(1, len(settings()) + 1),
        metavar="N",
        help="settings to time, numbered as above (default: all); the first is the baseline",
    )
    p.add_argument("--warmup", type=int, default=1, help="untimed steps per setting on its first questions")
    args = p.parse_args()
    common = [*config_args(args.config), "--trainer.logger", "false"]
    # joint from step 0: no first stage, so none of its settings (its cache, its teacher's question term);
    # the joint stage spelt out: over the config's list of stages, `[{}]` does not parse as a Stage
    common += ["--model.stages", '[{"train": "both"}]', "--model.teacher", "null"]
    built: dict[str, object] = {}
    results = {}
    chosen = list(settings().items())
    chosen = [chosen[i - 1] for i in args.rows] if args.rows else chosen
    for name, (model_args, data_args) in chosen:
        key = " ".join(model_args)
        if key not in built:
            built = {key: build(common + model_args)}  # one model in memory at a time
        cli = built[key]
        data_args = dict(data_args)
        cli.model.estimator.share_prefix = cli.model.generator.share_prefix = data_args.pop("share_prefix", True)
        rows = batches(rebuilt_data(cli.datamodule, data_args), args.questions)
        seconds = time_steps(cli.model, rows, cli.trainer.precision_plugin, args.warmup)
        results[name] = (seconds, tokens(rows, "re"), tokens(rows, "gen"))
        print(name, results[name], flush=True)

    baseline = next(iter(results.values()))[0]
    data = cli.datamodule.hparams
    contexts = data["n_train_contexts"] + data["n_deep_contexts"]
    print(
        f"\nJoint training step, {args.config[-1].name}, {args.questions} questions x {contexts} contexts "
        f"per setting, {torch.get_num_threads()} threads\n"
    )
    print(
        "| setting | RE tokens per context (padded) | generator tokens per context (padded) | s per question | speed-up |"
    )
    print("|---|---|---|---|---|")
    for name, (seconds, (re_real, re_pad), (gen_real, gen_pad)) in results.items():
        print(
            f"| {name} | {re_real:.0f} ({re_pad:.0f}) | {gen_real:.0f} ({gen_pad:.0f}) | {seconds:.2f} | "
            f"{baseline / seconds:.2f}x |"
        )


if __name__ == "__main__":
    main()
