"""Plots the stream and cancel distributions of a bench/results.json into a PNG.

Usage: python3 bench/plot.py bench/results.json bench/distributions.png  (needs matplotlib;
`npm run bench:plot` installs it into bench/.venv).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

results = json.load(open(sys.argv[1]))
samples = results["samples"]
colors = {"addon": "#1f77b4", "baseline": "#d62728"}

fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))

ax = axes[0]
stream = samples.get("stream", {})
data = [stream.get("addon", []), stream.get("baseline", []), stream.get("addonBusy", []), stream.get("baselineBusy", [])]
labels = ["addon\nwall", "baseline\nwall", "addon\nJS busy", "baseline\nJS busy"]
box = ax.boxplot(data, tick_labels=labels, patch_artist=True)
for patch, color in zip(box["boxes"], [colors["addon"], colors["baseline"]] * 2):
    patch.set_facecolor(color)
    patch.set_alpha(0.4)
for i, values in enumerate(data, start=1):
    ax.scatter([i] * len(values), values, s=12, color="black", zorder=3)
count = results["size"]["stream"]["count"]
ax.set_title(f"stream: one turn of {count:,} text deltas ({len(stream.get('addon', []))} runs)")
ax.set_ylabel("ms")
ax.grid(axis="y", alpha=0.3)

for ax, name, title in [
    (axes[1], "cancel-ack", "cancel, acknowledging server"),
    (axes[2], "cancel-silent", "cancel, silent server"),
]:
    for impl in ("addon", "baseline"):
        values = sorted(samples.get(name, {}).get(impl, []))
        if not values:
            continue
        ys = [(i + 1) / len(values) for i in range(len(values))]
        ax.step(values, ys, where="post", color=colors[impl], label=impl)
    ax.set_title(f"{title} ({results['size']['cancel']['cancels']} cancels)")
    ax.set_xlabel("time from cancel to stopReason 'cancelled' (ms)")
    ax.set_ylabel("fraction of cancels")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
axes[2].axvline(results["size"]["cancel"]["boundMs"], color="gray", linestyle="--", linewidth=1)

machine = results["machine"]
fig.suptitle(f"cursor-acp-native vs pure-JS baseline — {machine['cpus']} × {machine['cpuModel']}, Node {machine['node']}", fontsize=10)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
print(f"wrote {sys.argv[2]}")
