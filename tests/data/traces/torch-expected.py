#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Independent figures for tests/test-reader-torch.c, computed with CPython.

usage: torch-expected.py DIR [FILE...]

For each PyTorch snapshot (every *.pickle / *.pkl in DIR, or the FILEs named), loads it with a
restricted unpickler (every global refused) and prints, per device that has trace entries or
segments of the final state:

  * the number of trace entries and their counts by action name;
  * the segments and reserved bytes of the final state;
  * the state at trace start, rebuilt as PyTorch's MemoryViz does (undo the trace from the
    final segments): number of segments (an expandable segment counts once per contiguous
    mapped range), reserved bytes, live blocks, their bytes, and how many are pending free.

This is a cross-check written separately from src/readers/torch.c: the C tests pin the numbers
it prints.  It never prints stack frames.
"""
import collections
import glob
import os
import pickle
import sys


class Restricted(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError("global %s.%s refused" % (module, name))


def load(path):
    with open(path, "rb") as f:
        return Restricted(f).load()


def round_size(size):
    return 512 if size < 512 else (size + 511) // 512 * 512


def mapped_remove(ranges, start, end):
    out = []
    for a, b in ranges:
        if b <= start or a >= end:
            out.append((a, b))
            continue
        if a < start:
            out.append((a, start))
        if b > end:
            out.append((end, b))
    return out


def mapped_add(ranges, start, end):
    ranges = sorted(mapped_remove(ranges, start, end) + [(start, end)])
    merged = []
    for a, b in ranges:
        if merged and merged[-1][1] == a:
            merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    return merged


def device_figures(snapshot, device):
    if isinstance(snapshot, list):
        segments, traces = snapshot, []
    else:
        segments = snapshot.get("segments") or []
        traces = snapshot.get("device_traces") or []
    trace = traces[device] if device < len(traces) else []
    mine = [s for s in segments if s.get("device", 0) == device]
    actions = collections.Counter(e["action"] for e in trace)

    # The final state.
    cuda = {}    # address -> size of cudaMalloc segments
    mapped = []  # (start, end) of expandable segments' mapped ranges
    live = {}    # address -> (size, pending)
    for s in mine:
        if s.get("is_expandable"):
            mapped = mapped_add(mapped, s["address"], s["address"] + s["total_size"])
        else:
            cuda[s["address"]] = s["total_size"]
        address = s["address"]
        for b in s.get("blocks", []):
            address = b.get("address", address)
            if b["state"] in ("active_allocated", "active_pending_free"):
                live[address] = (b["size"], b["state"] == "active_pending_free")
            address += b["size"]

    # Undo the trace.
    for e in reversed(trace):
        a = e["action"]
        if a == "alloc":
            live.pop(e["addr"], None)
        elif a == "free_requested":
            if e["addr"] in live:
                live[e["addr"]] = (live[e["addr"]][0], False)
        elif a == "free_completed":
            live[e["addr"]] = (round_size(e["size"]), True)
        elif a == "segment_alloc":
            cuda.pop(e["addr"], None)
        elif a == "segment_free":
            cuda[e["addr"]] = e["size"]
        elif a == "segment_map":
            mapped = mapped_remove(mapped, e["addr"], e["addr"] + e["size"])
        elif a == "segment_unmap":
            mapped = mapped_add(mapped, e["addr"], e["addr"] + e["size"])

    # Forward again: bursts of segment_free / segment_unmap (release_cached_blocks), deferred
    # frees (free_requested not followed at once by its free_completed), and frees of addresses
    # neither live at trace start nor allocated before (there should be none once seeded).
    bursts = sum(1 for i, e in enumerate(trace)
                 if e["action"] in ("segment_free", "segment_unmap") and
                 (i == 0 or trace[i - 1]["action"] not in ("segment_free", "segment_unmap")))
    deferred = sum(1 for i, e in enumerate(trace) if e["action"] == "free_requested" and
                   (i + 1 == len(trace) or trace[i + 1]["action"] != "free_completed" or
                    trace[i + 1]["addr"] != e["addr"]))
    known = set(live)
    unmatched = 0
    for e in trace:
        if e["action"] == "alloc":
            known.add(e["addr"])
        elif e["action"] == "free_requested" and e["addr"] not in known:
            unmatched += 1
        elif e["action"] == "free_completed":
            if e["addr"] not in known:
                unmatched += 1
            known.discard(e["addr"])
    timed = any("time_us" in e for e in trace)
    annotations = [] if isinstance(snapshot, list) else snapshot.get("external_annotations") or []
    marks = sum(1 for a in annotations if a.get("device", 0) == device and timed and
                a.get("time_us") is not None)

    return {
        "entries": len(trace),
        "actions": dict(sorted(actions.items())),
        "final_segments": len(mine),
        "final_reserved": sum(s["total_size"] for s in mine),
        "start_segments": len(cuda) + len(mapped),
        "start_reserved": sum(cuda.values()) + sum(b - a for a, b in mapped),
        "start_blocks": len(live),
        "start_block_bytes": sum(size for size, _ in live.values()),
        "start_pending": sum(1 for _, pending in live.values() if pending),
        "bursts": bursts,
        "deferred": deferred,
        "unmatched": unmatched,
        "marks": marks,
    }


def figures(path):
    snapshot = load(path)
    if isinstance(snapshot, list):
        segments, traces = snapshot, []
    else:
        segments = snapshot.get("segments") or []
        traces = snapshot.get("device_traces") or []
    devices = {s.get("device", 0) for s in segments}
    devices |= {d for d, t in enumerate(traces) if t}
    out = {d: device_figures(snapshot, d) for d in sorted(devices)}
    annotations = 0 if isinstance(snapshot, list) else len(snapshot.get("external_annotations") or [])
    return out, annotations


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    paths = sys.argv[2:] or sorted(glob.glob(os.path.join(sys.argv[1], "*.pickle")) +
                                   glob.glob(os.path.join(sys.argv[1], "*.pkl")))
    for path in paths:
        devices, annotations = figures(os.path.join(sys.argv[1], path) if sys.argv[2:] else path)
        print("%s: annotations %d" % (os.path.basename(path), annotations))
        for device, f in devices.items():
            print("  device %d: %s" % (device, f))


main()
