#!/usr/bin/env python3
"""Before/after profile of two CPU builds of `infer`, run back to back on a shared machine.

Each build is a folder holding `infer` and `libinfer.so.0` (copied out of a build tree, e.g.
`mkdir -p /tmp/before && cp build-cpu/infer build-cpu/libinfer.so* /tmp/before/`); the folder goes on
LD_LIBRARY_PATH, which takes precedence over infer's RUNPATH. Every round runs, per model and ISA level,
`infer --model M --profile-json F --runs R` once per build (the order alternating between rounds),
with OMP_WAIT_POLICY=passive and INFER_CPU_ISA=level, and sums the node medians of the profile per
group (depthwise convolutions, other convolutions by fused activation, activation nodes, squeeze_excite,
the rest). It prints the median over rounds of each build's numbers and the median (and quartiles)
of the per-round ratios before/after: on a loaded machine the paired ratio is the steadier number.
Extra infer arguments go after `--`, e.g. `-- --pass fuse_activation=off`.

  scripts/cpu-paired-profile.py --before /tmp/before --after /tmp/after --rounds 25 \
      --models /tmp/m/efficientnet_b0.fb,/tmp/m/mobilenet_v2.fb --isas avx512,avx2
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def group(node):
    if node['variant'] == 'depthwise':
        return 'conv2d depthwise'
    if node['op'] == 'conv2d':
        return 'conv2d other, ' + node['activation']
    if node['op'] in ('activation', 'squeeze_excite'):
        return node['op']
    return 'other'


def profile(folder, model, isa, runs, extra, out):
    env = dict(os.environ, OMP_WAIT_POLICY='passive', INFER_CPU_ISA=isa, LD_LIBRARY_PATH=folder)
    subprocess.run([os.path.join(folder, 'infer'), '--model', model, '--profile-json', out, '--runs', str(runs)]
                   + extra, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        d = json.load(f)
    sums = {'median run': d['total_ms'], 'sum of nodes': 0.0}
    flops = {}
    for n in d['nodes']:
        g = group(n)
        sums[g] = sums.get(g, 0.0) + n['time_ms']
        sums['sum of nodes'] += n['time_ms']
        flops[g] = flops.get(g, 0.0) + n['flops']
    return sums, flops


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--before', required=True)
    ap.add_argument('--after', required=True)
    ap.add_argument('--models', required=True, help='comma-separated .fb files')
    ap.add_argument('--isas', default='avx512,avx2')
    ap.add_argument('--rounds', type=int, default=25)
    ap.add_argument('--runs', type=int, default=30)
    ap.add_argument('extra', nargs='*', help='after --: more infer arguments')
    a = ap.parse_args()
    builds = {'before': a.before, 'after': a.after}
    res, flops = {}, {}
    load = lambda: ' '.join(open('/proc/loadavg').read().split()[:3])
    print(f'start {time.strftime("%Y-%m-%d %H:%M:%S %Z")}, load {load()}')
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            for model in a.models.split(','):
                for isa in a.isas.split(','):
                    order = ['before', 'after'] if r % 2 == 0 else ['after', 'before']
                    for which in order:
                        sums, fl = profile(builds[which], model, isa, a.runs, a.extra, os.path.join(tmp, 'p.json'))
                        for k, v in sums.items():
                            res.setdefault((model, isa, which, k), []).append(v)
                        for k, v in fl.items():
                            flops[(model, k)] = v
    print(f'end   {time.strftime("%Y-%m-%d %H:%M:%S %Z")}, load {load()}')
    for model in a.models.split(','):
        for isa in a.isas.split(','):
            print(f'== {os.path.basename(model)} {isa}: ms, median of {a.rounds} rounds (each the median of '
                  f'{a.runs} runs); ratio before/after per round: median [q1, q3]')
            keys = sorted({k[3] for k in res if k[0] == model and k[1] == isa})
            for k in keys:
                b, af = res[(model, isa, 'before', k)], res[(model, isa, 'after', k)]
                ratios = sorted(x / y for x, y in zip(b, af))
                q1, q3 = ratios[len(ratios) // 4], ratios[(3 * len(ratios)) // 4]
                mb, ma = statistics.median(b), statistics.median(af)
                line = f'  {k:28s} {mb:8.3f} -> {ma:8.3f}   x{statistics.median(ratios):5.2f} [{q1:4.2f}, {q3:4.2f}]'
                if (model, k) in flops and flops[(model, k)] > 0:
                    line += f'   GFLOP/s {flops[(model, k)] / mb / 1e6:6.1f} -> {flops[(model, k)] / ma / 1e6:6.1f}'
                print(line)
    return 0


if __name__ == '__main__':
    sys.exit(main())
