#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the seed corpus of fuzz-pickle into corpus-pickle/ (run from this directory).

Small CPython dumps of plain data for protocols 0 to 5, and a small synthetic dict shaped like
a PyTorch memory snapshot (made up here: no real trace goes into the corpus).
"""
import os
import pickle


def snapshot():
    frames = [{"filename": "train.py", "line": 10 + i, "name": "step"} for i in range(3)]
    return {
        "segments": [{"device": 0, "address": 0x7f0000000000 + i * 2**21,
                      "total_size": 2**21, "allocated_size": 512, "active_size": 512,
                      "requested_size": 500, "stream": 0, "segment_type": "small",
                      "segment_pool_id": (0, 0), "is_expandable": False,
                      "frames": frames[:1],
                      "blocks": [{"address": 0x7f0000000000 + i * 2**21, "size": 512,
                                  "requested_size": 500, "state": "active_allocated",
                                  "frames": frames}]} for i in range(2)],
        "device_traces": [[{"action": a, "addr": 0x7f0000000000, "size": 512, "stream": 0,
                            "time_us": 1700000000000000 + t, "frames": frames}
                           for t, a in enumerate(["segment_alloc", "alloc", "free_requested",
                                                  "free_completed"])]],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                               "max_split_size": -1, "garbage_collection_threshold": 0.0,
                               "expandable_segments": True},
        "external_annotations": [],
    }


def plain():
    shared = [1, 2]
    return [None, True, False, 0, -1, 255, 65536, -2**31, 2**63, 2**64, -10**30, 1.5,
            "", "k\u00e9y\x00", (), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4), {"a": [shared, shared]},
            list(range(1005))]


os.makedirs("corpus-pickle", exist_ok=True)
for protocol in range(6):
    for name, value in (("plain", plain()), ("snapshot", snapshot())):
        with open("corpus-pickle/%s-proto%d.pickle" % (name, protocol), "wb") as f:
            pickle.dump(value, f, protocol=protocol)
with open("corpus-pickle/bytes-proto5.pickle", "wb") as f:
    pickle.dump([b"ab\x00", bytearray(b"cd")], f, protocol=5)
