#!/usr/bin/env python3
"""Writes the user logs of a grid run of many jobs, one log per site, for
measuring `cosched log report` and `cosched log stats` at scale without
running the fake pool for half an hour.

Each job logs what a Condor-C job of the fake pool logs (the shapes of
../shared/fixtures/userlogs/grid-condorc.log): 000 submit, 027 grid submit,
001 execute and 005 terminated with its usage lines, in time order per log.
Jobs come in clusters of 50 (one submit file each); a site runs `slots` jobs
at once, each 300-900 s after a 5-60 s grid hand-off. Deterministic.

    python3 benches/grid_userlogs.py --jobs 1000000 --sites 100 --out DIR
"""

import argparse
import datetime
import heapq
import os
import random

EPOCH = datetime.datetime(2026, 11, 21, 5, 0, 0)
TERMINATED = (
    "\t(1) Normal termination (return value 0)\n"
    "\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Remote Usage\n"
    "\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage\n"
    "\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Total Remote Usage\n"
    "\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Total Local Usage\n"
    "\t0  -  Run Bytes Sent By Job\n"
    "\t0  -  Run Bytes Received By Job\n"
    "\t0  -  Total Bytes Sent By Job\n"
    "\t0  -  Total Bytes Received By Job\n"
)


def stamp(t):
    return (EPOCH + datetime.timedelta(seconds=t)).strftime("%Y-%m-%d %H:%M:%S")


def site_log(path, site, jobs, rng):
    resource = f"condor ce{site}@grid ce{site}.example:9619"
    slots = rng.randint(20, 400)
    events = []  # (time, order, text)
    free = [0] * slots  # when each slot is next free
    heapq.heapify(free)
    cluster = 100 + site * 100_000
    for i in range(jobs):
        c, p = cluster + i // 50, i % 50
        submit = (i // 50) * 30  # a submit file every 30 s
        job = f"({c:03d}.{p:03d}.000)"
        grid = submit + rng.randint(5, 60)
        start = max(grid + 1, heapq.heappop(free))
        end = start + rng.randint(300, 900)
        heapq.heappush(free, end)
        events.append((submit, 0, f"000 {job} {stamp(submit)} Job submitted from host: <127.0.0.1:29247>\n...\n"))
        events.append((grid, 1, f"027 {job} {stamp(grid)} Job submitted to grid resource\n"
                       f"    GridResource: {resource}\n    GridJobId: {resource} {i}.0\n...\n"))
        events.append((start, 2, f"001 {job} {stamp(start)} Job executing on host: {resource}\n...\n"))
        events.append((end, 3, f"005 {job} {stamp(end)} Job terminated.\n{TERMINATED}...\n"))
    events.sort(key=lambda e: (e[0], e[1]))
    with open(path, "w") as f:
        f.writelines(e[2] for e in events)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--sites", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(args.seed)
    per_site = [args.jobs // args.sites + (1 if s < args.jobs % args.sites else 0) for s in range(args.sites)]
    for site, n in enumerate(per_site):
        site_log(os.path.join(args.out, f"ce{site:03d}.log"), site, n, rng)


if __name__ == "__main__":
    main()
