"""The config mirrors the core: allowed values from the core's registries, weight processes from
attnflow.model.registry, the whole-step rule from attnflow.simulation, build() -> SimulationSpec, and
library messages that speak Python (the CLI translates them into flags)."""

from __future__ import annotations

import ast
import inspect
import json
import re
from pathlib import Path

import pytest
import torch
import yaml
from experiments_helpers import TINY, tiny_with
from typer.testing import CliRunner

import attnflow as af
from attnflow import integrators
from attnflow.experiments import ConfigError, build, load_config, run_experiment, schema as schema_mod
from attnflow.experiments.errors import format_choices
from attnflow.model import attention, registry, transformer, weights
from attnflow.simulation import DTYPES, SimulationSpec, Simulator, simulator as simulator_mod

SRC = Path(af.__file__).resolve().parent

# -- allowed values ------------------------------------------------------------------------------------
CORE = {
    "model.direction": lambda: tuple(transformer.DIRECTIONS),
    "model.attention": lambda: attention.ATTENTION_KINDS,
    "model.geometry": lambda: transformer.GEOMETRIES,
    "model.backend": lambda: transformer.BACKENDS,
    "weights.noise": lambda: weights.NOISE_KINDS,
    "weights.forcing": lambda: weights.FORCINGS,
    "weights.phases": lambda: weights.PHASE_KINDS,
    "integrator.method": lambda: tuple(integrators.INTEGRATORS),
    "integrator.loop": lambda: tuple(simulator_mod.LOOPS),
    "precision": lambda: tuple(DTYPES),
}


def test_choices_are_the_core_registries():
    assert set(schema_mod.CHOICES) == set(CORE)
    for key, core in CORE.items():
        assert schema_mod.CHOICES[key]() == tuple(core()), key
    assert schema_mod.ModelConfig.model_fields["beta"].metadata[-1].le == transformer.BETA_MAX


_WEIGHTS_OF = {
    "weights.noise": "ornstein_uhlenbeck",
    "weights.forcing": "oscillating",
    "weights.phases": "oscillating",
}


def _config_with(key: str, value) -> dict:
    section, _, field = key.rpartition(".")
    if section != "weights":
        return tiny_with(**{f"{section}__{field}" if section else field: value})
    cfg = {**TINY, "weights": {"process": _WEIGHTS_OF[key], field: value}}
    if key == "weights.forcing" and value in registry.forcing_dimensions():
        cfg["tokens"] = {"init": "uniform", "n": 4, "d": registry.forcing_dimensions()[value]}
    return cfg


@pytest.mark.parametrize("key", sorted(CORE))
def test_every_core_value_is_accepted_and_others_are_listed(key):
    section, _, field = key.rpartition(".")
    for value in CORE[key]():
        cfg = load_config(_config_with(key, value))
        assert getattr(getattr(cfg, section) if section else cfg, field) == value
    allowed = format_choices(CORE[key]())
    with pytest.raises(ConfigError, match=re.escape(f"{key}: got 'nonesuch'; allowed values: {allowed}")):
        load_config(_config_with(key, "nonesuch"))


def test_a_name_added_to_a_registry_is_a_valid_config_value(monkeypatch):
    with pytest.raises(ConfigError, match=r"integrator\.method: got 'my_euler'; allowed values: 'euler'"):
        load_config(tiny_with(integrator__method="my_euler"))
    monkeypatch.setitem(integrators.INTEGRATORS, "my_euler", integrators.ProjectedEuler)
    assert load_config(tiny_with(integrator__method="my_euler")).integrator.method == "my_euler"
    # a registry replaced as a whole (tuples are immutable) is read too
    monkeypatch.setattr(attention, "ATTENTION_KINDS", (*attention.ATTENTION_KINDS, "linear"))
    assert load_config(tiny_with(model__attention="linear")).model.attention == "linear"
    with pytest.raises(
        ConfigError, match=r"model\.attention: got 'linaer'.*'linear'; did you mean 'linear'\?"
    ):
        load_config(tiny_with(model__attention="linaer"))


def test_example_lists_the_registry_names():
    lines = {line.split(":")[0].strip(): line for line in schema_mod.EXAMPLE_YAML.splitlines() if "#" in line}
    assert " | ".join(attention.ATTENTION_KINDS) in lines["attention"]
    assert " | ".join(integrators.INTEGRATORS) in lines["method"]
    assert " | ".join(DTYPES) in lines["precision"]
    assert "ornstein_uhlenbeck" in lines["process"] and "piecewise_constant" not in lines["process"]
    assert "beta <= 1e4" in lines["beta"]


# -- the whole-step rule -------------------------------------------------------------------------------
def test_whole_step_rule_is_the_core_one(monkeypatch):
    def rule(t0, t1, dt):
        raise ValueError(f"core rule says no to ({t1} - {t0})/{dt}")

    from attnflow.experiments import fields  # the schema's time-grid check (schema.py re-exports it)

    monkeypatch.setattr(fields, "n_steps_for", rule)
    with pytest.raises(
        ConfigError, match=r"integrator\.t1 / integrator\.dt: core rule says no to \(0\.2 - 0\.0\)"
    ):
        load_config(TINY)


def test_whole_steps_and_step_count():
    cfg = load_config(tiny_with(integrator__dt=0.1, integrator__t1=0.3))  # 0.3/0.1 = 2.9999999999999996
    assert cfg.integrator.n_steps == 3 == build(cfg).n_steps
    with pytest.raises(
        ConfigError, match=r"integrator\.t1 / integrator\.dt: .*choose t1 = 0\.2 or another dt"
    ):
        load_config(tiny_with(integrator__dt=0.1, integrator__t1=0.25))


# -- weight processes ----------------------------------------------------------------------------------
def _section_name(cls) -> str:
    from typing import get_args

    return get_args(cls.model_fields["process"].annotation)[0]


def test_weight_sections_are_registry_entries():
    names = {_section_name(c) for c in schema_mod.WEIGHT_SECTIONS}
    assert names <= set(registry.WEIGHT_PROCESSES)
    assert set(registry.WEIGHT_PROCESSES) - names == {"piecewise_constant"}  # an array, not a config value
    for cls in schema_mod.WEIGHT_SECTIONS:
        entry = registry.WEIGHT_PROCESSES[_section_name(cls)]
        defaults = {k: p.default for k, p in inspect.signature(entry.cls).parameters.items()}
        for key, field in cls.model_fields.items():
            if key == "process":
                continue
            assert key in entry.params
            # the config's defaults are the class's (F: 'identity' is the config spelling of None)
            assert (None if field.default == "identity" else field.default) == defaults[key], key


def test_weight_section_names_not_in_the_registry_fail_at_import(monkeypatch):
    monkeypatch.delitem(registry.WEIGHT_PROCESSES, "oscillating")
    with pytest.raises(RuntimeError, match=r"OscillatingWeights names the weight process 'oscillating'"):
        schema_mod.check_weight_sections()


def test_registry_builds_and_rejects():
    ou = registry.make_weight_process("ornstein_uhlenbeck", F="identity", sigma2=0.5, noise="full")
    assert isinstance(ou, af.OrnsteinUhlenbeck) and ou.F is None and ou.noise == "full"
    assert (
        registry.process_name(ou) == "ornstein_uhlenbeck"
        and registry.process_name(af.Constant()) == "constant"
    )
    layers = torch.zeros(2, 1, 3, 3)
    pc = registry.make_weight_process("piecewise_constant", layers=layers, layer_time=0.5)
    assert isinstance(pc, af.PiecewiseConstant) and pc.layer_time == 0.5
    assert registry.WEIGHT_PROCESSES["oscillating"].params == ("forcing", "phases", "rate")
    with pytest.raises(ValueError, match=r"unknown weight process 'ou'; valid: constant, ornstein_uhlenbeck"):
        registry.make_weight_process("ou")
    with pytest.raises(
        ValueError, match=r"unknown parameter\(s\) 'sigma' of the weight process 'ornstein_uhlenbeck'"
    ):
        registry.make_weight_process("ornstein_uhlenbeck", sigma=1.0)
    with pytest.raises(
        ValueError, match=r"F must be 'identity', None or a \(d, d\) or \(H, d, d\) matrix: got 'eye'"
    ):
        registry.make_weight_process("ornstein_uhlenbeck", F="eye")
    with pytest.raises(ValueError, match=r"unknown phases 'both'"):
        registry.make_weight_process("oscillating", phases="both")
    assert registry.forcing_dimensions() == {"s2": 3, "s1": 2}
    assert registry.forcing_for_dimension(2) == "s1" and registry.forcing_for_dimension(3) == "s2"
    with pytest.raises(
        ValueError, match=r"the named oscillating forcings are defined for d = 2 or 3 .*got d = 5"
    ):
        registry.forcing_for_dimension(5)


def test_edi_cases_are_built_by_the_registry():
    from attnflow.analysis import edi

    expected = {
        "frozen": af.Constant(),
        "ou": af.OrnsteinUhlenbeck(sigma2=1.0, noise="full"),
        "oscillating": af.Oscillating(forcing="s1", phases="per_head"),
        "oscillating_shared": af.Oscillating(forcing="s1", phases="shared"),
    }
    assert list(edi.WEIGHTS) == list(expected)
    for case, process in expected.items():
        got = edi.weight_process(case, noise="full", d=2)
        assert got == process and registry.process_name(got) == edi.WEIGHTS[case][0]
    assert edi.weight_process("oscillating", d=3).forcing == "s2"
    assert edi.weight_process("ou").noise == "symmetric"
    with pytest.raises(
        ValueError, match=r"unknown weights 'sinus'; valid: frozen, ou, oscillating, oscillating_shared"
    ):
        edi.weight_process("sinus")
    with pytest.raises(ValueError, match=r"defined for d = 2 or 3"):
        edi.weight_process("oscillating_shared", d=4)


def test_config_weights_are_built_by_the_registry(monkeypatch):
    calls = []
    real = registry.make_weight_process

    def spy(name, **params):
        calls.append((name, params))
        return real(name, **params)

    from attnflow.experiments import sections  # the schema's weights sections (schema.py re-exports them)

    monkeypatch.setattr(sections, "make_weight_process", spy)
    spec = build(TINY)
    assert (
        "ornstein_uhlenbeck",
        {"sigma2": 0.5, "noise": "symmetric", "F": "identity", "rate": 1.0},
    ) in calls
    assert spec.model.weights == af.OrnsteinUhlenbeck(sigma2=0.5)


# -- build -> SimulationSpec, bit for bit the old path --------------------------------------------------
def _records(sim: Simulator, n_steps: int, every: int) -> list:
    out = [sim.record()]
    sim.run(n_steps, record_every=every, on_record=out.append)
    return out


@pytest.mark.parametrize(
    "weights_cfg",
    [
        {"process": "ornstein_uhlenbeck", "sigma2": 0.5},
        {"process": "oscillating", "phases": "shared"},
        {"process": "constant"},
    ],
)
def test_spec_runs_as_the_old_path_bit_for_bit(weights_cfg):
    cfg = {**TINY, "weights": weights_cfg}
    spec = build(cfg)
    assert isinstance(spec, SimulationSpec)
    with pytest.raises(AttributeError):
        spec.dt = 0.5  # frozen
    # the old path: the core objects made by hand, and the Simulator as experiments/store.py built it
    process = {
        "ornstein_uhlenbeck": lambda: af.OrnsteinUhlenbeck(sigma2=0.5),
        "oscillating": lambda: af.Oscillating(forcing="s2", phases="shared"),
        "constant": af.Constant,
    }[weights_cfg["process"]]()
    model = af.TransformerModel(direction="descent", backend="torch", weights=process)
    x0 = af.tokens.octahedral(2, 8, 3, seed=0)
    D0 = af.heads.symmetric_gaussian(2, 2, 3, seed=0)
    assert spec.model == model
    old = Simulator(
        model, x0, D0, dt=0.01, integrator="euler", seed=0, ledger=True, dtype="float64", device="cpu"
    )
    new = Simulator.from_spec(spec)
    a, b = _records(old, 20, 5), _records(new, spec.n_steps, spec.record_every)
    assert [r.step for r in a] == [r.step for r in b] == [0, 5, 10, 15, 20]
    for ra, rb in zip(a, b, strict=True):
        assert torch.equal(ra.x, rb.x) and ra.time == rb.time
        assert ra.scalars.keys() == rb.scalars.keys()
        for k in ra.scalars:
            assert torch.equal(ra.scalars[k], rb.scalars[k]), k
    assert torch.equal(old.D, new.D)


# -- library messages speak Python; the CLI speaks flags --------------------------------------------------
_FLAG = re.compile(r"(?<![\w-])--[a-z]")


def _raised_strings(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            for sub in ast.walk(node.exc):
                if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                    yield node.lineno, sub.value


def test_library_errors_name_no_cli_flags():
    offenders = [
        f"{p.relative_to(SRC)}:{line}: {text!r}"
        for p in sorted(SRC.rglob("*.py"))
        if p.relative_to(SRC).parts[0] != "cli"  # the command line names its flags
        for line, text in _raised_strings(p)
        if _FLAG.search(text)
    ]
    assert offenders == []


def test_experiments_layer_imports_no_private_names():
    offenders = []
    cli = sorted((SRC / "cli").glob("*.py"))
    for p in [*sorted((SRC / "experiments").glob("*.py")), *cli, SRC / "model" / "registry.py"]:
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom):
                offenders += [
                    f"{p.name}: {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert offenders == []


def test_mismatch_messages_speak_python_and_the_cli_translates(tmp_path):
    from attnflow.cli import app, for_cli
    from attnflow.experiments import RunConfigMismatchError, open_run, run_info

    out = tmp_path / "run"
    run_experiment(TINY, out)
    with pytest.raises(
        RunConfigMismatchError, match=r"choose another out_dir or pass resume=False to overwrite it"
    ):
        run_experiment({**TINY, "seed": 3}, out)
    with pytest.raises(FileNotFoundError, match=r"create one with run_experiment\(config, out_dir\)"):
        open_run(tmp_path)
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({**TINY, "seed": 3}))
    res = CliRunner().invoke(app, ["run", str(other), "--out", str(out)])
    assert res.exit_code == 1 and "choose another --out or pass --no-resume to overwrite it" in res.output
    assert "resume=False" not in res.output and "out_dir" not in res.output
    # a run whose process is gone: run_info says how to resume in Python, `attnflow info` with flags
    meta = json.loads((out / "meta.json").read_text())
    meta.update(status="running", pid=2**22 + 12345)
    (out / "meta.json").write_text(json.dumps(meta))
    info = run_info(out)  # the status says what happened, "resume" how to go on
    assert info["status"] == "interrupted (process gone)"
    assert "run_experiment(config, out_dir)" in info["resume"]
    res = CliRunner().invoke(app, ["info", str(out)])
    assert f"resume with `attnflow run CONFIG --out {out}`" in res.stdout
    assert for_cli("rerun with resume=False") == "rerun with --no-resume"


def test_sweep_messages_speak_python(tmp_path):
    from attnflow.experiments import SweepMismatchError, parse_grid, run_sweep
    from attnflow.experiments.sweep import read_index

    with pytest.raises(ValueError, match=r"the grid is empty: .* e\.g\. grid=\{'heads\.H': \[2, 4\]\}"):
        run_sweep(TINY, {}, tmp_path / "s")
    with pytest.raises(ValueError, match=r"list all its values in one item 'heads\.H=v1,v2'"):
        parse_grid(["heads.H=1", "heads.H=2"])
    with pytest.raises(
        ValueError, match=r"a grid must read key=v1,v2,\.\.\.: got 'heads\.H'; e\.g\. 'heads\.H=2,4'"
    ):
        parse_grid(["heads.H"])
    run_sweep(TINY, {"seed": [0]}, tmp_path / "s", workers=1)
    assert read_index(tmp_path / "s")["keys"] == ["seed"]
    with pytest.raises(SweepMismatchError, match=r"choose another out_dir or pass resume=False"):
        run_sweep(TINY, {"seed": [1]}, tmp_path / "s", workers=1)
    with pytest.raises(FileNotFoundError, match=r"is not a sweep directory: tasks\.json not found"):
        read_index(tmp_path)


def test_files_helpers(tmp_path):
    from attnflow.experiments.files import atomic_write_text, disk_usage, utc_now

    p = tmp_path / "a.txt"
    atomic_write_text(p, "hello")
    atomic_write_text(p, "hello again")
    assert p.read_text() == "hello again" and not (tmp_path / "a.txt.tmp").exists()
    assert disk_usage(p) == 11 and disk_usage(tmp_path) == 11
    assert utc_now().endswith("+00:00")


def test_facade_and_package_exports():
    import attnflow.experiments as ex
    import attnflow.experiments.config as cfg_mod

    for name in (
        "load_config",
        "dump_config",
        "config_diff",
        "with_overrides",
        "build",
        "ConfigError",
        "EXAMPLE_YAML",
    ):
        assert getattr(ex, name) is getattr(cfg_mod, name)
    assert cfg_mod.build is ex.builder.build and cfg_mod.ConfigError is ex.errors.ConfigError
    assert cfg_mod.flatten_config(load_config(TINY))["heads.H"] == 2
