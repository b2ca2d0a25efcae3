"""The derivation of the synthesizer's gap knobs (replay/traces/synth.py: p_human, tool_gap,
human_gap): a least-squares fit, in log ratios, of a gap model to the six published gap
figures of cc-traces-weka-062126 (reference file: gap p50 / p90 / p99, share over 300 s and
over 1,800 s, mean).

The model, as the generator draws gaps between main requests:
- a share `zero` of gaps is 0 (a side call sent during the main request: ≈ p_side ÷ (1 +
  p_side) of main gaps);
- a share `spawn` waits for a subagent batch (lognormal, median 200 s: the batch's run with
  kvct-dev's subagent gaps);
- of the rest, p_human follow end_turn (lognormal human_gap, at most human_gap_cap), the
  others a tool's run (lognormal tool_gap) ended by the Bash tool's timeout: 120 s, or
  600 s for a share p_long_timeout of calls, plus up to 20 s.

    .venv/bin/python experiments/fit_gap_mixture.py [--no-timeout] [--p-long 0.3]

The fitted values were then checked in the generated corpus (experiments/calibrate_synth.py).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

TARGETS = {"p50": 4.9, "p90": 131.5, "p99": 3257.0, "o300": 0.045, "o1800": 0.014, "mean": 395.0}
N = 400_000


def nelder_mead(f: Callable[[np.ndarray], float], x0: list[float], iters: int = 400) -> np.ndarray:
    pts = [np.array(x0, dtype=float)]
    pts += [pts[0] * (1 + 0.2 * np.eye(len(x0))[i]) for i in range(len(x0))]
    vals = [f(p) for p in pts]
    for _ in range(iters):
        order = np.argsort(vals)
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        c = np.mean(pts[:-1], axis=0)
        xr = c + (c - pts[-1])
        fr = f(xr)
        if fr < vals[0]:
            xe = c + 2 * (c - pts[-1])
            fe = f(xe)
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            xc = c + 0.5 * (pts[-1] - c)
            fc = f(xc)
            if fc < vals[-1]:
                pts[-1], vals[-1] = xc, fc
            else:
                pts = [pts[0] + 0.5 * (p - pts[0]) for p in pts]
                vals = [f(p) for p in pts]
    return pts[int(np.argmin(vals))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--no-timeout", action="store_true", help="tool runs not ended by a timeout")
    ap.add_argument("--p-long", type=float, default=0.3, help="calls asking for 600 s")
    ap.add_argument("--cap", type=float, default=4 * 86_400.0, help="longest end_turn gap, s")
    ap.add_argument("--zero", type=float, default=0.09)
    ap.add_argument("--spawn", type=float, default=0.011)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    z1, z2, zs = rng.normal(size=(3, N))
    u, u2, u3 = rng.random((3, N))

    def gaps(x: np.ndarray) -> np.ndarray:
        h, mt, st, mh, sh = x
        tool = mt * np.exp(st * z1)
        if not args.no_timeout:
            tool = np.minimum(tool, np.where(u2 < args.p_long, 600.0, 120.0) + 20 * u3)
        g = np.where(u < h, np.minimum(mh * np.exp(sh * z2), args.cap), tool)
        g = np.where(u > 1 - args.zero, 0.0, g)
        spawn = (u > 1 - args.zero - args.spawn) & (u <= 1 - args.zero)
        return np.where(spawn, 200 * np.exp(0.7 * zs), g)

    def figures(x: np.ndarray) -> dict[str, float]:
        g = gaps(x)
        p50, p90, p99 = np.percentile(g, [50, 90, 99])
        return {
            "p50": p50,
            "p90": p90,
            "p99": p99,
            "o300": float((g > 300).mean()),
            "o1800": float((g > 1800).mean()),
            "mean": float(g.mean()),
        }

    def loss(x: np.ndarray) -> float:
        if not (0 < x[0] < 0.5 and min(x[1:]) > 0):
            return 1e9
        f = figures(x)
        return float(sum(np.log(f[k] / v) ** 2 for k, v in TARGETS.items()))

    x = nelder_mead(loss, [0.08, 4.5, 1.8, 150.0, 2.5])
    print(
        f"p_human={x[0]:.4f} tool_gap=({x[1]:.2f}, {x[2]:.3f}) human_gap=({x[3]:.1f}, {x[4]:.3f})"
    )
    f = figures(x)
    for k, v in TARGETS.items():
        print(f"  {k:6s} model {f[k]:>10.4g}  published {v:>10.4g}  ratio {f[k] / v:.3f}")


if __name__ == "__main__":
    main()
