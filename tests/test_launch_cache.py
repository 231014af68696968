"""The cell's own compile cache across its launches (fwbench.backends.launch_cache): where each framework's cache
points, what a process records, and that the runner gives it only to launched workers of a study that keeps it."""

from __future__ import annotations

from pathlib import Path

from fwbench.backends import launch_cache


def _settings(**compile_options):
    return {"trials": 3, "compile": {"launch_cache": True, **compile_options}}


def test_enabled_needs_the_setting_and_more_than_one_launch():
    assert launch_cache.enabled(_settings())
    assert not launch_cache.enabled({**_settings(), "trials": 1})
    assert not launch_cache.enabled({"trials": 3, "compile": {"launch_cache": False}})
    assert not launch_cache.enabled({"trials": 3})


def test_each_framework_gets_its_own_cache_in_the_cells_directory(tmp_path):
    root = tmp_path / "cache-0"
    torch_env = {launch_cache.LAUNCH_CACHE_ENV: str(root)}
    assert launch_cache.apply("torch", "compile", _settings(), torch_env) == str(root / "inductor")
    assert torch_env["TORCHINDUCTOR_CACHE_DIR"] == str(root / "inductor")
    graphs_env = {launch_cache.LAUNCH_CACHE_ENV: str(root)}  # torch.compile with CUDA graphs: Inductor's cache too
    assert launch_cache.apply("torch", "cudagraphs", _settings(), graphs_env) == str(root / "inductor")
    jax_env = {launch_cache.LAUNCH_CACHE_ENV: str(root)}
    launch_cache.apply("jax", "jit", _settings(), jax_env)
    assert jax_env["JAX_COMPILATION_CACHE_DIR"] == str(root / "jax")
    assert jax_env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "0"  # every program, however fast it compiled
    tf_env = {launch_cache.LAUNCH_CACHE_ENV: str(root), "TF_XLA_FLAGS": "--tf_xla_auto_jit=0"}
    launch_cache.apply("tensorflow", "xla", _settings(), tf_env)
    assert launch_cache.tf_cache_directory(tf_env["TF_XLA_FLAGS"]) == str(root / "tensorflow")
    assert "--tf_xla_auto_jit=0" in tf_env["TF_XLA_FLAGS"]
    assert all((root / name).is_dir() for name in ("inductor", "jax", "tensorflow"))


def test_nothing_without_a_launch_cache_for_eager_or_under_the_studys_own_cache(tmp_path):
    assert launch_cache.apply("jax", "jit", _settings(), {}) is None
    env = {launch_cache.LAUNCH_CACHE_ENV: str(tmp_path)}
    assert launch_cache.apply("torch", "eager", _settings(), env) is None
    assert launch_cache.apply("numpy", "eager", _settings(), env) is None
    assert launch_cache.apply("torch", "compile", _settings(inductor_cache="/study/cache"), env) is None
    assert launch_cache.apply("jax", "jit", {**_settings(), "jax_compilation_cache": "/study/jax"}, env) is None
    assert set(env) == {launch_cache.LAUNCH_CACHE_ENV}


def test_a_process_records_cold_then_warm_and_whose_cache(tmp_path, monkeypatch):
    root = tmp_path / "cache-1"
    monkeypatch.setenv(launch_cache.LAUNCH_CACHE_ENV, str(root))
    directory = root / "jax"
    directory.mkdir(parents=True)
    first = launch_cache.describe(directory)
    assert first["state"] == "cold" and first["scope"] == launch_cache.SCOPE
    (directory / "entry").write_bytes(b"program")
    assert launch_cache.describe(directory)["state"] == "warm"
    assert "dir" not in first, "a scratch path differs in every run: not recorded"
    shared = launch_cache.describe(tmp_path / "elsewhere")
    assert shared["scope"] == "the study's (shared)" and shared["dir"] == str(tmp_path / "elsewhere")
    flags = f"--tf_xla_auto_jit=0 {launch_cache.TF_CACHE_FLAG}={directory}"
    assert launch_cache.recorded_tf_flags(flags) == (
        f"--tf_xla_auto_jit=0 {launch_cache.TF_CACHE_FLAG}=<this cell's launch cache>"
    )
    assert launch_cache.recorded_tf_flags("--tf_xla_auto_jit=0") == "--tf_xla_auto_jit=0"


def test_the_runner_gives_the_cache_to_launched_workers_only(tmp_path, monkeypatch):
    from fwbench.running.context import CellRun, Context
    from fwbench.study.grid import Cell

    made = []
    monkeypatch.setattr("fwbench.running.context.Child", lambda *args, **kwargs: made.append((args, kwargs)))
    cell = Cell(
        suite="inference", framework="jax", mode="jit", model="small_cnn", precision="fp32", batch_size=1, image_size=32
    )
    context = Context([cell], _settings(), tmp_path, [tmp_path / "spec0.json"], [None], (), None, 0.0, ())
    context.child(0, CellRun(env={"A": "1"}), "served", serve=True)
    context.child(0, CellRun(), "plain")
    (served_args, _), (plain_args, _) = made
    assert served_args[7] == {"A": "1", launch_cache.LAUNCH_CACHE_ENV: str(tmp_path / "cache-0")}
    assert launch_cache.LAUNCH_CACHE_ENV not in plain_args[7]
    off = Context([cell], {"trials": 3}, tmp_path, [tmp_path / "s.json"], [None], (), None, 0.0, ())
    off.child(0, CellRun(), "served", serve=True)
    assert launch_cache.LAUNCH_CACHE_ENV not in made[-1][0][7]


def test_paths_are_plain_strings(tmp_path):
    env = {launch_cache.LAUNCH_CACHE_ENV: str(tmp_path)}
    directory = launch_cache.apply("tensorflow", "xla", _settings(), env)
    assert isinstance(directory, str) and Path(directory).parent == tmp_path


def test_a_workaround_empties_the_cells_cache_so_its_next_launch_compiles_cold(tmp_path):
    from fwbench.running.children import Outcome
    from fwbench.running.context import CellRun, Context
    from fwbench.running.failures import Failure, Workaround
    from fwbench.study.grid import Cell

    cell = Cell(
        suite="inference", framework="jax", mode="jit", model="small_cnn", precision="fp32", batch_size=1, image_size=32
    )
    rung = Workaround(name="no_triton", kinds=("compiler",), pattern="boom", env={"X": "1"})
    context = Context([cell], _settings(), tmp_path, [tmp_path / "s.json"], [None], (), None, 0.0, (rung,))
    cache = tmp_path / "cache-0" / "jax"
    cache.mkdir(parents=True)
    (cache / "program").write_bytes(b"compiled without the workaround")
    outcomes = iter([Outcome(None, Failure("compiler", "boom"), "boom"), Outcome({}, None, "")])
    run = CellRun()
    outcome, attempts = context.attempt(0, run, 1, "launch 1", lambda attempt: next(outcomes))
    assert attempts == 2 and outcome.failure is None and run.env == {"X": "1"}
    assert not (tmp_path / "cache-0").exists()
