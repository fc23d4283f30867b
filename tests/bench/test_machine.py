"""Every timed report names where it ran: the same pair gave 1.72x plain decoding on one x86 CPU and 1.24x
on another."""

import torch

from tabed.bench import machine
from tabed.models.matmul import LinearChoice


def test_the_machine_is_described_from_what_the_process_sees(monkeypatch):
    monkeypatch.setattr(machine, "cpu_model", lambda: "Test CPU 9000")
    described = machine.describe_machine("cpu")
    assert described["cpu"] == "Test CPU 9000" and described["torch_threads"] == torch.get_num_threads()
    assert described["cores"] >= 1 and described["torch"] == torch.__version__ and "gpu" not in described
    assert described["blas"].split(",")[0] in torch.__config__.show()


def test_the_report_line_names_the_gpu_first_then_its_host():
    cpu = {"cpu": "AMD EPYC 9B14", "cores": 16, "torch_threads": 2, "blas": "mkl, oneDNN", "torch": "2.13.0"}
    assert machine.machine_line(cpu) == "AMD EPYC 9B14, 16 cores, 2 torch threads, BLAS mkl, oneDNN, torch 2.13.0"
    assert machine.machine_line(cpu | {"gpu": "NVIDIA H200"}).startswith("NVIDIA H200; host AMD EPYC 9B14, 16 cores")


def test_the_report_names_how_each_models_linear_layers_multiplied():
    linears = {"target": LinearChoice("weight-first", 12.8, 7.8), "drafter": LinearChoice("library", 0.4, 0.7)}
    described = machine.describe_machine("cpu", linears)
    assert described["linears"] == {"target": "W·xᵀ (7.8 ms as W·xᵀ, 12.8 ms as x·Wᵀ)",
                                    "drafter": "x·Wᵀ (0.7 ms as W·xᵀ, 0.4 ms as x·Wᵀ)"}
    assert machine.machine_line(described).endswith(
        "; target's linear layers W·xᵀ (7.8 ms as W·xᵀ, 12.8 ms as x·Wᵀ); drafter's linear layers x·Wᵀ "
        "(0.7 ms as W·xᵀ, 0.4 ms as x·Wᵀ)")
    assert "linears" not in machine.describe_machine("cpu")
    some = LinearChoice("weight-first", 12.8, 9.1, (1, 2, 3, 5))
    assert some.describe() == "W·xᵀ for 1-3, 5 rows, x·Wᵀ otherwise (9.1 ms as W·xᵀ, 12.8 ms as x·Wᵀ)"


def test_the_report_names_the_models_whose_steps_ran_compiled():
    described = machine.describe_machine("cpu", compiled=["drafter"])
    assert described["compiled"] == ["drafter"]
    assert machine.machine_line(described).endswith("torch " + torch.__version__ + "; drafter's steps compiled")
    assert "compiled" not in machine.describe_machine("cpu", compiled=[])


def test_the_cpu_model_is_read_from_cpuinfo_when_there_is_one():
    assert machine.cpu_model() and machine.cpu_model() != "unknown"


def test_the_blas_says_whether_onednn_is_there(monkeypatch):
    """The BLAS torch names in its build, then oneDNN where torch has it for its CPU kernels."""
    monkeypatch.setattr(torch.__config__, "show", lambda: "  - BLAS_INFO=openblas\n  - LAPACK_INFO=open")
    for there, said in ((True, "openblas, oneDNN"), (False, "openblas")):
        monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda there=there: there)
        assert machine.blas() == said
    monkeypatch.setattr(torch.__config__, "show", lambda: "no such line")
    assert machine.blas() == "unknown"
