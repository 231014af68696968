"""What the study ran on, summarised across its cells (and flagged where cells disagree).

Execution modes (fwbench.study.modes) get rows of their own: which modes each framework ran in, torch.compile's mode,
each compiled variant's compilation cache and the kernel autotuning setting, each read from the cells' records, so a
difference between two cells of one framework in two modes is never folded into one value.

The CPU gets rows beyond its model name (fwbench.trackers.hardware): its family, model, stepping and microcode, its
instruction-set extensions, its caches, NumPy's BLAS and the kernels it chose, the BLAS and OpenMP libraries each
framework's processes loaded, and any environment variable that forces a kernel choice. A cloud VM's "AMD EPYC" may
be a Zen 3 without AVX-512 or a Zen 4 with it, and the study's ratios differ between the two."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from fwbench.analysis.common.cells import load_cells
from fwbench.analysis.common.latex import label, mode_label, ordered_frameworks, ordered_variants
from fwbench.analysis.common.partners import cell_mode, tf32_scope_of, variant_names
from fwbench.installation import untested_framework_versions
from fwbench.study.modes import TORCH_COMPILED_MODES, is_compiled


def _one(values: set[Any]) -> Any:
    values.discard(None)
    if not values:
        return None
    return next(iter(values)) if len(values) == 1 else " / ".join(sorted(map(str, values))) + " (differs by cell)"


# Library versions of the setup table, each row only when the study has cells of its framework: (label, framework,
# key in the framework's `versions`).
VERSION_ROWS = (
    ("PyTorch", "torch", "torch"),
    ("torchvision", "torch", "torchvision"),
    ("JAX", "jax", "jax"),
    ("jaxlib", "jax", "jaxlib"),
    ("Flax", "jax", "flax"),
    ("TensorFlow", "tensorflow", "tensorflow"),
    ("Keras", "tensorflow", "keras"),
)
# Thread pools a framework sets beside the intra-op count every framework shares ("Threads per cell"), printed as
# "intra / inter": (label, framework, intra-op key, inter-op key in its `settings`).
THREAD_ROWS = (("TensorFlow threads (intra-op / inter-op)", "tensorflow", "intra_op_threads", "inter_op_threads"),)
# Rows of the setup table that only mean something when cells ran on a GPU: (label, framework, where, key).
GPU_ROWS = (
    ("GPU driver (CUDA API)", "jax", "versions", "cuda_driver"),
    ("CUDA runtime (PyTorch)", "torch", "versions", "cuda"),
    ("cuDNN (PyTorch)", "torch", "versions", "cudnn"),
    ("CUDA runtime (JAX)", "jax", "versions", "cuda"),
    ("cuDNN (JAX)", "jax", "versions", "cudnn"),
    ("JAX CUDA plugin", "jax", "versions", "plugins"),
    ("CUDA runtime (TensorFlow)", "tensorflow", "versions", "cuda"),
    ("cuDNN (TensorFlow)", "tensorflow", "versions", "cudnn"),
    ("PyTorch cuDNN benchmark", "torch", "settings", "cudnn_benchmark"),
    ("JAX preallocation", "jax", "settings", "preallocate"),
    ("TensorFlow memory growth", "tensorflow", "settings", "memory_growth"),
)
# Frameworks that compile with XLA and so read XLA_FLAGS.
XLA_FRAMEWORKS = ("jax", "tensorflow")


def _framework(result: dict[str, Any]) -> dict[str, Any]:
    return result["provenance"].get("framework") or {}


def _present(results: list[dict[str, Any]]) -> set[str]:
    """The frameworks the study has cells of (failed ones included: their rows then read "---")."""
    return {result["cell"]["framework"] for result in results}


def _tf32(results: list[dict[str, Any]]) -> set[str]:
    """TF32 per precision: "fp32: off" where every framework agrees, otherwise each framework's state
    ("fp32: PyTorch on, JAX/Flax off"), so a disagreement shows which framework it is."""
    states: dict[str, dict[str, set[str]]] = {}
    for result in results:
        if not _framework(result):  # a failed cell: nothing ran, no TF32 state
            continue
        settings = _framework(result).get("settings") or {}
        scope = tf32_scope_of(settings)
        state = "off" if scope == "none" else f"in {scope}"
        states.setdefault(result["cell"]["precision"], {}).setdefault(result["cell"]["framework"], set()).add(state)
    parts = set()
    for precision, by_framework in states.items():
        every = set().union(*by_framework.values())
        if len(every) == 1:
            parts.add(f"{precision}: {next(iter(every))}")
        else:
            shown = (f"{label(f)} {'/'.join(sorted(by_framework[f]))}" for f in ordered_frameworks(by_framework))
            parts.add(f"{precision}: {', '.join(shown)}")
    return {"; ".join(sorted(parts))} if parts else set()


def _gpu_rows(results: list[dict[str, Any]]) -> dict[str, set[Any]]:
    """CUDA stack and GPU knobs, each from the framework it belongs to (rows of frameworks the study has), plus
    where cells ran (slots)."""
    present = _present(results)
    gpu_rows = [row for row in GPU_ROWS if row[1] in present]
    rows: dict[str, set[Any]] = {label_: set() for label_, *_ in gpu_rows}
    rows |= {"Compute capability": set(), "TF32 in effect": _tf32(results), "XLA_FLAGS": set(), "GPU slots": set()}
    for result in results:
        framework = _framework(result)
        for label_, name, where, key in gpu_rows:
            if framework.get("name") == name:
                rows[label_].add((framework.get(where) or {}).get(key))
        settings = framework.get("settings") or {}
        if framework.get("name") in XLA_FRAMEWORKS:
            rows["XLA_FLAGS"].add(settings.get("xla_flags") or "(none)")
        rows["Compute capability"].add((framework.get("device") or {}).get("compute_capability"))
        placement = result["provenance"].get("placement") or {}
        if placement.get("slots"):
            rows["GPU slots"].add(f"{placement['slots']} (one cell per GPU)")
    return rows


def _versions(results: list[dict[str, Any]], present: set[str]) -> dict[str, set[Any]]:
    """The library versions of the frameworks the study has, each from its own cells, and the tested version beside
    each that is not the tested set's ("2.11.0 (tested: 2.14.1)", fwbench.installation)."""
    rows = [row for row in VERSION_ROWS if row[1] in present]
    fields: dict[str, set[Any]] = {label_: set() for label_, *_ in rows}
    for result in results:
        framework = _framework(result)
        for label_, name, key in rows:
            if framework.get("name") in (None, name):  # a cell from before `name` was recorded counts for every row
                version = (framework.get("versions") or {}).get(key)
                tested = untested_framework_versions({key: version}).get(key)
                fields[label_].add(f"{version} (tested: {tested})" if tested else version)
    return fields


def _thread_rows(results: list[dict[str, Any]], present: set[str]) -> dict[str, set[Any]]:
    """A framework's intra-op and inter-op thread counts, "intra / inter", for the frameworks the study has."""
    rows = [row for row in THREAD_ROWS if row[1] in present]
    fields: dict[str, set[Any]] = {label_: set() for label_, *_ in rows}
    for result in results:
        framework = _framework(result)
        settings = framework.get("settings") or {}
        for label_, name, intra, inter in rows:
            if framework.get("name") == name:
                fields[label_].add(f"{settings.get(intra, '---')} / {settings.get(inter, '---')}")
    return fields


def _placement_rows(results: list[dict[str, Any]]) -> dict[str, str]:
    """Where the cells ran, when that is more than this one machine: the batch scheduler and its job count, and the
    nodes (their number and names, the first few). A local study on one machine has neither row."""
    placements = [result["provenance"].get("placement") or {} for result in results]
    nodes = sorted({p.get("node") or p.get("host") for p in placements} - {None})
    jobs = {(p["scheduler"].get("name"), p["scheduler"].get("job_id")) for p in placements if p.get("scheduler")}
    rows = {}
    if jobs:
        names = sorted({str(name).upper() if name == "slurm" else str(name) for name, _ in jobs})
        rows["Scheduler"] = f"{', '.join(names)} ({len(jobs)} job{'s' if len(jobs) != 1 else ''})"
    if jobs or len(nodes) > 1:
        shown = ", ".join(nodes[:4]) + (f" and {len(nodes) - 4} more" if len(nodes) > 4 else "")
        rows["Nodes"] = f"{len(nodes)} ({shown})"
    return rows


def _variants(results: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The (framework, mode) pairs the study has cells of, NumPy (the micro suite's host baseline) apart."""
    return ordered_variants(
        (r["cell"]["framework"], cell_mode(r["cell"])) for r in results if r["cell"]["framework"] != "numpy"
    )


def _per_variant(results: list[dict[str, Any]], read, names: dict[tuple[str, str], str]) -> str | None:
    """One value per variant of `names` (its name in the study, "PyTorch (compiled): cold; JAX/Flax: disabled"), or
    the one value every variant shares; `read(settings)` gives a cell's value (None: not recorded), and cells that
    recorded none are left out."""
    values: dict[tuple[str, str], set[Any]] = {v: set() for v in names}
    for result in results:
        variant = (result["cell"]["framework"], cell_mode(result["cell"]))
        value = read(_framework(result).get("settings") or {})
        if variant in values and value is not None:
            values[variant].add(str(value))
    found = {v: _one(set(vs)) for v, vs in values.items() if vs}
    if not found:
        return None
    if len(set(found.values())) == 1 and len(found) == len(names):
        return next(iter(found.values()))
    return "; ".join(f"{names[v]}: {value}" for v, value in found.items())


def _record(key: str, field: str):
    """A reader of one field of a recorded setting that is a record ({"state": ...}); a bare value is its own."""

    def read(settings: dict[str, Any]) -> Any:
        value = settings.get(key)
        return value.get(field) if isinstance(value, dict) else value

    return read


def _autotune(results: list[dict[str, Any]]) -> str | None:
    """The study's autotune setting as the cells recorded it, and where it was in effect: "on (not applicable on
    the CPU)", "on, in effect", or each value where cells differ."""
    records = [
        (_framework(r).get("settings") or {}).get("autotune") for r in results if r["cell"]["framework"] != "numpy"
    ]
    records = [record for record in records if isinstance(record, dict)]
    if not records:
        return None
    setting = _one({str(record.get("setting")) for record in records})
    effect = {record.get("in_effect") for record in records}
    if effect == {None}:
        return f"{setting} (not applicable on the CPU)"
    shown = _one({"in effect" if e else "not in effect" for e in effect if e is not None})
    return f"{setting}, {shown}"


def _cuda_graphs(settings: dict[str, Any]) -> str | None:
    """Whether a compiled PyTorch cell whose compile mode asks for CUDA graphs ran as CUDA graphs, as it recorded
    ("in effect", or "not in effect" and why); None where it did not ask for them or recorded nothing."""
    detail = settings.get("cuda_graphs_detail") or {}
    if not detail.get("asked"):
        return None
    return "in effect" if settings.get("cuda_graphs") else f"not in effect ({detail.get('reason')})"


def _mode_rows(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The setup table's rows on execution modes: each framework's modes, torch.compile's mode (where a cell
    compiled with it) and whether its CUDA graphs ran (where the mode asks for them), PyTorch's memory format as its
    cells read it from their tensors, each compiled variant's compilation cache, and the autotune setting."""
    variants = _variants(results)
    if not variants:
        return {}
    modes: dict[str, list[str]] = {}
    for framework, mode in variants:
        modes.setdefault(framework, []).append(mode_label(mode))
    rows = {"Execution modes": "; ".join(f"{label(f)} {', '.join(m)}" for f, m in modes.items())}
    names = variant_names(variants)
    torch_compiled = {v: name for v, name in names.items() if v[0] == "torch" and v[1] in TORCH_COMPILED_MODES}
    compile_mode = _per_variant(results, lambda settings: settings.get("compile_mode"), torch_compiled)
    if compile_mode is not None:
        rows["torch.compile mode"] = compile_mode
    graphs = _per_variant(results, _cuda_graphs, torch_compiled)
    if graphs is not None:
        rows["CUDA graphs (PyTorch)"] = graphs
    torch_variants = {v: name for v, name in names.items() if v[0] == "torch"}
    layout = _per_variant(results, lambda settings: settings.get("memory_format"), torch_variants)
    if layout is not None:
        rows["Memory format (PyTorch)"] = layout
    compiled = {v: name for v, name in names.items() if is_compiled(v[1])}
    cache = _per_variant(results, _record("compilation_cache", "state"), compiled)
    if cache is not None:
        rows["Compilation cache"] = cache
    autotune = _autotune(results)
    if autotune is not None:
        rows["Kernel autotuning"] = autotune
    return rows


# The BLAS and OpenMP libraries loaded in each framework's processes (its settings' `process_blas`), a row per
# framework the study has. Only shared libraries show: what a framework links statically (PyTorch's MKL and oneDNN,
# XLA's Eigen) does not, so a JAX row may list no more than the NumPy OpenBLAS its process also loaded.
BLAS_ROWS = (
    ("BLAS/OpenMP loaded (PyTorch)", "torch"),
    ("BLAS/OpenMP loaded (JAX)", "jax"),
    ("BLAS/OpenMP loaded (TensorFlow)", "tensorflow"),
)


# What names a CPU within its vendor, in the order the setup table prints it.
CPU_IDS = (("cpu_family", "family"), ("model", "model"), ("stepping", "stepping"))


def _plural_of(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _signature(hardware: dict[str, Any]) -> str:
    """The vendor, family, model, stepping and microcode: "AuthenticAMD family 25 model 1 stepping 1, microcode
    0x1000065"."""
    words = [hardware.get("vendor_id"), *(f"{word} {hardware[key]}" for key, word in CPU_IDS if hardware.get(key))]
    microcode = f"microcode {hardware['microcode']}" if hardware.get("microcode") else None
    return ", ".join(filter(None, [" ".join(filter(None, words)), microcode]))


def _topology(hardware: dict[str, Any]) -> str | None:
    """The logical CPUs with the cores and sockets that could be derived: "2 logical CPUs (2 cores, 1 socket)"."""
    if not hardware.get("logical_cpus"):
        return None
    counts = [
        _plural_of(hardware[key], word)
        for key, word in (("physical_cores", "core"), ("sockets", "socket"))
        if hardware.get(key) is not None
    ]
    return _plural_of(hardware["logical_cpus"], "logical CPU") + (f" ({', '.join(counts)})" if counts else "")


def cpu_identity_text(hardware: dict[str, Any]) -> str | None:
    """What tells two CPUs of one model name apart: "AuthenticAMD family 25 model 1 stepping 1, microcode
    0x1000065; 2 logical CPUs (2 cores, 1 socket); under a hypervisor". None where a cell recorded no `hardware`."""
    if not hardware:
        return None
    hypervisor = {True: "under a hypervisor", False: "no hypervisor flag"}.get(hardware.get("hypervisor"))
    return "; ".join(filter(None, [_signature(hardware), _topology(hardware), hypervisor])) or None


def isa_text(hardware: dict[str, Any]) -> str | None:
    """The instruction-set level and the extensions behind it, "AVX2: avx, avx2, f16c, fma, sse4_2"."""
    extensions = hardware.get("isa_extensions")
    if extensions is None:
        return None
    listed = ", ".join(extensions) or "none of the kernel-relevant ones"
    return f"{hardware['isa_level']}: {listed}" if hardware.get("isa_level") else listed


def caches_text(hardware: dict[str, Any]) -> str | None:
    """cpu0's caches from sysfs, or cpuinfo's one "cache size" where sysfs gave none."""
    if hardware.get("cache_summary"):
        return hardware["cache_summary"]
    size = hardware.get("cpuinfo_cache_size")
    return f"{size} (cpuinfo's cache size)" if size else None


def pool_text(pool: dict[str, Any], threads: bool = True) -> str:
    """One BLAS or OpenMP library: "openblas 0.3.31, Haswell kernels, 2 threads (libscipy_openblas64_.so)"."""
    name = " ".join(str(v) for v in (pool.get("internal_api") or pool.get("user_api"), pool.get("version")) if v)
    details = [f"{pool['architecture']} kernels"] if pool.get("architecture") else []
    if threads and pool.get("num_threads") is not None:
        details.append(_plural_of(pool["num_threads"], "thread"))
    text = ", ".join([name or "unnamed library", *details])
    return text + (f" ({pool['library']})" if pool.get("library") else "")


def numpy_blas_text(blas: dict[str, Any]) -> str | None:
    """NumPy's BLAS as the runner's process loaded it (before any cell pinned its threads, so no thread count)."""
    if not blas:
        return None
    if not (blas.get("internal_api") or blas.get("library")):
        return "not found (" + "; ".join(sorted(set((blas.get("missing") or {}).values()))) + ")"
    return pool_text(blas, threads=False)


def process_blas_text(settings: dict[str, Any]) -> str | None:
    """The libraries one cell's process loaded (its settings' `process_blas`); None where the cell recorded none."""
    record = settings.get("process_blas")
    if not isinstance(record, dict):
        return None
    libraries = record.get("libraries")
    if libraries is None:
        return "not read (" + "; ".join((record.get("missing") or {}).values()) + ")"
    return "; ".join(sorted(pool_text(pool) for pool in libraries)) or "none found by threadpoolctl"


def torch_kernels_text(versions: dict[str, Any]) -> str | None:
    """PyTorch's CPU dispatch level and its statically linked MKL and oneDNN: "ATen AVX2; MKL 2024.2; oneDNN 3.12.0"."""
    parts = [
        f"{name} {versions[key]}"
        for key, name in (("cpu_capability", "ATen"), ("mkl", "MKL"), ("onednn", "oneDNN"))
        if versions.get(key)
    ]
    return "; ".join(parts) or None


def kernel_env_text(provenance: dict[str, Any]) -> str | None:
    """The variables that force a kernel choice, as the host recorded them ("OPENBLAS_CORETYPE=Haswell (forced core
    type, below the CPU's AVX-512 (BF16))"), "none set", or None where the cell recorded no `blas`."""
    blas = provenance.get("blas")
    if not isinstance(blas, dict) or "kernel_env" not in blas:
        return None
    parts = []
    for name, value in (blas.get("kernel_env") or {}).items():
        text = f"{name}={value}"
        if name == "OPENBLAS_CORETYPE":
            isa = (provenance.get("hardware") or {}).get("isa_level")
            versus = blas.get("forced_vs_cpu")
            compared = {"below": f", below the CPU's {isa}", "above": f", above the CPU's {isa}"}.get(versus, "")
            text += f" (forced core type{compared})"
        parts.append(text)
    return ", ".join(parts) or "none set"


def _hardware_rows(results: list[dict[str, Any]], present: set[str]) -> dict[str, set[Any]]:
    """The setup table's rows on the CPU, the BLAS libraries and what forces their kernels, each from every cell
    (a value that differs between cells is shown as such: cells on two CPU generations are not comparable)."""
    fields: dict[str, set[Any]] = {
        key: set() for key in ("CPU identity", "ISA extensions", "Caches", "BLAS (NumPy)", "Kernel-forcing variables")
    }
    blas_rows = [row for row in BLAS_ROWS if row[1] in present]
    fields |= {label_: set() for label_, _ in blas_rows}
    if "torch" in present:
        fields["PyTorch CPU kernels"] = set()
    for result in results:
        prov = result["provenance"]
        hardware = prov.get("hardware") or {}
        fields["CPU identity"].add(cpu_identity_text(hardware))
        fields["ISA extensions"].add(isa_text(hardware))
        fields["Caches"].add(caches_text(hardware))
        fields["BLAS (NumPy)"].add(numpy_blas_text(prov.get("blas") or {}))
        fields["Kernel-forcing variables"].add(kernel_env_text(prov))
        framework = _framework(result)
        for label_, name in blas_rows:
            if framework.get("name") == name:
                fields[label_].add(process_blas_text(framework.get("settings") or {}))
        if "torch" in present and framework.get("name") == "torch":
            fields["PyTorch CPU kernels"].add(torch_kernels_text(framework.get("versions") or {}))
    return fields


def _python(provenance: dict[str, Any]) -> str | None:
    """The interpreter that ran a cell: "3.12.1 (CPython, venv)" (fwbench runs in environments it did not make: a
    venv, a conda environment, the system's Python), or the bare version of a cell from before it was recorded."""
    interpreter = provenance.get("interpreter")
    if not isinstance(interpreter, dict):
        return provenance.get("python")
    implementation = {"cpython": "CPython", "pypy": "PyPy"}.get(interpreter.get("implementation"), "Python")
    return f"{interpreter.get('version')} ({implementation}, {interpreter.get('environment')})"


def commit_label(git: Mapping[str, Any]) -> str | None:
    """A checkout's commit as the paper names it, "1a2b3c4d5e6f (dirty)" (fwbench.trackers.environment.git_state's
    record): the same label for the code that measured a cell and for the code that writes the paper from it."""
    commit = git.get("commit")
    return f"{commit[:12]}{' (dirty)' if git.get('dirty') else ''}" if commit else None


def study_environment(paths: Iterable[str | Path]) -> dict[str, Any]:
    results = load_cells(paths)
    present = _present(results)
    hardware = _hardware_rows(results, present)
    cpu_rows = ("CPU identity", "ISA extensions", "Caches")
    fields: dict[str, set[Any]] = {"CPU": set()} | {key: hardware.pop(key) for key in cpu_rows}
    fields |= {k: set() for k in ("Device", "Python")}
    fields |= _versions(results, present)
    fields |= {"NumPy": set()} | hardware | {"Threads per cell": set()}
    fields |= _thread_rows(results, present)
    fields |= {"Harness version": set(), "fwbench commit": set()}
    for result in results:
        prov = result["provenance"]
        fields["CPU"].add(prov.get("cpu_model"))
        fields["Python"].add(_python(prov))
        fields["NumPy"].add((prov.get("libraries") or {}).get("numpy"))
        fields["Harness version"].add(prov.get("harness_version"))
        fields["fwbench commit"].add(commit_label(prov.get("git") or {}))
        framework = prov.get("framework")
        if framework:
            fields["Device"].add((framework.get("device") or {}).get("name"))
            fields["Threads per cell"].add((framework.get("settings") or {}).get("intra_op_threads"))
    env = {key: _one(values) for key, values in fields.items()} | _mode_rows(results) | _placement_rows(results)
    platforms = {(_framework(r).get("device") or {}).get("platform") for r in results}
    if platforms & {"cuda", "gpu"}:
        env |= {key: _one(values) for key, values in _gpu_rows(results).items()}
    return env
