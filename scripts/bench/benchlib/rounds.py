"""Interleaved A/B rounds and their statistics. The sides of a comparison run in the same round,
in an order reversed every other round (ABBA), so slow drifts of a shared machine's load hit
both alike; a ratio is taken within each round, and the median of those ratios is the figure
to quote (the two runs of a round share the machine's load, runs of different rounds do not)."""
import statistics

from .proc import log


def interleave(rounds, items, sides, measure):
    """{(item, side): [measure(item, side, round) per round]}; `sides` are labels."""
    out = {(i, s): [] for i in items for s in sides}
    for r in range(rounds):
        for item in items:
            for side in (sides if r % 2 == 0 else sides[::-1]):
                got = measure(item, side, r)
                log(f"[{r + 1}/{rounds}] {item} {side}: " + ", ".join(
                    f"{k} {got[k]:.4g}" for k in ("images_per_s", "step_ms", "steps_per_s", "wall_s") if got.get(k)))
                out[(item, side)].append(got)
    return out


def values(runs, key):
    return [r[key] for r in runs if r.get(key) is not None]


def paired(a_runs, b_runs, key):  # a / b of each round
    return [a[key] / b[key] for a, b in zip(a_runs, b_runs) if a.get(key) and b.get(key)]


def cell(vals, digits=1, scale=1.0):
    """'median [min-max]' of a list, '' when empty."""
    if not vals:
        return ""
    f = lambda v: f"{scale * v:,.{digits}f}"  # noqa: E731
    med = f(statistics.median(vals))
    return med if len(vals) == 1 else f"{med} [{f(min(vals))}-{f(max(vals))}]"


def rate(vals):
    """cell() of a rate with three significant figures or more: 2.57, 21.6, 1,483."""
    if not vals:
        return ""
    med = statistics.median(vals)
    return cell(vals, 2 if med < 10 else 1 if med < 100 else 0)


def add_options(p, rounds=3):
    p.add_argument("--rounds", type=int, default=rounds, help="interleaved rounds (ABBA)")
    p.add_argument("--out", metavar="DIR", help="also write DIR/report.md and DIR/results.csv (every run)")
    p.add_argument("--plot", metavar="PNG", help="also plot the paired ratios")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per run")


def flat(results):
    """results.csv's rows: one per run, its item, side and round beside its figures."""
    return [{"item": i, "side": s, "round": r + 1, **run} for (i, s), runs in results.items()
            for r, run in enumerate(runs)]
