"""Hugging Face transformers as the peer for models::Llama, models::GPT and models::BertMLM
(tests/peer/llama_peer_test.cpp).

usage:
  hf_llama.py random DIR       small random Llama-family models, one directory each under DIR (save_pretrained),
                               with expected.safetensors: input_ids [2, 12], their logits and 8 greedy new tokens
                               (none for the BERT masked LMs; bert_pretraining is a BertForPreTraining, pooler and
                               next-sentence head included)
  hf_llama.py logits DIR IDS [DIR IDS ...]
                               loads each DIR with AutoModelForCausalLM.from_pretrained (AutoModelForMaskedLM for
                               BERT) and writes
                               DIR/hf_logits.safetensors with the logits of input_ids from IDS (a safetensors file)
  hf_llama.py gguf FILE OUT    loads the GGUF file as transformers does (dequantized to float32) and writes OUT: for each
                               prompt k, ids_k (its tokens, no special tokens added), logits_k and generated_k (16 greedy
                               new tokens)
"""
import os
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local; never wait on the model hub

import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import (AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer, BertConfig,
                          BertForPreTraining, GPT2Config, LlamaConfig, Qwen2Config)

PROMPTS = ["The capital of France is", "Call me Ishmael. Some years ago", "def fibonacci(n):"]
VARIANTS = {
    "gqa_tied": LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True),
    "llama3_bias": LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                               num_attention_heads=4, attention_bias=True, mlp_bias=True, max_position_embeddings=64,
                               rope_theta=500000.0, rms_norm_eps=1e-5,
                               rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                             "high_freq_factor": 4.0, "original_max_position_embeddings": 16}),
    "linear_head_dim": LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=1, head_dim=32,
                                   rope_scaling={"type": "linear", "factor": 2.0}),
    "qwen2": Qwen2Config(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False),
    "gpt2": GPT2Config(vocab_size=97, n_embd=64, n_layer=2, n_head=4, n_positions=32),
    "gpt2_gelu_inner": GPT2Config(vocab_size=97, n_embd=64, n_layer=2, n_head=4, n_positions=32, n_inner=96,
                                  activation_function="gelu", layer_norm_epsilon=1e-6),
    "bert": BertConfig(vocab_size=97, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                       intermediate_size=96, max_position_embeddings=32),
    "bert_pretraining": BertConfig(vocab_size=97, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=80, max_position_embeddings=16, hidden_dropout_prob=0.2),
}


def make(name, config):
    if name == "bert_pretraining":
        return BertForPreTraining(config)
    if config.model_type == "bert":
        return AutoModelForMaskedLM.from_config(config)
    return AutoModelForCausalLM.from_config(config)


def logits_from(output):
    return output.logits if hasattr(output, "logits") else output.prediction_logits


def greedy(model, ids, n):
    return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False,
                          eos_token_id=None, pad_token_id=0)


def random_models(root):
    for i, (name, config) in enumerate(VARIANTS.items()):
        torch.manual_seed(i)
        model = make(name, config).eval()
        with torch.no_grad():  # non-trivial norm weights and biases, so a mix-up of the norms shows
            for n, p in model.named_parameters():
                if "norm" in n or ".ln_" in n or "LayerNorm.weight" in n:
                    p.uniform_(0.5, 1.5)
                elif "LayerNorm.bias" in n or n.endswith("predictions.bias"):
                    p.uniform_(-0.5, 0.5)
        model.save_pretrained(f"{root}/{name}")
        ids = torch.randint(0, config.vocab_size, (2, 12))
        with torch.no_grad():
            expected = {"input_ids": ids, "logits": logits_from(model(ids)).contiguous()}
        if config.model_type != "bert":
            expected["generated"] = greedy(model, ids, 8)
        save_file(expected, f"{root}/{name}/expected.safetensors")


def logits_of(directory, ids_file):
    masked = AutoConfig.from_pretrained(directory).model_type == "bert"
    auto = AutoModelForMaskedLM if masked else AutoModelForCausalLM
    model = auto.from_pretrained(directory, torch_dtype=torch.float32).eval()
    ids = load_file(ids_file)["input_ids"]
    with torch.no_grad():
        save_file({"logits": model(ids).logits.contiguous()}, f"{directory}/hf_logits.safetensors")


def from_gguf(path, out):
    folder, name = os.path.split(path)
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, torch_dtype=torch.float32).eval()
    tensors = {}
    for k, prompt in enumerate(PROMPTS):
        ids = torch.tensor([tok.encode(prompt, add_special_tokens=False)])
        with torch.no_grad():
            tensors[f"logits_{k}"] = model(ids).logits.contiguous()
        tensors[f"ids_{k}"] = ids
        tensors[f"generated_{k}"] = greedy(model, ids, 16)
    save_file(tensors, out)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "random":
        random_models(sys.argv[2])
    elif mode == "logits":
        for directory, ids_file in zip(sys.argv[2::2], sys.argv[3::2]):
            logits_of(directory, ids_file)
    elif mode == "gguf":
        from_gguf(sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"hf_llama.py: unknown mode {mode!r} (random, logits or gguf)")
