"""The command line of benchmarks/online_vs_offline.py (the heat example's pipelines):
its flags (`parser`); the defaults that depend on ``--quick`` and ``--sweep`` are filled
after parsing (`online_vs_offline_sizing.fill_defaults`)."""

from __future__ import annotations

import argparse

from report import add_flags


def parser(description: str) -> argparse.ArgumentParser:
    """The flags of online_vs_offline.py, ``--help`` headed by `description`."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--example", choices=("heat_pde", "navier_stokes"), default="heat_pde", help=(
        "navier_stokes: the Navier-Stokes example's FNO instead, online_vs_offline_ns.py "
        "(its options: online_vs_offline_ns.py --help)"))  # fmt: skip
    p.add_argument("--simulations", type=int, help="equal-data case (default 128; --quick 6)")
    p.add_argument("--ratio", type=float, default=8, help="samples drawn per sample (epochs)")
    p.add_argument("--budget", type=float, help=(
        "seconds, cases 2 and 3 (default 120; --quick: 6, or 5 simulations' time at case "
        "1's online pace if longer; --sweep: 60, --quick 6)"))  # fmt: skip
    p.add_argument("--splits", help=(
        "offline's shares simulating (default 0.25,0.5,0.75; --quick 0.5)"))  # fmt: skip
    p.add_argument("--storage_fraction", type=float, help=(
        "case 3: offline's disk, a fraction of what online streamed (default 0.1; --quick "
        "0.5)"))  # fmt: skip
    p.add_argument("--sim_jobs", type=int, default=1)
    p.add_argument("--torch_threads", type=int, default=1)
    p.add_argument("--loader_workers", type=int, default=0, help="offline DataLoader's")
    p.add_argument("--placement", choices=("default", "none"), default="default", help=(
        "how the launcher starts the simulations: the library's default Placement, or "
        "placement=None (as before placements existed)"))  # fmt: skip
    p.add_argument("--sim_nice", type=int, help=(
        "with --placement default: the simulations' niceness (default: the library's 10)"),
    )  # fmt: skip
    p.add_argument("--placement_ab", action="store_true", help=(
        "also run case 2's online pipeline with --placement none, alternately with ours "
        "(4 more online runs), and print a row for each"))  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output_dir", default="outputs/online_vs_offline")
    add_flags(p, quick="tiny sizes: checks the pipelines, no figures (see the docstring)")
    p.add_argument("--no_plot", action="store_true")
    p.add_argument("--sweep", metavar="POINTS", help=(
        "map the regime instead: cases 2 and 3 at each point, 'S' (100 time steps of S "
        "solver sub-steps) or 'TxS' (T time steps over the same horizon), e.g. "
        "100x1,20x1,20x64,20x256,20x1024; trainer and simulations pinned to one core "
        "each"))  # fmt: skip
    return p
