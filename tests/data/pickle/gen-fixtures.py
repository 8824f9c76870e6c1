#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the CPython pickle fixtures of tests/test-pickle.c (protocols 0 to 5).

Run from this directory: python3 gen-fixtures.py.  The value is plain data; bytes and
bytearray appear only from the protocols that pickle them without REDUCE (3 and 5).
test-pickle.c checks the loaded values item by item, so keep the two in step.
"""
import pickle


def value(protocol):
    shared_list = [1, 2, 3]
    shared_str = "shared-string"
    frames = [{"filename": "model.py", "line": 42, "name": "forward"},
              {"filename": "model.py", "line": 7, "name": "<module>"}]
    scalars = [None, True, False, 1.5, -2.25, 0, -1, 255, 256, 65535, 65536,
               -2**31, 2**31 - 1, 2**31, 2**63 - 1, -2**63, 2**63, 2**64 - 1,
               2**64, -2**64 - 1, 10**40, -10**40,
               "", "ascii", "\u00fcn\u00efc\u00f8d\u00e9 \u20ac \U0001f600", "nul\x00inside"]
    tuples = [(), (1,), (1, "two"), (1, "two", 3.0), (1, 2, 3, 4)]
    d = {
        "segments": [{"device": 0, "address": 139637976727552, "total_size": 20971520,
                      "stream": 0, "segment_type": "large",
                      "blocks": [{"size": 512, "state": "active_allocated"}] * 2}],
        "device_traces": [[{"action": "alloc", "addr": 139637976727552, "size": 512,
                            "stream": 0, "time_us": 1700000000123456, "frames": frames},
                           {"action": "free_requested", "addr": 139637976727552,
                            "size": 512, "stream": 0, "time_us": 1700000000123999,
                            "frames": frames}]],
        "scalars": scalars,
        "tuples": tuples,
        "shared": [shared_list, shared_list, shared_str, shared_str],
        "big_list": list(range(1100)),
        1: "int key",
        (1, 2): "tuple key",
    }
    if protocol >= 3:
        d["bytes"] = b"by\x00tes"
    if protocol >= 5:
        d["bytearray"] = bytearray(b"ba")
    return d


for protocol in range(6):
    with open("proto%d.pickle" % protocol, "wb") as f:
        pickle.dump(value(protocol), f, protocol=protocol)
