import pytest
import torch
import torch.nn.functional as F

from lessons_lib.bench import Timing
from lessons_lib.training import amp as training_amp  # where plan_amp/recommend_amp look names up
from lessons_lib.training import (
    amp_speed_verdict,
    autocast_dtypes,
    make_classification_data,
    make_mlp,
    plan_amp,
    profile_train_step,
    recommend_amp,
    train,
)
from lessons_lib.training import trainer as training_trainer
from lessons_lib.training.amp import AmpPlan
from lessons_lib.training.trainer import StepProfile, TrainResult, _AmpTrainer


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny models run fastest on one thread (and do not fight other processes for cores)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# --------------------------------------------------------------------------- data and models


def test_data_is_seeded_shaped_and_leaves_the_global_rng_alone():
    before = torch.random.get_rng_state()
    x, y = make_classification_data(64, 8, 3, seed=1)
    assert torch.equal(before, torch.random.get_rng_state())
    x2, y2 = make_classification_data(64, 8, 3, seed=1)
    x3, _ = make_classification_data(64, 8, 3, seed=2)
    assert x.shape == (64, 8) and y.shape == (64,)
    assert x.dtype == torch.float32 and y.dtype == torch.int64
    assert torch.equal(x, x2) and torch.equal(y, y2)
    assert not torch.equal(x, x3)
    assert int(y.min()) >= 0 and int(y.max()) < 3
    assert len(torch.unique(y)) > 1


def test_mlp_is_seeded_shaped_float32_and_leaves_the_global_rng_alone():
    before = torch.random.get_rng_state()
    a, b, c = make_mlp(8, 3, hidden=16, depth=3, seed=5), make_mlp(8, 3, hidden=16, depth=3, seed=5), make_mlp(8, 3, hidden=16, depth=3, seed=6)
    linears = [m for m in a if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 4
    assert (linears[0].in_features, linears[-1].out_features) == (8, 3)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert not torch.equal(a[0].weight, c[0].weight)
    assert torch.equal(before, torch.random.get_rng_state())
    assert a(torch.zeros(2, 8)).shape == (2, 3) and a[0].weight.dtype == torch.float32


# --------------------------------------------------------------------------- parsing and planning


def test_plan_defaults():
    off = plan_amp("cpu")
    assert (off.amp, off.dtype, off.use_scaler, off.enabled) == ("off", None, False, False)
    bf16 = plan_amp("cpu", "bf16")
    assert (bf16.dtype, bf16.use_scaler, bf16.emulated) == (torch.bfloat16, False, False)
    fp16 = plan_amp("cpu", "fp16", allow_emulated=True)
    assert (fp16.dtype, fp16.use_scaler, fp16.emulated) == (torch.float16, True, True)
    assert not plan_amp("cpu", "fp16", scaler=False, allow_emulated=True).use_scaler
    assert "GradScaler" in str(fp16) and "bf16" in str(bf16) and recommend_amp("cpu") == "bf16"


def test_plan_autocast_context_casts_matmuls():
    a = torch.ones(4, 4)
    with plan_amp("cpu", "bf16").autocast():
        assert (a @ a).dtype == torch.bfloat16
    with plan_amp("cpu", "off").autocast():
        assert (a @ a).dtype == torch.float32
    with AmpPlan(torch.device("meta"), "off", None, False).autocast():  # no autocast needed when off
        pass


@pytest.fixture
def fake_t4(monkeypatch):
    """Pretend the chosen device is a CUDA T4 (compute capability 7.5)."""
    monkeypatch.setattr(training_amp, "pick_device", lambda device=None: torch.device("cuda"))
    monkeypatch.setattr(training_amp, "has_native_bf16", lambda device=None: False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: (7, 5))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: "Tesla T4")


def test_plan_rejects_emulated_bf16_on_a_t4(fake_t4):
    with pytest.raises(ValueError, match=r"Tesla T4 \(compute capability 7\.5\).*8\.0.*is_bf16_supported.*amp='fp16'"):
        plan_amp("cuda", "bf16")


@pytest.mark.parametrize(("device", "native_bf16", "works", "expected"), [
    ("cuda", False, (), "fp16"),  # a T4
    ("cuda", True, (), "bf16"),  # an A100
    # other devices: what autocast and GradScaler really run there
    ("mps", None, ("bf16", "fp16", "scaler"), "bf16"), ("mps", None, ("fp16", "scaler"), "fp16"),
    ("mps", None, ("fp16",), "off"), ("mps", None, ("scaler",), "off"),
])
def test_recommend_follows_the_hardware_and_what_works(monkeypatch, device, native_bf16, works, expected):
    monkeypatch.setattr(training_amp, "pick_device", lambda device_=None: torch.device(device))
    monkeypatch.setattr(training_amp, "has_native_bf16", lambda device_=None: native_bf16)
    monkeypatch.setattr(training_amp, "_autocast_problem", lambda device_, amp: None if amp in works else "no")
    monkeypatch.setattr(training_amp, "_grad_scaler_problem", lambda device_: None if "scaler" in works else "no")
    assert recommend_amp(device) == expected


def test_plan_reports_autocast_that_does_not_run(monkeypatch):
    monkeypatch.setattr(training_amp, "_autocast_problem", lambda device, amp: "target dtype is not supported")
    with pytest.raises(ValueError, match="autocast bf16 không chạy trên cpu.*not supported.*amp='off'"):
        plan_amp("cpu", "bf16")


def test_plan_reports_grad_scaler_that_does_not_run(monkeypatch):
    monkeypatch.setattr(training_amp, "_grad_scaler_problem", lambda device: "no kernel")
    with pytest.raises(ValueError, match="GradScaler không chạy.*no kernel.*scaler=False"):
        plan_amp("cpu", "fp16", allow_emulated=True)
    assert not plan_amp("cpu", "fp16", allow_emulated=True, scaler=False).use_scaler


def test_probes_answer_for_real():
    assert plan_amp("cpu", "bf16").dtype == torch.bfloat16  # autocast really produces bf16 on the CPU
    assert plan_amp("cpu", "fp16", allow_emulated=True).use_scaler  # and GradScaler runs there


# --------------------------------------------------------------------------- training


X, Y = make_classification_data(512, 16, 3, seed=0)


@pytest.fixture
def data():
    return X, Y


@pytest.mark.parametrize("amp", ["off", "bf16"])
def test_train_runs_every_cpu_mode_and_learns(data, amp):
    x, y = data
    result = train(make_mlp(16, 3, hidden=32, seed=0), x, y, steps=60, batch_size=64, lr=1e-2, amp=amp)
    assert isinstance(result, TrainResult) and len(result.losses) == 60
    first, last = sum(result.losses[:5]) / 5, sum(result.losses[-5:]) / 5
    assert last < 0.6 * first, (first, last)
    assert not result.skipped_steps
    assert len(result.scales) == (60 if result.plan.use_scaler else 0)
    assert "60" in str(result) and f"→ {result.losses[-1]:.4f}" in str(result)


def test_same_seed_gives_same_fp32_run_and_autocast_differs_a_little(data):
    x, y = data
    a = train(make_mlp(16, 3, seed=0), x, y, steps=20, seed=3)
    b = train(make_mlp(16, 3, seed=0), x, y, steps=20, seed=3)
    c = train(make_mlp(16, 3, seed=0), x, y, steps=20, seed=3, amp="bf16")
    assert a.losses == b.losses
    assert c.losses != a.losses
    assert c.losses[0] == pytest.approx(a.losses[0], rel=1e-2)


def test_train_records_skipped_steps_and_scales(data, monkeypatch):
    x, y = data
    calls = {"n": 0}
    cross_entropy = F.cross_entropy

    def loss_fn(out, target):
        calls["n"] += 1
        loss = cross_entropy(out, target)
        return loss * float("inf") if calls["n"] == 4 else loss

    # an emulated fp16 plan (what a T4 gets for real) and a loss that overflows once, for the CPU
    emulated = lambda device, amp: plan_amp(device, amp, allow_emulated=True)  # noqa: E731
    monkeypatch.setattr(training_trainer, "plan_amp", emulated)
    monkeypatch.setattr(F, "cross_entropy", loss_fn)
    result = train(make_mlp(16, 3), x, y, steps=6, amp="fp16")
    assert result.skipped_steps == [3]
    assert result.scales == [2.0**16] * 3 + [2.0**15] * 3  # the skipped step halved the scale
    assert "1 bước bị bỏ qua" in str(result)


# --------------------------------------------------------------------------- profiling and op dtypes


def test_profile_train_step_on_cpu(data):
    x, y = data
    model = make_mlp(16, 3)
    before = model[0].weight.detach().clone()
    profile = profile_train_step(model, x[:64], y[:64], amp="bf16")
    assert not torch.equal(before, model[0].weight)  # the steps trained the model in place
    assert isinstance(profile, StepProfile)
    assert profile.timing.repeats == 10 and profile.timing.number == 1 and profile.timing.warmup == 2
    assert all(t > 0 for t in profile.timing.times_s)
    assert profile.median_s == profile.timing.median_s
    assert profile.peak_memory_bytes is None and profile.baseline_memory_bytes is None  # CUDA only
    assert "bf16" in str(profile) and "ms" in str(profile) and "warm-up 2" in str(profile)


def test_step_profile_reports_memory_when_given():
    plan = AmpPlan(torch.device("cpu"), "fp16", torch.float16, True)
    timing = Timing(times_s=(0.002, 0.001, 0.003), device="cpu", threads=1, warmup=2, number=1)
    text = str(StepProfile(plan, timing, 3 * 2**20, 2**20))
    assert "fp16: 2.00 ms" in text and "3 MiB" in text and "1 MiB" in text


def test_autocast_dtypes_on_cpu():
    rows = dict(autocast_dtypes("cpu", "bf16").rows)
    assert rows["nn.Linear(x)"] == "bfloat16" and rows["x @ x.T"] == "bfloat16"
    assert rows["F.cross_entropy(h, y)"] == "float32" and rows["F.mse_loss(h, 0)"] == "float32"
    assert rows["h + fp32_tensor"] == "float32"  # type promotion with an FP32 operand
    assert set(dict(autocast_dtypes("cpu", "off").rows).values()) == {"float32"}


def _fake_profile(amp, times_s, expected_s=None):
    """A CPU StepProfile with chosen step times (no measurement)."""
    return StepProfile(plan_amp("cpu", amp), Timing(tuple(times_s), "cpu", 1, 0, 1), None, None, expected_s)


_Q, _STALL = [1e-3] * 5, 2.5e-3  # quiet repeats; the most a step should take, that a 136 ms time shows stalled
# (FP32 step times, bf16 step times, expected_s of both, CPU has bf16 instructions, said, not said)
VERDICTS = {
    "faster": (_Q, [0.5e-3] * 5, None, True, ("nhanh hơn FP32 2.0 lần",), ("Trái với dự đoán",)),
    "slower": (_Q, [2e-3] * 5, _STALL, False, ("CHẬM hơn FP32 2.0 lần",), ("⚠️",)),
    "equal": (_Q, [1.05e-3] * 5, None, True, ("gần như bằng nhau",), ()),
    "far slower than its work": ([0.136] * 5, [0.072] * 5, _STALL, False, (
        "⚠️ số đo nhiễu: xem dòng ⚠️ của bước fp32 và bước bf16 ở trên", "Trái với dự đoán",
        "nhiễu, đó là lời giải thích"), ("mức dự kiến",)),
    "repeats disagree": ([1e-3, 1e-3, 5e-3], [1e-3] * 3, None, True, ("xem dòng ⚠️ của bước fp32 ở trên",),
                         ("bước bf16", "lần chậm nhất")),  # each profile's own line says what was noisy
    "bf16 faster without instructions": ([2e-3] * 5, _Q, None, False, ("Trái với dự đoán", "overhead"), ()),
    "bf16 slower with instructions": (_Q, [2e-3] * 5, None, True, ("CHẬM hơn", "CPU này có lệnh bf16"),
                                      ("chưa kết luận",)),
    "bf16 slower, noisy": ([0.07] * 5, [0.136] * 5, _STALL, True, ("CPU này có lệnh bf16", "chưa kết luận được",
                                                                    "⚠️"), ()),
    "instructions unknown": ([2e-3] * 5, _Q, None, None, ("không kiểm tra được",), ()),
}


@pytest.mark.parametrize(("fp32", "bf16", "expected_s", "native", "said", "unsaid"), VERDICTS.values(), ids=VERDICTS)
def test_amp_speed_verdict(monkeypatch, fp32, bf16, expected_s, native, said, unsaid):
    monkeypatch.setattr(training_amp, "has_native_bf16", lambda device=None: native)
    text = amp_speed_verdict(_fake_profile("off", fp32, expected_s), _fake_profile("bf16", bf16, expected_s))
    assert all(s in text for s in said) and not any(s in text for s in unsaid), text


def test_noise_warnings_are_labelled_and_shown_once(data, capsys):
    """Each step's noise line is printed once, by its own profile under its label, never while measuring."""
    x, y = data
    profile = profile_train_step(make_mlp(16, 3), x[:64], y[:64])
    assert capsys.readouterr().out == ""                       # nothing printed while measuring
    assert profile.expected_s is not None                      # on the CPU: from the step's FLOPs
    assert profile.noise is None or "bước fp32: ⚠️" in str(profile)
    stalled = _fake_profile("off", [0.136] * 5, _STALL)
    assert str(stalled).count("⚠️") == 1 and "bước fp32: ⚠️ số đo nhiễu" in str(stalled)
    assert "gấp 54.4× mức dự kiến 2.50 ms" in str(stalled)
    assert _fake_profile("off", [0.136] * 5).noise is None     # no expectation, repeats agree: nothing to flag


def _fp32_bf16_profiles():
    return _fake_profile("off", [1e-3] * 3), _fake_profile("bf16", [1e-3] * 3)


def _half_model_trainer():
    model = make_mlp(4, 2).half()
    return _AmpTrainer(model, plan_amp("cpu", "fp16", allow_emulated=True), 0.1)


_AMP_NAMES = "'off', 'bf16' hoặc 'fp16'"
# (call, error, what the message must name): one row per argument check a lesson can reach
BAD_ARGUMENTS = {
    "data n_samples": (lambda: make_classification_data(n_samples=0), ValueError, "n_samples"),
    "data n_features": (lambda: make_classification_data(n_features=2.5), TypeError, "n_features"),
    "data n_classes": (lambda: make_classification_data(n_classes=1), ValueError, "n_classes"),
    "data seed": (lambda: make_classification_data(seed=-1), ValueError, "seed"),
    "data device": (lambda: make_classification_data(device="cuda:7"), ValueError, "cuda:7"),
    "mlp depth": (lambda: make_mlp(depth=0), ValueError, "depth"),
    "mlp hidden": (lambda: make_mlp(hidden="64"), TypeError, "hidden"),
    "mlp device": (lambda: make_mlp(device="gpu"), ValueError, "gpu"),
    "plan half": (lambda: plan_amp("cpu", "half"), ValueError, _AMP_NAMES),
    "plan dtype": (lambda: plan_amp("cpu", torch.float16), TypeError, "amp phải là " + _AMP_NAMES),
    "plan scaler type": (lambda: plan_amp("cpu", "bf16", scaler="yes"), TypeError, "scaler"),
    "plan allow_emulated": (lambda: plan_amp("cpu", "bf16", allow_emulated=1), TypeError, "allow_emulated"),
    "plan fp16 on cpu": (lambda: plan_amp("cpu", "fp16"), ValueError, "CPU.*amp='bf16'.*allow_emulated=True"),
    "plan scaler bf16": (lambda: plan_amp("cpu", "bf16", scaler=True), ValueError, "GradScaler chỉ dùng với amp='fp16'"),
    "plan scaler off": (lambda: plan_amp("cpu", "off", scaler=True), ValueError, "GradScaler chỉ dùng với amp='fp16'"),
    "recommend device": (lambda: recommend_amp("gpu"), ValueError, "gpu"),
    "recommend type": (lambda: recommend_amp(0.5), TypeError, "preferred"),
    "train steps": (lambda: train(make_mlp(16, 3), X, Y, steps=0), ValueError, "steps"),
    "train batch_size": (lambda: train(make_mlp(16, 3), X, Y, batch_size=10_000), ValueError, "batch_size"),
    "train lr": (lambda: train(make_mlp(16, 3), X, Y, lr=-1.0), ValueError, "lr"),
    "train lr type": (lambda: train(make_mlp(16, 3), X, Y, lr="fast"), TypeError, "lr"),
    "train amp": (lambda: train(make_mlp(16, 3), X, Y, amp="fp16"), ValueError, "allow_emulated"),
    "train model": (lambda: train("model", X, Y), TypeError, "nn.Module"),
    "train no parameters": (lambda: train(torch.nn.ReLU(), X, Y), ValueError, "tham số"),
    "train list": (lambda: train(make_mlp(16, 3), X.tolist(), Y), TypeError, "tensor"),
    "train rows": (lambda: train(make_mlp(16, 3), X, Y[:-1]), ValueError, "cùng số hàng"),
    "train device": (lambda: train(make_mlp(16, 3), X.to("meta"), Y), ValueError, r"inputs.to\(device\)"),
    "trainer half model": (_half_model_trainer, ValueError, "FP32.*model.half"),
    "profile amp": (lambda: profile_train_step(make_mlp(16, 3), X, Y, amp="fp16"), ValueError, "allow_emulated"),
    "profile model": (lambda: profile_train_step("model", X, Y), TypeError, "nn.Module"),
    "profile rows": (lambda: profile_train_step(make_mlp(16, 3), X, Y[:3]), ValueError, "cùng số hàng"),
    "autocast fp16": (lambda: autocast_dtypes("cpu", "fp16"), ValueError, "allow_emulated"),
    "verdict type": (lambda: amp_speed_verdict(1.0, _fp32_bf16_profiles()[1]), TypeError, "profile_train_step"),
    "verdict order": (lambda: amp_speed_verdict(*reversed(_fp32_bf16_profiles())), ValueError, "amp='off'"),
}
if not torch.cuda.is_available():
    BAD_ARGUMENTS["plan cuda without CUDA"] = (lambda: plan_amp("cuda", "fp16"), ValueError, "cuda")


@pytest.mark.parametrize(("call", "error", "names"), BAD_ARGUMENTS.values(), ids=BAD_ARGUMENTS)
def test_bad_arguments_raise_and_say_what_to_pass(call, error, names):
    with pytest.raises(error, match=names):
        call()
