"""The peak-FLOP probe's size search, with fake devices: a launch-bound GPU, a slow CPU, a small memory."""

from __future__ import annotations

import pytest

from fwbench.trackers.flops import grow


class FakeDevice:
    """A matmul costs `launch_s` + its FLOPs at `peak`; `now` advances as the probe would spend real time."""

    def __init__(self, peak: float, launch_s: float):
        self.peak, self.launch_s, self.now, self.calls = peak, launch_s, 0.0, []

    def measure(self, size: int, seconds: float) -> tuple[float, float]:
        self.calls.append(size)
        call_s = self.launch_s + 2.0 * size**3 / self.peak
        self.now += call_s + max(seconds, call_s)  # warm-up, then timed calls for at least `seconds`
        return 2.0 * size**3 / call_s, call_s

    def clock(self) -> float:
        return self.now


def test_a_launch_bound_gpu_grows_the_matrices_until_the_rate_stops_improving():
    gpu = FakeDevice(peak=500e12, launch_s=20e-6)  # an H100-like bf16 rate, 20 us per launch + synchronise
    found = grow(gpu.measure, free_bytes=lambda: 80 * 2**30, element_bytes=2, clock=gpu.clock)
    assert gpu.calls == [1024, 2048, 4096, 8192, 16384]
    assert found["peak_flops"] == pytest.approx(500e12, rel=0.01)  # fixed 1024/2048 matrices gave ~0.64 of it
    assert [t["size"] for t in found["sizes"]] == gpu.calls and found["best_size"] == 16384
    assert found["sizes"][-1]["call_s"] >= 0.005


def test_growth_stops_when_doubling_gains_little_with_long_enough_calls():
    gpu = FakeDevice(peak=60e12, launch_s=20e-6)  # fp32 without tensor cores: compute-bound from 8192 on
    found = grow(gpu.measure, free_bytes=lambda: 80 * 2**30, element_bytes=4, clock=gpu.clock)
    assert gpu.calls == [1024, 2048, 4096, 8192] and "improved by < 5%" in found["stopped"]


def test_a_short_call_keeps_the_size_growing_even_without_gain():
    rates = {1024: 10e12, 2048: 9e12, 4096: 30e12, 8192: 30.5e12}  # launch noise: 2048 looked slower

    def measure(size, seconds):
        return rates[size], 2.0 * size**3 / rates[size]

    found = grow(measure, free_bytes=lambda: 80 * 2**30, element_bytes=4, min_call_s=0.005)
    assert [t["size"] for t in found["sizes"]] == [1024, 2048, 4096, 8192] and found["peak_flops"] == 30.5e12


def test_memory_bounds_the_size():
    gpu = FakeDevice(peak=500e12, launch_s=20e-6)
    found = grow(gpu.measure, free_bytes=lambda: 2**30, element_bytes=4, clock=gpu.clock)
    assert gpu.calls == [1024, 2048, 4096] and "free device memory" in found["stopped"]  # 3 x 8192^2 x 4 B > 0.5 GiB


def test_a_slow_cpu_stays_within_the_time_budget():
    cpu = FakeDevice(peak=1e9, launch_s=0.0)  # torch's bf16 on a CPU without bf16 units: 2 s per 1024^2 matmul
    found = grow(cpu.measure, free_bytes=lambda: 8 * 2**30, element_bytes=2, budget_s=8.0, clock=cpu.clock)
    assert cpu.calls == [1024] and "budget" in found["stopped"] and cpu.now < 8.0
    fast = FakeDevice(peak=100e9, launch_s=0.05)  # still gaining at 4096, but 8192 would take 2 x 11 s
    found = grow(fast.measure, free_bytes=lambda: 8 * 2**30, element_bytes=4, budget_s=8.0, clock=fast.clock)
    assert fast.calls == [1024, 2048, 4096] and "budget" in found["stopped"] and fast.now < 8.0


def test_the_first_sizes_start_up_and_compile_do_not_spend_the_budget():
    """JAX on the H200: its GPU client and first compile took 8.7 s at size 1024, over the 8 s budget, which then
    stopped it before 2048; the budget counts the growth, from the end of the first size."""

    class SlowStart(FakeDevice):
        def measure(self, size, seconds):
            if not self.calls:
                self.now += 8.7
            return super().measure(size, seconds)

    gpu = SlowStart(peak=60e12, launch_s=20e-6)
    found = grow(gpu.measure, free_bytes=lambda: 80 * 2**30, element_bytes=4, budget_s=8.0, clock=gpu.clock)
    assert gpu.calls == [1024, 2048, 4096, 8192] and "improved by < 5%" in found["stopped"]
    assert found["elapsed_s"] > 8.7  # the whole probe's time is still what it reports
