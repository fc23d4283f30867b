"""Where a figure was measured: the same pair runs 1.72x plain decoding on one x86 CPU and 1.24x on
another, so every timed report names the processor, its threads, the BLAS and the GPU."""

from __future__ import annotations

import os
import platform
import re

import torch


def cpu_model() -> str:
    """The processor's marketing name ("AMD EPYC 9B14"), from /proc/cpuinfo where there is one."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def blas() -> str:
    """The BLAS torch was built with (MKL, OpenBLAS, ...), and whether oneDNN is there for its CPU kernels."""
    match = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    name = match.group(1) if match else "unknown"
    return name + (", oneDNN" if torch.backends.mkldnn.is_available() else "")


def describe_machine(device: torch.device | str = "cpu", linears: dict | None = None,
                     compiled: list[str] | None = None) -> dict:
    """CPU model, cores the process may use, torch's threads, BLAS, torch's version, on CUDA the GPU, how
    the pair's linear layers multiply (`linears`: a pair's, per role; `models.matmul`) and which of its
    models' steps ran compiled (`compiled`: roles; `models.compiled`)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    out = {"cpu": cpu_model(), "cores": cores, "torch_threads": torch.get_num_threads(), "blas": blas(),
           "torch": torch.__version__}
    if torch.device(device).type == "cuda":
        out["gpu"] = torch.cuda.get_device_name(torch.device(device))
    if linears:
        out["linears"] = {role: choice.describe() for role, choice in linears.items()}
    if compiled:
        out["compiled"] = list(compiled)
    return out


def machine_line(machine: dict) -> str:
    """One line for a report's header: "AMD EPYC 9B14, 2 cores, 2 torch threads, BLAS mkl, oneDNN, torch 2.13.0",
    then how each model's linear layers multiplied where that is known."""
    gpu = f"{machine['gpu']}; host " if machine.get("gpu") else ""
    linears = "".join(f"; {role}'s linear layers {order}" for role, order in machine.get("linears", {}).items())
    compiled = "".join(f"; {role}'s steps compiled" for role in machine.get("compiled", []))
    return (f"{gpu}{machine['cpu']}, {machine['cores']} cores, {machine['torch_threads']} torch threads, "
            f"BLAS {machine['blas']}, torch {machine['torch']}{linears}{compiled}")
