"""The Python side of tests/trainer/model_callbacks_test.cpp: PyTorch, Composer and Hugging Face read what our
callbacks wrote, or compute what theirs would on the same tensors.

  jit MODEL.pt INPUTS.safetensors OUT.safetensors   run a TorchScript file on the inputs (keys in0, in1, ...)
                                                     in order; write its output as "out"; print its parameter names
  activations WEIGHTS.safetensors X.safetensors OUT.json
                                                     Composer's ActivationMonitor hooks on the same MLP
  warp LOGITS.safetensors OUT.safetensors TEMPERATURE TOP_K TOP_P
                                                     Hugging Face's temperature, top-k and top-p logits warpers
"""
import json
import sys

import torch
from safetensors.torch import load_file, save_file


def run_jit(model_path, inputs_path, out_path):
    module = torch.jit.load(model_path)
    inputs = load_file(inputs_path)
    args = [inputs[f"in{i}"] for i in range(len(inputs))]
    with torch.no_grad():
        out = module(*args)
    save_file({"out": out.contiguous()}, out_path)
    names = [n for n, _ in module.named_parameters()] + [n for n, _ in module.named_buffers()]
    print(json.dumps({"names": names}))


def run_activations(weights_path, x_path, out_path):
    from composer.callbacks import ActivationMonitor

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.module = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))

        def forward(self, x):
            return self.module(x)

    model = Wrapper()
    model.load_state_dict(load_file(weights_path))
    metrics = {}

    class Collect:
        destinations = []

        def log_metrics(self, m, step=None):
            metrics.update(m)

    monitor = ActivationMonitor(interval="10ba")
    monitor.create_module_names(model)
    monitor.register_forward_hook(model, Collect(), 0)
    with torch.no_grad():
        model(load_file(x_path)["x"])
    monitor.remove_forward_hooks()
    with open(out_path, "w") as f:  # NaN (a constant row's kurtosis) as null: JSON has no NaN
        json.dump({k: (None if v != v else v) for k, v in metrics.items()}, f)


def run_warp(logits_path, out_path, temperature, top_k, top_p):
    from transformers.generation.logits_process import (TemperatureLogitsWarper, TopKLogitsWarper,
                                                        TopPLogitsWarper)
    scores = load_file(logits_path)["logits"]
    if float(temperature) != 1.0:
        scores = TemperatureLogitsWarper(float(temperature))(None, scores)
    if int(top_k) != 0:
        scores = TopKLogitsWarper(int(top_k))(None, scores)
    if float(top_p) < 1.0:
        scores = TopPLogitsWarper(float(top_p))(None, scores)
    save_file({"scores": scores.contiguous()}, out_path)


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    {"jit": run_jit, "activations": run_activations, "warp": run_warp}[command](*args)
