"""The step counter (gpubench/measure/flops.py and gpubench/workload.py's OpCounter): FLOPs, kernel launches and the
bytes of each counted operation's tensor inputs and outputs, on operation sequences counted by hand, and the bytes
of a real CLI run's step in its report."""

import json
import os
import subprocess
import sys

import pytest
import torch
from torch import nn

from gpubench.measure.flops import StepCounts, count_step, precision_name
from gpubench.workload import OpCounter, StepResult, Workload, tensor_bytes

FLOAT_BYTES = 4


def test_a_linear_forward_and_backward_moves_the_bytes_counted_by_hand():
    layer = nn.Linear(4, 3)
    x, grad_y = torch.randn(2, 4), torch.randn(2, 3)
    with OpCounter() as ops:
        layer(x).backward(grad_y)
    # addmm(bias [3], x [2, 4], weight.t() [4, 3]) -> y [2, 3]: 3 + 8 + 12 + 6 floats;
    # weight's gradient mm(grad_y.t() [3, 2], x [2, 4]) -> [3, 4]: 6 + 8 + 12 floats;
    # bias's gradient sum(grad_y [2, 3]) -> [1, 3]: 6 + 3 floats. The transposes and detaches are views.
    assert ops.count == 3
    assert ops.bytes == FLOAT_BYTES * ((3 + 8 + 12 + 6) + (6 + 8 + 12) + (6 + 3))


def test_a_storage_counts_once_per_operation_and_a_view_at_its_viewed_size():
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    with OpCounter() as ops:
        a[:, :2].sum()  # the [4, 2] view read (8 floats), one float written
        a.add(a)  # a read once (32 floats), a new [4, 8] written
        a.add_(b)  # a and b read; the output is a itself (64 floats in all)
        torch.mul(a[::2], 2.0)  # a [2, 8] view read, a [2, 8] written
    assert ops.count == 4
    assert ops.bytes == FLOAT_BYTES * ((8 + 1) + (32 + 32) + (32 + 32) + (16 + 16))


def test_a_gather_reads_as_much_of_its_source_as_it_writes():
    source, rows = torch.randn(100, 8), torch.tensor([3, 1, 4, 1, 5])
    with OpCounter() as ops:
        source[rows]  # 5 rows of 8 floats read and written, 5 int64 indices read; not the 800-float source
        source.index_select(0, rows[:2])  # 2 rows: 16 floats read and written, the 2-index view read
    assert ops.count == 2
    assert ops.bytes == (FLOAT_BYTES * 40 + 8 * 5 + FLOAT_BYTES * 40) + (FLOAT_BYTES * 16 + 8 * 2 + FLOAT_BYTES * 16)


def test_tensor_bytes_ignores_what_is_not_a_tensor():
    a = torch.zeros(10, dtype=torch.float64)
    assert tensor_bytes([a, a[:5], 3, None, "x", torch.zeros(2, dtype=torch.int8)]) == 80 + 2


class _LinearSGD(Workload):
    """A Linear layer's step with a given output gradient and a hand-written SGD update: 5 kernel launches."""

    name = "linear"

    def __init__(self) -> None:
        self.layer = nn.Linear(4, 3)
        self.x, self.grad_y = torch.randn(2, 4), torch.randn(2, 3)

    @property
    def samples_per_step(self) -> float:
        return 2.0

    def train_step(self) -> StepResult:
        for parameter in self.layer.parameters():
            parameter.grad = None
        self.layer(self.x).backward(self.grad_y)
        with torch.no_grad():
            for parameter in self.layer.parameters():
                parameter.add_(parameter.grad, alpha=-0.1)
        return StepResult(loss=None, grad_norm=None)

    def modules(self) -> list[nn.Module]:
        return [self.layer]


def test_count_step_counts_flops_launches_and_bytes_of_one_step():
    counts = count_step(_LinearSGD())
    # FLOPs: addmm 2 x 2 x 4 x 3 and the weight-gradient mm 2 x 3 x 2 x 4 (torch's counter ignores the sum).
    # Bytes: the forward and backward above (29 + 26 + 9 floats), then weight += grad and bias += grad.
    # All of it in fp32, the dtype of the layer and its input.
    assert counts == StepCounts(
        flops=96.0,
        launches=5,
        bytes=FLOAT_BYTES * ((29 + 26 + 9) + (12 + 12) + (3 + 3)),
        flops_by_precision={"fp32": 96.0},
    )


class _CyclicLinearSGD(_LinearSGD):
    """:class:`_LinearSGD` whose first step of every 4 also refreshes its input (``torch.randn``: one more launch,
    8 floats written), as PPO's first minibatch update of an iteration also collects the rollout; and whose very
    first step also sets up state (a ``zeros`` of 1,000 floats), as an optimizer does on its first update."""

    def __init__(self) -> None:
        super().__init__()
        self.steps_done = 0

    @property
    def steps_per_iteration(self) -> int:
        return 4

    def train_step(self) -> StepResult:
        if self.steps_done == 0:
            self.state = torch.zeros(1000)
        if self.steps_done % 4 == 0:
            self.x = torch.randn(2, 4)
        self.steps_done += 1
        return super().train_step()


def test_the_count_is_an_iterations_average_without_the_first_steps_setup():
    workload = _CyclicLinearSGD()
    counts = count_step(workload)
    # Steps 2-5 are counted (step 1, with the 1,000-float setup, is not); one of them (step 5) refreshes the input:
    # (4 x 5 + 1) / 4 = 5.25 launches, rounded to 5; bytes (4 x 94 + 8) / 4 = 96 floats; FLOPs as before.
    assert workload.steps_done == 5
    assert counts == StepCounts(flops=96.0, launches=5, bytes=FLOAT_BYTES * 96, flops_by_precision={"fp32": 96.0})


class _MixedPrecisionStep(_LinearSGD):
    """A step as a user's own model may compute it, whatever ``execution.precision`` says: a first layer under its
    own bf16 autocast, a second in fp32 on the first's output cast back, a third whose weights are bf16."""

    def __init__(self) -> None:
        self.first, self.second = nn.Linear(8, 4), nn.Linear(4, 3)
        self.third = nn.Linear(3, 2).to(torch.bfloat16)
        self.x = torch.randn(2, 8)

    def train_step(self) -> StepResult:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            hidden = self.first(self.x)
        out = self.third(self.second(hidden.float()).bfloat16())
        out.float().sum().backward()
        return StepResult(loss=None, grad_norm=None)

    def modules(self) -> list[nn.Module]:
        return [self.first, self.second, self.third]


def test_the_flops_are_counted_by_the_precision_they_ran_in():
    counts = count_step(_MixedPrecisionStep())
    # First layer, autocast to bf16: forward 2 x 2 x 8 x 4 = 128 and its weight's gradient 128 (its input needs
    # none). Second, fp32: forward, input and weight gradients, 2 x 2 x 4 x 3 = 48 each. Third, bf16 weights:
    # 2 x 2 x 3 x 2 = 24 each of the three.
    assert counts.flops_by_precision == {"bf16": 128.0 * 2 + 24 * 3, "fp32": 48.0 * 3}
    assert counts.flops == 472.0


class _ConvStep(_LinearSGD):
    """One fp32 3x3 convolution (1 -> 2 channels, 4x4 output, no bias) and a 2 -> 1 linear layer on its output."""

    def __init__(self) -> None:
        self.conv, self.linear = nn.Conv2d(1, 2, 3, padding=1, bias=False), nn.Linear(2, 1, bias=False)
        self.x = torch.randn(1, 1, 4, 4)

    def train_step(self) -> StepResult:
        features = self.conv(self.x).mean(dim=(2, 3))
        self.linear(features).sum().backward()
        return StepResult(loss=None, grad_norm=None)

    def modules(self) -> list[nn.Module]:
        return [self.conv, self.linear]


@pytest.mark.parametrize("allow_tf32", [True, False])
def test_fp32_convolutions_count_as_tf32_while_cudnn_may_use_it(allow_tf32: bool, monkeypatch) -> None:
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", allow_tf32)
    counts = count_step(_ConvStep())
    # Convolution forward: 2 x (16 outputs x 2 channels) x 9 weights = 576; its weight gradient the same (the input
    # needs none). Linear, 1 x 2 -> 1: forward 2 x 2 = 4, its weight gradient 4 and its input's gradient 4.
    conv_flops, linear_flops = 576.0 * 2, 4.0 * 3
    expected = {"tf32": conv_flops, "fp32": linear_flops} if allow_tf32 else {"fp32": conv_flops + linear_flops}
    assert counts.flops_by_precision == expected


def test_precision_names_are_the_configs_for_the_three_it_knows():
    assert [precision_name(d) for d in (torch.float32, torch.bfloat16, torch.float16)] == ["fp32", "bf16", "fp16"]
    assert precision_name(torch.float64) == "float64"


def test_a_step_that_cannot_be_counted_has_no_counts():
    class Broken(_LinearSGD):
        def train_step(self) -> StepResult:
            raise RuntimeError("not countable")

    assert count_step(Broken()) == StepCounts(flops=None, launches=None, bytes=None)


@pytest.mark.slow
def test_a_cpu_run_reports_the_bytes_of_its_step(tmp_path):
    environment = {key: value for key, value in os.environ.items() if key != "MLFLOW_TRACKING_URI"}
    environment.update({"OMP_NUM_THREADS": "1", "GPU_BENCHMARK_CACHE_DIR": str(tmp_path / "cache")})
    completed = subprocess.run(
        [
            *(sys.executable, "-m", "gpubench", "hardware=cpu", "experiment=quick", "model=mlp"),
            "tracking.enabled=false",
        ],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr
    (path,) = sorted((tmp_path / "outputs").glob("**/report.json"))
    written = json.loads(path.read_text())
    mlp = written["models"]["mlp"]
    assert mlp["bytes_per_step"] > 0 and mlp["launches_per_step"] > 0
    # Adam alone reads and writes every parameter, its gradient and both moments.
    assert mlp["bytes_per_step"] > 4 * FLOAT_BYTES * mlp["workload"]["parameters"]
    # The MLP computes in fp32 throughout (execution.precision fp32, no autocast of its own).
    assert mlp["flops_by_precision"] == {"fp32": mlp["flops_per_step"]}
    split = written["recommendation"]["per_model"]["mlp"]["step_split"]
    assert split["bytes_per_step"] == mlp["bytes_per_step"]
