"""The one results format of every suite: a markdown table on stdout under the conditions it was
measured in; with --out DIR also DIR/report.md and every run's raw figures in DIR/results.csv."""
import csv
import os
import time

from .proc import cpu_name, load


class Table:
    def __init__(self, *columns):
        self.columns, self.rows = list(columns), []

    def add(self, *cells):
        self.rows.append([str(c) for c in cells])

    def markdown(self):
        lines = ["| " + " | ".join(self.columns) + " |", "|" + "---|" * len(self.columns)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in self.rows])


def conditions(where, load_before):
    """The line every report starts with: when, which machine, how loaded, where it ran."""
    return (f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {cpu_name()}, {os.cpu_count()} cores; "
            f"load average before {load_before}, after {load()}; {where}")


def emit(args, text, records=()):
    """Print the report; with args.out also write report.md and results.csv (one row per run)."""
    print(text)
    if not getattr(args, "out", None):
        return
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write(text + "\n")
    # Scalars only: lists and dicts (a run's step times, its snapshot stats) stay out of the CSV.
    records = [{k: v for k, v in r.items() if not isinstance(v, (list, dict))} for r in records]
    if records:
        keys = list(dict.fromkeys(k for r in records for k in r))
        with open(os.path.join(args.out, "results.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, keys)
            w.writeheader()
            w.writerows(records)
