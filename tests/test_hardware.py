"""The CPU and BLAS a result records (fwbench.trackers.hardware), from fixture /proc/cpuinfo texts and a fake sysfs
tree: two CPUs that cpuinfo calls by one model name are told apart, nothing missing is made up, and an environment
variable that forces OpenBLAS's kernels is recorded (never changed)."""

from __future__ import annotations

import json

import pytest
import threadpoolctl

from fwbench.trackers import hardware as hw
from fwbench.trackers.environment import host_provenance

ZEN3_FLAGS = (
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx "
    "mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid extd_apicid "
    "tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave "
    "avx f16c rdrand hypervisor lahf_lm cmp_legacy cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw topoext "
    "vmmcall fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid rdseed adx smap clflushopt clwb sha_ni xsaveopt "
    "xsavec xgetbv1 xsaves clzero xsaveerptr arat umip vaes vpclmulqdq rdpid fsrm"
)
ZEN4_FLAGS = ZEN3_FLAGS + (
    " avx512f avx512dq avx512ifma avx512cd avx512bw avx512vl avx512_bf16 avx512vbmi avx512_vbmi2 gfni avx512_vnni "
    "avx512_bitalg avx512_vpopcntdq"
)
SAPPHIRE_RAPIDS_FLAGS = (
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht syscall "
    "nx pdpe1gb rdtscp lm constant_tsc arch_perfmon rep_good nopl xtopology nonstop_tsc cpuid tsc_known_freq pni "
    "pclmulqdq monitor ssse3 fma cx16 pdcm pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor "
    "lahf_lm abm 3dnowprefetch avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb avx512cd sha_ni avx512bw "
    "avx512vl xsaveopt xsavec xgetbv1 xsaves avx_vnni avx512_bf16 avx512vbmi umip pku ospke waitpkg avx512_vbmi2 "
    "gfni vaes vpclmulqdq avx512_vnni avx512_bitalg tme avx512_vpopcntdq rdpid cldemote movdiri movdir64b md_clear "
    "serialize amx_bf16 avx512_fp16 amx_tile amx_int8 flush_l1d arch_capabilities"
)


def _x86(vendor: str, family: int, model: int, stepping: int, microcode: str, name: str, flags: str, cpus=2) -> str:
    """A cpuinfo text of `cpus` processors on one socket, one core each, as a KVM guest shows it."""
    stanzas = []
    for index in range(cpus):
        stanzas.append(
            f"processor\t: {index}\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: {model}\n"
            f"model name\t: {name}\nstepping\t: {stepping}\nmicrocode\t: {microcode}\ncpu MHz\t\t: 2445.430\n"
            f"cache size\t: 512 KB\nphysical id\t: 0\nsiblings\t: {cpus}\ncore id\t\t: {index}\ncpu cores\t: {cpus}\n"
            f"flags\t\t: {flags}\nbogomips\t: 4890.86\n"
        )
    return "\n".join(stanzas)


ZEN3 = _x86("AuthenticAMD", 25, 1, 1, "0x1000065", "AMD EPYC", ZEN3_FLAGS)
ZEN4 = _x86("AuthenticAMD", 25, 17, 1, "0xa10113e", "AMD EPYC", ZEN4_FLAGS)
SAPPHIRE_RAPIDS = _x86(
    "GenuineIntel", 6, 143, 8, "0x2b000590", "Intel(R) Xeon(R) Platinum 8488C", SAPPHIRE_RAPIDS_FLAGS, cpus=4
)
NEOVERSE_N1 = "\n".join(
    f"processor\t: {index}\nBogoMIPS\t: 243.75\n"
    "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp "
    "ssbs\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n"
    for index in range(4)
)


def _file(tmp_path, text: str, name: str = "cpuinfo"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _sysfs(
    tmp_path,
    caches=(("1", "Data", "32K"), ("1", "Instruction", "32K"), ("2", "Unified", "512K"), ("3", "Unified", "32768K")),
    topology=None,
):
    """A fake /sys/devices/system/cpu: cpu0's caches, and each CPU's (package, core) where `topology` gives them."""
    root = tmp_path / "sys" / "cpu"
    for index, (level, kind, size) in enumerate(caches):
        directory = root / "cpu0" / "cache" / f"index{index}"
        directory.mkdir(parents=True)
        for name, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", "0")):
            (directory / name).write_text(value + "\n")
    for cpu, (package, core) in enumerate(topology or []):
        directory = root / f"cpu{cpu}" / "topology"
        directory.mkdir(parents=True)
        (directory / "physical_package_id").write_text(f"{package}\n")
        (directory / "core_id").write_text(f"{core}\n")
    root.mkdir(parents=True, exist_ok=True)
    return root


def test_a_zen3_vm_is_named_by_family_model_stepping_and_has_no_avx512(tmp_path):
    cpu = hw.cpu_identity(_file(tmp_path, ZEN3), _sysfs(tmp_path))
    assert (cpu["vendor_id"], cpu["cpu_family"], cpu["model"], cpu["stepping"]) == ("AuthenticAMD", "25", "1", "1")
    assert cpu["microcode"] == "0x1000065" and cpu["model_name"] == "AMD EPYC" and cpu["format"] == "x86"
    assert cpu["isa_extensions"] == ["avx", "avx2", "f16c", "fma", "sse4_2"] and cpu["isa_level"] == "AVX2"
    assert (cpu["logical_cpus"], cpu["physical_cores"], cpu["sockets"]) == (2, 2, 1) and cpu["uniform"]
    assert cpu["hypervisor"] is True and cpu["cpuinfo_cache_size"] == "512 KB"
    assert cpu["cache_summary"] == "L1d 32 KiB, L1i 32 KiB, L2 512 KiB, L3 32 MiB"
    assert cpu["caches"][3] == {
        "name": "L3",
        "level": 3,
        "type": "Unified",
        "size": "32768K",
        "size_bytes": 32 << 20,
        "shared_cpu_list": "0",
    }
    assert cpu["missing"] == {}


def test_a_zen4_of_the_same_model_name_is_told_apart_by_its_avx512_bf16(tmp_path):
    zen3 = hw.cpu_identity(_file(tmp_path, ZEN3, "zen3"), _sysfs(tmp_path))
    zen4 = hw.cpu_identity(_file(tmp_path, ZEN4, "zen4"), tmp_path / "sys" / "cpu")
    assert zen3["model_name"] == zen4["model_name"] == "AMD EPYC"
    assert zen4["model"] == "17" and zen4["microcode"] == "0xa10113e"
    assert zen4["isa_level"] == "AVX-512 (BF16)"
    assert {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_vnni", "avx512_bf16"} <= set(zen4["isa_extensions"])
    assert "avx512vbmi" not in zen4["isa_extensions"], "only the extensions that change kernels are listed"
    assert zen4["isa_extensions"] == sorted(zen4["isa_extensions"])


def test_sapphire_rapids_has_amx(tmp_path):
    cpu = hw.cpu_identity(_file(tmp_path, SAPPHIRE_RAPIDS), _sysfs(tmp_path))
    assert cpu["vendor_id"] == "GenuineIntel" and cpu["cpu_family"] == "6" and cpu["model"] == "143"
    assert cpu["isa_level"] == "AMX" and cpu["logical_cpus"] == 4
    assert {"amx_bf16", "amx_int8", "amx_tile", "avx512_fp16", "avx_vnni"} <= set(cpu["isa_extensions"])


def test_levels_below_avx512():
    assert hw.isa_level(["avx", "avx2", "avx_vnni", "fma"]) == "AVX2 (AVX-VNNI)"
    assert hw.isa_level(["avx", "sse4_2"]) == "AVX" and hw.isa_level(["sse4_2"]) == "SSE4.2"
    assert hw.isa_level(["avx512f", "avx512_fp16", "avx512_bf16"]) == "AVX-512 (BF16, FP16)"
    assert hw.isa_level([]) is None


def test_an_aarch64_cpu_is_named_by_implementer_and_part_with_cores_from_sysfs(tmp_path):
    sysfs = _sysfs(tmp_path, topology=[(0, 0), (0, 1), (0, 2), (0, 3)])
    cpu = hw.cpu_identity(_file(tmp_path, NEOVERSE_N1), sysfs)
    assert cpu["format"] == "aarch64" and cpu["model_name"] == "ARM Neoverse-N1"
    assert (cpu["vendor_id"], cpu["cpu_family"], cpu["model"], cpu["stepping"]) == ("0x41", "8", "0xd0c", "r3p1")
    assert cpu["isa_extensions"] == ["asimd", "asimddp", "asimdhp", "fphp"] and cpu["isa_level"] == "NEON"
    assert (cpu["logical_cpus"], cpu["physical_cores"], cpu["sockets"]) == (4, 4, 1)
    assert cpu["microcode"] is None and "aarch64" in cpu["missing"]["microcode"]
    assert cpu["hypervisor"] is None and "hypervisor" in cpu["missing"]["hypervisor"]


def test_an_unknown_aarch64_part_has_no_made_up_name(tmp_path):
    text = NEOVERSE_N1.replace("0xd0c", "0xfff").replace("asimddp", "asimddp sve sve2 bf16 i8mm")
    cpu = hw.cpu_identity(_file(tmp_path, text), _sysfs(tmp_path))
    assert cpu["model_name"] is None and "part is not in" in cpu["missing"]["model_name"]
    assert cpu["model"] == "0xfff" and cpu["isa_level"] == "SVE2 (BF16)"
    assert cpu["physical_cores"] is None and "topology" in cpu["missing"]["physical_cores"]


def test_a_cpuinfo_of_another_layout_gives_counts_only_and_says_why_the_rest_is_missing(tmp_path):
    power = "\n".join(f"processor\t: {i}\ncpu\t\t: POWER9, altivec supported\nrevision\t: 2.2\n" for i in range(2))
    cpu = hw.cpu_identity(_file(tmp_path, power), tmp_path / "no-sysfs")
    assert cpu["format"] == "unknown" and cpu["logical_cpus"] == 2 and cpu["vendor_id"] is None
    assert cpu["isa_extensions"] is None and cpu["missing"]["isa_level"] == cpu["missing"]["isa_extensions"]
    assert "no flags or Features line" in cpu["missing"]["isa_level"]


@pytest.mark.parametrize("unreadable", ["absent", "directory"])
def test_an_unreadable_cpuinfo_leaves_every_field_missing_with_its_reason(tmp_path, unreadable):
    path = tmp_path / "cpuinfo"
    if unreadable == "directory":
        path.mkdir()
    cpu = hw.cpu_identity(path, tmp_path / "no-sysfs")
    assert all(cpu[field] is None for field in hw.CPU_FIELDS), cpu
    assert set(cpu["missing"]) == set(hw.CPU_FIELDS)
    assert f"cannot read {path}" in cpu["missing"]["isa_level"]
    assert cpu["missing"]["caches"] == f"no cache description under {tmp_path / 'no-sysfs' / 'cpu0' / 'cache'}"


def test_cache_sizes_as_sysfs_writes_them():
    assert hw.cache_bytes("32K") == 32768 and hw.cache_bytes("1M") == 1 << 20 and hw.cache_bytes("512") == 512
    assert hw.cache_bytes("lots") is None


# --------------------------------------------------------------------------------------------------------------------
# BLAS

NUMPY_OPENBLAS = {
    "user_api": "blas",
    "internal_api": "openblas",
    "num_threads": 2,
    "prefix": "libscipy_openblas",
    "filepath": "/venv/lib/python3.11/site-packages/numpy.libs/libscipy_openblas64_-32a4b2a6.so",
    "version": "0.3.31.188.0",
    "threading_layer": "pthreads",
    "architecture": "Haswell",
}
SCIPY_OPENBLAS = NUMPY_OPENBLAS | {
    "filepath": "/venv/lib/python3.11/site-packages/scipy.libs/libscipy_openblas-68440149.so",
    "version": "0.3.28",
}
GOMP = {
    "user_api": "openmp",
    "internal_api": "openmp",
    "num_threads": 2,
    "prefix": "libgomp",
    "filepath": "/venv/lib/python3.11/site-packages/torch/lib/libgomp.so.1",
    "version": None,
}


@pytest.fixture
def pools(monkeypatch):
    """threadpoolctl's answer, as the test sets it."""
    answer: list[dict] = []
    monkeypatch.setattr(threadpoolctl, "threadpool_info", lambda: [dict(pool) for pool in answer])
    return answer


def _zen4(tmp_path):
    return hw.cpu_identity(_file(tmp_path, ZEN4), _sysfs(tmp_path))


def test_numpys_blas_is_the_one_in_numpys_directory(pools, tmp_path):
    pools += [GOMP, SCIPY_OPENBLAS, NUMPY_OPENBLAS]
    blas = hw.blas_identity(environ={}, cpu=_zen4(tmp_path))
    assert blas["library"] == "libscipy_openblas64_-32a4b2a6.so" and blas["version"] == "0.3.31.188.0"
    assert blas["architecture"] == "Haswell" and blas["num_threads"] == 2 and blas["internal_api"] == "openblas"
    assert blas["kernel_env"] == {} and blas["forced_core_type"] is None and blas["core_type_forced"] is False
    assert blas["forced_vs_cpu"] is None and "not set" in blas["missing"]["forced_vs_cpu"]
    assert "/venv" not in json.dumps(blas), "the file's name, not the machine's directories"


def test_a_forced_core_type_is_recorded_and_compared_with_the_cpu(pools, tmp_path):
    pools += [NUMPY_OPENBLAS]
    environ = {
        "OPENBLAS_CORETYPE": "Haswell",
        "OPENBLAS_L2_SIZE": "1048576",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "ATEN_CPU_CAPABILITY": "avx2",
        "HOME": "/root",
    }
    blas = hw.blas_identity(environ=environ, cpu=_zen4(tmp_path))
    assert blas["kernel_env"] == {k: v for k, v in environ.items() if k != "HOME"}
    assert blas["forced_core_type"] == "Haswell" and blas["core_type_forced"] is True
    assert blas["forced_vs_cpu"] == "below", "Haswell's AVX2 kernels on a CPU with AVX-512"
    assert "forced_vs_cpu" not in blas["missing"]
    zen3 = hw.cpu_identity(_file(tmp_path, ZEN3, "zen3"), tmp_path / "sys" / "cpu")
    assert hw.blas_identity(environ=environ, cpu=zen3)["forced_vs_cpu"] == "same"
    assert hw.forced_versus_cpu("SkylakeX", "AVX2") == ("above", None)


def test_a_core_type_or_cpu_that_cannot_be_compared_is_still_flagged_as_forced(pools):
    pools += [NUMPY_OPENBLAS]
    blas = hw.blas_identity(environ={"OPENBLAS_CORETYPE": "NEOVERSEN1"}, cpu={"isa_level": "NEON"})
    assert blas["core_type_forced"] is True and blas["forced_vs_cpu"] is None
    assert "not one of the x86 types" in blas["missing"]["forced_vs_cpu"]
    blas = hw.blas_identity(environ={"OPENBLAS_CORETYPE": "Haswell"}, cpu=None)
    assert blas["core_type_forced"] is True and "not known" in blas["missing"]["forced_vs_cpu"]


def test_no_numpy_blas_found_is_missing_with_the_reason(pools):
    blas = hw.blas_identity(environ={})
    assert blas["library"] is None and blas["architecture"] is None
    assert "no BLAS library" in blas["missing"]["architecture"]
    pools += [SCIPY_OPENBLAS, SCIPY_OPENBLAS | {"filepath": "/opt/lib/libopenblas.so.0"}]
    blas = hw.blas_identity(environ={})
    assert blas["library"] is None and "several BLAS libraries" in blas["missing"]["library"]


def test_process_blas_lists_every_library_loaded(pools):
    pools += [GOMP, NUMPY_OPENBLAS]
    record = hw.process_blas()
    assert [pool["library"] for pool in record["libraries"]] == ["libgomp.so.1", "libscipy_openblas64_-32a4b2a6.so"]
    assert record["libraries"][1]["architecture"] == "Haswell" and record["libraries"][0]["architecture"] is None
    assert record["threadpoolctl"] == threadpoolctl.__version__ and record["missing"] == {}


def test_recorded_core_type_reads_the_blas_record_or_the_environment():
    assert hw.recorded_core_type({"blas": {"forced_core_type": "Haswell"}, "env": {}}) == ("Haswell", True)
    assert hw.recorded_core_type({"env": {"OPENBLAS_CORETYPE": "Zen"}}) == ("Zen", True)
    assert hw.recorded_core_type({"env": {}}) == (None, True)
    assert hw.recorded_core_type({}) == (None, False)


def test_every_framework_records_its_process_blas(pools):
    """The shared place: Framework.__init__ adds `process_blas` to the settings every cell records."""
    from fwbench.backends.base import Framework

    class Host(Framework):
        name = "numpy"

        def _apply_settings(self):
            return {"intra_op_threads": self.threads}

        def versions(self):
            return {}

        def device_info(self):
            return {"platform": "cpu"}

        def arrays(self):
            raise NotImplementedError

        def gpu_index(self):
            return None

    pools += [NUMPY_OPENBLAS]
    settings = Host(threads=2, precision="fp32").effective_settings
    assert settings["process_blas"]["libraries"][0]["architecture"] == "Haswell"


def test_host_provenance_records_hardware_and_blas_valid_for_the_schema():
    import jsonschema

    from fwbench.results import result_schema

    provenance = host_provenance()
    assert set(hw.CPU_FIELDS) <= set(provenance["hardware"]) and "kernel_env" in provenance["blas"]
    jsonschema.Draft202012Validator(result_schema()["properties"]["provenance"]).validate(provenance)
    broken = provenance | {"blas": provenance["blas"] | {"forced_vs_cpu": "sideways"}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(result_schema()["properties"]["provenance"]).validate(broken)


TORCH_BUILD = """PyTorch built with:
  - GCC 13.3
  - Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 20240605 for Intel(R) 64 architecture
  - Intel(R) MKL-DNN v3.12.0 (Git Hash 80afa71049cd69a3df32adcccb623b12cd7baa22)
  - CPU capability usage: AVX2
"""


def test_pytorch_records_its_cpu_capability_and_its_static_mkl_and_onednn():
    pytest.importorskip("torch")
    from fwbench.backends.torch import cpu_kernels

    kernels = cpu_kernels(TORCH_BUILD)
    assert kernels["mkl"] == "2024.2" and kernels["onednn"] == "3.12.0" and kernels["cpu_capability"]
    assert cpu_kernels("PyTorch built with:\n  - GCC 13.3\n") | {"cpu_capability": None} == {
        "cpu_capability": None,
        "mkl": None,
        "onednn": None,
    }
