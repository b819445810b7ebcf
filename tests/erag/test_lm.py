"""The tensor-level pieces of erag.lm on tiny random models: prompts, answers, F, generation, adapters."""

import numpy as np
import pytest
import torch
from peft import LoraConfig, TaskType, get_peft_model

from erag.lm import (
    BASE_ADAPTER,
    adapter_scope,
    answer_loglik,
    decoder_states,
    encode_answers,
    encode_prompts,
    generate_answers,
    left_padded,
    load_pretrained,
    shared_prefix_length,
    shares_prefix,
)

PROMPTS = ["what is the capital of france", "paris"]


def test_a_cut_prompt_keeps_the_chat_template(llama):
    _, tok = llama
    enc = encode_prompts(tok, ["what is the capital of france " * 5, "paris"], max_length=12)
    assert enc["input_ids"].shape == (2, 12) and enc["attention_mask"][1].sum() < 12  # right-padded
    text = tok.decode(enc["input_ids"][0])
    assert text.startswith("<s> user : what is") and text.endswith("</s> assistant :")
    with pytest.raises(ValueError, match="no room"):
        encode_prompts(tok, PROMPTS, max_length=4)


def test_answers_end_with_one_eos(llama):
    _, tok = llama
    labels = encode_answers(tok, ["paris", "the capital of france is paris"], max_length=4)
    assert labels.tolist()[0] == [tok.convert_tokens_to_ids("paris"), tok.eos_token_id, -100, -100]
    assert labels[1, -1] == tok.eos_token_id and (labels[1] != -100).all()  # cut to 3 words + EOS


@pytest.mark.parametrize("kind", ["llama", "t5"])
def test_answer_loglik_is_the_unpadded_sum_with_eos(kind, request):
    model, tok = request.getfixturevalue(kind)
    enc = encode_prompts(tok, PROMPTS)
    labels = encode_answers(tok, ["paris", "the seine river"], max_length=8)
    with torch.no_grad():
        got = answer_loglik(model, enc["input_ids"], enc["attention_mask"], labels)
        for row in range(2):
            p = enc["input_ids"][row, : int(enc["attention_mask"][row].sum())]
            a = labels[row][labels[row] != -100]
            assert a[-1] == tok.eos_token_id
            if kind == "llama":
                logp = model(torch.cat([p, a])[None]).logits[0].log_softmax(-1)
                expected = logp[len(p) - 1 + torch.arange(len(a)), a].sum()
            else:
                logp = model(input_ids=p[None], labels=a[None]).logits[0].log_softmax(-1)
                expected = logp[torch.arange(len(a)), a].sum()
            assert got[row].item() == pytest.approx(expected.item(), abs=1e-4)


def test_a_shared_prefix_runs_once_with_the_same_states_and_gradients(llama):
    model, tok = llama
    decoder = model.get_decoder()
    enc = encode_prompts(tok, ["what is the capital of france", "what is the city", "what river"])
    ids, mask = enc["input_ids"], enc["attention_mask"]
    prefix = shared_prefix_length(ids, mask)
    assert tok.convert_ids_to_tokens(ids[0, :prefix]) == ["<s>", "user", ":", "what"]
    real = mask[:, prefix:].bool()
    tokens = []
    hook = decoder.embed_tokens.register_forward_hook(lambda module, args, out: tokens.append(args[0].numel()))

    def states_and_grads(share):
        model.zero_grad()
        states = (
            decoder_states(decoder, ids, mask, prefix)[0] if share else decoder(**enc).last_hidden_state[:, prefix:]
        )
        states[real].square().sum().backward()
        return states.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    (shared, shared_grads), (full, full_grads) = states_and_grads(True), states_and_grads(False)
    hook.remove()
    assert tokens == [prefix, 3 * (ids.shape[1] - prefix), 3 * ids.shape[1]]  # the prefix ran for one row
    torch.testing.assert_close(shared[real], full[real], atol=1e-5, rtol=1e-5)
    assert shared_grads.keys() == full_grads.keys() and len(full_grads) > 2
    for name, grad in full_grads.items():
        # the rows' gradients reach the prefix summed in another order: float32 rounding (1e-4 of ~2)
        torch.testing.assert_close(shared_grads[name], grad, atol=5e-4, rtol=1e-4, msg=name)


def test_the_prefix_is_shared_on_a_cpu_by_default_and_never_when_told_not_to(llama):
    model, tok = llama
    enc = encode_prompts(tok, ["what is the capital of france", "what is the city"])
    labels = encode_answers(tok, ["paris", "lyon"], 4)
    rows = []
    hook = model.get_decoder().embed_tokens.register_forward_hook(lambda module, args, out: rows.append(len(args[0])))
    auto = answer_loglik(model, enc["input_ids"], enc["attention_mask"], labels)
    whole = answer_loglik(model, enc["input_ids"], enc["attention_mask"], labels, share_prefix=False)
    hook.remove()
    assert rows == [1, 2, 2]  # the prefix for one row, then the rows over it; then every row whole
    torch.testing.assert_close(auto, whole, atol=1e-4, rtol=1e-5)
    # auto shares on a CPU only: on a GPU a small model's step waits on kernel launches
    assert not shares_prefix(None, torch.device("cuda")) and shares_prefix(True, torch.device("cuda"))


def test_each_row_keeps_one_token_of_its_own_after_the_shared_prefix(llama):
    _, tok = llama
    same = encode_prompts(tok, ["paris", "paris"])
    assert shared_prefix_length(same["input_ids"], same["attention_mask"]) == same["input_ids"].shape[1] - 1
    one = encode_prompts(tok, ["paris"])
    assert shared_prefix_length(one["input_ids"], one["attention_mask"]) == 0


def test_left_padding_moves_rows_to_the_right_edge():
    ids, mask = left_padded(torch.tensor([[5, 6, 0], [7, 8, 9]]), torch.tensor([[1, 1, 0], [1, 1, 1]]), 0)
    assert ids.tolist() == [[0, 5, 6], [7, 8, 9]] and mask.tolist() == [[0, 1, 1], [1, 1, 1]]


@pytest.mark.parametrize("kind", ["llama", "t5"])
def test_generated_answers_score_as_teacher_forced(kind, request):
    model, tok = request.getfixturevalue(kind)
    enc = encode_prompts(tok, PROMPTS)
    texts, loglik = generate_answers(model, tok, enc["input_ids"], enc["attention_mask"], max_new_tokens=4)
    alone = [generate_answers(model, tok, *encode_prompts(tok, [p]).values(), max_new_tokens=4) for p in PROMPTS]
    assert texts == [t for a in alone for t in a[0]]  # padding changes no answer
    # float32 rounding of a padded batch differs by CPU (1.8e-4 on an Intel AMX machine); padding that
    # leaked into attention moves this tiny T5's log-likelihood by about 0.3
    torch.testing.assert_close(loglik, torch.cat([a[1] for a in alone]), atol=1e-3, rtol=1e-3)


def test_adapter_scope_runs_one_adapter_and_keeps_both_trainable(llama):
    model, tok = llama
    config = LoraConfig(
        r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"], task_type=TaskType.CAUSAL_LM, init_lora_weights=False
    )  # random B: each adapter changes the output
    model = get_peft_model(model, config, adapter_name="a")
    model.add_adapter("b", config)
    for name, p in model.named_parameters():
        p.requires_grad_(".a." in name or ".b." in name)
    enc = encode_prompts(tok, PROMPTS)
    labels = encode_answers(tok, ["paris", "paris"], max_length=4)

    def score(adapter):
        with adapter_scope(model, adapter):
            return answer_loglik(model, enc["input_ids"], enc["attention_mask"], labels)

    a, b, base = score("a"), score("b"), score(BASE_ADAPTER)
    assert not torch.allclose(a, b) and not torch.allclose(a, base)
    torch.testing.assert_close(score("a"), a)
    (a.sum() + b.sum()).backward()  # both adapters' gradients survive switching between them
    grads = {n: p.grad for n, p in model.named_parameters() if "lora_B" in n}
    assert grads and all(g is not None and g.abs().sum() > 0 for g in grads.values())


def write_tiny_llama_gguf(path, vocab=32, dim=16, ffn=32, layers=2, heads=2):
    """A random Llama as a GGUF file of float32 tensors, in the layout llama.cpp writes."""
    import gguf  # the `real` extra, also in `dev`

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(64)
    writer.add_embedding_length(dim)
    writer.add_feed_forward_length(ffn)
    writer.add_block_count(layers)
    writer.add_head_count(heads)
    writer.add_head_count_kv(heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([f"t{i}" for i in range(vocab)])
    writer.add_token_merges([])
    writer.add_eos_token_id(1)
    rng = np.random.default_rng(0)
    shapes = {"token_embd": (vocab, dim), "output_norm": (dim,), "output": (vocab, dim)}
    for i in range(layers):
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            shapes[f"blk.{i}.{name}"] = (dim, dim)
        shapes |= {f"blk.{i}.ffn_gate": (ffn, dim), f"blk.{i}.ffn_up": (ffn, dim), f"blk.{i}.ffn_down": (dim, ffn)}
        shapes |= {f"blk.{i}.attn_norm": (dim,), f"blk.{i}.ffn_norm": (dim,)}
    for name, shape in shapes.items():
        writer.add_tensor(f"{name}.weight", rng.standard_normal(shape).astype(np.float32) * 0.1)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_a_dequantized_gguf_model_is_named_by_its_file_and_saves(tmp_path):
    # transformers marks a model loaded from a GGUF file as quantized even when it dequantized every
    # weight, and its save_pretrained refused it: `rerag export` of a SmolLM2 checkpoint failed
    write_tiny_llama_gguf(tmp_path / "tiny.gguf")
    model = load_pretrained(str(tmp_path / "tiny.gguf"))
    assert model.name_or_path == str(tmp_path / "tiny.gguf")
    model.save_pretrained(tmp_path / "saved")
    reloaded = load_pretrained(str(tmp_path / "saved"))
    ids = torch.tensor([[3, 5, 7, 9]])
    torch.testing.assert_close(reloaded(ids).logits, model(ids).logits)
