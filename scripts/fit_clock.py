"""Fit the engine clock of GLM-5.3-Flash on 2×B200 from the source's published operating points.

    python scripts/fit_clock.py          # prints the derivation and the fitted parameters

The clock (replay.sim.clock): step = c0 + c1·decoding + k·cost(prefill chunks), cost = the
paper's D, E model by position. Inputs, all at 48 sessions, per engine (two GPUs), from the
seed document's demo panel and the paper's figures it quotes:

- output tokens per minute: FlashState 61.7K, vLLM 22.0K (demo panel);
- prompt tokens per minute per GPU: 4.74M and 1.54M (demo, implied by its profit; the
  paper's Figure 1 says 4.66M and 1.48M) at hit rates 87% and 30% (demo panel);
- p50 end-to-end latency 12.4 s and 46.1 s, p50 TTFT 0.2 s and 3.3 s (demo panel);
- median output 444 tokens and mean prompt 218,922 tokens (the corpus, seed document).

Per engine: the median request decodes 444 tokens in (E2E p50 − TTFT p50), one token per
step, which gives the step time; output rate × step time gives the sequences decoding in a
step and computed-prefill rate × step time the prompt tokens a step computes. The prefill
cost per token is the paper's marginal D + E·p at the mean position computed: the prompt's
end (219K) for FlashState, which resumes near it; the middle of the uncached 70% (142K) for
vLLM. c1 is the attention read of one sequence (6.1 KB of KV per token per GPU, the seed's
reasoned figure, × 219K tokens at 8 TB/s of B200 HBM); c0 and k solve the two step times.
"""

from __future__ import annotations

D, E, U = 1.862e-5, 3.33e-6, 10_000  # the paper's prefill cost coefficients, our unit
MEDIAN_OUT = 444
MEAN_PROMPT = 218_922
C1 = 6.1e3 * MEAN_PROMPT / 8e12  # s per decoding sequence per step

POINTS = {  # engine: (output/min, prompt/min/GPU, hit rate, E2E p50, TTFT p50, mean position)
    "flashstate": (61.7e3, 4.74e6, 0.87, 12.4, 0.2, MEAN_PROMPT),
    "vllm": (22.0e3, 1.54e6, 0.30, 46.1, 3.3, (0.30 + 1.0) / 2 * MEAN_PROMPT),
}


def operating_point(name: str) -> tuple[float, float, float, float]:
    """(step seconds, decoding sequences, computed prompt tokens per step, s per token)."""
    out_min, prompt_min_gpu, hit, e2e, ttft, pos = POINTS[name]
    step = (e2e - ttft) / MEDIAN_OUT
    decoding = out_min / 60 * step
    computed = prompt_min_gpu * 2 / 60 * (1 - hit) * step
    return step, decoding, computed, D + E * pos / U


def fit() -> tuple[float, float, float]:
    """(c0, c1, k)."""
    (s1, n1, t1, m1), (s2, n2, t2, m2) = (operating_point(e) for e in POINTS)
    # s = c0 + C1·n + k·t·m for both engines: two equations in c0 and k.
    k = ((s2 - C1 * n2) - (s1 - C1 * n1)) / (t2 * m2 - t1 * m1)
    c0 = s1 - C1 * n1 - k * t1 * m1
    return c0, C1, k


def main() -> None:
    for e in POINTS:
        s, n, t, m = operating_point(e)
        print(
            f"{e}: step {s * 1e3:.1f} ms, {n:.1f} decoding, {t:.0f} prompt tokens/step, "
            f"{m:.3e} s/token"
        )
    c0, c1, k = fit()
    print(f"decode_s_per_step {c0:.5f}  decode_s_per_seq {c1:.3e}  clock_prefill_scale {k:.3f}")


if __name__ == "__main__":
    main()
