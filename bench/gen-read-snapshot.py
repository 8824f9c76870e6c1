#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes a large, self-consistent synthetic PyTorch memory snapshot for bench-read.

usage: gen-read-snapshot.py OUTPUT [TARGET_MB]   (default 150 MB)

A made-up training loop (fixed seed; no real trace is copied) runs through a toy caching
allocator: 64 MiB segments filled bump-style and reset once empty, a few long-lived tensors,
an empty_cache() now and then (a burst of segment_free).  The trace is recorded the way
torch.cuda.memory._dump_snapshot() writes it (pickle protocol 4, every entry with `time_us` and
a `frames` list whose frame dicts are shared through the memo, 200 to 300 bytes per entry as
in real snapshots).  The first tenth of the trace is dropped, as a ring buffer would, and the
final `segments` agree with the rest, so the reader rebuilds a consistent state at trace start.
"""
import pickle
import random
import sys

MiB = 1 << 20
SEGMENT = 64 * MiB
BASE = 0x7F0000000000


def main():
    out = sys.argv[1]
    target = int(float(sys.argv[2]) * 1e6) if len(sys.argv) > 2 else 150_000_000
    rng = random.Random(7)
    files = ["/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module_%d.py" % i
             for i in range(150)] + ["/home/user/project/model_%d.py" % i for i in range(50)]
    names = ["forward_%d" % i for i in range(600)] + ["<module>", "__call__", "_call_impl"]
    frame_pool = [{"filename": rng.choice(files), "line": rng.randrange(1, 3000),
                   "name": rng.choice(names)} for _ in range(3000)]
    sizes = [512, 1024, 4096, 65536, 262144, MiB, 4 * MiB, 16 * MiB]

    segments = {}   # address -> {"bump", "live": {addr: (size, requested)}}
    free_addresses = []
    next_segment = [BASE]
    trace = []
    t = [1_700_000_000_000_000]

    def record(action, addr, size, stream=0):
        t[0] += rng.randrange(1, 50)
        trace.append({"action": action, "addr": addr, "size": size, "stream": stream,
                      "time_us": t[0], "compile_context": "N/A",
                      "frames": [rng.choice(frame_pool) for _ in range(rng.randrange(20, 40))]})

    def new_segment():
        addr = free_addresses.pop() if free_addresses else next_segment[0]
        if addr == next_segment[0]:
            next_segment[0] += SEGMENT
        segments[addr] = {"bump": 0, "live": {}}
        record("segment_alloc", addr, SEGMENT)
        return addr

    current = [None]

    def alloc(requested):
        size = (requested + 511) // 512 * 512
        seg = segments.get(current[0])
        if seg is None or seg["bump"] + size > SEGMENT:
            empty = [a for a, s in segments.items() if not s["live"] and a != current[0]]
            current[0] = empty[0] if empty else new_segment()
            seg = segments[current[0]]
        addr = current[0] + seg["bump"]
        seg["bump"] += size
        seg["live"][addr] = (size, requested)
        record("alloc", addr, requested)
        return addr

    def free(addr):
        seg_addr = BASE + (addr - BASE) // SEGMENT * SEGMENT
        seg = segments[seg_addr]
        size, requested = seg["live"].pop(addr)
        record("free_requested", addr, requested)
        record("free_completed", addr, requested)
        if not seg["live"]:
            seg["bump"] = 0

    def empty_cache():
        for addr in sorted(a for a, s in segments.items() if not s["live"]):
            del segments[addr]
            free_addresses.append(addr)
            record("segment_free", addr, SEGMENT)
        current[0] = None

    n_entries = max(10, target // 220 * 10 // 9)  # a tenth is dropped below
    long_lived = []
    step = 0
    while len(trace) < n_entries:
        step += 1
        batch = [alloc(rng.choice(sizes) - rng.randrange(0, 512)) for _ in range(50)]
        rng.shuffle(batch)
        for addr in batch:
            if rng.random() < 0.01:
                long_lived.append(addr)
            else:
                free(addr)
        if len(long_lived) > 40:
            free(long_lived.pop(0))
        if step % 500 == 0:
            empty_cache()

    # The ring buffer kept only the later part: the reader rebuilds the state before it.
    trace = trace[len(trace) // 10:]
    final = []
    for addr in sorted(segments):
        seg = segments[addr]
        blocks, cursor = [], addr
        for block_addr in sorted(seg["live"]):
            size, requested = seg["live"][block_addr]
            if block_addr > cursor:
                blocks.append({"address": cursor, "size": block_addr - cursor,
                               "requested_size": 0, "state": "inactive", "frames": []})
            blocks.append({"address": block_addr, "size": size, "requested_size": requested,
                           "state": "active_allocated",
                           "frames": [rng.choice(frame_pool) for _ in range(25)]})
            cursor = block_addr + size
        if cursor < addr + SEGMENT:
            blocks.append({"address": cursor, "size": addr + SEGMENT - cursor,
                           "requested_size": 0, "state": "inactive", "frames": []})
        live = sum(b["size"] for b in blocks if b["state"] != "inactive")
        final.append({"device": 0, "address": addr, "total_size": SEGMENT,
                      "allocated_size": live, "active_size": live,
                      "requested_size": sum(b["requested_size"] for b in blocks), "stream": 0,
                      "segment_type": "large", "segment_pool_id": (0, 0),
                      "is_expandable": False, "frames": [], "blocks": blocks})
    annotations = []
    for i in range(0, len(trace), 5000):
        annotations.append({"stage": "START", "name": "ProfilerStep#%d" % i, "device": 0,
                            "time_us": trace[i]["time_us"]})
    snapshot = {"segments": final, "device_traces": [trace],
                "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                                       "garbage_collection_threshold": 0.0,
                                       "expandable_segments": False},
                "external_annotations": annotations}
    with open(out, "wb") as f:
        pickle.dump(snapshot, f, protocol=4)


main()
