#!/usr/bin/env python3
"""Filters a gridgen family into one where every site's knee is below the first window (issue 56, item 2).

  python3 ../shared/tools/gridgen.py --seeds 1-200 | python3 benches/low_knees.py > /tmp/low.toml

Grids whose every site has a knee under 16 jobs are rare in gridgen's families (15 of 400, most of
one site and 50 jobs), so each grid is kept as drawn except its knees: every site's capacity becomes
a draw, log-uniform in [2, 15], from the grid's name and the site's (a site that never saturated now
shares past its knee without thrashing, beta as drawn: 0). Scenarios are renamed L.... so that they
are not taken for the originals. Deterministic (Python's string seeding); standard library only.
"""
import math, random, re, sys

FIRST_WINDOW = 16  # adaptive's default initial_window: every knee is below it


def knee(grid, site):
    r = random.Random(f"cosched/low-knees/{grid}/{site}")
    return int(math.exp(r.uniform(math.log(2), math.log(FIRST_WINDOW - 1))))


def main():
    grid = None
    for line in sys.stdin:
        m = re.match(r"\[scenarios\.G(\d+)\]", line)
        if m:
            grid = "L" + m.group(1)
            line = f"[scenarios.{grid}]\n"
        site = re.search(r'name = "([^"]+)"', line)
        if grid and site and "capacity" in line:
            line = re.sub(r'capacity = ("inf"|[0-9.]+)', f"capacity = {knee(grid, site.group(1))}", line)
        if line.startswith("desc = "):
            line = line.replace('desc = "random grid', 'desc = "low knees, grid')
        sys.stdout.write(line)


if __name__ == "__main__":
    main()
