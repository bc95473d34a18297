"""Report which dtype each common op returns inside autocast on a device."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..i18n import tr
from ..precision import Table
from .amp import plan_amp
from .data import make_mlp


def autocast_dtypes(device: str | torch.device | None = "cpu", amp: str | torch.dtype = "bf16", *,
                    allow_emulated: bool = False) -> Table:
    """Run common ops on FP32 inputs inside autocast on `device` and return the dtype each one produced.

    The ops: ``nn.Linear``, ``@``, ``relu``, adding an FP32 tensor, ``softmax``, ``log_softmax``, ``sum``,
    ``layer_norm``, ``cross_entropy``, ``mse_loss``. Which ones stay FP32 differs between devices (each
    device has its own autocast op lists), so this is measured, not looked up.
    """
    plan = plan_amp(device, amp, scaler=False, allow_emulated=allow_emulated)  # no scaler: no backward here
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(8, 16, generator=gen).to(plan.device)
    labels = torch.randint(0, 4, (8,), generator=gen).to(plan.device)
    layer = make_mlp(16, 4, hidden=16, depth=1, device=plan.device)[0]
    with plan.autocast():
        h = layer(x)
        ops = [
            ("nn.Linear(x)", h),
            ("x @ x.T", x @ x.T),
            ("torch.relu(h)", torch.relu(h)),
            ("h + fp32_tensor", h + torch.ones(16, device=plan.device)),
            ("torch.softmax(h, dim=1)", torch.softmax(h, dim=1)),
            ("torch.log_softmax(h, dim=1)", torch.log_softmax(h, dim=1)),
            ("h.sum()", h.sum()),
            ("F.layer_norm(h, (16,))", F.layer_norm(h, (16,))),
            ("F.cross_entropy(h, y)", F.cross_entropy(h[:, :4], labels)),
            ("F.mse_loss(h, 0)", F.mse_loss(h, torch.zeros_like(h))),
        ]
    rows = tuple((name, str(out.dtype).removeprefix("torch.")) for name, out in ops)
    title = f"{tr('phép toán trong autocast', 'op inside autocast')} ({plan.device}, {plan.amp})"
    return Table((title, tr("dtype kết quả", "result dtype")), rows)
