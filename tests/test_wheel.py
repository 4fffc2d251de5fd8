"""attnflow as a user installs it (issue 31): ``python -m build`` makes the sdist and the wheel (the wheel
built from the sdist, so a file missing from the sdist fails here), the wheel goes into a fresh virtual
environment outside the checkout, and from there ``attnflow --version``, a tiny run, a quick study and
``attnflow report`` work, with the package data (presets, corpus) inside the wheel and numba's cache working
where site-packages is read-only. Measured (whole module, load average 25 on the shared 2-core machine):
build 10.6 s, install 18.4 s, --version 16.7 s, tiny run with the first compile 479 s, quick study 225 s,
report 37 s.

Speed: the new environment gets the wheel itself (``pip install --no-deps --no-index``) and sees the
dependencies of the environment running the tests through a ``.pth`` line (plain directory entries: the
checkout's editable install is not seen, see ``test_the_checkout_is_not_seen``); ``pip check`` then holds the
wheel's declared requirements against them. Installing torch & co. again would only test pip.
``ATTNFLOW_WHEEL_FULL=1`` installs the dependencies into the new environment as well (from the pip cache or
the index; minutes).

Read-only site-packages: as root (CI containers, this machine) the commands run as user ``nobody`` (setpriv),
for whom the root-owned site-packages is read-only; otherwise the site-packages is made read-only (chmod).
"""

from __future__ import annotations

import glob
import os
import shutil
import site
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import pytest

from attnflow._version import __version__

ROOT = Path(__file__).resolve().parents[1]
#: build + venv + install: 25-40 s on the shared 2-core machine under a load of 17-25 (default tier). The
#: commands compile the numba kernels into an empty cache: about 50 s on 2 idle cores, 6 to over 10 min under
#: that load, so ``test_installed_commands`` is in the slow tier (``bash scripts/test.sh -m slow``); the limit
#: per command leaves room for a loaded machine
STEP_LIMIT_S = 1500

TINY_RUN = """\
name: tiny
model: {direction: descent, attention: softmax, beta: 1.0}
weights: {process: ornstein_uhlenbeck, sigma2: 1.0}
tokens: {init: octahedral, n: 12, d: 3}
heads: {init: symmetric_gaussian, H: 2}
integrator: {method: euler, dt: 0.01, t1: 0.2}
record: {every: 5}
paths: 2
seed: 0
"""


def _run(cmd, *, env, cwd, user=None, timeout=STEP_LIMIT_S):
    pre = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if user == "nobody" else []
    res = subprocess.run(
        pre + [str(c) for c in cmd],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert res.returncode == 0, (
        f"{cmd} failed ({res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-5000:]}"
    )
    return res


@pytest.fixture(scope="module")
def wheel_env():
    """(python of the new environment, its site-packages, environment variables, work dir, user, timings)."""
    base = Path(tempfile.mkdtemp(prefix="attnflow-wheel-"))  # under /tmp: outside the checkout
    os.chmod(base, 0o755)  # readable by the unprivileged user the commands run as
    timings = {}
    # the tools run without PYTHONPATH: a checkout's src/ on the path would make pip see attnflow installed
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    try:
        t0 = time.monotonic()
        tree = base / "checkout"
        ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
        shutil.copytree(ROOT / "src", tree / "src", ignore=ignore)
        for name in ("pyproject.toml", "README.md", "LICENSE"):
            shutil.copy2(ROOT / name, tree / name)
        dist = base / "dist"
        # no build isolation: setuptools of the test environment (an isolated build fetches it from the index)
        _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, tree], env=clean, cwd=base)
        timings["build"] = time.monotonic() - t0
        wheels = sorted(dist.glob("attnflow-*.whl"))
        sdists = sorted(dist.glob("attnflow-*.tar.gz"))
        assert [w.name for w in wheels] == [f"attnflow-{__version__}-py3-none-any.whl"]
        assert [s.name for s in sdists] == [f"attnflow-{__version__}.tar.gz"]

        t0 = time.monotonic()
        venv = base / "venv"
        _run([sys.executable, "-m", "venv", "--without-pip", venv], env=clean, cwd=base)
        py = venv / "bin" / "python"
        purelib = Path(
            subprocess.run(
                [py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
        full = os.environ.get("ATTNFLOW_WHEEL_FULL", "0") == "1"
        if full:
            extras = "[models,pde,report,animate]"
            _run(
                [sys.executable, "-m", "pip", "--python", py, "install", f"{wheels[0]}{extras}"],
                env=clean,
                cwd=base,
                timeout=1800,
            )
        else:
            deps = [p for p in {*site.getsitepackages(), sysconfig.get_path("purelib")} if Path(p).is_dir()]
            (purelib / "_attnflow_test_deps.pth").write_text("\n".join(deps) + "\n")
            _run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "--python",
                    py,
                    "install",
                    "--no-deps",
                    "--no-index",
                    wheels[0],
                ],
                env=clean,
                cwd=base,
            )
        # the wheel's declared requirements hold in the new environment (other packages' are not our business)
        chk = subprocess.run(
            [sys.executable, "-m", "pip", "--python", py, "check"],
            env=clean,
            cwd=base,
            capture_output=True,
            text=True,
            timeout=STEP_LIMIT_S,
            check=False,
        )
        broken = [ln for ln in chk.stdout.splitlines() if ln.lower().startswith("attnflow ")]
        assert not broken, broken
        timings["install"] = time.monotonic() - t0

        home = base / "home"
        work = base / "work"
        for d in (home, work):
            d.mkdir()
            os.chmod(d, 0o777)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("PYTHON", "NUMBA_CACHE", "XDG_", "VIRTUAL_ENV"))
        }
        env.update(
            HOME=str(home),
            PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
            OMP_NUM_THREADS="1",
            NUMBA_NUM_THREADS="2",
            MPLBACKEND="Agg",
        )
        user = None
        if os.geteuid() == 0 and shutil.which("setpriv"):
            user = "nobody"
        else:  # make the installed package read-only for this user
            for p in (purelib / "attnflow").rglob("*"):
                if p.is_dir():
                    p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
            (purelib / "attnflow").chmod(0o555)
        yield {
            "py": py,
            "purelib": purelib,
            "env": env,
            "work": work,
            "user": user,
            "timings": timings,
            "home": home,
        }
    finally:
        for p in base.rglob("*"):  # undo the chmod so that the directory can be removed
            if p.is_dir() and not p.is_symlink():
                p.chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


def test_package_data_in_the_wheel(wheel_env):
    pkg = wheel_env["purelib"] / "attnflow"
    presets = sorted(p.name for p in (pkg / "experiments" / "presets").glob("*.yaml"))
    shipped = sorted(p.name for p in (ROOT / "src" / "attnflow" / "experiments" / "presets").glob("*.yaml"))
    assert presets == shipped and "massucco2026.yaml" in presets
    assert (pkg / "studies" / "data" / "corpus.txt").read_text() == (
        ROOT / "src" / "attnflow" / "studies" / "data" / "corpus.txt"
    ).read_text()
    # every non-Python file of the package is in the wheel
    src = ROOT / "src" / "attnflow"
    missing = [
        str(p.relative_to(src))
        for p in src.rglob("*")
        if p.is_file()
        and p.suffix not in (".py", ".pyc")
        and "__pycache__" not in p.parts
        and not (pkg / p.relative_to(src)).is_file()
    ]
    assert not missing, f"files of src/attnflow missing from the wheel (pyproject package-data): {missing}"
    lic = glob.glob(str(wheel_env["purelib"] / f"attnflow-{__version__}.dist-info" / "licenses" / "LICENSE"))
    assert lic and "MIT License" in Path(lic[0]).read_text()


def test_the_checkout_is_not_seen(wheel_env):
    res = _run(
        [wheel_env["py"], "-c", "import attnflow, sys; print(attnflow.__file__)"],
        env=wheel_env["env"],
        cwd=wheel_env["work"],
        user=wheel_env["user"],
    )
    assert res.stdout.strip().startswith(str(wheel_env["purelib"])), res.stdout
    assert str(ROOT) not in res.stdout


@pytest.mark.slow
def test_installed_commands(wheel_env):
    """--version, a tiny run, a quick study, the report: from the new environment, site-packages read-only."""
    env, work, user = wheel_env["env"], wheel_env["work"], wheel_env["user"]
    times = dict(wheel_env["timings"])
    if user == "nobody":  # the precondition of the numba check: site-packages is read-only for this user
        probe = subprocess.run(
            [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "touch",
                str(wheel_env["purelib"] / "attnflow" / "probe"),
            ],
            capture_output=True,
            check=False,
        )
        assert probe.returncode != 0
    t0 = time.monotonic()
    res = _run(["attnflow", "--version"], env=env, cwd=work, user=user)
    assert __version__ in res.stdout
    times["version"] = time.monotonic() - t0

    (work / "tiny.yaml").write_text(TINY_RUN)
    t0 = time.monotonic()
    _run(["attnflow", "run", "tiny.yaml", "--out", "runs/tiny"], env=env, cwd=work, user=user)
    times["tiny run"] = time.monotonic() - t0
    assert (work / "runs" / "tiny" / "data.zarr").is_dir() and (
        work / "runs" / "tiny" / "meta.json"
    ).is_file()

    t0 = time.monotonic()
    _run(
        ["attnflow", "study", "run", "massucco2026", "--quick", "-j", "1", "--out", "out/quick"],
        env=env,
        cwd=work,
        user=user,
    )
    times["quick study"] = time.monotonic() - t0
    assert (work / "out" / "quick" / "summary.json").is_file()

    t0 = time.monotonic()
    _run(["attnflow", "report", "out/quick"], env=env, cwd=work, user=user)
    times["report"] = time.monotonic() - t0
    pages = list((work / "out" / "quick").rglob("*.html"))
    assert pages and max(p.stat().st_size for p in pages) > 10_000

    # numba cached the compiled kernels outside the read-only site-packages, and nothing was written there
    written = [p for p in (wheel_env["purelib"] / "attnflow").rglob("*") if p.suffix in (".nbi", ".nbc")]
    assert not written, written
    cached = list(wheel_env["home"].rglob("*.nbi")) + list(wheel_env["home"].rglob("*.nbc"))
    assert cached, "numba cached nothing: the kernels would compile again in every process"
    print("wheel check times (s): " + ", ".join(f"{k} {v:.1f}" for k, v in times.items()))
