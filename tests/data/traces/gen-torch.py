#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the PyTorch-snapshot fixtures of tests/test-reader-torch.c.

Run from this directory: python3 gen-torch.py.  Every snapshot here is made up by hand (no real
trace is copied); test-reader-torch.c checks them event by event, so keep the two in step.
Also writes torch-bad.txt: for each bad-torch-* file, the error code and the byte offset the
message must name ('-' when not pinned), offsets found with pickletools.
"""
import gzip
import os
import pickle
import pickletools

MiB = 1 << 20
T0 = 1_700_000_000_000_000  # time_us of the first entry
A = 0x7F0000000000          # segment alive before recording, stream 0
B = 0x7F0002000000          # small segment freed in the trace
C = 0x7F0004000000          # segment allocated in the trace, stream 7
FRAMES = [{"filename": "train.py", "line": 12, "name": "step"},
          {"filename": "model.py", "line": 40, "name": "forward"}]


def entry(action, addr, size, stream, t=None, **extra):
    e = {"action": action, "addr": addr, "size": size, "stream": stream, "frames": FRAMES}
    if t is not None:
        e["time_us"] = T0 + t
    e.update(extra)
    return e


def blocks(seg_addr, parts):
    """parts: (size, state, requested) tiling the segment from its start."""
    out, addr = [], seg_addr
    for size, state, requested in parts:
        out.append({"address": addr, "size": size, "requested_size": requested, "state": state,
                    "frames": FRAMES if state != "inactive" else []})
        addr += size
    return out


def segment(addr, size, stream, kind, parts, device=0, expandable=False, pool=(0, 0)):
    bl = blocks(addr, parts)
    return {"device": device, "address": addr, "total_size": size, "stream": stream,
            "segment_type": kind, "segment_pool_id": pool, "is_expandable": expandable,
            "allocated_size": sum(b["size"] for b in bl if b["state"] == "active_allocated"),
            "active_size": sum(b["size"] for b in bl if b["state"] != "inactive"),
            "requested_size": sum(b["requested_size"] for b in bl if b["state"] != "inactive"),
            "frames": FRAMES, "blocks": bl}


def minimal():
    """Device 0: a timed trace over a state that predates it; device 1: untimed."""
    d0 = [
        entry("alloc", A + 6 * MiB, 1000, 0, 0, compile_context="N/A", user_metadata=""),  # 0
        entry("free_requested", A + 2 * MiB, MiB, 0, 10),                                  # 1
        entry("free_completed", A + 2 * MiB, MiB, 0, 10),                                  # 2
        entry("free_completed", A + 4 * MiB, 100, 0, 20),                                  # 3
        entry("free_requested", A + 6 * MiB, 1000, 0, 30),                                 # 4
        entry("alloc", A + 7 * MiB, 4096, 0, 40),                                          # 5
        entry("free_completed", A + 6 * MiB, 1000, 0, 50),                                 # 6
        entry("segment_free", B, 2 * MiB, 0, 60),                                          # 7
        entry("segment_alloc", C, 20 * MiB, 7, 70),                                        # 8
        entry("alloc", C, 3 * MiB, 7, 80),                                                 # 9
        {"action": "annotate", "addr": "not looked at", "time_us": T0 + 85},             # 10
        {"action": "snapshot", "addr": 0, "size": 2 * MiB + 4096, "stream": 0,
         "time_us": T0 + 86},                                                              # 11
        {"action": "oom", "device_free": 123456, "size": 1 << 30, "stream": 7,
         "time_us": T0 + 90, "frames": FRAMES},                                            # 12
        entry("alloc", C + 3 * MiB, 512, 7, 80),                                           # 13 backwards
        entry("free_requested", C + 3 * MiB, 512, 7, 100),                                 # 14
        entry("free_completed", C + 3 * MiB, 512, 7, 100),                                 # 15
        entry("free_requested", 0x1234000, 64, 0, 110),                                    # 16 unknown
        entry("free_completed", 0x1234000, 64, 0, 110),                                    # 17
        entry("segment_free", B + 4 * MiB, 2 * MiB, 0, 120),                               # 18 burst 2
        entry("segment_free", B + 6 * MiB, 2 * MiB, 0, 121),                               # 19
    ]
    d1 = [
        entry("alloc", 0x7E0000000000, 700, 0),
        entry("free_requested", 0x7E0000000000, 700, 0),
        entry("free_completed", 0x7E0000000000, 700, 0),
    ]
    segments = [
        segment(A, 20 * MiB, 0, "large", [
            (2 * MiB, "active_allocated", 2 * MiB - 100),   # X: alive throughout
            (5 * MiB, "inactive", 1000),
            (4096, "active_allocated", 4096),               # Z2
            (MiB - 4096, "inactive", 0),
            (512, "active_pending_free", 300),              # Q: pending, never in the trace
            (12 * MiB - 512, "inactive", 0)]),
        segment(C, 20 * MiB, 7, "large", [
            (3 * MiB, "active_allocated", 3 * MiB),         # Z3
            (17 * MiB, "inactive", 512)]),
        segment(0x7E0000000000, 2 * MiB, 0, "small", [(2 * MiB, "inactive", 700)], device=1),
    ]
    annotations = [
        {"stage": "START", "name": "Optimizer.step#AdamW.step", "device": 0, "time_us": T0 + 35},
        {"stage": "START", "name": "tie", "device": 0, "time_us": T0 + 10},
        {"stage": "END", "name": "Optimizer.step#AdamW.step", "device": 0, "time_us": T0 + 200},
        {"stage": "START", "name": "elsewhere", "device": 3, "time_us": T0 + 1},
        {"stage": "START", "name": "untimed", "device": 1, "time_us": T0 + 1},
    ]
    roundup = {str(1 << i): (4 if i < 2 else 0) for i in range(16)}
    settings = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": 256 * MiB,
                "garbage_collection_threshold": 0.6, "expandable_segments": False,
                "release_lock_on_cudamalloc": False, "roundup_power2_divisions": roundup}
    return {"segments": segments, "device_traces": [d0, d1], "allocator_settings": settings,
            "external_annotations": annotations}


def legacy():
    """1.13/2.0: blocks without addresses, requests in history[0].real_size; an OOM entry
    carries the free device memory as its addr."""
    base = 0x7F1000000000
    segs = [{"device": 0, "address": base, "total_size": 2 * MiB, "allocated_size": MiB,
             "active_size": MiB, "requested_size": 1000000, "stream": 0, "segment_type": "small",
             "blocks": [{"size": MiB, "requested_size": MiB, "state": "active_allocated",
                         "history": [{"addr": base, "real_size": 1000000}]},
                        {"size": MiB, "requested_size": 0, "state": "inactive",
                         "history": [{"addr": base + MiB, "real_size": 5}]}]},
            {"device": 0, "address": base + 64 * MiB, "total_size": 20 * MiB,
             "allocated_size": 4 * MiB, "active_size": 4 * MiB, "requested_size": 4 * MiB,
             "stream": 0, "segment_type": "large",
             "blocks": [{"size": 16 * MiB, "state": "inactive", "history": []},
                        {"size": 4 * MiB, "state": "active_allocated",
                         "history": [{"addr": base + 80 * MiB, "real_size": 4 * MiB - 7}]}]}]
    trace = [{"action": "snapshot", "addr": 0, "size": 5 * MiB, "stream": 0},
             {"action": "oom", "addr": 777 * MiB, "size": 64 * MiB, "stream": 0}]
    return {"segments": segs, "device_traces": [trace]}


def bare_list():
    """torch.cuda.memory_snapshot(): the segments alone, here of device 2."""
    base = 0x7F2000000000
    return [segment(base, 2 * MiB, 0, "small",
                    [(512, "active_allocated", 512), (512, "active_pending_free", 10),
                     (2 * MiB - 1024, "inactive", 0)], device=2),
            segment(base + 32 * MiB, 20 * MiB, 0, "large",
                    [(20 * MiB, "active_allocated", 19 * MiB)], device=2)]


def expandable():
    """Expandable segments: one large range grown, released and grown again; a small one."""
    E = 0x7F3000000000
    F = 0x7F3800000000
    trace = [
        entry("segment_map", E + 20 * MiB, 20 * MiB, 0, 0),                # 0
        entry("alloc", E + 20 * MiB, 8 * MiB, 0, 1),                       # 1
        entry("free_requested", E + 20 * MiB, 8 * MiB, 0, 2),              # 2
        entry("free_completed", E + 20 * MiB, 8 * MiB, 0, 2),              # 3
        entry("segment_unmap", E + 20 * MiB, 20 * MiB, 0, 3),              # 4
        entry("segment_map", E + 20 * MiB, 40 * MiB, 0, 4),                # 5
        entry("alloc", E + 20 * MiB, 30 * MiB, 0, 5),                      # 6
    ]
    segments = [
        segment(E, 60 * MiB, 0, "large", [(5 * MiB, "active_allocated", 5 * MiB),
                                          (15 * MiB, "inactive", 0),
                                          (30 * MiB, "active_allocated", 30 * MiB),
                                          (10 * MiB, "inactive", 0)], expandable=True),
        segment(F, 2 * MiB, 0, "small", [(2 * MiB, "inactive", 0)], expandable=True),
    ]
    settings = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "max_split_size": -1,
                "garbage_collection_threshold": 0.0, "expandable_segments": True}
    return {"segments": segments, "device_traces": [trace], "allocator_settings": settings,
            "external_annotations": []}


P = 0x7F4000000000  # private-pool fixtures: D default, G graph pool (1, 0), M MemPool (0, 1)


def pools_state():
    """A state-only snapshot (recorded with enabled="state") with two private pools."""
    D, G, M, G2 = P, P + 32 * MiB, P + 64 * MiB, P + 96 * MiB
    segments = [
        segment(D, 20 * MiB, 0, "large", [(4 * MiB, "active_allocated", 4 * MiB),
                                          (16 * MiB, "inactive", 0)]),
        segment(G, 20 * MiB, 0, "large", [(8 * MiB, "active_allocated", 8 * MiB),
                                          (12 * MiB, "inactive", 0)], pool=(1, 0)),
        segment(M, 2 * MiB, 0, "small", [(MiB, "active_allocated", MiB),
                                         (MiB, "inactive", 0)], pool=(0, 1)),
        segment(G2, 2 * MiB, 0, "small", [(512 * 1024, "active_allocated", 512 * 1024),
                                          (1536 * 1024, "inactive", 0)], pool=(1, 0)),
    ]
    return {"segments": segments, "device_traces": [[]]}


def pools_trace():
    """Private pools in a trace: X's first incarnation is a default-pool one (freed), its second
    belongs to graph pool (1, 0) (alive at the end); Y is MemPool (0, 2)'s, named by the
    entries' own pool_id, and released."""
    D, X, Y = P, P + 32 * MiB, P + 64 * MiB
    g, m = (1, 0), (0, 2)
    trace = [
        entry("segment_alloc", X, 20 * MiB, 0),                    # 0
        entry("alloc", X, 8 * MiB, 0),                             # 1 default (freed later)
        entry("free_requested", X, 8 * MiB, 0),                    # 2
        entry("free_completed", X, 8 * MiB, 0),                    # 3
        entry("segment_free", X, 20 * MiB, 0),                     # 4
        entry("segment_alloc", X, 20 * MiB, 0),                    # 5 alive at the end: (1, 0)
        entry("alloc", X, 8 * MiB, 0),                             # 6 inferred (1, 0)
        entry("alloc", X + 8 * MiB, 4 * MiB, 0, pool_id=g),        # 7 named (1, 0)
        entry("free_requested", X + 8 * MiB, 4 * MiB, 0),          # 8
        entry("free_completed", X + 8 * MiB, 4 * MiB, 0),          # 9
        entry("segment_alloc", Y, 2 * MiB, 0, pool_id=m),          # 10
        entry("alloc", Y, 4096, 0, pool_id=m),                     # 11
        entry("free_requested", Y, 4096, 0, pool_id=m),            # 12
        entry("free_completed", Y, 4096, 0, pool_id=m),            # 13
        entry("segment_free", Y, 2 * MiB, 0, pool_id=m),           # 14 MemPool (0, 2) released
    ]
    segments = [
        segment(D, 20 * MiB, 0, "large", [(16 * MiB, "active_allocated", 16 * MiB),
                                          (4 * MiB, "inactive", 0)]),
        segment(X, 20 * MiB, 0, "large", [(8 * MiB, "active_allocated", 8 * MiB),
                                          (12 * MiB, "inactive", 0)], pool=g),
    ]
    settings = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                "garbage_collection_threshold": 0.0, "expandable_segments": False}
    return {"segments": segments, "device_traces": [trace], "allocator_settings": settings}


class System:
    """Pickles as a call of os.system: what a hostile snapshot would hold."""

    def __reduce__(self):
        import os as os_module
        return (os_module.system, ("echo pwned",))


def offset_of(data, predicate):
    for op, arg, pos in pickletools.genops(data):
        if predicate(op, arg):
            return pos
    raise SystemExit("offset not found")


def write(name, data):
    with open(name, "wb") as f:
        f.write(data)


def main():
    write("ok-torch-minimal.pickle", pickle.dumps(minimal(), protocol=4))
    with open("ok-torch-minimal.pickle.gz", "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
            f.write(pickle.dumps(minimal(), protocol=4))
    write("ok-torch-legacy.pickle", pickle.dumps(legacy(), protocol=2))
    write("ok-torch-list.pickle", pickle.dumps(bare_list(), protocol=5))
    write("ok-torch-list-proto0.pickle", pickle.dumps(bare_list(), protocol=0))
    write("ok-torch-list-proto1.pickle", pickle.dumps(bare_list(), protocol=1))
    write("ok-torch-expandable.pickle", pickle.dumps(expandable(), protocol=4))
    write("ok-torch-pools-state.pickle", pickle.dumps(pools_state(), protocol=4))
    write("ok-torch-pools-trace.pickle", pickle.dumps(pools_trace(), protocol=4))

    bad = []

    data = pickle.dumps({"segments": [], "device_traces": [[System()]]}, protocol=2)
    bad.append(("bad-torch-global.pickle", data, "FORBIDDEN",
                offset_of(data, lambda op, arg: op.name in ("GLOBAL", "STACK_GLOBAL"))))

    depth = 5000
    data = b"\x80\x02" + b"]" * depth + b"a" * (depth - 1) + b"."
    bad.append(("bad-torch-deep.pickle", data, "LIMIT", None))

    data = b"\x80\x02}X\xff\xff\xff\x7fsegments"
    bad.append(("bad-torch-length.pickle", data, "TRUNCATED", 3))

    snap = minimal()
    snap["device_traces"][0][5]["size"] = "4096"
    data = pickle.dumps(snap, protocol=4)
    bad.append(("bad-torch-type.pickle", data, "TYPE",
                offset_of(data, lambda op, arg: arg == "4096")))

    snap = minimal()
    snap["device_traces"][0][9]["size"] = -5
    data = pickle.dumps(snap, protocol=4)
    bad.append(("bad-torch-negative.pickle", data, "NUMBER",
                offset_of(data, lambda op, arg: arg == -5)))

    snap = minimal()
    snap["segments"][1]["stream"] = True
    data = pickle.dumps(snap, protocol=4)
    bad.append(("bad-torch-bool.pickle", data, "TYPE",
                offset_of(data, lambda op, arg: op.name == "NEWTRUE")))

    snap = minimal()
    snap["segments"][0]["blocks"][2]["size"] = 4.5
    data = pickle.dumps(snap, protocol=4)
    bad.append(("bad-torch-float.pickle", data, "TYPE",
                offset_of(data, lambda op, arg: arg == 4.5)))

    snap = minimal()
    del snap["device_traces"][0][0]["addr"]
    bad.append(("bad-torch-missing.pickle", pickle.dumps(snap, protocol=4), "SYNTAX", None))

    snap = minimal()
    snap["device_traces"][0][5]["size"] = 0
    bad.append(("bad-torch-zero.pickle", pickle.dumps(snap, protocol=4), "SIZE", None))

    snap = minimal()
    snap["device_traces"] = {"0": []}
    bad.append(("bad-torch-traces.pickle", pickle.dumps(snap, protocol=4), "TYPE", None))

    snap = minimal()
    snap["segments"][0]["device"] = 100000
    bad.append(("bad-torch-device.pickle", pickle.dumps(snap, protocol=4), "LIMIT", None))

    data = pickle.dumps(42, protocol=4)
    bad.append(("bad-torch-root.pickle", data, "TYPE", None))

    # Memo sharing: a small file whose device_traces refers to one trace 30 times (within the
    # unpickler's own walk limit, beyond the reader's budget of file size / 2).
    trace = [entry("alloc", A + 512 * i, 512, 0, i) for i in range(200)]
    data = pickle.dumps({"segments": [], "device_traces": [trace] * 30}, protocol=4)
    bad.append(("bad-torch-shared.pickle", data, "LIMIT", None))

    with open("torch-bad.txt", "w") as listing:
        listing.write("# file code byte-offset (written by gen-torch.py)\n")
        for name, data, code, offset in bad:
            write(name, data)
            listing.write("%s %s %s\n" % (name, code, "-" if offset is None else offset))


main()
