"""plots.py — the PNG plots of a benchmark run (run by bench/run-bench with the
matplotlib of bench/.venv).

usage: plots.py RESULTS.csv OUT_DIR   (prints the path of every PNG it writes)

- family-FAMILY.png: per workload, each allocator's median time and peak RSS
  relative to glibc (log scale, so 2x slower and 2x faster look alike, unless
  every ratio is within a narrow range);
- scaling-FAMILY.png: time against threads (1, 2, 4, 8...) for every workload
  run at several thread counts;
- sweep-WORKLOAD-METRIC.png: a NAME@X metric against X on log-log axes (the
  malloc/free size sweep, the large tier's size sweep).
"""
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402

COLORS = {"glibc": "#7f7f7f", "jemalloc": "#1f77b4", "tcmalloc": "#2ca02c", "mimalloc": "#9467bd",
          "strata": "#d62728"}
EXTRA = ["#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]


def color(a, allocs):
    if a in COLORS:
        return COLORS[a]
    extras = [x for x in allocs if x not in COLORS]
    return EXTRA[extras.index(a) % len(EXTRA)]


def ratio_axis(ax):
    """Ratios on a log scale (2x slower and 2x faster look alike), with ticks
    written 0.5, 1, 2; a narrow range (under 4x) reads better linear from 0."""
    lo, hi = ax.get_ylim()
    if lo > 0 and hi / lo < 4:
        ax.set_yscale("linear")
        ax.set_ylim(bottom=0)
        return
    plain_log_axis(ax.yaxis)


def plain_log_axis(axis):
    lo, hi = axis.get_view_interval()
    wide = lo > 0 and hi / lo > 1e4
    axis.set_major_locator(LogLocator(base=10, subs=(1.0,) if wide else (1.0, 2.0, 5.0), numticks=40))
    axis.set_major_formatter(FuncFormatter(lambda v, _: "%g" % v))
    axis.set_minor_formatter(NullFormatter())


def safe(s):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s)


def family_chart(t, fam, out_dir):
    names = [n for n in t.workloads if t.info[n][0] == fam]
    ref = "glibc" if "glibc" in t.allocators else t.allocators[0]
    allocs = [a for a in t.allocators if any(t.cell(n, a) for n in names)]
    fig, axes = plt.subplots(2, 1, figsize=(max(7, 0.25 * len(allocs) * len(names) + 3), 7.5), sharex=True)
    width = 0.8 / len(allocs)
    for ax, what, label in ((axes[0], "time", "time"), (axes[1], "rss", "peak RSS")):
        every = []
        for i, a in enumerate(allocs):
            xs, ys = [], []
            for k, n in enumerate(names):
                v, r = t.value(n, a, what), t.value(n, ref, what)
                if v is not None and r:
                    xs.append(k + (i - (len(allocs) - 1) / 2) * width)
                    ys.append(v / r)
            ax.bar(xs, ys, width=width, label=a, color=color(a, t.allocators))
            every += ys
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        if every:   # bars start at the bottom of the axis: make it below the smallest ratio
            ax.set_ylim(min(min(every), 1.0) / 1.3, max(max(every), 1.0) * 1.3)
        ratio_axis(ax)
        ax.set_ylabel("%s ÷ %s%s" % (label, ref, " (log)" if ax.get_yscale() == "log" else ""))
        ax.grid(axis="y", which="both", alpha=0.3)
    axes[1].set_xticks(range(len(names)))
    axes[1].set_xticklabels(names, rotation=30, ha="right")
    axes[0].set_title("%s: median time and peak RSS relative to %s (lower is better)" % (fam, ref), pad=28)
    axes[0].legend(ncol=len(allocs), fontsize="small", loc="lower center", bbox_to_anchor=(0.5, 1.0),
                   frameon=False)
    fig.tight_layout()
    path = os.path.join(out_dir, "family-%s.png" % safe(fam))
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def scaling_chart(t, fam, out_dir):
    bases = {}
    for n in t.workloads:
        f, base, threads, _ = t.info[n]
        if f == fam and threads is not None:
            bases.setdefault(base, []).append((threads, n))
    bases = {b: sorted(v) for b, v in bases.items() if len(v) > 1}
    if not bases:
        return None
    cols = min(3, len(bases))
    rows = (len(bases) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(max(7.0, 4.6 * cols), 3.6 * rows), squeeze=False)
    for k, (base, pts) in enumerate(sorted(bases.items())):
        ax = axes[k // cols][k % cols]
        for a in t.allocators:
            xs = [th for th, n in pts if t.value(n, a, "time") is not None]
            ys = [t.value(n, a, "time") for th, n in pts if t.value(n, a, "time") is not None]
            if xs:
                ax.plot(xs, ys, marker="o", label=a, color=color(a, t.allocators))
        ax.set_xscale("log", base=2)
        ax.set_xticks([th for th, _ in pts])
        ax.set_xticklabels([str(th) for th, _ in pts])
        ax.set_ylim(bottom=0)
        ax.set_title(base)
        ax.set_xlabel("threads")
        ax.set_ylabel("time (s)")
        ax.grid(alpha=0.3)
    for k in range(len(bases), rows * cols):
        axes[k // cols][k % cols].axis("off")
    axes[0][0].legend(fontsize="small")
    fig.suptitle("%s: time against threads (same total work; 2 cores here)" % fam)
    fig.tight_layout()
    path = os.path.join(out_dir, "scaling-%s.png" % safe(fam))
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def sweep_charts(t, out_dir):
    paths = []
    for n in t.workloads:
        sweeps = {}
        for a in t.allocators:
            c = t.cell(n, a)
            if not c:
                continue
            for m in c.metrics:
                for key in m:
                    mm = report.SWEEP.match(key)
                    if mm:
                        sweeps.setdefault(mm.group(1), set()).add((float(mm.group(2)), key))
        for base, pts in sorted(sweeps.items()):
            pts = sorted(pts)
            fig, ax = plt.subplots(figsize=(7.5, 4.8))
            dropped = False
            for a in t.allocators:
                c = t.cell(n, a)
                if not c:
                    continue
                xy = [(x, c.metric(key)) for x, key in pts if c.metric(key) is not None]
                if any(v <= 0 for _, v in xy):
                    dropped = True
                xy = [(x, v) for x, v in xy if v > 0]  # a log axis has no zero
                if xy:
                    ax.plot([p[0] for p in xy], [p[1] for p in xy], marker=".", label=a, color=color(a, t.allocators))
            ax.set_xscale("log", base=2)
            # Readable sizes (16 B, 4 KiB, 1 MiB) at powers of 2, thinned to about 10.
            ax.xaxis.set_major_locator(LogLocator(base=2, subs=(1.0,), numticks=11))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: report.human_size(v)))
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_yscale("log")
            plain_log_axis(ax.yaxis)
            ax.set_xlabel("requested size")
            ax.set_ylabel(base + " (log)")
            ax.set_title("%s: %s against size (log-log%s)" % (n, base, "; values of 0 not drawn" if dropped else ""))
            ax.grid(which="both", alpha=0.3)
            ax.legend(fontsize="small")
            fig.tight_layout()
            path = os.path.join(out_dir, "sweep-%s-%s.png" % (safe(n), safe(base)))
            fig.savefig(path, dpi=90)
            plt.close(fig)
            paths.append(path)
    return paths


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    t = report.Table(report.read_csv(sys.argv[1]))
    os.makedirs(sys.argv[2], exist_ok=True)
    paths = []
    for fam in t.families():
        paths.append(family_chart(t, fam, sys.argv[2]))
        p = scaling_chart(t, fam, sys.argv[2])
        if p:
            paths.append(p)
    paths += sweep_charts(t, sys.argv[2])
    for p in paths:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
