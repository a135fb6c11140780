"""PEFT as the peer for LoRA (tests/peer/llama_peer_test.cpp).

usage:
  hf_lora.py apply BASE ADAPTERS IDS OUT    loads BASE (a model directory) with transformers and ADAPTERS with
                                            peft.PeftModel.from_pretrained; writes OUT with the logits of IDS'
                                            input_ids, with the adapters ("logits") and merged ("merged")
  hf_lora.py make BASE ADAPTERS IDS OUT     makes random LoRA adapters on BASE (r 2 on k_proj and o_proj, alpha 6,
                                            B not zero), saves them to ADAPTERS with save_pretrained, writes OUT
                                            with their logits
"""
import os
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local; never wait on the model hub

import sys

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM


def main(mode, base_dir, adapters, ids_file, out):
    base = AutoModelForCausalLM.from_pretrained(base_dir, torch_dtype=torch.float32).eval()
    ids = load_file(ids_file)["input_ids"]
    if mode == "apply":
        model = PeftModel.from_pretrained(base, adapters).eval()
        with torch.no_grad():
            logits = model(ids).logits.contiguous()
            merged = model.merge_and_unload()(ids).logits.contiguous()
        save_file({"logits": logits, "merged": merged}, out)
    elif mode == "make":
        torch.manual_seed(5)
        config = LoraConfig(r=2, lora_alpha=6, target_modules=["k_proj", "o_proj"], init_lora_weights=False)
        model = get_peft_model(base, config).eval()
        model.save_pretrained(adapters)
        with torch.no_grad():
            save_file({"logits": model(ids).logits.contiguous()}, out)
    else:
        sys.exit(f"hf_lora.py: unknown mode {mode!r} (apply or make)")


if __name__ == "__main__":
    main(*sys.argv[1:6])
