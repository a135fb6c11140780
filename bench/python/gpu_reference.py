"""The Python side of bench/gpu_suite.sh: the suite's three trainings in PyTorch, one configuration per call.

    python gpu_reference.py --model gpt2|mlp|resnet50 --mode eager|compile|cuda_graph|composer [--small]
                            [--steps N] [--warmup N]

The models are written to match bench/gpu_suite.cpp's (composer::models::GPT: pre-LayerNorm blocks, exact GELU,
scaled-dot-product causal attention, tied head, float32 loss; the 784-4x1024-10 MLP; ResNet-50 from torchvision,
channels_last), on the same synthetic device-resident batch every step.
  eager       the plain loop: forward under autocast, loss, backward, optimizer step, zero_grad(set_to_none)
  compile     the same with torch.compile(model)
  cuda_graph  the whole step (forward, backward, optimizer step) captured with torch.cuda.graph and replayed
  composer    MosaicML Composer's Trainer (when the composer package imports here; it needs torch<2.7.1)
GPT-2 uses AdamW(fused=True) with Composer's betas, the MLP SGD, ResNet-50 SGD with momentum, as the C++ side.
Prints "RESULT model=.. mode=.. device=.. ms_per_step=.." or "SKIPPED model=.. mode=.. reason=..".
"""
import argparse
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, n_head):
        super().__init__()
        self.n_head = n_head
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.attn_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        b, l, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        heads = lambda t: t.view(b, l, self.n_head, d // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        x = x + self.attn_proj(y.transpose(1, 2).contiguous().view(b, l, d))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, max_len, n_layer, n_head, d):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(max_len, d)
        self.h = nn.ModuleList(Block(d, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias") and "ln" not in name:
                nn.init.zeros_(p)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.size(1), device=ids.device))
        for block in self.h:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)


def make(name, small, device):
    torch.manual_seed(0)
    if name == "gpt2":
        vocab, seq, layers, heads, d, batch = (512, 64, 2, 2, 64, 4) if small else (50257, 1024, 12, 12, 768, 16)
        model = GPT(vocab, seq, layers, heads, d).to(device)
        ids = torch.randint(vocab, (batch, seq), device=device)
        inputs, target = ids, ids.clone()
        loss_fn = lambda out, y: F.cross_entropy(out.float().view(-1, out.size(-1)), y.view(-1))
        opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=1e-5,
                                fused=device.type == "cuda")
        bf16 = device.type == "cuda"
    elif name == "mlp":
        width, batch = (64, 16) if small else (1024, 128)
        layers, prev = [], 784
        for _ in range(4):
            layers += [nn.Linear(prev, width), nn.ReLU()]
            prev = width
        model = nn.Sequential(*layers, nn.Linear(prev, 10)).to(device)
        inputs, target = torch.randn(batch, 784, device=device), torch.randint(0, 10, (batch,), device=device)
        loss_fn = F.cross_entropy
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        bf16 = False
    elif name == "resnet50":
        import torchvision
        batch, size = (4, 32) if small else (256, 224)
        model = (torchvision.models.resnet18 if small else torchvision.models.resnet50)(num_classes=1000)
        model = model.to(device).to(memory_format=torch.channels_last)
        inputs = torch.randn(batch, 3, size, size, device=device).contiguous(memory_format=torch.channels_last)
        target = torch.randint(0, 1000, (batch,), device=device)
        loss_fn = F.cross_entropy
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        bf16 = device.type == "cuda"
    else:
        raise SystemExit(f"--model: expected gpt2, mlp or resnet50, got {name!r}")
    return model, opt, inputs, target, loss_fn, bf16


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed(step, steps, warmup, device, read_loss=True):
    for _ in range(warmup):
        step()
    sync(device)
    start = time.perf_counter()
    for _ in range(steps):
        loss = step()
        if read_loss:
            loss.item()  # as the C++ loops and Composer's Trainer read each step's loss
    sync(device)
    return (time.perf_counter() - start) * 1000 / steps


def loop_ms(name, mode, small, steps, warmup, device):
    model, opt, x, y, loss_fn, bf16 = make(name, small, device)
    if mode == "compile":
        model = torch.compile(model)
    autocast = lambda: torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16)

    def step():
        with autocast():
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    if mode != "cuda_graph":
        return timed(step, steps, warmup, device)
    if device.type != "cuda":
        raise RuntimeError("cuda_graph needs CUDA")
    # torch.cuda.graph's whole-network recipe: warm up on a side stream, capture one step, replay it.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16, cache_enabled=False):
            static_loss = loss_fn(model(x), y)
        static_loss.backward()
        opt.step()

    def replay():
        graph.replay()
        return static_loss

    return timed(replay, steps, warmup, device)


def composer_ms(name, small, steps, warmup, device):
    try:
        import composer
        from composer import Trainer
        from composer.models import ComposerClassifier, ComposerModel
    except Exception as e:  # noqa: BLE001 -- reported as the reason the row is empty
        raise ModuleNotFoundError(f"composer does not import here: {type(e).__name__}: {e}") from e
    model, opt, x, y, loss_fn, bf16 = make(name, small, device)

    class Wrapped(ComposerModel):
        def __init__(self, module):
            super().__init__()
            self.module = module

        def forward(self, batch):
            return self.module(batch[0])

        def loss(self, outputs, batch):
            return loss_fn(outputs, batch[1])

    class Repeat:
        def __init__(self, n):
            self.n = n
            self.batch_size = x.size(0)  # Composer reads the loader's batch size

        def __iter__(self):
            return iter([(x, y)] * self.n)

        def __len__(self):
            return self.n

    precision = "amp_bf16" if bf16 else "fp32"
    trainer = Trainer(model=Wrapped(model), train_dataloader=Repeat(10**6), optimizers=opt,
                      max_duration=f"{warmup}ba", device="gpu" if device.type == "cuda" else "cpu",
                      precision=precision, progress_bar=False, log_to_console=False, loggers=[])
    trainer.fit()
    sync(device)
    start = time.perf_counter()
    trainer.fit(duration=f"{steps}ba")
    sync(device)
    return (time.perf_counter() - start) * 1000 / steps, composer.__version__


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--mode", default="eager", choices=["eager", "compile", "cuda_graph", "composer"])
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=0)
    a = ap.parse_args()
    steps = a.steps or {"mlp": 300, "gpt2": 20, "resnet50": 25}[a.model]
    warmup = a.warmup or (50 if a.model == "mlp" else 8)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cudnn.benchmark = True
    extra = ""
    try:
        if a.mode == "composer":
            ms, version = composer_ms(a.model, a.small, steps, warmup, device)
            extra = f" composer={version}"
        else:
            ms = loop_ms(a.model, a.mode, a.small, steps, warmup, device)
    except (ModuleNotFoundError, RuntimeError) as e:
        reason = str(e).splitlines()[0][:200].replace(" ", "_")
        print(f"SKIPPED model={a.model} mode=python_{a.mode} reason={reason}")
        return 0
    print(f"RESULT model={a.model} mode=python_{a.mode} device={device} torch={torch.__version__} steps={steps} "
          f"ms_per_step={ms:.4f}{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
