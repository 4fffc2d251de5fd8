"""Commands that compute a theory check rather than read a directory: ``check-edi`` (the discrete
energy-dissipation identity (147)) and ``critical-noise`` (the critical token noise)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._app import app
from .common import DeviceOption, check_device_cli, check_output_file
from .errors import fail, reported


def _eps_c(beta: float, d: int, attention: str, n: int | None) -> float:
    """eps_c, with float64's limits of the formula named as such (``--d 100000`` printed "math domain
    error"): the Funk-Hecke eigenvalues of e^(beta <x, y>) under- or overflow for large d at small beta
    (measured: the formula holds up to d = 81 at beta = 1e-6, d = 295 at beta = 1)."""
    from ..analysis.noise_stability import critical_token_noise

    try:
        return critical_token_noise(beta, d, attention, n=n)
    except (OverflowError, ValueError) as exc:
        if not str(exc).startswith("math "):
            raise  # the library's own check of its arguments, which names the rule
        raise fail(
            f"eps_c for --beta {beta:g} --d {d}{'' if n is None else f' --n {n}'} leaves float64 (the "
            f"Funk-Hecke eigenvalues of e^(beta <x, y>) on S^{d - 1} under- or overflow: {exc}); choose a "
            "smaller --d (the formula holds up to d = 81 at beta = 1e-6, d = 295 at beta = 1)",
            2,
        ) from None


@app.command("check-edi")
def check_edi(
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Write the full audit (every dt, every case) as JSON.")
    ] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Small sizes (seconds), for a smoke check.")] = False,
    H: Annotated[list[int] | None, typer.Option("--H", help="Head counts (repeat the option).")] = None,
    weights: Annotated[
        list[str] | None,
        typer.Option("--weights", help="frozen, ou, oscillating, oscillating_shared (repeat the option)."),
    ] = None,
    device: DeviceOption = None,
) -> None:
    """Audit the discrete energy-dissipation identity (147): both residuals and their order in dt."""
    with reported("the audit failed"):
        check_device_cli(device)
        if json_path is not None:
            check_output_file(json_path, "--json")  # before the audit, not after it
        from ..analysis.edi import check_edi_cli

        check_edi_cli(
            None if json_path is None else str(json_path), quick, H, weights, device=device or "cpu"
        )


@app.command("critical-noise")
def critical_noise(
    beta: Annotated[list[float], typer.Option("--beta", help="Inverse temperatures (repeat the option).")],
    d: Annotated[int, typer.Option("--d", help="Ambient dimension: tokens on S^(d-1).")] = 3,
    attention: Annotated[str, typer.Option("--attention", help="softmax or usa.")] = "softmax",
    n: Annotated[int | None, typer.Option("--n", help="Tokens, for the finite-n value.")] = None,
) -> None:
    """The derived critical token noise eps_c(beta) below which the uniform state of ascent tokens with one
    identity head is unstable (docs/noisy_tokens.md)."""
    with reported("cannot compute the critical noise"):
        rows = [
            (b, _eps_c(b, d, attention, None), None if n is None else _eps_c(b, d, attention, n))
            for b in beta
        ]
        typer.echo(f"attention {attention}, S^{d - 1}, ascent, one identity head")
        for b, ec, ecn in rows:
            typer.echo(
                f"beta = {b:g}: eps_c = {ec:.6g} (mean field)"
                + ("" if ecn is None else f", {ecn:.6g} (n = {n})")
            )
