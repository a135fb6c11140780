"""Fine-tuning SmolLM2-135M-Instruct with MosaicML Composer: the Python side of bench/finetune.sh.

Composer's Trainer around HuggingFaceModel(LlamaForCausalLM) loaded by transformers from the same GGUF file as
build/bench/finetune loads, on the same windows (finetune prepare), in the same order, with Composer's DecoupledAdamW
(no weight decay) in float32 on the CPU. Labels are the inputs (the model shifts them), so the loss averages the L - 1
next-token predictions of each window, as ours does (its last label is -100). LoRA: PEFT adapters (r 8, alpha 16, on
q_proj and v_proj) through HuggingFaceModel's peft_config; `init` writes their initial weights (A random, B zero) for
both sides to load.

usage:
  composer_finetune.py init --gguf FILE --out DIR                      initial LoRA adapters (PEFT's save_pretrained)
  composer_finetune.py train --gguf FILE --windows FILE --mode full|lora [--adapters DIR] --steps S --batch B --lr LR
  composer_finetune.py generate --gguf FILE --prompt-ids FILE --new N --rounds R
Prints STEP i loss seconds per batch, GENERATE lines, and a RESULT line.
"""
import os
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local; never wait on the model hub

import argparse
import time

import torch
from safetensors.torch import load_file


def load_model(gguf):
    from transformers import AutoModelForCausalLM
    folder, name = os.path.split(gguf)
    return AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, torch_dtype=torch.float32)


def lora_config():
    from peft import LoraConfig
    return LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")


def init(args):
    from peft import get_peft_model
    torch.manual_seed(0)
    get_peft_model(load_model(args.gguf), lora_config()).save_pretrained(args.out)


def train(args):
    from composer import Callback, Trainer
    from composer.models import HuggingFaceModel
    from composer.optim import DecoupledAdamW
    torch.set_num_threads(2)
    start = time.perf_counter()
    model = load_model(args.gguf)
    if args.mode == "lora":
        from peft import PeftModel
        model = PeftModel.from_pretrained(model, args.adapters, is_trainable=True)
    hf = HuggingFaceModel(model, tokenizer=None, use_logits=True)
    windows = load_file(args.windows)["input_ids"]
    data = [{"input_ids": w, "labels": w.clone()} for w in windows]
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch, shuffle=False)
    opt = DecoupledAdamW([p for p in hf.parameters() if p.requires_grad], lr=args.lr, weight_decay=0.0)
    load_s = time.perf_counter() - start

    class StepClock(Callback):
        def fit_start(self, state, logger):
            self.last = time.perf_counter()

        def batch_end(self, state, logger):
            now = time.perf_counter()
            print(f"STEP {int(state.timestamp.batch)} {state.loss.item():.8f} {now - self.last:.4f}", flush=True)
            self.last = now

    Trainer(model=hf, train_dataloader=loader, optimizers=opt, max_duration=f"{args.steps}ba", device="cpu",
            precision="fp32", callbacks=[StepClock()], loggers=[], progress_bar=False, seed=17).fit()
    print(f"RESULT composer mode={args.mode} load_s={load_s:.2f}")


def generate(args):
    torch.set_num_threads(2)
    model = load_model(args.gguf).eval()
    prompt = load_file(args.prompt_ids)["input_ids"]
    for r in range(args.rounds):
        start = time.perf_counter()
        with torch.no_grad():
            out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=args.new,
                                 min_new_tokens=args.new, do_sample=False, eos_token_id=None, pad_token_id=0)
        s = time.perf_counter() - start
        print(f"GENERATE transformers round={r} tokens={args.new} seconds={s:.4f} tokens_per_s={args.new / s:.2f} "
              f"last={int(out[0, -1])}")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["init", "train", "generate"])
    for key in ("gguf", "out", "windows", "mode", "adapters", "prompt-ids"):
        p.add_argument(f"--{key}")
    for key, kind in (("steps", int), ("batch", int), ("lr", float), ("new", int), ("rounds", int)):
        p.add_argument(f"--{key}", type=kind)
    a = p.parse_args()
    {"init": init, "train": train, "generate": generate}[a.command](a)
