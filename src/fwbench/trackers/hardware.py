"""The CPU and the BLAS a result was measured on, named closely enough to tell two machines apart.

A cloud VM's /proc/cpuinfo may call a Zen 3 (AVX2, no AVX-512) and a Zen 4 or 5 (AVX-512 with BF16) both just
"AMD EPYC", and the study's ViT ratio differed 2.7x between the two. So a result records the CPU's family, model,
stepping and microcode, the instruction-set extensions that make libraries pick other kernels, the caches, whether a
hypervisor is present, which kernels each BLAS library chose and whether an environment variable forced them.

Nothing here imports a framework (the runner calls it). Every file is read from a path given as a parameter, so the
tests feed fixture text. A value that cannot be read is None, and `missing` says why: never a guessed value.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

CPUINFO = Path("/proc/cpuinfo")
SYSFS_CPU = Path("/sys/devices/system/cpu")

# x86 flags that make BLAS, oneDNN, XLA or ATen pick other kernels (avx512vnni: older kernels' spelling).
X86_KERNEL_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx_vnni",
    "avx512f",
    "avx512bw",
    "avx512dq",
    "avx512vl",
    "avx512_vnni",
    "avx512vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
)
# The aarch64 `Features` that do the same (asimd is NEON; asimddp the dot product; sve/sve2 the scalable vectors).
ARM_KERNEL_FEATURES = ("asimd", "asimdhp", "asimddp", "fphp", "bf16", "i8mm", "sve", "sve2", "sme")
# aarch64 cpuinfo names no model: its implementer and part codes, and the names lscpu gives the common ones.
ARM_IMPLEMENTERS = {
    "0x41": "ARM",
    "0x42": "Broadcom",
    "0x43": "Cavium",
    "0x46": "Fujitsu",
    "0x48": "HiSilicon",
    "0x4e": "NVIDIA",
    "0x51": "Qualcomm",
    "0x61": "Apple",
    "0xc0": "Ampere",
}
ARM_PARTS = {
    ("0x41", "0xd03"): "Cortex-A53",
    ("0x41", "0xd07"): "Cortex-A57",
    ("0x41", "0xd08"): "Cortex-A72",
    ("0x41", "0xd0b"): "Cortex-A76",
    ("0x41", "0xd0c"): "Neoverse-N1",
    ("0x41", "0xd40"): "Neoverse-V1",
    ("0x41", "0xd49"): "Neoverse-N2",
    ("0x41", "0xd4f"): "Neoverse-V2",
    ("0x41", "0xd84"): "Neoverse-V3",
    ("0x41", "0xd8e"): "Neoverse-N3",
    ("0xc0", "0xac3"): "Ampere-1",
    ("0xc0", "0xac4"): "Ampere-1a",
}
# Environment variables that force a BLAS or kernel library onto a core type, an instruction set or a cache size.
KERNEL_ENV = (
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "OPENBLAS_VERBOSE",
    "MKL_DEBUG_CPU_TYPE",
    "MKL_ENABLE_INSTRUCTIONS",
    "MKL_CBWR",
    "DNNL_MAX_CPU_ISA",
    "ONEDNN_MAX_CPU_ISA",
    "ATEN_CPU_CAPABILITY",
)
# The x86 instruction-set levels, lowest first: a forced OpenBLAS core type is compared with the CPU's on this scale.
ISA_RANKS = ("SSE4.2", "AVX", "AVX2", "AVX-512", "AMX")
# The instruction set of OpenBLAS's x86 core types (the names OPENBLAS_CORETYPE takes, upper-cased).
OPENBLAS_CORE_ISA = {
    "PRESCOTT": "SSE4.2",
    "CORE2": "SSE4.2",
    "PENRYN": "SSE4.2",
    "DUNNINGTON": "SSE4.2",
    "NEHALEM": "SSE4.2",
    "ATOM": "SSE4.2",
    "BARCELONA": "SSE4.2",
    "BOBCAT": "SSE4.2",
    "SANDYBRIDGE": "AVX",
    "BULLDOZER": "AVX",
    "PILEDRIVER": "AVX",
    "STEAMROLLER": "AVX",
    "EXCAVATOR": "AVX",
    "HASWELL": "AVX2",
    "ZEN": "AVX2",
    "SKYLAKEX": "AVX-512",
    "COOPERLAKE": "AVX-512",
    "SAPPHIRERAPIDS": "AMX",
}
POOL_KEYS = ("user_api", "internal_api", "version", "num_threads", "threading_layer", "architecture")


# --------------------------------------------------------------------------------------------------------------------
# /proc/cpuinfo


def _read(path: Path) -> tuple[str | None, str | None]:
    """(text, None), or (None, why it could not be read): on a system without /proc that reason names the system."""
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace"), None
    except OSError as exc:
        system = platform.system()
        where = "" if system == "Linux" else f"not Linux ({system}): "
        return None, f"{where}cannot read {path}: {type(exc).__name__}: {exc.strerror or exc}"


def cpuinfo_processors(text: str) -> list[dict[str, str]]:
    """The `processor` stanzas of /proc/cpuinfo as key -> value (aarch64 adds global lines after them: left out)."""
    stanzas, current = [], {}
    for line in [*text.splitlines(), ""]:
        key, sep, value = line.partition(":")
        if sep:
            current.setdefault(key.strip(), value.strip())
        elif not line.strip() and current:
            stanzas.append(current)
            current = {}
    processors = [stanza for stanza in stanzas if "processor" in stanza]
    return processors or stanzas[:1]


def x86_extensions(flags: str) -> list[str]:
    """The kernel-relevant extensions in an x86 `flags` line, sorted."""
    present = set(flags.split())
    return sorted(flag for flag in X86_KERNEL_FLAGS if flag in present)


def arm_extensions(features: str) -> list[str]:
    """The kernel-relevant extensions in an aarch64 `Features` line, sorted."""
    present = set(features.split())
    return sorted(feature for feature in ARM_KERNEL_FEATURES if feature in present)


def _x86_level(has: set[str]) -> str | None:
    if has & {"amx_tile", "amx_bf16", "amx_int8"}:
        return "AMX"
    if "avx512f" in has:
        extras = [name for flag, name in (("avx512_bf16", "BF16"), ("avx512_fp16", "FP16")) if flag in has]
        return "AVX-512" + (f" ({', '.join(extras)})" if extras else "")
    if "avx2" in has:
        return "AVX2" + (" (AVX-VNNI)" if "avx_vnni" in has else "")
    return "AVX" if "avx" in has else "SSE4.2" if "sse4_2" in has else None


def _arm_level(has: set[str]) -> str | None:
    for feature, name in (("sme", "SME"), ("sve2", "SVE2"), ("sve", "SVE"), ("asimd", "NEON")):
        if feature in has:
            return name + (" (BF16)" if "bf16" in has else "")
    return None


def isa_level(extensions: Iterable[str]) -> str | None:
    """The highest instruction set the kernels can use, in a few words ("AVX2", "AVX-512 (BF16)", "AMX", "SVE"):
    what decides which kernels a library picks, so two machines whose levels differ are not comparable."""
    has = set(extensions)
    return _x86_level(has) or _arm_level(has)


def _x86_identity(first: dict[str, str]) -> dict[str, Any]:
    """An x86 processor stanza's identity fields, as cpuinfo spells them."""
    keys = {
        "vendor_id": "vendor_id",
        "cpu_family": "cpu family",
        "model": "model",
        "stepping": "stepping",
        "microcode": "microcode",
        "model_name": "model name",
        "cpuinfo_cache_size": "cache size",
    }
    return {field: first.get(key) for field, key in keys.items()}


def _arm_identity(first: dict[str, str]) -> dict[str, Any]:
    """An aarch64 stanza's identity in the x86 fields, as lscpu maps it: vendor_id the implementer code, cpu_family
    the architecture, model the part code, stepping r<variant>p<revision>; the model name from cpuinfo where it has
    one, else the part's name from ARM_PARTS (None for a part not in it)."""
    implementer, part = first.get("CPU implementer", "").lower(), first.get("CPU part", "").lower()
    variant, revision = first.get("CPU variant"), first.get("CPU revision")
    stepping = None
    if variant is not None and revision is not None:
        try:
            stepping = f"r{int(variant, 16)}p{revision}"
        except ValueError:
            stepping = f"r{variant}p{revision}"
    part_name = ARM_PARTS.get((implementer, part))
    named = f"{ARM_IMPLEMENTERS.get(implementer, implementer)} {part_name}" if part_name else None
    return {
        "vendor_id": implementer or None,
        "cpu_family": first.get("CPU architecture"),
        "model": part or None,
        "stepping": stepping,
        "microcode": None,
        "model_name": first.get("model name") or named,
        "cpuinfo_cache_size": None,
    }


def _topology_from_cpuinfo(processors: list[dict[str, str]]) -> tuple[int | None, int | None]:
    """(physical cores, sockets) from x86 cpuinfo's physical id / core id; (None, None) without them."""
    if not all("physical id" in p and "core id" in p for p in processors):
        return None, None
    sockets = {p["physical id"] for p in processors}
    cores = {(p["physical id"], p["core id"]) for p in processors}
    return len(cores), len(sockets)


def _topology_from_sysfs(sysfs_cpu: Path) -> tuple[int | None, int | None]:
    """(physical cores, sockets) from /sys/devices/system/cpu/cpu*/topology; (None, None) where unreadable."""
    cores, sockets = set(), set()
    for directory in sorted(Path(sysfs_cpu).glob("cpu[0-9]*/topology")):
        try:
            package = (directory / "physical_package_id").read_text().strip()
            core = (directory / "core_id").read_text().strip()
        except OSError:
            return None, None
        sockets.add(package)
        cores.add((package, core))
    return (len(cores), len(sockets)) if cores else (None, None)


# --------------------------------------------------------------------------------------------------------------------
# Caches (sysfs)


def cache_bytes(size: str) -> int | None:
    """sysfs's cache size ("32K", "32768K", "1M") in bytes; None for a value it cannot be."""
    text = size.strip().upper().removesuffix("B")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in "KMG" else text
    return int(digits) * scale if digits.isdigit() else None


def _size_text(size: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def _cache_name(level: str, kind: str) -> str:
    suffix = {"Data": "d", "Instruction": "i"}.get(kind, "")
    return f"L{level}{suffix}"


def cpu_caches(cache_dir: Path) -> tuple[list[dict[str, Any]] | None, str | None]:
    """(cpu0's caches, one per sysfs index with name, level, type, size, size_bytes and shared_cpu_list; why not),
    sorted by level. The last level's size decides which inputs stay cache-resident, so it changes what a small
    batch measures."""
    indexes = sorted(Path(cache_dir).glob("index[0-9]*"))
    if not indexes:
        return None, f"no cache description under {cache_dir}"
    caches = []
    for index in indexes:
        try:
            level, kind, size = ((index / name).read_text().strip() for name in ("level", "type", "size"))
        except OSError as exc:
            return None, f"cannot read {index}: {type(exc).__name__}"
        shared = index / "shared_cpu_list"
        caches.append(
            {
                "name": _cache_name(level, kind),
                "level": int(level) if level.isdigit() else level,
                "type": kind,
                "size": size,
                "size_bytes": cache_bytes(size),
                "shared_cpu_list": shared.read_text().strip() if shared.is_file() else None,
            }
        )
    return sorted(caches, key=lambda c: (str(c["level"]), c["name"])), None


def cache_summary(caches: list[dict[str, Any]]) -> str:
    """The caches as the setup table prints them: "L1d 32 KiB, L1i 32 KiB, L2 512 KiB, L3 32 MiB"."""
    return ", ".join(f"{c['name']} {_size_text(c['size_bytes']) if c['size_bytes'] else c['size']}" for c in caches)


# --------------------------------------------------------------------------------------------------------------------
# The CPU


CPU_FIELDS = (
    "format",
    "vendor_id",
    "cpu_family",
    "model",
    "stepping",
    "microcode",
    "model_name",
    "logical_cpus",
    "physical_cores",
    "sockets",
    "uniform",
    "isa_extensions",
    "isa_level",
    "caches",
    "cache_summary",
    "cpuinfo_cache_size",
    "hypervisor",
)


def _identity_fields(processors: list[dict[str, str]]) -> dict[str, Any]:
    """The fields cpuinfo's processor stanzas give, in either architecture's format."""
    first = processors[0]
    arm = "CPU implementer" in first
    identity = _arm_identity(first) if arm else _x86_identity(first)
    extensions = arm_extensions(first.get("Features", "")) if arm else x86_extensions(first.get("flags", ""))
    flag_key = "Features" if arm else "flags"
    signature = ("model name", "CPU part", "model", flag_key)
    cores, sockets = (None, None) if arm else _topology_from_cpuinfo(processors)
    x86 = not arm and ("vendor_id" in first or "flags" in first)
    return identity | {
        "format": "aarch64" if arm else "x86" if x86 else "unknown",
        "logical_cpus": len(processors),
        "physical_cores": cores,
        "sockets": sockets,
        "uniform": len({tuple(p.get(k) for k in signature) for p in processors}) == 1,
        "isa_extensions": extensions if flag_key in first else None,
        "isa_level": isa_level(extensions) if flag_key in first else None,
        "hypervisor": ("hypervisor" in first.get("flags", "").split()) if "flags" in first else None,
    }


def _why_missing(record: dict[str, Any], cpuinfo: Path, cpu_format: str | None) -> dict[str, str]:
    """A reason for each field of `record` that is None, saying where it would have come from."""
    reasons = {
        "microcode": f"{cpuinfo} has no microcode line",
        "physical_cores": f"{cpuinfo} gives no physical id / core id and sysfs has no topology",
        "sockets": f"{cpuinfo} gives no physical id and sysfs has no topology",
        "isa_extensions": f"{cpuinfo} has no flags or Features line",
        "isa_level": "none of the kernel-relevant extensions is present",
        "hypervisor": f"{cpuinfo} has no x86 flags line (aarch64 reports no hypervisor flag)",
        "model_name": f"{cpuinfo} has no model name and the aarch64 part is not in fwbench's table",
    }
    if cpu_format == "aarch64":
        reasons["microcode"] = "aarch64 /proc/cpuinfo has no microcode line"
        reasons["cpuinfo_cache_size"] = "aarch64 /proc/cpuinfo has no cache size line"
    if record.get("isa_extensions") is None:
        reasons["isa_level"] = reasons["isa_extensions"]
    return {
        field: reasons.get(field, f"{cpuinfo} has no such line")
        for field in CPU_FIELDS
        if record.get(field) is None and field not in ("caches", "cache_summary")
    }


def cpu_identity(cpuinfo: Path | str = CPUINFO, sysfs_cpu: Path | str = SYSFS_CPU) -> dict[str, Any]:
    """The CPU as /proc/cpuinfo and sysfs describe it: CPU_FIELDS (`format`: "x86", "aarch64" or "unknown", the
    layout of cpuinfo) and `missing` (field -> why it is None). The ISA fields and caches are the first
    processor's (cpu0's); `uniform` says whether every processor reported the same model and extensions."""
    cpuinfo, sysfs_cpu = Path(cpuinfo), Path(sysfs_cpu)
    record: dict[str, Any] = dict.fromkeys(CPU_FIELDS)
    text, why = _read(cpuinfo)
    processors = cpuinfo_processors(text) if text is not None else []
    if processors:
        record |= _identity_fields(processors)
        if record["physical_cores"] is None:
            record["physical_cores"], record["sockets"] = _topology_from_sysfs(sysfs_cpu)
    caches, cache_why = cpu_caches(sysfs_cpu / "cpu0" / "cache")
    record["caches"] = caches
    record["cache_summary"] = cache_summary(caches) if caches else None
    if text is None or not processors:
        why = why or f"{cpuinfo} holds no processor"
        missing = {field: why for field in CPU_FIELDS if record.get(field) is None}
    else:
        missing = _why_missing(record, cpuinfo, record["format"])
    if caches is None:
        missing |= {"caches": cache_why, "cache_summary": cache_why}
    record["missing"] = missing
    return record


# --------------------------------------------------------------------------------------------------------------------
# BLAS


def _pool_record(pool: Mapping[str, Any]) -> dict[str, Any]:
    """One threadpoolctl entry: what library it is, the kernels it chose (`architecture`, OpenBLAS and BLIS) and its
    threads; `library` is the file's name, not its path (the path names the machine's directories only)."""
    record = {key: pool.get(key) for key in POOL_KEYS}
    filepath = pool.get("filepath")
    record["library"] = os.path.basename(filepath) if filepath else None
    return record


def process_blas() -> dict[str, Any]:
    """The BLAS and OpenMP libraries loaded in this process as threadpoolctl sees them (each framework links its own,
    and which kernels they chose decides its CPU speed): {"libraries": [...], "threadpoolctl": version, "missing"}.
    Libraries linked statically (PyTorch's MKL and oneDNN) are invisible to it; the backend records those itself."""
    try:
        import threadpoolctl
    except ImportError as exc:
        return {"libraries": None, "threadpoolctl": None, "missing": {"libraries": f"no threadpoolctl: {exc}"}}
    pools = [_pool_record(pool) for pool in threadpoolctl.threadpool_info()]
    return {"libraries": pools, "threadpoolctl": threadpoolctl.__version__, "missing": {}}


def _in_numpy(filepath: str | None) -> bool:
    """Whether a library file lies in NumPy's package (numpy/.dylibs) or its wheel's library folder (numpy.libs)."""
    return any(part == "numpy" or part.startswith("numpy.") for part in Path(filepath or "").parts)


def _numpy_pool(pools: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, str | None]:
    """(NumPy's BLAS among the process's pools, why none): the one loaded from NumPy's own directory (numpy.libs in
    a wheel), else the only BLAS loaded."""
    blas = [pool for pool in pools if pool.get("user_api") == "blas"]
    own = [pool for pool in blas if _in_numpy(pool.get("filepath"))]
    if own:
        return own[0], None
    if len(blas) == 1:
        return blas[0], None
    if not blas:
        return None, "threadpoolctl found no BLAS library loaded with NumPy"
    names = ", ".join(sorted(os.path.basename(str(pool.get("filepath"))) for pool in blas))
    return None, f"several BLAS libraries loaded ({names}) and none in NumPy's directory"


def forced_versus_cpu(core_type: str | None, cpu_isa_level: str | None) -> tuple[str | None, str | None]:
    """("below" | "same" | "above", None) where a forced OpenBLAS core type's instruction set compares with the
    CPU's; (None, why) where it cannot be told. "below" means OpenBLAS runs older kernels than the CPU could."""
    if not core_type:
        return None, "OPENBLAS_CORETYPE is not set: nothing is forced"
    forced_isa = OPENBLAS_CORE_ISA.get(core_type.strip().upper())
    if forced_isa is None:
        return None, f"core type {core_type!r} is not one of the x86 types fwbench knows"
    cpu_isa = (cpu_isa_level or "").split(" (")[0]
    if cpu_isa not in ISA_RANKS:
        return None, f"the CPU's instruction set is not known on the x86 scale ({cpu_isa_level})"
    forced_rank, cpu_rank = ISA_RANKS.index(forced_isa), ISA_RANKS.index(cpu_isa)
    return ("below" if forced_rank < cpu_rank else "above" if forced_rank > cpu_rank else "same"), None


def blas_identity(environ: Mapping[str, str] | None = None, cpu: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """NumPy's BLAS (library, version, the kernels it chose as `architecture`, threads, file) and the environment
    variables that force a BLAS or kernel library's choice (KERNEL_ENV, as `kernel_env`). `forced_core_type` is
    OPENBLAS_CORETYPE, `core_type_forced` whether it is set, and `forced_vs_cpu` how the forced kernels' instruction
    set compares with `cpu`'s (cpu_identity()), where known. Such a variable is recorded, never changed: the
    machines this study runs on set OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE."""
    environ = os.environ if environ is None else environ
    record: dict[str, Any] = {"numpy": None, "library": None} | dict.fromkeys(POOL_KEYS)
    missing: dict[str, str] = {}
    try:
        import numpy
        import threadpoolctl

        record["numpy"] = numpy.__version__
        pool, why = _numpy_pool(threadpoolctl.threadpool_info())
    except ImportError as exc:
        pool, why = None, f"cannot import {exc.name or exc}"
    if pool is not None:
        record |= _pool_record(pool)
    missing |= {key: why or "threadpoolctl does not report it" for key in (*POOL_KEYS, "library") if not record[key]}
    forced = environ.get("OPENBLAS_CORETYPE") or None
    versus, versus_why = forced_versus_cpu(forced, (cpu or {}).get("isa_level"))
    record |= {
        "kernel_env": {name: environ[name] for name in KERNEL_ENV if name in environ},
        "forced_core_type": forced,
        "core_type_forced": forced is not None,
        "forced_vs_cpu": versus,
    }
    if versus_why:
        missing["forced_vs_cpu"] = versus_why
    record["missing"] = missing
    return record


def recorded_core_type(provenance: Mapping[str, Any]) -> tuple[str | None, bool]:
    """(the OPENBLAS_CORETYPE a result ran under or None, whether the result records it at all): from its `blas`
    record, or from the environment variables every result records (results from before `blas` existed)."""
    blas = provenance.get("blas")
    if isinstance(blas, Mapping) and "forced_core_type" in blas:
        return blas.get("forced_core_type"), True
    env = provenance.get("env")
    if isinstance(env, Mapping):
        return env.get("OPENBLAS_CORETYPE") or None, True
    return None, False
