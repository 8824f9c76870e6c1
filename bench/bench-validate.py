#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Times `fragsim validate` against a Python model of the same allocator, whole processes.

For each snapshot, RUNS runs of `fragsim validate FILE` and of `python3 MODEL/replay.py FILE`
(the reference model: the native CUDA caching allocator, no expandable segments), each timed in
CPU time (user + system of the child, from wait4), interleaved so that both see the same load.
Prints the minimum and the median per file, their sums over the files and the ratios
(model / fragsim).  Without FILEs: the four largest snapshots of the shared traces that the
model covers: recorded by CUDA (no frame in torch_npu), without expandable segments, with a
trace.  Tooling only: fragsim never runs Python.

usage: bench-validate.py [--runs N] [--json] --fragsim PROGRAM --model DIR --traces DIR [FILE...]
"""
import argparse
import json
import os
import pickle
import subprocess
import sys


class Restricted(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError("global " + module + "." + name)


def covered(path):
    """Whether the model covers the snapshot: CUDA, native segments, a trace."""
    try:
        with open(path, "rb") as f:
            snap = Restricted(f).load()
    except Exception:
        return False
    if not isinstance(snap, dict) or not any(snap.get("device_traces") or []):
        return False
    settings = snap.get("allocator_settings") or {}
    if "expandable_segments:true" in str(settings.get("PYTORCH_CUDA_ALLOC_CONF", "")).lower():
        return False
    if str(settings.get("expandable_segments", "")).lower() == "true":
        return False
    if any(s.get("is_expandable") for s in snap.get("segments") or []):
        return False
    for trace in snap["device_traces"]:
        for entry in trace:
            for frame in entry.get("frames") or []:
                if "torch_npu" in str(frame.get("filename", "")):
                    return False
    return True


def cpu_seconds(argv):
    """The CPU time of one run of argv (its output discarded); it must exit with 0."""
    pid = os.posix_spawn(argv[0], argv, os.environ,
                         file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("bench-validate: %s exited with %d" % (" ".join(argv), status))
    return usage.ru_utime + usage.ru_stime


def stats(times):
    times = sorted(times)
    return times[0], times[len(times) // 2]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--fragsim", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--traces", required=True)
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    files = args.files
    if not files:
        names = [os.path.join(args.traces, n) for n in os.listdir(args.traces)
                 if n.endswith((".pickle", ".pkl"))]
        names.sort(key=os.path.getsize, reverse=True)
        files = [n for n in names if covered(n)][:4]
    python = sys.executable
    model = os.path.join(args.model, "replay.py")
    rows = []
    for path in files:
        fragsim, python_times = [], []
        for _ in range(args.runs):
            fragsim.append(cpu_seconds([args.fragsim, "validate", path]))
            python_times.append(cpu_seconds([python, model, path]))
        rows.append({"file": os.path.basename(path), "bytes": os.path.getsize(path),
                     "fragsim": stats(fragsim), "model": stats(python_times)})
    total = {k: tuple(sum(r[k][i] for r in rows) for i in (0, 1)) for k in ("fragsim", "model")}
    if args.json:
        out = {"files": [{"file": r["file"], "bytes": r["bytes"],
                          "fragsim_seconds": r["fragsim"][0], "fragsim_median": r["fragsim"][1],
                          "model_seconds": r["model"][0], "model_median": r["model"][1]}
                         for r in rows],
               "aggregate": {"files": len(rows),
                             "fragsim_seconds": total["fragsim"][0],
                             "fragsim_median": total["fragsim"][1],
                             "model_seconds": total["model"][0],
                             "model_median": total["model"][1],
                             "ratio": total["model"][0] / total["fragsim"][0],
                             "ratio_median": total["model"][1] / total["fragsim"][1]}}
        print(json.dumps(out, indent=1))
        return
    print("%d runs each; CPU time (user + system) of whole processes, min / median" % args.runs)
    for r in rows + [dict(file="aggregate (%d files)" % len(rows), **total)]:
        f, m = r["fragsim"], r["model"]
        print("%s\n  fragsim validate %9.1f ms %9.1f ms\n  Python model     %9.1f ms %9.1f ms\n"
              "  ratio            %8.1fx %9.1fx" % (r["file"], f[0] * 1e3, f[1] * 1e3,
                                                  m[0] * 1e3, m[1] * 1e3,
                                                  m[0] / f[0], m[1] / f[1]))


if __name__ == "__main__":
    main()
