#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Writes the tiny PyTorch snapshots test-validate.c replays (run from this directory; the
# outputs are committed).  Each is a consistent snapshot: the final `segments` are what the
# trace leaves behind, so the reader's reconstruction of the state at trace start is empty.
#
#   validate-exact.pickle     what PyTorch's allocator does: a 3 MiB request makes a 20 MiB
#                             segment, 5 MiB goes right after it, a 2 MiB request reuses the
#                             freed 3 MiB block whole (1 MiB left is not split off), a small
#                             request gets a 2 MiB segment.
#   validate-diverged.pickle  the same, but the recording puts the 2 MiB tensor at the end of
#                             the segment, which PyTorch never does: event 5 diverges.
import pickle

MIB = 1 << 20
S = 0x7F3A00000000
S2 = 0x7F3A02000000
SETTINGS = {
    "PYTORCH_CUDA_ALLOC_CONF": "",
    "max_split_size": -1,
    "garbage_collection_threshold": 0.0,
    "expandable_segments": False,
    "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)},
}


def entry(action, addr, size, stream=0, t=0):
    return {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": t}


def block(addr, size, requested, state):
    return {"address": addr, "size": size, "requested_size": requested, "state": state}


def segment(addr, total, blocks, kind):
    allocated = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    return {"device": 0, "address": addr, "total_size": total, "allocated_size": allocated,
            "active_size": allocated, "requested_size": allocated, "stream": 0,
            "segment_type": kind, "segment_pool_id": (0, 0), "is_expandable": False,
            "blocks": blocks}


def snapshot(second_addr):
    trace = [
        entry("segment_alloc", S, 20 * MIB, t=1),
        entry("alloc", S, 3 * MIB, t=2),
        entry("alloc", S + 3 * MIB, 5 * MIB, t=3),
        entry("free_requested", S, 3 * MIB, t=4),
        entry("free_completed", S, 3 * MIB, t=5),
        entry("alloc", second_addr, 2 * MIB, t=6),
        entry("segment_alloc", S2, 2 * MIB, t=7),
        entry("alloc", S2, 1000, t=8),
    ]
    if second_addr == S:
        large = [block(S, 3 * MIB, 2 * MIB, "active_allocated"),
                 block(S + 3 * MIB, 5 * MIB, 5 * MIB, "active_allocated"),
                 block(S + 8 * MIB, 12 * MIB, 0, "inactive")]
    else:
        large = [block(S, 3 * MIB, 0, "inactive"),
                 block(S + 3 * MIB, 5 * MIB, 5 * MIB, "active_allocated"),
                 block(S + 8 * MIB, 2 * MIB, 2 * MIB, "active_allocated"),
                 block(S + 10 * MIB, 10 * MIB, 0, "inactive")]
    small = [block(S2, 1024, 1000, "active_allocated"),
             block(S2 + 1024, 2 * MIB - 1024, 0, "inactive")]
    return {"segments": [segment(S, 20 * MIB, large, "large"), segment(S2, 2 * MIB, small, "small")],
            "device_traces": [trace], "allocator_settings": SETTINGS}


for name, addr in (("validate-exact.pickle", S), ("validate-diverged.pickle", S + 8 * MIB)):
    with open(name, "wb") as f:
        pickle.dump(snapshot(addr), f, protocol=2)
