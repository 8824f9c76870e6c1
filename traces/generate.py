#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Regenerate the sample traces in this directory (deterministic: fixed seeds).

Tooling only: fragsim itself never needs Python.  Run from anywhere:
    python3 traces/generate.py
"""
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20


class Writer:
    def __init__(self, name, comment):
        self.f = open(os.path.join(HERE, name), "w")
        self.f.write("fragsim-trace v1\n")
        for line in comment.strip("\n").split("\n"):
            self.f.write("# " + line + "\n" if line else "#\n")
        self.f.write("# time_ns kind id size stream\n")
        self.t = 0
        self.next_id = 1

    def tick(self, ns=1000):
        self.t += ns

    def alloc(self, size, stream=0):
        i = self.next_id
        self.next_id += 1
        self.f.write(f"{self.t} alloc {i} {size} {stream}\n")
        self.tick()
        return i

    def free(self, i, stream=0, kind="free"):
        self.f.write(f"{self.t} {kind} {i} {stream}\n")
        self.tick()

    def mark(self, label):
        self.f.write(f"{self.t} mark {label}\n")

    def close(self):
        self.f.close()


def fragmenting():
    """Autoregressive decoding with a concatenated KV cache, as Hugging Face's legacy cache
    does: every generated token replaces each layer's K and V by a copy one token longer
    (torch.cat), then frees the old one, while small per-token outputs stay alive.  Each new
    copy is larger than every hole the old copies left, so a contiguous heap keeps growing;
    paged memory does not care."""
    rng = random.Random(1)
    w = Writer("fragmenting.trace", """
Sample: autoregressive decoding with a concatenated (torch.cat) KV cache.
4 layers, batch 8, 32 heads of 128 dims in fp16: 64 KiB of K (and of V) per token per
layer.  A 512-token prompt, then 192 generated tokens: each token allocates every
layer's K and V one token longer and frees the old copies; the fp16 logits (8 x 128256
vocabulary) are freed at once, while the fp32 scores are kept (generate's
output_scores=True).  The kept scores sit between the holes the old KV copies left, and
every new copy is larger than those holes, so a contiguous best-fit heap keeps growing;
paged memory stays near the lower bound.
""")
    per_token = 8 * 32 * 128 * 2
    layers = 4
    prompt = 512
    kv = {}
    w.mark("prefill")
    for l in range(layers):
        kv[(l, "k")] = w.alloc(prompt * per_token)
        kv[(l, "v")] = w.alloc(prompt * per_token)
    outputs = []
    for t in range(192):
        if t % 32 == 0:
            w.mark(f"token-{t}")
        length = prompt + t + 1
        for l in range(layers):
            for name in ("k", "v"):
                new = w.alloc(length * per_token)
                w.free(kv[(l, name)])
                kv[(l, name)] = new
            scratch = w.alloc(rng.choice([1, 2, 4]) * 4 * per_token)
            w.free(scratch)
        logits = w.alloc(8 * 128256 * 2)
        outputs.append(w.alloc(8 * 128256 * 4))
        w.free(logits)
    for x in kv.values():
        w.free(x)
    for x in outputs:
        w.free(x)
    w.close()


def multi_stream():
    """Three streams: a compute stream, a copy stream and a communication stream, with
    stream-ordered frees (free_requested .. free_completed) for tensors used across streams."""
    rng = random.Random(2)
    w = Writer("multi-stream.trace", """
Sample: three CUDA streams (compute 0, copy 7, communication 9) with stream-ordered frees.
Buckets of gradients are allocated on stream 0 and handed to stream 9 for an all-reduce:
their free is requested at once but completes only when the communication finishes
(free_requested ... free_completed), as PyTorch's record_stream does.  Prefetch buffers
live on stream 7.  PyTorch's caching allocator keeps a separate pool per stream.
""")
    pending = []
    for step in range(40):
        w.mark(f"iteration-{step}")
        prefetch = w.alloc(rng.choice([8, 16, 32]) * MiB, 7)
        acts = [w.alloc(rng.randint(2, 40) * MiB + rng.randint(0, 4095)) for _ in range(6)]
        w.free(prefetch, 7)
        bucket = w.alloc(25 * MiB, 0)
        msg = w.alloc(rng.randint(1, 4) * MiB, 9)
        for a in acts:
            w.free(a)
        w.free(bucket, 0, "free_requested")
        pending.append(bucket)
        w.free(msg, 9)
        if len(pending) > 2:
            w.tick(50000)
            w.free(pending.pop(0), 0, "free_completed")
    for b in pending:
        w.free(b, 0, "free_completed")
    w.close()


def small_device_oom():
    """A training-like step whose peak is about 13 GiB: it fits an 80 GB card and a 24 GB one,
    but not a 16 GB T4 once the allocator's fragmentation is added."""
    rng = random.Random(3)
    w = Writer("small-device-oom.trace", """
Sample: a training step that needs about 14.0 GiB at its peak.  Replayed on t4-16gb
(14.6 GiB usable) it runs out of memory under a contiguous best-fit heap, whose holes
left by the forward pass do not fit the backward pass's larger gradients; paged memory
fits.  Try: fragsim replay traces/small-device-oom.trace -d t4-16gb
""")
    weights = [w.alloc(rng.randint(240, 480) * MiB) for _ in range(12)]
    w.mark("step-0")
    saved = []
    for layer in range(24):
        tmp = w.alloc(rng.randint(120, 360) * MiB + 512)
        saved.append(w.alloc(rng.randint(180, 300) * MiB + 1024))
        w.free(tmp)
    grads = []
    for layer in reversed(range(24)):
        grads.append(w.alloc(rng.randint(310, 460) * MiB))
        w.free(saved.pop())
    for g in grads:
        w.free(g)
    for x in weights:
        w.free(x)
    w.close()


if __name__ == "__main__":
    fragmenting()
    multi_stream()
    small_device_oom()
