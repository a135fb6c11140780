"""The LM recipe run by MosaicML Composer on a randomly initialised Hugging Face GPT-2 of the same shape as ours.

The Python half of bench/lm_recipe.sh (the C++ half is build/bench/lm_recipe): the same token files
(lm_recipe tokenize), the same windows of 128 tokens, batch 16, DecoupledAdamW 2e-3 with 50 warmup batches and cosine
decay over --max-batches, evaluation of the cross entropy on 16 fixed validation batches of 32 every --eval-every
batches (evaluation time excluded, as Composer's timestamp excludes it), stopping at --target.

GPT2LMHeadModel(n_layer 2, n_embd 128, n_head 4, n_positions 128, vocab 50257, no dropout, exact GELU, tied head,
eager attention: Composer's Alibi surgery replaces its _attn, which transformers 4.47 still calls).
Its labels are the inputs (the model shifts them), so its cross entropy averages the 127 next-token predictions of
each window; ours predicts the window's 128 next tokens. The recipe: Alibi (train_sequence_length_scaling 0.25),
GradientClipping (norm 1.0) and EMA (half_life 50ba), Composer's own classes.

Usage: composer_lm_recipe.py --tokens DIR --config baseline|recipe|NAME,NAME [--target 6.0] [--max-batches 1500]
       [--eval-every 50] [--seed 1] [--threads 2]
Prints: EVAL lines (batches, training seconds, validation cross entropy at each evaluation) and
        RESULT lm_recipe side=composer config=... reached=0|1 batches=N train_s=T val_ce=V
"""
import argparse
import os

import numpy as np
import torch

SEQ_LEN, BATCH, EVAL_BATCHES = 128, 16, 16


class Windows(torch.utils.data.Dataset):
    """Non-overlapping windows of SEQ_LEN tokens; labels are the inputs (the model shifts them)."""

    def __init__(self, path):
        tokens = np.fromfile(path, dtype='<u2').astype(np.int64)
        n = (len(tokens) - 1) // SEQ_LEN
        self.windows = torch.from_numpy(tokens[:n * SEQ_LEN].reshape(n, SEQ_LEN))

    def __len__(self):
        return len(self.windows)

    def __getitem__(self, i):
        w = self.windows[i]
        return {'input_ids': w, 'labels': w.clone()}


def method(name):
    from composer.algorithms import EMA, Alibi, GradientClipping, SeqLengthWarmup
    if name == 'alibi':
        return Alibi(max_sequence_length=SEQ_LEN, train_sequence_length_scaling=0.25)
    if name == 'seq_length_warmup':
        return SeqLengthWarmup(duration=0.3, min_seq_length=8, max_seq_length=SEQ_LEN)
    if name == 'seq_length_warmup_short':  # to Alibi's training length, 32 tokens
        return SeqLengthWarmup(duration=0.3, min_seq_length=8, max_seq_length=SEQ_LEN // 4)
    if name == 'gradient_clipping':
        return GradientClipping(clipping_type='norm', clipping_threshold=1.0)
    if name == 'ema':
        return EMA(half_life='50ba')
    raise SystemExit(f'unknown method {name}')


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--tokens', required=True)
    p.add_argument('--config', default='baseline')
    p.add_argument('--target', type=float, default=6.0)
    p.add_argument('--max-batches', type=int, default=1500)
    p.add_argument('--eval-every', type=int, default=50)
    p.add_argument('--seed', type=int, default=1)
    p.add_argument('--threads', type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)

    from composer import Callback, Trainer
    from composer.callbacks import ThresholdStopper
    from composer.metrics.nlp import LanguageCrossEntropy
    from composer.models import HuggingFaceModel
    from composer.optim import CosineAnnealingWithWarmupScheduler, DecoupledAdamW
    from transformers import GPT2Config, GPT2LMHeadModel

    class EvalPrinter(Callback):
        """One line per evaluation: the training time (evaluation excluded) of each validation loss."""

        def eval_end(self, state, logger):
            print(f'EVAL lm_recipe side=composer config={a.config} batches={int(state.timestamp.batch)} '
                  f'train_s={state.timestamp.total_wct.total_seconds():.2f} '
                  f"val_ce={float(state.eval_metric_values['LanguageCrossEntropy']):.4f}", flush=True)

    torch.manual_seed(a.seed)
    config = GPT2Config(vocab_size=50257, n_positions=SEQ_LEN, n_embd=128, n_layer=2, n_head=4,
                        activation_function='gelu', resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        attn_implementation='eager')  # Composer's Alibi replaces the eager attention's _attn
    # metrics=None: no training metrics (given metrics=, Composer updates them on every microbatch's logits).
    model = HuggingFaceModel(GPT2LMHeadModel(config), use_logits=True, metrics=None,
                             eval_metrics=[LanguageCrossEntropy()])
    train = torch.utils.data.DataLoader(Windows(os.path.join(a.tokens, 'train.u16')), batch_size=BATCH, shuffle=True,
                                        generator=torch.Generator().manual_seed(a.seed))
    val = torch.utils.data.DataLoader(Windows(os.path.join(a.tokens, 'val.u16')), batch_size=32, shuffle=False)
    recipe = 'alibi,gradient_clipping,ema' if a.config == 'recipe' else a.config
    algorithms = [] if recipe == 'baseline' else [method(n) for n in recipe.split(',')]
    trainer = Trainer(model=model, train_dataloader=train, eval_dataloader=val, eval_subset_num_batches=EVAL_BATCHES,
                      eval_interval=f'{a.eval_every}ba', max_duration=f'{a.max_batches}ba',
                      optimizers=DecoupledAdamW(model.parameters(), lr=2e-3, weight_decay=0.0),
                      schedulers=[CosineAnnealingWithWarmupScheduler(t_warmup='50ba')], algorithms=algorithms,
                      callbacks=[ThresholdStopper('LanguageCrossEntropy', 'eval', a.target, comp=torch.less_equal),
                                 EvalPrinter()],
                      progress_bar=False, log_to_console=False, device='cpu', precision='fp32', seed=a.seed)
    trainer.fit()
    ce = float(trainer.state.eval_metric_values['LanguageCrossEntropy'])
    print(f'RESULT lm_recipe side=composer config={a.config} seed={a.seed} target={a.target:.3f} '
          f'reached={int(ce <= a.target)} batches={int(trainer.state.timestamp.batch)} '
          f'train_s={trainer.state.timestamp.total_wct.total_seconds():.2f} val_ce={ce:.4f}', flush=True)


if __name__ == '__main__':
    main()
