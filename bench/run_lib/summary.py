"""The loader comparison's summary (harness.py, docs/benchmarks.md): from the
records of a run to summary.csv, summary.md (tables per data set and rate,
and the checks) and one throughput plot per data set."""
import csv
import json
import math
import os

from bench_common import LOCAL_LOADERS, NETWORK_LOADERS, log

COLUMNS = ["dataset", "loader", "rtt_ms", "rate_mbit", "images_per_s", "mb_per_s", "fraction_of_rtt0",
           "cpu_s_per_gb", "p50_wait_ms", "p99_wait_ms", "peak_rss_mb"]


def series_of(records, cfg):
    """Sets the RTTs, rate series and rate-capped data sets that records cover."""
    cfg.rtts = sorted({r["rtt_ms"] for r in records})
    cfg.rates = sorted({r["rate_mbit"] for r in records})
    cfg.rate_datasets = sorted({r["dataset"] for r in records if r["rate_mbit"]})


def load_records(run_dir):
    """A raw run's records (its merged-records.json when it was itself a merge)."""
    merged = os.path.join(run_dir, "merged-records.json")
    with open(merged if os.path.exists(merged) else os.path.join(run_dir, "records.json")) as f:
        return json.load(f)


def summarize(records, cfg, out, meta):
    """Writes summary.csv, summary.md and the plots into out; returns the rows."""
    datasets = [cfg.jpeg_name, cfg.fashion_name]
    loaders = [l for l in NETWORK_LOADERS + LOCAL_LOADERS if any(r["loader"] == l for r in records)]
    rows = summary_rows(records, cfg, datasets, loaders)
    os.makedirs(out, exist_ok=True)
    write_csv(rows, os.path.join(out, "summary.csv"))
    md = tables_markdown(rows, cfg, meta, datasets) + checks_markdown(records, cfg)
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    plot(rows, cfg, out, datasets, loaders)
    return rows


def summary_rows(records, cfg, datasets, loaders):
    """One row per (rate, dataset, loader, RTT) measured; local loaders repeat their one point at every RTT."""
    rows = []
    by = {}
    for r in records:
        by[(r["dataset"], r["loader"], r["rtt_ms"], r["rate_mbit"])] = r
    nan = float("nan")
    for rate in cfg.rates:
        for d in datasets:
            if rate and d not in cfg.rate_datasets:
                continue
            for l in loaders:
                for rtt in cfg.rtts:
                    local = l in LOCAL_LOADERS
                    r = by.get((d, l, 0 if local else rtt, 0 if local else rate))
                    if r is None:
                        continue
                    res = r.get("result") or {}
                    base = by.get((d, l, 0, 0 if local else rate), {}).get("result") or {}
                    ips = res.get("images_per_s", nan)
                    frac = ips / base["images_per_s"] if base.get("images_per_s") else nan
                    rows.append(dict(dataset=d, loader=l, rtt_ms=rtt, rate_mbit=rate, images_per_s=ips,
                                     mb_per_s=res.get("mb_per_s", nan), fraction_of_rtt0=frac,
                                     cpu_s_per_gb=res.get("cpu_s_per_gb", nan),
                                     p50_wait_ms=res.get("p50_wait_ms", nan),
                                     p99_wait_ms=res.get("p99_wait_ms", nan),
                                     peak_rss_mb=res.get("peak_rss_mb", nan)))
    return rows


def fmt(v, n):
    """v with n decimals (floats), as text (others); NaN as empty."""
    return "" if isinstance(v, float) and math.isnan(v) else (f"{v:.{n}f}" if isinstance(v, float) else str(v))


def write_csv(rows, path):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow([r["dataset"], r["loader"], r["rtt_ms"], r["rate_mbit"], fmt(r["images_per_s"], 1),
                        fmt(r["mb_per_s"], 2), fmt(r["fraction_of_rtt0"], 3), fmt(r["cpu_s_per_gb"], 3),
                        fmt(r["p50_wait_ms"], 2), fmt(r["p99_wait_ms"], 2), fmt(r["peak_rss_mb"], 1)])


def tables_markdown(rows, cfg, meta, datasets):
    """summary.md's title, run line and one table per data set and rate."""
    md = [f"# Loader comparison ({meta['mode']})", "",
          f"Run {meta['run']} on {meta['machine']}; load average {meta['load_start']} at the start, "
          f"{meta['load_end']} at the end. W = 4 MiB per connection; rate 0 = uncapped. "
          "Local loaders (torch-files, dali-files) read local files, no network: measured once and repeated "
          "at every RTT as a reference line.", ""]
    for rate in cfg.rates:
        for d in datasets:
            sel = [r for r in rows if r["dataset"] == d and r["rate_mbit"] == rate]
            if not sel:
                continue
            md += [f"## {d}, rate {'uncapped' if not rate else f'{rate} Mbit/s'}", "",
                   "| loader | RTT ms | images/s | MB/s | of RTT 0 | CPU s/GB | wait p50 ms | wait p99 ms | peak RSS MB |",
                   "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
            for r in sel:
                md.append(f"| {r['loader']} | {r['rtt_ms']} | {fmt(r['images_per_s'], 0)} | {fmt(r['mb_per_s'], 1)} | "
                          f"{fmt(r['fraction_of_rtt0'], 2)} | {fmt(r['cpu_s_per_gb'], 2)} | {fmt(r['p50_wait_ms'], 1)} | "
                          f"{fmt(r['p99_wait_ms'], 1)} | {fmt(r['peak_rss_mb'], 0)} |")
            md.append("")
    return md


def checks_markdown(records, cfg):
    """summary.md's checks: connections around the proxy, proxy bytes, load, notes."""
    md = ["## Checks", "",
          "Connections seen from each loader's process tree (ss -tnp every 0.5 s): `direct` = to the node or "
          "the S3 endpoint around the proxy (must be 0); proxy bytes = bytes the proxy moved from the server "
          "to the loader during the run, over the payload bytes the loader measured (>= 1: warm-up epochs, "
          "protocol overhead and read-ahead add to it).", "",
          "| dataset | loader | RTT ms | rate | direct | proxied | proxy bytes / measured | load before | load after | note |",
          "|---|---|---:|---:|---:|---:|---:|---|---|---|"]
    for r in records:
        if r["loader"] in LOCAL_LOADERS:
            md.append(f"| {r['dataset']} | {r['loader']} | - | - | - | - | - | {r['load_before']} | {r['load_after']} | "
                      f"{r.get('error', '')} |")
            continue
        res = r.get("result") or {}
        note = r.get("error", "")
        if res.get("partial_epochs"):
            note += f"{res['partial_epochs']} of {res['epochs']} measured epochs cut at {cfg.max_epoch_s:.0f} s"
        md.append(f"| {r['dataset']} | {r['loader']} | {r['rtt_ms']} | {r['rate_mbit']} | "
                  f"{len(r.get('direct_connections', []))} | {r.get('proxied_connections', '')} | "
                  f"{r.get('proxy_down_over_measured', '')} | {r['load_before']} | {r['load_after']} | {note} |")
    return md


def plot(rows, cfg, out, datasets, loaders):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib missing: no plots")
        return
    for d in datasets:
        fig, ax = plt.subplots(figsize=(8, 5))
        # One colour per loader; one line style and marker per rate series.
        styles = [("-", "o"), ("--", "s"), ("-.", "^"), (":", "v")]
        for i, l in enumerate(loaders):
            for k, rate in enumerate(cfg.rates):
                sel = [r for r in rows if r["dataset"] == d and r["loader"] == l and r["rate_mbit"] == rate]
                if not sel:
                    continue
                local = l in LOCAL_LOADERS
                if local and rate:
                    continue
                xs = [r["rtt_ms"] for r in sel]
                key = "mb_per_s" if d == cfg.jpeg_name else "images_per_s"
                ys = [r[key] for r in sel]
                style, marker = styles[k % len(styles)]
                ax.plot(xs, ys, marker="" if local else marker, linestyle=":" if local else style,
                        color=f"C{i}", label=f"{l}" + (" (local files)" if local else "") +
                        (f", {rate} Mbit/s" if rate else ""))
        ax.set_xlabel("RTT (ms), W = 4 MiB per connection")
        ax.set_ylabel("MB/s" if d == cfg.jpeg_name else "images/s")
        ax.set_title(f"{d}: throughput vs RTT")
        ax.set_xticks(cfg.rtts)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out, f"throughput_{d}.png"), dpi=110)
        plt.close(fig)
