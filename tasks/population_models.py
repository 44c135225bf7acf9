"""Statistical models of a population from a sample's equivalence classes (docs/risk.md).

A table of n records is taken as a sample of a population of N people (sampling fraction
pi = n / N). What the sample shows is its class-size frequency table: c_i classes of size i.
From it, and pi alone (no population table):

- the number of population uniques (people alone in their class in the whole population):
  Zayatz (1991) and Pitman (Hoshino 2001), chosen between by Dankar et al.'s (2012) rule;
- the expected inverse population size E[1 / F | f] of a class seen f times in the sample
  (Benedetti & Franconi 1998, the "individual risk" of mu-ARGUS and sdcMicro), from which the
  journalist and marketer risks follow.

Every function works on the frequency table (one entry per distinct class size), never on
records or classes one by one.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

# Dankar et al.'s rule: Pitman's model for sampling fractions up to this, Zayatz's above it
PITMAN_UP_TO = 0.1


def _special() -> Any:  # scipy has no types (pyproject.toml)
    """scipy.special, imported with the first population figure: a release without [risk]
    population never loads scipy (half a second of a publish's start-up; flows/lazy.py)."""
    import scipy.special

    return scipy.special


def _optimize() -> Any:
    """scipy.optimize, imported with the first fit of Pitman's model (as _special)."""
    import scipy.optimize

    return scipy.optimize


def gammaln(x: np.ndarray | float) -> np.ndarray:
    return _special().gammaln(x)  # type: ignore[no-any-return]


def digamma(x: np.ndarray | float) -> np.ndarray:
    return _special().digamma(x)  # type: ignore[no-any-return]


def zayatz_share(sizes: np.ndarray, counts: np.ndarray, population: int) -> float:
    """Zayatz's estimate of the share of the population that is unique. A population class of
    size i gives exactly one record to a sample of n drawn without replacement with the
    hypergeometric probability P_i = i C(N - i, n - 1) / C(N, n) (P_1 = pi); taking the
    population's class sizes to be distributed as the sample's, the share of sample uniques that
    are population uniques is c_1 P_1 / sum_i c_i P_i, and each population unique is in the
    sample with probability pi: c_1 (c_1 P_1 / sum_i c_i P_i) / pi uniques, a share
    c_1^2 / (n sum_i c_i R_i) of the N people, with R_i = P_i / P_1 = i C(N - i, n - 1) / C(N - 1, n - 1)
    (R_1 = 1 exactly: never above the sample's share of uniques c_1 / n)."""
    sizes = sizes.astype(float)
    n = float((sizes * counts).sum())
    c1 = float(counts[sizes == 1].sum())
    if c1 == 0:
        return 0.0
    possible = population - sizes >= n - 1  # else a class that large cannot give a single record
    with np.errstate(invalid="ignore", divide="ignore"):
        # log C(N - i, n - 1) / C(N - 1, n - 1) = log (N - i)! (N - n)! / ((N - 1)! (N - i - n + 1)!)
        log_r = (
            np.log(sizes)
            + gammaln(population - sizes + 1)
            - gammaln(population - sizes - n + 2)
            + (gammaln(population - n + 1) - gammaln(population))
        )
    ratio = np.where(sizes == 1, 1.0, np.where(possible, np.exp(log_r), 0.0))
    return c1 * c1 / (n * float((counts * ratio).sum()))


def _pitman_loglik(x: np.ndarray, sizes: np.ndarray, counts: np.ndarray, n: float, u: float) -> float:
    """The log-likelihood of Pitman's sampling formula for the frequency table,
    L = sum_{i<u} log(theta + i alpha) - sum_{i<n} log(theta + i) + sum_j c_j sum_{k<j} log(k - alpha),
    with each sum written as a difference of log-gammas."""
    theta, alpha = x
    return float(
        (u - 1) * np.log(alpha)
        + gammaln(theta / alpha + u)
        - gammaln(theta / alpha + 1)
        - (gammaln(theta + n) - gammaln(theta + 1))
        + (counts * (gammaln(sizes - alpha) - gammaln(1 - alpha))).sum()
    )


def _pitman_score(x: np.ndarray, sizes: np.ndarray, counts: np.ndarray, n: float, u: float) -> np.ndarray:
    """The two partial derivatives of _pitman_loglik, as differences of digammas."""
    theta, alpha = x
    s1 = (digamma(theta / alpha + u) - digamma(theta / alpha + 1)) / alpha  # sum_{i<u} 1 / (theta + i alpha)
    d_theta = s1 - (digamma(theta + n) - digamma(theta + 1))
    d_alpha = (
        (u - 1) / alpha - theta / alpha * s1 - float((counts * (digamma(sizes - alpha) - digamma(1 - alpha))).sum())
    )
    return np.array([d_theta, d_alpha])


def pitman_share(sizes: np.ndarray, counts: np.ndarray, population: int) -> float | None:
    """Pitman's model: theta and alpha by maximum likelihood on the sample's frequency table,
    then the expected number of population uniques Gamma(theta + 1) / Gamma(theta + alpha) N^alpha,
    over N. None when the likelihood has no maximum inside 0 < alpha < 1 (as when every record
    is unique: alpha tends to 1; or when alpha tends to 0, Ewens's model, whose population
    uniques do not grow with N), or the estimate falls outside (0, N]."""
    sizes = sizes.astype(float)
    n, u = float((sizes * counts).sum()), float(counts.sum())
    c1 = float(counts[sizes == 1].sum())
    if c1 == 0 or c1 == u:
        return None
    # start: c_1 / u estimates alpha, and c_1 ~ theta^(1 - alpha) n^alpha (large theta) gives theta
    alpha0 = c1 / u
    theta0 = min(float(np.exp((np.log(c1) - alpha0 * np.log(n)) / (1 - alpha0))), 1e12)
    args = (sizes, counts, n, u)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a search that goes nowhere is judged below, not logged
        # climb the likelihood within the parameters' domain, then solve its score for zero
        optimize = _optimize()
        climb = optimize.minimize(
            lambda x: -_pitman_loglik(x, *args),
            [theta0, alpha0],
            jac=lambda x: -_pitman_score(x, *args),
            method="L-BFGS-B",
            bounds=[(0.0, 1e12), (1e-9, 1 - 1e-9)],
        )
        fit = optimize.root(_pitman_score, climb.x, args=args, method="hybr", options={"xtol": 1e-13})
        theta, alpha = fit.x
        if not (fit.success and np.all(np.isfinite(fit.x)) and theta >= 0 and 1e-6 < alpha < 1 - 1e-6):
            return None
        estimate = float(np.exp(gammaln(theta + 1) - gammaln(theta + alpha) + alpha * np.log(population)))
    return estimate / population if np.isfinite(estimate) and 0 < estimate <= population else None


def population_uniques(sizes: np.ndarray, counts: np.ndarray, population: int) -> tuple[float, str]:
    """The estimated share of the population that is unique on the QIs (= the share of the
    sample's records that are population uniques), and the model that gave it ("pitman" or
    "zayatz"): Dankar et al.'s rule, Pitman's model up to a sampling fraction of 0.1 (Zayatz's
    when Pitman's has no fit), Zayatz's above (their rule takes the smaller of Zayatz's and
    SNB's there: Zayatz's alone is never lower). No sample unique: 0."""
    n = float((sizes * counts).sum())
    if n / population <= PITMAN_UP_TO:
        pitman = pitman_share(sizes, counts, population)
        if pitman is not None:
            return pitman, "pitman"
    return zayatz_share(sizes, counts, population), "zayatz"


def expected_inverse_class_size(f: np.ndarray, pi: float) -> np.ndarray:
    """E[1 / F | f] for classes seen f times in a sample of fraction pi, F the class's size in
    the population, under Benedetti & Franconi's model: F - f is negative binomial (f, pi), so
    E[1 / F | f] = sum_{h >= f} C(h - 1, f - 1) pi^f (1 - pi)^(h - f) / h
                 = integral_0^1 pi w^(f - 1) / (pi + (1 - pi) w) dw   (1 / h = integral of t^(h-1)).
    It is 1 / f at pi = 1, -pi ln(pi) / (1 - pi) at f = 1, about pi / f for large f. Two
    expansions of the integral, each taken where it converges fast (64-120 terms, any f):
    - pi >= 1/3: (pi / f) sum_m q^m m! / ((f + 1)(f + 2)...(f + m)), q = 1 - pi;
    - pi < 1/3: the recursion J_f = (1 / (f - 1) - pi J_{f-1}) / q unrolled down to
      J_1 = ln(1 / pi) / q, an alternating sum in rho = pi / q < 1/2."""
    f = np.asarray(f, dtype=float)
    q = 1.0 - pi
    if pi >= 1 / 3:
        m = np.arange(1, 121, dtype=float)
        terms = np.cumprod(q * m[None, :] / (f[:, None] + m[None, :]), axis=1)
        result: np.ndarray = pi / f * (1.0 + terms.sum(axis=1))
        return result
    rho = pi / q
    j = np.arange(64, dtype=float)
    gap = f[:, None] - 1 - j[None, :]  # f - 1 - j >= 1 for the terms j <= f - 2
    terms = np.where(gap >= 1, (-rho) ** j[None, :] / np.maximum(gap, 1), 0.0)
    last = (-rho) ** (f - 1) * np.log(1 / pi)  # underflows to 0 long before f - 1 passes 64
    result = pi / q * (terms.sum(axis=1) + last)
    return result
