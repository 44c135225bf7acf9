"""MST (McKenna, Miklau and Sheldon 2021, the NIST 2018 synthetic-data challenge's winner) over
coded attributes, vectorised numpy: every random draw from the release's generator (docs/dp.md).

The budget rho (zCDP) is split in three equal parts, as MST does:
1. every one-way marginal measured with Gaussian noise;
2. d - 1 pairs chosen by the exponential mechanism (Kruskal's order, as a maximum spanning tree
   of how far each pair's counts are from independence given the noisy one-way marginals);
3. the chosen pairs' two-way marginals measured with Gaussian noise.
The synthetic rows are drawn from the tree-shaped model those marginals define: the root from its
one-way marginal, each other attribute given its parent from their two-way marginal (negative
counts clipped to 0; a parent value with no mass falls back to the child's one-way marginal).
Sampling a tree is exact, so MST's Private-PGM inference step is not needed; everything after the
measurements is post-processing and spends no budget. The number of rows published is the mean
of the noisy one-way totals (post-processing too: the row count is protected, not public).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from privpub.tasks.techniques.dp_synthetic.accounting import exponential_rho, gaussian_rho

Clique = tuple[int, ...]


@dataclass(frozen=True)
class Measurement:
    """One step of the mechanism as recorded in the published `mechanism` table."""

    step: str  # "one-way", "select" or "two-way"
    attributes: Clique  # the attributes measured (select: the pair chosen)
    sigma: float  # Gaussian noise scale (nan for select)
    exp_epsilon: float  # the exponential mechanism's epsilon (nan for the Gaussian steps)
    sensitivity: float

    @property
    def rho(self) -> float:
        if self.step == "select":
            return exponential_rho(self.exp_epsilon)
        return gaussian_rho(self.sigma, self.sensitivity)


def marginal(codes: np.ndarray, sizes: Sequence[int], clique: Clique) -> np.ndarray:
    """The counts of a clique's value combinations, flattened in row-major order."""
    index = np.zeros(len(codes), dtype=np.int64)
    for a in clique:
        index = index * sizes[a] + codes[:, a]
    return np.bincount(index, minlength=int(np.prod([sizes[a] for a in clique]))).astype(float)


def measure(
    codes: np.ndarray, sizes: Sequence[int], cliques: Sequence[Clique], sigma: float, rng: np.random.Generator
) -> list[np.ndarray]:
    """The Gaussian measurement step: each clique's counts plus N(0, sigma^2) noise per cell."""
    out = []
    for clique in cliques:
        counts = marginal(codes, sizes, clique)
        out.append(counts + rng.normal(0.0, sigma, counts.shape))
    return out


def _probabilities(noisy: np.ndarray) -> np.ndarray:
    clipped = np.clip(noisy, 0.0, None)
    total = clipped.sum()
    return clipped / total if total > 0 else np.full(noisy.shape, 1.0 / noisy.size)


def select_tree(
    codes: np.ndarray,
    sizes: Sequence[int],
    ones: Sequence[np.ndarray],
    total: float,
    epsilon: float,
    sensitivity: float,
    rng: np.random.Generator,
) -> list[tuple[int, int]]:
    """d - 1 pairs forming a spanning tree, each chosen by the exponential mechanism (Gumbel-max,
    the same distribution) among the pairs joining two components, scored by the L1 distance of
    the pair's counts from the independent model of the noisy one-way marginals (sensitivity:
    the contribution limit)."""
    d = len(sizes)
    pairs = [(i, j) for i in range(d) for j in range(i + 1, d)]
    probs = [_probabilities(o) for o in ones]
    score = np.array(
        [np.abs(marginal(codes, sizes, p) - total * np.outer(probs[p[0]], probs[p[1]]).ravel()).sum() for p in pairs]
    )
    component = np.arange(d)
    chosen: list[tuple[int, int]] = []
    for _ in range(d - 1):  # d - 1 rounds (attributes, not rows)
        open_ = np.array([component[i] != component[j] for i, j in pairs])
        gumbel = rng.gumbel(size=len(pairs))
        pick = int(np.argmax(np.where(open_, epsilon / (2.0 * sensitivity) * score + gumbel, -np.inf)))
        i, j = pairs[pick]
        chosen.append((i, j))
        component[component == component[j]] = component[i]
    return chosen


def _draw(cum: np.ndarray, parent: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """For each row, a child value from the row `parent` of cumulative conditional table `cum`
    (each row ends at 1): one searchsorted over the rows laid end to end."""
    k = cum.shape[1]
    flat = (cum + np.arange(cum.shape[0])[:, None]).ravel()
    where = np.searchsorted(flat, parent + rng.random(len(parent)), side="right")
    child: np.ndarray = np.minimum(where - parent * k, k - 1)
    return child


def sample(
    n: int,
    sizes: Sequence[int],
    ones: Sequence[np.ndarray],
    edges: Sequence[tuple[int, int]],
    twos: Sequence[np.ndarray],
    rng: np.random.Generator,
) -> np.ndarray:
    """n rows drawn from the tree model (attribute 0 the root, then breadth first)."""
    d = len(sizes)
    out = np.zeros((n, d), dtype=np.int64)
    out[:, 0] = rng.choice(sizes[0], size=n, p=_probabilities(ones[0]))
    done = {0}
    while len(done) < d:
        for (i, j), table in zip(edges, twos):
            if (i in done) == (j in done):
                continue
            parent, child = (i, j) if i in done else (j, i)
            counts = np.clip(table.reshape(sizes[i], sizes[j]), 0.0, None)
            counts = counts if parent == i else counts.T
            rows = counts.sum(axis=1, keepdims=True)
            cond = np.where(rows > 0, counts / np.where(rows > 0, rows, 1.0), _probabilities(ones[child])[None, :])
            cum = np.cumsum(cond, axis=1)
            cum[:, -1] = 1.0
            out[:, child] = _draw(cum, out[:, parent], rng)
            done.add(child)
    return out


def noise_scales(d: int, rho: float, sensitivity: float) -> tuple[float, float, float]:
    """MST's split of rho over d attributes: the one-way marginals' sigma, the exponential
    mechanism's epsilon per choice, the two-way marginals' sigma (a third of rho each; with one
    attribute, all of it on its one-way marginal)."""
    if d == 1:
        return float(sensitivity * np.sqrt(1 / (2.0 * rho))), float("nan"), float("nan")
    third = rho / 3.0
    sigma1 = sensitivity * np.sqrt(d / (2.0 * third))
    epsilon = np.sqrt(8.0 * third / (d - 1))
    sigma2 = sensitivity * np.sqrt((d - 1) / (2.0 * third))
    return float(sigma1), float(epsilon), float(sigma2)


def synthesize(
    codes: np.ndarray, sizes: Sequence[int], rho: float, sensitivity: float, rng: np.random.Generator
) -> tuple[np.ndarray, list[Measurement]]:
    """MST at rho-zCDP for data whose one person changes at most `sensitivity` rows: the synthetic
    codes and the measurements made (their rho add up to rho)."""
    d = len(sizes)
    sigma1, epsilon, sigma2 = noise_scales(d, rho, sensitivity)
    singles: list[Clique] = [(a,) for a in range(d)]
    ones = measure(codes, sizes, singles, sigma1, rng)
    record = [Measurement("one-way", c, sigma1, float("nan"), sensitivity) for c in singles]
    total = max(float(np.mean([o.sum() for o in ones])), 1.0)
    if d == 1:  # no pairs to choose or measure
        return rng.choice(sizes[0], size=(round(total), 1), p=_probabilities(ones[0])), record
    edges = select_tree(codes, sizes, ones, total, epsilon, sensitivity, rng)
    record += [Measurement("select", e, float("nan"), epsilon, sensitivity) for e in edges]
    twos = measure(codes, sizes, edges, sigma2, rng)
    record += [Measurement("two-way", e, sigma2, float("nan"), sensitivity) for e in edges]
    return sample(round(total), sizes, ones, edges, twos, rng), record
