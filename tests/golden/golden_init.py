"""Seeded weights for the golden scripts (make_golden.py, make_byom.py), shared so both draw them the
same way: conv / transposed conv / linear weights scaled by fan-in (activations stay O(1) through deep
nets), small biases, and every BatchNorm with non-trivial affine parameters and running statistics.
Returns the net in eval mode. Imported from the scripts' own folder (Python puts it on sys.path).
"""
import torch
import torch.nn as nn


def init_weights(net, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear)):
                w = m.weight
                # A transposed conv's fan-in per output: C_in / groups x the kernel taps one phase sees.
                fan_in = w[0].numel() if not isinstance(m, nn.ConvTranspose2d) else \
                    w.shape[0] * w.shape[2] * w.shape[3] / (m.stride[0] * m.stride[1]) / m.groups
                w.copy_(torch.randn(w.shape, generator=g) * (2.0 / fan_in) ** 0.5)
                if m.bias is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.05)
            elif isinstance(m, nn.BatchNorm2d):
                c = m.num_features
                m.weight.copy_(1 + 0.1 * torch.randn(c, generator=g))
                m.bias.copy_(0.1 * torch.randn(c, generator=g))
                m.running_mean.copy_(0.1 * torch.randn(c, generator=g))
                m.running_var.copy_(0.5 + torch.rand(c, generator=g))
    return net.eval()
