"""`stax report STATS.json`: plots what `stax run --stats-json` recorded per call.

The figure (a PNG, drawn with matplotlib) has two panels over the calls in order:

* the latency of every call (log scale), coloured by how it ran (every group compiled, some,
  none), with a vertical line where compiles landed (in the call, for sync compiles, or
  between it and the previous one, for background ones), labelled with their count and
  compile time, and the warm-up calls shaded;
* hit/miss over time: the share of fully compiled, partly compiled and interpreted calls among
  the last WINDOW calls.

The per-call log is the "per_call" member of the stats file (src/tools/cli_call_log.c);
files written before it existed are refused with a message saying so.
"""

import argparse
import json
import pathlib
import sys

import numpy as np

__all__ = ["main", "plot_data", "read_calls"]

HOW = ("compiled", "partial", "interpreted")
COLOURS = {"compiled": "#2a9d3a", "partial": "#e89a1c", "interpreted": "#c0392b"}
LABELS = {"compiled": "compiled (every group)", "partial": "partly compiled",
          "interpreted": "interpreted"}


class ReportError(Exception):
    """A stats file that cannot be plotted, or a missing plotting library."""


def read_calls(path):
    """The stats file's JSON and its per-call log as numpy arrays: start_s, seconds, ran
    (strings), compiles, compile_ms, warmup."""
    path = pathlib.Path(path)
    try:
        stats = json.loads(path.read_text())
    except OSError as error:
        raise ReportError(f"cannot read {path}: {error.strerror}") from error
    except ValueError as error:
        raise ReportError(f"{path} is not JSON ({error})") from error
    log = stats.get("per_call") if isinstance(stats, dict) else None
    if not isinstance(log, dict) or "records" not in log:
        raise ReportError(f"{path} has no per-call log ('per_call'): write it with "
                          "'stax run MODEL ... --stats-json FILE' of this stax version")
    fields = log.get("fields")
    expected = ["start_s", "seconds", "ran", "compiles", "compile_ms", "warmup"]
    if fields != expected:
        raise ReportError(f"{path}: per_call fields are {fields}, expected {expected}")
    records = log["records"]
    if not records:
        raise ReportError(f"{path}: the run recorded no calls")
    for i, record in enumerate(records):
        if len(record) != len(expected) or record[2] not in HOW:
            raise ReportError(f"{path}: per_call record {i} is malformed: {record!r}")
    columns = list(zip(*records))
    calls = {
        "start_s": np.array(columns[0], dtype=np.float64),
        "seconds": np.array(columns[1], dtype=np.float64),
        "ran": np.array(columns[2]),
        "compiles": np.array(columns[3], dtype=np.int64),
        "compile_ms": np.array(columns[4], dtype=np.float64),
        "warmup": np.array(columns[5], dtype=bool),
    }
    return stats, calls


def plot_data(stats, calls, window=None):
    """What the figure shows, as numbers: per call its latency in ms and how it ran; the
    calls where compiles landed (index, count, ms); the trailing-window shares of each way
    of running; and the totals."""
    count = len(calls["seconds"])
    if window is None:
        window = min(count, max(10, count // 50))
    if not isinstance(window, int) or window < 1:
        raise ReportError(f"the window must be a number of calls >= 1, not {window!r}")
    shares = {}
    for how in HOW:
        hits = np.cumsum(calls["ran"] == how)
        before = np.concatenate([np.zeros(min(window, count), np.int64), hits[:-window]]) \
            if window < count else np.zeros(count, np.int64)
        span = np.minimum(np.arange(1, count + 1), window)
        shares[how] = (hits - before) / span
    landed = np.nonzero(calls["compiles"])[0]
    total = stats.get("total", {})
    during = int(calls["compiles"].sum())
    return {
        "call": np.arange(count),
        "latency_ms": calls["seconds"] * 1e3,
        "ran": calls["ran"],
        "warmup": calls["warmup"],
        "compile_calls": [(int(i), int(calls["compiles"][i]), float(calls["compile_ms"][i]))
                          for i in landed],
        "window": window,
        "shares": shares,
        "counts": {how: int((calls["ran"] == how).sum()) for how in HOW},
        "compiles_during": during,
        "compiles_after": int(total.get("compiles", during) + total.get("failures", 0)) - during,
        "dropped": int(stats["per_call"].get("dropped", 0)),
        "duration_s": float(calls["start_s"][-1] + calls["seconds"][-1]),
    }


def _pyplot():
    try:
        import matplotlib
    except ImportError as error:
        raise ReportError("stax report draws with matplotlib, which is not installed: "
                          "pip install matplotlib (or pip install 'stax[report]')") from error
    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt
    return plt


def draw(data, out, title):
    """Writes the two-panel figure to out (PNG)."""
    plt = _pyplot()
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(11, 7), sharex=True,
                                         gridspec_kw={"height_ratios": [3, 2]})
    call, latency = data["call"], data["latency_ms"]
    if data["warmup"].any():
        last = int(np.nonzero(data["warmup"])[0][-1])
        for axis in (top, bottom):
            axis.axvspan(-0.5, last + 0.5, color="#dddddd", zorder=0)
        top.text(last / 2, 0.98, "warm-up", transform=top.get_xaxis_transform(), ha="center",
                 va="top", fontsize=8, color="#555555")
    for how in HOW:
        chosen = data["ran"] == how
        if chosen.any():
            top.scatter(call[chosen], latency[chosen], s=9, color=COLOURS[how],
                        label=f"{LABELS[how]} ({int(chosen.sum())})", zorder=3)
    for index, count, ms in data["compile_calls"]:
        top.axvline(index, color="#3b5bdb", linestyle="--", linewidth=0.8, zorder=2)
        top.text(index, 1.0, f" {count} compile{'s' if count > 1 else ''}, {ms:.0f} ms",
                 transform=top.get_xaxis_transform(), rotation=90, va="top", ha="right",
                 fontsize=7, color="#3b5bdb")
    top.set_yscale("log")
    top.set_ylabel("latency per call (ms)")
    top.legend(loc="upper right", fontsize=8)
    top.grid(True, which="both", axis="y", alpha=0.3)
    bottom.stackplot(call, *(data["shares"][how] for how in HOW),
                     colors=[COLOURS[h] for h in HOW], labels=[LABELS[h] for h in HOW])
    bottom.set_ylim(0, 1)
    bottom.set_ylabel(f"share of the last {data['window']} calls")
    bottom.set_xlabel("call (in order)")
    bottom.legend(loc="lower right", fontsize=8)
    notes = [f"{len(call)} calls in {data['duration_s']:.3g} s",
             f"{len(data['compile_calls'])} compile landings during the run"]
    if data["compiles_after"] > 0:
        notes.append(f"{data['compiles_after']} compiles landed after the last call")
    if data["dropped"]:
        notes.append(f"{data['dropped']} later calls not logged")
    figure.suptitle(f"{title}\n{'; '.join(notes)}", fontsize=10)
    figure.tight_layout()
    figure.savefig(out, format="png", dpi=110)
    plt.close(figure)


def main(argv=None):
    """The command: returns the exit status (0, 1 for a file that cannot be plotted, 2 for
    bad arguments)."""
    parser = argparse.ArgumentParser(
        prog="stax report",
        description="Plots a 'stax run --stats-json' file as a PNG: the latency of every "
                    "call, coloured by how it ran, with the calls where compiles landed "
                    "marked; and the share of fully compiled, partly compiled and "
                    "interpreted calls over the last WINDOW calls. Needs matplotlib.")
    parser.add_argument("stats", help="the JSON file 'stax run --stats-json FILE' wrote")
    parser.add_argument("-o", "--output", help="the PNG to write (default: STATS with .png)")
    parser.add_argument("--window", type=int, default=None,
                        help="calls per share in the lower panel (default: a fiftieth of "
                             "the calls, at least 10)")
    parser.add_argument("--title", default=None, help="the figure's title (default: the file)")
    args = parser.parse_args(argv)
    out = pathlib.Path(args.output) if args.output else pathlib.Path(args.stats).with_suffix(".png")
    try:
        stats, calls = read_calls(args.stats)
        data = plot_data(stats, calls, args.window)
        draw(data, out, args.title or pathlib.Path(args.stats).name)
    except ReportError as error:
        sys.stderr.write(f"stax report: {error}\n")
        return 1
    counts = data["counts"]
    print(f"wrote {out}: {len(data['call'])} calls ({counts['compiled']} compiled, "
          f"{counts['partial']} partly, {counts['interpreted']} interpreted); "
          f"{data['compiles_during']} compiles landed during the run, "
          f"{max(data['compiles_after'], 0)} after it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
