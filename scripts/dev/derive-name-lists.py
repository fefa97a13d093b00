#!/usr/bin/env python3
"""Derives the name gazetteers of Quire's personal-data detector from public name statistics.

A developer tool, not run by the build or the tests (they embed its output, committed as
crates/quire-ingest/data/pii/first_names.txt and last_names.txt). It reads the evaluation data
kept outside the repository (see ../shared/eval/README.md):

    pii/names/census1990/dist.female.first, dist.male.first, dist.all.last
        US Census 1990: NAME, frequency %, cumulative %, rank (public domain)
    pii/names/ssa/yobYYYY.txt
        US Social Security baby names: name,sex,count (public domain)

and writes lowercase names, one a line, sorted:

    first_names.txt  census first names, plus SSA names given at least MIN_SSA_COUNT times
                     over the years read (rare spellings only add false positives)
    last_names.txt   the TOP_SURNAMES most frequent census surnames

The hand-written list of common English words that are also names (common_words.txt) is not
derived and this script leaves it alone.

    python3 scripts/dev/derive-name-lists.py [EVAL_DIR] [OUT_DIR]

EVAL_DIR defaults to ../shared/eval, OUT_DIR to crates/quire-ingest/data/pii.
"""

import collections
import glob
import os
import sys

MIN_SSA_COUNT = 300
TOP_SURNAMES = 20000


def census(path):
    """Names of a census file, most frequent first."""
    with open(path, encoding="ascii") as f:
        return [line.split()[0].lower() for line in f if line.strip()]


def ssa_counts(folder):
    counts = collections.Counter()
    for path in sorted(glob.glob(os.path.join(folder, "yob*.txt"))):
        with open(path, encoding="ascii") as f:
            for line in f:
                name, _sex, count = line.strip().split(",")
                counts[name.lower()] += int(count)
    return counts


def write(path, names):
    with open(path, "w", encoding="ascii") as f:
        for name in sorted(names):
            f.write(name + "\n")
    print(f"{path}: {len(names)} names", file=sys.stderr)


def main():
    eval_dir = sys.argv[1] if len(sys.argv) > 1 else "../shared/eval"
    out_dir = sys.argv[2] if len(sys.argv) > 2 else "crates/quire-ingest/data/pii"
    names = os.path.join(eval_dir, "pii", "names")
    first = set(census(os.path.join(names, "census1990", "dist.female.first")))
    first |= set(census(os.path.join(names, "census1990", "dist.male.first")))
    ssa = ssa_counts(os.path.join(names, "ssa"))
    first |= {name for name, count in ssa.items() if count >= MIN_SSA_COUNT}
    last = census(os.path.join(names, "census1990", "dist.all.last"))[:TOP_SURNAMES]
    os.makedirs(out_dir, exist_ok=True)
    write(os.path.join(out_dir, "first_names.txt"), {n for n in first if n.isalpha()})
    write(os.path.join(out_dir, "last_names.txt"), {n for n in last if n.isalpha()})


if __name__ == "__main__":
    main()
