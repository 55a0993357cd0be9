"""Compare two `litenet-infer --json` outputs (x86-64 against arm64): same images, classes, scores, logits.

    python scripts/arm/compare_outputs.py REF.jsonl OTHER.jsonl --precision fp32 [--label "Pi 4"]

Images are matched by file name (the two runs see the same files under different folders). Exit
status 0 when every check holds, 1 otherwise; the Markdown row goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import PurePath

# fp32: the acceptance bound for logits and scores. Both sides run ONNX Runtime's float32 kernels
# (AVX2 on x86, NEON on arm64) with different blockings, so sums over K = 3072 may round
# differently: a few ulp of logits of size ~10 is ~1e-6, and 1e-5 leaves a 10× margin.
FP32_ATOL = 1e-5
# int8: the integer GEMMs are exact on both, but the float epilogue, GELU and LayerNorm may round
# differently, and an activation that lands within rounding of a .5 step then quantizes to the
# neighbouring integer (docs/int8-plan.md). Such a flip moves logits by up to a few hundredths.
INT8_ATOL = 0.05
TOLERANCES = {"fp32": FP32_ATOL, "int8": INT8_ATOL}


@dataclass
class Comparison:
    """What differed between two runs."""

    images: int = 0
    same_class: int = 0
    max_logit_diff: float = 0.0
    max_score_diff: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def load(path: str) -> dict[str, dict]:
    """The records of a --json run, keyed by image file name."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                record = json.loads(line)
                out[PurePath(record["image"]).name] = record
    return out


def compare(ref: dict[str, dict], other: dict[str, dict], atol: float) -> Comparison:
    """Every image in both, with the same outcome; classes equal; logits and scores within atol."""
    c = Comparison()
    for name in sorted(set(ref) ^ set(other)):
        c.problems.append(f"{name}: only in {'the reference' if name in ref else 'the other run'}")
    for name in sorted(set(ref) & set(other)):
        a, b = ref[name], other[name]
        c.images += 1
        if a["ok"] != b["ok"]:
            c.problems.append(f"{name}: classified on one side only ({a.get('error') or b.get('error')})")
            continue
        if not a["ok"]:
            c.same_class += 1  # refused on both sides: the same outcome
            continue
        if a["class"] == b["class"]:
            c.same_class += 1
        else:
            c.problems.append(f"{name}: class {a['class']} vs {b['class']}")
        if len(a["logits"]) != len(b["logits"]):
            c.problems.append(f"{name}: {len(a['logits'])} vs {len(b['logits'])} logits")
            continue
        logit = max((abs(x - y) for x, y in zip(a["logits"], b["logits"])), default=0.0)
        score = max(abs(x["score"] - y["score"]) for x, y in zip(a["topk"], b["topk"]))
        c.max_logit_diff, c.max_score_diff = max(c.max_logit_diff, logit), max(c.max_score_diff, score)
        if logit > atol or score > atol:
            c.problems.append(f"{name}: |Δlogit| {logit:.2e}, |Δscore| {score:.2e} > {atol:g}")
    return c


def markdown_row(label: str, precision: str, c: Comparison) -> str:
    """One row of the arm-check results table."""
    verdict = "pass" if c.ok else "FAIL: " + "; ".join(c.problems[:3])
    return (f"| {label} | {precision} | {c.images} | {c.same_class}/{c.images} | {c.max_logit_diff:.2e} | "
            f"{c.max_score_diff:.2e} | {TOLERANCES.get(precision, 0):g} | {verdict} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reference")
    ap.add_argument("other")
    ap.add_argument("--precision", choices=sorted(TOLERANCES), default="fp32")
    ap.add_argument("--label", default="arm64")
    args = ap.parse_args(argv)
    c = compare(load(args.reference), load(args.other), TOLERANCES[args.precision])
    print(markdown_row(args.label, args.precision, c))
    for problem in c.problems:
        print(f"  {problem}", file=sys.stderr)
    return 0 if c.ok else 1


if __name__ == "__main__":
    sys.exit(main())
