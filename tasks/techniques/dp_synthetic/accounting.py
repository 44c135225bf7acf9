"""The privacy accounting of dp-synthetic (docs/dp.md): zero-concentrated DP (zCDP, Bun and
Steinke 2016). A Gaussian measurement of L2 sensitivity s with noise sigma costs
rho = s^2 / (2 sigma^2); an exponential-mechanism choice at epsilon e costs e^2 / 8 (Cesar and
Rogers 2021); zCDP composes by adding the rho. The total rho is converted to (epsilon, delta)-DP by
OpenDP's measure cast (make_zCDP_to_approxDP: the conversion of Canonne, Kamath and Steinke 2020),
the library's code, not a formula copied here."""

from __future__ import annotations

# OpenDP and scipy.optimize are imported when dp-synthetic runs (flows/lazy.py): every other
# release loads this module with the registry and would pay about half a second for them


def approx_epsilon(rho: float, delta: float) -> float:
    """The epsilon of (epsilon, delta)-DP that rho-zCDP implies, by OpenDP: a Gaussian measurement
    of sensitivity 1 whose scale gives exactly rho, cast to approximate DP."""
    if rho <= 0:
        return 0.0
    import opendp.prelude as dp

    # the Gaussian measurement on floats is behind OpenDP's "contrib" flag (process-wide); it is
    # used here for its privacy map only, never to draw noise (docs/dp.md)
    dp.enable_features("contrib")
    scale = (1.0 / (2.0 * rho)) ** 0.5
    gaussian = dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=scale)
    profile = dp.c.make_zCDP_to_approxDP(gaussian).map(1.0)  # type: ignore[no-untyped-call]
    return float(profile.epsilon(delta))


def rho_for(epsilon: float, delta: float) -> float:
    """The largest rho (to 1e-12) whose (epsilon, delta) conversion stays within epsilon."""
    from scipy.optimize import brentq

    rho = brentq(lambda r: approx_epsilon(r, delta) - epsilon, 1e-12, epsilon, xtol=1e-14)
    while approx_epsilon(rho, delta) > epsilon:  # the root from below: never a rho that overspends
        rho *= 1 - 1e-9
    return float(rho)


def gaussian_rho(sigma: float, sensitivity: float) -> float:
    return sensitivity**2 / (2.0 * sigma**2)


def exponential_rho(epsilon: float) -> float:
    return epsilon**2 / 8.0
