#!/usr/bin/python3
"""ringtrain's benchmarks, one entry point: `bench.py SUITE [options]`; `bench.py SUITE --help`
says what a suite measures and under which conditions.

Every comparison is a ratio measured in the same run against its baseline, the sides
interleaved; every report starts with the machine, its load and the date. Tests never assert
timings. A suite is one module in scripts/bench/suites/ (its docstring's first line is its
summary here, the rest its help; add_arguments(parser) and run(args) -> exit status).
Exit status: 0 done, 1 a run failed (its command and error on one line), 2 usage."""
import argparse
import importlib
import os
import pkgutil
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib.proc import BenchError  # noqa: E402
import suites  # noqa: E402


def stop(signum, _frame):
    # SIGTERM/SIGHUP unwind like Ctrl-C, through the suites' finally blocks (cluster down, runs ended).
    raise KeyboardInterrupt(f"signal {signum}")


def parser():
    """The command line: one subcommand per module of suites/."""
    parser = argparse.ArgumentParser(prog="bench.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="suite", metavar="SUITE", required=True)
    for info in sorted(pkgutil.iter_modules(suites.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"suites.{info.name}")
        doc = module.__doc__.strip()
        p = sub.add_parser(info.name.replace("_", "-"), help=doc.splitlines()[0], description=doc,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        p.set_defaults(run=module.run, parser=p)
    return parser


def main(argv=None):
    args = parser().parse_args(argv)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    try:
        return args.run(args)
    except BenchError as e:
        print(f"bench.py {args.suite}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        print(f"bench.py {args.suite}: stopped ({e or 'Ctrl-C'})", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
