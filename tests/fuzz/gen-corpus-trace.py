#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the seed corpus of fuzz-trace into corpus-trace/, and its dictionary trace.dict (run
from this directory).

Copies the hand-made reader fixtures of tests/data/traces/ (text traces, PyTorch snapshots written
by gen-torch.py, RMM logs; a few bad ones too, for the error paths) and adds small made-up files
for what those leave out: multi-device snapshots with annotations and settings, untimed traces,
unknown actions, reordered RMM columns, gzip of each format.  Everything here is made up; no
real snapshot goes into the corpus.
"""
import gzip
import os
import pickle
import shutil

MiB = 1 << 20
T0 = 1_700_000_000_000_000
OUT = "corpus-trace"
DATA = os.path.join("..", "data", "traces")

COPIES = {
    "text-comments-crlf.trace": "ok-comments-crlf.trace",
    "text-deferred.trace": "ok-deferred.trace",
    "text-design-example.trace": "ok-design-example.trace",
    "text-gzip.trace.gz": "ok-gzip.trace.gz",
    "binary-design-example.fsb": "ok-design-example.fsb",
    "text-golden-fragment.trace": "golden-fragment.trace",
    "text-golden-oom.trace": "golden-oom.trace",
    "text-bad-duplicate.trace": "bad-duplicate.trace",
    "text-bad-time-backwards.trace": "bad-time-backwards.trace",
    "text-bad-nul.trace": "bad-nul.trace",
    "text-bad-overflow.trace": "bad-overflow.trace",
    "torch-minimal.pickle": "ok-torch-minimal.pickle",
    "torch-minimal.pickle.gz": "ok-torch-minimal.pickle.gz",
    "torch-legacy.pickle": "ok-torch-legacy.pickle",
    "torch-list.pickle": "ok-torch-list.pickle",
    "torch-list-proto0.pickle": "ok-torch-list-proto0.pickle",
    "torch-list-proto1.pickle": "ok-torch-list-proto1.pickle",
    "torch-expandable.pickle": "ok-torch-expandable.pickle",
    "torch-bad-shared.pickle": "bad-torch-shared.pickle",
    "torch-bad-missing.pickle": "bad-torch-missing.pickle",
    "rmm-basic.csv": "ok-rmm-basic.csv",
    "rmm-basic.csv.gz": "ok-rmm-basic.csv.gz",
    "rmm-empty.csv": "ok-rmm-empty.csv",
    "rmm-epoch.csv": "ok-rmm-epoch.csv",
    "rmm-bad-fields.csv": "bad-rmm-fields.csv",
}


def entry(action, addr, size, stream=0, t=None, **extra):
    e = {"action": action, "addr": addr, "size": size, "stream": stream}
    if t is not None:
        e["time_us"] = T0 + t
    e.update(extra)
    return e


def block(addr, size, state, requested):
    return {"address": addr, "size": size, "requested_size": requested, "state": state}


def segment(addr, size, blocks, device=0, stream=0, kind="large", expandable=False):
    return {"device": device, "address": addr, "total_size": size, "stream": stream,
            "segment_type": kind, "is_expandable": expandable, "blocks": blocks}


def multi_device():
    """Two timed devices and an empty one between them, annotations, every setting form."""
    A = 0x7F0000000000
    B = 0x7E0000000000
    d0 = [entry("segment_alloc", A, 20 * MiB, 0, 0),
          entry("alloc", A, 3 * MiB, 0, 1),
          entry("alloc", A + 3 * MiB, 512, 0, 2),
          entry("free_requested", A, 3 * MiB, 0, 3),
          entry("free_completed", A, 3 * MiB, 0, 5),
          entry("oom", 0, 64 * MiB, 0, 6, device_free=1024),
          entry("segment_free", A + 40 * MiB, 2 * MiB, 0, 7),
          entry("segment_free", A + 60 * MiB, 2 * MiB, 0, 7),
          entry("snapshot", 0, 0, 0, 8)]
    d2 = [entry("alloc", B, 1000, 3, 4), entry("free_requested", B, 1000, 3, 2),
          entry("free_completed", B, 1000, 3, 9)]
    segments = [segment(A, 20 * MiB, [block(A + 3 * MiB, 512, "active_allocated", 500),
                                      block(A + 3 * MiB + 512, 17 * MiB - 512, "inactive", 0)]),
                segment(B, 2 * MiB, [block(B, 2 * MiB, "inactive", 0)], device=2, stream=3,
                        kind="small")]
    annotations = [{"stage": "START", "name": "fwd", "device": 0, "time_us": T0 + 2},
                   {"stage": "END", "name": "fwd", "device": 0, "time_us": T0 + 100},
                   {"stage": "START", "name": "gone", "device": 1, "time_us": T0}]
    settings = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": 64 * MiB,
                "garbage_collection_threshold": 0.6, "expandable_segments": False,
                "roundup_power2_divisions": {"1": 4, "64": 8}, "pinned": (1, 2.5, None, b"x")}
    return {"segments": segments, "device_traces": [d0, [], d2], "allocator_settings": settings,
            "external_annotations": annotations}


def untimed():
    """No time_us anywhere, an unknown action, blocks without addresses, history sizes."""
    A = 0x7F1000000000
    trace = [entry("alloc", A + 2 * MiB, 4096), entry("future_action", A, 1),
             entry("free_requested", A, 2 * MiB), entry("free_completed", A, 2 * MiB),
             entry("segment_unmap", A + 4 * MiB, 2 * MiB), entry("segment_map", A + 4 * MiB, 2 * MiB)]
    segments = [{"device": 0, "address": A, "total_size": 8 * MiB, "stream": 0,
                 "blocks": [{"size": 2 * MiB, "state": "inactive"},
                            {"size": 4096, "state": "active_allocated",
                             "history": [{"real_size": 4000}]},
                            {"size": 6 * MiB - 4096, "state": "active_pending_free"}]}]
    return {"segments": segments, "device_traces": [trace]}


def extremes():
    """Valid but extreme values for the fuzzer to push over the edge: addresses and streams near
    2^64, the last device index, a negative clock, settings of every odd type."""
    top = (1 << 64) - 8 * MiB
    trace = [entry("alloc", top + 2 * MiB, MiB, (1 << 64) - 1, -5),
             entry("free_requested", top + 2 * MiB, MiB, (1 << 64) - 1, 0),
             entry("free_completed", top + 2 * MiB, MiB, (1 << 64) - 1, 1 << 40),
             entry("segment_free", top - 2 * MiB, 2 * MiB, 0, 1 << 41)]
    segments = [segment(top, 4 * MiB, [block(top, 2 * MiB, "active_pending_free", 2 * MiB)],
                        device=1023),
                segment(0, 1 << 60, [block(0, 1 << 60, "active_allocated", 1 << 60)],
                        device=1023)]
    settings = {"PYTORCH_CUDA_ALLOC_CONF": None, "max_split_size": (1 << 64) - 1,
                "garbage_collection_threshold": float("inf"), "roundup_power2_divisions": 4,
                "expandable_segments": True, "nested": {1: [1 << 70, -1.5e300], "k": ()}}
    traces = [[] for _ in range(1023)] + [trace]
    return {"segments": segments, "device_traces": traces, "allocator_settings": settings,
            "external_annotations": [{"stage": "END", "name": "x", "device": 1023,
                                      "time_us": T0 + (1 << 41)}]}


def huge_ranges():
    """Two adjacent mapped ranges of 2^60 bytes: merged, too large for an initial state."""
    E = 1 << 61
    return {"segments": [segment(E, 1 << 60, [], expandable=True),
                         segment(E + (1 << 60), 1 << 60, [], expandable=True)],
            "device_traces": [[entry("segment_map", E, 1 << 20, 0, 0)]]}


def rmm_logs():
    yield "rmm-reordered.csv", (
        "Stream,Size,Pointer,Action,Time,Thread,Extra\n"
        "0x1,256,0x10,allocate,10:00:00.000001,7,a\n"
        "0x1,256,0x20,allocate,10:00:00.000002,7,b\n"
        "0x1,256,0x10,deallocate,10:00:00.000001,7,c\n"
        "0x1,0,(nil),allocate failure,10:00:00.5,7,d\n"
        "0x1,256,0x20,free,10:00:01,7,e\n").encode()
    yield "rmm-bom-crlf.csv", (
        "\ufeffThread,Time,Action,Pointer,Size,Stream\r\n"
        "1,23:59:59.9,allocate,0xA0,64,0x0\r\n"
        "1,00:00:00.1,free,0xa0,64,0x0\r\n"
        "1,00:00:00.2,reallocate,0xb0,64,0x0\r\n").encode("utf-8")


# The dictionary: keywords of the text format, RMM columns and actions, PyTorch snapshot keys and
# values (plain, and as the pickle short strings of protocols 2 and later), magic numbers.
DICT_TEXT = ["fragsim-trace v1", "fragsim-trace ", "alloc", "free", "free_requested",
             "free_completed", "empty_cache", "mark", "recorded_oom", "inferred",
             "18446744073709551615",
             "1152921504606846976", "1152921504606846977"]
DICT_RMM = ["Thread,Time,Action,Pointer,Size,Stream", "Thread,", "Time", "Action", "Pointer",
            "Size", "Stream", "allocate", "deallocate", "allocate failure", "(nil)", "0x",
            "23:59:59.999999", "00:00:00.000001", "1634567890.123456", "\ufeff"]
DICT_TORCH = ["segments", "device_traces", "allocator_settings", "external_annotations", "device",
              "address", "total_size", "stream", "segment_type", "is_expandable", "blocks", "size",
              "requested_size", "state", "history", "real_size", "active_allocated",
              "active_pending_free", "inactive", "action", "addr", "time_us", "device_free",
              "stage", "name", "START", "END", "PYTORCH_CUDA_ALLOC_CONF", "expandable_segments",
              "max_split_size", "garbage_collection_threshold", "roundup_power2_divisions",
              "small", "large", "alloc", "free_requested", "free_completed", "segment_alloc",
              "segment_free", "segment_map", "segment_unmap", "snapshot", "oom"]
DICT_BYTES = [("gzip", b"\x1f\x8b\x08\x00"), ("pickle_proto4", b"\x80\x04\x95"),
              ("pickle_proto2", b"\x80\x02}q\x00"), ("pickle_stop", b"."), ("pickle_mark", b"("),
              ("pickle_setitems", b"u"), ("pickle_appends", b"e"), ("pickle_empty_list", b"]"),
              ("pickle_empty_dict", b"}"), ("pickle_none", b"N"), ("pickle_true", b"\x88"),
              ("pickle_binint", b"J"), ("pickle_long1", b"\x8a\x08"),
              ("pickle_memoize", b"\x94"), ("pickle_binget", b"h"),
              ("binary_magic", b"fragsim-trace binary v1\n")]


def dictionary():
    def escape(data):
        return "".join(chr(c) if 32 <= c < 127 and chr(c) not in '"\\' else "\\x%02x" % c
                       for c in data)

    entries = [("text", w.encode()) for w in DICT_TEXT] + [("rmm", w.encode()) for w in DICT_RMM]
    for key in DICT_TORCH:
        entries += [("torch", key.encode()),
                    ("torch_pickled", b"\x8c" + bytes([len(key)]) + key.encode())]
    entries += DICT_BYTES
    lines = ["# SPDX-License-Identifier: MIT",
             "# libFuzzer dictionary of fuzz-trace, written by gen-corpus-trace.py.", ""]
    lines += ['%s_%d="%s"' % (tag, i + 1, escape(data)) for i, (tag, data) in enumerate(entries)]
    return "\n".join(lines) + "\n"


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, source in COPIES.items():
        shutil.copyfile(os.path.join(DATA, source), os.path.join(OUT, name))
    write("torch-multi-device.pickle", pickle.dumps(multi_device(), protocol=4))
    write("torch-untimed.pickle", pickle.dumps(untimed(), protocol=2))
    write("torch-untimed-proto0.pickle", pickle.dumps(untimed(), protocol=0))
    write("torch-extremes.pickle", pickle.dumps(extremes(), protocol=4))
    write("torch-huge-ranges.pickle", pickle.dumps(huge_ranges(), protocol=4))
    for name, data in rmm_logs():
        write(name, data)
    write("rmm-reordered.csv.gz", gzip.compress(dict(rmm_logs())["rmm-reordered.csv"], mtime=0))
    write("text-marks.trace", b"fragsim-trace v1\n0 mark start\n5 alloc 1 1 0\n5 alloc 2 "
          b"1152921504606846976 1\n6 free_requested 2 1\n6 free_completed 2 1\n7 empty_cache\n"
          b"8 free 1\n9 free 1\n10 mark \tend\t\n11 alloc 3 4096 0 recorded_oom\n"
          b"11 free 3 0 recorded_oom\n12 empty_cache inferred\n")
    # binary-marks.fsb is `fragsim convert text-marks.trace binary-marks.fsb`.
    with open("trace.dict", "w") as f:
        f.write(dictionary())


if __name__ == "__main__":
    main()
