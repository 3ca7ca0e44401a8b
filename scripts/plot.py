#!/usr/bin/python3
"""Charts from `kiln bench ... --json` reports.

usage: scripts/plot.py [-o DIR] [--format png|svg|both] REPORT.json...

Each report is read by its "command" field:

- `kiln bench replay` and `kiln bench prepare`: builds per second against
  threads, with the ideal line (the one-thread rate times the threads), one
  series per kind of run (plain, bounded, isolated) -> scaling.*;
  `kiln bench replay` runs that carry an `rss_timeline`: resident memory over
  time against the memory budget, one line per thread count -> memory.*
- `kiln bench store`, one report per cache size: open time by scan against
  open by index (cold and warm) against the records file's size
  -> open.*
- `kiln bench store --prune-every P --max-size S` (its `size_timeline`): the
  records file's size over time as the cache is written, each prune's
  cut-off a drop, against the limit -> prune.*

Reports of other commands are named and left out. Needs matplotlib
(Debian: python3-matplotlib). Exit 0 when every chart the reports allow was
written, 2 for bad input (one line on stderr).
"""

import argparse
import json
import os
import sys

MIB = 1024.0 * 1024.0


def fail(msg):
    print(f"plot.py: {msg}", file=sys.stderr)
    sys.exit(2)


def finish(ax, fig, save, stem, xlabel, ylabel, title, fontsize=8, which="major"):
    """The labels, grid and legend every chart has, then the files."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3, which=which)
    ax.legend(fontsize=fontsize)
    save(fig, stem)
    return True


def load(paths):
    reports = []
    for p in paths:
        try:
            with open(p, encoding="utf-8") as f:
                r = json.load(f)
        except OSError as e:
            fail(f"{p}: cannot read: {e.strerror}")
        except json.JSONDecodeError as e:
            fail(f"{p}: not JSON: {e.msg} at line {e.lineno}")
        if not isinstance(r, dict) or r.get("schema") != "kiln/1":
            fail(f"{p}: not a kiln --json report (no schema kiln/1)")
        r["_path"] = p
        reports.append(r)
    return reports


def series_of(report):
    """(label, threads, rates) for each kind of run a bench report holds."""
    threads = report.get("threads") or []
    out = []
    for prefix, label in (("", "plain"), ("bounded_", "bounded"), ("isolated_", "isolated")):
        rates = report.get(prefix + "builds_per_s")
        if rates and len(rates) == len(threads):
            out.append((label, threads, rates))
    return out


def plot_scaling(plt, reports, save):
    benches = [r for r in reports if r["command"] in ("kiln bench replay", "kiln bench prepare")]
    if not benches:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    top = 1
    for r in benches:
        name = os.path.basename(r["_path"])
        for label, threads, rates in series_of(r):
            pts = [(t, v) for t, v in zip(threads, rates) if v is not None]
            if not pts:
                continue
            ax.plot([t for t, _ in pts], [v for _, v in pts], marker="o",
                    label=f"{name}: {label}")
            top = max(top, max(t for t, _ in pts))
            one = [v for t, v in pts if t == 1]
            if label == "plain" and one:
                xs = sorted(t for t, _ in pts)
                ax.plot(xs, [one[0] * t for t in xs], linestyle="--", color="grey",
                        label=f"{name}: ideal (1-thread rate x threads)")
    ax.set_xscale("log", base=2)
    ticks = sorted({t for r in benches for t in (r.get("threads") or [])})
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks])
    return finish(ax, fig, save, "scaling", "threads", "pipelines built per second",
                  "Scaling against threads", fontsize=7)


def plot_memory(plt, reports, save):
    runs = []
    for r in reports:
        if r["command"] != "kiln bench replay":
            continue
        for key in ("runs", "bounded_runs", "isolated_runs"):
            for run in r.get(key) or []:
                tl = run.get("rss_timeline")
                if tl and tl.get("ms"):
                    runs.append((r, key, run, tl))
    if not runs:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    budgets = set()
    for r, key, run, tl in runs:
        kind = key[:-len("runs")].rstrip("_") or "plain"
        n = run["threads"]
        # The plain runs are the reference: thin and dotted under the bounded ones.
        style = {"linestyle": ":", "alpha": 0.7} if kind == "plain" else {}
        ax.plot([m / 1000.0 for m in tl["ms"]], [b / MIB for b in tl["bytes"]],
                label=f"{n} thread{'' if n == 1 else 's'}, {kind}", **style)
        if run.get("memory_budget_bytes"):
            budgets.add(run["memory_budget_bytes"])
    for b in sorted(budgets):
        ax.axhline(b / MIB, color="red", linestyle="--",
                   label=f"budget {b / MIB:.0f} MiB (bounded runs)")
    return finish(ax, fig, save, "memory", "seconds into the run",
                  "resident memory, kiln and workers (MiB)", "Memory over time against the budget",
                  fontsize=7)


def plot_open(plt, reports, save):
    # A store that pruned as it wrote measured a pruned cache: its own chart.
    stores = sorted((r for r in reports
                     if r["command"] == "kiln bench store" and not r.get("size_timeline")),
                    key=lambda r: r.get("file_bytes", 0))
    if not stores:
        return False
    size = [r["file_bytes"] / MIB for r in stores]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, label, style in (("scan_open_cold", "scan, cold", "o-"),
                              ("index_open_cold", "index, cold", "s-"),
                              ("scan_open_warm", "scan, warm", "o--"),
                              ("index_open_warm", "index, warm", "s--")):
        ax.plot(size, [r["seconds"][key] * 1000.0 for r in stores], style, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    return finish(ax, fig, save, "open", "records file (MiB)", "open (ms)",
                  "Opening a cache: by scan against by index", which="both")


def plot_prune(plt, reports, save):
    runs = [r for r in reports if r["command"] == "kiln bench store" and r.get("size_timeline")]
    if not runs:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    limits = set()
    for r in runs:
        tl = r["size_timeline"]
        secs = [m / 1000.0 for m in tl["ms"]]
        size = [b / MIB for b in tl["file_bytes"]]
        every = tl["prune_every"]
        # Growth between the points, a vertical drop at each prune.
        line, = ax.plot(secs, size, "-", label=f"records file, a prune every {every} records")
        cuts = [i for i, after in enumerate(tl["after_prune"]) if after and i > 0
                and tl["file_bytes"][i] < tl["file_bytes"][i - 1]]
        if cuts:
            ax.plot([secs[i] for i in cuts], [size[i] for i in cuts], "v",
                    color=line.get_color(), label=f"prune cut-offs ({len(cuts)})")
        limits.add(tl["max_file_bytes"])
    for b in sorted(limits):
        ax.axhline(b / MIB, color="red", linestyle="--", label=f"limit {b / MIB:.0f} MiB")
    return finish(ax, fig, save, "prune", "seconds into writing", "records file (MiB)",
                  "Cache size over time with prune cut-offs")


def main():
    ap = argparse.ArgumentParser(description="Charts from kiln bench --json reports.")
    ap.add_argument("-o", "--out", default=".", help="folder for the charts (default .)")
    ap.add_argument("--format", choices=("png", "svg", "both"), default="both")
    ap.add_argument("reports", nargs="+", metavar="REPORT.json")
    args = ap.parse_args()
    reports = load(args.reports)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        fail("matplotlib is missing (Debian: apt-get install python3-matplotlib)")
    if not os.path.isdir(args.out):
        fail(f"{args.out}: not a folder")
    exts = ("png", "svg") if args.format == "both" else (args.format,)
    written = []

    def save(fig, stem):
        fig.tight_layout()
        for ext in exts:
            path = os.path.join(args.out, f"{stem}.{ext}")
            # Fixed metadata, so the same report gives the same SVG bytes.
            meta = {"Date": None} if ext == "svg" else {}
            fig.savefig(path, dpi=110, metadata=meta)
            written.append(path)
        plt.close(fig)

    known = ("kiln bench replay", "kiln bench prepare", "kiln bench store")
    for r in reports:
        if r["command"] not in known:
            print(f"plot.py: {r['_path']}: {r['command']} has no chart; left out", file=sys.stderr)
    plot_scaling(plt, reports, save)
    plot_memory(plt, reports, save)
    plot_open(plt, reports, save)
    plot_prune(plt, reports, save)
    for w in written:
        print(w)
    return 0


if __name__ == "__main__":
    sys.exit(main())
