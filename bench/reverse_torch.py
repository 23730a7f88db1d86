"""The reverse-sequence model of examples/reverse-sequence in PyTorch (eager,
fp32): the same encoder, optimizer, schedule and batches as the compiled
trainer, for the bench's side-by-side step time.

  reverse_torch.py TRAIN.txt EVAL.txt STEPS THREADS
Prints 'torch: mean M ms, median M ms per step' and the held-out token
accuracy after STEPS steps.
"""

import math
import sys
import time

import torch
from torch import nn

D, HEADS, LAYERS, FFN, VOCAB, SEQ, BATCH = 32, 2, 2, 128, 10, 16, 32
LR, WARMUP = 1e-3, 100


class Reverser(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, D)
        self.position_embedding = nn.Embedding(SEQ, D)
        layer = nn.TransformerEncoderLayer(D, HEADS, FFN, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, LAYERS, norm=nn.LayerNorm(D),
                                             enable_nested_tensor=False)
        self.head = nn.Linear(D, VOCAB)

    def forward(self, ids):
        x = self.embedding(ids) + self.position_embedding.weight[: ids.shape[1]]
        return self.head(self.encoder(x))


def read(path):
    rows = [line.split("|") for line in open(path) if line.strip()]
    ids = torch.tensor([[int(t) for t in a.split()] for a, _ in rows])
    labels = torch.tensor([[int(t) for t in b.split()] for _, b in rows])
    return ids, labels


def main():
    train_path, eval_path, steps, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    ids, labels = read(train_path)
    eval_ids, eval_labels = read(eval_path)
    model = Reverser()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) / WARMUP if s < WARMUP
        else 0.5 * (1 + math.cos(math.pi * (s - WARMUP) / (steps - WARMUP))))
    loss_fn = nn.CrossEntropyLoss()
    order = torch.randperm(len(ids))
    times = []
    for step in range(steps):
        rows = order[(step * BATCH) % len(ids):][:BATCH]
        if len(rows) < BATCH:
            rows = order[:BATCH]
        start = time.perf_counter()
        logits = model(ids[rows])
        loss = loss_fn(logits.reshape(-1, VOCAB), labels[rows].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        times.append((time.perf_counter() - start) * 1e3)
    with torch.no_grad():
        predicted = model(eval_ids).argmax(-1)
    accuracy = (predicted == eval_labels).float().mean().item() * 100
    mean = sum(times) / len(times)
    times.sort()
    print(f"torch: mean {mean:.3f} ms, median {times[len(times) // 2]:.3f} ms per step")
    print(f"torch: token accuracy {accuracy:.2f}% after {steps} steps")


if __name__ == "__main__":
    main()
