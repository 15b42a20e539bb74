#!/usr/bin/env python3
"""Writes benches/scale.toml: one grid of 500 sites at 10^4, 10^5 and 10^6 jobs (issue 15),
of one kind (X4-X6) and of three (XT4-XT6, issue 55).

  python3 benches/scale_grid.py > benches/scale.toml
  python3 benches/scale_grid.py --sites 100 > benches/sites100.toml   # for `cosched submit --simulate`

The sites are the same in every scenario, only the jobs differ, so the runs
measure how the simulator's cost grows with jobs, and with kinds. Mixed knees (a quarter never
saturate, the rest at 20-100 % of their slots, thrashing from none to steep),
queue waits of 30-600 s, a fifth of the sites failing 1-20 % of attempts, a few
capacity windows. No dead site: bulk and jobrouter would hang at the horizon.
Deterministic (Python's string seeding); standard library only.
"""
import math, random, sys

r = random.Random("cosched/scale/500")


def loguniform(lo, hi):
    return math.exp(r.uniform(math.log(lo), math.log(hi)))


def site(i):
    slots = int(round(loguniform(20, 400)))
    fields = [f'name = "s{i:03d}"', f"slots = {slots}"]
    if r.random() < 0.25:
        fields += ['capacity = "inf"', "beta = 0.0"]
        finite = False
    else:
        fields += [f"capacity = {max(5, int(slots * r.uniform(0.2, 1.0)))}",
                   f"beta = {r.choice([0.0, 0.2, 0.5, 1.0])}"]
        finite = True
    fields.append(f"speed = {round(r.uniform(0.6, 1.4), 2)}")
    fields.append(f"wait_mean = {int(loguniform(30, 600))}")
    if r.random() < 0.2:
        fields.append(f"p_fail = {round(loguniform(0.01, 0.2), 3)}")
    if finite and r.random() < 0.1:
        t1 = int(r.uniform(600, 6000))
        fields.append(f"cap_windows = [[{t1}, {t1 + int(r.uniform(600, 6000))}, {r.choice([0.5, 2.0])}]]")
    return "  { " + ", ".join(fields) + " },"



def sites_file(n_sites):
    """A sites.toml of `n_sites` simulated grid sites for `cosched submit --simulate` (issue 15, part 3)."""
    g = random.Random(f"cosched/scale/sites/{n_sites}")
    out = [f"# {n_sites} simulated grid sites for the million-job run (issue 15); made by benches/scale_grid.py.",
           "[simulate]", "base_runtime = 400", "jitter = 0.3", "seed = 1", ""]
    for i in range(n_sites):
        slots = int(round(math.exp(g.uniform(math.log(100), math.log(400)))))
        out += ["[[site]]", f'name = "ce{i:03d}"', f'grid_resource = "condor ce{i:03d}.example.edu ce{i:03d}.example.edu:9619"',
                f"slots = {slots}", "[site.simulate]",
                f"wait_mean = {int(math.exp(g.uniform(math.log(30), math.log(600))))}",
                f"capacity = {max(10, int(slots * g.uniform(0.3, 1.0)))}",
                f"beta = {g.choice([0.0, 0.5, 1.0])}",
                f"speed = {round(g.uniform(0.7, 1.3), 2)}"]
        if g.random() < 0.2:
            out.append(f"p_fail = {round(g.uniform(0.01, 0.1), 3)}")
        out.append("")
    return "\n".join(out)


# The typed scenarios' kinds: (name, share of the jobs, run time, load). The
# same jobs' count and about the same mean run time as the one-kind ones, so
# that a typed run's cost can be set against a one-kind run's (issue 55).
KINDS = [("io", 0.4, 450, 0.9), ("cpu", 0.35, 800, 0.05), ("mixed", 0.25, 550, 0.45)]


def scenarios():
    sites = [site(i) for i in range(500)]
    print("# 500 sites for the simulator's scaling bench (issue 15); made by benches/scale_grid.py.")
    print("# Field meanings: ../shared/scenarios/README.md. Times in seconds.")
    for name, n in [("X4", 10_000), ("X5", 100_000), ("X6", 1_000_000)]:
        print()
        print(f"[scenarios.{name}]")
        print(f'desc = "500 mixed sites, {n} jobs of ~600 s"')
        print(f"n_jobs = {n}")
        print("base_runtime = 600")
        print("jitter = 0.3")
        print("sites = [")
        print("\n".join(sites))
        print("]")
    # The same sites and job counts in three kinds (issue 55: a typed run
    # within 1.5 x the time of a one-kind one); a site's capacity is in load.
    for name, n in [("XT4", 10_000), ("XT5", 100_000), ("XT6", 1_000_000)]:
        counts = [int(n * share) for _, share, _, _ in KINDS]
        counts[0] += n - sum(counts)
        print()
        print(f"[scenarios.{name}]")
        print(f'desc = "500 mixed sites, {n} jobs of three kinds (io, cpu, mixed), ~600 s on average"')
        print("types = [")
        for (kind, _, runtime, load), count in zip(KINDS, counts):
            print(f'  {{ name = "{kind}", n_jobs = {count}, base_runtime = {runtime}, jitter = 0.3, load = {load} }},')
        print("]")
        print("sites = [")
        print("\n".join(sites))
        print("]")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--sites":
        print(sites_file(int(sys.argv[2])))
    else:
        scenarios()
