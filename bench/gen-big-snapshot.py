#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes a large synthetic pickle shaped like a PyTorch memory snapshot, for bench-pickle.

usage: gen-big-snapshot.py OUTPUT [TARGET_MB]   (default 100 MB)

Like real snapshots (torch.cuda.memory._dump_snapshot, pickle protocol 4), it is a dict of
`segments` (with `blocks`) and `device_traces` (lists of alloc/free entries), every entry with a
`frames` list whose frame dicts and strings are shared through the memo.  Everything is made up
from a fixed seed; no real trace is copied.
"""
import pickle
import random
import sys


def main():
    out = sys.argv[1]
    target = int(float(sys.argv[2]) * 1e6) if len(sys.argv) > 2 else 100_000_000
    rng = random.Random(1)
    files = ["/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module_%d.py" % i
             for i in range(150)] + ["/home/user/project/model_%d.py" % i for i in range(50)]
    names = ["forward_%d" % i for i in range(600)] + ["<module>", "__call__", "_call_impl"]
    frame_pool = [{"filename": rng.choice(files), "line": rng.randrange(1, 3000),
                   "name": rng.choice(names)} for _ in range(3000)]
    base = 0x7F0000000000
    segments = []
    for s in range(300):
        size = rng.choice([2 * 2**20, 20 * 2**20, 64 * 2**20, 512 * 2**20])
        blocks = []
        off = 0
        while off < size:
            bsize = min(size - off, rng.choice([512, 4096, 2**20, 8 * 2**20]))
            blocks.append({"address": base + s * 2**30 + off, "size": bsize,
                           "requested_size": bsize - rng.randrange(0, 512),
                           "state": rng.choice(["active_allocated", "inactive"]),
                           "frames": [rng.choice(frame_pool) for _ in range(rng.randrange(5, 40))]})
            off += bsize
        segments.append({"device": 0, "address": base + s * 2**30, "total_size": size,
                         "allocated_size": size // 2, "active_size": size // 2,
                         "requested_size": size // 2, "stream": 0,
                         "segment_type": "large" if size > 2 * 2**20 else "small",
                         "segment_pool_id": (0, 0), "is_expandable": False,
                         "frames": [rng.choice(frame_pool) for _ in range(10)],
                         "blocks": blocks})
    # About 265 bytes per trace entry here (real snapshots: about 330).
    n_entries = max(1, target // 265)
    trace = []
    t = 1_700_000_000_000_000
    actions = ["alloc", "free_requested", "free_completed", "segment_alloc", "segment_free"]
    for i in range(n_entries):
        t += rng.randrange(1, 200)
        trace.append({"action": actions[0] if i % 3 == 0 else rng.choice(actions),
                      "addr": base + rng.randrange(0, 2**36) * 512,
                      "size": rng.choice([512, 1024, 2**20, 3 * 2**20 + 512, 2**31 + 512]),
                      "stream": rng.choice([0, 0, 0, 7]),
                      "time_us": t,
                      "frames": [rng.choice(frame_pool) for _ in range(rng.randrange(20, 60))]})
    snapshot = {"segments": segments, "device_traces": [trace],
                "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                                       "garbage_collection_threshold": 0.0,
                                       "expandable_segments": False},
                "external_annotations": []}
    with open(out, "wb") as f:
        pickle.dump(snapshot, f, protocol=4)


main()
